"""The shapes the plan, the sub-block, the health and the change-preview reports share: fixed-width tables and
the camelCase JSON form of their records."""

from __future__ import annotations

from enum import Enum
from typing import Any


def align(rows: list[list[str]]) -> list[str]:
    """Rows of cells as fixed-width text lines (the plan's, the sub-blocks' and the health report's tables)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def record(obj: object, *fields: str | tuple[str, str]) -> dict[str, Any]:
    """`obj`'s attributes (or methods' results) as JSON data, in order: a name goes under its camelCase key, a
    (key, name) pair under key.

    A value with `as_dict()` becomes its dict, an enum its value, a tuple or list a list of such values, any other
    value not of JSON's own types its `str()` (a Topology: "2x2x2")."""
    out = {}
    for spec in fields:
        key, name = spec if isinstance(spec, tuple) else (_camel(spec), spec)
        value = getattr(obj, name)
        out[key] = _plain(value() if callable(value) else value)
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _plain(value: Any) -> Any:
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | dict):
        return value
    return str(value)
