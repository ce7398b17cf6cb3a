"""Benchmark 5: `python -m components diff` on the benchmark stack at N cubes (not a test).

    python -m benchmarks.diff CUBES REPEATS    # one JSON line: cold and warm seconds of a whole diff

`command_seconds` times the whole command on the dev stack, interpreter start and imports included (the
5 s budget). A whole diff is what `diff --second-run` does: two mock runs of the program, the read-back model and the
engine. The first one in a fresh process includes the imports (what a user waits for); the warm ones show
how the cost grows with the cube count; `engine` is the model's own share.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import scenario


def measure(cubes: int, repeats: int) -> dict[str, Any]:
    from components.cli import snapshot
    from components.cli.mockrun import execute
    from components.model.diff import engine, readback
    from tests.harness import merge, stack_file_config

    config = merge(stack_file_config("dev"), scenario.overrides(cubes))

    def once() -> tuple[float, float, int, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        first = snapshot.records(execute(config, stack="dev").registrations)
        second = snapshot.records(execute(config, stack="dev").registrations)
        start = time.process_time()
        result = engine.diff(readback.read_back(first), second, readback.SUPPRESSORS)
        engine_cpu = time.process_time() - start
        assert result.changes, "nothing compared"
        return time.perf_counter() - wall, time.process_time() - cpu, len(result.changes), engine_cpu

    cold_wall, cold_cpu, resources, _ = once()
    warm = [once() for _ in range(repeats)]
    return {
        "cubes": cubes,
        "resources": resources,
        "coldWallSeconds": cold_wall,
        "coldCpuSeconds": cold_cpu,
        "warmCpuSeconds": {"min": min(w[1] for w in warm), "median": statistics.median(w[1] for w in warm)},
        "engineCpuSeconds": min(w[3] for w in warm),
    }


def command_seconds() -> float:
    """Wall time of the whole command as a user runs it on the dev stack (interpreter, imports, two runs)."""
    import subprocess

    from tests.stack_config import ROOT, set_arguments

    cmd = [sys.executable, "-m", "components", "diff", "--stack", "dev", *set_arguments("dev"), "--second-run"]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    import json

    print(json.dumps(measure(int(sys.argv[1]), int(sys.argv[2]))))
