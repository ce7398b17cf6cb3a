"""The stack each benchmark runs: the dev stack with `tpu.cubes` = N and every layer on.

The demand grows with the reservation in the codelab's proportions, so the planner and the program
do as much work per cube at 144 cubes as at 2: per cube, 3 sub-slicing 2x2x2 slices (6 at 2 cubes),
2 prefill and 2 decode replica groups (4 + 4 at 2 cubes) with dev's 2 burst slots each above them (their
capacity plan simulates (2 + 1) x (2 + 1) states at every size: the states grow with the slots, not the cubes), and
one super-slice over every cube
(4x4x8 at 2 cubes, as in the codelab), shaped as close to a cube as the count allows (16x16x16 for
64 cubes, 16x24x24 for 144: a full Ironwood pod). One cube holds no super-slice, so the demo is off there.
"""

from __future__ import annotations

from typing import Any

CUBE_COUNTS = (1, 2, 8, 32, 64, 144)
PREFIX = "gke-tpu-slicing"


def super_slice_topology(cubes: int, cube_edge: int = 4) -> str:
    """The most cube-like a x b x c arrangement of `cubes` 4x4x4 cubes (a <= b <= c, c - a smallest)."""
    best: tuple[int, tuple[int, int, int]] | None = None
    for a in range(1, cubes + 1):
        for b in range(a, cubes + 1):
            if cubes % (a * b) == 0 and (c := cubes // (a * b)) >= b:
                candidate = (c - a, (a, b, c))
                best = candidate if best is None or candidate < best else best
    assert best is not None
    return "x".join(str(cube_edge * d) for d in best[1])


def overrides(cubes: int) -> dict[str, Any]:
    """Config overrides (as `tests.harness.run_program` takes them) for `cubes` cubes, every layer on."""
    return {
        f"{PREFIX}:tpu": {"cubes": cubes},
        f"{PREFIX}:demos": {
            "subslicing": {"enabled": True, "replicas": 3 * cubes},
            "superslicing": {"enabled": cubes >= 2, "topology": super_slice_topology(max(cubes, 2))},
        },
        f"{PREFIX}:serving": {
            "enabled": True,
            **{
                role: {"replicas": 2 * cubes, "autoscaling": {"enabled": True, "maxGroups": 2 * cubes + 2}}
                for role in ("prefill", "decode")
            },
        },
        f"{PREFIX}:addons": {"keda": {"enabled": True}},
    }


# The opt-in weights download, added to the scenario for the time-to-ready line that shows its overlap.
WEIGHTS_DOWNLOAD = {f"{PREFIX}:serving": {"weightsDownload": {"enabled": True}}}
