"""The observability section as a whole: its settings checked before anything exists, each part switched on
its own, all of it removed when off, and its Monitoring objects waiting for the Monitoring API."""

from __future__ import annotations

import pytest

from tests import graph_queries
from tests.harness import Registration, Run, assert_rejected, ok, run_program
from tests.observability_fixtures import ALERT, PM, scrape_hooks
from tests.stack_config import FIXED_SERVING, P, merge

SERVICE = "gcp:projects/service:Service"


def observability(run: Run) -> list[Registration]:
    """Everything the observability section declares (the component and what it owns)."""
    (component,) = [r for r in run.registrations if r.type == "gke-tpu-slicing:observability:Observability"] or [None]
    return [component, *run.descendants(component)] if component else []


@pytest.mark.parametrize(
    ("settings", "fragments"),
    [
        (
            {"notificationChannels": ["projects/p/alertPolicies/1"]},
            ["notificationChannels", "projects/<project>/notificationChannels/<numeric id>"],
        ),
        ({"pendingWorkloadMinutes": 0}, ["pendingWorkloadMinutes"]),
    ],
)
def test_bad_observability_config_is_rejected_before_anything_exists(settings: dict, fragments: list[str]) -> None:
    key, *rest = fragments
    assert_rejected({f"{P}:observability": settings}, [f"{P}:observability.{key}", *rest])


def test_monitoring_objects_wait_for_the_monitoring_api(dev: Run) -> None:
    api = dev.get(SERVICE, "project-monitoring")
    assert api.inputs["service"] == "monitoring.googleapis.com"
    for reg in [*dev.of_type(ALERT), *dev.of_type(graph_queries.DASHBOARD)]:
        assert api.urn in reg.dependencies, reg.name


def test_turning_the_section_off_removes_all_of_it() -> None:
    # (Dev's burst slots read the scrapes: they are refused without them, tests/test_burst.py.)
    run = ok(merge(FIXED_SERVING, {f"{P}:observability": {"enabled": False}}))
    assert [r for r in run.registrations if r.type.startswith("gcp:monitoring/")] == []
    assert run.of_type(PM) == [] and observability(run) == []
    assert "monitoring.googleapis.com" not in [r.inputs["service"] for r in run.of_type(SERVICE)]
    assert scrape_hooks(run) == (False, False)
    assert "dashboardUrl" not in run.outputs
    # Everything else is what the dev stack declares.
    dev = run_program(FIXED_SERVING)
    kept = {(r.type, r.name) for r in dev.registrations} - {(r.type, r.name) for r in observability(dev)}
    assert {(r.type, r.name) for r in run.registrations} == kept - {(SERVICE, "project-monitoring")}


@pytest.mark.parametrize(
    ("part", "gone"),
    [("scraping", {PM, "kubernetes:core/v1:Secret"}), ("dashboard", {graph_queries.DASHBOARD}), ("alerts", {ALERT})],
)
def test_each_part_switches_on_its_own(part: str, gone: set[str]) -> None:
    run = ok(merge(FIXED_SERVING, {f"{P}:observability": {part: False}}))
    types = {r.type for r in observability(run)}
    assert not gone & types and {PM, graph_queries.DASHBOARD, ALERT} - gone <= types
    warned = [m for lvl, m in run.logs if lvl == "warn" and "observability.scraping" in m]
    # Charts without scraping have no data: said once at preview, not an error.
    assert len(warned) == (1 if part == "scraping" else 0), warned
    assert scrape_hooks(run) == ((False, False) if part == "scraping" else (True, False))
