"""What `pulumi preview` checks first (components/preflight.py): the capacity plan (impossible requests stop it,
contention warns) and the settings' warnings."""

from __future__ import annotations

import pytest

from components.model.config.images import SIDECAR_DIGESTS, VLLM_TPU
from tests.harness import Run, assert_rejected, ok, warnings_of
from tests.stack_config import CODELAB_MIX, FIXED_SERVING, P, merge


def statuses(run: Run) -> dict[str, str]:
    return {w["key"]: w["status"] for w in run.outputs["capacityPlan"]["workloads"]}


def test_codelab_mix_warns_and_exports_the_plan() -> None:
    run = ok(CODELAB_MIX)
    warnings = [m for m in warnings_of(run) if "will be preempted" in m]
    assert any(m.startswith(f"{P}:demos.superslicing") and "stay pending" in m for m in warnings), warnings
    assert any(m.startswith(f"{P}:demos.subslicing") and "then readmitted" in m for m in warnings), warnings
    tables = [m for level, m in run.logs if level == "info" and m.startswith("TPU plan:")]
    assert len(tables) == 1 and "serving.decode" in tables[0]
    plan = run.outputs["capacityPlan"]
    assert plan["totals"]["chipsProvisioned"] == 128
    assert plan["totals"]["chipsRequested"] == 48 + 128 + 64
    everything = ["demos.subslicing", "demos.superslicing", "serving.prefill", "serving.decode"]
    assert statuses(run) == {**dict.fromkeys(everything, "admitted"), "demos.superslicing": "preempted"}


def test_dev_as_shipped_previews_without_a_single_warning() -> None:
    # Serving and the sub-slicing demo fit side by side; the super-slicing demo is the tour's own step. With
    # private nodes and the DNS endpoint, nothing about exposure to warn of either. Only the images whose default has
    # no digest from a citable source warn (components/model/config/images.py), until one is recorded there.
    run = ok()
    unpinned = {
        f"{P}:serving.image": VLLM_TPU.digest,
        f"{P}:serving.routingSidecar.image": SIDECAR_DIGESTS.get("v0.10.0"),
    }
    assert [w.split(" = ")[0] for w in warnings_of(run)] == [k for k, digest in unpinned.items() if digest is None]
    assert statuses(run) == dict.fromkeys(["demos.subslicing", "serving.prefill", "serving.decode"], "admitted")


def test_the_tours_super_slicing_step_runs_the_demo() -> None:
    # docs/stacks.md, "The dev tour", step 1: serving off, the super-slicing demo on. It runs, and preempts the
    # sub-slicing demo (lower priority), which waits while the super-slice holds both cubes: the codelab's
    # preemption demo, and the step's only warning.
    run = ok({f"{P}:serving": {"enabled": False}, f"{P}:demos": {"superslicing": {"enabled": True}}})
    assert statuses(run) == {"demos.subslicing": "preempted", "demos.superslicing": "admitted"}
    (warning,) = warnings_of(run)
    assert warning.startswith(f"{P}:demos.subslicing") and "preempted by demos.superslicing" in warning


IMPOSSIBLE = [
    (
        "super-slice larger than the cubes",
        {f"{P}:demos": {"superslicing": {"enabled": True, "topology": "4x4x12"}}},
        "demos.superslicing.topology",
    ),
    ("more chips than the reservation", {f"{P}:demos": {"subslicing": {"replicas": 17}}}, "demos.subslicing.replicas"),
    (
        "super-slice with one cube",
        merge(FIXED_SERVING, {f"{P}:tpu": {"cubes": 1}, **CODELAB_MIX}),
        "demos.superslicing",
    ),
]


@pytest.mark.parametrize(("case", "overrides", "key"), IMPOSSIBLE, ids=[c[0] for c in IMPOSSIBLE])
def test_impossible_requests_stop_the_preview_before_any_resource(case: str, overrides: dict, key: str) -> None:
    assert_rejected(overrides, [f"{P}:{key}"], prefix="impossible TPU request")


def test_preview_warnings(dev: Run) -> None:
    # The version is resolved, not warned about (tests/test_gke_versions.py refuses versions below the floors).
    assert not any("cluster.version" in w for w in warnings_of(dev))
