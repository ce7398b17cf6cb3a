"""The dashboard's and the alerts' own PromQL, as the program declares it, evaluated by Prometheus' engine on
synthetic series (tests/promql.py): what a panel plots and when a policy fires.

Series are written one sample a minute in promtool's notation (`_x30 1x20`: no sample for 31 minutes, then 21
samples of 1); times count from the first sample.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import graph_queries
from tests.harness import LWS, Run
from tests.observability_fixtures import ALERT, all_queries, charts, declared, policies
from tests.promql import assert_alert, assert_samples

SCOPE = 'cluster="qwen-serving-cluster",job="kueue-controller-metrics",cluster_queue="cq",replica_role="leader"'
EVICTED = "kueue_evicted_workloads_total{" + SCOPE + ",{}}"
SLICE_FAILED = EVICTED.replace("{}", 'reason="AdmissionCheck"')  # a Retry check: a Slice failed or did not form
PREEMPTED = EVICTED.replace("{}", 'reason="Preempted"')


def condition(policy: dict[str, Any]) -> tuple[str, int]:
    c = policy["conditions"][0]["conditionPrometheusQueryLanguage"]
    return c["query"], int(c["duration"].removesuffix("s"))


def evictions_panel(run: Run) -> str:
    (chart,) = [c for c in charts(graph_queries.emitted(run)) if c["title"].startswith("Evicted workloads")]
    (query,) = all_queries({"mosaicLayout": {"tiles": [{"widget": chart}]}})
    return query


def test_the_first_eviction_of_a_kind_shows_on_the_panel_when_the_alert_fires(dev: Run) -> None:
    """Kueue creates a label set's counter at its first eviction, at 1: the panel counts it as the alert does, and
    both go back to 0 once it is older than the window."""
    series = {SLICE_FAILED: "_x30 1x30", PREEMPTED: "1x30 2x30"}  # the first slice failure at 30m; a preemption
    panel = evictions_panel(dev)
    assert_samples(panel, series, "35m", {'{reason="AdmissionCheck"}': 1, '{reason="Preempted"}': 1})
    assert_samples(panel, series, "45m", {'{reason="AdmissionCheck"}': 0, '{reason="Preempted"}': 0})
    query, duration = condition(declared(dev, ALERT, "observability-slice-failure-evictions"))
    assert_alert(query, duration, series, firing=["30m", "35m", "39m"], quiet=["29m", "41m", "45m"])
    # A preemption alone is no slice failure.
    assert_alert(query, duration, {PREEMPTED: "1x30 2x30"}, quiet=["31m", "35m"])


def test_a_second_eviction_of_a_kind_counts_its_rise(dev: Run) -> None:
    series = {SLICE_FAILED: "1x30 2x30"}  # a label set seen for half an hour, evicting again at 30m
    assert_samples(evictions_panel(dev), series, "35m", {'{reason="AdmissionCheck"}': 1})
    query, duration = condition(declared(dev, ALERT, "observability-slice-failure-evictions"))
    assert_alert(query, duration, series, firing=["35m"], quiet=["29m", "45m"])


# The no-ready-leader policies of one role: held noReadyLeaderMinutes (10) for a set that was ready, the startup
# budget (serving.startupTimeoutSeconds 14400 s + 1800 s, 270 minutes) for one that never was.
WAS_READY, NEW_SET = "observability-no-ready-{}-leader", "observability-{}-leaders-not-ready-in-budget"


def leader(run: Run, role: str, lws: str | None = None, group: int = 0) -> str:
    """The `up` series of one leader as Managed Prometheus writes it: instance `<pod>:<port name>`, the pod named
    `<lws>-<group>` (tests/test_observability_alerts.py checks the job against the PodMonitoring)."""
    name = lws or declared(run, LWS, f"serving-{role}")["metadata"]["name"]
    job = declared(run, "kubernetes:monitoring.googleapis.com/v1:PodMonitoring", f"observability-{role}-leaders")
    port = job["spec"]["endpoints"][0]["port"]
    labels = f'cluster="qwen-serving-cluster",namespace="llm-d-pd-disaggregation",job="{job["metadata"]["name"]}"'
    return f'up{{{labels},instance="{name}-{group}:{port}"}}'


def fires(
    run: Run, role: str, series: dict[str, str], was_ready: dict[str, list[str]], new: dict[str, list[str]]
) -> None:
    found = policies(run)
    assert_alert(*condition(found[WAS_READY.format(role)]), series, **was_ready)
    assert_alert(*condition(found[NEW_SET.format(role)]), series, **new)


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_first_deploy_loading_its_weights_alerts_nobody_until_its_budget(dev: Run, role: str) -> None:
    # The policies exist from minute 0; the leader's pod runs from 20m, loading, ready at 3h.
    loading = {leader(dev, role): "_x20 0x160 1x60"}
    fires(dev, role, loading, {"quiet": ["15m", "40m", "2h", "4h"]}, {"quiet": ["15m", "40m", "2h", "4h"]})
    # Never ready: the startup-budget policy fires after 270 minutes without a ready leader, and not before.
    stuck = {leader(dev, role): "_x20 0x300"}
    fires(dev, role, stuck, {"quiet": ["30m", "4h", "5h"]}, {"quiet": ["269m"], "firing": ["270m", "5h"]})


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_delete_first_rollout_loading_its_weights_alerts_nobody(dev: Run, role: str) -> None:
    """The old set served until 60m and was deleted; the new one (another name: another revision) loads until 3h."""
    series = {leader(dev, role, "kueue-vllm-old-set"): "1x60", leader(dev, role): "_x70 0x110 1x60"}
    fires(dev, role, series, {"quiet": ["71m", "90m", "2h", "4h"]}, {"quiet": ["90m", "2h", "4h"]})


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_set_that_was_ready_alerts_after_ten_minutes_without_a_leader(dev: Run, role: str) -> None:
    # Ready from 1h, crashing at 2h (its pod stays, the scrape fails); then a group restart: no pod 10 minutes.
    crashed = {leader(dev, role): "_x60 1x60 0x60"}
    fires(dev, role, crashed, {"quiet": ["130m"], "firing": ["131m", "3h"]}, {"quiet": ["3h"]})
    # A group restart instead: no pod for 10 minutes (its last sample counts 5 more, PromQL's lookback).
    recreated = {leader(dev, role): "_x60 1x60 _x10 0x50"}
    fires(dev, role, recreated, {"quiet": ["135m"], "firing": ["136m", "3h"]}, {"quiet": ["3h"]})
    # Down for the whole budget: the startup-budget policy takes over as the other one's window passes.
    long = {leader(dev, role): "_x60 1x60 0x300"}
    fires(dev, role, long, {"firing": ["390m"], "quiet": ["391m"]}, {"quiet": ["390m"], "firing": ["391m"]})


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_set_serving_beside_a_loading_one_alerts_nobody(dev: Run, role: str) -> None:
    """Create-first: the old set serves while the new one loads; only a role with no ready leader alerts."""
    series = {leader(dev, role, "kueue-vllm-old-set"): "1x240", leader(dev, role): "_x30 0x210"}
    fires(dev, role, series, {"quiet": ["1h", "4h"]}, {"quiet": ["1h", "4h"]})
