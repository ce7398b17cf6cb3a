"""TPU slice geometry: machine facts and topology arithmetic.

Pure Python on purpose (no Pulumi imports): the settings, the planner, the Kueue objects and the
workload builders all derive their numbers from here, and the planner CLI runs without Pulumi.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum

_TOPOLOGY_RE = re.compile(r"^[1-9][0-9]*(x[1-9][0-9]*){1,2}$")
MAX_SLICE_CHIPS = 9216  # the largest Slice GKE's slice controller forms (144 tpu7x cubes)


class GeometryError(ValueError):
    """A topology or machine type that the TPU facts do not allow."""


@dataclass(frozen=True, order=True)
class Topology:
    """A TPU chip topology such as 2x2x2 (3D ICI) or 4x4 (2D ICI)."""

    dims: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Topology:
        if not isinstance(text, str) or not _TOPOLOGY_RE.match(text):
            raise GeometryError(f"{text!r} is not a topology: expected AxB or AxBxC of positive integers")
        return cls(tuple(int(part) for part in text.split("x")))

    def __str__(self) -> str:
        return "x".join(str(d) for d in self.dims)

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def chips(self) -> int:
        return math.prod(self.dims)

    def divides(self, other: Topology) -> bool:
        """True when copies of this shape tile `other` exactly, axis by axis."""
        return self.rank == other.rank and all(o % s == 0 for s, o in zip(self.dims, other.dims, strict=False))

    def count_in(self, other: Topology) -> int:
        """How many disjoint copies of this shape tile `other` (0 when it does not tile)."""
        return other.chips // self.chips if self.divides(other) else 0


class SliceKind(StrEnum):
    SUB = "sub-slice"  # one partition inside a cube
    SUPER = "super-slice"  # whole cubes stitched by OCS into one ICI mesh


@dataclass(frozen=True)
class TpuSystem:
    """One row of the TPU facts table (one machine type)."""

    machine_type: str
    generation: str
    accelerator: str  # value of the node label cloud.google.com/gke-tpu-accelerator
    chips_per_vm: int
    host: Topology  # the chips of one VM as a shape
    tensorcores_per_chip: int
    cube: Topology | None  # the ICI building block sliced dynamically; None when not supported
    source: str
    # The VM's vCPUs and memory (GCE's "GB" are GiB), where the program sizes pods against them.
    vcpus: int | None = None
    memory_gib: float | None = None
    # The zones offering it, in the order a reservation's zone is looked for (TPU_ZONES_DOC).
    zones: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.host.chips != self.chips_per_vm:
            raise GeometryError(f"{self.machine_type}: host shape {self.host} is not {self.chips_per_vm} chips")
        if self.cube is not None and not self.host.divides(self.cube):
            raise GeometryError(f"{self.machine_type}: host shape {self.host} does not tile cube {self.cube}")

    @property
    def dynamic_slicing(self) -> bool:
        return self.cube is not None

    def vms(self, topology: Topology) -> int:
        """VMs (= pods of one slice, one pod per VM) that a slice of this topology spans."""
        if not self.host.divides(topology):
            raise GeometryError(
                f"{topology} is not a whole number of {self.machine_type} hosts "
                f"({self.host}, {self.chips_per_vm} chips)"
            )
        return topology.chips // self.chips_per_vm

    def tensorcores(self, topology: Topology) -> int:
        return topology.chips * self.tensorcores_per_chip

    def partitions(self, block: Topology) -> tuple[Topology, ...]:
        """The nested partition shapes of an ICI block, largest first, down to one host.

        Each level halves the first axis that is still larger than the host's, which gives the
        partitions GKE labels as cloud.google.com/gke-tpu-partition-<shape>-id
        (4x4x4 > 2x4x4 > 2x2x4 > 2x2x2 > 2x2x1 for tpu7x). Kueue needs every level to place sub-slices.
        """
        if block.rank != self.host.rank or not self.host.divides(block):
            raise GeometryError(f"{block} is not a whole number of {self.machine_type} hosts ({self.host})")
        levels = [block]
        dims = list(block.dims)
        while tuple(dims) != self.host.dims:
            axis = next(i for i, (d, h) in enumerate(zip(dims, self.host.dims, strict=False)) if d > h)
            if (dims[axis] // self.host.dims[axis]) % 2:
                raise GeometryError(f"{block} cannot be halved down to one host ({self.host})")
            dims[axis] //= 2
            levels.append(Topology(tuple(dims)))
        return tuple(levels)


@dataclass(frozen=True)
class Cube:
    """The ICI block one TPU node pool provides (4x4x4 on tpu7x), carved into slices dynamically."""

    system: TpuSystem
    topology: Topology

    def __post_init__(self) -> None:
        if self.system.cube is None:
            raise GeometryError(f"{self.system.machine_type} does not support dynamic slicing")
        if self.topology not in self.system.partitions(self.system.cube):
            raise GeometryError(f"{self.topology} is not a partition of the {self.system.cube} cube")

    @property
    def chips(self) -> int:
        return self.topology.chips

    @property
    def vms(self) -> int:
        """Nodes of one pool: 4x4x4 / 4 chips per VM = 16."""
        return self.system.vms(self.topology)

    def partitions(self) -> tuple[Topology, ...]:
        return self.system.partitions(self.topology)

    def super_slice_example(self) -> Topology:
        return Topology((*self.topology.dims[:-1], self.topology.dims[-1] * 2))

    def classify(self, topology: Topology) -> Slice:
        """Checks that a slice shape can be carved from these cubes and says how."""
        partitions = self.partitions()
        if topology in partitions:
            return Slice(topology, SliceKind.SUB, self)
        if topology.rank == self.topology.rank and self.topology.divides(topology):
            # GKE stitches a super-slice from whole machine cubes only: its slice controller takes any shape that
            # is not a sub-slice as 4x4x4 partitions of 64 chips, each dimension a multiple of 4 (xpk@250d4b3c
            # slice/internal/topology/topology.go:106, internal/core/constants.go:30-34; xpk@367c8382
            # src/xpk/core/system_characteristics.py:593: super-slicing on 4x4x4 pools only).
            if self.topology != self.system.cube:
                raise GeometryError(
                    f"{topology} would stitch {topology.chips // self.chips} cubes of {self.topology}, but GKE forms "
                    f"a super-slice only from whole {self.system.cube} cubes (tpu.cubeTopology: {self.system.cube}); "
                    f"on {self.topology} cubes a slice is a sub-slice: {', '.join(map(str, reversed(partitions)))}"
                )
            # GKE's Slice refuses dimensions that decrease and more than 9,216 chips (its reference page,
            # https://cloud.google.com/kubernetes-engine/docs/reference/crds/slice; xpk@367c8382
            # src/xpk/core/scheduling.py:232 _check_super_slicing_topology, 144 cubes).
            ordered = Topology(tuple(sorted(topology.dims)))
            if ordered != topology or topology.chips > MAX_SLICE_CHIPS:
                why = f"such as {ordered}" if ordered != topology else f"not {topology.chips}"
                raise GeometryError(
                    f"{topology} is not a super-slice GKE's Slice takes: dimensions that do not decrease, at most "
                    f"{MAX_SLICE_CHIPS} chips ({why})"
                )
            return Slice(topology, SliceKind.SUPER, self)
        allowed = ", ".join(str(p) for p in reversed(partitions))
        if self.topology != self.system.cube:
            raise GeometryError(f"{topology} is not a partition of the {self.topology} cube ({allowed})")
        raise GeometryError(
            f"{topology} is neither a partition of the {self.topology} cube ({allowed}) nor a whole number of "
            f"{self.topology} cubes along each axis (such as {self.super_slice_example()})"
        )


@dataclass(frozen=True)
class Slice:
    """A slice shape checked against a system: how many chips, VMs and cubes it takes."""

    topology: Topology
    kind: SliceKind
    cube: Cube

    @property
    def chips(self) -> int:
        return self.topology.chips

    @property
    def vms(self) -> int:
        """Pods of one slice: one pod per VM (2x2x2 on 4-chip hosts = 2)."""
        return self.cube.system.vms(self.topology)

    @property
    def chips_per_pod(self) -> int:
        return self.cube.system.chips_per_vm

    @property
    def tensorcores(self) -> int:
        return self.cube.system.tensorcores(self.topology)

    @property
    def cubes(self) -> int:
        """Whole cubes a super-slice takes (1 for a sub-slice: it never spans cubes)."""
        return max(1, self.chips // self.cube.chips)


def _t(text: str) -> Topology:
    return Topology.parse(text)


_CLOUD_TPU_DOCS = "https://cloud.google.com/tpu/docs"
_GKE_IRONWOOD = "https://cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood"
_XPK = "xpk src/xpk/core/system_characteristics.py @ 367c8382"
TPU_ZONES_DOC = "https://cloud.google.com/tpu/docs/regions-zones"


def _system(machine_type: str, generation: str, accelerator: str, host: str, cores: int, cube: str | None = None,
            *, docs: tuple[str, ...] = (), zones: tuple[str, ...] = (), **vm: int) -> TpuSystem:  # fmt: skip
    """A row: `cores` TensorCores per chip; the sources are the generation's TPU page, `docs`, then xpk."""
    shape = _t(host)
    source = "; ".join((f"{_CLOUD_TPU_DOCS}/{generation}", *docs, _XPK))
    return TpuSystem(
        machine_type,
        generation,
        accelerator,
        shape.chips,
        shape,
        cores,
        _t(cube) if cube else None,
        source,
        **vm,
        zones=zones,
    )


# The TPU facts table. One row per machine type; everything else is derived from it.
SYSTEMS: dict[str, TpuSystem] = {
    s.machine_type: s
    for s in (
        # Ironwood: 4 chips per VM arranged 2x2x1, 2 TensorCores per chip, 4x4x4 cubes joined by OCS.
        # "System architecture" table of the tpu7x page: 224 vCPUs and 960 GB RAM per 4-chip VM. Zones: "TPU regions
        # and zones", North America, "All TPU7x configurations" (TPU_ZONES_DOC).
        _system(
            "tpu7x-standard-4t",
            "tpu7x",
            "tpu7x",
            "2x2x1",
            2,
            "4x4x4",
            docs=(_GKE_IRONWOOD,),
            vcpus=224,
            memory_gib=960,
            zones=("us-central1-ai1a", "us-central1-c"),
        ),
        # Ironwood single-chip VMs: 1x1x1 only, not part of a multi-host cube, so no dynamic slicing.
        _system("tpu7x-standard-1t", "tpu7x", "tpu7x", "1x1x1", 2),
        # v5p: 3D torus with 4x4x4 cubes, 4 chips per VM (2x2x1), 2 TensorCores per chip (megacore).
        # The GKE slice controller does not slice v5p, so it has no cube here.
        _system("ct5p-hightpu-4t", "v5p", "tpu-v5p-slice", "2x2x1", 2),
        # v6e (Trillium): 2D topologies, 1 TensorCore per chip.
        *(
            _system(f"ct6e-standard-{n}t", "v6e", "tpu-v6e-slice", host, 1)
            for n, host in ((1, "1x1"), (4, "2x2"), (8, "2x4"))
        ),
    )
}


def system(machine_type: str) -> TpuSystem:
    try:
        return SYSTEMS[machine_type]
    except KeyError:
        raise GeometryError(f"unknown TPU machine type {machine_type!r}; known: {', '.join(SYSTEMS)}") from None


def sliceable_machine_types() -> list[str]:
    return [name for name, s in SYSTEMS.items() if s.dynamic_slicing]
