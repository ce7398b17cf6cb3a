"""The capacity planner on the codelab's cases (SPEC "Capacity arithmetic"), Kueue's admission and preemption, and
the impossible requests it refuses; its outputs and CLI: test_planner_outputs.

Expected numbers are the SPEC's: a 4x4x4 cube = 64 chips = 16 VMs; 2x2x2 = 8 chips, 8 per cube;
4x4x8 = 128 chips = two cubes; sub-slicing 6 x 8 = 48 chips (low), super-slicing 128 (medium),
P/D serving 8 x 8 = 64 (high).
"""

from __future__ import annotations

import dataclasses

import pytest

from components.model.config.settings import ConfigError
from components.model.tpu import planner
from components.model.tpu.geometry import SliceKind, Topology
from components.model.tpu.partitions import PartitionTree
from components.model.tpu.planner import Plan, Status, Workload, plan_workloads
from tests.planner_fixtures import NO_DEMOS, cubes, run_plan, settings
from tests.stack_config import P

NO_SERVING = {"serving": {"enabled": False}}


def statuses(plan: Plan) -> dict[str, str]:
    return {w.key: w.status.value for w in plan.workloads}


# --- geometry the codelab relies on -----------------------------------------------------------------------------------


def test_spec_arithmetic() -> None:
    s = settings()
    cube = s.tpu.cube
    assert (cube.chips, cube.vms) == (64, 16)
    small, big = s.slice_of("2x2x2"), s.slice_of("4x4x8")
    assert (small.kind, small.chips, small.vms, small.cubes) == (SliceKind.SUB, 8, 2, 1)
    assert (big.kind, big.chips, big.vms, big.cubes) == (SliceKind.SUPER, 128, 32, 2)
    w = {x.key: x for x in planner.workloads_from_settings(s)}
    assert list(w) == ["demos.subslicing", "demos.superslicing", "serving.prefill", "serving.decode"]
    assert w["demos.subslicing"].chips == 48 and w["demos.subslicing"].gang
    assert w["demos.superslicing"].chips == 128 and w["demos.superslicing"].slices == 1
    assert w["serving.prefill"].chips + w["serving.decode"].chips == 64
    assert not w["serving.prefill"].gang and w["serving.prefill"].kueue_workloads == 4
    assert w["serving.decode"].name == "kueue-vllm-decode-model-streamer"
    assert [x.priority_value for x in w.values()] == [1000, 2000, 3000, 3000]


def test_partition_tree_of_the_tpu7x_cube() -> None:
    tree = PartitionTree(settings().tpu.cube)
    assert [str(t) for t in tree.levels] == ["4x4x4", "2x4x4", "2x2x4", "2x2x2", "2x2x1"]
    assert [tree.slots(t) for t in tree.levels] == [1, 2, 4, 8, 16]
    # The eight 2x2x2 nodes are the eight aligned 2x2x2 blocks of the cube, each once.
    assert sorted(tree.offsets[3]) == sorted((x, y, z) for x in (0, 2) for y in (0, 2) for z in (0, 2))


def test_2x2x2_gives_8_slots_per_cube() -> None:
    assert Topology.parse("2x2x2").count_in(Topology.parse("4x4x4")) == 8
    only_sub = [NO_SERVING, {"demos": {"superslicing": {"enabled": False}}}]
    full = run_plan(*only_sub, cubes(1), {"demos": {"subslicing": {"replicas": 8}}})
    assert full.errors == () and full.warnings == ()
    assert statuses(full) == {"demos.subslicing": "admitted"}
    (cube,) = full.cubes
    assert (cube.used_chips, cube.chips, cube.pool) == (64, 64, "tpu7-pool-1")
    assert sorted(p.offset for p in cube.placements) == sorted(PartitionTree(settings().tpu.cube).offsets[3])

    # Two cubes hold 16; a 17th slice makes the all-or-nothing JobSet impossible.
    assert statuses(run_plan(*only_sub, cubes(2), {"demos": {"subslicing": {"replicas": 16}}})) == {
        "demos.subslicing": "admitted"
    }
    over = run_plan(*only_sub, cubes(2), {"demos": {"subslicing": {"replicas": 17}}})
    assert len(over.errors) == 1
    assert over.errors[0].startswith(f"{P}:demos.subslicing.replicas = 17: 17 x 2x2x2 = 136 chips, more than the 128")
    assert statuses(over) == {"demos.subslicing": "pending"}


def test_4x4x8_needs_exactly_2_cubes() -> None:
    only_super = [NO_SERVING, {"demos": {"subslicing": {"enabled": False}}}]
    one = run_plan(*only_super, cubes(1))
    assert one.errors == (
        f"{P}:demos.superslicing.topology = '4x4x8' needs 2 cubes but tpu.cubes = 1 "
        "(a super-slice takes whole 4x4x4 cubes; raise tpu.cubes or shrink the topology)",
    )
    assert statuses(one) == {"demos.superslicing": "pending"}

    two = run_plan(*only_super, cubes(2))
    assert two.errors == () and statuses(two) == {"demos.superslicing": "admitted"}
    parts = [(p.cube, p.part, str(p.extent), p.offset) for p in two.placements()]
    assert parts == [(0, 0, "4x4x4", (0, 0, 0)), (1, 1, "4x4x4", (0, 0, 0))]
    assert [c.used_chips for c in two.cubes] == [64, 64]

    three = run_plan(*only_super, cubes(3))
    assert three.errors == () and [c.used_chips for c in three.cubes] == [64, 64, 0]


def test_codelab_three_workloads_on_two_cubes() -> None:
    """Sub-slicing (48 chips, low), super-slicing (128, medium), serving (64, high) on 2 cubes.

    The codelab applies them in that order: medium preempts low, high preempts medium. In the end
    the serving stack holds one cube, the super-slice waits (preempted, pending again), and the
    sub-slicing JobSet is readmitted into the other cube's slots.
    """
    plan = run_plan(cubes(2))
    assert plan.errors == ()
    assert (plan.chips_requested, plan.chips_provisioned, plan.chips_admitted) == (240, 128, 112)
    assert statuses(plan) == {
        "demos.subslicing": "admitted",
        "demos.superslicing": "preempted",
        "serving.prefill": "admitted",
        "serving.decode": "admitted",
    }
    by_cube = {c.index: {p.key for p in c.placements} for c in plan.cubes}
    assert by_cube == {0: {"serving.prefill", "serving.decode"}, 1: {"demos.subslicing"}}
    assert [c.used_chips for c in plan.cubes] == [64, 48]
    sup = plan.workload("demos.superslicing")
    assert sup.admitted_slices == 0 and "pending" in sup.reason
    assert plan.unit("demos.superslicing").preempted_by == "serving.prefill[0]"
    assert [(p.by, p.victim) for p in plan.preemptions] == [
        ("demos.superslicing", "demos.subslicing"),
        ("serving.prefill[0]", "demos.superslicing"),
    ]
    # The warnings name who will be preempted or pending, and by whom.
    assert len(plan.warnings) == 2
    sub_w, sup_w = plan.warnings
    assert sub_w.startswith(f"{P}:demos.subslicing (kueue-jobset-simple-subslicing, 6 x 2x2x2 = 48 chips")
    assert "preempted by demos.superslicing (medium-priority-2000), then readmitted" in sub_w
    assert sup_w.startswith(f"{P}:demos.superslicing (kueue-jobset-simple-superslicing, 1 x 4x4x8 = 128 chips")
    assert "will be preempted by serving.prefill (high-priority-3000) and stay pending" in sup_w
    assert "needs 2 free 4x4x4 cubes, 0 free" in sup_w
    assert "held by serving.prefill[0-3], serving.decode[0-3] (higher priority)" in sup_w


def test_codelab_mix_arriving_at_once_leaves_the_super_slice_pending() -> None:
    """Same three workloads created together (one `pulumi up`): the queue runs in priority order,
    so the super-slice is never admitted and nothing is preempted; the final layout is the same."""
    s = settings(cubes(2))
    at_once = [dataclasses.replace(w, step=0) for w in planner.workloads_from_settings(s)]
    plan = plan_workloads(s.tpu.cube, 2, at_once)
    assert statuses(plan)["demos.superslicing"] == "pending"
    assert statuses(plan)["demos.subslicing"] == "admitted"
    assert plan.preemptions == ()
    assert {c.index: {p.key for p in c.placements} for c in plan.cubes} == {
        0: {"serving.prefill", "serving.decode"},
        1: {"demos.subslicing"},
    }
    assert any("demos.superslicing" in w and "will stay pending" in w for w in plan.warnings)


def test_enough_cubes_admit_everything_without_warnings() -> None:
    plan = run_plan(cubes(4))
    assert plan.errors == () and plan.warnings == () and plan.preemptions == ()
    assert set(statuses(plan).values()) == {"admitted"}
    assert plan.chips_admitted == plan.chips_requested == 240
    # Best fit keeps whole cubes for the super-slice: the 2x2x2 slices share cubes.
    assert sorted(c.used_chips for c in plan.cubes) == [48, 64, 64, 64]


# --- Kueue semantics: LWS replica groups one by one, JobSets all or nothing -------------------------------------------


def test_lws_replica_groups_are_admitted_one_by_one() -> None:
    """10 prefill groups on one cube: 8 run. The role alone asks for more than the reservation, which
    is an error on serving.prefill.replicas; the plan still shows what Kueue would do."""
    plan = run_plan(NO_DEMOS, cubes(1), {"serving": {"prefill": {"replicas": 10}}})
    prefill, decode = plan.workload("serving.prefill"), plan.workload("serving.decode")
    assert (prefill.status, prefill.admitted_slices, prefill.admitted_chips) == (Status.PARTIAL, 8, 64)
    assert [u.status.value for u in prefill.units] == ["admitted"] * 8 + ["pending"] * 2
    assert prefill.reason.startswith("8/10 replica groups admitted; serving.prefill[8-9] pending")
    # Decode has the same priority: it waits and preempts nothing.
    assert (decode.status, decode.admitted_slices) == (Status.PENDING, 0)
    assert plan.preemptions == ()
    assert plan.errors == (
        f"{P}:serving.prefill.replicas = 10: 10 x 2x2x2 = 80 chips, more than the 64 chips of tpu.cubes = 1 "
        "(1 x 4x4x4, room for 8 such slices); 2 replica groups could never be admitted",
    )
    (decode_w,) = [w for w in plan.warnings if "serving.decode" in w]
    assert "4 of 4 replica groups (serving.decode[0-3]) will stay pending" in decode_w
    assert "same priority high-priority-3000, which does not preempt" in decode_w


def test_lws_partial_admission_is_a_warning_when_each_role_fits() -> None:
    plan = run_plan(NO_DEMOS, cubes(2), {"serving": {"prefill": {"replicas": 10}, "decode": {"replicas": 8}}})
    assert plan.errors == ()
    assert plan.workload("serving.prefill").status is Status.ADMITTED
    assert plan.workload("serving.decode").admitted_slices == 6
    (warning,) = [w for w in plan.warnings if "stay pending" in w]
    assert "serving.decode" in warning and "2 of 8 replica groups (serving.decode[6-7]) will stay pending" in warning
    # The reservation is full: neither role could roll to a new set without deleting its running groups first.
    assert sorted(r.key for r in plan.rollouts if not r.create_first) == ["serving.decode", "serving.prefill"]
    assert sum("cannot keep it serving" in w for w in plan.warnings) == 2


def test_jobset_is_all_or_nothing() -> None:
    """A 10-slice low JobSet (cube 0 and 2 slots of cube 1) is admitted first; serving fills cube 1's
    6 free slots, then decode[2] needs room and evicts the whole JobSet, which cannot come back
    piecemeal into the 8 free slots: a cube stays idle."""
    plan = run_plan(cubes(2), {"demos": {"superslicing": {"enabled": False}, "subslicing": {"replicas": 10}}})
    sub = plan.workload("demos.subslicing")
    assert (sub.status, sub.admitted_slices) == (Status.PREEMPTED, 0)
    assert plan.unit("demos.subslicing").preempted_by == "serving.decode[2]"
    assert [c.used_chips for c in plan.cubes] == [0, 64]
    assert "needs 10 free 2x2x2 partitions, 8 free" in sub.reason


def test_preemption_is_minimal_and_takes_lowest_priority_most_recent_first() -> None:
    """L (low, 1 slice) then A (medium, 15 slices) fill both cubes; H (high) needs one whole cube.
    Removing L first does not free a cube, removing A does; L is put back, so only A is preempted."""
    cube = settings().tpu.cube
    plan = plan_workloads(
        cube,
        2,
        [
            Workload.of(cube, "l", "2x2x2", 1, "low", 1000, gang=True, step=0),
            Workload.of(cube, "a", "2x2x2", 15, "medium", 2000, gang=True, step=1),
            Workload.of(cube, "h", "4x4x4", 1, "high", 3000, gang=True, step=2),
        ],
    )
    assert [(p.by, p.victim) for p in plan.preemptions] == [("h", "a")]
    assert statuses(plan) == {"l": "admitted", "a": "preempted", "h": "admitted"}
    assert {p.key: p.cube for p in plan.placements()} == {"l": 0, "h": 1}


def test_no_preemption_unless_it_makes_room() -> None:
    """A medium super-slice cannot get 2 cubes while high serving holds one: the low JobSet in the
    other cube is left alone."""
    plan = run_plan(cubes(2), {"demos": {"subslicing": {"replicas": 2}}})
    assert statuses(plan)["demos.subslicing"] == "admitted"
    assert plan.unit("demos.superslicing").status is Status.PREEMPTED
    assert all(p.by_priority > p.victim_priority for p in plan.preemptions)


def test_equal_priority_never_preempts() -> None:
    low = {"priority": "low-priority-1000"}
    plan = run_plan(NO_SERVING, cubes(2), {"demos": {"subslicing": {"replicas": 9, **low}, "superslicing": low}})
    assert statuses(plan) == {"demos.subslicing": "admitted", "demos.superslicing": "pending"}
    assert plan.preemptions == ()


def test_kueue_tpu_quota_limits_admission() -> None:
    plan = run_plan(NO_DEMOS, cubes(2), {"kueue": {"tpuQuota": 40}})
    assert plan.chips_admitted == 40 and plan.errors == ()
    assert plan.workload("serving.decode").admitted_slices == 1
    reason = plan.workload("serving.decode").reason
    assert "needs 8 chips of kueue.tpuQuota = 40, 40 of which are held by workloads it cannot preempt" in reason


# --- impossible requests fail the preview, naming the config key ------------------------------------------------------


def test_super_slice_larger_than_the_cubes() -> None:
    plan = run_plan(cubes(2), {"demos": {"superslicing": {"topology": "4x4x12"}}})
    assert plan.errors[0].startswith(f"{P}:demos.superslicing.topology = '4x4x12' needs 3 cubes but tpu.cubes = 2")
    assert not plan.ok and "impossible TPU request (1 problem)" in plan.error_message()


def test_topology_that_fits_no_partition_is_a_config_error() -> None:
    for bad in ("4x2x2", "2x2x3", "4x4x6", "4x8x4"):
        with pytest.raises(ConfigError) as err:
            settings({"demos": {"subslicing": {"topology": bad}}})
        assert f"{P}:demos.subslicing.topology = '{bad}'" in str(err.value)
    with pytest.raises(ConfigError, match=f"{P}:serving.decode.topology = '2x4x2'"):
        settings({"serving": {"decode": {"topology": "2x4x2"}}})


def test_a_super_slice_on_smaller_cubes_is_a_config_error() -> None:
    """Every workload spanning cubes is refused on 2x4x4 pools at once, naming the key, the value, what is allowed."""
    with pytest.raises(ConfigError) as err:
        settings(
            {
                "tpu": {"cubeTopology": "2x4x4", "cubes": 4},
                "demos": {"superslicing": {"enabled": True, "topology": "2x4x8"}},
                "serving": {"decode": {"topology": "4x4x4"}},
            }
        )
    for key, value in (("demos.superslicing.topology", "2x4x8"), ("serving.decode.topology", "4x4x4")):
        assert (
            f"{P}:{key} = '{value}': {value} would stitch 2 cubes of 2x4x4, but GKE forms a super-slice only "
            "from whole 4x4x4 cubes (tpu.cubeTopology: 4x4x4)" in str(err.value)
        )


def test_more_chips_than_the_reservation() -> None:
    plan = run_plan(cubes(1), {"demos": {"subslicing": {"replicas": 12}}})
    (error,) = [e for e in plan.errors if "subslicing" in e]
    assert error.startswith(f"{P}:demos.subslicing.replicas = 12: 12 x 2x2x2 = 96 chips, more than the 64 chips")
    assert "all-or-nothing" in error


def test_no_cubes_with_workloads_enabled() -> None:
    plan = run_plan({"tpu": {"cubes": 0, "reservation": {"name": None}}, "zone": "us-central1-ai1a"})
    assert plan.errors == (
        f"{P}:tpu.cubes = 0: no TPU capacity is provisioned, but demos.subslicing, demos.superslicing, "
        "serving.prefill, serving.decode are enabled; raise tpu.cubes or disable them",
    )
    assert plan.cubes == () and plan.chips_admitted == 0
    nothing = run_plan({"tpu": {"cubes": 0}, "zone": "us-central1-ai1a"}, NO_DEMOS, NO_SERVING)
    assert nothing.errors == () and nothing.workloads == ()


def test_quota_below_one_workload() -> None:
    plan = run_plan(cubes(2), {"kueue": {"tpuQuota": 32}})
    assert f"{P}:kueue.tpuQuota = 32: demos.subslicing needs 48 chips at once" in "\n".join(plan.errors)
    assert f"{P}:kueue.tpuQuota = 32: demos.superslicing needs 128 chips at once" in "\n".join(plan.errors)
