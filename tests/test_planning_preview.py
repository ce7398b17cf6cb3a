"""The capacity plan inside `pulumi preview`: impossible requests stop it, contention warns (issue 5)."""

from __future__ import annotations

import pytest

from tests.harness import assert_rejected, run_program

P = "gke-tpu-slicing"


def test_codelab_mix_warns_and_exports_the_plan() -> None:
    run = run_program()
    assert run.error is None, run.error
    warnings = [m for level, m in run.logs if level == "warn" and "will be preempted" in m]
    assert any(m.startswith(f"{P}:demos.superslicing") and "stay pending" in m for m in warnings), warnings
    assert any(m.startswith(f"{P}:demos.subslicing") and "then readmitted" in m for m in warnings), warnings
    tables = [m for level, m in run.logs if level == "info" and m.startswith("TPU plan:")]
    assert len(tables) == 1 and "serving.decode" in tables[0]
    plan = run.outputs["capacityPlan"]
    assert plan["totals"]["chipsProvisioned"] == 128
    assert plan["totals"]["chipsRequested"] == 48 + 128 + 64
    statuses = {w["key"]: w["status"] for w in plan["workloads"]}
    assert statuses == {
        "demos.subslicing": "admitted",
        "demos.superslicing": "preempted",
        "serving.prefill": "admitted",
        "serving.decode": "admitted",
    }


def test_an_uncontended_mix_does_not_warn() -> None:
    run = run_program({f"{P}:demos": {"superslicing": {"enabled": False}}})
    assert run.error is None, run.error
    assert not [m for level, m in run.logs if level == "warn" and "preempted" in m]


IMPOSSIBLE = [
    (
        "super-slice larger than the cubes",
        {f"{P}:demos": {"superslicing": {"topology": "4x4x12"}}},
        "demos.superslicing.topology",
    ),
    ("more chips than the reservation", {f"{P}:demos": {"subslicing": {"replicas": 17}}}, "demos.subslicing.replicas"),
    ("super-slice with one cube", {f"{P}:tpu": {"cubes": 1}}, "demos.superslicing"),
]


@pytest.mark.parametrize(("case", "overrides", "key"), IMPOSSIBLE, ids=[c[0] for c in IMPOSSIBLE])
def test_impossible_requests_stop_the_preview_before_any_resource(case: str, overrides: dict, key: str) -> None:
    assert_rejected(overrides, [f"{P}:{key}"], prefix="impossible TPU request")
