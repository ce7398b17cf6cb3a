"""Planner benchmark: 64 cubes, ~300 slices of mixed shapes and priorities (not a test).

    python benchmarks/bench_planner.py [--runs N] [--cubes C] [--seed S]

Prints the median and the fastest wall time of `plan_workloads` over N runs. The issue's bar:
well under a second for 64 cubes and a few hundred slices.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.model import geometry
from components.model.planner import Workload, plan_workloads

PRIORITIES = {"low-priority-1000": 1000, "medium-priority-2000": 2000, "high-priority-3000": 3000}


def mix(cube: geometry.Cube, cubes: int, target_slices: int, seed: int) -> list[Workload]:
    """JobSets (gangs) and LeaderWorkerSets (per-group) of every partition shape and of 2- and 4-cube
    super-slices, arriving over 10 steps, until about `target_slices` slices are requested."""
    rng = random.Random(seed)
    shapes = [str(t) for t in cube.partitions()[1:]]  # the sub-slice shapes, 2x4x4 down to 2x2x1
    supers = [f"4x4x{4 * k}" for k in (2, 4) if k <= cubes]
    out: list[Workload] = []
    total = 0
    while total < target_slices:
        i = len(out)
        priority = rng.choice(list(PRIORITIES))
        if rng.random() < 0.1 and supers:
            topology, slices, gang = rng.choice(supers), 1, True
        else:
            topology, slices, gang = rng.choice(shapes), rng.randint(1, 8), rng.random() < 0.5
        out.append(
            Workload.of(
                cube, f"w{i}", topology, slices, priority, PRIORITIES[priority], gang=gang, step=rng.randrange(10)
            )
        )
        total += slices
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cubes", type=int, default=64)
    parser.add_argument("--slices", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()

    tpu7x = geometry.system("tpu7x-standard-4t")
    assert tpu7x.cube is not None
    cube = geometry.Cube(tpu7x, tpu7x.cube)
    workloads = mix(cube, args.cubes, args.slices, args.seed)
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        plan = plan_workloads(cube, args.cubes, workloads)
        times.append(time.perf_counter() - start)
    slices = sum(w.slices for w in workloads)
    units = sum(w.kueue_workloads for w in workloads)
    statuses = [u.status.value for w in plan.workloads for u in w.units]
    print(
        f"{args.cubes} cubes, {len(workloads)} workloads, {slices} slices, {units} Kueue workloads; "
        f"{plan.chips_requested} chips requested, {plan.chips_admitted}/{plan.chips_provisioned} admitted; "
        + ", ".join(f"{statuses.count(s)} {s}" for s in ("admitted", "pending", "preempted"))
        + f"; {len(plan.preemptions)} preemptions"
    )
    print(
        f"plan_workloads over {args.runs} runs: median {statistics.median(times) * 1000:.1f} ms, "
        f"min {min(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
