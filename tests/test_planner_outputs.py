"""The capacity plan as the stack exports it (JSON) and prints it (the table, its headroom line), and the `plan`
command on stack files: dev's, an impossible request, an invalid configuration."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.__main__ import main as components_main
from components.cli.plan import main as plan_main
from tests.planner_fixtures import BASE, NO_DEMOS, cubes, run_plan
from tests.stack_config import ROOT, P, merge, set_arguments


def test_as_dict_is_the_json_stack_output() -> None:
    plan = run_plan(cubes(2))
    out = json.loads(json.dumps(plan.as_dict()))
    assert out["totals"] == {
        "cubes": 2,
        "chipsProvisioned": 128,
        "chipsRequested": 240,
        "chipsAdmitted": 112,
        "chipsFree": 16,
        "idleCubes": 0,
        "tpuQuota": None,
    }
    assert [w["status"] for w in out["workloads"]] == ["admitted", "preempted", "admitted", "admitted"]
    assert out["cubes"][1]["pool"] == "tpu7-pool-2"
    assert out["cubes"][1]["placements"][0] == {
        "workload": "demos.subslicing",
        "unit": "demos.subslicing",
        "slice": 0,
        "topology": "2x2x2",
        "offset": [0, 0, 0],
        "extent": "2x2x2",
        "part": 0,
    }
    assert out["warnings"] == list(plan.warnings) and out["errors"] == []


def test_table() -> None:
    lines = run_plan(cubes(2)).table().splitlines()
    assert lines[0] == (
        "TPU plan: 2 x 4x4x4 cubes (tpu7x-standard-4t) = 128 chips provisioned; 240 requested, 112 admitted"
    )
    rows = {line.split()[0]: line.split()[1:6] for line in lines if line.startswith(("demos.", "serving."))}
    assert rows == {
        "demos.subslicing": ["2x2x2", "6/6", "48", "low-priority-1000", "admitted"],
        "demos.superslicing": ["4x4x8", "0/1", "128", "medium-priority-2000", "preempted"],
        "serving.prefill": ["2x2x2", "4/4", "32", "high-priority-3000", "admitted"],
        "serving.decode": ["2x2x2", "4/4", "32", "high-priority-3000", "admitted"],
    }
    cube_rows = [line.split()[:6] for line in lines if line.startswith(("0 ", "1 "))]
    assert cube_rows == [
        ["0", "tpu7-pool-1", "64/64", "serving.prefill", "0-3", "2x2x2"],
        ["1", "tpu7-pool-2", "48/64", "demos.subslicing", "0-5", "2x2x2"],
    ]


@pytest.mark.parametrize(
    ("overrides", "idle", "free"),
    [
        ({}, 0, 16),  # dev's mix: serving fills cube 0, the sub-slicing demo 48 of cube 1's 64 chips
        ({"tpu": {"cubes": 4}, **NO_DEMOS}, 3, 3 * 64),  # staging's shape: 4 + 4 groups of 2x2x2 fill one cube
        ({"tpu": {"cubes": 8}, **NO_DEMOS, "serving": {"prefill": {"replicas": 8}, "decode": {"replicas": 8}}}, 6, 384),
        ({"tpu": {"cubes": 3}, **NO_DEMOS, "serving": {"enabled": False}}, 3, 192),
    ],
)
def test_the_plan_counts_the_idle_cubes(overrides: dict[str, Any], idle: int, free: int) -> None:
    plan = run_plan(overrides)
    # derived from the placements, not from the request: a cube counts as idle only with no slice on it
    assert plan.idle_cubes == sum(1 for c in plan.cubes if not c.placements) == idle
    assert plan.chips_free == plan.chips_provisioned - sum(p.extent.chips for p in plan.placements()) == free
    assert plan.table().splitlines()[1] == (
        f"HEADROOM  {idle} of {len(plan.cubes)} cubes idle (no slice placed once every admitted workload runs; "
        f"reserved, so billed all the same); {free} of {plan.chips_provisioned} chips free"
    )
    assert plan.as_dict()["totals"]["idleCubes"] == idle


# --- the CLI on stack files -------------------------------------------------------------------------------------------


def test_cli_on_the_dev_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert plan_main(["plan", "--stack", "dev", *set_arguments("dev")]) == 0
    out = capsys.readouterr().out
    assert "2 x 4x4x4 cubes (tpu7x-standard-4t) = 128 chips provisioned; 112 requested, 112 admitted" in out
    rows = {line.split()[0]: line.split()[5] for line in out.splitlines() if line.startswith(("demos.", "serving."))}
    assert rows == {"demos.subslicing": "admitted", "serving.prefill": "admitted", "serving.decode": "admitted"}
    assert "tpu7-pool-1" in out and "tpu7-pool-2" in out
    # dev as shipped: everything fits, nothing to warn of (the super-slicing demo is the tour's own step)
    assert [line for line in out.splitlines() if line.startswith("warning: ")] == []

    # The same through the `python -m components` dispatcher, as JSON.
    assert components_main(["plan", "--stack", "dev", "--json", *set_arguments("dev")]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["chipsProvisioned"] == 128


def _stack_dir(tmp_path: Path, **config: Any) -> Path:
    """A project directory with the stack file Pulumi.pr.yaml: BASE and `config`, keys without the namespace."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    raw = {"gcp:project": "my-project-123", **{f"{P}:{k}": v for k, v in merge(BASE, config).items()}}
    (tmp_path / "Pulumi.pr.yaml").write_text(yaml.safe_dump({"config": raw}))
    return tmp_path


def test_cli_impossible_request_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _stack_dir(
        tmp_path, tpu={"cubes": 2}, demos={"superslicing": {"topology": "4x4x12"}}, hfToken={"secure": "v1:abc"}
    )
    assert plan_main(["--stack", "pr", "--dir", str(d)]) == 1
    captured = capsys.readouterr()
    assert "TPU plan:" in captured.out
    assert f"error: {P}:demos.superslicing.topology = '4x4x12' needs 3 cubes but tpu.cubes = 2" in captured.err


def test_cli_invalid_config_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _stack_dir(tmp_path, demos={"subslicing": {"topology": "2x2x3"}})
    assert plan_main(["plan", "--stack", "pr", "--dir", str(d)]) == 1
    assert f"{P}:demos.subslicing.topology = '2x2x3'" in capsys.readouterr().err
    assert plan_main(["plan", "--stack", "missing", "--dir", str(d)]) == 2
