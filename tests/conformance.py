"""Strict schema validation of the Kubernetes objects the program declares (a library, not a test module).

Custom resources are validated against the pinned upstream CRDs under ``schemas/crds`` and ``schemas/monitoring``
of the upstream root (tests/upstream.py; pinned in tests/upstream_files.toml): Kueue v0.17.4, JobSet v0.11.1,
LeaderWorkerSet v0.8.0, Gateway API Inference Extension v1.5.0, Gateway API v1.4.1 (standard channel) and Google
Cloud Managed Service for Prometheus v0.17.2. They are indexed by content (``spec.group``, served
``spec.versions[].name``, ``spec.names.kind``) from any ``*.yaml``/``*.yml``/``*.json`` file, multi-document
files included, and made strict by tests/strict_schema.py. Built-in kinds use the schema files
``kubernetes_validate.validate(obj, "1.36.0", strict=True)`` uses, through the same validator
(tests/schema_checks.py), so that all errors are collected (the package stops at the first one); a kind is
built-in only if the schema's ``x-kubernetes-group-version-kind`` names exactly that group, version and kind (the
package maps ``apps.example.com/v1`` to ``apps/v1``). Both reject unknown fields, duplicate ``set`` items and
``map`` keys as the API server does, and check the formats ``int32``/``int64`` (ranges), ``ipv4``/``ipv6``,
``date-time`` (RFC 3339) and ``byte`` (base64); any other (``quantity`` ...) is not. CEL rules are
tests/cel_rules.py's.

Every error is a string ``"<JSONPath>: <message>"``, e.g. ``$.spec.levels[0].nodeLabell: unknown field
"nodeLabell"``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests import cel_rules, upstream
from tests.schema_checks import K8S_VERSION, builtin_validator, collect, validator_for
from tests.strict_schema import strict_schema

CRD_DIRS = ("schemas/crds", "schemas/monitoring")  # under the upstream root; every CRD in them is indexed
CRD_SUFFIXES = (".yaml", ".yml", ".json")

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

GVK = tuple[str, str]  # (apiVersion, kind), e.g. ("kueue.x-k8s.io/v1beta2", "Topology")


def crd_dirs(base: Path | None = None) -> list[Path]:
    return [(upstream.root() if base is None else base) / d for d in CRD_DIRS]


def require_charts_dir() -> Path:
    return upstream.path("schemas/charts")


def require_registry() -> SchemaRegistry:
    """The registry of every pinned CRD, for a test: skips (fails in CI) when a pinned CRD file is missing."""
    return SchemaRegistry.load(*crd_dirs(upstream.require(*CRD_DIRS)))


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
            self._validators[key] = validator_for(strict_schema(self._schemas[key]))
        return self._validators[key]


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
        return collect(registry._validator(api_version, kind), obj)
    validator = builtin_validator(api_version, kind)
    if validator is not None:
        return collect(validator, obj)
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
