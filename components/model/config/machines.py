"""The predefined GCE machine types a node pool of this program may name: every size of each family, in one table.

Sources, the Compute Engine documentation's machine-type tables (the predefined types only: no custom, shared-core,
`-lssd` or `-metal` types, none of which a system pool needs):
https://cloud.google.com/compute/docs/general-purpose-machines (E2, N1, N2, N2D, N4, C3, C3D, C4, Tau T2D) and
https://cloud.google.com/compute/docs/compute-optimized-machines (C2, C2D). Memory is what the tables give per vCPU;
the few sizes off their series' ratio are listed with their own memory.
"""

from __future__ import annotations

from dataclasses import dataclass

GENERAL_PURPOSE = "https://cloud.google.com/compute/docs/general-purpose-machines"
COMPUTE_OPTIMIZED = "https://cloud.google.com/compute/docs/compute-optimized-machines"


@dataclass(frozen=True)
class Series:
    """One `<family>-<kind>` series: its vCPU sizes and GB of memory per vCPU, with the sizes off that ratio."""

    vcpus: tuple[int, ...]
    gb_per_vcpu: float
    memory_gb: tuple[tuple[int, float], ...] = ()  # (vCPUs, GB) where the ratio does not hold
    source: str = GENERAL_PURPOSE


_N2 = (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)
_N2D_WIDE = (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224)
_N4 = (2, 4, 8, 16, 32, 48, 64, 80)
_C2D = (2, 4, 8, 16, 32, 56, 112)
_C3 = (4, 8, 22, 44, 88, 176)
_C3D = (4, 8, 16, 30, 60, 90, 180, 360)
_C4 = (2, 4, 8, 16, 24, 32, 48, 96, 144, 192, 288)
_N1 = (2, 4, 8, 16, 32, 64, 96)

MACHINE_SERIES: dict[str, Series] = {
    "e2-standard": Series((2, 4, 8, 16, 32), 4.0),
    "e2-highmem": Series((2, 4, 8, 16), 8.0),
    "e2-highcpu": Series((2, 4, 8, 16, 32), 1.0),
    "n1-standard": Series((1, *_N1), 3.75),
    "n1-highmem": Series(_N1, 6.5),
    "n1-highcpu": Series(_N1, 0.9),
    "n2-standard": Series(_N2, 4.0),
    "n2-highmem": Series(_N2, 8.0, ((128, 864.0),)),
    "n2-highcpu": Series(_N2[:-1], 1.0),
    "n2d-standard": Series(_N2D_WIDE, 4.0),
    "n2d-highmem": Series(_N2D_WIDE[:-2], 8.0),
    "n2d-highcpu": Series(_N2D_WIDE, 1.0),
    "n4-standard": Series(_N4, 4.0),
    "n4-highmem": Series(_N4, 8.0),
    "n4-highcpu": Series(_N4, 2.0),
    "c2-standard": Series((4, 8, 16, 30, 60), 4.0, source=COMPUTE_OPTIMIZED),
    "c2d-standard": Series(_C2D, 4.0, source=COMPUTE_OPTIMIZED),
    "c2d-highmem": Series(_C2D, 8.0, source=COMPUTE_OPTIMIZED),
    "c2d-highcpu": Series(_C2D, 2.0, source=COMPUTE_OPTIMIZED),
    "c3-standard": Series(_C3, 4.0),
    "c3-highmem": Series(_C3, 8.0),
    "c3-highcpu": Series(_C3, 2.0),
    "c3d-standard": Series(_C3D, 4.0),
    "c3d-highmem": Series(_C3D, 8.0),
    "c3d-highcpu": Series(_C3D, 2.0),
    "c4-standard": Series(_C4, 3.75, ((2, 7.0),)),
    "c4-highmem": Series(_C4, 7.75, ((2, 15.0),)),
    "c4-highcpu": Series(_C4, 2.0),
    "t2d-standard": Series((1, 2, 4, 8, 16, 32, 48, 60), 4.0),
}


def machine_memory_gb(series: Series, vcpus: int) -> float:
    return dict(series.memory_gb).get(vcpus, vcpus * series.gb_per_vcpu)
