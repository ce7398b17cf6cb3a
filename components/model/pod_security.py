"""What the pods the program declares may do, and the Pod Security Admission levels their namespaces enforce.
Pure, no Pulumi.

No pod needs privilege: GKE gives TPU containers their chips without privileged mode or added capabilities from 1.28
on ("Versions 1.28 and later don't require privileged mode or special capabilities",
https://cloud.google.com/kubernetes-engine/docs/concepts/tpus, "Privileged mode"), below every GKE version the program
accepts (MIN_SLICE_CONTROLLER_VERSION). So every container drops every capability, may not gain privileges, and runs
under the runtime's default seccomp profile. That profile is the one GKE applies to every Autopilot workload, TPU
workloads included ("Autopilot: GKE applies the containerd default seccomp profile to all workloads automatically",
https://cloud.google.com/kubernetes-engine/docs/concepts/seccomp-in-gke): the TPU runtime runs under it there.

Non-root where the image allows it. vLLM's TPU image runs as root: it is python:3.12-slim-bookworm with no USER,
vLLM cloned and installed under /workspace as root (vllm-project/tpu-inference@18ed6153 docker/Dockerfile), and the
pods make Ray's helper executable there and keep HF_HOME under /usr (manifests/vllm-pod.yaml); the demo pip-installs
jax[tpu] into the image's site-packages. Both own every file they write, so dropping DAC_OVERRIDE, FOWNER and CHOWN
takes nothing they use. The routing sidecar's image runs as 65532 (llm-d/llm-d-router@71f4f099 Dockerfile.sidecar
`USER 65532:65532`), the download Job as nobody, and GKE's GCS FUSE sidecar as nobody with the same restrictions
(GoogleCloudPlatform/gcs-fuse-csi-driver@5fcdc04a pkg/webhook/sidecar_spec.go GetSecurityContext).

Hence the levels: the workload namespace (serving, the demos, the teams' JobSets) enforces `baseline`, the
strictest its root pods pass, and warns and audits at `restricted`; the download namespace enforces `restricted`.
"""

from __future__ import annotations

from typing import Any

from components.model.config.checks import MIN_SLICE_CONTROLLER_VERSION
from components.model.keys import PSA_LABEL, PSA_VERSION_LABEL

BASELINE, RESTRICTED = "baseline", "restricted"
# The rules of the oldest Kubernetes minor the program runs on: a cluster upgrade never tightens what a running
# workload's next pod is held to (PSA evaluates a pinned version's rules on any newer API server).
POLICY_VERSION = "v" + ".".join(MIN_SLICE_CONTROLLER_VERSION.split(".")[:2])
NOBODY = 65534


def namespace_labels(enforce: str) -> dict[str, str]:
    """A namespace's PSA labels: `enforce` refuses a pod below it; `restricted` is warned about and audited."""
    modes = {"enforce": enforce, "warn": RESTRICTED, "audit": RESTRICTED}
    return {
        **{PSA_LABEL.format(mode=m): level for m, level in modes.items()},
        **{PSA_VERSION_LABEL.format(mode=m): POLICY_VERSION for m in modes},
    }


def pod_context() -> dict[str, Any]:
    """A pod's context, a fresh one each call: the runtime's default seccomp profile for every container, injected
    ones included."""
    return {"seccompProfile": {"type": "RuntimeDefault"}}


def container_context(run_as_user: int | None = None, non_root: bool = False) -> dict[str, Any]:
    """A container's context: no privilege escalation, no capabilities, and non-root when its image allows it
    (`run_as_user`, or `non_root` for an image whose USER is numeric and not 0)."""
    out: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if run_as_user is not None or non_root:
        out["runAsNonRoot"] = True
    if run_as_user is not None:
        out["runAsUser"] = run_as_user
    return out
