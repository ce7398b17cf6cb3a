"""The prefill/decode disaggregated serving stack: llm-d router, GKE Gateway and vLLM on TPU slices (SPEC 9).

The model servers are built in `components.modelserver`, the router's values in `components.router`;
this component declares them with the Gateway, the weights bucket's IAM and the HF token Secret.
`leader_selector`, `metrics_port` and METRICS_PATH (re-exported here) say which pods serve and where
they expose metrics.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.base import Component
from components.model.commands import verify_command
from components.model.settings import Settings
from components.modelserver import (
    HF_SECRET,
    HF_SECRET_KEY,
    METRICS_PATH,
    ROLES,
    SIDECAR_IDLE_CONN_TIMEOUT_S,
    VLLM_POD,
    leader_selector,
    leader_worker_set,
    metrics_port,
)
from components.objects import KubernetesObject
from components.queues import SliceQueues
from components.router import router_values

__all__ = [
    "METRICS_PATH",
    "SIDECAR_IDLE_CONN_TIMEOUT_S",
    "VLLM_POD",
    "Serving",
    "leader_selector",
    "metrics_port",
    "router_values",
]

GATEWAY_API = "gateway.networking.k8s.io/v1"
FUSE_KSA = "gcs-fuse-ksa"
BUCKET_ROLES = ("roles/storage.bucketViewer", "roles/storage.objectUser")


def workload_identity_principal(
    settings: Settings, number: pulumi.Input[str], namespace: pulumi.Input[str], ksa: pulumi.Input[str]
) -> pulumi.Output[str]:
    return pulumi.Output.concat(
        "principal://iam.googleapis.com/projects/",
        number,
        f"/locations/global/workloadIdentityPools/{settings.workload_pool}/subject/ns/",
        namespace,
        "/sa/",
        ksa,
    )


class Serving(Component):
    """Namespace-scoped serving objects, the weights bucket's IAM, the Gateway, the router and the two LWS."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        *,
        provider: k8s.Provider,
        queues: SliceQueues,
        lws: pulumi.Resource,
        inference_extension: pulumi.Resource,
        proxy_subnet: pulumi.Resource,
        pools: list[pulumi.Resource],
        project_api: pulumi.Resource | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gke-tpu-slicing:serving:Serving", name, opts)
        s = settings.serving
        namespace = queues.namespace.metadata.name
        in_cluster = self.child(provider=provider)

        self.hf_secret = None
        if settings.hf_token is not None:
            self.hf_secret = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata={"name": HF_SECRET, "namespace": namespace},
                string_data={HF_SECRET_KEY: pulumi.Output.secret(settings.hf_token.get_secret_value())},
                opts=in_cluster,
            )
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-gcs-fuse-ksa", metadata={"name": FUSE_KSA, "namespace": namespace}, opts=in_cluster
        )
        # The project number is looked up, not asked for: workload identity principals need it.
        # In a brand-new project the lookup must wait for the Cloud Resource Manager API (`project_api`).
        number = gcp.organizations.get_project_output(
            project_id=settings.project,
            opts=pulumi.InvokeOutputOptions(depends_on=[project_api] if project_api else None),
        ).number
        principal = workload_identity_principal(settings, number, namespace, self.service_account.metadata.name)
        self.bucket_iam = [
            gcp.storage.BucketIAMMember(
                f"{name}-weights-{role.rsplit('.', 1)[-1].lower()}",
                bucket=s.weights_bucket,
                role=role,
                member=principal,
                opts=self.child(),
            )
            for role in BUCKET_ROLES
        ]
        # gke-l7-rilb is a regional internal load balancer: its proxies live in the proxy-only subnet.
        self.gateway = KubernetesObject(
            f"{name}-gateway",
            {
                "apiVersion": GATEWAY_API,
                "kind": "Gateway",
                "metadata": {"name": s.gateway.name, "namespace": namespace},
                "spec": {
                    "gatewayClassName": s.gateway.class_name,
                    "listeners": [
                        {
                            "name": "default",
                            "port": 80,
                            "protocol": "HTTP",
                            "allowedRoutes": {"namespaces": {"from": "All"}},
                        }
                    ],
                },
            },
            self.child(provider=provider, depends_on=[proxy_subnet]),
        )
        self.router_values = router_values(settings, self.gateway.object_name)
        # Release name = guide name; the chart's InferencePool needs the inference extension's CRDs.
        self.router = k8s.helm.v4.Chart(
            f"{name}-router",
            name=s.guide,
            chart=s.router.chart,
            version=s.router.version,
            namespace=namespace,
            values=self.router_values,
            skip_await=False,
            opts=self.child(providers=[provider], depends_on=[inference_extension, self.gateway]),
        )
        before_pods = [lws, *queues.objects, *pools, *self.bucket_iam]
        self.lws = {
            role.name: KubernetesObject(
                f"{name}-{role.name}",
                leader_worker_set(
                    settings,
                    role,
                    namespace=namespace,
                    queue_labels=queues.admission_labels(s.roles()[role.name].priority),
                    service_account=self.service_account.metadata.name,
                    hf_secret=self.hf_secret.metadata.name if self.hf_secret else None,
                ),
                self.child(provider=provider, depends_on=before_pods),
            )
            for role in ROLES.values()
        }
        # The chart names the InferencePool after the release; every replica's leader serves.
        self.pool_name = s.guide
        self.leaders = sum(role.replicas for role in s.roles().values())
        self.verify_command = pulumi.Output.all(self.gateway.object_name, namespace).apply(
            lambda a: verify_command(
                a[0], a[1], s.model_served, pool=self.pool_name, leaders=self.leaders, timeout=s.startup_timeout_seconds
            )
        )
        self.register_outputs(
            {
                "gatewayName": self.gateway.object_name,
                "gatewayNamespace": namespace,
                "servedModelName": s.model_served,
                "leaderWorkerSets": [lws.object_name for lws in self.lws.values()],
                "inferencePool": self.pool_name,
                "servingLeaders": self.leaders,
                "verifyCommand": self.verify_command,
            }
        )
