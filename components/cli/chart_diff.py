"""The change preview inside the charts: one diff record per object a `helm.v4.Chart` would register.

pulumi-kubernetes registers each object of a rendered chart as a child of the Chart component named
`<chart resource>:<namespace>/<name>` (`<chart resource>:<name>` when cluster-scoped; provider/pkg/provider/yaml/v2
`Register`), so each child is created, updated, replaced or deleted by its own kind's rules
(components/model/diff/kubernetes.py). `expand` adds those children from the offline render (charts.py), on a
values change or a chart version bump alike; without helm-python-sdk or the chart sources the records stay as they
are and a note says what to run.

When a version adds and drops objects (JobSet 0.12 renames its RBAC), the added ones are created during the chart's
update: the Chart's construct registers every child and returns their outputs (pulumi/pulumi-kubernetes@94977969d
provider/pkg/provider/helm/v4/chart.go:312-318), which resolve once each child is created or updated and awaited. The
engine deletes what the program no longer registers only after the program has finished (pulumi/pulumi@1b5949891b
pkg/resource/deploy/deployment_executor.go:262-266, 327-333: `performPostSteps` once the source has sent its last
event and no step is outstanding; :483-486 `GenerateDeletes`). So the new controller runs with its new permissions
before the old objects go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from components.cli import charts
from components.model.addons import vendored

CHART = charts.CHART
CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
EXPANDED = (CHART, CONFIG_GROUP)  # components whose objects the preview lists one by one
CRD_API = "apiextensions.k8s.io/v1"
OPAQUE = "x-not-vendored"  # marks an object known by name only (from a URL this repository does not vendor)


def type_token(api_version: str, kind: str) -> str:
    """pulumi-kubernetes' type token: `kubernetes:<group, or core>/<version>:<Kind>`."""
    group, _, version = api_version.rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{kind}"


def child_name(resource: str, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{resource}:{namespace}/{meta.get('name')}" if namespace else f"{resource}:{meta.get('name')}"


def object_record(record: dict[str, Any], obj: dict[str, Any], prefix: str | None = None) -> dict[str, Any]:
    """The record of one object the provider registers under `record` (a Chart, a ConfigGroup or a ConfigFile),
    named after `prefix` (the resource prefix the provider uses, the record's name by default)."""
    head, _, _ = record["urn"].rpartition("::")
    type_ = type_token(obj["apiVersion"], obj["kind"])
    name = child_name(prefix or record["name"], obj)
    return {
        "urn": f"{head}${type_}::{name}",  # head ends with the component's own type
        "type": type_,
        "name": name,
        "custom": True,
        "remote": False,
        "parent": record["urn"],
        "provider": record.get("provider") or "",
        "protect": False,
        "inputs": obj,
        "property_dependencies": {},
        "options": {},
        "aliases": [],
    }


def _config_group_objects(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A ConfigGroup's objects, as the provider parses its inputs (provider/pkg/provider/yaml/v2/configgroup.go:92-120:
    `files`, then `yaml`, then `objs`). A file is read from its vendored copy (manifests/vendored/); one the
    repository does not hold is known by name only when it is a kubebuilder CRD file (`<group>_<plural>.yaml`): an
    `opaque` object whose content nothing compared (raises ChartUnavailable for any other)."""
    inputs = record["inputs"]
    copies = vendored.by_url()
    out: list[dict[str, Any]] = []
    for url in inputs.get("files") or []:
        if url in copies:
            out += vendored.parse(copies[url].path)
            continue
        file_name = str(url).rsplit("/", 1)[-1]
        if "_" not in file_name or not file_name.endswith(".yaml"):
            raise charts.ChartUnavailable(f"{record['name']}: {url} is not vendored here, and its objects are unknown")
        metadata = {"name": vendored.crd_name(file_name)}
        out.append({"apiVersion": CRD_API, "kind": "CustomResourceDefinition", "metadata": metadata, OPAQUE: url})
    if inputs.get("yaml"):
        out += [d for d in yaml.safe_load_all(inputs["yaml"]) if d]
    return out + list(inputs.get("objs") or [])


def _objects(record: dict[str, Any]) -> list[dict[str, Any]]:
    if record["type"] == CONFIG_GROUP:
        return _config_group_objects(record)
    return charts.render_release(charts.release_of(record["name"], record["inputs"])).objects


def children(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of the objects inside one Chart or ConfigGroup record (raises ChartUnavailable)."""
    prefix = record["inputs"].get("resourcePrefix") or record["name"]
    return [object_record(record, obj, prefix) for obj in _objects(record)]


def expand(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """`records` with every chart's and ConfigGroup's objects after its own record, and {URN: why not} for those not
    expanded."""
    out: list[dict[str, Any]] = []
    missing: dict[str, str] = {}
    for record in records:
        out.append(record)
        if record["type"] not in EXPANDED:
            continue
        try:
            out += children(record)
        except charts.ChartUnavailable as e:
            missing[record["urn"]] = str(e)
    return out, missing


@dataclass
class Expanded:
    """Both runs with every chart's objects, as far as they could be compared."""

    old: list[dict[str, Any]]
    new: list[dict[str, Any]]
    notes: list[str]
    # Objects of a changed chart that rendered on one side only, each with why the other side did not: their action
    # is not known (never `same`, never a delete or create that nothing compared).
    unknown: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    # Changed charts rendered on neither side: chart URN -> why.
    opaque: dict[str, str] = field(default_factory=dict)


def expand_both(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> Expanded:
    """Both runs expanded. A chart's objects are compared only where both sides rendered it. Where one side did not
    (a version without sources here), the objects of a chart whose inputs changed are reported as unknown from the
    side that rendered, or the chart itself when neither did; an unchanged chart renders the same objects on both
    sides, so nothing is lost by leaving them out."""
    old_out, old_missing = expand(old)
    new_out, new_missing = expand(new)
    skipped = set(old_missing) | set(new_missing)
    before = {r["urn"]: r for r in old if r["type"] in EXPANDED}
    after = {r["urn"]: r for r in new if r["type"] in EXPANDED}
    result = Expanded(
        [r for r in old_out if r.get("parent") not in skipped],
        [r for r in new_out if r.get("parent") not in skipped],
        [],
    )
    # An object known by name only is deleted or created for sure where the other side lacks it, and not compared
    # where both have it.
    opaque = {r["urn"]: r for r in (*result.old, *result.new) if OPAQUE in (r.get("inputs") or {})}
    both = {u for u in opaque if any(r["urn"] == u for r in result.old) and any(r["urn"] == u for r in result.new)}
    for urn in sorted(both):
        url = opaque[urn]["inputs"][OPAQUE]
        result.unknown.append((opaque[urn], f"{url} is not vendored here"))
        result.notes.append(f"{opaque[urn]['name']} not compared: {url} is not vendored here")
    result.old = [r for r in result.old if r["urn"] not in both]
    result.new = [r for r in result.new if r["urn"] not in both]
    for urn in sorted(skipped):
        if urn in before and urn in after and before[urn]["inputs"] == after[urn]["inputs"]:
            continue
        why = "; ".join(dict.fromkeys(m[urn] for m in (old_missing, new_missing) if urn in m))
        children = [r for r in (*old_out, *new_out) if r.get("parent") == urn]
        if children:
            result.unknown += [(child, why) for child in children]
            what = f"its {len(children)} objects as one side renders them are shown as unknown"
        else:
            result.opaque[urn] = why
            what = "the chart is shown as unknown"
        result.notes.append(f"objects inside the chart not compared ({what}): {why}")
    return result
