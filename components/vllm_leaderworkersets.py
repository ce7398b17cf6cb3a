"""The vLLM model servers of the P/D stack: one LeaderWorkerSet per role, from one builder.

Prefill and decode differ only where a `Role` says so (KV role, vLLM port, the decode side's routing
sidecar). Group size and the tensor-parallel size derive from the slice topology; the LWS's name carries the
revision of its pod shape (components/model/serving/rollout.py), so a change Kueue would refuse rolls to a new LWS.

Only leaders serve: they run vLLM's API server, the workers only Ray. `leader_selector` is the one
definition of "a pod that serves", used by the InferencePool and by anything else that must find
the model servers (metrics scraping: `leader_selector` plus `metrics_port` and METRICS_PATH).
"""

from __future__ import annotations

import copy
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.kueue_objects import healthy_partition_selector
from components.model.config.settings import Settings
from components.model.keys import (
    ACCELERATOR_LABEL,
    ENGINE_TYPE_LABEL,
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GUIDE_LABEL,
    MODEL_LABEL,
    ROLE_LABEL,
    SKIP_AWAIT_ANNOTATION,
    SKIP_TPU_WEBHOOK_CHECK,
    SLICE_TOPOLOGY_ANNOTATION,
    TIMEOUT_ANNOTATION,
    TPU_RESOURCE,
    TPU_SLICE_LABEL,
    WAIT_FOR_ANNOTATION,
    WORKER_INDEX_LABEL,
)
from components.model.serving import weights
from components.model.serving.rollout import ready_groups_condition, revision

LWS_API = "leaderworkerset.x-k8s.io/v1"
# The leader's WORKER_INDEX_LABEL (sigs.k8s.io/lws api/leaderworkerset/v1 WorkerIndexLabelKey). The templates
# cannot carry the label: LWS sets it per pod.
LEADER_INDEX = "0"
# (LWS also labels every pod with its LWS's name, SetNameLabelKey; that name carries a revision,
# components/model/serving/rollout.py, so nothing that must find a role's pods across a rollout selects by it: the
# role label tells the roles apart.)
VLLM_POD = Path(__file__).resolve().parent.parent / "manifests" / "vllm-pod.yaml"
HF_SECRET = "llm-d-hf-token"
HF_SECRET_KEY = "HF_TOKEN"
EXCLUSIVE_TOPOLOGY = {EXCLUSIVE_TOPOLOGY_ANNOTATION: TPU_SLICE_LABEL}
# The router selects model servers by port 8000: prefill serves there, decode's sidecar proxies it.
ROUTER_PORT = 8000
# Decode's routing sidecar, as llm-d's TPU7x dynamic-slice recipe runs it
# (llm-d/llm-d@f518910e guides/pd-disaggregation/modelserver/tpu/v7/vllm-dynamic-slice/decode.yaml): on the
# router's port, NIXL v2 protocol towards prefill, plain HTTP like prefill's vLLM. Every flag is one that
# llm-d-router v0.10.0's sidecar defines (pkg/sidecar/proxy/options.go@71f4f099: port, kv-connector,
# secure-proxy; zap-log-level from controller-runtime's zap options). Hence a router of v0.10.0 or later:
# that release dropped the deprecated --connector; and --secure-serving (another revision of the recipe,
# llm-d/llm-d@b2abbc3b) is the endpoint picker's flag, not the sidecar's. No model-server port flag: the
# sidecar forwards to 8200 by default from v0.10.0 on (defaultVLLMPort; llm-d/llm-d#2116 dropped
# --vllm-port=8200 from the guides for it), so decode's vLLM listens there.
SIDECAR_DEFAULT_MODEL_SERVER_PORT = 8200
SIDECAR_ARGS = ("--kv-connector=nixlv2", "--zap-log-level=1", "--secure-proxy=false")
KV_TRANSFER_PORT = 9100
SIDE_CHANNEL_PORT = 9600
KV_CONNECTOR = {
    "kv_connector": "TPUConnectorHMA",
    "kv_connector_module_path": "tpu_inference.distributed.tpu_connector_hma",
}
# The pod's own IP from the downward API; Kubernetes expands $(POD_IP) in the command before the shell runs,
# as llm-d's TPU7x recipe does for kv_ip (guides/pd-disaggregation/modelserver/tpu/v7/vllm-dynamic-slice).
POD_IP_ENV = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
# vLLM closes idle connections after 5 s; the routing sidecar's Go transport keeps them for 90 s
# (IdleConnTimeout, llm-d-router v0.10.0 pkg/sidecar/proxy/proxy.go) and resets on reuse. The sidecar holds
# such connections to the prefill leaders and to its own decode vLLM on localhost, so both servers must
# outlive the client's idle timeout: llm-d sets 120 s (same recipe), 30 s above it.
SIDECAR_IDLE_CONN_TIMEOUT_S = 90
VLLM_KEEP_ALIVE_S = SIDECAR_IDLE_CONN_TIMEOUT_S + 30
# vLLM answers /v1/models once the model is loaded and /health while the engine is alive; llm-d's recipe
# probes both on the vLLM port: startup and readiness on /v1/models, liveness on /health.
READY_PATH = "/v1/models"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
STARTUP_PERIOD_S = 30
STARTUP_INITIAL_DELAY_S = 15
WEIGHTS_MOUNT = "/data"


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
    "decode": Role("decode", "kv_consumer", SIDECAR_DEFAULT_MODEL_SERVER_PORT, "vllm", routing_sidecar=True),
}


def model_labels(settings: Settings, role: str) -> dict[str, str]:
    return {
        GUIDE_LABEL: settings.serving.guide,
        MODEL_LABEL: settings.model_label,
        ROLE_LABEL: role,
        ENGINE_TYPE_LABEL: "vllm",
    }


def leader_selector(settings: Settings) -> dict[str, str]:
    """matchLabels that select the serving leaders of both roles and nothing else.

    The guide label alone also matches every worker (they share the model labels but run no API server);
    the LWS worker index narrows it to the leader of each group.
    """
    return {GUIDE_LABEL: settings.serving.guide, WORKER_INDEX_LABEL: LEADER_INDEX}


def leader_metrics_target(settings: Settings, role: str) -> tuple[dict[str, str], str]:
    """The labels selecting exactly the leaders of one role's LWS, and the named port vLLM serves /metrics on.

    vLLM serves /metrics on its API port (`vllm serve --port`); only the leader runs the API server.
    """
    selector = {**model_labels(settings, role), WORKER_INDEX_LABEL: LEADER_INDEX}
    return selector, ROLES[role].vllm_port_name


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


def weights_check() -> str:
    """The leader's first step: exits with one line naming gs://<bucket>/<path> when the snapshot is not there
    (manifests/weights_check.py), instead of vLLM failing to load it for the whole startup budget."""
    return f"python3 -c {shlex.quote(weights.CHECK_SCRIPT.read_text())} || exit 1\n"


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
    # exec: vLLM replaces the shell as the container's PID 1, so SIGTERM (preemption, rollout, restart) reaches
    # it and it finishes its requests within the grace period; a shell as PID 1 ignores SIGTERM and the kubelet
    # kills everything at the end of the grace period instead.
    return weights_check() + script + " ".join(["exec", "vllm", "serve", *(shlex.quote(f) for f in flags)]) + "\n"


def hf_token(settings: Settings) -> pulumi.Output[str] | None:
    """`hfToken` as a Pulumi secret, None when unset."""
    return None if settings.hf_token is None else pulumi.Output.secret(settings.hf_token.get_secret_value())


def hf_token_secret(
    name: str, token: pulumi.Input[str] | None, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> k8s.core.v1.Secret | None:
    """The Secret `env` reads the Hugging Face `token` from (a Pulumi secret end to end), or None without one:
    the serving pods' and the download Job's, each in its own namespace."""
    if token is None:
        return None
    return k8s.core.v1.Secret(
        f"{name}-hf-token",
        metadata={"name": HF_SECRET, "namespace": namespace},
        string_data={HF_SECRET_KEY: token},
        opts=opts,
    )


def env(settings: Settings, common: dict[str, str], hf_secret: pulumi.Input[str] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if hf_secret is not None:
        out.append({"name": HF_SECRET_KEY, "valueFrom": {"secretKeyRef": {"name": hf_secret, "key": HF_SECRET_KEY}}})
    out += [{"name": k, "value": v} for k, v in common.items()]
    out += [
        POD_IP_ENV,
        {"name": "TPU_SIDE_CHANNEL_PORT", "value": str(SIDE_CHANNEL_PORT)},
        {"name": "TPU_KV_TRANSFER_PORT", "value": str(KV_TRANSFER_PORT)},
        # The stack's own cache bucket, the one place the pods may write (components/serving.py).
        {"name": "VLLM_XLA_CACHE_PATH", "value": f"gs://{settings.xla_cache_bucket}/xla_cache"},
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
    """The LeaderWorkerSet of one role: `replicas` groups, each one slice of `topology`.

    Named `<serving.<role>.name>-<revision>` (components/model/serving/rollout.py). Pulumi never awaits it on a create
    or an update (`pulumi.com/skipAwait`); its ready groups are awaited once, by `leaders_ready` below.
    """
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
    # GKE's TPU admission webhook otherwise requires the static topology selector dynamic slices do not carry
    # (llm-d/llm-d guides/pd-disaggregation/modelserver/tpu/v7-dynamic-slice/vllm/base/disaggregatedset.yaml).
    annotations = {SLICE_TOPOLOGY_ANNOTATION: str(slice_.topology), SKIP_TPU_WEBHOOK_CHECK: "true"}
    if mount:  # asks GKE to inject the FUSE sidecar
        annotations["gke-gcsfuse/volumes"] = "true"

    def pod(container: dict[str, Any], init: list[dict[str, Any]]) -> dict[str, Any]:
        common = copy.deepcopy(shared["spec"])
        pod_spec = {
            "serviceAccountName": service_account,
            # Leader and workers alike: the leader's vLLM needs its Ray workers until its last request is done.
            "terminationGracePeriodSeconds": settings.serving.termination_grace_period_seconds,
            "nodeSelector": {ACCELERATOR_LABEL: slice_.cube.system.accelerator, **healthy_partition_selector(slice_)},
            "tolerations": common["tolerations"],
            **({"initContainers": init} if init else {}),
            "containers": [container],
            "volumes": copy.deepcopy(volumes),
        }
        return {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": pod_spec}

    leader_env = [
        *container_env,
        {"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": str(VLLM_KEEP_ALIVE_S)},
        # What the leader's weights check lists (weights_check), in either weightsVia.
        {"name": "WEIGHTS_BUCKET", "value": settings.serving.weights_bucket},
        {"name": "WEIGHTS_PREFIX", "value": settings.serving.model_path},
    ]
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
            # The router's release of the sidecar (both come from one llm-d-router tag).
            "image": settings.serving.routing_sidecar_image,
            "imagePullPolicy": "Always",
            "args": [f"--port={ROUTER_PORT}", *SIDECAR_ARGS],
            "ports": [{"containerPort": ROUTER_PORT, "name": "sidecar", "protocol": "TCP"}],
            "resources": {},
            # A native sidecar: an init container that keeps running beside vLLM.
            "restartPolicy": "Always",
            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
        }
    ]
    leader_template = pod(leader, sidecar if role.routing_sidecar else [])
    worker_template = pod(worker, [])
    rev = revision(
        leader_spec=leader_template["spec"],
        worker_spec=worker_template["spec"],
        size=slice_.vms,
        replicas=spec.replicas,
        queue=settings.kueue.local_queue,
        priority=spec.priority,
    )
    # skipAwait: the leaders-ready patch puts its waitFor on this live object, and pulumi-kubernetes reads the
    # condition from the live object on every update; skipAwait in the LWS's own inputs makes its updates
    # immediate (components/model/serving/rollout.py). Its delete is still awaited: skipAwait skips the delete wait only
    # for a few built-in kinds (provider/pkg/metadata/overrides.go `allowsSkipAwaitWithDelete`).
    lws_annotations = {**EXCLUSIVE_TOPOLOGY, SKIP_AWAIT_ANNOTATION: "true"}
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": f"{settings.lws_name(role.name)}-{rev}",
            "namespace": namespace,
            "annotations": lws_annotations,
            "labels": {**labels, **queue_labels},
        },
        "spec": {
            "replicas": spec.replicas,
            "leaderWorkerTemplate": {
                # One LWS group = one slice = one pod per TPU VM of the slice.
                "size": slice_.vms,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": leader_template,
                "workerTemplate": worker_template,
            },
        },
    }


def leaders_ready(
    settings: Settings, lws_name: pulumi.Input[str], namespace: pulumi.Input[str], wait_for: int
) -> dict[str, Any]:
    """The patch of a role's new LWS that Pulumi awaits once, when it is created: until `wait_for` groups are ready.

    A `LeaderWorkerSetPatch` of the LWS with only the wait's annotations (its field manager owns nothing else).
    Declared per revision (its resource name carries the LWS's), so it is created with each new LWS and deleted
    with the old one, and never updated: an in-place change of the LWS (image, flags) re-awaits nothing.
    `wait_for` 0 (a delete-first rollout) awaits nothing, as before.
    """
    annotations: dict[str, str] = {}
    if wait_for > 0:
        annotations[WAIT_FOR_ANNOTATION] = ready_groups_condition(wait_for)
        annotations[TIMEOUT_ANNOTATION] = str(rollout_timeout_seconds(settings))
    return {"name": lws_name, "namespace": namespace, "annotations": annotations}


def lws_revision(settings: Settings, role: str) -> str:
    """The revision part of the role's LWS name."""
    return lws_object_name(settings, role).removeprefix(f"{settings.lws_name(role)}-")


def lws_object_name(settings: Settings, role: str) -> str:
    """The name the role's LWS gets: `serving.<role>.name` plus its revision (which no Output influences)."""
    manifest = leader_worker_set(
        settings, ROLES[role], namespace="", queue_labels={}, service_account="", hf_secret=None
    )
    return manifest["metadata"]["name"]


# What a new group needs before its model starts loading: Kueue admission, the Slice (the slice controller
# retries one that is not active within 3 minutes, xpk slice/cmd/main.go `--activation-timeout`), scheduling
# and the image pull. An estimate, not a measurement.
ROLLOUT_SCHEDULING_BUDGET_S = 1800


def rollout_timeout_seconds(settings: Settings) -> int:
    """How long Pulumi waits for a new LWS's groups: the leaders' startup budget plus getting them scheduled."""
    return settings.serving.startup_timeout_seconds + ROLLOUT_SCHEDULING_BUDGET_S
