"""Values the preview does not know: the inputs that reference a replaced resource.

A replaced resource's outputs are unknown until it exists again (facts.DEPENDENT_UNKNOWN); offline, the
engine finds them by the replaced resource's identifiers (its names and the mock runner's markers).
"""

from __future__ import annotations

import copy
from typing import Any

from components.model.diff import facts as F
from components.model.diff import paths

Record = dict[str, Any]
UNKNOWN = "<unknown>"  # components/cli/snapshot.py's marker for a value the preview does not know


def _leaves(value: Any) -> set[str]:
    if isinstance(value, dict | list):
        return set().union(*(_leaves(v) for v in (value.values() if isinstance(value, dict) else value)))
    return {value} if isinstance(value, str) else set()


def references(record: Record) -> set[str]:
    """What identifies a resource to its dependents: its name (GCP `name`/`accountId`, Kubernetes
    `metadata.name`) and the mock runner's markers for its id and self link."""
    inputs = record.get("inputs") or {}
    names = {inputs.get("name"), inputs.get("accountId"), (inputs.get("metadata") or {}).get("name")}
    return {n for n in names if isinstance(n, str) and n} | {f"<{record['name']}.{o}>" for o in ("id", "selfLink")}


def _is_ref(s: str, refs: set[str]) -> bool:
    return any(
        s == ref or (ref.startswith("<") and ref in s) or s.startswith(f"{ref}@") or s.endswith(f"/{ref}")
        for ref in refs
    )


def _mentions(found: list[tuple[paths.Path, Any]], refs: set[str]) -> bool:
    """A value at a fact's path is (or embeds) one of the replaced resource's identifiers: unknown in the preview."""
    strings = set().union(*(_leaves(v) for _, v in found))
    return any(_is_ref(s, refs) for s in strings)


def unknown_at(fact: F.Fact, inputs: dict[str, Any], refs: set[str]) -> bool:
    """The value at a fact's path is unknown in the preview. A ForceNew block counts its items (SDKv2), which an
    unknown inside it does not change: only the block itself unknown applies, the inner fields have their facts."""
    found = paths.values(inputs, fact.parsed)
    if fact.when == F.PRESENCE:
        return any(isinstance(v, str) and _is_ref(v, refs) for _, v in found)
    return _mentions(found, refs)


def unknown_leaves(value: Any, refs: set[str], at: paths.Path) -> list[paths.Path]:
    """The concrete paths under `at` whose value references a replaced resource (unknown in the preview)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in unknown_leaves(v, refs, (*at, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in unknown_leaves(v, refs, (*at, i))]
    return [at] if isinstance(value, str) and _is_ref(value, refs) else []


def as_previewed(inputs: dict[str, Any], unknown: list[paths.Path]) -> dict[str, Any]:
    """The inputs a provider's `check` sees in the preview: the unknown paths replaced by the unknown marker."""
    out = copy.deepcopy(inputs)
    for path in unknown:
        paths.assign(out, path, UNKNOWN)
    return out
