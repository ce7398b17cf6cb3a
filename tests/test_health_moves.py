"""The move `python -m components health` proposes for a bad sub-block: where to, what the change preview says of
it, the steps when workloads run or pools are protected, no spare, and `--write`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.cli import health as cli
from tests.fakes import slice_
from tests.health_fixtures import DEGRADED, MAINTENANCE, copy_stack, no_preview, report, reservation, run, state


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    return copy_stack(tmp_path)


def test_a_degraded_sub_block_under_a_running_pool_with_a_spare_proposes_the_move(stack: Path) -> None:
    code, data = report(stack, reservation(sb_1=DEGRADED), state("DEGRADED"), preview=no_preview)
    assert code == 1
    assert data["proposal"] == {"key": "gke-tpu-slicing:tpu.subBlocks", "value": ["sb-3", "sb-2"]}
    cube = data["cubes"][0]
    assert (cube["status"], cube["moveTo"], cube["degradedNodes"]) == ("action", "sb-3", 1)
    assert cube["action"].startswith("move to sb-3: its sub-block is health DEGRADED")
    assert data["cubes"][1]["status"] == "ok"
    assert [w["name"] for w in cube["workloads"]] == [] and cube["slices"][0]["owner"] == "default/wl-sub"


def test_the_move_is_previewed_by_the_change_preview_and_written_only_when_asked(stack: Path) -> None:
    before = (stack / "Pulumi.dev.yaml").read_text()
    code, out, _ = run(stack, reservation(sb_1=DEGRADED), state("DEGRADED"))
    assert code == 1
    assert (stack / "Pulumi.dev.yaml").read_text() == before  # a report, not a change
    assert "proposed change: gke-tpu-slicing:tpu.subBlocks: [sb-3, sb-2]" in out
    # The change preview's own verdict: the first pool is replaced (its reservation affinity is ForceNew),
    # the second is not touched.
    preview = out.split("what the move does", 1)[1]
    replaced = [line.split()[1] for line in preview.splitlines() if line.strip().startswith("replace")]
    assert "capacity-tpu7-pool-1" in replaced and "teardown-tpu7-pool-1" in replaced
    assert not [name for name in replaced if "tpu7-pool-2" in name]
    assert "tpu7-pool-1 moves sb-1 -> sb-3: these workloads restart: default/wl-sub" in preview
    run(stack, reservation(sb_1=DEGRADED), state("DEGRADED"), "--write", preview=no_preview)
    written = (stack / "Pulumi.dev.yaml").read_text()
    assert yaml.safe_load(written)["config"]["gke-tpu-slicing:tpu"]["subBlocks"] == ["sb-3", "sb-2"]
    # Every comment and every other line stays.
    assert [line for line in written.splitlines() if "subBlocks" not in line] == before.splitlines()


NO_WORKLOADS = ("--set", "demos.subslicing.enabled=false", "--set", "serving.enabled=false")


def test_a_move_under_running_workloads_is_a_move_after_draining_as_the_preview_refuses_it(stack: Path) -> None:
    """The change preview refuses a pool's replacement while the stack runs queued workloads (teardown.py
    pool_refusals): the report says so, names the keys to turn off, and the three deployments in order."""
    code, data = report(stack, reservation(sb_1=DEGRADED), state("DEGRADED"))
    assert code == 1 and data["preview"]["rejected"] is True
    rejected = [c for c in data["preview"]["changes"] if c["action"] == "rejected"]
    assert [c["name"] for c in rejected] == ["teardown-pool-replacements"]
    assert data["nextAction"] == "move after draining"
    assert data["drainFirst"] == ["demos.subslicing.enabled", "serving.enabled"]  # dev runs no super-slicing demo
    off, move, on = data["steps"]
    assert "demos.subslicing.enabled: false, serving.enabled: false in Pulumi.dev.yaml" in off and "pulumi up" in off
    assert "tpu.subBlocks: [sb-3, sb-2]" in move
    assert "serving.enabled: true" in on
    _, text, _ = run(stack, reservation(sb_1=DEGRADED), state("DEGRADED"))
    assert "next step: move after draining" in text and "  1. turn the workloads off" in text
    # With the workloads off (step 1 deployed), the same move is a plain move, and the preview lets it through.
    code, data = report(stack, reservation(sb_1=DEGRADED), state("DEGRADED"), *NO_WORKLOADS)
    assert code == 1 and data["preview"]["rejected"] is False
    assert (data["nextAction"], data["drainFirst"], len(data["steps"])) == ("move", [], 1)
    # Nothing to move, or nothing a move fixes: no steps.
    assert report(stack, reservation(), state())[1]["nextAction"] == "none"
    no_spare = report(stack, reservation(2, sb_1=DEGRADED), state("DEGRADED"))[1]
    assert (no_spare["nextAction"], no_spare["steps"]) == ("other", [])


def test_a_move_of_a_protected_pool_is_a_move_after_unprotecting(stack: Path) -> None:
    """Staging and prod protect their pools (cluster.protect): Pulumi refuses the replacement the move is, so the
    steps turn protection off first and on again at the end, with the workloads when they run."""
    res, protect = reservation(sb_1=DEGRADED), ("--set", "cluster.protect=true")
    code, data = report(stack, res, state("DEGRADED"), *protect, *NO_WORKLOADS)
    assert code == 1 and data["preview"]["rejected"] is True
    (rejected,) = [c for c in data["preview"]["changes"] if c["action"] == "rejected"]
    assert rejected["name"] == "capacity-tpu7-pool-1" and rejected["reason"].startswith("protected")
    assert (data["nextAction"], data["drainFirst"], data["unprotectFirst"]) == (
        "move after unprotecting",
        [],
        ["cluster.protect"],
    )
    off, _, on = data["steps"]
    assert "cluster.protect: false" in off and "cluster.protect: true" in on
    data = report(stack, res, state("DEGRADED"), *protect)[1]
    assert data["nextAction"] == "move after draining"
    assert "demos.subslicing.enabled: false, serving.enabled: false, cluster.protect: false" in data["steps"][0]
    # The change preview of the move with step 1 deployed lets it through.
    data = report(stack, res, state("DEGRADED"), *NO_WORKLOADS)[1]
    assert data["preview"]["rejected"] is False and data["nextAction"] == "move"


def test_the_same_with_no_spare_says_so_and_what_else_helps(stack: Path) -> None:
    code, out, err = run(stack, reservation(2, sb_1=DEGRADED), state("DEGRADED"), preview=no_preview)
    assert (code, err) == (1, "")
    assert "no healthy free sub-block in block block-0 to move it to: its sub-block is health DEGRADED" in out
    assert "lower gke-tpu-slicing:tpu.cubes (fewer cubes), add capacity in another block" in out
    assert "proposed change" not in out
    # A spare used by something else is no spare.
    code, out, _ = run(stack, reservation(sb_1=DEGRADED, sb_3={"inUseCount": 4}), state(), preview=no_preview)
    assert code == 1 and "no healthy free sub-block" in out


def test_pending_maintenance_proposes_moving_before_it_starts(stack: Path) -> None:
    code, data = report(stack, reservation(sb_2=MAINTENANCE), state(), preview=no_preview)
    assert code == 1
    assert data["cubes"][1]["health"] == "HEALTHY, maintenance pending (3)"
    assert "without live migration the slices on it stop" in data["cubes"][1]["action"]
    assert data["proposal"]["value"] == ["sb-1", "sb-3"]


def test_write_replaces_an_existing_sub_blocks_entry_in_place(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.x.yaml"
    head = "config:\n  gcp:project: p  # mine\n  gke-tpu-slicing:tpu:\n    cubes: 2\n    # pinned by hand\n"
    tail = "    reservation:\n      name: r\n"
    path.write_text(head + "    subBlocks:\n      - sb-1\n      - sb-2\n" + tail)
    cli.write_sub_blocks(path, ["sb-3", "sb-2"])
    assert path.read_text() == head + "    subBlocks: [sb-3, sb-2]\n" + tail  # every other line, comments too, kept
    bare = tmp_path / "Pulumi.y.yaml"
    bare.write_text("config:\n  gcp:project: p\n")
    with pytest.raises(cli.HealthError, match=r"no `gke-tpu-slicing:tpu:` map .* set it by hand: \[sb-3\]"):
        cli.write_sub_blocks(bare, ["sb-3"])


def test_write_replaces_a_compact_sub_blocks_sequence_too(tmp_path: Path) -> None:
    """YAML lets a block sequence's dashes sit at its key's indent (`subBlocks:` then `- sb-1`), as people write it by
    hand: the whole entry is replaced, not its first line alone (which left the dashes behind, unparseable)."""
    path = tmp_path / "Pulumi.x.yaml"
    head, tail = "config:\n  gke-tpu-slicing:tpu:\n    cubes: 2\n", "    reservation:\n      name: r\n"
    path.write_text(head + "    subBlocks:\n    - sb-1\n    # the second\n    - sb-2\n" + tail)
    cli.write_sub_blocks(path, ["sb-3", "sb-2"])
    assert path.read_text() == head + "    subBlocks: [sb-3, sb-2]\n" + tail
    # A comment after the entry, at its indent, is the next key's: it stays.
    path.write_text(head + "    subBlocks: [sb-1, sb-2]\n    # the reservation\n" + tail)
    cli.write_sub_blocks(path, ["sb-3", "sb-2"])
    assert path.read_text() == head + "    subBlocks: [sb-3, sb-2]\n    # the reservation\n" + tail


def test_a_slice_creation_failure_is_a_retry_not_a_move_when_the_controller_retries_creation(stack: Path) -> None:
    """The slice controller counts a Slice whose Ready reason is SliceCreationFailed as failed only without the
    UseRetryMechanismForSliceCreation gate (xpk@250d4b3c slice/internal/core/slice.go:85-91 isError); with it GKE
    retries the creation and the workload is evicted only once the Slice is stale (FormationTimeout)."""
    failing = [slice_("default-wl-sub-0", "2x2x2", ["c1-0"], "SliceCreationFailed", owner="default/wl-sub")]
    code, data = report(stack, reservation(), state(slice_list=failing), preview=no_preview)
    assert code == 1 and data["cubes"][0]["action"] == "move to sb-3: a Slice on it is SliceCreationFailed"
    gate = ("--set", "addons.sliceController.featureGates[0]=UseRetryMechanismForSliceCreation")
    code, data = report(stack, reservation(), state(slice_list=failing), *gate, preview=no_preview)
    assert (code, data["proposal"]) == (0, None)
    assert data["cubes"][0]["action"] == "watch: Slices are forming or being dismantled"
