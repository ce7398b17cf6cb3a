"""Capacity and slice planning at preview time: which slices land where, and who waits.

Pure Python (no Pulumi imports), so `pulumi preview` and `python -m components plan` share it.

The model follows Kueue with topology-aware scheduling (TAS) and the GKE slice controller:

* Each cube (one TPU node pool, 4x4x4 on tpu7x) is a binary tree of nested partitions
  (`Cube.partitions()`: 4x4x4 > 2x4x4 > 2x2x4 > 2x2x2 > 2x2x1, each level halves one axis); GKE labels
  the nodes of every level with `cloud.google.com/gke-tpu-partition-<shape>-id`. A sub-slice of shape S
  occupies exactly one tree node at S's level; a node that overlaps an occupied one is unavailable
  (buddy allocation). A super-slice takes `Slice.cubes` whole free cubes, stitched by OCS.
* Placement is best fit, to keep whole cubes free for super-slices: the free node inside the smallest
  free block, then the most-filled cube, then the leftmost node.
* A Kueue workload is admitted all-or-nothing. A JobSet (the demos) is ONE Kueue workload whose slices
  are admitted together (`Workload.gang`); a LeaderWorkerSet (a serving role) is one Kueue workload PER
  replica group, each group one slice, admitted independently.
* Arrival follows the codelab: sub-slicing, then super-slicing, then the serving stack (`Workload.step`;
  workloads of one step arrive together). After each step the queue is scheduled: pending workloads in
  priority order (higher first, then arrival), each admitted where it fits. One that does not fit may
  preempt admitted workloads of STRICTLY lower priority (ClusterQueue `withinClusterQueue: LowerPriority`):
  candidates lowest priority first, most recently admitted first, removed until it fits; then, as in
  Kueue's minimal preemption, candidates are put back (latest removed first) when it still fits without
  them. If removing every candidate is not enough, nothing is preempted. Preempted workloads re-queue and
  are retried like any pending one. The optional ClusterQueue TPU quota (`kueue.tpuQuota`) is enforced too.

Final status per Kueue workload: `admitted`, `pending` (never admitted) or `preempted` (admitted once,
evicted, not readmitted: in Kueue terms pending again with an Evicted/Preempted condition).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from components.model.config.settings import Settings
from components.model.serving.deployed import DeployedRole
from components.model.tpu.admission import Simulation, Unit
from components.model.tpu.demand import Workload, workloads_from_settings
from components.model.tpu.elastic import plan_elastic, slot_workloads, with_elastic
from components.model.tpu.geometry import Cube, SliceKind
from components.model.tpu.partitions import PartitionTree, PlanError
from components.model.tpu.report import (
    CubePlan,
    Placement,
    Plan,
    Preemption,
    RolloutPlan,
    Status,
    UnitPlan,
    WorkloadPlan,
    ranges,
)
from components.model.tpu.reservation import Assignment
from components.model.tpu.reservation import config_key as _qualified
from components.model.tpu.rollout_room import rollouts

# The public API of the planner; the types live in demand.py, partitions.py and report.py.
__all__ = [
    "Plan",
    "PlanError",
    "RolloutPlan",
    "Status",
    "Workload",
    "plan",
    "plan_workloads",
    "rollouts",
    "workloads_from_settings",
]


def _describe(w: Workload) -> str:
    return f"{_qualified(w.key)} ({w.name}, {w.slices} x {w.topology} = {w.chips} chips, {w.priority})"


def _errors(
    cube: Cube, cubes: int, quota: int | None, workloads: Sequence[Workload], tree: PartitionTree, unusable: int = 0
) -> list[str]:
    if not workloads:
        return []
    if cubes == 0:
        enabled = f"{', '.join(w.key for w in workloads)} {'is' if len(workloads) == 1 else 'are'} enabled"
        key = _qualified("tpu.cubes")
        if unusable:
            why = "none of the cubes is on a usable sub-block"
            return [f"{key} = {unusable}: {why}, but {enabled} (see the sub-block warnings)"]
        return [f"{key} = 0: no TPU capacity is provisioned, but {enabled}; raise tpu.cubes or disable them"]
    out = []
    # With cubes on unusable sub-blocks, "tpu.cubes = N" below reads as the usable count.
    cubes_text = f"{cubes + unusable} ({cubes} usable, {unusable} on unusable sub-blocks)" if unusable else str(cubes)
    provisioned = cubes * cube.chips
    for w in workloads:
        s = w.slice
        if s.kind is SliceKind.SUPER and s.cubes > cubes:
            out.append(
                f"{_qualified(w.key)}.topology = {str(w.topology)!r} needs {s.cubes} cubes "
                f"but tpu.cubes = {cubes_text} "
                f"(a super-slice takes whole {cube.topology} cubes; raise tpu.cubes or shrink the topology)"
            )
            continue
        if w.chips > provisioned:
            slots = cubes if s.kind is SliceKind.SUPER else cubes * tree.slots(w.topology)
            fit = slots // s.cubes if s.kind is SliceKind.SUPER else slots
            consequence = (
                "it is admitted all-or-nothing, so it would stay pending forever"
                if w.gang
                else f"{w.slices - fit} replica group{'s' if w.slices - fit != 1 else ''} could never be admitted"
            )
            out.append(
                f"{_qualified(w.key)}.replicas = {w.slices}: {w.slices} x {w.topology} = {w.chips} chips, more than "
                f"the {provisioned} chips of tpu.cubes = {cubes_text} ({cubes} x {cube.topology}, room for {fit} such "
                f"slice{'s' if fit != 1 else ''}); {consequence}"
            )
            continue
        unit_chips = w.chips if w.gang else s.chips
        if quota is not None and unit_chips > quota:
            out.append(
                f"{_qualified('kueue.tpuQuota')} = {quota}: {w.key} needs {unit_chips} chips at once "
                f"({'all its slices together' if w.gang else 'one replica group'}), so it could never be admitted"
            )
    return out


def plan_workloads(
    cube: Cube,
    cubes: int,
    workloads: Sequence[Workload],
    *,
    quota: int | None = None,
    pools: Sequence[str] | None = None,
    sub_blocks: Assignment | None = None,
) -> Plan:
    """Places `workloads` into `cubes` cubes of shape `cube` and simulates Kueue admission (see the module doc).

    `sub_blocks`: the cube-to-sub-block mapping; its unusable cubes are left out of the simulation
    (`cubes` and `pools` count the usable ones only).
    """
    tree = PartitionTree(cube)
    pool_names = list(pools) if pools is not None else [f"cube-{i + 1}" for i in range(cubes)]
    if len(pool_names) != cubes:
        raise PlanError(f"{len(pool_names)} pool names for {cubes} cubes")
    if len({w.key for w in workloads}) != len(workloads):
        raise PlanError("workload keys must be unique")
    sim = Simulation(tree, cubes, quota)

    units: list[Unit] = []
    for w in workloads:
        level = 0 if w.kind is SliceKind.SUPER else tree.level_of(w.topology)
        per_slice = w.slice.cubes if w.kind is SliceKind.SUPER else 1
        if w.gang:
            if w.slices:
                units.append(Unit(w, None, 0, w.slices, level, per_slice, len(units)))
        else:
            for g in range(w.slices):
                units.append(Unit(w, g, g, 1, level, per_slice, len(units)))

    queue: list[Unit] = []
    for step in sorted({u.workload.step for u in units}):
        sim.step = step
        queue.extend(u for u in units if u.workload.step == step)
        sim.schedule(queue)

    placements: list[list[Placement]] = [[] for _ in range(cubes)]
    unit_plans: dict[str, list[UnitPlan]] = {w.key: [] for w in workloads}
    for u in units:
        unit_plans[u.workload.key].append(_unit_plan(sim, u))
        for p in _placements(tree, u):
            placements[p.cube].append(p)
    plans = [_workload_plan(w, tuple(unit_plans[w.key])) for w in workloads]
    warnings = [text for w in workloads for text in _contention_warning(w, unit_plans[w.key], sim.preemptions)]

    order = {w.key: i for i, w in enumerate(workloads)}
    cube_plans = tuple(
        CubePlan(
            index=i,
            pool=pool_names[i],
            chips=cube.chips,
            used_chips=sim.occ[i].bit_count() * sim.host_chips,
            placements=tuple(sorted(placements[i], key=lambda p: (order[p.key], p.slice_index, p.part))),
        )
        for i in range(cubes)
    )
    return Plan(
        machine_type=cube.system.machine_type,
        cube_topology=cube.topology,
        cube_chips=cube.chips,
        quota=quota,
        cubes=cube_plans,
        workloads=tuple(plans),
        preemptions=tuple(sim.preemptions),
        errors=tuple(_errors(cube, cubes, quota, workloads, tree, len(sub_blocks.unusable) if sub_blocks else 0)),
        warnings=tuple([*(sub_blocks.warnings if sub_blocks else ()), *warnings]),
        sub_blocks=sub_blocks,
    )


def _placements(tree: PartitionTree, u: Unit) -> list[Placement]:
    w = u.workload
    if not u.admitted:
        return []
    super_slice = w.kind is SliceKind.SUPER
    return [
        Placement(
            key=w.key,
            unit=u.label,
            slice_index=u.first_slice + i // u.per_slice,
            topology=w.topology,
            cube=cube,
            offset=tree.offsets[level][index],
            extent=tree.levels[level],
            part=i % u.per_slice if super_slice else 0,
        )
        for i, (cube, level, index) in enumerate(u.nodes)
    ]


def _unit_plan(sim: Simulation, u: Unit) -> UnitPlan:
    w = u.workload
    used = tuple(sorted({c for c, _, _ in u.nodes}))
    if u.admitted:
        reason = f"in cube{'s' if len(used) > 1 else ''} {', '.join(str(c) for c in used)}"
        victims = list(dict.fromkeys(p.victim_key for p in sim.preemptions if p.by == u.label))
        if victims:
            reason += f" after preempting {', '.join(victims)}"
        if u.readmitted_after:
            reason += f"; was preempted by {u.readmitted_after[-1].label}, then readmitted"
        return UnitPlan(u.label, w.key, u.group, u.slices, u.chips, Status.ADMITTED, reason, None, used)
    blocked = sim.blocked_reason(u)
    if u.ever_admitted:
        assert u.preempted_by is not None
        by = u.preempted_by
        reason = f"preempted by {by.label} ({by.workload.priority}); pending since: {blocked}"
        return UnitPlan(u.label, w.key, u.group, u.slices, u.chips, Status.PREEMPTED, reason, by.label, (), blocked)
    reason = f"pending: {blocked}"
    return UnitPlan(u.label, w.key, u.group, u.slices, u.chips, Status.PENDING, reason, None, (), blocked)


def _workload_plan(w: Workload, units: tuple[UnitPlan, ...]) -> WorkloadPlan:
    admitted = [p for p in units if p.status is Status.ADMITTED]
    waiting = [p for p in units if p.status is not Status.ADMITTED]
    if not waiting:
        status = Status.ADMITTED
    elif admitted:
        status = Status.PARTIAL
    elif any(p.status is Status.PREEMPTED for p in waiting):
        status = Status.PREEMPTED
    else:
        status = Status.PENDING
    if not units:
        reason = "no slices requested"
    elif w.gang:
        reason = units[0].reason
    elif not waiting:
        used = sorted({c for p in units for c in p.cubes})
        reason = f"{len(units)}/{len(units)} replica groups in cube{'s' if len(used) > 1 else ''} " + ", ".join(
            str(c) for c in used
        )
    else:
        reason = f"{len(admitted)}/{len(units)} replica groups admitted; {_label_ranges(waiting)} {waiting[0].reason}"
    admitted_slices = sum(p.slices for p in admitted)
    return WorkloadPlan(w, status, reason, admitted_slices, admitted_slices * w.slice.chips, units)


def _label_ranges(units: Sequence[UnitPlan]) -> str:
    key = units[0].key
    groups = [u.group for u in units if u.group is not None]
    return f"{key}[{ranges(groups)}]" if groups else key


def _contention_warning(w: Workload, units: Sequence[UnitPlan], preemptions: Sequence[Preemption]) -> list[str]:
    """One warning for a workload that will be preempted or left pending, naming who takes its place."""
    waiting = [u for u in units if u.status is not Status.ADMITTED]
    hit = [p for p in preemptions if p.victim_key == w.key]
    if not waiting and not hit:
        return []
    preemptors: dict[str, str] = {}
    for p in hit:
        preemptors.setdefault(p.by_key, p.by_priority_class)
    by_text = ", ".join(f"{k} ({c})" for k, c in preemptors.items())
    subject = _describe(w)
    if not waiting:
        return [f"{subject} will be preempted by {by_text}, then readmitted"]
    if not w.gang:
        subject += f": {len(waiting)} of {len(units)} replica groups ({_label_ranges(waiting)})"
    final = {u.preempted_by for u in waiting if u.preempted_by}
    if final:
        last = {p.by_key: p.by_priority_class for p in hit if p.by in final}
        text = f"{subject} will be preempted by {', '.join(f'{k} ({c})' for k, c in last.items())} and stay pending"
    else:
        text = f"{subject} will stay pending"
        if hit:
            text += f" (preempted by {by_text} on the way)"
    return [f"{text}: {waiting[0].waiting_for}"]


def plan(
    settings: Settings, sub_blocks: Assignment | None = None, deployed: Mapping[str, DeployedRole] | None = None
) -> Plan:
    """The capacity plan of a stack: every enabled workload against the cubes on usable sub-blocks, and how
    serving rolls.

    Without `sub_blocks` (nothing read), every one of `tpu.cubes` counts. `deployed`: the serving roles as the
    previous update left them (components/model/serving/deployed.py); without it, they roll from the configured shape.
    A rollout makes room beside every burst slot on: the most it can meet.
    """
    tpu = settings.tpu
    workloads = workloads_from_settings(settings)
    pools = [b.pool for b in sub_blocks.usable] if sub_blocks else tpu.pool_names
    kw: dict[str, object] = {"quota": settings.kueue.tpu_quota, "pools": pools, "sub_blocks": sub_blocks}
    base = plan_workloads(tpu.cube, len(pools), workloads, **kw)  # type: ignore[arg-type]
    if base.errors:
        return base
    active = slot_workloads(settings, tpu.cube, settings.burst_slots())
    rolls, warnings = rollouts(tpu.cube, len(pools), workloads, base, deployed, active, **kw)
    out = dataclasses.replace(base, rollouts=rolls, warnings=base.warnings + warnings)
    return with_elastic(out, plan_elastic(settings, tpu.cube, len(pools), workloads, base, **kw))
