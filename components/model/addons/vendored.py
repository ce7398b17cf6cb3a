"""The upstream files the program applies from the repository (manifests/vendored/, listed in its sources.toml).

Read by the program (the Gateway API Inference Extension's CRDs, components/addons.py) and by the change preview,
which sees their objects as the component's inputs; nothing is fetched at preview or `up`.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.model.config.checks import version_order

VENDORED = Path(__file__).resolve().parents[3] / "manifests" / "vendored"
SOURCES = VENDORED / "sources.toml"
GAIE = "gateway-api-inference-extension"


@dataclass(frozen=True)
class VendoredFile:
    path: str  # <project>-<version>/<file>, relative to manifests/vendored/
    url: str
    revision: str
    sha256: str

    @property
    def release(self) -> tuple[str, str]:
        return release(self.path)


@dataclass(frozen=True)
class Omitted:
    path: str
    why: str

    @property
    def release(self) -> tuple[str, str]:
        return release(self.path)


_RELEASE_DIR = re.compile(r"^(?P<project>.+?)-(?P<version>v?\d+\.\d+\.\d+\S*)$")


def release(path: str) -> tuple[str, str]:
    """(project, version) of a vendored path's directory, e.g. ("gateway-api-inference-extension", "v1.6.0")."""
    m = _RELEASE_DIR.match(path.split("/", 1)[0])
    if m is None:
        raise ValueError(f"{path}: not under a <project>-<version>/ directory")
    return m["project"], m["version"]


@functools.cache
def _load(sources: Path = SOURCES) -> tuple[tuple[VendoredFile, ...], tuple[Omitted, ...]]:
    data = tomllib.loads(sources.read_text())
    return (
        tuple(VendoredFile(**entry) for entry in data.get("file", [])),
        tuple(Omitted(**entry) for entry in data.get("omitted", [])),
    )


def files(project: str | None = None, version: str | None = None) -> list[VendoredFile]:
    """The vendored files, of one project's release when given."""
    return [f for f in _load()[0] if (project, version) in ((None, None), f.release)]


def omitted(project: str, version: str) -> list[Omitted]:
    return [o for o in _load()[1] if o.release == (project, version)]


def versions(project: str) -> list[str]:
    """The releases of `project` this repository vendors (files or recorded omissions), oldest first."""
    found = {entry.release[1] for entry in (*_load()[0], *_load()[1]) if entry.release[0] == project}
    return sorted(found, key=version_order)


def parse(path: str) -> list[dict[str, Any]]:
    """The objects of one vendored file as the program applies them: without the `status` a generated CRD file
    carries (empty: `conditions: null`, `storedVersions: null`), which the API server sets itself and ignores on
    create and update (a CRD's status changes only through its status subresource)."""
    docs = yaml.safe_load_all((VENDORED / path).read_text())
    return [{k: v for k, v in d.items() if k != "status"} for d in docs if isinstance(d, dict) and d]


def objects(project: str, version: str) -> list[dict[str, Any]]:
    """Every object of a release's vendored files."""
    return [obj for f in files(project, version) for obj in parse(f.path)]


def crd_name(file_name: str) -> str:
    """A kubebuilder CRD file's object name: `<group>_<plural>.yaml` holds the CRD `<plural>.<group>`."""
    group, _, plural = file_name.removesuffix(".yaml").partition("_")
    return f"{plural}.{group}"


def by_url() -> dict[str, VendoredFile]:
    """The vendored copy of each upstream URL (a stack file or an older revision may still name the URL)."""
    return {f.url: f for f in files()}
