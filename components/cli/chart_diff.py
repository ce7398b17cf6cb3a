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

from components.cli import charts

CHART = charts.CHART


def type_token(api_version: str, kind: str) -> str:
    """pulumi-kubernetes' type token: `kubernetes:<group, or core>/<version>:<Kind>`."""
    group, _, version = api_version.rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{kind}"


def child_name(resource: str, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{resource}:{namespace}/{meta.get('name')}" if namespace else f"{resource}:{meta.get('name')}"


def children(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of the objects inside one Chart record (raises ChartUnavailable)."""
    rendered = charts.render_release(charts.release_of(record["name"], record["inputs"]))
    head, _, _ = record["urn"].rpartition("::")
    out = []
    for obj in rendered.objects:
        type_ = type_token(obj["apiVersion"], obj["kind"])
        name = child_name(record["name"], obj)
        out.append(
            {
                "urn": f"{head}${type_}::{name}",  # head ends with the Chart's own type
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
        )
    return out


def expand(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """`records` with every chart's objects after its Chart record, and {chart URN: why not} for those not expanded."""
    out: list[dict[str, Any]] = []
    missing: dict[str, str] = {}
    for record in records:
        out.append(record)
        if record["type"] != CHART:
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
    before = {r["urn"]: r for r in old if r["type"] == CHART}
    after = {r["urn"]: r for r in new if r["type"] == CHART}
    result = Expanded(
        [r for r in old_out if r.get("parent") not in skipped],
        [r for r in new_out if r.get("parent") not in skipped],
        [],
    )
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
