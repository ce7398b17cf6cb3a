"""Import ids: how each provider names an existing object for `pulumi import` (pure functions, no Pulumi).

One function per resource type, in the provider's documented import format, so a test can feed it the
documented placeholders and get the documented template back. Sources, per type:

* pulumi-gcp 10.2.0: the "## Import" section of each resource's docstring (the installed package), which
  is the terraform-provider-google import format (website/docs/r/<resource>.html.markdown).
* IAM members: terraform-provider-google's IAM docs, "IAM member imports use space-delimited
  identifiers: the resource in question, the role, and the member identity".
* Kubernetes: pulumi-kubernetes reads an id as `namespace/name`, or `name` for a cluster-scoped object
  (ParseFqName / FqName in pulumi/pulumi-kubernetes provider/pkg/clients).
"""

from __future__ import annotations


def project_service(*, project: str, service: str) -> str:
    """gcp:projects/service:Service: `{{project_id}}/{{service}}`."""
    return f"{project}/{service}"


def preview_feature(*, project: str, name: str) -> str:
    """gcp:compute/previewFeature:PreviewFeature: `projects/{{project}}/global/previewFeatures/{{name}}`."""
    return f"projects/{project}/global/previewFeatures/{name}"


def network(*, project: str, name: str) -> str:
    """gcp:compute/network:Network: `projects/{{project}}/global/networks/{{name}}`."""
    return f"projects/{project}/global/networks/{name}"


def subnetwork(*, project: str, region: str, name: str) -> str:
    """gcp:compute/subnetwork:Subnetwork: `projects/{{project}}/regions/{{region}}/subnetworks/{{name}}`."""
    return f"projects/{project}/regions/{region}/subnetworks/{name}"


def firewall(*, project: str, name: str) -> str:
    """gcp:compute/firewall:Firewall: `projects/{{project}}/global/firewalls/{{name}}`."""
    return f"projects/{project}/global/firewalls/{name}"


def service_account_email(*, project: str, account_id: str) -> str:
    """The address Google gives a user-managed service account."""
    return f"{account_id}@{project}.iam.gserviceaccount.com"


def service_account(*, project: str, email: str) -> str:
    """gcp:serviceaccount/account:Account, by its URI: `projects/{{project}}/serviceAccounts/{{email}}`."""
    return f"projects/{project}/serviceAccounts/{email}"


def project_iam_member(*, project: str, role: str, member: str) -> str:
    """gcp:projects/iAMMember:IAMMember: `"{{project_id}} {{role}} {{member}}"`, space-delimited."""
    return f"{project} {role} {member}"


def cluster(*, project: str, location: str, name: str) -> str:
    """gcp:container/cluster:Cluster: `projects/{{project_id}}/locations/{{location}}/clusters/{{cluster_id}}`."""
    return f"projects/{project}/locations/{location}/clusters/{name}"


def node_pool(*, project: str, location: str, cluster: str, name: str) -> str:
    """gcp:container/nodePool:NodePool: `{{project_id}}/{{location}}/{{cluster_id}}/{{pool_id}}`."""
    return f"{project}/{location}/{cluster}/{name}"


def resource_policy(*, project: str, region: str, name: str) -> str:
    """gcp:compute/resourcePolicy:ResourcePolicy:
    `projects/{{project}}/regions/{{region}}/resourcePolicies/{{name}}`."""
    return f"projects/{project}/regions/{region}/resourcePolicies/{name}"


def bucket_iam_member(*, bucket: str, role: str, member: str) -> str:
    """gcp:storage/bucketIAMMember:BucketIAMMember: `"b/{{bucket}} {{role}} {{member}}"`, space-delimited."""
    return f"b/{bucket} {role} {member}"


def workload_identity_principal(*, project_number: str, workload_pool: str, namespace: str, ksa: str) -> str:
    """The IAM principal of a Kubernetes service account under GKE workload identity federation."""
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/"
        f"workloadIdentityPools/{workload_pool}/subject/ns/{namespace}/sa/{ksa}"
    )


def kubernetes_object(*, name: str, namespace: str | None = None) -> str:
    """Any Kubernetes object: `namespace/name`, or `name` when the kind is cluster-scoped."""
    return f"{namespace}/{name}" if namespace else name
