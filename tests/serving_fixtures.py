"""What the serving tests share: a dev run with `serving` settings, and readers of the LeaderWorkerSets' vLLM
command, the decode sidecar and the router chart's values."""

from __future__ import annotations

import shlex

from tests.graph_queries import leader, lws, templates, vllm_leader
from tests.harness import CHART, Run, normalize, ok
from tests.stack_config import FIXED_SERVING, P, merge

GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
SIDECAR = "ghcr.io/llm-d/llm-d-router-disagg-sidecar"
# Decode's routing sidecar in llm-d's TPU7x recipe, llm-d/llm-d@f518910e175c01352a176b5363cb0ce9abb1c95c
# guides/pd-disaggregation/modelserver/tpu/v7/vllm-dynamic-slice/decode.yaml (initContainers[routing-proxy];
# its image is the kustomize placeholder REPLACE_ROUTING_SIDECAR_IMAGE).
UPSTREAM_SIDECAR = {
    "name": "routing-proxy",
    "imagePullPolicy": "Always",
    "args": ["--port=8000", "--kv-connector=nixlv2", "--zap-log-level=1", "--secure-proxy=false"],
    "ports": [{"name": "sidecar", "containerPort": 8000, "protocol": "TCP"}],
    "resources": {},
    "restartPolicy": "Always",
    "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
}


def with_serving(settings: dict, others: dict | None = None) -> Run:
    """The dev stack with `settings` merged into `serving`, which must succeed: at a fixed size (no burst slots, whose
    bounds the shapes these tests try would not fit; the slots are built like the floors: tests/test_burst_slots.py)."""
    return ok(merge(merge(FIXED_SERVING, others or {}), {f"{P}:serving": settings}))


def worker(obj: dict) -> dict:
    return templates(obj)["worker"]["spec"]


def vllm_args(obj: dict) -> list[str]:
    serve = next(line for line in vllm_leader(obj)["command"][2].splitlines() if line.startswith("exec vllm serve"))
    return shlex.split(serve)[3:]


def flag(args: list[str], name: str) -> str:
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return args[i + 1]
    raise AssertionError(f"{name} not in {args}")


def flag_port(obj: dict) -> int:
    return int(flag(vllm_args(obj), "--port"))


def router(run: Run) -> dict:
    return normalize(run.get(CHART, "serving-router").plain())


def router_values(run: Run) -> dict:
    return router(run)["values"]


def sidecar_of(run: Run) -> dict:
    (sidecar,) = leader(lws(run, "decode"))["initContainers"]
    return sidecar


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container["env"]}
