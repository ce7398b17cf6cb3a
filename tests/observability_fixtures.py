"""What the observability tests share: the declared scrape objects, alert policies and dashboard charts of a
mock run, read as plain data."""

from __future__ import annotations

from typing import Any

import yaml

from tests import graph_queries
from tests.harness import CHART, Run, normalize

PM = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"


def declared(run: Run, type_: str, name: str) -> dict[str, Any]:
    """The object as the program declares it, secrets unwrapped, integral numbers as integers."""
    return normalize(run.get(type_, name).plain())


def policies(run: Run) -> dict[str, dict[str, Any]]:
    return {a.name: normalize(a.plain()) for a in run.of_type(ALERT)}


def charts(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [t["widget"] for t in graph_queries.tiles(d) if "xyChart" in t["widget"]]


def all_queries(d: dict[str, Any]) -> list[str]:
    return [ds["timeSeriesQuery"]["prometheusQuery"] for c in charts(d) for ds in c["xyChart"]["dataSets"]]


def scrape_hooks(run: Run) -> tuple[bool, bool]:
    """Whether the Kueue chart's manager exports the ClusterQueue resource metrics, and whether the router chart
    declares scrape objects of its own (the rest of the manager configuration: tests/test_addons.py)."""
    values = normalize(run.get(CHART, "kueue-chart").plain("values"))
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    router = normalize(run.get(CHART, "serving-router").plain("values"))["router"]
    return config["metrics"].get("enableClusterQueueResources", False), "monitoring" in router
