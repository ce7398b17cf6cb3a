"""The change preview (`python -m components diff`) as tests read it, and hand-made records for its engine."""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path
from typing import Any

from components.cli import diff
from components.model.diff import engine
from tests import upstream
from tests.stack_config import ROOT, P, set_arguments


def run(stack: str, *args: str, directory: Path = ROOT) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = diff.main(["--stack", stack, "--dir", str(directory), *set_arguments(stack), *args], out, err)
    return code, out.getvalue(), err.getvalue()


@cache
def preview(stack: str, *args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run(stack, *args, "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


def change(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in result["changes"] if c["name"] == name)


# Without queued workloads: with them, the program refuses a pool's replacement (tests/test_teardown.py).
NO_WORKLOADS = ("demos.subslicing.enabled=false", "demos.superslicing.enabled=false", "serving.enabled=false")
NO_WORKLOADS_SETS = tuple(a for kv in NO_WORKLOADS for a in ("--set", kv))


def urn(name: str, type_: str) -> str:
    return f"urn:pulumi:dev::{P}::{type_}::{name}"


def record(name: str, type_: str, inputs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A registration as the engine reads it (components/cli/snapshot.py records), made by hand."""
    return {"urn": urn(name, type_), "type": type_, "name": name, "custom": True, "inputs": inputs, **extra}


def changed_objects(*changes: str, sets: tuple[str, ...] = ()) -> tuple[list[engine.Change], str]:
    """What `python -m components diff --stack dev [--set ...] --change ...` finds changed (charts' objects too), and
    its notes."""
    upstream.require("charts")
    given = [*set_arguments("dev"), *(f"--set={s}" for s in sets)]
    args = diff._parser().parse_args(["--stack", "dev", *given, *(f"--change={c}" for c in changes)])
    args.dir = diff.ROOT
    notes: list[str] = []
    result = diff.compute(args, notes)
    return [c for c in result.changes if c.action != engine.SAME], "\n".join(notes)
