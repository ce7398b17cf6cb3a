"""Strict schema validation of the Kubernetes objects the program declares (a library, not a test module).

Custom resources are validated against the pinned upstream CRDs under ``schemas/crds`` and ``schemas/monitoring``
of the upstream root (tests/upstream.py; pinned in tests/upstream_files.toml): Kueue v0.17.4, JobSet v0.11.1,
LeaderWorkerSet v0.8.0, Gateway API Inference Extension v1.5.0, Gateway API v1.4.1 (standard channel) and Google
Cloud Managed Service for Prometheus v0.17.2. They are indexed by content (``spec.group``, served
``spec.versions[].name``, ``spec.names.kind``) from any ``*.yaml``/``*.yml``/``*.json`` file, multi-document
files included. Built-in kinds use the schema files ``kubernetes_validate.validate(obj, "1.36.0", strict=True)``
uses, through the same validator, so that all errors are collected (the package stops at the first one); a kind
is built-in only if the schema's ``x-kubernetes-group-version-kind`` names exactly that group, version and kind
(the package maps ``apps.example.com/v1`` to ``apps/v1``).

Strictness: in a structural schema an object node without ``additionalProperties`` or
``x-kubernetes-preserve-unknown-fields: true`` is closed (the API server prunes any field it does not name), so
the strict copy gives every such node ``additionalProperties: false`` (through ``properties``, ``items``,
``additionalProperties`` and the ``allOf``/``anyOf``/``oneOf``/``not`` branches that declare ``type: object``).
Branches without a ``type`` are value overlays of their parent (Gateway API's ``spec.addresses[]`` ``oneOf``
names only ``type``): closing them would reject valid objects, so the parent enforces the field set. Also: the
top-level ``metadata`` is the strict built-in ``ObjectMeta``; ``x-kubernetes-int-or-string`` accepts an integer
or a string and ``nullable`` null; ``x-kubernetes-list-type: set``/``map`` reject duplicate items/keys as the
API server does; the formats ``int32``/``int64`` (ranges), ``ipv4``/``ipv6``, ``date-time`` (RFC 3339) and
``byte`` (base64) are checked, any other (``quantity`` ...) is not. CEL rules are tests/cel_rules.py's.

Every error is a string ``"<JSONPath>: <message>"``, e.g. ``$.spec.levels[0].nodeLabell: unknown field
"nodeLabell"``.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import ipaddress
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource

from tests import cel_rules, upstream

ROOT = Path(__file__).resolve().parent.parent
CRD_DIRS = ("schemas/crds", "schemas/monitoring")  # under the upstream root; every CRD in them is indexed
K8S_VERSION = "1.36.0"
K8S_SCHEMA_DIR = f"kubernetes-json-schema/v{K8S_VERSION}-local-strict"
K8S_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
OBJECT_META_REF = f"{K8S_DEFINITIONS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
CRD_SUFFIXES = (".yaml", ".yml", ".json")
MAX_MESSAGE = 400

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

GVK = tuple[str, str]  # (apiVersion, kind), e.g. ("kueue.x-k8s.io/v1beta2", "Topology")


# --------------------------------------------------------------------------------------------- environment


def crd_dirs(base: Path | None = None) -> list[Path]:
    return [(upstream.root() if base is None else base) / d for d in CRD_DIRS]


def require_charts_dir() -> Path:
    return upstream.path("schemas/charts")


def require_registry() -> SchemaRegistry:
    """The registry of every pinned CRD, for a test: skips (fails in CI) when a pinned CRD file is missing."""
    return SchemaRegistry.load(*crd_dirs(upstream.require(*CRD_DIRS)))


# --------------------------------------------------------------------------------------------- the validator

_FORMATS = FormatChecker(formats=())


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
    _FORMATS.checks(_name, _raises)(_check)


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


_Validator = jsonschema.validators.extend(Draft202012Validator, {"x-kubernetes-list-type": _list_type})


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


def _collect(validator: Any, obj: Any) -> list[str]:
    """Every error, sorted by path (a parent before its children), then message."""
    found = {m for e in validator.iter_errors(obj) for m in _messages(e)}
    return sorted(found, key=lambda m: (m.split(": ", 1)[0], m))


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
def _builtin_validator(api_version: str, kind: str) -> Any | None:
    schema = builtin_schema(api_version, kind)
    return None if schema is None else _Validator(schema, registry=_k8s_registry(), format_checker=_FORMATS)


def validate_builtin(obj: Mapping[str, Any]) -> list[str]:
    """Errors of a built-in object against Kubernetes 1.36 (strict); a kind that is not built-in is an error."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    validator = _builtin_validator(str(api_version), str(kind))
    if validator is None:
        return [f"$: no schema for {api_version}/{kind} (not a built-in kind of Kubernetes {K8S_VERSION})"]
    return _collect(validator, obj)


# --------------------------------------------------------------------------------------------- custom resources

_COMBINATORS = ("allOf", "anyOf", "oneOf")
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A strict copy of a CRD's ``openAPIV3Schema`` (see the module docstring); the input is not modified."""
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


class SchemaRegistry:
    """The served versions of every CRD under some directories, indexed by ``(apiVersion, kind)``; validates objects."""

    def __init__(self, *directories: str | os.PathLike[str]) -> None:
        if not directories:
            raise ValueError("no CRD directory given")
        self.directories = tuple(Path(d) for d in directories)
        for directory in self.directories:
            if not directory.is_dir():
                raise FileNotFoundError(f"CRD directory {directory} does not exist")
        self._schemas: dict[GVK, dict[str, Any]] = {}
        self._sources: dict[GVK, Path] = {}
        self._crds: dict[GVK, dict[str, Any]] = {}
        self._validators: dict[GVK, Any] = {}
        for directory in self.directories:
            for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix.lower() in CRD_SUFFIXES):
                self._load(path)

    @classmethod
    def load(cls, *directories: str | os.PathLike[str]) -> SchemaRegistry:
        """A cached registry per (resolved) directories: loading the CRDs takes a moment."""
        return _registry(tuple(Path(d).resolve() for d in directories))

    def _load(self, path: Path) -> None:
        try:
            documents = list(yaml.load_all(path.read_text(), Loader=_YAML_LOADER))
        except yaml.YAMLError as err:
            raise ValueError(f"{path}: not YAML: {err}") from err
        for doc in documents:
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            if doc.get("apiVersion") != "apiextensions.k8s.io/v1":
                raise ValueError(f"{path}: {doc.get('apiVersion')} CRDs are not supported (only apiextensions/v1)")
            spec = doc.get("spec") or {}
            group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
            for version in spec.get("versions") or []:
                schema = ((version.get("schema") or {}).get("openAPIV3Schema")) if version.get("served") else None
                if not (group and kind and schema):
                    continue
                key = (f"{group}/{version['name']}", kind)
                if key in self._schemas and self._schemas[key] != schema:
                    raise ValueError(f"{key[0]}/{key[1]} is defined differently in {self._sources[key]} and {path}")
                self._schemas[key] = schema
                self._sources[key] = path
                self._crds[key] = doc

    def kinds(self) -> list[GVK]:
        return sorted(self._schemas)

    def __contains__(self, key: object) -> bool:
        return key in self._schemas

    def __len__(self) -> int:
        return len(self._schemas)

    def source(self, api_version: str, kind: str) -> Path:
        return self._sources[(api_version, kind)]

    def crd(self, api_version: str, kind: str) -> dict[str, Any]:
        return self._crds[(api_version, kind)]

    def schema(self, api_version: str, kind: str) -> dict[str, Any]:
        """The CRD's ``openAPIV3Schema`` as published."""
        return self._schemas[(api_version, kind)]

    def strict_schema(self, api_version: str, kind: str) -> dict[str, Any]:
        return self._validator(api_version, kind).schema

    def _validator(self, api_version: str, kind: str) -> Any:
        key = (api_version, kind)
        if key not in self._validators:
            schema = strict_schema(self._schemas[key])
            self._validators[key] = _Validator(schema, registry=_k8s_registry(), format_checker=_FORMATS)
        return self._validators[key]

    def validate(self, obj: Mapping[str, Any]) -> list[str]:
        return validate(obj, registry=self)


@functools.cache
def _registry(directories: tuple[Path, ...]) -> SchemaRegistry:
    return SchemaRegistry(*directories)


def default_registry() -> SchemaRegistry | None:
    """The cached registry of the pinned CRDs under the upstream root, or None when a directory is missing."""
    dirs = crd_dirs()
    return SchemaRegistry.load(*dirs) if all(d.is_dir() for d in dirs) else None


def validate(obj: Mapping[str, Any], registry: SchemaRegistry | None = None) -> list[str]:
    """Every error of ``obj`` against its schema, as ``"<JSONPath>: <message>"`` strings; [] when it is valid.

    Custom resources are looked up in ``registry`` (default: the pinned CRDs under the upstream root), then
    built-in kinds in Kubernetes 1.36. A kind found in neither is an error ("no schema for <apiVersion>/<kind>").
    """
    if not isinstance(obj, Mapping):
        return [f"$: expected an object (a mapping), got {type(obj).__name__}"]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    missing = [name for name, value in (("apiVersion", api_version), ("kind", kind)) if not isinstance(value, str)]
    if missing or not api_version or not kind:
        return [f"$: {' and '.join(missing) or 'apiVersion/kind'} must be non-empty strings"]
    if registry is None:
        registry = default_registry()
    if registry is not None and (api_version, kind) in registry:
        return _collect(registry._validator(api_version, kind), obj)
    validator = _builtin_validator(api_version, kind)
    if validator is not None:
        return _collect(validator, obj)
    if registry is not None:
        where = f"not in the CRDs in {', '.join(str(d) for d in registry.directories)}"
    else:
        where = f"no CRDs loaded: {', '.join(str(d) for d in crd_dirs())} missing; run `{upstream.FETCH_COMMAND}`"
    return [f"$: no schema for {api_version}/{kind} ({where}; not a built-in kind of Kubernetes {K8S_VERSION})"]


def check(objects: Iterable[tuple[str, Mapping[str, Any]]], registry: SchemaRegistry) -> tuple[dict, dict, dict, set]:
    """Of named objects: the schema errors and the CEL rejections by name, the CEL rules not evaluated (rule ->
    where) and the kinds a rule passed on; a custom kind's rules are evaluated as kube-apiserver does on create."""
    failures, rejected, unevaluated, passed = {}, {}, {}, set()
    for name, obj in objects:
        if errors := validate(obj, registry):
            failures[name] = errors
        key = (obj["apiVersion"], obj["kind"])
        if key in registry:  # a built-in kind has no CEL rules in its OpenAPI schema
            outcomes = cel_rules.evaluate(obj, registry.schema(*key))
            if bad := cel_rules.rejections(outcomes):
                rejected[name] = bad
            unevaluated |= {o.rule.rule: f"{name} {o.path}: {o.detail}" for o in outcomes if o.status == "unevaluated"}
            passed |= {obj["kind"] for o in outcomes if o.status == "passed"}
    return failures, rejected, unevaluated, passed
