"""What a project holds before a stack's first preview: `python -m components bootstrap` declares it, once per project.

The stack cannot create these itself: its state needs a bucket before the first `pulumi login`, its secrets a key
before `pulumi stack init`, and its first preview already reads GKE's versions and an AI zone's reservation
(components/preflight.py), which needs the APIs and the AI-zones feature on. A CI deploy account may act as the node
service account only (never as the project's other accounts), which needs that account to exist before the first
`up`: it is made here and adopted by the stack (components/node_service_account.py). Everything a user keeps (the
buckets, the keys, the node service account) is retained when this program is destroyed.

With `ci` given, each stack gets its two CI accounts, each impersonable only from its GitHub environment's jobs
(`environment:preview-<stack>` and `environment:<stack>` token subjects), with the roles of docs/permissions.md.
"""

import hashlib
from dataclasses import dataclass
from typing import NotRequired, TypedDict

import pulumi
import pulumi_gcp as gcp

from components import reservation_reads
from components.component import Component
from components.model.addons.keda import METRICS_READER_ROLE
from components.model.config.cluster_settings import node_service_account_id
from components.node_service_account import NODE_ROLES, node_display_name
from components.preflight import WEIGHTS_LIST
from components.project_services import ProjectServices

PROJECT = "gke-tpu-slicing-bootstrap"
KEY_RING = "gke-tpu-slicing"
# Cloud KMS makes a new primary version every 90 days; older versions still decrypt what they encrypted
# (https://cloud.google.com/kms/docs/key-rotation), so nothing is rotated by hand.
KEY_ROTATION = "7776000s"
# What the bootstrap and the stack's first preview call (the stack's own ProjectServices enables the rest).
APIS = ("cloudkms", "cloudresourcemanager", "compute", "container", "iam", "storage")
# The one directory of the stack's state in its bucket (`pulumi login gs://<bucket>/<STATE_PREFIX>`).
STATE_PREFIX = "gke-tpu-slicing"


def state_bucket_name(project: str) -> str:
    """A state bucket name of the project's own: bucket names are global and public, so a hash, not the project ID."""
    return f"pulumi-state-{hashlib.sha256(project.encode()).hexdigest()[:20]}"


def state_url(bucket: str) -> str:
    return f"gs://{bucket}/{STATE_PREFIX}"


def secrets_provider_url(project: str, region: str, stack: str) -> str:
    """Pulumi's Cloud KMS secrets provider for `stack`'s key (https://www.pulumi.com/docs/iac/concepts/secrets/)."""
    return f"gcpkms://projects/{project}/locations/{region}/keyRings/{KEY_RING}/cryptoKeys/{stack}"


@dataclass(frozen=True)
class Grant:
    """One permission or role an account needs, on what, and the read or write of the program that needs it."""

    name: str
    on: str
    why: str


# Everything `pulumi preview` of a stack calls with its credentials: the invokes the program makes before any
# resource is registered (components/preflight.py, components/reservation_reads.py, components/serving.py) and the
# Kubernetes provider's connection. The providers' Diff calls read no API (pulumi-gcp diffs its own state; the
# Kubernetes provider diffs inputs and only dry-runs Create/Update, which a read-only account is refused and the
# provider then shows the inputs: docs/permissions.md, "What a preview cannot show"). GKE's getServerConfig (the
# versions, `gcp:container/getEngineVersions`) has no permission in GKE's API permission table, so none is granted.
PREVIEW_PERMISSIONS: tuple[Grant, ...] = (
    Grant(
        "resourcemanager.projects.get",
        "gcp:organizations/getProject:getProject",
        "the project's number, which serving's workload identity principal on the buckets names",
    ),
    Grant(
        "container.clusters.get",
        reservation_reads.TOKENS["cluster"],
        "the running control plane's version, and the sub-block each existing TPU pool is on",
    ),
    Grant(
        "container.clusters.connect",
        "pulumi:providers:kubernetes",
        "the cluster's DNS-based endpoint: the Kubernetes provider's discovery and schema reads",
    ),
    *(
        Grant(p, reservation_reads.TOKENS["subBlock"], "the reservation, its block and its sub-blocks")
        for p in reservation_reads.PERMISSIONS
    ),
)
PREVIEW_ROLE_ID = "gkeTpuSlicingPreview"
# The preview's listing of the model's snapshot, on the weights bucket alone: on the project, `storage.objects.list`
# lists every bucket's object names, the other environments' state included. The narrowest predefined role with the
# list and without `storage.objects.get` (bucket-level only; iann0036/iam-dataset@2073fa52a
# gcp/roles/storage.legacyBucketReader.json: storage.buckets.get, storage.objects.list, storage.multipartUploads.list
# and the folders' get and list).
PREVIEW_WEIGHTS = Grant(
    "roles/storage.legacyBucketReader", WEIGHTS_LIST, "the model's snapshot in the weights bucket (object names only)"
)

# The deploy account's roles on the project. Its other grants are narrower: see Bootstrap._ci.
DEPLOY_PROJECT_ROLES: tuple[Grant, ...] = (
    Grant("roles/serviceusage.serviceUsageAdmin", "project", "enables the APIs the stack uses"),
    Grant("roles/compute.admin", "project", "the network, the firewall, Cloud NAT, the workload policy, the AI zones"),
    Grant("roles/container.admin", "project", "the cluster, its pools and every Kubernetes object (RBAC included)"),
    Grant("roles/storage.admin", "project", "creates the XLA cache bucket and grants serving's access to the buckets"),
    Grant("roles/monitoring.editor", "project", "the dashboard and the alert policies"),
    Grant(
        "roles/iam.serviceAccountCreator",
        "project",
        "creates the node service account (which this bootstrap made already: the stack adopts it); it cannot act as "
        "or grant access to any account",
    ),
)
# The project roles the stack grants (the nodes', and KEDA's read of Managed Prometheus when it is on): the only
# ones its deploy account may grant or revoke (https://cloud.google.com/iam/docs/setting-limits-on-granting-roles).
GRANTABLE_PROJECT_ROLES = (*NODE_ROLES, METRICS_READER_ROLE)


def grant_limit(roles: tuple[str, ...]) -> str:
    """The IAM condition that lets a project IAM admin grant and revoke `roles` only."""
    listed = ", ".join(f"'{r}'" for r in roles)
    return f"api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', []).hasOnly([{listed}])"


class CiArgs(TypedDict):
    repository: str
    """The GitHub repository, `owner/name`, whose jobs may impersonate the CI accounts."""
    pool: str
    """The workload identity pool's resource name (`projects/<number>/locations/global/workloadIdentityPools/<id>`)."""


class BootstrapArgs(TypedDict):
    project: str
    """The project every resource below is created in."""
    region: str
    """The TPUs' region: the buckets and the key ring are kept there."""
    state_bucket: str
    """The bucket of the stacks' state (versioned)."""
    weights_bucket: NotRequired[str]
    """The model weights' bucket to create; none when it exists already (or lives elsewhere)."""
    stacks: list[str]
    """The stacks whose state lives here: one Cloud KMS key each (and, with `ci`, two accounts each)."""
    cluster_name: str
    """The stacks' cluster name, from which the node service account's ID follows."""
    ci: NotRequired[CiArgs]
    """The CI accounts' GitHub repository and workload identity pool; none: no CI accounts."""


class Bootstrap(Component):
    """The state bucket, the weights bucket, the APIs, the AI-zones feature, the stacks' keys, the node account."""

    def __init__(self, name: str, args: BootstrapArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:bootstrap:Bootstrap", name, opts)
        project, region = args["project"], args["region"]
        # The APIs and the AI-zones feature, declared as the stack declares them (it keeps them on too): the feature
        # is on before the stack's first preview reads an AI zone's reservation.
        ready = ProjectServices(f"{name}-project", {"project": project, "apis": list(APIS)}, self.child()).ready
        # What a user keeps (the buckets, the key ring, the node account) is kept on destroy.
        keep = self.child(depends_on=ready, retain_on_delete=True)
        # Both private; the state versioned (every checkpoint an update overwrites can be restored), the weights in
        # the TPUs' region (read there at every start, without inter-region transfer).
        buckets = {"state": (args["state_bucket"], {"versioning": {"enabled": True}})}
        if "weights_bucket" in args:
            buckets["weights"] = (args["weights_bucket"], {})
        self.buckets = {
            kind: gcp.storage.Bucket(
                f"{name}-{kind}",
                name=bucket,
                project=project,
                location=region,
                uniform_bucket_level_access=True,
                public_access_prevention="enforced",
                opts=keep,
                **extra,  # type: ignore[arg-type]
            )
            for kind, (bucket, extra) in buckets.items()
        }
        self.state_bucket = self.buckets["state"]
        # Key rings and key material cannot be deleted from Cloud KMS (a destroyed key loses every stack secret it
        # encrypted).
        ring = gcp.kms.KeyRing(f"{name}-keys", name=KEY_RING, project=project, location=region, opts=keep)
        self.keys = {
            stack: gcp.kms.CryptoKey(
                f"{name}-key-{stack}",
                name=stack,
                key_ring=ring.id,
                purpose="ENCRYPT_DECRYPT",
                rotation_period=KEY_ROTATION,
                opts=self.child(retain_on_delete=True),
            )
            for stack in args["stacks"]
        }
        # The stacks' node service account (the stack adopts it: `create_ignore_already_exists`), so that a CI deploy
        # account can be let act as it alone before the first `up` creates the cluster with it.
        self.node_account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            account_id=node_service_account_id(args["cluster_name"]),
            display_name=node_display_name(args["cluster_name"]),
            project=project,
            create_ignore_already_exists=True,
            opts=keep,
        )
        if "ci" in args:
            self._ci(name, args, args["ci"], ready)
        self.register_outputs({"stateBucket": self.state_bucket.name})

    def _ci(self, name: str, args: BootstrapArgs, ci: CiArgs, ready: list[pulumi.Resource]) -> None:
        project = args["project"]
        opts = self.child(depends_on=ready)
        preview_role = gcp.projects.IAMCustomRole(
            f"{name}-preview-role",
            project=project,
            role_id=PREVIEW_ROLE_ID,
            title="gke-tpu-slicing preview",
            description="What `pulumi preview` of a gke-tpu-slicing stack reads (docs/permissions.md)",
            permissions=[g.name for g in PREVIEW_PERMISSIONS],
            opts=opts,
        )
        for stack in args["stacks"]:
            # The token subject of a job in a GitHub environment (https://docs.github.com/en/actions/reference/
            # security/oidc): a job outside that environment, whatever its workflow file says, is not let in.
            for kind, environment in (("preview", f"preview-{stack}"), ("deploy", stack)):
                account = gcp.serviceaccount.Account(
                    f"{name}-{kind}-{stack}",
                    account_id=f"pulumi-{kind}-{stack}",
                    display_name=f"gke-tpu-slicing {kind} of {stack}, GitHub environment {environment}",
                    project=project,
                    opts=opts,
                )
                gcp.serviceaccount.IAMMember(
                    f"{name}-{kind}-{stack}-github",
                    service_account_id=account.name,
                    role="roles/iam.workloadIdentityUser",
                    member=f"principal://iam.googleapis.com/{ci['pool']}/subject/"
                    f"repo:{ci['repository']}:environment:{environment}",
                    opts=self.child(),
                )
                # Both decrypt the stack's secrets; only `pulumi stack init` encrypts with the key (a data key, once:
                # pulumi/pulumi pkg/secrets/cloud/manager.go), which whoever runs this does.
                gcp.kms.CryptoKeyIAMMember(
                    f"{name}-{kind}-{stack}-key",
                    crypto_key_id=self.keys[stack].id,
                    role="roles/cloudkms.cryptoKeyDecrypter",
                    member=account.member,
                    opts=self.child(),
                )
                if kind == "preview":
                    self._preview(f"{name}-{kind}-{stack}", project, account, preview_role)
                else:
                    self._deploy(f"{name}-{kind}-{stack}", project, account)

    def _preview(
        self, name: str, project: str, account: gcp.serviceaccount.Account, role: gcp.projects.IAMCustomRole
    ) -> None:
        gcp.projects.IAMMember(
            f"{name}-reads", project=project, role=role.name, member=account.member, opts=self.child()
        )
        # Reads the checkpoint only: a diy backend's preview writes nothing (docs/permissions.md, "What a preview
        # writes"). One state bucket per bootstrap run, so every stack given to it can read every other's checkpoint
        # there; each stack's secrets stay behind its own KMS key.
        gcp.storage.BucketIAMMember(
            f"{name}-state",
            bucket=self.state_bucket.name,
            role="roles/storage.objectViewer",
            member=account.member,
            opts=self.child(),
        )
        # A weights bucket made elsewhere is granted by hand (docs/permissions.md, the preview account's roles).
        if "weights" in self.buckets:
            gcp.storage.BucketIAMMember(
                f"{name}-weights",
                bucket=self.buckets["weights"].name,
                role=PREVIEW_WEIGHTS.name,
                member=account.member,
                opts=self.child(),
            )

    def _deploy(self, name: str, project: str, account: gcp.serviceaccount.Account) -> None:
        for grant in DEPLOY_PROJECT_ROLES:
            gcp.projects.IAMMember(
                f"{name}-{grant.name.rsplit('/', 1)[-1]}",
                project=project,
                role=grant.name,
                member=account.member,
                opts=self.child(),
            )
        gcp.projects.IAMMember(
            f"{name}-projectIamAdmin",
            project=project,
            role="roles/resourcemanager.projectIamAdmin",
            member=account.member,
            condition={
                "title": "only the roles the stack grants",
                "description": "the project roles the stack grants: the node account's, KEDA's metrics read",
                "expression": grant_limit(GRANTABLE_PROJECT_ROLES),
            },
            opts=self.child(),
        )
        # Acts as the node service account alone: the cluster and its pools are created with it.
        gcp.serviceaccount.IAMMember(
            f"{name}-nodes-user",
            service_account_id=self.node_account.name,
            role="roles/iam.serviceAccountUser",
            member=account.member,
            opts=self.child(),
        )
