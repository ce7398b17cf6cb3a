"""The prefill/decode disaggregated serving stack: llm-d router, GKE Gateway and vLLM on TPU slices.

The model servers are built in `components.vllm_leaderworkersets`, the router's values in `components.llmd_router`;
this component declares them with the Gateway, the buckets' IAM (read on the weights, write on the stack's own XLA
cache bucket) and the HF token Secret, from its args (components/graph_args.py serving_args builds them).
"""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.component import Component
from components.kubernetes_object import KubernetesObject
from components.llmd_router import RouterArgs, router_values
from components.model.commands import verify_command
from components.network_policies import ServingNetwork, serving_policies
from components.vllm_containers import HF_SECRET, ROLES, ModelServerArgs
from components.vllm_leaderworkersets import (
    LWS_API,
    ServingRoleArgs,
    delete_timeouts,
    hf_token_secret,
    leader_worker_set,
    leaders_ready,
    lws_object_name,
    lws_revision,
)
from components.weights_download_job import NAMESPACE as WEIGHTS_NAMESPACE
from components.weights_download_job import WRITER_KSA, WeightsDownload, WeightsDownloadArgs

__all__ = ["HF_SECRET", "Serving"]

GATEWAY_API = "gateway.networking.k8s.io/v1"
FUSE_KSA = "gcs-fuse-ksa"
# The weights are read only: objectViewer reads and lists objects, it cannot write or delete them
# (https://cloud.google.com/storage/docs/access-control/iam-roles). The XLA compilation cache is the one place the
# pods write, a bucket of the stack's own: objectUser there (create, read, overwrite, delete objects) and nowhere else.
# An IAM condition on a prefix of the weights bucket would need uniform bucket-level access on a bucket this program
# does not own (https://cloud.google.com/storage/docs/access-control/using-iam-permissions#conditions).
WEIGHTS_ROLES = ("roles/storage.bucketViewer", "roles/storage.objectViewer")
CACHE_ROLES = ("roles/storage.bucketViewer", "roles/storage.objectUser")


def role_suffix(role: str) -> str:
    return role.rsplit(".", 1)[-1].lower()


def workload_identity_principal(
    workload_pool: str, number: pulumi.Input[str], namespace: pulumi.Input[str], ksa: pulumi.Input[str]
) -> pulumi.Output[str]:
    return pulumi.Output.concat(
        "principal://iam.googleapis.com/projects/",
        number,
        f"/locations/global/workloadIdentityPools/{workload_pool}/subject/ns/",
        namespace,
        "/sa/",
        ksa,
    )


def xla_cache_bucket(
    name: str, bucket: str, project: str, region: str, cluster_name: str, opts: pulumi.ResourceOptions
) -> gcp.storage.Bucket:
    """The bucket of vLLM's XLA compilation cache, owned by the stack.

    `name`, `location` and `project` are ForceNew (model/diff/gcp_force_new.py); the rest updates in place. Its
    name is fixed, so a replacement deletes first. `location` is sent as the API stores it (model/diff/readback.py).
    On `destroy` (or a replacement) the cache's objects are deleted with it (`force_destroy`): they are compiled
    programs vLLM rebuilds on its next start, and without it the delete fails on a non-empty bucket. The soft-delete
    window is off for the same reason: keeping deleted cache entries for 7 days would only be billed
    (https://cloud.google.com/storage/docs/soft-delete#disable).
    """
    return gcp.storage.Bucket(
        name,
        name=bucket,
        project=project,
        # Next to the TPUs: the cache is read at every vLLM start.
        location=region.upper(),
        storage_class="STANDARD",
        # IAM only (no ACLs) and never public (https://cloud.google.com/storage/docs/uniform-bucket-level-access,
        # https://cloud.google.com/storage/docs/public-access-prevention).
        uniform_bucket_level_access=True,
        public_access_prevention="enforced",
        soft_delete_policy={"retention_duration_seconds": 0},
        force_destroy=True,
        labels={"gke-tpu-slicing": "xla-cache", "cluster": cluster_name},
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True)),
    )


class WeightsDownloadSpec(TypedDict):
    model: str
    """The Hugging Face model (repo[@revision]) the Job downloads into the weights bucket."""
    image: str
    """The Job's image (a Python one)."""
    system_pool: str
    """The system node pool the Job runs on."""


class ServingArgs(TypedDict):
    project: str
    """The project of the XLA cache bucket, whose number names the pods' Workload Identity principal."""
    region: str
    """The cache bucket's location, next to the TPUs."""
    cluster_name: str
    """The cluster the cache bucket belongs to (its `cluster` label)."""
    workload_pool: str
    """The cluster's Workload Identity pool (`<project>.svc.id.goog`)."""
    namespace: pulumi.Input[str]
    """The workload namespace, where every serving object goes."""
    model_server: ModelServerArgs
    """The vLLM pods' model, image, flags and budgets, shared by both roles."""
    roles: dict[str, ServingRoleArgs]
    """Each role's LeaderWorkerSet (prefill, decode)."""
    gateway_name: str
    """The Gateway's name."""
    gateway_class: str
    """The Gateway's GKE class."""
    router: RouterArgs
    """llm-d's router chart and its endpoint picker."""
    weights_download: NotRequired[WeightsDownloadSpec]
    """The opt-in Job that fills the weights bucket; none: the bucket is filled already."""
    hf_token: NotRequired[pulumi.Input[str]]
    """The Hugging Face token (a secret); none: no token Secret."""
    credentials_command: str
    """The command that points kubectl at the cluster (part of the verify command)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    kueue: k8s.helm.v4.Chart
    """Kueue's chart: the router's picker runs in the Kueue-managed namespace, whose pod webhook fails closed."""
    inference_extension: k8s.yaml.v2.ConfigGroup
    """The Inference Extension's CRDs, which the router chart's InferencePool needs."""
    proxy_subnet: gcp.compute.Subnetwork
    """The proxy-only subnet the Gateway's load balancer proxies live in."""
    network: ServingNetwork
    """Who may reach the model servers and the picker: the load balancer's ranges, the picker, the collectors."""
    model_servers_wait_for: list[Any]
    """What the LeaderWorkerSets wait for besides the buckets' IAM and the download: the LWS controller, the Kueue
    objects, the TPU pools and their teardown gates (of this program's own types, which a schema cannot name)."""
    project_api: NotRequired[gcp.projects.Service]
    """The Cloud Resource Manager API the project number lookup waits for."""
    storage_api: NotRequired[gcp.projects.Service]
    """The Cloud Storage API the cache bucket waits for."""


class Serving(Component):
    """Namespace-scoped serving objects, the weights bucket's IAM, the Gateway, the router and the two LWS."""

    def __init__(self, name: str, args: ServingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:serving:Serving", name, opts)
        provider, model, namespace = args["provider"], args["model_server"], args["namespace"]
        in_cluster = self.child(provider=provider)
        token = args.get("hf_token")
        self.hf_secret = hf_token_secret(name, token, namespace, in_cluster)
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-gcs-fuse-ksa", metadata={"name": FUSE_KSA, "namespace": namespace}, opts=in_cluster
        )
        # The project number is looked up, not asked for: workload identity principals need it.
        # In a brand-new project the lookup must wait for the Cloud Resource Manager API (`project_api`).
        project_api, storage_api = args.get("project_api"), args.get("storage_api")
        number = gcp.organizations.get_project_output(
            project_id=args["project"],
            opts=pulumi.InvokeOutputOptions(depends_on=[project_api] if project_api else None),
        ).number
        pool = args["workload_pool"]
        principal = workload_identity_principal(pool, number, namespace, self.service_account.metadata.name)
        self.xla_cache = xla_cache_bucket(
            f"{name}-xla-cache",
            model["xla_cache_bucket"],
            args["project"],
            args["region"],
            args["cluster_name"],
            self.child(depends_on=[storage_api] if storage_api is not None else []),
        )
        # `bucket`, `role`, `member` and `condition` are ForceNew (model/diff/gcp_force_new.py): a new bucket or role
        # is a new member, then the old binding is removed.
        buckets = (("weights", model["weights_bucket"], WEIGHTS_ROLES), ("xla-cache", self.xla_cache.name, CACHE_ROLES))
        self.bucket_iam = [
            gcp.storage.BucketIAMMember(
                f"{name}-{what}-{role_suffix(role)}", bucket=bucket, role=role, member=principal, opts=self.child()
            )
            for what, bucket, bucket_roles in buckets
            for role in bucket_roles
        ]
        # gke-l7-rilb is a regional internal load balancer: its proxies live in the proxy-only subnet.
        # Routes from this namespace only: the router chart's HTTPRoute is released here, and with `All` anyone who
        # may create an HTTPRoute in any namespace could attach a path to the model's load balancer (Gateway API
        # v1.4.1 gateways CRD, `allowedRoutes.namespaces.from`: "Same: Only Routes in the same namespace may be used").
        self.gateway = KubernetesObject(
            f"{name}-gateway",
            {
                "apiVersion": GATEWAY_API,
                "kind": "Gateway",
                "metadata": {"name": args["gateway_name"], "namespace": namespace},
                "spec": {
                    "gatewayClassName": args["gateway_class"],
                    "listeners": [
                        {
                            "name": "default",
                            "port": 80,
                            "protocol": "HTTP",
                            "allowedRoutes": {"namespaces": {"from": "Same"}},
                        }
                    ],
                },
            },
            self.child(provider=provider, depends_on=[args["proxy_subnet"]]),
        )
        # Who may reach serving's pods, by their role and index labels (components/network_policies.py).
        self.network_policies = {
            key: KubernetesObject(f"{name}-{key.removeprefix(model['guide'] + '-')}-ingress", manifest, in_cluster)
            for key, manifest in serving_policies(model, args["network"], namespace).items()
        }
        router, guide = args["router"], model["guide"]
        self.router_values = router_values(router, guide, self.gateway.object_name)
        # Release name = guide name; the chart's InferencePool needs the inference extension's CRDs. The picker runs
        # in the Kueue-managed namespace, where Kueue's pod webhook fails closed
        # (components/model/addons/kueue_config.py): until Kueue serves it, the API server refuses the picker's pods, so
        # the chart waits for Kueue's chart.
        self.router = k8s.helm.v4.Chart(
            f"{name}-router",
            name=guide,
            chart=router["chart"],
            version=router["version"],
            namespace=namespace,
            values=self.router_values,
            skip_await=False,
            opts=self.child(
                providers=[provider], depends_on=[args["inference_extension"], self.gateway, args["kueue"]]
            ),
        )
        # Opt-in: a Job fills the weights bucket, with write access of its own; the serving pods wait for it.
        self.weights_download = None
        spec = args.get("weights_download")
        if spec is not None:
            download = WeightsDownloadArgs(
                bucket=model["weights_bucket"],
                model=spec["model"],
                model_path=model["model_path"],
                image=spec["image"],
                system_pool=spec["system_pool"],
                principal=workload_identity_principal(pool, number, WEIGHTS_NAMESPACE, WRITER_KSA),
                provider=provider,
            )
            if token is not None:
                download["hf_token"] = token
            self.weights_download = WeightsDownload(f"{name}-weights", download, self.child())
        filled = [self.weights_download.job] if self.weights_download else []
        before_pods = [*args["model_servers_wait_for"], *self.bucket_iam, *filled]
        self.model_servers_wait_for = before_pods  # what every model server waits for, burst slots too
        # A change of a role's pod shape, replicas, priority or queue renames its LWS
        # (components/model/serving/rollout.py), and a renamed object is a replacement. With room for new groups beside
        # the old ones, Pulumi creates the new LWS, waits (its leaders-ready patch, below) until `wait_for` of its
        # groups are ready, and deletes the old one only at the end of the
        # update (replaced resources are deleted after every create, pulumi/pulumi#9979), so the role never drops
        # to zero ready leaders. Without room the old one must go first (the plan warns about it).
        # Each role's `create_first` and `wait_for` come from the stack's one plan (components/graph_args.py): a plan
        # of its own here would count a cube whose sub-block turned bad and create-first into room that is not
        # there, so the wait would run out with the old set still up, while the printed plan said delete-first.
        roles = args["roles"]
        self.lws = {
            role.name: KubernetesObject(
                f"{name}-{role.name}",
                leader_worker_set(
                    model,
                    role,
                    roles[role.name],
                    namespace=namespace,
                    service_account=self.service_account.metadata.name,
                    hf_secret=self.hf_secret.metadata.name if self.hf_secret else None,
                ),
                self.child(
                    provider=provider,
                    depends_on=before_pods,
                    delete_before_replace=not roles[role.name]["create_first"],
                    custom_timeouts=delete_timeouts(model["termination_grace_period_seconds"]),
                ),
            )
            for role in ROLES.values()
        }
        # The wait for a new LWS's ready groups, once: a patch per revision, created after its LWS and never updated
        # (components/model/serving/rollout.py SKIP_AWAIT_ANNOTATION). Its annotations are ignored after the create, so
        # a later change of the room the plan counts (another workload's change) does not update it into a new wait.
        self.leaders_ready = {
            role: k8s.apiextensions.CustomResourcePatch(
                f"{name}-{role}-ready-{lws_revision(model, role, roles[role])}",
                api_version=LWS_API,
                kind="LeaderWorkerSet",
                metadata=leaders_ready(
                    model["startup_timeout_seconds"], lws.object_name, namespace, roles[role]["wait_for"]
                ),
                opts=self.child(provider=provider, depends_on=[lws], ignore_changes=["metadata.annotations"]),
            )
            for role, lws in self.lws.items()
        }
        # Each role's current LeaderWorkerSet by name: the no-ready-leader alerts tell a new set from a ready one.
        self.lws_names = {role: lws_object_name(model, role, roles[role]) for role in self.lws}
        # The chart names the InferencePool after the release; every replica's leader serves.
        self.pool_name = guide
        self.leaders = sum(spec["replicas"] for spec in roles.values())
        self.credentials_command = args["credentials_command"]
        self.verify_command = pulumi.Output.all(self.gateway.object_name, namespace).apply(
            lambda a: verify_command(
                a[0],
                a[1],
                model["model_served"],
                pool=self.pool_name,
                leaders=self.leaders,
                timeout=model["startup_timeout_seconds"],
                credentials=self.credentials_command,
            )
        )
        self.register_outputs(
            {
                "gatewayName": self.gateway.object_name,
                "gatewayNamespace": namespace,
                "servedModelName": model["model_served"],
                "leaderWorkerSets": [lws.object_name for lws in self.lws.values()],
                "inferencePool": self.pool_name,
                "servingLeaders": self.leaders,
                "verifyCommand": self.verify_command,
            }
        )
