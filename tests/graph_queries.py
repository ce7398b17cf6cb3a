"""Queries over a recorded run that tests assert with: the TPU pools, the add-on charts, the Kueue
objects, the serving LeaderWorkerSets' templates, the dashboard's tiles, label selectors.
"""

from __future__ import annotations

import json
from typing import Any

from components.cli.mockrun import Registration, normalize
from tests.harness import CHART, KUEUE, LWS, POOL, Run
from tests.stack_config import P


def label_selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Kubernetes' label-selector semantics (apimachinery LabelSelectorAsSelector): every part must match; an
    absent or empty selector matches everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req["key"], req["operator"], req.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def tpu_pools(run: Run) -> list[Registration]:
    return [r for r in run.of_type(POOL) if r.name != "cluster-system"]


def addon_charts(run: Run) -> list[Registration]:
    return [run.get(CHART, f"{name}-chart") for name in ("jobset", "kueue", "lws")]


def kueue_objects(run: Run) -> list[Registration]:
    return [r for r in run.registrations if r.type.startswith(KUEUE)]


def shape(regs: list[Registration], types: set[str]) -> dict[tuple[str, str], Any]:
    return {(r.type, r.name): (r.plain(), r.options) for r in regs if r.type in types}


ROLES = ("prefill", "decode")


def lws(run: Run, role: str) -> dict:
    return normalize(run.get(LWS, f"serving-{role}").plain())


def templates(obj: dict) -> dict[str, dict]:
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}


def leader(obj: dict) -> dict:
    return templates(obj)["leader"]["spec"]


def vllm_leader(obj: dict) -> dict:
    return leader(obj)["containers"][0]


def inputs_of(run: Run) -> dict[tuple[str, str], Any]:
    return {(r.type, r.name): r.inputs for r in run.registrations}


DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
NO_DEMOS = {f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}}


def tiles(d: dict[str, Any]) -> list[dict[str, Any]]:
    return d["mosaicLayout"]["tiles"]


def emitted(run: Run) -> dict[str, Any]:
    assert run.error is None, run.error
    return json.loads(run.get(DASHBOARD, "observability-dashboard").inputs["dashboardJson"])
