"""Benchmarks 1-3 for one cube count, in a process of its own (so its peak memory is this run's).

    python -m benchmarks.evaluation CUBES [REPEATS]     # prints one JSON object

1. Program evaluation under the mock runtime with `preview=True`, timed around the program only
   (the harness's reading of stack outputs afterwards is left out): the first run in a fresh process
   (what `pulumi preview` pays: imports of the provider SDKs included), then REPEATS warm runs.
   CPU time (`time.process_time`) is the figure: wall time on a shared machine measures the neighbours.
2. The creation-order graph of the last run (`benchmarks/graph.py`): its depth and longest path.
3. The modeled time to ready (`benchmarks/timings.py`) along the critical path, and the same steps
   one after another (the reference scripts' order).
"""

from __future__ import annotations

import time

_T0 = time.process_time()

import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import graph, scenario, timings  # noqa: E402
from components.cli.mockrun import Registration, execute  # noqa: E402
from tests.harness import Mocks  # noqa: E402
from tests.stack_config import CLOCK, merge, stack_file_config  # noqa: E402

_IMPORTS = time.process_time() - _T0


def run_once(cubes: int, extra: dict[str, Any] | None = None) -> tuple[float, float, list[Registration]]:
    """One evaluation of `__main__.py` for `cubes` cubes: (cpu seconds, wall seconds, registrations).

    The same in-process mock run as the tests and `python -m components render` (components/cli/mockrun.py),
    with the tests' stack-file config (placeholders filled) and clock; setting up the mocks costs microseconds.
    """
    config = merge(merge(stack_file_config(), scenario.overrides(cubes)), extra or {})
    cpu, wall = time.process_time(), time.perf_counter()
    run = execute(config, stack="dev", preview=True, mocks=Mocks(), now=CLOCK)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if run.error is not None:
        raise run.error
    return cpu, wall, run.registrations


def measure(cubes: int, repeats: int) -> dict[str, Any]:
    first_cpu, _, regs = run_once(cubes)
    cpu, wall = [], []
    for _ in range(repeats):
        c, w, regs = run_once(cubes)
        cpu.append(c)
        wall.append(w)
    nodes = graph.build(regs)
    depth, depth_path = graph.depth(nodes)
    critical, critical_path = graph.longest_path(nodes, timings.seconds)
    floor, floor_path = timings.chain_floor(nodes)
    steps = graph.steps(nodes)
    return {
        **with_download(cubes, critical),
        "cubes": cubes,
        "resources": len(regs),
        "steps": len(steps),
        "tpuPools": sum(1 for n in steps if timings.is_tpu_pool(n)),
        "importCpu": _IMPORTS,
        "firstRunCpu": first_cpu,
        "coldCpu": _IMPORTS + first_cpu,
        "cpu": {"min": min(cpu), "median": statistics.median(cpu), "max": max(cpu)},
        "wallMedian": statistics.median(wall),
        "peakRssMiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "depth": depth,
        "depthPath": [n.label for n in depth_path],
        "criticalSeconds": critical,
        "criticalPath": [n.label for n in critical_path],
        "sequentialSeconds": sum(timings.seconds(n) for n in steps),
        # The chain network -> cluster -> TPU pool -> workload: the critical path cannot be shorter.
        "chainSeconds": floor,
        "chainPath": [n.label for n in floor_path],
        "defaultFigures": sorted({n.type for n in steps if timings.figure(n) is timings.UNKNOWN}),
    }


def with_download(cubes: int, without: float) -> dict[str, Any]:
    """The same stack with `serving.weightsDownload.enabled`: the Job waits only for the cluster, so its copy runs
    while the TPU pools are created; one after the other would add the whole download to the time to ready."""
    _, _, regs = run_once(cubes, scenario.WEIGHTS_DOWNLOAD)
    nodes = graph.build(regs)
    critical, path = graph.longest_path(nodes, timings.seconds)
    job = next(n for n in nodes.values() if n.type == timings.JOB)
    # The what-if of a download that waits for the TPU pools (as a copy made after `up` created them would):
    # the same graph with the Job ordered after every pool.
    pools = {n.urn for n in nodes.values() if timings.is_tpu_pool(n)}
    serial = {
        urn: graph.Node(n.urn, n.type, n.name, n.component, n.inputs, set(n.waits_for)) for urn, n in nodes.items()
    }
    serial[job.urn].waits_for |= pools
    return {
        "download": {
            "seconds": timings.seconds(job),
            "criticalSeconds": critical,
            "criticalPath": [n.label for n in path],
            "withoutSeconds": without,
            "serialSeconds": graph.longest_path(serial, timings.seconds)[0],
        }
    }


def main(argv: list[str]) -> int:
    cubes = int(argv[0])
    repeats = int(argv[1]) if len(argv) > 1 else 5
    print(json.dumps(measure(cubes, repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
