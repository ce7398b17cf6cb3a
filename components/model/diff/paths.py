"""Property paths: parse `a.b[*].c`, `metadata.labels["kueue.x-k8s.io/queue-name"]`; read and compare values.

A path is a tuple of segments: a `str` is an object key, an `int` a list index, `ANY` every list item or
map value. Values are plain JSON-like data (what the mock runner recorded, secrets already replaced
by a digest marker), so this module needs nothing from Pulumi.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

ANY = "*"
Path = tuple[str | int, ...]
_TOKEN = re.compile(r'\.?([A-Za-z0-9_$@/-]+)|\[(\*|\d+|"[^"]*")\]')
MISSING = object()  # a value that is not there (distinct from None/null)
SECRET = "<secret>"


def parse(text: str) -> Path:
    """`spec.levels[*].nodeLabel` -> ("spec", "levels", "*", "nodeLabel"); `["a.b/c"]` keys keep their dots."""
    out: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or (pos == 0 and text.startswith(".")):
            raise ValueError(f"bad property path {text!r} at {pos}")
        name, bracket = m.groups()
        if name is not None:
            out.append(name)
        elif bracket == ANY:
            out.append(ANY)
        elif bracket.startswith('"'):
            out.append(bracket[1:-1])
        else:
            out.append(int(bracket))
        pos = m.end()
    return tuple(out)


def show(path: Path) -> str:
    """The inverse of `parse`: keys with characters other than letters, digits and `_` in quotes."""
    text = ""
    for seg in path:
        if isinstance(seg, int) or seg == ANY:
            text += f"[{seg}]"
        elif re.fullmatch(r"[A-Za-z0-9_$@-]+", seg):
            text += f".{seg}" if text else seg
        else:
            text += f'["{seg}"]'
    return text


def values(obj: Any, path: Path) -> list[tuple[Path, Any]]:
    """Every (concrete path, value) at `path`; wildcards expand over list items and map values."""
    found: list[tuple[Path, Any]] = []

    def walk(node: Any, rest: Path, at: Path) -> None:
        if not rest:
            found.append((at, node))
            return
        seg, tail = rest[0], rest[1:]
        if seg == ANY:
            if isinstance(node, list):
                for i, item in enumerate(node):
                    walk(item, tail, (*at, i))
            elif isinstance(node, dict):
                for key, item in node.items():
                    walk(item, tail, (*at, key))
        elif _has(node, seg):
            walk(node[seg], tail, (*at, seg))
        elif isinstance(seg, str) and isinstance(node, list):
            # A block the bridge flattened from a one-item list, or a list of blocks: look into every item.
            for i, item in enumerate(node):
                walk(item, rest, (*at, i))

    walk(obj, path, ())
    return found


def get(obj: Any, path: Path, default: Any = MISSING) -> Any:
    """The value at a concrete path, or `default`."""
    node = obj
    for seg in path:
        if not _has(node, seg):
            return default
        node = node[seg]
    return node


def _has(node: Any, seg: str | int) -> bool:
    """`node[seg]` exists: a list's index or an object's key."""
    if isinstance(seg, int):
        return isinstance(node, list) and seg < len(node)
    return isinstance(node, dict) and seg in node


def changed(old: Any, new: Any, at: Path = ()) -> Iterator[Path]:
    """The paths where `old` and `new` differ: the deepest key that differs; a list of another length whole."""
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict) and not (_sealed(old) or _sealed(new)):
        for key in sorted(old.keys() | new.keys(), key=str):
            yield from changed(old.get(key, MISSING), new.get(key, MISSING), (*at, key))
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from changed(a, b, (*at, i))
    else:
        yield at


def _sealed(value: dict[str, Any]) -> bool:
    """A secret's digest (`{"<secret>": sha256}`, components/cli/snapshot.py) is one value, not an object."""
    return set(value) == {SECRET}


def covers(prefix: Path, path: Path) -> bool:
    """`prefix` (with wildcards) is `path` or one of its ancestors."""
    if len(prefix) > len(path):
        return False
    return all(p in (ANY, q) for p, q in zip(prefix, path, strict=False))


def without_indices(path: Path) -> Path:
    """A concrete path with its list indices as wildcards (for matching facts written with `[*]`)."""
    return tuple(ANY if isinstance(seg, int) else seg for seg in path)


def assign(obj: Any, path: Path, value: Any) -> None:
    """Sets a concrete path in place (MISSING removes the key); missing parents are created as objects."""
    node = obj
    for seg in path[:-1]:
        nxt = node[seg] if isinstance(node, list) else node.get(seg)
        if nxt is None:
            nxt = {}
            node[seg] = nxt
        node = nxt
    last = path[-1]
    if value is MISSING:
        if isinstance(node, dict):
            node.pop(last, None)
    else:
        node[last] = value
