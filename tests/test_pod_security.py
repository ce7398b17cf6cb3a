"""Every pod the program declares against the Pod Security Standards level its namespace enforces, and what the
`restricted` level it is warned about would still refuse (components/model/pod_security.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components.cli import charts
from components.cli.render import redact
from components.model import pod_security
from tests import upstream
from tests.graph_queries import lws, templates
from tests.harness import Run, ok
from tests.pod_security import violations
from tests.stack_config import CODELAB_MIX, P
from tests.weights_fixtures import JOB, ON

NAMESPACE = "kubernetes:core/v1:Namespace"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
# Root by their image's design (the module's docstring): the one `restricted` rule they fail.
ROOT_CONTAINERS = {"vllm-leader", "vllm-worker", "simple-container"}


@pytest.fixture(scope="module")
def everything() -> Run:
    """Serving with the FUSE mount, both demos and the download Job: every pod template the program declares."""
    return ok({**CODELAB_MIX, **ON, f"{P}:serving": {"weightsDownload": {"enabled": True}, "weightsVia": "mount"}})


def pods(run: Run) -> dict[str, tuple[str, dict[str, Any]]]:
    """`<object>/<template>` -> (namespace, pod spec) of every pod template."""
    out = {}
    for role in ("prefill", "decode"):
        obj = lws(run, role)
        for kind, template in templates(obj).items():
            out[f"{role}/{kind}"] = (obj["metadata"]["namespace"], template["spec"])
    for reg in run.of_type(JOBSET):
        obj = reg.plain()
        out[reg.name] = (
            obj["metadata"]["namespace"],
            obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"],
        )
    job = run.get(JOB, "serving-weights-job").plain()
    out["weights-job"] = (job["metadata"]["namespace"], job["spec"]["template"]["spec"])
    return out


def levels(run: Run) -> dict[str, dict[str, str]]:
    return {
        ns["metadata"]["name"]: ns["metadata"].get("labels", {}) for ns in (r.plain() for r in run.of_type(NAMESPACE))
    }


def test_the_namespaces_enforce_the_strictest_level_their_pods_pass_and_warn_at_restricted(everything: Run) -> None:
    labels = levels(everything)
    version = pod_security.POLICY_VERSION
    for namespace, enforce in (("llm-d-pd-disaggregation", "baseline"), ("model-weights", "restricted")):
        assert labels[namespace] == {
            "pod-security.kubernetes.io/enforce": enforce,
            "pod-security.kubernetes.io/enforce-version": version,
            "pod-security.kubernetes.io/warn": "restricted",
            "pod-security.kubernetes.io/warn-version": version,
            "pod-security.kubernetes.io/audit": "restricted",
            "pod-security.kubernetes.io/audit-version": version,
        }, namespace
    # The oldest minor the program runs on (GKE's floor for dynamic slicing), so an upgrade never tightens it.
    assert version == "v1.35"


def test_every_pod_passes_its_namespaces_level_and_fails_restricted_only_by_running_as_root(everything: Run) -> None:
    labels = levels(everything)
    found = pods(everything)
    assert len(found) == 7, sorted(found)  # 2 roles x (leader, worker), 2 demos, the Job
    for name, (namespace, spec) in found.items():
        enforce = labels[namespace]["pod-security.kubernetes.io/enforce"]
        assert violations(spec, enforce) == [], name
        roots = {c["name"] for c in (*spec.get("initContainers", []), *spec["containers"])} & ROOT_CONTAINERS
        assert violations(spec, "restricted") == [f"runAsNonRoot != true ({c})" for c in sorted(roots)], name
    # The routing sidecar runs as its image's user: `restricted` would take it.
    decode = found["decode/leader"][1]
    assert violations({**decode, "containers": []}, "restricted") == []


def test_the_routers_picker_passes_the_workload_namespaces_level() -> None:
    """The router chart's endpoint picker runs in the workload namespace: `baseline` must admit it."""
    upstream.require("charts")
    run = ok()
    (release,) = [r for r in charts.releases(run.registrations, redact) if r.resource == "serving-router"]
    (deploy,) = [o for o in charts.render_release(release).objects if o["kind"] == "Deployment"]
    assert deploy["metadata"]["namespace"] == "llm-d-pd-disaggregation"
    assert violations(deploy["spec"]["template"]["spec"], "baseline") == []


@pytest.mark.parametrize(
    ("spec", "level", "expected"),
    [
        ({"hostNetwork": True, "containers": [{"name": "c"}]}, "baseline", ["host namespaces (hostNetwork)"]),
        ({"containers": [{"name": "c", "securityContext": {"privileged": True}}]}, "baseline", ["privileged (c)"]),
        (
            {"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "CHOWN"]}}}]},
            "baseline",
            ["non-default capabilities (c: ['SYS_ADMIN'])"],
        ),
        ({"volumes": [{"name": "v", "hostPath": {"path": "/"}}], "containers": []}, "baseline", ["hostPath volumes"]),
        (
            {
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True},
                "containers": [
                    {
                        "name": "c",
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    }
                ],
            },
            "restricted",
            [],
        ),
        (
            {"containers": [{"name": "c"}]},
            "restricted",
            [
                "allowPrivilegeEscalation != false (c)",
                "unrestricted capabilities (c: drop ALL)",
                "runAsNonRoot != true (c)",
                "seccompProfile (c unset)",
            ],
        ),
    ],
)
def test_the_checker_refuses_what_pod_security_admission_refuses(spec: dict, level: str, expected: list[str]) -> None:
    assert violations(spec, level) == expected
