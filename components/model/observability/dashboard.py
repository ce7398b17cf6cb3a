"""The Cloud Monitoring dashboard of this stack, built from the settings: one row per concern and per serving
role, one chart per workload, every chart a PromQL query of `components/model/observability/monitoring.py`.

The JSON is the Dashboard API v1 resource (https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards):
a mosaic layout of tiles, each a section header or an XY chart of `prometheusQuery` data sets.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from components.model.config.settings import PROJECT, Settings
from components.model.observability.burst_signals import BurstSignals
from components.model.observability.monitoring import EVICTION_WINDOW, RATE_WINDOW, Queries, vllm_job, workload_names

COLUMNS = 48  # a mosaic layout's grid is at most 48 columns wide (MosaicLayout.columns)
CHART_WIDTH, CHART_HEIGHT, HEADER_HEIGHT = 16, 16, 4
PERCENTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class Chart:
    title: str
    # (legend, PromQL) per line; an empty legend lets Cloud Monitoring name the lines by their labels
    queries: tuple[tuple[str, str], ...]
    unit: str = ""
    threshold: float | None = None
    threshold_label: str = ""


@dataclass(frozen=True)
class Row:
    title: str
    subtitle: str
    charts: tuple[Chart, ...]


def chart(title: str, query: str, legend: str = "", unit: str = "") -> Chart:
    """A chart of one line."""
    return Chart(title, ((legend, query),), unit)


def rows(settings: Settings) -> list[Row]:
    """The dashboard, top to bottom: admission, TPUs (one chart per workload), one row per serving role, router."""
    q = Queries(settings)
    chips = settings.tpu.chips
    out = [
        Row(
            "Admission (Kueue)",
            f"ClusterQueue {settings.kueue.cluster_queue}: what waits, what runs, how much of the TPU quota it holds",
            (
                chart("Pending workloads by ClusterQueue", q.pending()),
                chart("Admitted workloads by ClusterQueue", q.admitted()),
                # Slice failures (reason AdmissionCheck: the slice controller's check) beside preemptions.
                chart(f"Evicted workloads by reason (last {EVICTION_WINDOW})", q.evicted()),
                Chart(
                    f"TPU chips: used vs quota ({chips} provisioned)",
                    (("used", q.tpu_usage()), ("quota", q.tpu_quota())),
                    unit="1",
                    threshold=float(chips),
                    threshold_label="provisioned chips",
                ),
            ),
        ),
        Row(
            "TPU slices",
            "GKE TPU system metrics: TensorCore utilization per node, duty cycle of each workload's pods",
            (
                chart("TensorCore utilization by node", q.node_tensorcore(), unit="%"),
                *(
                    chart(f"{key} ({name}): TPU duty cycle by pod", q.workload_duty_cycle(name), unit="%")
                    for key, name in workload_names(settings).items()
                ),
            ),
        ),
    ]

    def latency(title: str, metric: str, role: str) -> Chart:
        return Chart(title, tuple((f"p{round(p * 100)}", q.quantile(p, metric, role)) for p in PERCENTILES), unit="s")

    def epp_rate(by: str, metric: str) -> str:
        return f"sum by ({by}) (rate({q.epp(metric)}[{RATE_WINDOW}]))"

    if settings.serving.enabled:
        for role in settings.serving.roles():
            queue = tuple((n, f"sum({q.vllm(f'vllm:num_requests_{n}', role)})") for n in ("waiting", "running"))
            out.append(
                Row(
                    f"Serving: {role}",
                    f"vLLM leaders of {settings.lws_name(role)} (Managed Prometheus job {vllm_job(settings, role)})",
                    (
                        chart("Requests per second", q.request_rate(role), "completed", "1/s"),
                        latency("Time to first token", "vllm:time_to_first_token_seconds", role),
                        latency("Inter-token latency", "vllm:inter_token_latency_seconds", role),
                        Chart("Queue length", queue),
                        chart(
                            "KV-cache usage",
                            f"avg by (pod) ({q.vllm('vllm:kv_cache_usage_perc', role)})",
                            unit="10^2.%",
                        ),
                        chart("Ready leaders (scraped)", q.leaders_up(role), "ready"),
                    ),
                )
            )
        out += elastic_rows(settings)
        e2e = q.epp("inference_extension_scheduler_e2e_duration_seconds_bucket")
        out.append(
            Row(
                "Router (endpoint picker)",
                f"llm-d EPP of release {settings.serving.guide}: scheduling decisions and the pool it picks from",
                (
                    chart(
                        "Scheduling decisions by result",
                        epp_rate("status", "inference_extension_scheduler_attempts_total"),
                        unit="1/s",
                    ),
                    chart("Requests by model", epp_rate("model_name", "inference_objective_request_total"), unit="1/s"),
                    chart(
                        "Scheduling latency p99",
                        f"histogram_quantile(0.99, sum by (le) (rate({e2e}[{RATE_WINDOW}])))",
                        "p99",
                        "s",
                    ),
                    chart("Ready pods in the InferencePool", q.epp("inference_pool_ready_pods")),
                ),
            )
        )
    return out


def elastic_rows(settings: Settings) -> list[Row]:
    """With burst slots: per role, its groups (desired by the load, admitted with a running leader, ready) and its
    load per ready group against the target; the slots' evictions by reason (a preempted slot requeues)."""
    slots = settings.burst_slots()
    if not slots:
        return []
    b = BurstSignals(settings)
    charts: list[Chart] = []
    for role in slots:
        groups = (("desired", b.desired_groups(role)), ("admitted", b.running_groups(role)))
        charts.append(Chart(f"{role}: groups desired, admitted, ready", (*groups, ("ready", b.ready_groups(role)))))
        per_group = f"{b.load(role)} / clamp_min({b.ready_groups(role)}, 1)"
        key, target = b.target(role)
        charts.append(Chart(f"{role}: load per ready group", (("load", per_group),), "", target, key))
    charts.append(chart(f"Burst slot evictions by reason (last {EVICTION_WINDOW})", b.slot_evictions()))
    subtitle = "Burst slots: groups per role, the load against its target, evictions (a preempted slot requeues)"
    return [Row("Elastic serving", subtitle, tuple(charts))]


def _chart_widget(chart: Chart) -> dict[str, Any]:
    xy: dict[str, Any] = {
        "dataSets": [
            {
                "timeSeriesQuery": {"prometheusQuery": query, **({"unitOverride": chart.unit} if chart.unit else {})},
                "plotType": "LINE",
                "targetAxis": "Y1",
                # No template: Cloud Monitoring then names each line by its labels (pod, node, status ...).
                **({"legendTemplate": legend} if legend else {}),
            }
            for legend, query in chart.queries
        ],
        "yAxis": {"scale": "LINEAR"},
    }
    if chart.threshold is not None:
        xy["thresholds"] = [{"value": chart.threshold, "label": chart.threshold_label, "targetAxis": "Y1"}]
    return {"title": chart.title, "xyChart": xy}


def dashboard(settings: Settings) -> dict[str, Any]:
    """The Cloud Monitoring dashboard (API v1 `Dashboard`): a mosaic, a section header and its charts per row."""
    tiles: list[dict[str, Any]] = []
    y = 0
    per_line = COLUMNS // CHART_WIDTH
    for row in rows(settings):
        tiles.append(
            {
                "xPos": 0,
                "yPos": y,
                "width": COLUMNS,
                "height": HEADER_HEIGHT,
                "widget": {"title": row.title, "sectionHeader": {"subtitle": row.subtitle, "dividerBelow": True}},
            }
        )
        y += HEADER_HEIGHT
        for i, chart in enumerate(row.charts):
            tiles.append(
                {
                    "xPos": (i % per_line) * CHART_WIDTH,
                    "yPos": y + (i // per_line) * CHART_HEIGHT,
                    "width": CHART_WIDTH,
                    "height": CHART_HEIGHT,
                    "widget": _chart_widget(chart),
                }
            )
        y += -(-len(row.charts) // per_line) * CHART_HEIGHT
    return {
        "displayName": f"{settings.cluster.name}: TPU slices and serving",
        "mosaicLayout": {"columns": COLUMNS, "tiles": tiles},
        "labels": {PROJECT: ""},
    }


# Maps whose values are data, not fields: an entry with an empty value is kept (a dashboard label is a bare tag).
_MAPS = frozenset({"labels"})
# Every enum of the Dashboard API names its zero value <TYPE>_UNSPECIFIED (google/monitoring/dashboard/v1/*.proto,
# per https://google.aip.dev/126): the default, which the API drops like any other.
_ENUM_ZERO_RE = re.compile(r"^[A-Z][A-Z0-9_]*_UNSPECIFIED$")


def without_defaults(value: Any) -> Any:
    """`value` without the fields the Monitoring API drops: zeros, empty strings, false, empty lists, zero enums.

    The API answers in proto3 JSON, which omits every field at its default value
    (https://protobuf.dev/programming-guides/json/: "If a field has the default value in the protocol buffer, it
    will be omitted in the JSON-encoded data by default"), so a tile at `"xPos": 0` comes back without `xPos`. The
    provider's diff suppression removes only keys the API returns and the config lacks
    (terraform-provider-google-beta google-beta/services/monitoring/resource_monitoring_dashboard.go,
    `removeComputedKeys` / `monitoringDashboardDiffSuppress`, unchanged since 2023 up to v7.45.0 and main at
    93c65b2d), not the reverse: every `up` would show a change (hashicorp/terraform-provider-google#16173).
    Objects are kept even when empty (a set message field is present in proto3 JSON), and so are map entries.
    No field this module writes is a oneof member, whose default would be kept.
    """
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _MAPS:
                out[key] = dict(item)
            elif isinstance(item, dict):
                out[key] = without_defaults(item)
            elif item not in (0, "", False, []) and not (isinstance(item, str) and _ENUM_ZERO_RE.match(item)):
                out[key] = without_defaults(item)  # (0.0 and False compare equal to 0)
        return out
    if isinstance(value, list):
        return [without_defaults(item) for item in value]
    return value


def dashboard_json(settings: Settings) -> str:
    # Sorted keys: the same settings give the same string, so `pulumi up` twice is a no-op.
    return json.dumps(without_defaults(dashboard(settings)), sort_keys=True)
