"""The nested partitions of one TPU cube as a buddy allocator (used by the planner, see planner.py)."""

from __future__ import annotations

from components.model.tpu.geometry import Cube, Topology


class PlanError(ValueError):
    """A request the planner cannot model at all (not a capacity problem: those become `Plan.errors`)."""


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
