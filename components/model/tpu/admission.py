"""The Kueue admission simulation behind the planner: occupancy, best-fit placement, preemption.

Mutable and internal to `planner.plan_workloads`; the rules it implements are in planner.py's docstring.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from components.model.tpu.demand import Workload
from components.model.tpu.partitions import PartitionTree
from components.model.tpu.report import Preemption, ranges


@dataclass(eq=False)
class Unit:
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
    preempted_by: Unit | None = None
    readmitted_after: list[Unit] = field(default_factory=list)  # who had preempted it before a readmission
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


class Simulation:
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
        self.admitted: list[Unit] = []
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

    def _occupy(self, u: Unit, nodes: list[tuple[int, int, int]]) -> None:
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

    def _release(self, u: Unit) -> None:
        touched: dict[int, int] = {}
        for cube, level, index in u.nodes:
            touched[cube] = touched.get(cube, self.occ[cube]) & ~self.tree.masks[level][index]
        for cube, occupied in touched.items():
            self._update(cube, occupied)
        u.admitted = False
        self.admitted_chips -= u.chips
        self.admitted.remove(u)

    def _fits(self, u: Unit) -> bool:
        if self.quota is not None and self.admitted_chips + u.chips > self.quota:
            return False
        return self.total_free[u.level] >= u.count

    # -- placement ------------------------------------------------------------------------
    def _choose(self, u: Unit) -> list[tuple[int, int, int]]:
        """Best-fit nodes for every slice of `u`; the caller checked `_fits`."""
        tree, level = self.tree, u.level
        if level == 0:
            free_cubes = [c for c in range(self.n) if self.free[c][0]]
            return [(c, 0, 0) for c in free_cubes[: u.count]]
        # Cubes with the same occupancy rank the same (free block, used hosts, node), so only one cube
        # per occupancy pattern is a candidate: the lowest index. Scanning patterns instead of cubes
        # keeps a slice's choice independent of the cube count (144 cubes have a handful of patterns).
        by_pattern: dict[int, list[int]] = {}
        for cube, o in enumerate(self.occ):
            by_pattern.setdefault(o, []).append(cube)  # ascending: already a heap
        chosen: list[tuple[int, int, int]] = []
        for _ in range(u.count):
            best: tuple[int, int, int, int, int] | None = None  # (-free block, -used hosts, cube, index, pattern)
            for o, cubes in by_pattern.items():
                fit = tree.best_fit(o, level)
                if fit is not None:
                    rank = (-fit[0], -o.bit_count(), cubes[0], fit[1], o)
                    if best is None or rank < best:
                        best = rank
            assert best is not None, "no free node although the unit fits"
            _, _, cube, index, o = best
            heapq.heappop(by_pattern[o])
            if not by_pattern[o]:
                del by_pattern[o]
            heapq.heappush(by_pattern.setdefault(o | tree.masks[level][index], []), cube)
            chosen.append((cube, level, index))
        return chosen

    def _admit(self, u: Unit) -> None:
        if u.ever_admitted and u.preempted_by is not None:
            u.readmitted_after.append(u.preempted_by)
        self._occupy(u, self._choose(u))
        u.ever_admitted = True
        u.preempted_by = None
        u.admitted_seq = self.admissions
        self.admissions += 1

    def try_admit(self, u: Unit) -> bool:
        if self._fits(u):
            self._admit(u)
            return True
        candidates = sorted(
            (a for a in self.admitted if a.priority < u.priority), key=lambda a: (a.priority, -a.admitted_seq)
        )
        removed: list[tuple[Unit, list[tuple[int, int, int]]]] = []
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
        by = (u.label, u.workload.key, u.priority, u.workload.priority)  # Preemption's by, by_key, ... fields
        for v in victims:
            v.preempted_by = u
            v.nodes = []
            self.evictions.append(v.priority)
            self.preemptions.append(Preemption(v.label, v.workload.key, v.priority, *by, self.step))
        self._admit(u)
        return True

    def _stale(self, u: Unit) -> bool:
        """Whether `u` could fit now although it did not at its last try.

        Only an eviction of a workload of at least its priority grows the capacity it may use
        (free capacity plus what lower priorities hold): admissions only shrink or keep it.
        """
        if u.tried_at is None:
            return True
        return any(p >= u.priority for p in self.evictions[u.tried_at :])

    def schedule(self, queue: list[Unit]) -> None:
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
    def blocked_reason(self, u: Unit) -> str:
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


def _keys(units: Iterable[Unit], limit: int = 6) -> str:
    """serving.prefill[0-3], demos.subslicing, ... and at most `limit` keys, then how many more."""
    out: dict[str, list[int]] = {}
    for u in units:
        out.setdefault(u.workload.key, [])
        if u.group is not None:
            out[u.workload.key].append(u.group)
    names = [key if not groups else f"{key}[{ranges(groups)}]" for key, groups in out.items()]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more
