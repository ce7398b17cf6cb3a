"""Pools stay on their sub-blocks without state: as cubes grow, when a sub-block turns bad or goes into maintenance
under a running pool, when bound to the whole block, when pinned, and on the second `up` against what GKE returns."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.cli.mocks import FakeReservation
from components.cli.snapshot import records
from components.model.config.settings import ConfigError, load
from components.model.diff import engine, readback
from tests.graph_queries import tpu_pools
from tests.harness import rejected
from tests.reservation_fixtures import BLOCK_PATH, DEGRADED, IN_USE, MAINTENANCE, fake, on, pools, run_with
from tests.stack_config import CODELAB_MIX, REQUIRED_KEYS, P

NO_SUPER = {f"{P}:demos": {"superslicing": {"enabled": False}}}


def test_growing_from_two_to_three_cubes_keeps_the_existing_pools() -> None:
    first = run_with(fake(5, sb_1=IN_USE))  # sb-1 is someone else's: the pools start at sb-2
    assert first.error is None, first.error
    assert on(first) == {"tpu7-pool-1": "sb-2", "tpu7-pool-2": "sb-3"}
    # GKE now runs the two pools (their sub-blocks full), and sb-1 has been freed meanwhile.
    grown = fake(5, first, sb_2=IN_USE, sb_3=IN_USE)
    second = run_with(grown, {f"{P}:tpu": {"cubes": 3}})
    assert on(second) == {"tpu7-pool-1": "sb-2", "tpu7-pool-2": "sb-3", "tpu7-pool-3": "sb-1"}
    for name in ("tpu7-pool-1", "tpu7-pool-2"):
        assert pools(second)[name] == pools(first)[name], f"{name} would change"


def test_a_sub_block_that_turns_bad_under_a_running_pool_is_reported_not_moved() -> None:
    first = run_with(fake(4), NO_SUPER)

    def turned_bad() -> FakeReservation:  # both pools running, the sub-block under tpu7-pool-1 degraded
        return fake(4, first, sb_1={**IN_USE, **DEGRADED}, sb_2=IN_USE)

    run = run_with(turned_bad(), NO_SUPER)
    assert pools(run) == pools(first), "nothing moves by itself"
    warnings = [msg for level, msg in run.logs if level == "warn"]
    (warning,) = [w for w in warnings if "tpu7-pool-1" in w and "sb-1" in w]
    assert "health DEGRADED" in warning
    assert f"to move it, set {P}:tpu.subBlocks: [sb-3, sb-2] (replaces tpu7-pool-1: its slices stop)" in warning
    # Its capacity does not count: the plan has one cube.
    assert run.outputs["capacityPlan"]["totals"]["cubes"] == 1
    # Following the advice moves exactly that pool.
    after = run_with(turned_bad(), {**NO_SUPER, f"{P}:tpu": {"subBlocks": ["sb-3", "sb-2"]}})
    assert on(after) == {"tpu7-pool-1": "sb-3", "tpu7-pool-2": "sb-2"}
    assert pools(after)["tpu7-pool-2"] == pools(first)["tpu7-pool-2"]
    assert any("tpu7-pool-1 runs on sub-block sb-1 and is bound to sub-block sb-3" in m for _, m in after.logs)
    # A workload that needs that cube cannot come up: refused, with the way out in the message.
    rejected(
        run_with(turned_bad(), CODELAB_MIX),
        "demos.superslicing.topology = '4x4x8' needs 2 cubes but tpu.cubes = 2 (1 usable, 1 on unusable sub-blocks)",
        "Cubes not counted:\n    tpu7-pool-1 (cube 0) runs on sub-block sb-1, which is health DEGRADED",
        f"set {P}:tpu.subBlocks: [sb-3, sb-2]",
    )


def test_pending_maintenance_under_a_running_pool_is_a_warning_not_a_refused_up() -> None:
    # The codelab mix's super-slice needs both cubes. A maintenance notice on the sub-block under a running pool
    # (hosts that "have pending maintenance", not under it yet) must not refuse every `up` of the stack until it
    # is done, nor ask to replace the pool: the cube still counts and the preview says what is coming.
    first = run_with(fake(4), CODELAB_MIX)
    state = fake(4, first, sb_1={**IN_USE, **MAINTENANCE}, sb_2=IN_USE)
    run = run_with(state, CODELAB_MIX)
    assert pools(run) == pools(first)
    assert run.outputs["capacityPlan"]["totals"]["cubes"] == 2
    warnings = [msg for level, msg in run.logs if level == "warn"]
    assert any(
        "tpu7-pool-1 (cube 0) runs on sub-block sb-1, which has maintenance pending (3)" in w
        and "stop when the maintenance starts" in w
        for w in warnings
    ), warnings
    assert not any("to move it" in w for w in warnings), warnings
    # Once the maintenance runs, the cube is really gone: that still does not count.
    ongoing = fake(
        4, first, sb_1={**IN_USE, "reservationSubBlockMaintenances": [{"maintenanceOngoingCount": 3}]}, sb_2=IN_USE
    )
    rejected(
        run_with(ongoing, CODELAB_MIX), "tpu7-pool-1 (cube 0) runs on sub-block sb-1, which is maintenance ongoing (3)"
    )


def test_pools_bound_to_the_whole_block_before_stay_so_until_pinned() -> None:
    # A stack deployed before sub-blocks were read: its pools name the block, GKE put them on sb-1, sb-2.
    def deployed() -> FakeReservation:
        state = fake(3, sb_1=IN_USE, sb_2=IN_USE)
        affinity = {"consumeReservationType": "SPECIFIC_RESERVATION", "values": [BLOCK_PATH]}
        state.cluster_pools = [
            {"name": f"tpu7-pool-{i}", "nodeConfigs": [{"reservationAffinities": [affinity]}]} for i in (1, 2)
        ]
        return state

    run = run_with(deployed(), {f"{P}:tpu": {"cubes": 3}})
    inputs = pools(run)
    for name in ("tpu7-pool-1", "tpu7-pool-2"):  # not replaced: the same block-level binding, no label
        assert inputs[name]["nodeConfig"]["reservationAffinity"]["values"] == [BLOCK_PATH]
        assert "labels" not in inputs[name]["nodeConfig"]
        assert any(
            f"{name} is bound to the whole block block-0, not to one sub-block: it stays so" in m for _, m in run.logs
        )
    assert inputs["tpu7-pool-3"]["nodeConfig"]["labels"] == {"gke-tpu-slicing/reservation-sub-block": "sb-3"}
    assert run.outputs["cubeSubBlocks"] == {"tpu7-pool-1": None, "tpu7-pool-2": None, "tpu7-pool-3": "sb-3"}
    # Pinning a pool onto a sub-block GKE already fills (with that very pool, unknowably) is refused...
    refused = run_with(deployed(), {f"{P}:tpu": {"subBlocks": ["sb-3", "sb-2"]}})
    rejected(refused, "tpu7-pool-2 (cube 1) on sub-block sb-2: in use (16 VMs)")
    # ... onto a free one, announced as the replacement it is.
    moved = run_with(
        deployed(), {**NO_SUPER, f"{P}:serving": {"enabled": False}, f"{P}:tpu": {"cubes": 1, "subBlocks": ["sb-3"]}}
    )
    assert any(
        "tpu7-pool-1 runs on the whole block (not one sub-block) and is bound to sub-block sb-3 now: this update "
        "replaces the pool" in m
        for _, m in moved.logs
    )


def test_explicit_sub_blocks_pin_the_mapping_and_are_checked_against_the_reservation() -> None:
    run = run_with(fake(6), {f"{P}:tpu": {"subBlocks": ["sb-5", "sb-3"]}})
    assert on(run) == {"tpu7-pool-1": "sb-5", "tpu7-pool-2": "sb-3"}
    rejected(
        run_with(fake(3), {f"{P}:tpu": {"subBlocks": ["sb-1", "sb-7"]}}),
        f"{P}:tpu.subBlocks[1] = 'sb-7': not a sub-block of reservation tpu7x-reservation block block-0",
        "its sub-blocks: sb-1, sb-2, sb-3",
    )


def test_sub_blocks_settings_are_validated_before_anything_is_read() -> None:
    for sub_blocks, refused in [
        (["a"], r"tpu.subBlocks = \[.*one sub-block per cube: 2 names"),
        (["a", "a"], "distinct sub-block names"),
    ]:
        with pytest.raises(ConfigError, match=refused):
            load({**REQUIRED_KEYS, "tpu": {"reservation": {"name": "r"}, "subBlocks": sub_blocks}}, "my-tpu-project")
    with pytest.raises(ConfigError, match=r"only with a SPECIFIC reservation and one tpu\.reservation\.block"):
        load({**REQUIRED_KEYS, "tpu": {"reservation": {"name": "r", "block": ""}, "subBlocks": ["a", "b"]}}, "p-1234")


def test_the_second_up_finds_no_difference_in_the_pools_forcenew_blocks() -> None:
    # The pools as GKE stores them (components/model/diff/readback.py, its sources there) against what the program
    # declares, through the change preview's ForceNew table (checked against the provider's schema by
    # tests/test_provider_schema.py).
    run = run_with(fake(3))
    (policy,) = run.of_type(readback.POLICY)
    for pool in tpu_pools(run):
        assert pool.options["ignoreChanges"] == ["nodeConfig.advancedMachineFeatures"]
        declared = records([policy, pool])

        def second_up(config: list[Any], state: list[Any]) -> list[tuple[str, list[str]]]:
            changes = engine.diff(state, config, readback.SUPPRESSORS).changes
            return [(c.action, c.properties) for c in changes if c.action != "same"]

        assert second_up(declared, readback.read_back(declared)) == [], pool.name
        # The controls: the earlier declaration differs (type, missing tpuTopology) in place, and without the
        # ignore GKE's advanced machine features replace the pool, as another sub-block does.
        old = copy.deepcopy(declared)
        old[1]["inputs"]["placementPolicy"] = {"type": "COMPACT", "policyName": policy.inputs["name"]}
        assert second_up(old, readback.read_back(declared)) == [
            ("update", ["placementPolicy.tpuTopology", "placementPolicy.type"])
        ]
        unignored = copy.deepcopy(declared)
        unignored[1]["options"]["ignoreChanges"] = []
        assert second_up(unignored, readback.read_back(unignored)) == [
            ("replace", ["nodeConfig.advancedMachineFeatures"])
        ]
        moved = readback.read_back(declared)
        moved[1]["inputs"]["nodeConfig"]["reservationAffinity"]["values"] = [BLOCK_PATH]
        assert second_up(declared, moved) == [("replace", ["nodeConfig.reservationAffinity.values[0]"])]
