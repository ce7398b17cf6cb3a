"""What the rollout tests share: how `pulumi up` replaces a role's LWS and how long it waits for the new set.

The upstream rules these helpers model are cited once, in components/model/serving/rollout.py: pulumi-kubernetes'
replacement on a name change and the engine's order of it (`replacement_steps`), its RFC 9535 `pulumi.com/waitFor`
and the parser's single `=` (`ready`).
"""

from __future__ import annotations

import re
from typing import Any

import jsonpath

from tests.graph_queries import lws
from tests.harness import LWS, Run, normalize
from tests.stack_config import FIXED_SERVING, P, merge

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
NO_DEMOS = {f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}}
# One cube, serving only: 4 + 4 groups of 2x2x2 fill its 8 partitions (no room for dev's burst slots).
FULL = merge(FIXED_SERVING, {**NO_DEMOS, f"{P}:tpu": {"cubes": 1}})
RFC9535 = jsonpath.JSONPathEnvironment(strict=True)


def name(run: Run, role: str) -> str:
    return lws(run, role)["metadata"]["name"]


PATCH = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSetPatch"


def ready_patch(run: Run, role: str) -> dict[str, Any]:
    """The leaders-ready patch of a role's current LWS (one per revision)."""
    (patch,) = [normalize(r.plain()) for r in run.of_type(PATCH) if r.name.startswith(f"serving-{role}-ready-")]
    assert patch["metadata"]["name"] == name(run, role) and patch["kind"] == "LeaderWorkerSet"
    return patch


def awaited(run: Run, role: str) -> dict[str, Any]:
    """The live LWS as pulumi-kubernetes awaits it on the patch's create: the patch's annotations applied to it."""
    obj = lws(run, role)
    annotations = {**obj["metadata"]["annotations"], **ready_patch(run, role)["metadata"]["annotations"]}
    return {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}


def replacement_steps(before: Run, after: Run, role: str) -> list[str]:
    """What `pulumi up` does to a role's LWS going from `before` to `after`, in order (see the module doc)."""
    old, new = lws(before, role), lws(after, role)
    old_name, new_name = old["metadata"]["name"], new["metadata"]["name"]
    if old == new:
        return []
    if old_name == new_name:
        return [f"update {new_name}"]
    reg = after.get(LWS, f"serving-{role}")
    wait = ready_patch(after, role)["metadata"]["annotations"].get("pulumi.com/waitFor")
    create = f"create {new_name}" + (f" and wait for {wait}" if wait else "")
    if reg.options["deleteBeforeReplace"]:
        return [f"delete {old_name}", create]
    return [create, "... every other create and update of the deployment", f"delete {old_name}"]


def ready(obj: dict[str, Any], groups: int, replicas: int) -> bool:
    """Whether pulumi-kubernetes counts the LWS ready once `groups` of its `replicas` groups are ready."""
    expr = obj["metadata"]["annotations"]["pulumi.com/waitFor"]
    # pulumi-kubernetes' parser: `jsonpath=` prefix, at most one `=`-separated value, the path in braces.
    assert expr.startswith("jsonpath="), expr
    body = expr.removeprefix("jsonpath=")
    assert len(body.replace("==", "").split("=")) == 1, f"{expr}: a single '=' would be read as a value"
    path = re.fullmatch(r"\{\s*(.*?)\s*\}", body)
    assert path, expr
    status: dict[str, Any] = {"replicas": replicas}
    if groups:  # the LWS controller omits readyReplicas while it is 0 (omitempty)
        status["readyReplicas"] = groups
    return bool(RFC9535.findall(path.group(1), {**obj, "status": status}))


def waits_for(run: Run, role: str, replicas: int) -> int:
    """How many of its `replicas` groups the role's new set waits for: the fewest pulumi-kubernetes counts ready."""
    obj = awaited(run, role)
    return next(n for n in range(replicas + 1) if ready(obj, n, replicas))
