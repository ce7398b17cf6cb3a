"""`python -m components diff`: what `pulumi preview` would do, offline, from the providers' own rules.

Each mode compares two recorded runs of the real `__main__.py` (components/cli/mockrun.py): `--change` the stack
before and after the changes; `--base GIT_REF` the program and stack file at GIT_REF (exported with `git archive`
and run by that revision's own runner in a subprocess) against the working tree; `--second-run` the program's inputs
against what the APIs hold after its first run (components/model/diff/readback.py: a correct program shows no
change). Only property paths are printed, never values: a secret cannot leak through the output.
Exit status: 0 nothing rejected, 1 something is, 2 bad arguments or configuration (one line on stderr), 3 nothing
rejected but some objects not compared (a chart version whose sources are not here: their action is `unknown`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from components.cli import chart_diff, manifest_objects, snapshot
from components.cli.plan import ROOT as ROOT  # the repository (tests run `--base` against it)
from components.cli.plan import (
    OneLineParser,
    StackFileError,
    add_stack_arguments,
    apply_set,
    config_error,
    fail,
    parse_args,
    read_stack,
    secret_keys,
)
from components.model.config.settings import PROJECT
from components.model.diff import engine, readback

HIDDEN = (engine.SAME,)
NOT_COMPARED = "not compared: it could be rendered on one side only (the note says why)"
INCOMPLETE = (
    "error: the preview is incomplete: the objects marked unknown could not be compared (the notes above say why); "
    "a chart version renders offline only from its pinned sources (tests/upstream_files.toml)"
)
GUARD = "pulumi-python:dynamic/queues:ImmutableFields"
POOLS = "pulumi-python:dynamic/teardown:PoolReplacements"


def _guard_check(olds: dict[str, Any], news: dict[str, Any]) -> list[str]:
    """The program's Kueue guard refuses at preview (its provider's `check`): name the field, never the values."""
    from components.kueue_guard import refusals

    return [
        f"{failure.property}: refused by the program's check before any change "
        "(components/kueue_guard.py refusals: Kueue never updates it, and its replacement would delete first the "
        "queued workloads that run before and after)"
        for failure in refusals(olds, news)
    ]


def _previewed(value: Any) -> Any:
    """The engine's unknown marker as the provider's `check` receives an unknown (pulumi.output.Unknown)."""
    from pulumi.output import UNKNOWN

    if isinstance(value, dict):
        return {k: _previewed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_previewed(v) for v in value]
    return UNKNOWN if value == engine.UNKNOWN else value


def _pool_check(olds: dict[str, Any], news: dict[str, Any]) -> list[str]:
    """The program refuses at preview a TPU pool's replacement while workloads ran, or its removal while they stay:
    its provider's `check`, in the provider's words (teardown.py pool_refusals)."""
    from components.teardown import pool_refusals

    return [
        f"{failure.property}: refused by the program's check before any change: {failure.reason}"
        for failure in pool_refusals(olds, _previewed(news))
    ]


CHECKS: dict[str, engine.Check] = {GUARD: _guard_check, POOLS: _pool_check}


class DiffError(Exception):
    """Bad arguments or configuration: one line, exit 2."""


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m components diff",
        description="Preview what a configuration change, a pull request or a second `pulumi up` does to every "
        "resource: create, update, replace (delete-first or not), delete, rejected by the API or a webhook, same. "
        "Offline: Pulumi's mock runtime and the providers' replace-on-change and immutability rules.",
    )
    add_stack_arguments(parser, stack_required=True)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--change", action="append", metavar="KEY=VALUE", help="a changed value (repeatable)")
    mode.add_argument("--base", metavar="GIT_REF", help="compare the program at GIT_REF with the working tree")
    mode.add_argument("--second-run", action="store_true", help="the program against its own first run")
    parser.add_argument("--json", action="store_true", help="print the changes as JSON")
    return parser


def _in_process(
    config: dict[str, Any],
    stack: str,
    secrets: set[str],
    previous: dict[str, Any] | None = None,
    reservation: Any | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The run's records, and the outputs the next run reads back from the stack (components/preflight.py
    read_deployed_serving): `previous` are those of the run before it, None for a stack's first update;
    `reservation` (a cli/mocks.py FakeReservation) answers the reservation invokes instead of the markers."""
    from components.cli.mockrun import execute, exported
    from components.cli.mocks import SymbolicMocks
    from components.model.serving.deployed import SERVING_SHAPE_OUTPUT

    secret = sorted(secrets | {k for k in config if k.endswith(":hfToken")})
    mocks = SymbolicMocks(previous)
    if reservation is not None:
        mocks.reservation = reservation
    run = execute(config, stack=stack, secret_keys=secret, mocks=mocks)
    if run.error is not None:
        refusal = f"stack {stack}: the program refused the configuration: {snapshot.error_text(run.error)}"
        raise DiffError(config_error(refusal, config, "; "))
    shape = exported(SERVING_SHAPE_OUTPUT)
    return snapshot.records(run.registrations), ({SERVING_SHAPE_OUTPUT: shape} if shape is not None else {})


def _git(args: list[str], cwd: Path) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except OSError as err:
        raise DiffError(f"cannot run git: {err.strerror or err}") from None
    if done.returncode != 0:
        text = done.stderr.decode(errors="replace").strip().splitlines()
        raise DiffError(f"git {' '.join(args)}: {text[-1] if text else 'failed'}")
    return done.stdout


def _at_ref(ref: str, stack: str, sets: Sequence[str], directory: Path) -> list[dict[str, Any]]:
    """The program and stack file at `ref`, run by that revision's own mock runner in a subprocess."""
    top = Path(_git(["rev-parse", "--show-toplevel"], directory).decode().strip())
    try:
        if ref.startswith("-"):
            raise DiffError(ref)
        sha = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], top).decode().strip()
    except DiffError:
        raise DiffError(f"--base {ref!r}: not a commit here; a branch, tag or commit, e.g. origin/main") from None
    with tempfile.TemporaryDirectory(prefix="diff-base-") as tmp:
        archive = Path(tmp) / "base.tar"
        archive.write_bytes(_git(["archive", "--format=tar", sha], top))
        tree = Path(tmp) / "tree"
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
        sub = directory.resolve().relative_to(top) if directory.resolve().is_relative_to(top) else Path()
        root = tree / sub
        if not (root / "components" / "cli" / "mockrun.py").is_file():
            raise DiffError(f"--base {ref}: that revision has no components/cli/mockrun.py to run the program with")
        cmd = [sys.executable, str(Path(snapshot.__file__).resolve()), "--root", str(root), "--stack", stack]
        cmd += [arg for assignment in sets for arg in ("--set", assignment)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise DiffError(f"--base {ref}: the program could not run: {lines[-1] if lines else 'no output'}")
    result = json.loads(done.stdout)
    if result["error"]:
        raise DiffError(f"--base {ref}: stack {stack}: {result['error']}")
    return list(result["records"])


def _diff(old: list[dict[str, Any]], new: list[dict[str, Any]], notes: list[str], **rules: Any) -> engine.Result:
    """engine.diff with the objects inside every chart, and those the program writes into a fetched manifest, as
    their own records (components/cli/chart_diff.py, components/cli/manifest_objects.py); objects that could not be
    compared are `unknown`, never `same`."""
    expanded = chart_diff.expand_both(old, new)
    old_expanded, new_expanded, manifest_notes, files = manifest_objects.expand_both(expanded.old, expanded.new)
    notes += expanded.notes + manifest_notes
    result = engine.diff(old_expanded, new_expanded, **rules)
    charts = {r["urn"]: r["name"] for r in (*old_expanded, *new_expanded) if r["type"] in chart_diff.EXPANDED}
    listed = {r["parent"] for r in (*old_expanded, *new_expanded) if r.get("parent") in charts}
    unknown_parents = {r["parent"] for r, _ in expanded.unknown}
    written = {r["urn"] for r in new_expanded if r.get("parent") in files}
    for change in result.changes:
        if change.urn in written and change.action != engine.SAME:
            change.reason = manifest_objects.WHY
        if change.type not in chart_diff.EXPANDED:
            continue
        if change.urn in expanded.opaque:
            change.action, change.reason = (
                engine.UNKNOWN_ACTION,
                f"{change.action}; its objects could not be rendered here: {expanded.opaque[change.urn]}",
            )
        elif change.urn in unknown_parents:
            change.reason = f"its objects are listed below as unknown (`{change.name}:<namespace>/<name>`)"
        elif change.urn in listed:
            change.reason = f"its objects are compared one by one below (`{change.name}:<namespace>/<name>`)"
    result.changes += [
        engine.Change(r["name"], r["type"], engine.UNKNOWN_ACTION, reason=NOT_COMPARED, urn=r["urn"])
        for r, _ in expanded.unknown
    ]
    result.changes.sort(key=lambda c: (c.name, c.type))
    return result


def compute(args: argparse.Namespace, notes: list[str] | None = None) -> engine.Result:
    """The preview of `args`; what could not be compared (a chart's objects offline) is appended to `notes`."""
    notes = [] if notes is None else notes
    try:
        config = read_stack(args.dir, args.stack, args.set)
        secrets = set(secret_keys(args.dir, args.stack))
    except StackFileError as err:
        raise DiffError(str(err)) from None
    if args.second_run:
        first, outputs = _in_process(config, args.stack, secrets)
        second, _ = _in_process(config, args.stack, secrets, outputs)
        # The charts are expanded after the read-back: both runs render the same objects from the same values.
        return _diff(readback.read_back(first), second, notes, suppress=readback.SUPPRESSORS, checks=CHECKS)
    if args.base:
        # The base revision runs in a subprocess that hands back records only: the new run reads no outputs.
        old = _at_ref(args.base, args.stack, args.set, args.dir)
        return _diff(old, _in_process(_as_running(config, old), args.stack, secrets)[0], notes, checks=CHECKS)
    return change_preview(config, args.stack, secrets, args.change, notes=notes)


_BLOCK_IN_AFFINITY = re.compile(r"/reservationBlocks/([^/<>]+)")


def _as_running(config: dict[str, Any], old: list[dict[str, Any]]) -> dict[str, Any]:
    """`config` with the zone and block of the base's TPU pools where it leaves them to the reservation: a preview
    reads them from the running pools (components/placement.py), which the base's pools stand for here."""
    tpu = config.get(f"{PROJECT}:tpu") or {}
    pools = [
        r["inputs"]
        for r in old
        if r["type"] == "gcp:container/nodePool:NodePool"
        and (r["inputs"].get("nodeConfig") or {}).get("reservationAffinity")
    ]
    if not pools:
        return config
    zones = pools[0].get("nodeLocations") or []
    values = pools[0]["nodeConfig"]["reservationAffinity"].get("values") or [""]
    block = _BLOCK_IN_AFFINITY.search(values[0])
    if f"{PROJECT}:zone" not in config and zones and "<" not in zones[0]:
        config = apply_set(config, f"zone={zones[0]}")
    if "block" not in (tpu.get("reservation") or {}) and block:
        config = apply_set(config, f"tpu.reservation.block={block.group(1)}")
    return config


def change_preview(
    config: dict[str, Any],
    stack: str,
    secrets: set[str],
    changes: Sequence[str],
    reservation: Any | None = None,
    notes: list[str] | None = None,
) -> engine.Result:
    """What `--change` does to `config` (KEY=VALUE each, as `--change` takes them), for other commands: the
    health command previews its `tpu.subBlocks` proposal with it, `reservation` naming the real sub-blocks; what
    could not be compared (a chart's objects offline) is appended to `notes`. Raises DiffError."""
    notes = [] if notes is None else notes
    changed = config
    try:
        for assignment in changes:
            changed = apply_set(changed, assignment)
    except StackFileError as err:
        raise DiffError(str(err).replace("--set", "--change")) from None
    old, outputs = _in_process(config, stack, secrets, reservation=reservation)
    return _diff(old, _in_process(changed, stack, secrets, outputs, reservation)[0], notes, checks=CHECKS)


def table(result: engine.Result, stack: str) -> str:
    shown = [c for c in result.changes if c.action not in HIDDEN]
    width = max([len(c.name) for c in shown] + [8])
    lines = [f"stack {stack}: " + ", ".join(f"{n} {a}" for a, n in result.totals.items() if n)]
    if shown:
        lines += ["", f"{'action':9} {'resource':{width}}  type"]
    for c in shown:
        kind = c.type.rsplit(":", 1)[-1] if c.type.startswith(("gcp:", "kubernetes:")) else c.type
        flag = " (delete first)" if c.delete_first else ""
        lines.append(f"{c.action:9} {c.name:{width}}  {kind}{flag}")
        if c.properties:
            lines.append(f"{'':9} {'':{width}}  changed: {', '.join(c.properties)}")
        if c.reason:
            lines.append(f"{'':9} {'':{width}}  why: {c.reason}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    args = parse_args(_parser(), argv, "diff")
    notes: list[str] = []
    try:
        result = compute(args, notes)
    except DiffError as e:
        return fail(err, " ".join(str(e).split()))  # one line, however the program wrapped it
    for note in notes:
        print(f"note: {note}", file=err)
    print(json.dumps(result.as_dict(), indent=2) if args.json else table(result, args.stack), file=out)
    if result.rejected:
        return 1
    if result.unknown:
        print(INCOMPLETE, file=err)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
