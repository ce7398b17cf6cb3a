"""Benchmark 4: slice planning for 64 and 144 cubes with a few hundred slices (not a test).

    python -m benchmarks.planning [--runs N] [--cubes 64,144] [--slices 300] [--seed 5]

A mix of JobSets (one Kueue workload for all slices) and LeaderWorkerSets (one per replica group)
of every partition shape, plus 2- and 4-cube super-slices, three priorities, arriving over 10 steps:
contended on purpose, so preemption and re-queueing run too.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.model.tpu import geometry
from components.model.tpu.planner import Workload, plan_workloads

PRIORITIES = {"low-priority-1000": 1000, "medium-priority-2000": 2000, "high-priority-3000": 3000}


def tpu7x_cube() -> geometry.Cube:
    tpu7x = geometry.system("tpu7x-standard-4t")
    assert tpu7x.cube is not None
    return geometry.Cube(tpu7x, tpu7x.cube)


def mix(cube: geometry.Cube, cubes: int, target_slices: int, seed: int) -> list[Workload]:
    """Workloads of random shape, size, gang-ness and priority until about `target_slices` slices."""
    rng = random.Random(seed)
    shapes = [str(t) for t in cube.partitions()[1:]]  # the sub-slice shapes, 2x4x4 down to 2x2x1
    supers = [f"4x4x{4 * k}" for k in (2, 4) if k <= cubes]
    out: list[Workload] = []
    total = 0
    while total < target_slices:
        priority = rng.choice(list(PRIORITIES))
        if rng.random() < 0.1 and supers:
            topology, slices, gang = rng.choice(supers), 1, True
        else:
            topology, slices, gang = rng.choice(shapes), rng.randint(1, 8), rng.random() < 0.5
        step = rng.randrange(10)
        value = PRIORITIES[priority]
        out.append(Workload.of(cube, f"w{len(out)}", topology, slices, priority, value, gang=gang, step=step))
        total += slices
    return out


def measure(cubes: int, slices: int, runs: int, seed: int) -> dict[str, Any]:
    cube = tpu7x_cube()
    workloads = mix(cube, cubes, slices, seed)
    times = []
    for _ in range(runs):
        start = time.process_time()
        plan = plan_workloads(cube, cubes, workloads)
        times.append(time.process_time() - start)
    statuses = [u.status.value for w in plan.workloads for u in w.units]
    return {
        "cubes": cubes,
        "chips": cubes * cube.chips,
        "workloads": len(workloads),
        "slices": sum(w.slices for w in workloads),
        "kueueWorkloads": sum(w.kueue_workloads for w in workloads),
        "chipsRequested": plan.chips_requested,
        "chipsAdmitted": plan.chips_admitted,
        "statuses": {s: statuses.count(s) for s in ("admitted", "pending", "preempted")},
        "preemptions": len(plan.preemptions),
        "cpu": {"min": min(times), "median": statistics.median(times), "max": max(times)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cubes", default="64,144")
    parser.add_argument("--slices", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    for cubes in (int(c) for c in args.cubes.split(",")):
        r = measure(cubes, args.slices, args.runs, args.seed)
        cpu = r["cpu"]
        print(
            f"{cubes} cubes ({r['chips']} chips), {r['workloads']} workloads, {r['slices']} slices, "
            f"{r['kueueWorkloads']} Kueue workloads, {r['preemptions']} preemptions: "
            f"min {cpu['min'] * 1000:.0f} ms, median {cpu['median'] * 1000:.0f} ms, max {cpu['max'] * 1000:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
