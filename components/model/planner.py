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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from components.model.geometry import Cube, Slice, SliceKind, Topology
from components.model.settings import PROJECT, Settings

# The codelab applies the demos and the serving stack in this order (SPEC section 8).
STEP_SUBSLICING, STEP_SUPERSLICING, STEP_SERVING = 0, 1, 2
TABLE_PREEMPTIONS = 10  # preemptions listed in the table; `as_dict()` has them all


class PlanError(ValueError):
    """A request the planner cannot model at all (not a capacity problem: those become `Plan.errors`)."""


class Status(StrEnum):
    ADMITTED = "admitted"
    PENDING = "pending"  # never admitted
    PREEMPTED = "preempted"  # admitted, then evicted by a higher priority, not readmitted
    PARTIAL = "partial"  # only for a whole LeaderWorkerSet: some replica groups admitted, some not


@dataclass(frozen=True)
class Workload:
    """One slice consumer from the stack config, as Kueue sees it."""

    key: str  # config key without the project prefix, e.g. demos.subslicing or serving.prefill
    name: str  # the Kubernetes object (JobSet or LeaderWorkerSet)
    slice: Slice  # the shape of each slice, classified against the cube
    slices: int  # slices in all (JobSet replicated jobs, or LWS replica groups)
    priority: str  # WorkloadPriorityClass name
    priority_value: int
    gang: bool  # True: one Kueue workload for all slices (JobSet); False: one per slice (LWS replica group)
    step: int = 0  # arrival step; workloads of one step are applied together

    @classmethod
    def of(
        cls,
        cube: Cube,
        key: str,
        topology: str | Topology,
        slices: int,
        priority: str,
        priority_value: int,
        *,
        gang: bool,
        step: int = 0,
        name: str | None = None,
    ) -> Workload:
        shape = topology if isinstance(topology, Topology) else Topology.parse(topology)
        return cls(key, name or key, cube.classify(shape), slices, priority, priority_value, gang, step)

    @property
    def topology(self) -> Topology:
        return self.slice.topology

    @property
    def kind(self) -> SliceKind:
        return self.slice.kind

    @property
    def chips(self) -> int:
        return self.slices * self.slice.chips

    @property
    def kueue_workloads(self) -> int:
        return 1 if self.gang else self.slices


def workloads_from_settings(settings: Settings) -> list[Workload]:
    """Every enabled slice consumer, in the codelab's arrival order."""
    cube, priorities = settings.tpu.cube, settings.kueue.priorities
    out: list[Workload] = []
    sub, sup = settings.demos.subslicing, settings.demos.superslicing
    if sub.enabled:
        out.append(
            Workload.of(
                cube,
                "demos.subslicing",
                sub.topology,
                sub.replicas,
                sub.priority,
                priorities[sub.priority],
                gang=True,
                step=STEP_SUBSLICING,
                name=sub.name,
            )
        )
    if sup.enabled:
        out.append(
            Workload.of(
                cube,
                "demos.superslicing",
                sup.topology,
                sup.replicas,
                sup.priority,
                priorities[sup.priority],
                gang=True,
                step=STEP_SUPERSLICING,
                name=sup.name,
            )
        )
    if settings.serving.enabled:
        for role, spec in settings.serving.roles().items():
            out.append(
                Workload.of(
                    cube,
                    f"serving.{role}",
                    spec.topology,
                    spec.replicas,
                    spec.priority,
                    priorities[spec.priority],
                    gang=False,
                    step=STEP_SERVING,
                    name=settings.lws_name(role),
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# The partition tree of one cube


class PartitionTree:
    """The nested partitions of one cube as a complete binary tree over its hosts.

    Level 0 is the whole cube; level `depth` is one host. Node (level, i) covers the hosts
    [i * 2**(depth - level), (i + 1) * 2**(depth - level)), kept as a bit mask.
    """

    def __init__(self, cube: Cube) -> None:
        self.cube = cube
        self.levels: tuple[Topology, ...] = cube.partitions()
        self.depth = len(self.levels) - 1
        self.masks: list[list[int]] = []
        self.offsets: list[list[tuple[int, ...]]] = [[(0,) * cube.topology.rank]]
        for level in range(self.depth + 1):
            span = 1 << (self.depth - level)
            self.masks.append([((1 << span) - 1) << (i * span) for i in range(1 << level)])
        for level in range(self.depth):
            parent, child = self.levels[level], self.levels[level + 1]
            axis = next(a for a, (p, c) in enumerate(zip(parent.dims, child.dims, strict=True)) if p != c)
            row = []
            for offset in self.offsets[level]:
                for half in (0, 1):
                    moved = list(offset)
                    moved[axis] += half * child.dims[axis]
                    row.append(tuple(moved))
            self.offsets.append(row)
        self._level_of = {t: i for i, t in enumerate(self.levels)}
        self._best: dict[tuple[int, int], tuple[int, int] | None] = {}

    def level_of(self, topology: Topology) -> int:
        try:
            return self._level_of[topology]
        except KeyError:
            raise PlanError(f"{topology} is not a partition of the {self.cube.topology} cube") from None

    def slots(self, topology: Topology) -> int:
        """Disjoint sub-slices of this shape one cube holds (8 for 2x2x2 in 4x4x4)."""
        return 1 << self.level_of(topology)

    def free_counts(self, occupied: int) -> list[int]:
        """Per level, the nodes that overlap nothing occupied."""
        return [sum(1 for m in row if not occupied & m) for row in self.masks]

    def best_fit(self, occupied: int, level: int) -> tuple[int, int] | None:
        """The buddy allocator's choice for one node at `level` in a cube: (free block level, node index).

        Takes the smallest free block that holds the node (the deepest level whose node is free while
        its parent is not), leftmost first, and the leftmost node inside it; None when nothing is free.
        Memoized: a cube has only 2**hosts occupancy patterns and few of them recur.
        """
        memo_key = (occupied, level)
        if memo_key not in self._best:
            self._best[memo_key] = self._best_fit(occupied, level)
        return self._best[memo_key]

    def _best_fit(self, occupied: int, level: int) -> tuple[int, int] | None:
        for block in range(level, -1, -1):
            for index, mask in enumerate(self.masks[block]):
                if occupied & mask:
                    continue
                if block == 0 or occupied & self.masks[block - 1][index >> 1]:
                    return block, index << (level - block)
        return None


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Placement:
    """Where one slice (or, for a super-slice, its part in one cube) sits."""

    key: str  # the workload's config key
    unit: str  # the Kueue workload: the key for a JobSet, key[group] for an LWS replica group
    slice_index: int  # index among the workload's slices (the replica group of an LWS)
    topology: Topology  # the whole slice's shape
    cube: int
    offset: tuple[int, ...]  # chip coordinates of the part's corner inside the cube
    extent: Topology  # the part inside this cube: the slice itself, or the whole cube for a super-slice
    part: int = 0  # which cube of a super-slice (0 for a sub-slice)

    def as_dict(self) -> dict[str, Any]:
        return {
            "workload": self.key,
            "unit": self.unit,
            "slice": self.slice_index,
            "topology": str(self.topology),
            "offset": list(self.offset),
            "extent": str(self.extent),
            "part": self.part,
        }


@dataclass(frozen=True)
class CubePlan:
    index: int
    pool: str
    chips: int
    used_chips: int
    placements: tuple[Placement, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "pool": self.pool,
            "chips": self.chips,
            "usedChips": self.used_chips,
            "placements": [p.as_dict() for p in self.placements],
        }


@dataclass(frozen=True)
class Preemption:
    """One eviction during the simulation: `by` (strictly higher priority) preempted `victim`."""

    victim: str  # Kueue workload label
    victim_key: str
    victim_priority: int
    by: str
    by_key: str
    by_priority: int
    by_priority_class: str
    step: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "victim": self.victim,
            "victimPriority": self.victim_priority,
            "by": self.by,
            "byPriority": self.by_priority,
            "step": self.step,
        }


@dataclass(frozen=True)
class UnitPlan:
    """The outcome for one Kueue workload."""

    label: str
    key: str
    group: int | None  # the LWS replica group; None for a JobSet
    slices: int
    chips: int
    status: Status
    reason: str
    preempted_by: str | None
    cubes: tuple[int, ...]
    waiting_for: str = ""  # why it is not admitted (empty when admitted)

    def as_dict(self) -> dict[str, Any]:
        return {
            "unit": self.label,
            "status": self.status.value,
            "reason": self.reason,
            "preemptedBy": self.preempted_by,
            "cubes": list(self.cubes),
        }


@dataclass(frozen=True)
class WorkloadPlan:
    """The outcome for one config key (a JobSet, or every replica group of an LWS)."""

    workload: Workload
    status: Status
    reason: str
    admitted_slices: int
    admitted_chips: int
    units: tuple[UnitPlan, ...]

    @property
    def key(self) -> str:
        return self.workload.key

    def as_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "key": w.key,
            "name": w.name,
            "topology": str(w.topology),
            "kind": w.kind.value,
            "slices": w.slices,
            "chips": w.chips,
            "priority": w.priority,
            "priorityValue": w.priority_value,
            "gang": w.gang,
            "status": self.status.value,
            "reason": self.reason,
            "admittedSlices": self.admitted_slices,
            "admittedChips": self.admitted_chips,
            "units": [u.as_dict() for u in self.units],
        }


@dataclass(frozen=True)
class Plan:
    machine_type: str
    cube_topology: Topology
    cube_chips: int
    quota: int | None
    cubes: tuple[CubePlan, ...]
    workloads: tuple[WorkloadPlan, ...]
    preemptions: tuple[Preemption, ...]
    errors: tuple[str, ...]
    warnings: tuple[str, ...]

    @property
    def chips_provisioned(self) -> int:
        return len(self.cubes) * self.cube_chips

    @property
    def chips_requested(self) -> int:
        return sum(w.workload.chips for w in self.workloads)

    @property
    def chips_admitted(self) -> int:
        return sum(w.admitted_chips for w in self.workloads)

    @property
    def ok(self) -> bool:
        return not self.errors

    def workload(self, key: str) -> WorkloadPlan:
        for w in self.workloads:
            if w.key == key:
                return w
        raise KeyError(key)

    def unit(self, label: str) -> UnitPlan:
        for w in self.workloads:
            for u in w.units:
                if u.label == label:
                    return u
        raise KeyError(label)

    def placements(self) -> list[Placement]:
        return [p for c in self.cubes for p in c.placements]

    def error_message(self) -> str:
        n = len(self.errors)
        return f"impossible TPU request ({n} problem{'s' if n != 1 else ''}):\n  " + "\n  ".join(self.errors)

    def as_dict(self) -> dict[str, Any]:
        return {
            "machineType": self.machine_type,
            "cubeTopology": str(self.cube_topology),
            "totals": {
                "cubes": len(self.cubes),
                "chipsProvisioned": self.chips_provisioned,
                "chipsRequested": self.chips_requested,
                "chipsAdmitted": self.chips_admitted,
                "tpuQuota": self.quota,
            },
            "cubes": [c.as_dict() for c in self.cubes],
            "workloads": [w.as_dict() for w in self.workloads],
            "preemptions": [p.as_dict() for p in self.preemptions],
            "errors": list(self.errors),
            "warnings": list(self.warnings),
        }

    def table(self) -> str:
        """A compact fixed-width summary: totals, one row per workload, one row per (cube, workload)."""
        n = len(self.cubes)
        head = (
            f"TPU plan: {n} x {self.cube_topology} cube{'s' if n != 1 else ''} ({self.machine_type}) = "
            f"{self.chips_provisioned} chips provisioned; {self.chips_requested} requested, "
            f"{self.chips_admitted} admitted"
        )
        if self.quota is not None:
            head += f"; kueue.tpuQuota {self.quota}"
        rows = [["WORKLOAD", "TOPOLOGY", "SLICES", "CHIPS", "PRIORITY", "STATUS", "REASON"]]
        for w in self.workloads:
            wl = w.workload
            rows.append(
                [
                    wl.key,
                    str(wl.topology),
                    f"{w.admitted_slices}/{wl.slices}",
                    str(wl.chips),
                    wl.priority,
                    w.status.value,
                    w.reason,
                ]
            )
        cube_rows = [["CUBE", "POOL", "USED", "WORKLOAD", "SLICES", "SHAPE", "WHERE"]]
        for c in self.cubes:
            first = [str(c.index), c.pool, f"{c.used_chips}/{c.chips}"]
            groups: dict[str, list[Placement]] = {}
            for p in c.placements:
                groups.setdefault(p.key, []).append(p)
            if not groups:
                cube_rows.append([*first, "-", "", "", "free"])
            for key, ps in groups.items():
                if ps[0].extent == ps[0].topology:
                    where = " ".join(",".join(str(x) for x in p.offset) for p in ps)
                else:
                    where = " ".join(f"cube {p.part + 1}/{p.topology.chips // c.chips}" for p in ps)
                cube_rows.append([*first, key, _ranges(p.slice_index for p in ps), str(ps[0].topology), where])
                first = ["", "", ""]
        lines = [head, "", *_align(rows)]
        if self.preemptions:
            shown = [f"{p.by} preempts {p.victim}" for p in self.preemptions[:TABLE_PREEMPTIONS]]
            if len(self.preemptions) > TABLE_PREEMPTIONS:
                shown.append(f"... {len(self.preemptions) - TABLE_PREEMPTIONS} more in the stack output")
            lines += ["", "PREEMPTIONS  " + "; ".join(shown)]
        return "\n".join([*lines, "", *_align(cube_rows)])


def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _ranges(values: Iterable[int]) -> str:
    """0,1,2,3,5 -> '0-3,5'."""
    out: list[str] = []
    for v in sorted(set(values)):
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ",".join(out)


# ---------------------------------------------------------------------------------------------
# The simulation


@dataclass(eq=False)
class _Unit:
    """One Kueue workload during the simulation (mutable, internal)."""

    workload: Workload
    group: int | None
    first_slice: int
    slices: int
    level: int  # tree level of each node it needs (0 = whole cube)
    per_slice: int  # nodes per slice (cubes of a super-slice, else 1)
    seq: int  # arrival order
    nodes: list[tuple[int, int, int]] = field(default_factory=list)  # (cube, level, index)
    admitted: bool = False
    ever_admitted: bool = False
    admitted_seq: int = -1
    preempted_by: _Unit | None = None
    readmitted_after: list[_Unit] = field(default_factory=list)  # who had preempted it before a readmission
    tried_at: int | None = None  # len(evictions) when it last failed to fit
    priority: int = field(init=False)

    def __post_init__(self) -> None:
        self.priority = self.workload.priority_value

    @property
    def label(self) -> str:
        key = self.workload.key
        return key if self.group is None else f"{key}[{self.group}]"

    @property
    def count(self) -> int:
        return self.slices * self.per_slice

    @property
    def chips(self) -> int:
        return self.slices * self.workload.slice.chips


class _Simulation:
    def __init__(self, tree: PartitionTree, cubes: int, quota: int | None) -> None:
        self.tree = tree
        self.n = cubes
        self.quota = quota
        self.host_chips = tree.levels[-1].chips
        self.occ = [0] * cubes
        empty = tree.free_counts(0)
        self.free = [list(empty) for _ in range(cubes)]
        self.total_free = [c * cubes for c in empty]
        self.admitted_chips = 0
        self.admissions = 0
        self.evictions: list[int] = []  # priorities of evicted workloads, in order
        self.admitted: list[_Unit] = []
        self.preemptions: list[Preemption] = []
        self.step = 0

    # -- occupancy ------------------------------------------------------------------------
    def _update(self, cube: int, occupied: int) -> None:
        old = self.free[cube]
        new = self.tree.free_counts(occupied)
        for level, (a, b) in enumerate(zip(old, new, strict=True)):
            self.total_free[level] += b - a
        self.occ[cube] = occupied
        self.free[cube] = new

    def _occupy(self, u: _Unit, nodes: list[tuple[int, int, int]]) -> None:
        touched: dict[int, int] = {}
        for cube, level, index in nodes:
            mask = self.tree.masks[level][index]
            cur = touched.get(cube, self.occ[cube])
            assert not cur & mask, "placement overlaps"
            touched[cube] = cur | mask
        for cube, occupied in touched.items():
            self._update(cube, occupied)
        u.nodes = nodes
        u.admitted = True
        self.admitted_chips += u.chips
        self.admitted.append(u)

    def _release(self, u: _Unit) -> None:
        touched: dict[int, int] = {}
        for cube, level, index in u.nodes:
            touched[cube] = touched.get(cube, self.occ[cube]) & ~self.tree.masks[level][index]
        for cube, occupied in touched.items():
            self._update(cube, occupied)
        u.admitted = False
        self.admitted_chips -= u.chips
        self.admitted.remove(u)

    def _fits(self, u: _Unit) -> bool:
        if self.quota is not None and self.admitted_chips + u.chips > self.quota:
            return False
        return self.total_free[u.level] >= u.count

    # -- placement ------------------------------------------------------------------------
    def _choose(self, u: _Unit) -> list[tuple[int, int, int]]:
        """Best-fit nodes for every slice of `u`; the caller checked `_fits`."""
        tree, level = self.tree, u.level
        if level == 0:
            free_cubes = [c for c in range(self.n) if self.free[c][0]]
            return [(c, 0, 0) for c in free_cubes[: u.count]]
        occ = list(self.occ)
        chosen: list[tuple[int, int, int]] = []
        for _ in range(u.count):
            best: tuple[int, int, int, int] | None = None  # (-free block level, -used hosts, cube, index)
            for cube, o in enumerate(occ):
                fit = tree.best_fit(o, level)
                if fit is not None:
                    rank = (-fit[0], -o.bit_count(), cube, fit[1])
                    if best is None or rank < best:
                        best = rank
            assert best is not None, "no free node although the unit fits"
            _, _, cube, index = best
            occ[cube] |= tree.masks[level][index]
            chosen.append((cube, level, index))
        return chosen

    def _admit(self, u: _Unit) -> None:
        if u.ever_admitted and u.preempted_by is not None:
            u.readmitted_after.append(u.preempted_by)
        self._occupy(u, self._choose(u))
        u.ever_admitted = True
        u.preempted_by = None
        u.admitted_seq = self.admissions
        self.admissions += 1

    def try_admit(self, u: _Unit) -> bool:
        if self._fits(u):
            self._admit(u)
            return True
        candidates = sorted(
            (a for a in self.admitted if a.priority < u.priority), key=lambda a: (a.priority, -a.admitted_seq)
        )
        removed: list[tuple[_Unit, list[tuple[int, int, int]]]] = []
        for cand in candidates:
            removed.append((cand, cand.nodes))
            self._release(cand)
            if self._fits(u):
                break
        else:
            for cand, nodes in reversed(removed):
                self._occupy(cand, nodes)
            return False
        victims = [removed[-1][0]]
        for cand, nodes in reversed(removed[:-1]):
            self._occupy(cand, nodes)
            if not self._fits(u):
                self._release(cand)
                victims.append(cand)
        for v in victims:
            v.preempted_by = u
            v.nodes = []
            self.evictions.append(v.priority)
            self.preemptions.append(
                Preemption(
                    v.label,
                    v.workload.key,
                    v.priority,
                    u.label,
                    u.workload.key,
                    u.priority,
                    u.workload.priority,
                    self.step,
                )
            )
        self._admit(u)
        return True

    def _stale(self, u: _Unit) -> bool:
        """Whether `u` could fit now although it did not at its last try.

        Only an eviction of a workload of at least its priority grows the capacity it may use
        (free capacity plus what lower priorities hold): admissions only shrink or keep it.
        """
        if u.tried_at is None:
            return True
        return any(p >= u.priority for p in self.evictions[u.tried_at :])

    def schedule(self, queue: list[_Unit]) -> None:
        while True:
            progress = False
            for u in sorted((u for u in queue if not u.admitted), key=lambda u: (-u.priority, u.seq)):
                if u.admitted or not self._stale(u):
                    continue
                if self.try_admit(u):
                    progress = True
                else:
                    u.tried_at = len(self.evictions)
            if not progress:
                return

    # -- explanations ---------------------------------------------------------------------
    def blocked_reason(self, u: _Unit) -> str:
        w = u.workload
        level_shape = self.tree.levels[u.level]
        what = f"{level_shape} {'cube' if u.level == 0 else 'partition'}"
        need = f"needs {u.count} free {what}{'s' if u.count != 1 else ''}"
        capacity = self.n << u.level
        if u.count > capacity:
            return f"{need}, the {self.n} cube{'s' if self.n != 1 else ''} hold {capacity}: it can never be admitted"
        if self.quota is not None and u.chips > self.quota:
            return f"needs {u.chips} chips, more than kueue.tpuQuota = {self.quota}: it can never be admitted"
        admitted = sorted(self.admitted, key=lambda a: a.seq)  # arrival order, whatever the list order
        holders = [a for a in admitted if a.priority >= u.priority]
        lower = [a for a in admitted if a.priority < u.priority]
        for a in lower:  # what it could use if it preempted every lower priority
            self._release(a)
        freeable = self.total_free[u.level]
        kept_chips = self.admitted_chips
        for a in lower:
            self._occupy(a, a.nodes)
        if self.quota is not None and kept_chips + u.chips > self.quota and freeable >= u.count:
            why = (
                f"needs {u.chips} chips of kueue.tpuQuota = {self.quota}, {kept_chips} of which are held by "
                "workloads it cannot preempt"
            )
        else:
            why = f"{need}, {self.total_free[u.level]} free"
            if lower:
                why += f" ({freeable} if it preempted every lower priority)"
        if holders:
            same = [a for a in holders if a.priority == u.priority]
            higher = [a for a in holders if a.priority > u.priority]
            parts = []
            if higher:
                parts.append(f"{_keys(higher)} (higher priority)")
            if same:
                parts.append(f"{_keys(same)} (same priority {w.priority}, which does not preempt)")
            why += "; held by " + " and ".join(parts)
        return why


def _keys(units: Iterable[_Unit], limit: int = 6) -> str:
    """serving.prefill[0-3], demos.subslicing, ... and at most `limit` keys, then how many more."""
    out: dict[str, list[int]] = {}
    for u in units:
        out.setdefault(u.workload.key, [])
        if u.group is not None:
            out[u.workload.key].append(u.group)
    names = [key if not groups else f"{key}[{_ranges(groups)}]" for key, groups in out.items()]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _qualified(key: str) -> str:
    return f"{PROJECT}:{key}"


def _describe(w: Workload) -> str:
    return f"{_qualified(w.key)} ({w.name}, {w.slices} x {w.topology} = {w.chips} chips, {w.priority})"


def _errors(cube: Cube, cubes: int, quota: int | None, workloads: Sequence[Workload], tree: PartitionTree) -> list[str]:
    if not workloads:
        return []
    if cubes == 0:
        return [
            f"{_qualified('tpu.cubes')} = 0: no TPU capacity is provisioned, but "
            f"{', '.join(w.key for w in workloads)} {'is' if len(workloads) == 1 else 'are'} enabled; "
            "raise tpu.cubes or disable them"
        ]
    out = []
    provisioned = cubes * cube.chips
    for w in workloads:
        s = w.slice
        if s.kind is SliceKind.SUPER and s.cubes > cubes:
            out.append(
                f"{_qualified(w.key)}.topology = {str(w.topology)!r} needs {s.cubes} cubes but tpu.cubes = {cubes} "
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
                f"the {provisioned} chips of tpu.cubes = {cubes} ({cubes} x {cube.topology}, room for {fit} such "
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
) -> Plan:
    """Places `workloads` into `cubes` cubes of shape `cube` and simulates Kueue admission (see the module doc)."""
    tree = PartitionTree(cube)
    pool_names = list(pools) if pools is not None else [f"cube-{i + 1}" for i in range(cubes)]
    if len(pool_names) != cubes:
        raise PlanError(f"{len(pool_names)} pool names for {cubes} cubes")
    if len({w.key for w in workloads}) != len(workloads):
        raise PlanError("workload keys must be unique")
    sim = _Simulation(tree, cubes, quota)

    units: list[_Unit] = []
    for w in workloads:
        level = 0 if w.kind is SliceKind.SUPER else tree.level_of(w.topology)
        per_slice = w.slice.cubes if w.kind is SliceKind.SUPER else 1
        if w.gang:
            if w.slices:
                units.append(_Unit(w, None, 0, w.slices, level, per_slice, len(units)))
        else:
            for g in range(w.slices):
                units.append(_Unit(w, g, g, 1, level, per_slice, len(units)))

    queue: list[_Unit] = []
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
        errors=tuple(_errors(cube, cubes, quota, workloads, tree)),
        warnings=tuple(warnings),
    )


def _placements(tree: PartitionTree, u: _Unit) -> list[Placement]:
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


def _unit_plan(sim: _Simulation, u: _Unit) -> UnitPlan:
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
    return f"{key}[{_ranges(groups)}]" if groups else key


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


def plan(settings: Settings) -> Plan:
    """The capacity plan of a stack: every enabled workload against `tpu.cubes` cubes."""
    tpu = settings.tpu
    return plan_workloads(
        tpu.cube,
        tpu.cubes,
        workloads_from_settings(settings),
        quota=settings.kueue.tpu_quota,
        pools=[tpu.pool_name(i) for i in range(tpu.cubes)],
    )
