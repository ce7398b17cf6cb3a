"""The jsonschema validator the conformance checks use, with the API server's list rules and formats, and the
Kubernetes 1.36 schemas of built-in kinds (a library, not a test module; tests/conformance.py is its front)."""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import resources
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource

K8S_VERSION = "1.36.0"
K8S_SCHEMA_DIR = f"kubernetes-json-schema/v{K8S_VERSION}-local-strict"
K8S_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
OBJECT_META_REF = f"{K8S_DEFINITIONS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
MAX_MESSAGE = 400

# --------------------------------------------------------------------------------------------- the validator

FORMATS = FormatChecker(formats=())


def _is_integral(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


_RFC3339 = re.compile(
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?"
    r"([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$"
)


def _strings(check: Callable[[str], Any]) -> Callable[[object], bool]:
    return lambda value: not isinstance(value, str) or check(value) is not None


for _name, _check, _raises in (
    ("int32", lambda v: not _is_integral(v) or -(2**31) <= v < 2**31, ()),
    ("int64", lambda v: not _is_integral(v) or -(2**63) <= v < 2**63, ()),
    ("ipv4", _strings(ipaddress.IPv4Address), ValueError),
    ("ipv6", _strings(ipaddress.IPv6Address), ValueError),
    ("date-time", _strings(_RFC3339.match), ()),
    ("byte", _strings(lambda v: base64.b64decode(v, validate=True)), (binascii.Error, ValueError)),
):
    FORMATS.checks(_name, _raises)(_check)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _list_type(validator: Any, list_type: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    """``x-kubernetes-list-type``: ``set`` items and ``map`` keys must be unique (``atomic`` lists are unchecked)."""
    if not validator.is_type(instance, "array"):
        return
    if list_type == "set":
        seen: dict[str, int] = {}
        for i, item in enumerate(instance):
            first = seen.setdefault(_canonical(item), i)
            if first != i:
                yield ValidationError(f"duplicate item {item!r} in a set list (same as [{first}])", path=[i])
    elif list_type == "map":
        keys = list(schema.get("x-kubernetes-list-map-keys") or [])
        seen = {}
        for i, item in enumerate(instance):
            if not isinstance(item, dict) or not keys:
                continue
            key = _canonical([item.get(k) for k in keys])
            first = seen.setdefault(key, i)
            if first != i:
                shown = ", ".join(f"{k}={item.get(k)!r}" for k in keys)
                yield ValidationError(f"duplicate entry {shown} in a map list (same key as [{first}])", path=[i])


Validator = jsonschema.validators.extend(Draft202012Validator, {"x-kubernetes-list-type": _list_type})


def _path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$-]*", str(part)):
            out += f".{part}"
        else:
            out += f"[{json.dumps(str(part))}]"
    return out


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _unexpected(error: ValidationError) -> list[str]:
    """The fields an ``additionalProperties: false`` error is about."""
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    known = set(schema.get("properties", {}))
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    return sorted(k for k in instance if k not in known and not any(p.search(k) for p in patterns))


def _messages(error: ValidationError) -> list[str]:
    where = list(error.absolute_path)
    if error.validator == "additionalProperties" and error.validator_value is False:
        extra = _unexpected(error)
        if extra:
            return [f'{_path([*where, name])}: unknown field "{name}"' for name in extra]
    message = error.message
    if error.validator in ("anyOf", "oneOf") and error.context:
        reasons = sorted({_shorten(sub.message) for sub in error.context})
        message = f"{message} ({'; '.join(reasons)})"
    return [f"{_path(where)}: {_shorten(message)}"]


def collect(validator: Any, obj: Any) -> list[str]:
    """Every error, sorted by path (a parent before its children), then message."""
    found = {m for e in validator.iter_errors(obj) for m in _messages(e)}
    return sorted(found, key=lambda m: (m.split(": ", 1)[0], m))


def validator_for(schema: Mapping[str, Any]) -> Any:
    """A validator of ``schema`` whose ``$ref``s resolve in the Kubernetes definitions."""
    return Validator(schema, registry=_k8s_registry(), format_checker=FORMATS)


# --------------------------------------------------------------------------------------------- built-in kinds


@functools.cache
def _k8s_file(name: str) -> dict[str, Any] | None:
    ref = resources.files("kubernetes_validate").joinpath(K8S_SCHEMA_DIR, name)
    return json.loads(ref.read_text()) if ref.is_file() else None


@functools.cache
def _k8s_registry() -> Registry:
    definitions = _k8s_file("_definitions.json")
    if definitions is None:  # pragma: no cover (depends on the installed package)
        raise RuntimeError(f"kubernetes-validate has no {K8S_SCHEMA_DIR}; it is needed for Kubernetes {K8S_VERSION}")
    return Resource.from_contents(definitions) @ Registry()


def builtin_schema(api_version: str, kind: str) -> dict[str, Any] | None:
    """The kubernetes-validate 1.36 strict schema of a built-in kind, or None if it is not one.

    The file is the one `kubernetes_validate.validate` picks (``<kind>-<group prefix>-<version>.json``); it only
    counts if its ``x-kubernetes-group-version-kind`` names this exact group, version and kind.
    """
    short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = _k8s_file(f"{kind.lower()}-{short}.json") or {}
    group, _, version = api_version.rpartition("/")
    wanted = {"group": group, "version": version, "kind": kind}
    return schema if wanted in schema.get("x-kubernetes-group-version-kind", []) else None


@functools.cache
def builtin_validator(api_version: str, kind: str) -> Any | None:
    schema = builtin_schema(api_version, kind)
    return None if schema is None else validator_for(schema)


def validate_builtin(obj: Mapping[str, Any]) -> list[str]:
    """Errors of a built-in object against Kubernetes 1.36 (strict); a kind that is not built-in is an error."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    validator = builtin_validator(str(api_version), str(kind))
    if validator is None:
        return [f"$: no schema for {api_version}/{kind} (not a built-in kind of Kubernetes {K8S_VERSION})"]
    return collect(validator, obj)
