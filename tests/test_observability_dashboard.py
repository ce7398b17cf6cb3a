"""Observability's dashboard: one row per role and one chart per workload, following the settings and stable
between runs; and every PromQL query of it and of the alerts scoped, exported and counting one Kueue replica."""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.model.observability import monitoring
from components.observability import dashboard_url
from tests import graph_queries
from tests.harness import Run, run_program
from tests.observability_fixtures import PM, all_queries, charts, declared, policies
from tests.stack_config import P


def headers(d: dict[str, Any]) -> list[str]:
    return [t["widget"]["title"] for t in graph_queries.tiles(d) if "sectionHeader" in t["widget"]]


def every_query(run: Run) -> list[str]:
    """The dashboard's and the alerts' PromQL (the log-match alert, a failed Slice, has none)."""
    conditions = [p["conditions"][0] for p in policies(run).values()]
    alerts = [
        c["conditionPrometheusQueryLanguage"]["query"] for c in conditions if "conditionPrometheusQueryLanguage" in c
    ]
    return all_queries(graph_queries.emitted(run)) + alerts


def metric_names(query: str) -> set[str]:
    """Metrics a PromQL query selects: a name followed by `{` (every query here names its labels), a quoted
    `__name__`, or a quoted UTF-8 name first inside the braces."""
    plain = re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\{", query)
    quoted = re.findall(r'\{"__name__"="([^"]+)"', query) + re.findall(r'\{"([^"]+)"(?!=)', query)
    return set(plain) | set(quoted)


def test_every_chart_query_is_balanced_and_scoped_to_the_cluster(dev: Run) -> None:
    d = graph_queries.emitted(dev)
    assert len(charts(d)) >= 10
    for query in all_queries(d):
        assert query.count("(") == query.count(")") and query.count("{") == query.count("}"), query
        assert 'cluster="qwen-serving-cluster"' in query or 'cluster_name="qwen-serving-cluster"' in query, query


def test_every_metric_is_one_the_pinned_components_export(dev: Run) -> None:
    used = set().union(*(metric_names(q) for q in every_query(dev)))
    assert used <= set(monitoring.METRIC_SOURCES), used - set(monitoring.METRIC_SOURCES)
    assert len(used) >= 15  # not vacuous: the regular expression finds the names


def test_one_row_per_role_and_one_chart_per_workload(codelab: Run) -> None:
    d = graph_queries.emitted(codelab)
    assert headers(d) == [
        "Admission (Kueue)",
        "TPU slices",
        "Serving: prefill",
        "Serving: decode",
        "Elastic serving",
        "Router (endpoint picker)",
    ]
    assert [c["title"] for c in charts(d) if "TPU duty cycle by pod" in c["title"]] == [
        "demos.subslicing (kueue-jobset-simple-subslicing): TPU duty cycle by pod",
        "demos.superslicing (kueue-jobset-simple-superslicing): TPU duty cycle by pod",
        "serving.prefill (kueue-vllm-prefill-model-streamer): TPU duty cycle by pod",
        "serving.decode (kueue-vllm-decode-model-streamer): TPU duty cycle by pod",
    ]
    # The serving rows read the jobs of the scrape objects the program declares, one role each.
    for role in ("prefill", "decode"):
        job = declared(codelab, PM, f"observability-{role}-leaders")["metadata"]["name"]
        row = [q for q in all_queries(d) if f'job="{job}"' in q]
        # rate, TTFT x3, ITL x3, queue x2, KV cache, ready leaders; the elastic row's desired, admitted and ready
        # groups and load per ready group
        assert len(row) == 1 + 3 + 3 + 2 + 1 + 1 + 4


def test_the_dashboard_follows_the_settings(codelab: Run) -> None:
    """Each of these dashboards is valid for the API too (tests/test_dashboard.py's cases)."""
    full = graph_queries.emitted(codelab)
    assert (
        len(charts(graph_queries.emitted(run_program(graph_queries.NO_DEMOS)))) == len(charts(full)) - 2
    )  # two workloads fewer
    lean = graph_queries.emitted(run_program({f"{P}:serving": {"enabled": False}}))
    assert headers(lean) == ["Admission (Kueue)", "TPU slices"]
    assert not any("vllm:" in q or "inference_" in q for q in all_queries(lean))
    # The provisioned line follows the cubes: 64 chips each.
    for d, chips in ((full, 128), (graph_queries.emitted(run_program({f"{P}:tpu": {"cubes": 4}})), 256)):
        (quota,) = [c for c in charts(d) if c["title"].startswith("TPU chips")]
        assert quota["xyChart"]["thresholds"][0]["value"] == chips


def test_the_same_settings_give_the_same_dashboard() -> None:
    """`pulumi up` twice is a no-op: the JSON string is stable."""
    first, second = (run_program(fresh=True).get(graph_queries.DASHBOARD, "observability-dashboard") for _ in range(2))
    assert first.inputs == second.inputs


def test_dashboard_url_output(dev: Run) -> None:
    assert dashboard_url("my-tpu-project", "projects/my-tpu-project/dashboards/1234-abcd") == (
        "https://console.cloud.google.com/monitoring/dashboards/builder/1234-abcd?project=my-tpu-project"
    )
    assert dev.outputs["dashboardUrl"].startswith("https://console.cloud.google.com/monitoring/dashboards/builder/")
    assert dev.outputs["dashboardUrl"].endswith("?project=my-tpu-project")


def kueue_selectors(query: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Each Kueue selector of a query: its metric and its matchers (label, `=` or `!=`, value)."""
    return [
        (metric, re.findall(r'([A-Za-z_]+)(!=|=)"([^"]*)"', body))
        for metric, body in re.findall(r"(kueue_[a-z_]+)\{([^}]*)\}", query)
    ]


@pytest.mark.parametrize("roles", [("leader", "follower"), ("leader", "follower", "follower"), ("standalone",)])
def test_every_kueue_query_counts_one_replica(dev: Run, roles: tuple[str, ...]) -> None:
    """Kueue v0.17.4 labels each gauge with the exporting replica's `replica_role`, `leader`, `follower` or
    `standalone` (kubernetes-sigs/kueue@v0.17.4 pkg/util/roletracker/tracker.go:27-29, pkg/metrics/metrics.go:331,
    :628, :670, :694), and a follower exports the same gauges as the leader (cmd/kueue/main.go:345-347 clears them
    when it is elected). With `addons.kueue.replicas` 2 a plain sum counted every workload twice; every Kueue
    selector of the dashboard and the alerts must select exactly one replica's series."""
    found = [sel for query in every_query(dev) for sel in kueue_selectors(query)]
    assert len(found) >= 5  # not vacuous: the dashboard's four Kueue charts and the alerts
    for _metric, matchers in found:
        base = {label: value for label, op, value in matchers if op == "="}  # the series a replica exports for it
        selected = [
            all((series.get(label, "") == value) == (op == "=") for label, op, value in matchers)
            for series in ({**base, "replica_role": role} for role in roles)
        ]
        assert sum(selected) == 1, (matchers, roles)
