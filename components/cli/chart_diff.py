"""The change preview inside the charts: one diff record per object a `helm.v4.Chart` would register.

pulumi-kubernetes registers each object of a rendered chart as a child of the Chart component named
`<chart resource>:<namespace>/<name>` (`<chart resource>:<name>` when cluster-scoped; provider/pkg/provider/yaml/v2
`Register`), so each child is created, updated, replaced or deleted by its own kind's rules
(components/model/diff/kubernetes.py). `expand` adds those children from the offline render (charts.py), on a
values change or a chart version bump alike; without helm-python-sdk or the chart sources the records stay as they
are and a note says what to run.
"""

from __future__ import annotations

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


def object_record(record: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """The record of one object the provider registers under `record` (a Chart or a ConfigFile)."""
    head, _, _ = record["urn"].rpartition("::")
    type_ = type_token(obj["apiVersion"], obj["kind"])
    name = child_name(record["name"], obj)
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


def children(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of the objects inside one Chart record (raises ChartUnavailable)."""
    rendered = charts.render_release(charts.release_of(record["name"], record["inputs"]))
    return [object_record(record, obj) for obj in rendered.objects]


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
            missing[record["urn"]] = f"objects inside the chart not compared: {e}"
    return out, missing


def expand_both(
    old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Both runs expanded, a chart's objects kept only where both sides rendered it (a version without pinned
    sources on one side must not read as every object deleted or created), and the notes."""
    old_out, old_missing = expand(old)
    new_out, new_missing = expand(new)
    skipped = set(old_missing) | set(new_missing)

    def keep(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in records if r.get("parent") not in skipped or r["type"] == CHART]

    return keep(old_out), keep(new_out), sorted(set(old_missing.values()) | set(new_missing.values()))
