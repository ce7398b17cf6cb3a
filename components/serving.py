"""The prefill/decode disaggregated serving stack: llm-d router, GKE Gateway and vLLM on TPU slices (SPEC 9).

Prefill and decode LeaderWorkerSets come from one builder, `leader_worker_set`, and differ only
where a `Role` says so (KV role, vLLM port, the decode side's routing sidecar). Group size and the
tensor-parallel size derive from the slice topology.
"""

from __future__ import annotations

import copy
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import yaml

from components.base import Component
from components.cli import verify
from components.model.settings import Settings
from components.objects import KubernetesObject
from components.queues import ACCELERATOR_LABEL, TPU_RESOURCE, SliceQueues
from components.workloads import SLICE_TOPOLOGY_ANNOTATION

LWS_API = "leaderworkerset.x-k8s.io/v1"
GATEWAY_API = "gateway.networking.k8s.io/v1"
VLLM_POD = Path(__file__).resolve().parent.parent / "manifests" / "vllm-pod.yaml"
HF_SECRET = "llm-d-hf-token"
HF_SECRET_KEY = "HF_TOKEN"
FUSE_KSA = "gcs-fuse-ksa"
BUCKET_ROLES = ("roles/storage.bucketViewer", "roles/storage.objectUser")
EXCLUSIVE_TOPOLOGY = {"leaderworkerset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-tpu-slice"}
# The router selects model servers by port 8000: prefill serves there, decode's sidecar proxies it.
ROUTER_PORT = 8000
KV_TRANSFER_PORT = 9100
SIDE_CHANNEL_PORT = 9600
KV_CONNECTOR = {
    "kv_connector": "TPUConnectorHMA",
    "kv_connector_module_path": "tpu_inference.distributed.tpu_connector_hma",
}


@dataclass(frozen=True)
class Role:
    """What makes prefill and decode different; everything else comes from the shared builder."""

    name: str
    kv_role: str
    vllm_port: int
    vllm_port_name: str
    routing_sidecar: bool


ROLES = {
    "prefill": Role("prefill", "kv_producer", ROUTER_PORT, "modelserver", routing_sidecar=False),
    # Decode sits behind llm-d's routing sidecar, which takes the router's port and moves vLLM aside.
    "decode": Role("decode", "kv_consumer", 8200, "vllm", routing_sidecar=True),
}


def model_labels(settings: Settings, role: str) -> dict[str, str]:
    return {
        "llm-d.ai/guide": settings.serving.guide,
        "llm-d.ai/model": settings.model_label,
        "llm-d.ai/role": role,
        "inference.networking.k8s.io/engine-type": "vllm",
    }


def vllm_command(settings: Settings, role: Role, script: str) -> str:
    s = settings.serving
    flags = [
        f"--model=gs://{s.weights_bucket}/{s.model_path}",
        "--load-format=runai_streamer",
        f"--served-model-name={s.model_served}",
        f"--max-model-len={s.max_model_len}",
        f"--max-num-batched-tokens={s.max_num_batched_tokens}",
        f"--max-num-seqs={s.max_num_seqs}",
        f"--tensor-parallel-size={settings.serving_slice(role.name).tensorcores}",
        "--language-model-only",
        "--limit-mm-per-prompt",
        json.dumps({"image": 0, "video": 0}),
        f"--kv-cache-dtype={s.kv_cache_dtype}",
        *(["--enable-expert-parallel"] if s.enable_expert_parallel else []),
        "--no-disable-hybrid-kv-cache-manager",
        "--kv-transfer-config",
        json.dumps({**KV_CONNECTOR, "kv_role": role.kv_role}, separators=(",", ":")),
        f"--port={role.vllm_port}",
        "--disable-access-log-for-endpoints=/health,/metrics,/v1/models",
    ]
    return script + " ".join(["vllm", "serve", *(shlex.quote(f) for f in flags)]) + "\n"


def env(settings: Settings, common: dict[str, str], hf_secret: pulumi.Input[str] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if hf_secret is not None:
        out.append({"name": HF_SECRET_KEY, "valueFrom": {"secretKeyRef": {"name": hf_secret, "key": HF_SECRET_KEY}}})
    out += [{"name": k, "value": v} for k, v in common.items()]
    out += [
        {"name": "TPU_SIDE_CHANNEL_PORT", "value": str(SIDE_CHANNEL_PORT)},
        {"name": "TPU_KV_TRANSFER_PORT", "value": str(KV_TRANSFER_PORT)},
        {"name": "VLLM_XLA_CACHE_PATH", "value": f"gs://{settings.serving.weights_bucket}/xla_cache"},
    ]
    return out


def leader_worker_set(
    settings: Settings,
    role: Role,
    *,
    namespace: pulumi.Input[str],
    queue_labels: dict[str, pulumi.Input[str]],
    service_account: pulumi.Input[str],
    hf_secret: pulumi.Input[str] | None,
) -> dict[str, Any]:
    """The LeaderWorkerSet of one role: `replicas` groups, each one slice of `topology`."""
    spec = settings.serving.roles()[role.name]
    slice_ = settings.serving_slice(role.name)
    shared = yaml.safe_load(VLLM_POD.read_text())
    labels = model_labels(settings, role.name)
    # requests = limits: the whole VM's chips, and the CPU and memory of the role.
    amounts = {TPU_RESOURCE: str(slice_.chips_per_pod), **spec.resources.model_dump(exclude_none=True)}
    resources = {"limits": dict(amounts), "requests": dict(amounts)}
    shared["spec"]["volumes"][1]["csi"]["volumeAttributes"]["bucketName"] = settings.serving.weights_bucket
    container_env = env(settings, shared["env"], hf_secret)
    transfer_ports = [
        {"containerPort": KV_TRANSFER_PORT, "name": "tpu-kv-transfer"},
        {"containerPort": SIDE_CHANNEL_PORT, "name": "tpu-pd-coord"},
    ]

    def pod(container: dict[str, Any], init: list[dict[str, Any]]) -> dict[str, Any]:
        common = copy.deepcopy(shared["spec"])
        pod_spec = {
            "serviceAccountName": service_account,
            "nodeSelector": {ACCELERATOR_LABEL: slice_.cube.system.accelerator},
            "tolerations": common["tolerations"],
            **({"initContainers": init} if init else {}),
            "containers": [container],
            "volumes": common["volumes"],
        }
        return {
            "metadata": {
                "labels": dict(labels),
                "annotations": {SLICE_TOPOLOGY_ANNOTATION: str(slice_.topology), "gke-gcsfuse/volumes": "true"},
            },
            "spec": pod_spec,
        }

    leader = {
        "name": "vllm-leader",
        "image": settings.serving.image,
        "imagePullPolicy": "IfNotPresent",
        "env": container_env,
        "command": ["sh", "-c", vllm_command(settings, role, shared["leaderScript"])],
        "resources": copy.deepcopy(resources),
        "ports": [{"containerPort": role.vllm_port, "name": role.vllm_port_name}, *transfer_ports],
        "volumeMounts": copy.deepcopy(shared["volumeMounts"]),
    }
    worker = {
        "name": "vllm-worker",
        "image": settings.serving.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", shared["workerScript"]],
        "resources": copy.deepcopy(resources),
        "env": container_env,
        "ports": copy.deepcopy(transfer_ports),
        "volumeMounts": copy.deepcopy(shared["volumeMounts"]),
    }
    sidecar = [
        {
            "name": "routing-proxy",
            "image": settings.serving.routing_sidecar.image,
            "imagePullPolicy": "Always",
            "args": [
                f"--port={ROUTER_PORT}",
                f"--vllm-port={role.vllm_port}",
                "--connector=nixlv2",
                "--zap-log-level=1",
                "--secure-proxy=false",
            ],
            "ports": [{"containerPort": ROUTER_PORT, "name": "modelserver", "protocol": "TCP"}],
            "resources": {},
            # A native sidecar: an init container that keeps running beside vLLM.
            "restartPolicy": "Always",
            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
        }
    ]
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": settings.lws_name(role.name),
            "namespace": namespace,
            "annotations": dict(EXCLUSIVE_TOPOLOGY),
            "labels": {**labels, **queue_labels},
        },
        "spec": {
            "replicas": spec.replicas,
            "leaderWorkerTemplate": {
                # One LWS group = one slice = one pod per TPU VM of the slice.
                "size": slice_.vms,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod(leader, sidecar if role.routing_sidecar else []),
                "workerTemplate": pod(worker, []),
            },
        },
    }


def router_values(settings: Settings, gateway_name: pulumi.Input[str]) -> dict[str, Any]:
    """llm-d's router base values + httproute-flags + the pd-disaggregation guide values, as one dict."""
    s = settings.serving
    pd_config = {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "disagg-headers-handler"},
            {"type": "always-disagg-pd-decider"},
            {"type": "disagg-profile-handler", "parameters": {"deciderPluginName": "always-disagg-pd-decider"}},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "prefix-cache-scorer"},
            {"type": "queue-scorer"},
            {"type": "kv-cache-utilization-scorer"},
            {"type": "active-request-scorer"},
        ],
        "schedulingProfiles": [
            {
                "name": "prefill",
                "plugins": [
                    {"pluginRef": "prefill-filter"},
                    {"pluginRef": "prefix-cache-scorer", "weight": 3},
                    {"pluginRef": "queue-scorer", "weight": 2},
                    {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
                ],
            },
            {
                "name": "decode",
                "plugins": [
                    {"pluginRef": "decode-filter"},
                    {"pluginRef": "active-request-scorer", "weight": 2},
                    {"pluginRef": "prefix-cache-scorer", "weight": 3},
                ],
            },
        ],
    }
    return {
        "provider": {"name": "gke"},
        "httpRoute": {"create": True, "inferenceGatewayName": gateway_name, "requestTimeout": "0s"},
        "router": {
            "extraServicePorts": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8081}],
            "epp": {
                "replicas": 1,
                "flags": {"v": 2},
                "pluginsConfigFile": "pd-config.yaml",
                "pluginsCustomConfig": {"pd-config.yaml": yaml.safe_dump(pd_config, sort_keys=False)},
                "resources": s.router.epp_resources.manifest(),
            },
            "inferencePool": {"failureMode": "FailOpen"},
            "modelServers": {"protocol": "http", "matchLabels": {"llm-d.ai/guide": s.guide}},
            "proxy": {
                # llm-d's base values: warn-level logs and 8 workers instead of Envoy's trace/all-cores defaults.
                "args": [
                    "--service-node",
                    "envoy-sidecar",
                    "--log-level",
                    "warn",
                    "--concurrency",
                    "8",
                    "--drain-strategy",
                    "immediate",
                    "--drain-time-s",
                    "60",
                    "-c",
                    "/etc/envoy/envoy.yaml",
                ],
                "resources": s.router.proxy_resources.manifest(),
            },
            "tracing": {
                "otelExporterEndpoint": "http://localhost:4317",
                "sampling": {"sampler": "parentbased_traceidratio", "samplerArg": "0.1"},
            },
        },
    }


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
        self.verify_command = pulumi.Output.all(self.gateway.object_name, namespace).apply(
            lambda a: verify.command(a[0], a[1], s.model_served)
        )
        self.register_outputs(
            {
                "gatewayName": self.gateway.object_name,
                "gatewayNamespace": namespace,
                "servedModelName": s.model_served,
                "leaderWorkerSets": [lws.object_name for lws in self.lws.values()],
                "verifyCommand": self.verify_command,
            }
        )
