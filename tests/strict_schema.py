"""The strict copy of a CRD's ``openAPIV3Schema`` that the conformance checks validate custom objects with
(a library, not a test module)."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from tests.schema_checks import OBJECT_META_REF

_COMBINATORS = ("allOf", "anyOf", "oneOf")
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A strict copy of a CRD's ``openAPIV3Schema``; the input is not modified.

    In a structural schema an object node without ``additionalProperties`` or
    ``x-kubernetes-preserve-unknown-fields: true`` is closed (the API server prunes any field it does not name),
    so the copy gives every such node ``additionalProperties: false`` (through ``properties``, ``items``,
    ``additionalProperties`` and the ``allOf``/``anyOf``/``oneOf``/``not`` branches that declare ``type: object``).
    Branches without a ``type`` are value overlays of their parent (Gateway API's ``spec.addresses[]`` ``oneOf``
    names only ``type``): closing them would reject valid objects, so the parent enforces the field set. Also: the
    top-level ``metadata`` is the strict built-in ``ObjectMeta``; ``x-kubernetes-int-or-string`` accepts an
    integer or a string and ``nullable`` null; Go's inline regex flags move where Python accepts them.
    """
    out = _strict(schema, overlay=False)
    out.setdefault("properties", {})["metadata"] = _object_meta(schema.get("properties", {}).get("metadata"))
    return out


def _object_meta(declared: Mapping[str, Any] | None) -> dict[str, Any]:
    """Built-in ObjectMeta, plus whatever extra constraints the CRD puts on metadata (left open)."""
    ref = {"$ref": OBJECT_META_REF}
    extra = {k: v for k, v in (declared or {}).items() if k not in ("type", "description")}
    return {"allOf": [ref, copy.deepcopy(extra)]} if extra else ref


def _strict(schema: Any, *, overlay: bool) -> Any:
    if not isinstance(schema, Mapping):
        return copy.deepcopy(schema)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties") and isinstance(value, Mapping):
            out[key] = {name: _strict(sub, overlay=overlay) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = _strict(value, overlay=overlay)
        elif key in _COMBINATORS and isinstance(value, list):
            out[key] = [_strict(branch, overlay=True) for branch in value]
        elif key == "not" and isinstance(value, Mapping):
            out[key] = _strict(value, overlay=True)
        elif key == "pattern" and isinstance(value, str):
            out[key] = _python_regex(value)
        elif key in ("default", "example", "enum", "x-kubernetes-validations"):
            out[key] = copy.deepcopy(value)
        else:
            out[key] = value if isinstance(value, str | int | float | bool | None) else copy.deepcopy(value)

    if out.get("x-kubernetes-int-or-string") is True:
        declared = out.pop("type", None)
        if declared not in (None, "integer", "string"):
            out["type"] = declared  # a contradiction in the CRD itself: keep it visible
        if "anyOf" not in out:
            out["anyOf"] = copy.deepcopy(_INT_OR_STRING)
        elif not _is_int_or_string(out["anyOf"]):
            out.setdefault("allOf", []).append({"anyOf": copy.deepcopy(_INT_OR_STRING)})

    if out.get("nullable") is True:
        declared = out.get("type")
        if isinstance(declared, str):
            out["type"] = [declared, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]

    if out.get("x-kubernetes-embedded-resource") is True:
        props = out.setdefault("properties", {})
        props["metadata"] = _object_meta(schema.get("properties", {}).get("metadata"))
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        out["required"] = sorted({*out.get("required", []), "apiVersion", "kind"})

    is_object = out.get("type") == "object" or (not overlay and "properties" in out)
    if is_object and "additionalProperties" not in out and out.get("x-kubernetes-preserve-unknown-fields") is not True:
        # A closed node: the API server prunes every field it does not name, so name them or fail.
        out["additionalProperties"] = False
    return out


def _python_regex(pattern: str) -> str:
    """A Go (RE2) ``pattern`` in Python's dialect: Python rejects global flags after ``^`` (Kueue's ``^(?i)...``)."""
    match = re.match(r"^(\^?)\(\?([ims]+)\)", pattern)
    translated = f"(?{match[2]}){match[1]}{pattern[match.end() :]}" if match else pattern
    try:
        re.compile(translated)
    except re.error as err:  # fail when the schema is built, not halfway through validating an object
        raise ValueError(f"CRD pattern {pattern!r} is not a valid Python regular expression: {err}") from err
    return translated


def _is_int_or_string(branches: list[Any]) -> bool:
    types = sorted(b.get("type") for b in branches if isinstance(b, Mapping) and set(b) == {"type"})
    return len(types) == len(branches) and types == ["integer", "string"]
