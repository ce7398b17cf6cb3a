"""Observability: scrape objects that select exactly the serving pods, a valid dashboard that follows the settings,
alerts that name their thresholds, and a section that removes all of it when turned off."""

from __future__ import annotations

import copy
import json
import re
import shlex
from typing import Any

import jsonschema
import pytest
import yaml

from components.model.observability import monitoring
from components.observability import dashboard_url
from tests import conformance
from tests.harness import Registration, Run, assert_rejected, normalize, run_program
from tests.test_conformance import require_charts_dir

P = "gke-tpu-slicing"
PM = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"
CHART = "kubernetes:helm.sh/v4:Chart"
RBAC = "kubernetes:rbac.authorization.k8s.io/v1:"
# Labels the LWS controller adds to the pods of a group (kubernetes-sigs/lws leaderworkerset_types.go).
LWS_NAME, WORKER_INDEX = "leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/worker-index"


def observability(run: Run) -> list[Registration]:
    """Everything the observability section declares (the component and what it owns)."""
    (component,) = [r for r in run.registrations if r.type == "gke-tpu-slicing:observability:Observability"] or [None]
    return [component, *run.descendants(component)] if component else []


def declared(run: Run, type_: str, name: str) -> dict[str, Any]:
    """The object as the program declares it, secrets unwrapped, integral numbers as integers."""
    return normalize(run.get(type_, name).plain())


def pod_monitoring(run: Run, name: str) -> dict[str, Any]:
    return declared(run, PM, name)


# --------------------------------------------------------------------------------------------- settings


def test_bad_observability_config_is_rejected_before_anything_exists() -> None:
    assert_rejected(
        {f"{P}:observability": {"notificationChannels": ["projects/p/alertPolicies/1"]}},
        [f"{P}:observability.notificationChannels", "projects/<project>/notificationChannels/<numeric id>"],
    )
    assert_rejected({f"{P}:observability": {"scrapeInterval": "fast"}}, [f"{P}:observability.scrapeInterval"])
    assert_rejected(
        {f"{P}:observability": {"pendingWorkloadMinutes": 0}}, [f"{P}:observability.pendingWorkloadMinutes"]
    )
    assert_rejected(
        {f"{P}:observability": {"dashbaord": False}}, [f"{P}:observability.dashbaord", "unknown key", "dashboard"]
    )


# --------------------------------------------------------------------------------------------- scraping


def simulated_pods(lws: dict[str, Any]) -> list[dict[str, str]]:
    """The labels of every pod the LWS controller makes from this LWS: one leader and size-1 workers per group."""
    lwt = lws["spec"]["leaderWorkerTemplate"]
    name = lws["metadata"]["name"]
    pods = []
    for _group in range(lws["spec"]["replicas"]):
        pods.append({**lwt["leaderTemplate"]["metadata"]["labels"], LWS_NAME: name, WORKER_INDEX: "0"})
        for worker in range(1, lwt["size"]):
            pods.append({**lwt["workerTemplate"]["metadata"]["labels"], LWS_NAME: name, WORKER_INDEX: str(worker)})
    return pods


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


@pytest.mark.parametrize("overrides", [{}, {f"{P}:serving": {"decode": {"topology": "2x2x4", "replicas": 2}}}])
def test_vllm_scrape_objects_select_the_leaders_of_their_role_and_only_them(overrides: dict[str, Any]) -> None:
    run = run_program(overrides)
    assert run.error is None, run.error
    all_lws = {role: normalize(run.get(LWS, f"serving-{role}").plain()) for role in ("prefill", "decode")}
    for role, lws in all_lws.items():
        pm = pod_monitoring(run, f"observability-{role}-leaders")
        assert pm["metadata"]["namespace"] == lws["metadata"]["namespace"]
        selector = pm["spec"]["selector"]["matchLabels"]
        for other, other_lws in all_lws.items():
            for pod in simulated_pods(other_lws):
                is_leader_of_role = other == role and pod[WORKER_INDEX] == "0"
                assert selects(selector, pod) == is_leader_of_role, (role, other, pod)
        # The port it scrapes is the leader container's vLLM port: the one `vllm serve --port` binds.
        (endpoint,) = pm["spec"]["endpoints"]
        leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
        serve = next(line for line in leader["command"][2].splitlines() if line.startswith("exec vllm serve"))
        vllm_port = int(next(a for a in shlex.split(serve) if a.startswith("--port=")).split("=", 1)[1])
        (port,) = [p for p in leader["ports"] if p["name"] == endpoint["port"]]
        assert port["containerPort"] == vllm_port
        assert endpoint["path"] == "/metrics"
        # Every container port name of a leader pod is unique to it, so the named port is unambiguous.
        init = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"].get("initContainers", [])
        names = [p["name"] for c in [leader, *init] for p in c.get("ports", [])]
        assert names.count(endpoint["port"]) == 1


def test_kueue_scrape_object_uses_a_token_allowed_to_read_metrics(dev: Run) -> None:
    pm = pod_monitoring(dev, "observability-kueue")
    assert pm["metadata"]["namespace"] == "kueue-system"
    (endpoint,) = pm["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"], endpoint["path"]) == ("metrics", "https", "/metrics")
    secret = declared(dev, "kubernetes:core/v1:Secret", "observability-kueue-scraper-token")
    sa = declared(dev, "kubernetes:core/v1:ServiceAccount", "observability-kueue-scraper")
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": sa["metadata"]["name"]}
    assert endpoint["authorization"]["credentials"]["secret"] == {"name": secret["metadata"]["name"], "key": "token"}
    # Same namespace as the Secret: GMP reads secrets from the PodMonitoring's namespace only.
    assert secret["metadata"]["namespace"] == sa["metadata"]["namespace"] == pm["metadata"]["namespace"]
    crb = declared(dev, f"{RBAC}ClusterRoleBinding", "observability-kueue-metrics-reader")
    assert crb["roleRef"]["name"] == "kueue-metrics-reader"  # the chart's `<fullname>-metrics-reader`
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "kueue-system"}]
    role = declared(dev, f"{RBAC}Role", "observability-kueue-token-read")
    assert role["rules"][0]["resourceNames"] == [secret["metadata"]["name"]]
    binding = declared(dev, f"{RBAC}RoleBinding", "observability-kueue-token-read-collector")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "collector", "namespace": "gmp-system"}]
    # Scraping waits for the chart: its ClusterRole and its pods.
    kueue_chart = dev.get(CHART, "kueue-chart")
    assert dev.depends_on(dev.get(PM, "observability-kueue"), kueue_chart)


def test_kueue_selector_and_port_match_the_pinned_chart() -> None:
    """The pinned chart's metrics Service targets 8443 and its manager serves metrics there."""
    charts = require_charts_dir()
    values = yaml.safe_load((charts / "kueue-v0.17.4" / "values.yaml").read_text())
    (port,) = values["metricsService"]["ports"]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["metrics"]["bindAddress"] == f":{port['targetPort']}"
    assert port["name"] == "https"


def quota_metrics(run: Run) -> bool:
    """Whether the Kueue chart's manager configuration turns on the ClusterQueue resource metrics."""
    values = normalize(run.get(CHART, "kueue-chart").plain("values"))
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    return config["metrics"].get("enableClusterQueueResources", False)


def test_kueue_exports_the_quota_metrics_while_scraping(dev: Run) -> None:
    # The rest of the manager configuration is checked against the pinned chart in tests/test_addons.py.
    assert quota_metrics(dev) is True


def test_the_program_scrapes_the_epp_and_the_dashboard_reads_its_job(dev: Run) -> None:
    router = declared(dev, CHART, "serving-router")
    assert "monitoring" not in router["values"]["router"]  # the chart's own scrape objects stay off
    pm = pod_monitoring(dev, "observability-epp")
    assert pm["metadata"]["name"] == f"{router['name']}-epp"
    assert pm["spec"]["endpoints"][0]["authorization"]["credentials"]["secret"]["name"] == "epp-metrics-scraper-token"
    # The EPP queries' job is that PodMonitoring's name.
    epp_queries = [q for q in all_queries(dev_dashboard(dev)) if "inference_" in q]
    assert epp_queries and all(f'job="{router["name"]}-epp"' in q for q in epp_queries)


def test_scrape_objects_validate_against_the_pinned_gmp_crds(dev: Run) -> None:
    registry = conformance.require_registry()
    assert ("monitoring.googleapis.com/v1", "PodMonitoring") in registry
    assert "gmp-v0.17.2" in registry.source("monitoring.googleapis.com/v1", "PodMonitoring").name
    objects = [normalize(r.plain()) for r in dev.of_type(PM)]
    assert len(objects) == 4  # Kueue, the endpoint picker, the prefill and decode leaders
    assert all(conformance.validate(obj, registry) == [] for obj in objects)
    broken = copy.deepcopy(objects[0])
    broken["spec"]["endpoints"][0]["intervall"] = "30s"
    del broken["spec"]["endpoints"][0]["interval"]
    errors = conformance.validate(broken, registry)
    assert any("intervall" in e for e in errors) and any("interval" in e and "required" in e for e in errors)


# --------------------------------------------------------------------------------------------- dashboard

# The subset of the Cloud Monitoring Dashboard API (v1) this program writes, closed to anything else:
# https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards (Dashboard, MosaicLayout, Tile,
# Widget, XyChart, DataSet, TimeSeriesQuery, Threshold, Axis, SectionHeader).
DASHBOARD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["displayName", "mosaicLayout"],
    "properties": {
        "displayName": {"type": "string", "minLength": 1},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "mosaicLayout": {
            "type": "object",
            "additionalProperties": False,
            "required": ["columns", "tiles"],
            "properties": {
                "columns": {"type": "integer", "minimum": 1, "maximum": 48},
                "tiles": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/tile"}},
            },
        },
    },
    "$defs": {
        "tile": {
            "type": "object",
            "additionalProperties": False,
            # A tile at column or line 0 leaves xPos / yPos out: the API drops zeros (test_dashboard.py).
            "required": ["width", "height", "widget"],
            "properties": {
                "xPos": {"type": "integer", "minimum": 0},
                "yPos": {"type": "integer", "minimum": 0},
                "width": {"type": "integer", "minimum": 1},
                "height": {"type": "integer", "minimum": 1},
                "widget": {"$ref": "#/$defs/widget"},
            },
        },
        "widget": {
            "type": "object",
            "additionalProperties": False,
            "required": ["title"],
            "properties": {
                "title": {"type": "string", "minLength": 1},
                "xyChart": {"$ref": "#/$defs/xyChart"},
                "sectionHeader": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"subtitle": {"type": "string"}, "dividerBelow": {"type": "boolean"}},
                },
            },
            # A widget is exactly one kind (the API's `content` union).
            "oneOf": [{"required": ["xyChart"]}, {"required": ["sectionHeader"]}],
        },
        "xyChart": {
            "type": "object",
            "additionalProperties": False,
            "required": ["dataSets"],
            "properties": {
                "dataSets": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/dataSet"}},
                "thresholds": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["value"],
                        "properties": {
                            "value": {"type": "number"},
                            "label": {"type": "string"},
                            "targetAxis": {"enum": ["Y1", "Y2"]},
                        },
                    },
                },
                "yAxis": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"label": {"type": "string"}, "scale": {"enum": ["LINEAR", "LOG10"]}},
                },
            },
        },
        "dataSet": {
            "type": "object",
            "additionalProperties": False,
            "required": ["timeSeriesQuery", "plotType"],
            "properties": {
                "timeSeriesQuery": {
                    "type": "object",
                    "additionalProperties": False,
                    # Every chart is PromQL: no filter, no MQL.
                    "required": ["prometheusQuery"],
                    "properties": {
                        "prometheusQuery": {"type": "string", "minLength": 1},
                        "unitOverride": {"type": "string"},
                    },
                },
                "plotType": {"enum": ["LINE", "STACKED_AREA", "STACKED_BAR", "HEATMAP"]},
                "legendTemplate": {"type": "string"},
                "targetAxis": {"enum": ["Y1", "Y2"]},
            },
        },
    },
}


def dashboard_problems(d: dict[str, Any]) -> list[str]:
    """Schema errors, then what the schema cannot say: tiles inside the grid, no overlaps, no duplicate charts."""
    problems = [
        f"{list(e.absolute_path)}: {e.message}"
        for e in jsonschema.Draft202012Validator(DASHBOARD_SCHEMA).iter_errors(d)
    ]
    if problems:
        return problems
    columns = d["mosaicLayout"]["columns"]
    tiles = d["mosaicLayout"]["tiles"]
    cells: dict[tuple[int, int], int] = {}
    for i, t in enumerate(tiles):
        x0, y0 = t.get("xPos", 0), t.get("yPos", 0)
        if x0 + t["width"] > columns:
            problems.append(f"tile {i} ends at column {x0 + t['width']} > {columns}")
        for x in range(x0, x0 + t["width"]):
            for y in range(y0, y0 + t["height"]):
                if (x, y) in cells:
                    problems.append(f"tile {i} overlaps tile {cells[(x, y)]} at ({x}, {y})")
                    break
                cells[(x, y)] = i
            else:
                continue
            break
    seen: dict[str, int] = {}
    for i, t in enumerate(tiles):
        chart = t["widget"].get("xyChart")
        if chart:
            key = json.dumps([ds["timeSeriesQuery"]["prometheusQuery"] for ds in chart["dataSets"]])
            if key in seen:
                problems.append(f"tile {i} duplicates the chart of tile {seen[key]}")
            seen.setdefault(key, i)
    return problems


def dev_dashboard(run: Run) -> dict[str, Any]:
    return json.loads(run.get(DASHBOARD, "observability-dashboard").inputs["dashboardJson"])


def charts(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [t["widget"] for t in d["mosaicLayout"]["tiles"] if "xyChart" in t["widget"]]


def headers(d: dict[str, Any]) -> list[str]:
    return [t["widget"]["title"] for t in d["mosaicLayout"]["tiles"] if "sectionHeader" in t["widget"]]


def all_queries(d: dict[str, Any]) -> list[str]:
    return [ds["timeSeriesQuery"]["prometheusQuery"] for c in charts(d) for ds in c["xyChart"]["dataSets"]]


def metric_names(query: str) -> set[str]:
    """Metrics a PromQL query selects: a name followed by `{` (every query here names its labels), a quoted
    `__name__`, or a quoted UTF-8 name first inside the braces."""
    plain = re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\{", query)
    quoted = re.findall(r'\{"__name__"="([^"]+)"', query) + re.findall(r'\{"([^"]+)"(?!=)', query)
    return set(plain) | set(quoted)


def test_the_dashboard_is_valid_for_the_dashboard_api(dev: Run) -> None:
    d = dev_dashboard(dev)
    assert dashboard_problems(d) == []
    assert len(charts(d)) >= 10
    for query in all_queries(d):
        assert query.count("(") == query.count(")") and query.count("{") == query.count("}"), query
        assert 'cluster="qwen-serving-cluster"' in query or 'cluster_name="qwen-serving-cluster"' in query, query


def test_every_metric_is_one_the_pinned_components_export(dev: Run) -> None:
    used = set().union(*(metric_names(q) for q in all_queries(dev_dashboard(dev))))
    used |= set().union(
        *(
            metric_names(normalize(a.plain())["conditions"][0]["conditionPrometheusQueryLanguage"]["query"])
            for a in dev.of_type(ALERT)
            if a.name not in LOG_BASED
        )
    )
    assert used <= set(monitoring.METRIC_SOURCES), used - set(monitoring.METRIC_SOURCES)
    assert len(used) >= 15  # not vacuous: the regular expression finds the names


@pytest.mark.parametrize(
    "breakage",
    [
        lambda d: d["mosaicLayout"]["tiles"][1].update(xPos=40),  # past column 48
        lambda d: d["mosaicLayout"]["tiles"][2].update(xPos=0, yPos=d["mosaicLayout"]["tiles"][1]["yPos"]),  # overlap
        lambda d: d["mosaicLayout"]["tiles"][1]["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"].pop(
            "prometheusQuery"
        ),
        lambda d: d["mosaicLayout"]["tiles"][1]["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"].update(
            timeSeriesFilter={"filter": "metric.type=x"}
        ),
        lambda d: d["mosaicLayout"].update(columns=64),
        lambda d: d["mosaicLayout"]["tiles"].append(copy.deepcopy(d["mosaicLayout"]["tiles"][1]) | {"yPos": 10_000}),
        lambda d: d["mosaicLayout"]["tiles"][0]["widget"].update(xyChart={"dataSets": []}),
        lambda d: d.update(gridLayout={}),
    ],
    ids=[
        "outside-grid",
        "overlap",
        "no-promql",
        "filter-not-promql",
        "too-many-columns",
        "duplicate",
        "two-kinds",
        "extra-layout",
    ],
)
def test_a_broken_dashboard_is_caught(dev: Run, breakage: Any) -> None:
    d = dev_dashboard(dev)
    breakage(d)
    assert dashboard_problems(d) != []


def test_one_row_per_role_and_one_chart_per_workload(codelab: Run) -> None:
    d = dev_dashboard(codelab)
    assert headers(d) == [
        "Admission (Kueue)",
        "TPU slices",
        "Serving: prefill",
        "Serving: decode",
        "Router (endpoint picker)",
    ]
    per_workload = [c["title"] for c in charts(d) if "TPU duty cycle by pod" in c["title"]]
    assert per_workload == [
        "demos.subslicing (kueue-jobset-simple-subslicing): TPU duty cycle by pod",
        "demos.superslicing (kueue-jobset-simple-superslicing): TPU duty cycle by pod",
        "serving.prefill (kueue-vllm-prefill-model-streamer): TPU duty cycle by pod",
        "serving.decode (kueue-vllm-decode-model-streamer): TPU duty cycle by pod",
    ]
    # The serving rows read the jobs of the scrape objects the program declares, one role each.
    for role in ("prefill", "decode"):
        job = pod_monitoring(codelab, f"observability-{role}-leaders")["metadata"]["name"]
        row = [q for q in all_queries(d) if f'job="{job}"' in q]
        assert len(row) == 1 + 3 + 3 + 2 + 1 + 1  # rate, TTFT x3, ITL x3, queue x2, KV cache, ready leaders


def test_the_dashboard_follows_the_settings(codelab: Run) -> None:
    full = dev_dashboard(codelab)
    no_demos = run_program({f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}})
    no_serving = run_program({f"{P}:serving": {"enabled": False}})
    bigger = run_program({f"{P}:tpu": {"cubes": 4}})
    for run in (no_demos, no_serving, bigger):
        assert run.error is None, run.error
        assert dashboard_problems(dev_dashboard(run)) == []
    assert len(charts(dev_dashboard(no_demos))) == len(charts(full)) - 2  # two workloads fewer
    lean = dev_dashboard(no_serving)
    assert headers(lean) == ["Admission (Kueue)", "TPU slices"]
    assert not any("vllm:" in q or "inference_" in q for q in all_queries(lean))
    # The provisioned line follows the cubes: 4 x 64 chips.
    (quota,) = [c for c in charts(dev_dashboard(bigger)) if c["title"].startswith("TPU chips")]
    assert quota["xyChart"]["thresholds"][0]["value"] == 256
    (quota,) = [c for c in charts(full) if c["title"].startswith("TPU chips")]
    assert quota["xyChart"]["thresholds"][0]["value"] == 128


def test_the_same_settings_give_the_same_dashboard() -> None:
    """`pulumi up` twice is a no-op: the JSON string is stable."""
    first, second = run_program(fresh=True), run_program(fresh=True)
    assert (
        first.get(DASHBOARD, "observability-dashboard").inputs
        == second.get(DASHBOARD, "observability-dashboard").inputs
    )


def test_dashboard_url_output(dev: Run) -> None:
    assert dashboard_url("my-tpu-project", "projects/my-tpu-project/dashboards/1234-abcd") == (
        "https://console.cloud.google.com/monitoring/dashboards/builder/1234-abcd?project=my-tpu-project"
    )
    assert dev.outputs["dashboardUrl"].startswith("https://console.cloud.google.com/monitoring/dashboards/builder/")
    assert dev.outputs["dashboardUrl"].endswith("?project=my-tpu-project")


# --------------------------------------------------------------------------------------------- alerts

THRESHOLD_KEYS = {
    "observability-workload-pending": ("pendingWorkloadMinutes", 30),
    "observability-tpu-quota-full": ("quotaFullMinutes", 30),
    "observability-no-ready-prefill-leader": ("noReadyLeaderMinutes", 10),
    "observability-no-ready-decode-leader": ("noReadyLeaderMinutes", 10),
}


AT_ONCE = {"observability-slice-failure-evictions"}  # events, not states: no duration, no threshold key
LOG_BASED = {"observability-slice-failed"}  # a log-match condition: no PromQL


def test_each_alert_names_its_threshold_key(dev: Run) -> None:
    policies = {a.name: normalize(a.plain()) for a in dev.of_type(ALERT)}
    assert set(policies) == set(THRESHOLD_KEYS) | AT_ONCE | LOG_BASED
    for name in AT_ONCE:
        (condition,) = policies[name]["conditions"]
        assert condition["conditionPrometheusQueryLanguage"]["duration"] == "0s"
        assert "No threshold: it fires on the first match." in policies[name]["documentation"]["content"]
    for name, (key, minutes) in THRESHOLD_KEYS.items():
        policy = policies[name]
        assert f"`{P}:observability.{key}` = {minutes} minutes" in policy["documentation"]["content"], name
        (condition,) = policy["conditions"]
        promql = condition["conditionPrometheusQueryLanguage"]
        assert promql["duration"] == f"{minutes * 60}s"
        assert promql["disableMetricValidation"] is True
        assert policy["notificationChannels"] == []


def test_thresholds_and_channels_come_from_config() -> None:
    channel = "projects/my-tpu-project/notificationChannels/123456"
    run = run_program(
        {
            f"{P}:observability": {
                "pendingWorkloadMinutes": 90,
                "notificationChannels": [channel],
                "notifyNobody": None,  # the dev stack's opt-out, unset
            }
        }
    )
    assert run.error is None, run.error
    policies = {a.name: normalize(a.plain()) for a in run.of_type(ALERT)}
    pending = policies["observability-workload-pending"]
    assert pending["conditions"][0]["conditionPrometheusQueryLanguage"]["duration"] == "5400s"
    assert f"`{P}:observability.pendingWorkloadMinutes` = 90 minutes" in pending["documentation"]["content"]
    assert all(p["notificationChannels"] == [channel] for p in policies.values())
    # Only the pending policy's threshold moved.
    assert (
        policies["observability-tpu-quota-full"]["conditions"][0]["conditionPrometheusQueryLanguage"]["duration"]
        == "1800s"
    )


def test_alerts_that_notify_nobody_take_the_named_opt_out() -> None:
    """No channel and no opt-out: refused, naming both ways out, before anything exists."""
    message = assert_rejected(
        {f"{P}:observability": {"notifyNobody": None}},
        [
            f"{P}:observability.notificationChannels = []",
            "projects/<project>/notificationChannels/<numeric id>",
            "observability.notifyNobody: true",
        ],
    )
    assert "(1 problem)" in message
    # Channels and the opt-out contradict each other.
    assert_rejected(
        {f"{P}:observability": {"notificationChannels": ["projects/my-tpu-project/notificationChannels/1"]}},
        [f"{P}:observability.notifyNobody = true", "false (or unset)"],
    )
    # Without alerts there is nobody to notify: no opt-out needed.
    run = run_program({f"{P}:observability": {"notifyNobody": None, "alerts": False}})
    assert run.error is None, run.error
    assert run.of_type(ALERT) == []
    # The dev stack opts out explicitly: its policies notify nobody.
    dev = run_program()
    assert [normalize(a.plain())["notificationChannels"] for a in dev.of_type(ALERT)] == [[]] * 6


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_staging_and_prod_alerts_notify_a_channel_their_owner_sets(stack: str) -> None:
    run = run_program(stack=stack, filled=False)
    assert run.error is not None and run.registrations == []
    problems = [line for line in str(run.error).splitlines() if "observability" in line]
    # One problem for the key: the placeholder, not also "no channel" for the list it leaves empty.
    assert problems == [
        f"  {P}:observability.notificationChannels[0] = '<REPLACE-ME: the {stack} on-call channel, "
        "projects/PROJECT/notificationChannels/ID>': a placeholder left in the stack file; set this environment's "
        "value there or with `pulumi config set --path 'observability.notificationChannels[0]' <value>`"
    ]
    filled = run_program(stack=stack)
    assert filled.error is None, filled.error
    policies = [normalize(a.plain()) for a in filled.of_type(ALERT)]
    assert policies and all(
        p["notificationChannels"] == ["projects/my-tpu-project/notificationChannels/123456"] for p in policies
    )


def test_alerts_watch_what_the_capacity_plan_warns_about(dev: Run) -> None:
    queries = {
        a.name: normalize(a.plain())["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
        for a in dev.of_type(ALERT)
        if a.name not in LOG_BASED
    }
    assert (
        'kueue_pending_workloads{cluster="qwen-serving-cluster",job="kueue-controller-metrics",cluster_queue="cq",replica_role!="follower"}'
        in queries["observability-workload-pending"]
    )
    assert (
        ">=" in queries["observability-tpu-quota-full"]
        and "kueue_cluster_queue_nominal_quota" in queries["observability-tpu-quota-full"]
    )
    for role in ("prefill", "decode"):
        job = pod_monitoring(dev, f"observability-{role}-leaders")["metadata"]["name"]
        assert (
            f'{{"__name__"="up",cluster="qwen-serving-cluster",namespace="llm-d-pd-disaggregation",job="{job}"}}'
            in queries[f"observability-no-ready-{role}-leader"]
        )


def test_workloads_evicted_for_slice_failures_alert_on_kueues_eviction_reasons(dev: Run) -> None:
    """kueue v0.17.4: a Retry check evicts with reason AdmissionCheck (pkg/controller/core/workload_controller.go
    :767), a Rejected one deactivates with underlying_cause AdmissionCheck (:455-491); metrics.go:521-546 names
    the labels. Either counts; preemptions (reason Preempted) do not."""
    policy = declared(dev, ALERT, "observability-slice-failure-evictions")
    query = policy["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    scope = 'cluster="qwen-serving-cluster",job="kueue-controller-metrics",cluster_queue="cq"'
    leader = 'replica_role!="follower"'
    assert f'kueue_evicted_workloads_total{{{scope},reason="AdmissionCheck",{leader}}}[10m]' in query
    assert f'kueue_evicted_workloads_total{{{scope},underlying_cause="AdmissionCheck",{leader}}}[10m]' in query
    assert query.count("or vector(0)") == 2 and query.endswith("> 0")  # one side without series is 0, not empty
    assert "Preempted" not in query


def test_a_failed_slice_alerts_on_the_slice_controllers_log_line(dev: Run) -> None:
    """xpk slice/internal/controller/workload_controller.go@250d4b3c:792-797 logs this message for each FAILED
    Slice; a log-match condition needs a notification rate limit."""
    policy = declared(dev, ALERT, "observability-slice-failed")
    (condition,) = policy["conditions"]
    assert condition["conditionMatchedLog"]["filter"].splitlines() == [
        'resource.type="k8s_container"',
        'resource.labels.cluster_name="qwen-serving-cluster"',
        'resource.labels.namespace_name="slice-controller-system"',
        'jsonPayload.msg="WARNING: Slice is not operational due to an error"',
    ]
    assert policy["alertStrategy"]["notificationRateLimit"] == {"period": "300s"}
    assert policy["userLabels"] == {"cluster": "qwen-serving-cluster"}


def test_monitoring_objects_wait_for_the_monitoring_api(dev: Run) -> None:
    api = dev.get("gcp:projects/service:Service", "project-monitoring")
    assert api.inputs["service"] == "monitoring.googleapis.com"
    for reg in [*dev.of_type(ALERT), *dev.of_type(DASHBOARD)]:
        assert api.urn in reg.dependencies, reg.name


# --------------------------------------------------------------------------------------------- switches


def test_turning_the_section_off_removes_all_of_it() -> None:
    run = run_program({f"{P}:observability": {"enabled": False}})
    assert run.error is None, run.error
    assert [r for r in run.registrations if r.type.startswith("gcp:monitoring/")] == []
    assert run.of_type(PM) == []
    assert observability(run) == []
    assert "monitoring.googleapis.com" not in [r.inputs["service"] for r in run.of_type("gcp:projects/service:Service")]
    assert quota_metrics(run) is False
    assert "monitoring" not in normalize(run.get(CHART, "serving-router").plain("values"))["router"]
    assert "dashboardUrl" not in run.outputs
    # Everything else is what the dev stack declares.
    dev = run_program()
    assert {(r.type, r.name) for r in run.registrations} == {(r.type, r.name) for r in dev.registrations} - {
        (r.type, r.name) for r in observability(dev)
    } - {("gcp:projects/service:Service", "project-monitoring")}


@pytest.mark.parametrize(
    ("part", "gone"), [("scraping", {PM, "kubernetes:core/v1:Secret"}), ("dashboard", {DASHBOARD}), ("alerts", {ALERT})]
)
def test_each_part_switches_on_its_own(part: str, gone: set[str]) -> None:
    run = run_program({f"{P}:observability": {part: False}})
    assert run.error is None, run.error
    declared = {r.type for r in observability(run)}
    for type_ in gone:
        assert type_ not in declared, type_
    kept = {PM, DASHBOARD, ALERT} - gone
    assert kept <= declared
    warned = [m for lvl, m in run.logs if lvl == "warn" and "observability.scraping" in m]
    # Charts without scraping have no data: said once at preview, not an error.
    assert len(warned) == (1 if part == "scraping" else 0), warned
    if part == "scraping":
        assert quota_metrics(run) is False
        assert "monitoring" not in normalize(run.get(CHART, "serving-router").plain("values"))["router"]


def kueue_selectors(query: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Each Kueue selector of a query: its metric and its matchers (label, `=` or `!=`, value)."""
    return [
        (metric, re.findall(r'([A-Za-z_]+)(!=|=)"([^"]*)"', body))
        for metric, body in re.findall(r"(kueue_[a-z_]+)\{([^}]*)\}", query)
    ]


def selected(matchers: list[tuple[str, str, str]], series: dict[str, str]) -> bool:
    return all((series.get(label, "") == value) == (op == "=") for label, op, value in matchers)


@pytest.mark.parametrize("roles", [("leader", "follower"), ("leader", "follower", "follower"), ("standalone",)])
def test_every_kueue_query_counts_one_replica(dev: Run, roles: tuple[str, ...]) -> None:
    """Kueue v0.17.4 labels each gauge with the exporting replica's `replica_role`, `leader`, `follower` or
    `standalone` (kubernetes-sigs/kueue@v0.17.4 pkg/util/roletracker/tracker.go:27-29, pkg/metrics/metrics.go:331,
    :628, :670, :694), and a follower exports the same gauges as the leader (cmd/kueue/main.go:345-347 clears them
    when it is elected). With `addons.kueue.replicas` 2 a plain sum counted every workload twice; every Kueue
    selector of the dashboard and the alerts must select exactly one replica's series."""
    q = [*all_queries(dev_dashboard(dev))]
    conditions = [normalize(a.plain())["conditions"][0] for a in dev.of_type(ALERT)]
    # the log-match alert (a failed Slice) has no query
    q += [c["conditionPrometheusQueryLanguage"]["query"] for c in conditions if "conditionPrometheusQueryLanguage" in c]
    found = [sel for query in q for sel in kueue_selectors(query)]
    assert len(found) >= 5  # not vacuous: the dashboard's four Kueue charts and the alerts
    for _metric, matchers in found:
        base = {
            label: value for label, op, value in matchers if op == "="
        }  # the series a replica exports for this selector
        series = [{**base, "replica_role": role} for role in roles]
        assert sum(selected(matchers, s) for s in series) == 1, (matchers, roles)
