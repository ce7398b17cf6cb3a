"""Property-based tests of the TPU geometry and of the planner's placement and admission.

The oracles here are independent of the planner's data structures: partitions are checked as
aligned blocks in chip coordinates, overlaps by expanding every placement into its chips.
"""

from __future__ import annotations

import itertools
import math
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.model.tpu import geometry
from components.model.tpu.admission import Simulation
from components.model.tpu.geometry import Cube, GeometryError, SliceKind, Topology
from components.model.tpu.planner import Plan, Status, Workload, plan_workloads

TPU7X = geometry.system("tpu7x-standard-4t")
assert TPU7X.cube is not None
CUBE_SHAPES = TPU7X.partitions(TPU7X.cube)  # every node pool block the settings allow: 4x4x4 ... 2x2x1
PRIORITIES = {1000: "low-priority-1000", 2000: "medium-priority-2000", 3000: "high-priority-3000"}

FAST = settings(max_examples=150, deadline=None)
PLANS = settings(max_examples=250, deadline=None)


# ---------------------------------------------------------------------------------------------
# Geometry


@FAST
@given(st.lists(st.integers(1, 64), min_size=2, max_size=3))
def test_chips_are_the_product_of_the_dims(dims: list[int]) -> None:
    t = Topology.parse("x".join(map(str, dims)))
    assert t.dims == tuple(dims)
    assert t.chips == math.prod(dims)
    assert Topology.parse(str(t)) == t


@FAST
@given(st.sampled_from(sorted(geometry.SYSTEMS)), st.lists(st.integers(1, 8), min_size=3, max_size=3))
def test_vms_are_chips_over_chips_per_vm(machine_type: str, multiples: list[int]) -> None:
    system = geometry.system(machine_type)
    t = Topology(tuple(h * m for h, m in zip(system.host.dims, multiples, strict=False)))
    assert system.vms(t) == t.chips // system.chips_per_vm
    assert system.vms(t) * system.chips_per_vm == t.chips
    assert system.tensorcores(t) == t.chips * system.tensorcores_per_chip
    # One chip more along an axis that is not a whole host is not a whole number of VMs.
    axis = next((i for i, h in enumerate(system.host.dims) if h > 1), None)
    if axis is not None:
        bad = list(t.dims)
        bad[axis] += 1
        with pytest.raises(GeometryError):
            system.vms(Topology(tuple(bad)))


@FAST
@given(st.sampled_from(CUBE_SHAPES))
def test_partitions_halve_one_axis_per_level(cube_shape: Topology) -> None:
    cube = Cube(TPU7X, cube_shape)
    levels = cube.partitions()
    assert levels[0] == cube_shape and levels[-1] == TPU7X.host
    for i, (parent, child) in enumerate(itertools.pairwise(levels), start=1):
        changed = [a for a, (p, c) in enumerate(zip(parent.dims, child.dims, strict=True)) if p != c]
        assert len(changed) == 1 and parent.dims[changed[0]] == 2 * child.dims[changed[0]]
        assert child.count_in(cube_shape) == 2**i
        assert cube.classify(child).kind is SliceKind.SUB
    assert cube.vms == cube.chips // TPU7X.chips_per_vm


@FAST
@given(st.sampled_from(CUBE_SHAPES), st.lists(st.integers(1, 3), min_size=3, max_size=3))
def test_super_slices_take_whole_cubes(cube_shape: Topology, multiples: list[int]) -> None:
    cube = Cube(TPU7X, cube_shape)
    t = Topology(tuple(d * m for d, m in zip(cube_shape.dims, multiples, strict=True)))
    n = math.prod(multiples)
    if n > 1 and cube_shape != TPU7X.cube:
        with pytest.raises(GeometryError, match="super-slice only from whole 4x4x4 cubes"):
            cube.classify(t)
        return
    if n > 1 and list(t.dims) != sorted(t.dims):
        with pytest.raises(GeometryError, match="dimensions that do not decrease"):
            cube.classify(t)
        return
    s = cube.classify(t)
    assert s.cubes == n and s.chips == n * cube.chips and s.vms == n * cube.vms
    assert s.kind is (SliceKind.SUB if n == 1 else SliceKind.SUPER)


def test_super_slices_are_what_a_slice_takes() -> None:
    """GKE's Slice refuses a tpu7x topology whose dimensions decrease or that passes 9,216 chips (144 cubes)."""
    cube = Cube(TPU7X, Topology.parse("4x4x4"))
    for bad, why in (("4x8x4", "such as 4x4x8"), ("8x4x4", "such as 4x4x8"), ("4x4x580", "not 9280")):
        with pytest.raises(GeometryError, match=f"{bad} .*{why}"):
            cube.classify(Topology.parse(bad))
    assert cube.classify(Topology.parse("4x4x576")).cubes == 144


def test_super_slices_need_4x4x4_cubes() -> None:
    """GKE's slice controller takes a shape that is not a sub-slice as 4x4x4 cubes, each dimension a multiple of 4:
    2x4x8 on 2x4x4 pools was refused on the cluster; smaller pools keep their sub-slices."""
    cube = Cube(TPU7X, Topology.parse("2x4x4"))
    for bad in ("2x4x8", "4x4x4", "4x4x8"):
        with pytest.raises(GeometryError, match=f"{bad} would stitch .*4x4x4 cubes .*2x2x1, 2x2x2, 2x2x4, 2x4x4$"):
            cube.classify(Topology.parse(bad))
    with pytest.raises(GeometryError, match=r"^2x2x3 is not a partition of the 2x4x4 cube \(2x2x1, .*\)$"):
        cube.classify(Topology.parse("2x2x3"))
    assert [cube.classify(p).kind for p in cube.partitions()] == [SliceKind.SUB] * 4


# ---------------------------------------------------------------------------------------------
# Planner


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Cube, int, list[Workload], int | None]:
    cube = Cube(TPU7X, draw(st.sampled_from(CUBE_SHAPES)))
    n_cubes = draw(st.integers(1, 6))
    workloads = []
    for i in range(draw(st.integers(0, 7))):
        if cube.topology != TPU7X.cube or draw(st.booleans()):  # GKE super-slices 4x4x4 cubes only
            shape = draw(st.sampled_from(cube.partitions()))
        else:  # a super-slice: whole cubes along an axis that keeps it a Slice's shape, sometimes too many
            k = draw(st.integers(2, n_cubes + 1))
            d = cube.topology.dims
            shapes = [t for a in range(3) if list(t := (*d[:a], d[a] * k, *d[a + 1 :])) == sorted(t)]
            shape = Topology(draw(st.sampled_from(shapes)))
        value, slices = draw(st.sampled_from(sorted(PRIORITIES))), draw(st.integers(1, 6))
        gang, step = draw(st.booleans()), draw(st.integers(0, 3))
        workloads.append(Workload.of(cube, f"w{i}", shape, slices, PRIORITIES[value], value, gang=gang, step=step))
    quota = draw(st.none() | st.integers(0, n_cubes * cube.chips))
    return cube, n_cubes, workloads, quota


def _chips(offset: tuple[int, ...], extent: Topology) -> set[tuple[int, ...]]:
    return set(itertools.product(*(range(o, o + d) for o, d in zip(offset, extent.dims, strict=True))))


def _is_partition_node(cube: Cube, offset: tuple[int, ...], extent: Topology) -> bool:
    """One node of a partition level: that level's shape at a multiple of it, inside the cube."""
    return extent in cube.partitions() and all(
        o % d == 0 and o + d <= c for o, d, c in zip(offset, extent.dims, cube.topology.dims, strict=True)
    )


def _check(cube: Cube, n_cubes: int, workloads: list[Workload], quota: int | None, plan: Plan) -> None:
    assert len(plan.cubes) == n_cubes and plan.chips_provisioned == n_cubes * cube.chips
    by_key = {w.key: w for w in workloads}

    # Every admitted placement sits inside one partition; super-slices take whole cubes.
    for p in plan.placements():
        w = by_key[p.key]
        assert 0 <= p.cube < n_cubes
        assert _is_partition_node(cube, p.offset, p.extent), p
        if w.kind is SliceKind.SUB:
            assert p.extent == w.topology and p.part == 0
        else:
            assert p.extent == cube.topology and p.offset == (0,) * cube.topology.rank

    # Placements never overlap, and each cube's used chips are exactly its placements' chips.
    for c in plan.cubes:
        taken: set[tuple[int, ...]] = set()
        for p in c.placements:
            chips = _chips(p.offset, p.extent)
            assert not taken & chips, f"overlap in cube {c.index}: {p}"
            taken |= chips
        assert c.used_chips == len(taken) <= c.chips

    # Admission never exceeds capacity (nor the quota), and the totals add up.
    assert plan.chips_admitted == sum(len(_chips(p.offset, p.extent)) for p in plan.placements())
    assert plan.chips_admitted <= plan.chips_provisioned
    if quota is not None:
        assert plan.chips_admitted <= quota
    assert plan.chips_requested == sum(w.chips for w in workloads)

    for wp in plan.workloads:
        w = wp.workload
        assert len(wp.units) == w.kueue_workloads
        placed = [p for p in plan.placements() if p.key == w.key]
        # A super-slice is one slice in several cubes, each in a distinct cube.
        for index in {p.slice_index for p in placed}:
            parts = [p for p in placed if p.slice_index == index]
            assert len(parts) == w.slice.cubes and len({p.cube for p in parts}) == len(parts)
            assert sorted(p.part for p in parts) == list(range(len(parts)))
        assert len({p.slice_index for p in placed}) == wp.admitted_slices
        if w.gang:  # all or nothing
            assert wp.admitted_slices in (0, w.slices)
        for u in wp.units:
            mine = [p for p in placed if p.unit == u.label]
            if u.status is Status.ADMITTED:
                assert len(mine) == u.slices * w.slice.cubes
            else:
                assert mine == [] and u.reason and u.waiting_for
            assert (u.status is Status.PREEMPTED) == (u.preempted_by is not None)

    # Nobody is preempted by an equal or lower priority.
    for pr in plan.preemptions:
        assert pr.by_priority > pr.victim_priority, pr
        assert by_key[pr.by_key].priority_value == pr.by_priority
        assert by_key[pr.victim_key].priority_value == pr.victim_priority

    # The end state is stable: a waiting Kueue workload does not fit even if it preempted every
    # lower priority (otherwise the scheduler would have admitted it).
    for wp in plan.workloads:
        w = wp.workload
        block = w.topology if w.kind is SliceKind.SUB else cube.topology
        for u in wp.units:
            if u.status is Status.ADMITTED:
                continue
            kept = [p for p in plan.placements() if by_key[p.key].priority_value >= w.priority_value]
            free_blocks = 0
            for c in range(n_cubes):
                taken = set().union(*(_chips(p.offset, p.extent) for p in kept if p.cube == c))
                free_blocks += sum(
                    not taken & _chips(offset, block)
                    for offset in itertools.product(
                        *(range(0, n, d) for n, d in zip(cube.topology.dims, block.dims, strict=True))
                    )
                )
            kept_chips = sum(p.extent.chips for p in kept)
            quota_ok = quota is None or kept_chips + u.chips <= quota
            assert not (quota_ok and free_blocks >= u.slices * w.slice.cubes), (u, free_blocks)

    # Errors name the config key of every request that cannot fit even alone.
    for w in workloads:
        if w.slice.cubes > n_cubes or w.chips > n_cubes * cube.chips:
            assert any(e.startswith(f"gke-tpu-slicing:{w.key}.") for e in plan.errors), (w, plan.errors)


@PLANS
@given(scenarios())
def test_placement_and_admission_invariants(scenario: tuple[Cube, int, list[Workload], int | None]) -> None:
    cube, n_cubes, workloads, quota = scenario
    plan = plan_workloads(cube, n_cubes, workloads, quota=quota)
    _check(cube, n_cubes, workloads, quota, plan)
    assert plan_workloads(cube, n_cubes, workloads, quota=quota) == plan  # deterministic


@FAST
@given(scenarios())
def test_uncontended_requests_are_all_admitted(scenario: tuple[Cube, int, list[Workload], int | None]) -> None:
    """With a whole cube per slice, nothing waits, nothing is preempted, nothing is reported."""
    cube, _, workloads, _ = scenario
    enough = sum(w.slices * w.slice.cubes for w in workloads)
    plan = plan_workloads(cube, enough, workloads)
    assert plan.errors == () and plan.warnings == () and plan.preemptions == ()
    assert all(w.status is Status.ADMITTED for w in plan.workloads)
    assert plan.chips_admitted == plan.chips_requested


@FAST
@given(scenarios())
def test_skipping_hopeless_retries_changes_nothing(scenario: tuple[Cube, int, list[Workload], int | None]) -> None:
    """The scheduler skips a workload until a workload of at least its priority is evicted; retrying
    every pending workload on every pass gives the same plan."""
    cube, n_cubes, workloads, quota = scenario
    fast = plan_workloads(cube, n_cubes, workloads, quota=quota)
    with mock.patch.object(Simulation, "_stale", lambda self, u: True):
        slow = plan_workloads(cube, n_cubes, workloads, quota=quota)
    assert slow == fast
