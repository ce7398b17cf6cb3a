"""Runs every benchmark and prints one table (or `--json`).

    python -m benchmarks [--repeats 5] [--cubes 1,2,8,32,64,144] [--json]     # --help for each option

Each cube count is evaluated in a fresh process (`benchmarks/evaluation.py`), one after another, so
that cold start and peak memory are that run's alone and two runs never compete for the CPU.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import diff as diff_bench  # noqa: E402
from benchmarks import elastic, planning, scenario  # noqa: E402

PLANNING_CASES = ((64, 300), (144, 300), (144, 700))
DIFF_CUBES = (2, 8, 32, 64)
DIFF_BUDGET_SECONDS = 5.0  # a diff of two dev runs, cold (the command as a user runs it)


def _in_child(module: str, cubes: int, repeats: int, what: str) -> dict[str, Any]:
    """Runs `python -m <module> CUBES REPEATS` in a fresh process (cold imports count) and reads its JSON line."""
    out = subprocess.run(
        [sys.executable, "-m", module, str(cubes), str(repeats)], cwd=ROOT, check=False, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"{what} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def diff_run(cubes: int, repeats: int) -> dict[str, Any]:
    return _in_child("benchmarks.diff", cubes, repeats, f"the diff of {cubes} cubes")


def evaluate(cubes: int, repeats: int) -> dict[str, Any]:
    return _in_child("benchmarks.evaluation", cubes, repeats, f"evaluating {cubes} cubes")


def growth(rows: dict[int, dict[str, Any]], a: int, b: int) -> dict[str, float] | None:
    if a not in rows or b not in rows:
        return None
    ra, rb = rows[a], rows[b]
    return {
        "resources": rb["resources"] / ra["resources"],
        "warmCpu": rb["cpu"]["min"] / ra["cpu"]["min"],
        "coldCpu": rb["coldCpu"] / ra["coldCpu"],
        "ratioOfSequential": rb["sequentialSeconds"] / ra["sequentialSeconds"],
    }


def marginal(rows: dict[int, dict[str, Any]]) -> list[dict[str, float]]:
    """Warm CPU per added resource between consecutive cube counts: flat when evaluation is linear.

    Uses the fastest run of each count: on a shared machine the others measure the neighbours too.
    """
    counts = sorted(rows)
    out = []
    for a, b in itertools.pairwise(counts):
        added = rows[b]["resources"] - rows[a]["resources"]
        if added > 0:
            ms = 1000 * (rows[b]["cpu"]["min"] - rows[a]["cpu"]["min"]) / added
            out.append({"from": a, "to": b, "msPerAddedResource": ms})
    return out


def linear_fit(rows: dict[int, dict[str, Any]]) -> dict[str, float] | None:
    """Least squares of the fastest warm run against the cube count: R^2 near 1 is linear growth."""
    if len(rows) < 3:
        return None
    xs = sorted(rows)
    ys = [rows[x]["cpu"]["min"] for x in xs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return {"seconds": intercept, "msPerCube": 1000 * slope, "r2": 1 - ss_res / ss_tot if ss_tot else 1.0}


def align(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def render(result: dict[str, Any]) -> str:
    rows = {r["cubes"]: r for r in result["evaluation"]}
    table = [
        [
            "CUBES", "RESOURCES", "COLD CPU s", "WARM CPU s min/med/max", "ms/RESOURCE", "PEAK MiB",
            "DEPTH", "CRITICAL PATH s", "SEQUENTIAL s", "SPEED-UP",
        ]
    ]  # fmt: skip
    for c in sorted(rows):
        r = rows[c]
        cpu = r["cpu"]
        table.append(
            [
                str(c),
                str(r["resources"]),
                f"{r['coldCpu']:.2f}",
                f"{cpu['min']:.2f}/{cpu['median']:.2f}/{cpu['max']:.2f}",
                f"{1000 * cpu['median'] / r['resources']:.1f}",
                f"{r['peakRssMiB']:.0f}",
                str(r["depth"]),
                f"{r['criticalSeconds']:.0f}",
                f"{r['sequentialSeconds']:.0f}",
                f"{r['sequentialSeconds'] / r['criticalSeconds']:.1f}x",
            ]
        )
    title = "Program evaluation (mock runtime, preview), creation-order graph, modeled time to ready"
    lines = [title, "", align(table)]
    g = result["growth2to64"]
    if g:
        lines += [
            "",
            f"2 -> 64 cubes: resources x{g['resources']:.2f}, warm evaluation (min) x{g['warmCpu']:.2f}, "
            f"cold evaluation x{g['coldCpu']:.2f}",
        ]
    fit = result.get("fit") or linear_fit(rows)
    if fit:
        lines.append(
            f"warm CPU (min) = {fit['seconds']:.2f} s + {fit['msPerCube']:.1f} ms per cube "
            f"(least squares over every count, R^2 = {fit['r2']:.3f})"
        )
    if result["marginal"]:
        lines.append(
            "warm CPU (min) per added resource: "
            + ", ".join(f"{m['from']}->{m['to']} {m['msPerAddedResource']:.1f} ms" for m in result["marginal"])
        )
    depths = {r["depth"] for r in rows.values()}
    lines.append(f"depth: {'constant' if len(depths) == 1 else 'VARIES'} ({', '.join(str(d) for d in sorted(depths))})")
    first = rows[min(rows)]
    for key, title in (("depthPath", "longest path"), ("criticalPath", "modeled critical path")):
        # The same chain of resource types (which of the identical pools is on it is a tie).
        same = len({tuple(label.split()[0] for label in r[key]) for r in rows.values()}) == 1
        lines.append(f"{title} ({'the same for every count' if same else f'at {min(rows)} cubes'}):")
        lines.append("  " + " > ".join(first[key]))
    over = {r["cubes"]: r["criticalSeconds"] / r["chainSeconds"] - 1 for r in rows.values()}
    worst = max(over, key=lambda c: over[c])
    lines.append(
        f"critical path over the chain network > cluster > TPU pool > workload ({first['chainSeconds']:.0f} s at "
        f"{min(rows)} cubes): at most +{100 * over[worst]:.1f}% ({worst} cubes); the chain:"
    )
    lines.append("  " + " > ".join(first["chainPath"]))
    d = first.get("download")
    if d:
        lines.append(
            f"with serving.weightsDownload.enabled ({min(rows)} cubes): the download ({d['seconds']:.0f} s) runs "
            f"beside the TPU pools, critical path {d['criticalSeconds']:.0f} s ({d['withoutSeconds']:.0f} s without "
            f"it) instead of {d['serialSeconds']:.0f} s one after the other:"
        )
        lines.append("  " + " > ".join(d["criticalPath"]))
    unmodeled = sorted({t for r in rows.values() for t in r.get("defaultFigures", [])})
    if unmodeled:
        lines.append(f"types without a figure in benchmarks/timings.py (default used): {', '.join(unmodeled)}")
    plan_table = [["CUBES", "CHIPS", "WORKLOADS", "SLICES", "KUEUE WORKLOADS", "PREEMPTIONS", "CPU ms min/med/max"]]
    for p in result["planning"]:
        cpu = p["cpu"]
        plan_table.append(
            [
                str(p["cubes"]),
                str(p["chips"]),
                str(p["workloads"]),
                str(p["slices"]),
                str(p["kueueWorkloads"]),
                str(p["preemptions"]),
                f"{cpu['min'] * 1000:.0f}/{cpu['median'] * 1000:.0f}/{cpu['max'] * 1000:.0f}",
            ]
        )
    lines += ["", "Slice planning (benchmarks/planning.py mix)", "", align(plan_table)]
    if result.get("elastic"):
        figures = result["elastic"]
        lines += ["", elastic.render(figures[elastic.PLACED], {c: figures[c] for c in elastic.WHAT_IFS})]
    if result.get("diff"):
        diff_table = [["CUBES", "RESOURCES", "COLD WALL s", "COLD CPU s", "WARM CPU s min/med", "ENGINE ms"]]
        for d in result["diff"]:
            w = d["warmCpuSeconds"]
            diff_table.append(
                [
                    str(d["cubes"]),
                    str(d["resources"]),
                    f"{d['coldWallSeconds']:.2f}",
                    f"{d['coldCpuSeconds']:.2f}",
                    f"{w['min']:.2f}/{w['median']:.2f}",
                    f"{1000 * d['engineCpuSeconds']:.1f}",
                ]
            )
        lines += [
            "",
            "Change preview (`diff --second-run`: two program runs, read-back, engine)",
            "",
            align(diff_table),
        ]
        seconds = result.get("diffCommandSeconds")
        if seconds is not None:
            verdict = "within" if seconds <= DIFF_BUDGET_SECONDS else "OVER"
            lines.append(
                f"`python -m components diff --stack dev --second-run`, whole command: {seconds:.2f} s wall, "
                f"{verdict} the {DIFF_BUDGET_SECONDS:.0f} s budget"
            )
        fit = linear_fit({d["cubes"]: {"cpu": {"min": d["warmCpuSeconds"]["min"]}} for d in result["diff"]})
        if fit:
            lines.append(
                f"warm diff CPU = {fit['seconds']:.2f} s + {fit['msPerCube']:.1f} ms per cube (R^2 = {fit['r2']:.3f})"
            )
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """Bad arguments end in one line naming the option and what it takes, exit status 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def positive_int(text: str) -> int:
    """An integer of at least 1 (`--repeats`)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be at least 1")
    return value


def cube_counts(text: str) -> list[int]:
    """`1,2,8`: cube counts, each a whole number of at least 1 (a stack with no cubes has nothing to place),
    none twice."""
    counts = []
    items = text.split(",")
    where = f"{text!r}: " if len(items) > 1 else ""
    for item in items:
        try:
            count = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{where}{item.strip()!r} is not a whole number; give cube counts separated by commas, e.g. 2,64"
            ) from None
        if count < 1:
            raise argparse.ArgumentTypeError(f"{where}{count} cubes: every count must be at least 1")
        if count in counts:
            raise argparse.ArgumentTypeError(f"{where}{count} is listed twice")
        counts.append(count)
    return counts


def parser() -> argparse.ArgumentParser:
    default_cubes = ",".join(str(c) for c in scenario.CUBE_COUNTS)
    out = _Parser(
        prog="python -m benchmarks",
        description="Runs every benchmark and prints one table: program evaluation under the mock runtime, "
        "the creation-order graph and modeled time to ready per cube count (each in a fresh process), then "
        "slice planning. No cloud, no Pulumi CLI.",
        epilog="Example: python -m benchmarks --repeats 1 --cubes 2,64 (a quick look). "
        "The planner alone: python -m benchmarks.planning.",
    )
    out.add_argument(
        "--repeats",
        type=positive_int,
        default=5,
        metavar="N",
        help="warm runs per cube count, and runs per planning case (default: %(default)s)",
    )
    out.add_argument(
        "--cubes",
        type=cube_counts,
        default=list(scenario.CUBE_COUNTS),
        metavar="N,N,...",
        help=f"comma-separated cube counts to evaluate, each at least 1 (default: {default_cubes})",
    )
    out.add_argument("--json", action="store_true", help="print the raw figures as JSON instead of the tables")
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    evaluation = []
    for cubes in args.cubes:
        print(f"evaluating {cubes} cubes ...", file=sys.stderr, flush=True)
        evaluation.append(evaluate(cubes, args.repeats))
    rows = {r["cubes"]: r for r in evaluation}
    print("planning ...", file=sys.stderr, flush=True)
    result = {
        "evaluation": evaluation,
        "growth2to64": growth(rows, 2, 64),
        "marginal": marginal(rows),
        "fit": linear_fit(rows),
        "planning": [planning.measure(c, s, args.repeats, seed=5) for c, s in PLANNING_CASES],
    }
    print("elastic serving ...", file=sys.stderr, flush=True)
    result["elastic"] = elastic.run()
    print("change preview ...", file=sys.stderr, flush=True)
    result["diff"] = [diff_run(c, args.repeats) for c in DIFF_CUBES]
    result["diffCommandSeconds"] = diff_bench.command_seconds()
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
