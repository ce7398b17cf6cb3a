"""Observability: scrape objects that select exactly the serving pods, a dashboard that follows the settings,
alerts that name their thresholds, and a section that removes all of it when turned off. What the Monitoring API
accepts of the dashboard, and what it stores, is tests/test_dashboard.py's."""

from __future__ import annotations

import copy
import re
import shlex
from typing import Any

import pytest
import yaml

from components.model.observability import monitoring
from components.observability import dashboard_url
from tests import conformance, harness
from tests.harness import CHART, LWS, P, Registration, Run, assert_rejected, normalize, ok, run_program
from tests.harness import label_selector_matches as selects

PM = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"
RBAC = "kubernetes:rbac.authorization.k8s.io/v1:"
SERVICE = "gcp:projects/service:Service"
# Labels the LWS controller adds to the pods of a group (kubernetes-sigs/lws leaderworkerset_types.go).
LWS_NAME, WORKER_INDEX = "leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/worker-index"


def observability(run: Run) -> list[Registration]:
    """Everything the observability section declares (the component and what it owns)."""
    (component,) = [r for r in run.registrations if r.type == "gke-tpu-slicing:observability:Observability"] or [None]
    return [component, *run.descendants(component)] if component else []


def declared(run: Run, type_: str, name: str) -> dict[str, Any]:
    """The object as the program declares it, secrets unwrapped, integral numbers as integers."""
    return normalize(run.get(type_, name).plain())


def policies(run: Run) -> dict[str, dict[str, Any]]:
    return {a.name: normalize(a.plain()) for a in run.of_type(ALERT)}


def promql(policy: dict[str, Any]) -> dict[str, Any]:
    return policy["conditions"][0]["conditionPrometheusQueryLanguage"]


# --------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("settings", "fragments"),
    [
        (
            {"notificationChannels": ["projects/p/alertPolicies/1"]},
            ["notificationChannels", "projects/<project>/notificationChannels/<numeric id>"],
        ),
        ({"scrapeInterval": "fast"}, ["scrapeInterval"]),
        ({"pendingWorkloadMinutes": 0}, ["pendingWorkloadMinutes"]),
        ({"dashbaord": False}, ["dashbaord", "unknown key", "dashboard"]),
    ],
)
def test_bad_observability_config_is_rejected_before_anything_exists(settings: dict, fragments: list[str]) -> None:
    key, *rest = fragments
    assert_rejected({f"{P}:observability": settings}, [f"{P}:observability.{key}", *rest])


# --------------------------------------------------------------------------------------------- scraping


def simulated_pods(lws: dict[str, Any]) -> list[dict[str, str]]:
    """The labels of every pod the LWS controller makes from this LWS: one leader and size-1 workers per group."""
    lwt, name = lws["spec"]["leaderWorkerTemplate"], lws["metadata"]["name"]
    leader = {**lwt["leaderTemplate"]["metadata"]["labels"], LWS_NAME: name, WORKER_INDEX: "0"}
    workers = [
        {**lwt["workerTemplate"]["metadata"]["labels"], LWS_NAME: name, WORKER_INDEX: str(worker)}
        for worker in range(1, lwt["size"])
    ]
    return [leader, *workers] * lws["spec"]["replicas"]


@pytest.mark.parametrize("overrides", [{}, {f"{P}:serving": {"decode": {"topology": "2x2x4", "replicas": 2}}}])
def test_vllm_scrape_objects_select_the_leaders_of_their_role_and_only_them(overrides: dict[str, Any]) -> None:
    run = ok(overrides)
    all_lws = {role: declared(run, LWS, f"serving-{role}") for role in ("prefill", "decode")}
    for role, lws in all_lws.items():
        pm = declared(run, PM, f"observability-{role}-leaders")
        assert pm["metadata"]["namespace"] == lws["metadata"]["namespace"]
        for other, other_lws in all_lws.items():
            for pod in simulated_pods(other_lws):
                is_leader_of_role = other == role and pod[WORKER_INDEX] == "0"
                assert selects(pm["spec"]["selector"], pod) == is_leader_of_role, (role, other, pod)
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
    pm = declared(dev, PM, "observability-kueue")
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
    assert dev.depends_on(dev.get(PM, "observability-kueue"), dev.get(CHART, "kueue-chart"))


def test_kueue_selector_and_port_match_the_pinned_chart() -> None:
    """The pinned chart's metrics Service targets 8443 and its manager serves metrics there."""
    values = yaml.safe_load((conformance.require_charts_dir() / "kueue-v0.17.4" / "values.yaml").read_text())
    (port,) = values["metricsService"]["ports"]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["metrics"]["bindAddress"] == f":{port['targetPort']}"
    assert port["name"] == "https"


def scrape_hooks(run: Run) -> tuple[bool, bool]:
    """Whether the Kueue chart's manager exports the ClusterQueue resource metrics, and whether the router chart
    declares scrape objects of its own (the rest of the manager configuration: tests/test_addons.py)."""
    values = normalize(run.get(CHART, "kueue-chart").plain("values"))
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    router = normalize(run.get(CHART, "serving-router").plain("values"))["router"]
    return config["metrics"].get("enableClusterQueueResources", False), "monitoring" in router


def test_the_program_scrapes_the_epp_and_kueue_exports_the_quota_metrics(dev: Run) -> None:
    assert scrape_hooks(dev) == (True, False)  # the router chart's own scrape objects stay off
    router = declared(dev, CHART, "serving-router")
    pm = declared(dev, PM, "observability-epp")
    assert pm["metadata"]["name"] == f"{router['name']}-epp"
    assert pm["spec"]["endpoints"][0]["authorization"]["credentials"]["secret"]["name"] == "epp-metrics-scraper-token"
    # The EPP queries' job is that PodMonitoring's name.
    epp_queries = [q for q in all_queries(harness.emitted(dev)) if "inference_" in q]
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


def charts(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [t["widget"] for t in harness.tiles(d) if "xyChart" in t["widget"]]


def headers(d: dict[str, Any]) -> list[str]:
    return [t["widget"]["title"] for t in harness.tiles(d) if "sectionHeader" in t["widget"]]


def all_queries(d: dict[str, Any]) -> list[str]:
    return [ds["timeSeriesQuery"]["prometheusQuery"] for c in charts(d) for ds in c["xyChart"]["dataSets"]]


def every_query(run: Run) -> list[str]:
    """The dashboard's and the alerts' PromQL (the log-match alert, a failed Slice, has none)."""
    conditions = [p["conditions"][0] for p in policies(run).values()]
    alerts = [
        c["conditionPrometheusQueryLanguage"]["query"] for c in conditions if "conditionPrometheusQueryLanguage" in c
    ]
    return all_queries(harness.emitted(run)) + alerts


def metric_names(query: str) -> set[str]:
    """Metrics a PromQL query selects: a name followed by `{` (every query here names its labels), a quoted
    `__name__`, or a quoted UTF-8 name first inside the braces."""
    plain = re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\{", query)
    quoted = re.findall(r'\{"__name__"="([^"]+)"', query) + re.findall(r'\{"([^"]+)"(?!=)', query)
    return set(plain) | set(quoted)


def test_every_chart_query_is_balanced_and_scoped_to_the_cluster(dev: Run) -> None:
    d = harness.emitted(dev)
    assert len(charts(d)) >= 10
    for query in all_queries(d):
        assert query.count("(") == query.count(")") and query.count("{") == query.count("}"), query
        assert 'cluster="qwen-serving-cluster"' in query or 'cluster_name="qwen-serving-cluster"' in query, query


def test_every_metric_is_one_the_pinned_components_export(dev: Run) -> None:
    used = set().union(*(metric_names(q) for q in every_query(dev)))
    assert used <= set(monitoring.METRIC_SOURCES), used - set(monitoring.METRIC_SOURCES)
    assert len(used) >= 15  # not vacuous: the regular expression finds the names


def test_one_row_per_role_and_one_chart_per_workload(codelab: Run) -> None:
    d = harness.emitted(codelab)
    assert headers(d) == [
        "Admission (Kueue)",
        "TPU slices",
        "Serving: prefill",
        "Serving: decode",
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
        assert len(row) == 1 + 3 + 3 + 2 + 1 + 1  # rate, TTFT x3, ITL x3, queue x2, KV cache, ready leaders


def test_the_dashboard_follows_the_settings(codelab: Run) -> None:
    """Each of these dashboards is valid for the API too (tests/test_dashboard.py's cases)."""
    full = harness.emitted(codelab)
    assert len(charts(harness.emitted(run_program(harness.NO_DEMOS)))) == len(charts(full)) - 2  # two workloads fewer
    lean = harness.emitted(run_program({f"{P}:serving": {"enabled": False}}))
    assert headers(lean) == ["Admission (Kueue)", "TPU slices"]
    assert not any("vllm:" in q or "inference_" in q for q in all_queries(lean))
    # The provisioned line follows the cubes: 64 chips each.
    for d, chips in ((full, 128), (harness.emitted(run_program({f"{P}:tpu": {"cubes": 4}})), 256)):
        (quota,) = [c for c in charts(d) if c["title"].startswith("TPU chips")]
        assert quota["xyChart"]["thresholds"][0]["value"] == chips


def test_the_same_settings_give_the_same_dashboard() -> None:
    """`pulumi up` twice is a no-op: the JSON string is stable."""
    first, second = (run_program(fresh=True).get(harness.DASHBOARD, "observability-dashboard") for _ in range(2))
    assert first.inputs == second.inputs


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
CHANNEL = "projects/my-tpu-project/notificationChannels/123456"


def test_each_alert_names_its_threshold_key(dev: Run) -> None:
    found = policies(dev)
    assert set(found) == set(THRESHOLD_KEYS) | AT_ONCE | LOG_BASED
    for name in AT_ONCE:
        assert len(found[name]["conditions"]) == 1 and promql(found[name])["duration"] == "0s"
        assert "No threshold: it fires on the first match." in found[name]["documentation"]["content"]
    for name, (key, minutes) in THRESHOLD_KEYS.items():
        policy = found[name]
        assert f"`{P}:observability.{key}` = {minutes} minutes" in policy["documentation"]["content"], name
        assert len(policy["conditions"]) == 1
        assert (promql(policy)["duration"], promql(policy)["disableMetricValidation"]) == (f"{minutes * 60}s", True)
        assert policy["notificationChannels"] == []


def test_thresholds_and_channels_come_from_config() -> None:
    # notifyNobody: None unsets the dev stack's opt-out.
    settings = {"pendingWorkloadMinutes": 90, "notificationChannels": [CHANNEL], "notifyNobody": None}
    found = policies(ok({f"{P}:observability": settings}))
    pending = found["observability-workload-pending"]
    assert promql(pending)["duration"] == "5400s"
    assert f"`{P}:observability.pendingWorkloadMinutes` = 90 minutes" in pending["documentation"]["content"]
    assert all(p["notificationChannels"] == [CHANNEL] for p in found.values())
    assert promql(found["observability-tpu-quota-full"])["duration"] == "1800s"  # only the pending one moved


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
    assert ok({f"{P}:observability": {"notifyNobody": None, "alerts": False}}).of_type(ALERT) == []
    # The dev stack opts out explicitly: its policies notify nobody.
    assert [p["notificationChannels"] for p in policies(run_program()).values()] == [[]] * 6


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
    found = policies(ok(stack=stack)).values()
    assert found and all(p["notificationChannels"] == [CHANNEL] for p in found)


def test_alerts_watch_what_the_capacity_plan_warns_about(dev: Run) -> None:
    queries = {name: promql(p)["query"] for name, p in policies(dev).items() if name not in LOG_BASED}
    assert (
        'kueue_pending_workloads{cluster="qwen-serving-cluster",job="kueue-controller-metrics",cluster_queue="cq",'
        'replica_role!="follower"}' in queries["observability-workload-pending"]
    )
    quota_full = queries["observability-tpu-quota-full"]
    assert ">=" in quota_full and "kueue_cluster_queue_nominal_quota" in quota_full
    for role in ("prefill", "decode"):
        job = declared(dev, PM, f"observability-{role}-leaders")["metadata"]["name"]
        assert (
            f'{{"__name__"="up",cluster="qwen-serving-cluster",namespace="llm-d-pd-disaggregation",job="{job}"}}'
            in queries[f"observability-no-ready-{role}-leader"]
        )


def test_workloads_evicted_for_slice_failures_alert_on_kueues_eviction_reasons(dev: Run) -> None:
    """kueue v0.17.4: a Retry check evicts with reason AdmissionCheck (pkg/controller/core/workload_controller.go
    :767), a Rejected one deactivates with underlying_cause AdmissionCheck (:455-491); metrics.go:521-546 names
    the labels. Either counts; preemptions (reason Preempted) do not."""
    query = promql(declared(dev, ALERT, "observability-slice-failure-evictions"))["query"]
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
    api = dev.get(SERVICE, "project-monitoring")
    assert api.inputs["service"] == "monitoring.googleapis.com"
    for reg in [*dev.of_type(ALERT), *dev.of_type(harness.DASHBOARD)]:
        assert api.urn in reg.dependencies, reg.name


# --------------------------------------------------------------------------------------------- switches


def test_turning_the_section_off_removes_all_of_it() -> None:
    run = ok({f"{P}:observability": {"enabled": False}})
    assert [r for r in run.registrations if r.type.startswith("gcp:monitoring/")] == []
    assert run.of_type(PM) == [] and observability(run) == []
    assert "monitoring.googleapis.com" not in [r.inputs["service"] for r in run.of_type(SERVICE)]
    assert scrape_hooks(run) == (False, False)
    assert "dashboardUrl" not in run.outputs
    # Everything else is what the dev stack declares.
    dev = run_program()
    kept = {(r.type, r.name) for r in dev.registrations} - {(r.type, r.name) for r in observability(dev)}
    assert {(r.type, r.name) for r in run.registrations} == kept - {(SERVICE, "project-monitoring")}


@pytest.mark.parametrize(
    ("part", "gone"),
    [("scraping", {PM, "kubernetes:core/v1:Secret"}), ("dashboard", {harness.DASHBOARD}), ("alerts", {ALERT})],
)
def test_each_part_switches_on_its_own(part: str, gone: set[str]) -> None:
    run = ok({f"{P}:observability": {part: False}})
    types = {r.type for r in observability(run)}
    assert not gone & types and {PM, harness.DASHBOARD, ALERT} - gone <= types
    warned = [m for lvl, m in run.logs if lvl == "warn" and "observability.scraping" in m]
    # Charts without scraping have no data: said once at preview, not an error.
    assert len(warned) == (1 if part == "scraping" else 0), warned
    assert scrape_hooks(run) == ((False, False) if part == "scraping" else (True, False))


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
