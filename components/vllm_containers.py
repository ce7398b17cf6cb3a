"""The vLLM containers of the P/D stack's pods: the ports, the leader's `vllm serve` command line, its probes and
the environment leaders and workers share (components/vllm_leaderworkersets.py puts them in the LeaderWorkerSets).

Prefill and decode differ only where a `Role` says so (KV role, vLLM port, the decode side's routing sidecar).
"""

import copy
import json
import shlex
from dataclasses import dataclass
from typing import Any, TypedDict

import pulumi

from components.model.config.images import pull_policy
from components.model.pod_security import container_context
from components.model.serving import weights

# The Secret the pods read the Hugging Face token from, and its key (the policy pack checks it by name).
HF_SECRET = "llm-d-hf-token"
HF_SECRET_KEY = "HF_TOKEN"
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
# as llm-d's TPU7x recipe does for kv_ip (guides/pd-disaggregation/modelserver/tpu/v7/vllm-dynamic-slice). The pinned
# image's connector does not read kv_ip: each host announces its own address (vllm-project/tpu-inference@18ed6153
# tpu_inference/distributed/tpu_connector.py:244 and utils.py:34, the Ray nodes' get_host_ip).
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


class ModelServerArgs(TypedDict):
    guide: str
    """The router's guide: every pod's `llm-d.ai/guide` label, what the router selects by."""
    model_label: str
    """Every pod's `llm-d.ai/model` label (the model's last path segment)."""
    model_served: str
    """vLLM `--served-model-name`, what clients send."""
    image: str
    """The vLLM TPU image of leaders and workers."""
    routing_sidecar_image: str
    """The decode leaders' routing sidecar."""
    routing_sidecar_resources: dict[str, dict[str, str]]
    """The routing sidecar's requests and limits."""
    weights_bucket: str
    """The bucket holding the weights, which the pods only read."""
    model_path: str
    """The weights' path inside the bucket."""
    weights_via: str
    """`stream` (vLLM streams from gs://) or `mount` (the GCS FUSE volume)."""
    max_model_len: int
    """vLLM `--max-model-len`."""
    max_num_batched_tokens: int
    """vLLM `--max-num-batched-tokens`."""
    max_num_seqs: int
    """vLLM `--max-num-seqs`."""
    kv_cache_dtype: str
    """vLLM `--kv-cache-dtype`."""
    enable_expert_parallel: bool
    """vLLM `--enable-expert-parallel`."""
    startup_timeout_seconds: int
    """The leaders' startup-probe budget for loading the model."""
    termination_grace_period_seconds: int
    """How long a stopping vLLM pod may finish its requests."""
    xla_cache_bucket: str
    """The stack's XLA compilation cache bucket, the one place the pods write."""
    local_queue: str
    """The Kueue LocalQueue's name (part of each LWS's revision)."""


def probes(model: ModelServerArgs, role: Role) -> dict[str, dict[str, Any]]:
    """Startup, readiness and liveness of a leader's vLLM (llm-d's TPU7x dynamic-slice recipe, same numbers).

    The startup budget is `serving.startupTimeoutSeconds`, in whole periods after the initial delay; the pod
    is Ready (and so an endpoint of the pool) only once /v1/models answers.
    """

    def get(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": role.vllm_port}}

    budget = model["startup_timeout_seconds"] - STARTUP_INITIAL_DELAY_S
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


def routing_sidecar(model: ModelServerArgs) -> dict[str, Any]:
    """Decode's routing sidecar, a native sidecar: an init container that keeps running beside vLLM.

    Ready once it answers its own `GET /health` (llm-d-router v0.10.0 pkg/sidecar/proxy/proxy.go:624 `createRoutes`,
    200 without asking vLLM) on the port the pool targets, the path the Gateway's health check asks there too
    (the router chart's HealthCheckPolicy); a native sidecar's readiness counts in the pod's Ready condition
    (https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/). No liveness probe: a restarted
    container recreates the whole LWS group (`RecreateGroupOnPodRestart`).
    """
    image = model["routing_sidecar_image"]
    return {
        "name": "routing-proxy",
        # The router's release of the sidecar (both come from one llm-d-router tag).
        "image": image,
        "imagePullPolicy": pull_policy(image),
        "args": [f"--port={ROUTER_PORT}", *SIDECAR_ARGS],
        "ports": [{"containerPort": ROUTER_PORT, "name": "sidecar", "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": HEALTH_PATH, "port": ROUTER_PORT},
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "resources": copy.deepcopy(model["routing_sidecar_resources"]),
        "restartPolicy": "Always",
        # The image's USER is 65532 (model/pod_security.py).
        "securityContext": container_context(non_root=True),
    }


def weights_flags(model: ModelServerArgs) -> list[str]:
    if model["weights_via"] == "mount":
        return [f"--model={WEIGHTS_MOUNT}/{model['model_path']}"]
    return [f"--model=gs://{model['weights_bucket']}/{model['model_path']}", "--load-format=runai_streamer"]


def weights_check() -> str:
    """The leader's first step: exits with one line naming gs://<bucket>/<path> when the snapshot is not there
    (manifests/weights_check.py), instead of vLLM failing to load it for the whole startup budget."""
    return f"python3 -c {shlex.quote(weights.CHECK_SCRIPT.read_text())} || exit 1\n"


def vllm_command(model: ModelServerArgs, role: Role, tensor_parallel_size: int, script: str) -> str:
    flags = [
        *weights_flags(model),
        f"--served-model-name={model['model_served']}",
        f"--max-model-len={model['max_model_len']}",
        f"--max-num-batched-tokens={model['max_num_batched_tokens']}",
        f"--max-num-seqs={model['max_num_seqs']}",
        f"--tensor-parallel-size={tensor_parallel_size}",
        "--language-model-only",
        "--limit-mm-per-prompt",
        json.dumps({"image": 0, "video": 0}),
        f"--kv-cache-dtype={model['kv_cache_dtype']}",
        *(["--enable-expert-parallel"] if model["enable_expert_parallel"] else []),
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


def hf_token_env(secret: pulumi.Input[str]) -> dict[str, Any]:
    """The Hugging Face token from the Secret named `secret`."""
    return {"name": HF_SECRET_KEY, "valueFrom": {"secretKeyRef": {"name": secret, "key": HF_SECRET_KEY}}}


def env(xla_cache_bucket: str, common: dict[str, str], hf_secret: pulumi.Input[str] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if hf_secret is not None:
        out.append(hf_token_env(hf_secret))
    out += [{"name": k, "value": v} for k, v in common.items()]
    out += [
        POD_IP_ENV,
        {"name": "TPU_SIDE_CHANNEL_PORT", "value": str(SIDE_CHANNEL_PORT)},
        {"name": "TPU_KV_TRANSFER_PORT", "value": str(KV_TRANSFER_PORT)},
        # The stack's own cache bucket, the one place the pods may write (components/serving.py).
        {"name": "VLLM_XLA_CACHE_PATH", "value": f"gs://{xla_cache_bucket}/xla_cache"},
    ]
    return out
