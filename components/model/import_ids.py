"""Import ids: how each provider names an existing object for `pulumi import`, one format per resource type.

A format names the registered inputs it reads: `{project}` an input, `{metadata.name}` a nested one, and
`{cluster@name}` the `name` input of the resource the `cluster` input refers to (a node pool is given the
cluster's id, its import id names the cluster). Sources, per type:

* pulumi-gcp 10.2.0: the "## Import" section of each resource's docstring (the installed package), which
  is the terraform-provider-google import format (website/docs/r/<resource>.html.markdown); the first,
  most qualified form, which leaves nothing to the provider's defaults.
* Service accounts "can be imported using their URI" (google_service_account.html.markdown); IAM members
  "use space-delimited identifiers: the resource in question, the role, and the member identity".
* Kubernetes: pulumi-kubernetes reads an id as `namespace/name`, or `name` for a cluster-scoped object
  (parseFqName, pulumi/pulumi-kubernetes@94977969d provider/pkg/provider/util.go:103, used by Read).
"""

from __future__ import annotations

import re
from collections.abc import Callable

IMPORT_IDS = {
    "gcp:projects/service:Service": "{project}/{service}",
    "gcp:compute/previewFeature:PreviewFeature": "projects/{project}/global/previewFeatures/{name}",
    "gcp:compute/network:Network": "projects/{project}/global/networks/{name}",
    "gcp:compute/subnetwork:Subnetwork": "projects/{project}/regions/{region}/subnetworks/{name}",
    "gcp:compute/firewall:Firewall": "projects/{project}/global/firewalls/{name}",
    # by its URI, the email Google gives a user-managed account
    "gcp:serviceaccount/account:Account": (
        "projects/{project}/serviceAccounts/{accountId}@{project}.iam.gserviceaccount.com"
    ),
    "gcp:projects/iAMMember:IAMMember": "{project} {role} {member}",
    "gcp:container/cluster:Cluster": "projects/{project}/locations/{location}/clusters/{name}",
    "gcp:container/nodePool:NodePool": "{project}/{location}/{cluster@name}/{name}",
    "gcp:compute/resourcePolicy:ResourcePolicy": "projects/{project}/regions/{region}/resourcePolicies/{name}",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "b/{bucket} {role} {member}",
}
KUBERNETES_NAMESPACED = "{metadata.namespace}/{metadata.name}"
KUBERNETES_CLUSTER_SCOPED = "{metadata.name}"
_FIELD = re.compile(r"\{([\w.@]+)\}")


def import_format(type_: str, namespaced: bool = False) -> str | None:
    """The id format of a type; a Kubernetes object's by its scope; None for a type with none."""
    if type_.startswith("kubernetes:"):
        return KUBERNETES_NAMESPACED if namespaced else KUBERNETES_CLUSTER_SCOPED
    return IMPORT_IDS.get(type_)


def fields(template: str) -> list[str]:
    return _FIELD.findall(template)


def import_id(template: str, value: Callable[[str], str]) -> str:
    """The template with each field replaced by `value(field)`."""
    return _FIELD.sub(lambda m: value(m.group(1)), template)
