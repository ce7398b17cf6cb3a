"""The prefill/decode disaggregated serving stack: llm-d router, GKE Gateway and vLLM on TPU slices (SPEC 9).

Prefill and decode LeaderWorkerSets come from one builder, `leader_worker_set`, and differ only
where a `Role` says so (KV role, vLLM port, the decode side's routing sidecar, prefill's keep-alive).
Group size and the tensor-parallel size derive from the slice topology.

Only leaders serve: they run vLLM's API server, the workers only Ray. `leader_selector` is the one
definition of "a pod that serves", used by the InferencePool and by anything else that must find
the model servers (metrics scraping: `leader_selector` plus `metrics_port`).
"""

from __future__ import annotations

import copy
import json
import re
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
from components.queues import ACCELERATOR_LABEL, TPU_RESOURCE, SliceQueues, healthy_partition_selector
from components.workloads import SLICE_TOPOLOGY_ANNOTATION

LWS_API = "leaderworkerset.x-k8s.io/v1"
# LWS labels every pod with its index in the group; the leader is 0 (sigs.k8s.io/lws api/leaderworkerset/v1
# WorkerIndexLabelKey). The templates cannot carry it: LWS sets it per pod.
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LEADER_INDEX = "0"
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
# The pod's own IP from the downward API; Kubernetes expands $(POD_IP) in the command before the shell runs,
# as llm-d's TPU7x recipe does for kv_ip (guides/pd-disaggregation/modelserver/tpu/v7/vllm-dynamic-slice).
POD_IP_ENV = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
# vLLM closes idle connections after 5 s; the routing sidecar's Go transport keeps them for 90 s and resets
# on reuse. The server must outlive the client's idle timeout; llm-d sets 120 s on prefill (same recipe).
SIDECAR_IDLE_CONN_TIMEOUT_S = 90
PREFILL_KEEP_ALIVE_S = 120
# vLLM answers /v1/models once the model is loaded and /health while the engine is alive; llm-d's recipe
# probes both on the vLLM port: startup and readiness on /v1/models, liveness on /health.
READY_PATH = "/v1/models"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
STARTUP_PERIOD_S = 30
STARTUP_INITIAL_DELAY_S = 15
WEIGHTS_MOUNT = "/data"
EPP_CONFIG_FILE = "pd-config.yaml"
EPP_CONFIG_V1 = "llm-d.ai/v1"
EPP_CONFIG_V1ALPHA1 = "llm-d.ai/v1alpha1"


@dataclass(frozen=True)
class Role:
    """What makes prefill and decode different; everything else comes from the shared builder."""

    name: str
    kv_role: str
    vllm_port: int
    vllm_port_name: str
    routing_sidecar: bool
    # The decode side's sidecar holds connections to prefill open; prefill's server must keep them.
    keep_alive_s: int | None = None


ROLES = {
    "prefill": Role(
        "prefill", "kv_producer", ROUTER_PORT, "modelserver", routing_sidecar=False, keep_alive_s=PREFILL_KEEP_ALIVE_S
    ),
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


def leader_selector(settings: Settings) -> dict[str, str]:
    """matchLabels that select the serving leaders of both roles and nothing else.

    The guide label alone also matches every worker (they share the model labels but run no API server);
    the LWS worker index narrows it to the leader of each group.
    """
    return {"llm-d.ai/guide": settings.serving.guide, WORKER_INDEX_LABEL: LEADER_INDEX}


def metrics_port(role: str) -> int:
    """The port of the vLLM server of a role's leader, which serves Prometheus metrics at METRICS_PATH."""
    return ROLES[role].vllm_port


def probes(settings: Settings, role: Role) -> dict[str, dict[str, Any]]:
    """Startup, readiness and liveness of a leader's vLLM (llm-d's TPU7x dynamic-slice recipe, same numbers).

    The startup budget is `serving.startupTimeoutSeconds`, in whole periods after the initial delay; the pod
    is Ready (and so an endpoint of the pool) only once /v1/models answers.
    """

    def get(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": role.vllm_port}}

    budget = settings.serving.startup_timeout_seconds - STARTUP_INITIAL_DELAY_S
    return {
        "startupProbe": {
            **get(READY_PATH),
            "initialDelaySeconds": STARTUP_INITIAL_DELAY_S,
            "periodSeconds": STARTUP_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": -(-budget // STARTUP_PERIOD_S),
        },
        "readinessProbe": {**get(READY_PATH), "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 3},
        "livenessProbe": {**get(HEALTH_PATH), "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3},
    }


def weights_flags(settings: Settings) -> list[str]:
    s = settings.serving
    if s.weights_via == "mount":
        return [f"--model={WEIGHTS_MOUNT}/{s.model_path}"]
    return [f"--model=gs://{s.weights_bucket}/{s.model_path}", "--load-format=runai_streamer"]


def vllm_command(settings: Settings, role: Role, script: str) -> str:
    s = settings.serving
    flags = [
        *weights_flags(settings),
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
        json.dumps({**KV_CONNECTOR, "kv_role": role.kv_role, "kv_ip": "$(POD_IP)"}, separators=(",", ":")),
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
        POD_IP_ENV,
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
    mount = settings.serving.weights_via == "mount"
    volumes, mounts = [shared["spec"]["volumes"]["shm"]], [shared["volumeMounts"]["shm"]]
    if mount:  # the FUSE volume exists only when vLLM reads the weights from it
        fuse = copy.deepcopy(shared["spec"]["volumes"]["weights"])
        fuse["csi"]["volumeAttributes"]["bucketName"] = settings.serving.weights_bucket
        volumes.append(fuse)
        mounts.append({**shared["volumeMounts"]["weights"], "mountPath": WEIGHTS_MOUNT})
    container_env = env(settings, shared["env"], hf_secret)
    transfer_ports = [
        {"containerPort": KV_TRANSFER_PORT, "name": "tpu-kv-transfer"},
        {"containerPort": SIDE_CHANNEL_PORT, "name": "tpu-pd-coord"},
    ]
    annotations = {SLICE_TOPOLOGY_ANNOTATION: str(slice_.topology)}
    if mount:  # asks GKE to inject the FUSE sidecar
        annotations["gke-gcsfuse/volumes"] = "true"

    def pod(container: dict[str, Any], init: list[dict[str, Any]]) -> dict[str, Any]:
        common = copy.deepcopy(shared["spec"])
        pod_spec = {
            "serviceAccountName": service_account,
            "nodeSelector": {ACCELERATOR_LABEL: slice_.cube.system.accelerator, **healthy_partition_selector(slice_)},
            "tolerations": common["tolerations"],
            **({"initContainers": init} if init else {}),
            "containers": [container],
            "volumes": copy.deepcopy(volumes),
        }
        return {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": pod_spec}

    leader_env = list(container_env)
    if role.keep_alive_s is not None:
        leader_env.append({"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": str(role.keep_alive_s)})
    leader = {
        "name": "vllm-leader",
        "image": settings.serving.image,
        "imagePullPolicy": "IfNotPresent",
        "env": leader_env,
        "command": ["sh", "-c", vllm_command(settings, role, shared["leaderScript"])],
        "resources": copy.deepcopy(resources),
        "ports": [{"containerPort": role.vllm_port, "name": role.vllm_port_name}, *transfer_ports],
        **probes(settings, role),
        "volumeMounts": copy.deepcopy(mounts),
    }
    worker = {
        "name": "vllm-worker",
        "image": settings.serving.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", shared["workerScript"]],
        "resources": copy.deepcopy(resources),
        "env": container_env,
        "ports": copy.deepcopy(transfer_ports),
        "volumeMounts": copy.deepcopy(mounts),
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


def epp_config_api(chart_version: str) -> str:
    """The EndpointPickerConfig apiVersion the pinned router parses.

    llm-d-router v0.10.0 knows only `llm-d.ai/v1alpha1` (apix/config/v1alpha1@71f4f099); `llm-d.ai/v1`
    arrived on main after it (pkg/epp/config/loader/conversion_test.go@10bbcb7e), where v1alpha1 still
    loads, converted, with a deprecation notice. `v0` is main's floating tag, so it gets v1 like later releases.
    """
    if chart_version.removeprefix("v") == "0":
        return EPP_CONFIG_V1
    release = tuple(int(part) for part in re.findall(r"\d+", chart_version)[:3])
    return EPP_CONFIG_V1ALPHA1 if release < (0, 11) else EPP_CONFIG_V1


def epp_config(settings: Settings) -> dict[str, Any]:
    """llm-d's pd-disaggregation scheduling (guides/pd-disaggregation/router/pd-disaggregation.values.yaml@83bb7c18).

    Decode first, then the always-disagg decider sends every request through a prefill pod; the profile
    handler also sets the prefill header for the decode sidecar (what the deprecated
    disagg-headers-handler did). Prefill keeps prefixes on cache-warm pods and picks by queued tokens;
    decode picks the least busy pod.
    """
    return {
        "apiVersion": epp_config_api(settings.serving.router.version),
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "always-disagg-pd-decider"},
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "always-disagg-pd-decider"}}},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "approx-prefix-cache-producer", "parameters": {"maxPrefixTokensToMatch": 131072}},
            {"type": "inflight-load-producer"},
            {
                "type": "prefix-cache-affinity-filter",
                "parameters": {"peakPrefillThroughput": settings.serving.router.peak_prefill_throughput},
            },
            {"type": "token-load-scorer"},
            {"type": "active-request-scorer"},
            {"type": "max-score-picker"},
        ],
        "schedulingProfiles": [
            {
                "name": "prefill",
                "plugins": [
                    {"pluginRef": "prefill-filter"},
                    {"pluginRef": "prefix-cache-affinity-filter"},
                    {"pluginRef": "token-load-scorer"},
                    {"pluginRef": "max-score-picker"},
                ],
            },
            {
                "name": "decode",
                "plugins": [
                    {"pluginRef": "decode-filter"},
                    {"pluginRef": "active-request-scorer"},
                    {"pluginRef": "max-score-picker"},
                ],
            },
        ],
    }


def router_values(settings: Settings, gateway_name: pulumi.Input[str]) -> dict[str, Any]:
    """Values of the llm-d-router-gateway chart: llm-d's base router values and the pd-disaggregation guide's.

    Left out on purpose: the proxy settings and the 80->8081 service port (gateway mode runs no proxy: the
    chart renders one only with router.proxy.enabled, off by default; the GKE Gateway is the proxy), the
    HTTPRoute request timeout (the chart applies it only when provider.name is not gke), and tracing
    (equal to the chart's defaults, and off). Sources: llm-d/llm-d-router@71f4f099 (v0.10.0)
    config/charts/routerlib/{values.yaml,templates/_deployment.yaml,templates/_service.yaml},
    config/charts/llm-d-router-gateway/templates/httproute.yaml.
    """
    s = settings.serving
    return {
        "provider": {"name": "gke"},
        "httpRoute": {"create": True, "inferenceGatewayName": gateway_name},
        "router": {
            "epp": {
                # One picker: the in-flight load accounting the scorers read is local to each EPP process.
                "replicas": 1,
                "flags": {"v": 2},
                "pluginsConfigFile": EPP_CONFIG_FILE,
                "pluginsCustomConfig": {EPP_CONFIG_FILE: yaml.safe_dump(epp_config(settings), sort_keys=False)},
                "resources": s.router.epp_resources.manifest(),
            },
            # FailOpen sends requests to any pool endpoint while the picker is down: safe only because the
            # pool holds nothing but ready leaders.
            "inferencePool": {"failureMode": "FailOpen"},
            "modelServers": {
                "protocol": "http",
                "targetPorts": [{"number": ROUTER_PORT}],
                "matchLabels": leader_selector(settings),
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
        number = gcp.organizations.get_project_output(project_id=settings.project).number
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
            lambda a: verify.command(
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
