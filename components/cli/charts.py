"""The objects inside the Helm charts the program installs, rendered offline with Helm's own engine.

`helm.v4.Chart` pulls each chart from its OCI registry and renders it when `pulumi preview`/`up` runs; offline, the
same objects come from the chart's pinned sources at its release tag (upstream_files.py, hash-checked) with the
release script's edits (components/model/addons/chart_release.py), rendered by `helm-python-sdk` (Helm's Go SDK
through ctypes; no helm binary, no network).

Engine versions: the wheel carries Helm v4.2.3; pulumi-kubernetes 4.34.2 renders `helm.v4.Chart` with Helm's v3.20
SDK (its go.mod). The two differ only in what a template cannot see here: the default capabilities (KubeVersion
v1.36.0 against v1.35, the built-in API versions), `lookup` (empty offline in both) and post-renderers (none used);
tests/test_charts.py checks that no pinned chart reads `.Capabilities` or `lookup` except Kueue v0.19.2's
MutatingAdmissionPolicy, guarded by its `enableMutatingAdmissionPolicy` value (off). Release name, namespace and
`IsInstall` are passed as the provider does (provider/pkg/helm/v4 Chart). helm-python-sdk is a dependency of the
offline commands and the tests (requirements-offline.txt), not of the program: it is imported lazily. A chart's
pinned sources missing from the upstream root are fetched on first use into the cache, each file checked against
its pinned sha256 (upstream_files.fetch), so a clone with the offline requirements renders what docs/offline.md shows.
"""

from __future__ import annotations

import copy
import functools
import io
import json
import re
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.cli import upstream_files
from components.model.addons.chart_release import published

CHART = "kubernetes:helm.sh/v4:Chart"  # the type the program registers each chart as
INSTALL_HINT = (
    "pip install -r requirements-offline.txt -c constraints.txt (helm-python-sdk, Helm's engine, renders the charts "
    "offline; it has wheels for Linux x86_64 and arm64, macOS arm64 and Windows x86_64)"
)
# Where each OCI chart's sources are, under the upstream root's `charts/` (`{tag}` = the release tag).
SOURCES: dict[str, tuple[str, str]] = {
    "oci://registry.k8s.io/jobset/charts/jobset": ("jobset", "jobset-{tag}"),
    "oci://registry.k8s.io/kueue/charts/kueue": ("kueue", "kueue-{tag}"),
    "oci://registry.k8s.io/lws/charts/lws": ("lws", "lws-{tag}"),
    "https://kedacore.github.io/charts/keda": ("keda", "keda-{tag}"),
    "oci://ghcr.io/llm-d/charts/llm-d-router-gateway": (
        "llm-d-router-gateway",
        "llm-d-router-{tag}/llm-d-router-gateway",
    ),
}
# Kinds the API server keeps without a namespace (the charts' own CRDs are added per render from their scope).
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "APIService",
        "PriorityClass",
        "FlowSchema",
        "PriorityLevelConfiguration",
        "StorageClass",
    }
)


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the CRDs are megabytes


class ChartUnavailable(Exception):
    """The engine or a chart's sources are not here: one line saying what to run."""


@dataclass(frozen=True)
class Release:
    """One `helm.v4.Chart` of the program, as registered: what the provider would pull and render."""

    resource: str  # the Pulumi name of the Chart component
    chart: str  # oci://..., or a Helm repository's URL and the chart's name joined by "/" (as the settings say it)
    version: str
    name: str  # Helm's release name
    namespace: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rendered:
    release: Release
    objects: list[dict[str, Any]]  # every object, namespaced ones with their namespace, in Helm's install order
    templates: dict[str, str]  # template path -> rendered text (for the values check)


def tag(version: str) -> str:
    return "v" + version.removeprefix("v")


def helm() -> Any:
    try:
        import helm_python
    except ImportError as e:  # pragma: no cover (the suite has it)
        raise ChartUnavailable(f"the chart objects need helm-python-sdk: {INSTALL_HINT}") from e
    return helm_python


def upstream_root() -> Path:
    return upstream_files.root()


def source_dir(release: Release, root: Path | None = None) -> tuple[str, Path]:
    """(chart kind, directory of its sources); ChartUnavailable naming the fetch command when not verified."""
    if release.chart not in SOURCES:
        raise ChartUnavailable(f"{release.resource}: no offline sources for chart {release.chart}")
    kind, pattern = SOURCES[release.chart]
    base = root or upstream_root()
    rel = "charts/" + pattern.format(tag=tag(release.version))
    pinned = upstream_files.under("/".join(rel.split("/")[:2]))
    if not pinned:
        raise ChartUnavailable(
            f"{release.resource}: chart {release.chart} {release.version} has no pinned sources "
            "(tests/upstream_files.toml); only the pinned versions render offline"
        )
    bad = upstream_files.problems(base, pinned)
    failed: list[str] = []
    if bad and root is None:  # first use: the cache, or a hash-checked download into it
        base, failed = _fetched(release, pinned)
        bad = upstream_files.problems(base, pinned)
    if bad:
        why = f"; fetching them failed ({len(failed)} files; {failed[0]})" if failed else ""
        raise ChartUnavailable(
            f"{release.resource}: {len(bad)} of {len(pinned)} source files of {release.chart} {release.version} "
            f"are missing or altered in {base}{why}: run `{upstream_files.FETCH_COMMAND}`"
        )
    return kind, base / rel


def notify(message: str) -> None:
    """What the commands say while they fetch (stderr: stdout is theirs)."""
    print(message, file=sys.stderr)


def _fetched(release: Release, pinned: list[upstream_files.Pinned]) -> tuple[Path, list[str]]:
    """The chart's sources in the fetch destination, downloaded there when missing: (where, what failed)."""
    dest = upstream_files.fetch_dest()
    todo = upstream_files.problems(dest, pinned)
    if not todo:
        return dest, []
    notify(
        f"fetching {len(todo)} source files of {release.chart} {release.version} into {dest} (each checked against "
        "its pinned sha256), once"
    )
    return dest, upstream_files.fetch(dest, pinned, log=lambda _line: None)


@functools.cache
def package(kind: str, version: str, directory: Path) -> bytes:
    """The chart as a .tgz in memory, with the release script's edits: what the registry serves."""
    values = yaml.load((directory / "values.yaml").read_text(), Loader=_LOADER) or {}
    meta = yaml.load((directory / "Chart.yaml").read_text(), Loader=_LOADER)
    values, meta = published(kind, tag(version), values, meta)
    name = meta["name"]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:  # read back at once: speed, not size

        def add(arcname: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"{name}/{arcname}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add("Chart.yaml", yaml.safe_dump(meta, sort_keys=False).encode())
        add("values.yaml", yaml.safe_dump(values, sort_keys=False).encode())
        for path in sorted(directory.rglob("*")):
            rel = path.relative_to(directory).as_posix()
            if path.is_file() and rel not in ("Chart.yaml", "values.yaml") and not rel.startswith("tests/"):
                add(rel, path.read_bytes())
    return buf.getvalue()


# Helm splits a template's output into objects with this pattern (helm/helm pkg/release/util/manifest.go, `sep`),
# not as YAML does: `---` needs nothing after it. The router chart relies on it: its gke.yaml ends without a
# newline before routerlib's `---apiVersion: v1` (the metrics-reader ServiceAccount), which a YAML parser reads as
# one object. So the objects are split Helm's way, as the provider receives them.
HELM_SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")
# The same splits, in linear time: Python's backtracking engine retries Helm's `\s*\n` from every blank of an
# indented text (0.4 s on one diff's charts), so the separator starts at the newline and the blanks before it
# (which Helm's pattern takes into the separator) are stripped from the part.
_SEPARATOR = re.compile(r"(?:^|\n)---\s*")


def split_manifest(text: str) -> list[str]:
    """`HELM_SEPARATOR.split(text)`, in linear time."""
    parts = _SEPARATOR.split(text)
    return [part.rstrip() for part in parts[:-1]] + parts[-1:]


def _documents(text: str) -> Iterator[dict[str, Any]]:
    for part in split_manifest(text):
        doc = yaml.load(part, Loader=_LOADER)  # a safe loader (libyaml's when present)
        if isinstance(doc, dict) and doc:
            yield doc


# helm.v4.Chart renders with DisableHooks and registers only the release manifest, which leaves out every object
# annotated as a hook (pulumi/pulumi-kubernetes@94977969 provider/pkg/provider/helm/v4/chart.go:230, 269; Helm's
# releaseutil.SortManifests puts them in the release's hooks): a hook is never applied, so it is not an object here.
HOOK_ANNOTATION = "helm.sh/hook"


def is_hook(obj: dict[str, Any]) -> bool:
    return HOOK_ANNOTATION in ((obj.get("metadata") or {}).get("annotations") or {})


_CACHE: dict[tuple[str, ...], tuple[list[dict[str, Any]], dict[str, str]]] = {}


def _engine_render(release: Release, root: Path | None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    kind, directory = source_dir(release, root)  # checked every time: the sources may have gone
    key = (str(directory), release.version, release.name, release.namespace, json.dumps(release.values, sort_keys=True))
    if key in _CACHE:
        return _CACHE[key]
    h = helm()
    with h.Chart.load_archive(package(kind, release.version, directory)) as chart:
        templates = chart.render(release.values, name=release.name, namespace=release.namespace, is_install=True)
        crds = [c["data"] for c in chart.crds]
    objects = [doc for text in crds for doc in _documents(text)]
    for path in sorted(templates):
        if path.endswith((".yaml", ".yml")):
            objects += [doc for doc in _documents(templates[path]) if not is_hook(doc)]
    _CACHE[key] = (objects, templates)
    return objects, templates


def render_release(release: Release, root: Path | None = None) -> Rendered:
    """Every object of the chart with the program's values, namespaced as the provider sends them."""
    objects, templates = _engine_render(release, root)
    objects = copy.deepcopy(objects)
    scoped = set(CLUSTER_SCOPED) | {
        o["spec"]["names"]["kind"]
        for o in objects
        if o.get("kind") == "CustomResourceDefinition" and o.get("spec", {}).get("scope") == "Cluster"
    }
    for obj in objects:
        meta = obj.setdefault("metadata", {})
        if obj.get("kind") not in scoped and not meta.get("namespace"):
            meta["namespace"] = release.namespace  # helm.v4.Chart sets the release namespace on namespaced objects
    return Rendered(release, objects, templates)


def releases(registrations: list[Any], redact: Any) -> list[Release]:
    """The program's `helm.v4.Chart` registrations as releases (values with secrets and unknowns as markers)."""
    out = [release_of(reg.name, redact(reg.inputs)) for reg in registrations if reg.type == CHART]
    return sorted(out, key=lambda r: r.resource)


def release_of(resource: str, inputs: dict[str, Any]) -> Release:
    """A `helm.v4.Chart`'s inputs as the provider reads them (release name and namespace defaulted as it does)."""
    name, namespace = inputs.get("name") or resource, inputs.get("namespace") or "default"
    repository = (inputs.get("repositoryOpts") or {}).get("repo")
    chart = f"{repository.rstrip('/')}/{inputs['chart']}" if repository else inputs["chart"]
    return Release(resource, chart, inputs["version"], name, namespace, inputs.get("values") or {})


def _leaves(values: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from _leaves(value, (*path, key))
    else:
        yield path, values


def _probes(value: Any) -> list[Any]:
    """Two values unlike `value`: one of the other truthiness, one of the same (a template may test either)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int | float):
        return [0 if value else 1, value + 7]
    if isinstance(value, str):
        return ["" if value else "probe", value + "-probe"]
    if isinstance(value, list):
        return [[] if value else ["probe"], [*value, *value]]
    return ["probe", {}]  # None or {}


def _with(values: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(values)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def ignored_values(release: Release, root: Path | None = None) -> list[str]:
    """Every value the program sets that the chart never reads: no probe value changes the rendered templates.

    A value the templates read changes some output for one of two probe values (or makes Helm refuse it); one
    that changes nothing is silently ignored (a misspelt key, one a chart version dropped, or a setting a chart
    reads only under a switch the program leaves off). Cost: up to two template renders per value.
    """
    h = helm()
    kind, directory = source_dir(release, root)
    ignored = []
    with h.Chart.load_archive(package(kind, release.version, directory)) as chart:

        def render(values: dict[str, Any]) -> dict[str, str] | None:
            try:
                return chart.render(values, name=release.name, namespace=release.namespace, is_install=True)
            except Exception:  # HelmRenderError: the template read the value and refused it
                return None

        base = render(release.values)
        for path, value in _leaves(release.values):
            if not path:
                continue
            if all(render(_with(release.values, path, probe)) == base for probe in _probes(value)):
                ignored.append(".".join(path))
    return ignored
