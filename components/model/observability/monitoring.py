"""What the observability layer watches, as pure data: scrape jobs, PromQL queries, alert rules, chart values.

No Pulumi here (components/observability.py declares the resources; components/model/observability/dashboard.py lays the
queries out as the dashboard), so tests read the same definitions the program deploys.

Metric names, each as exported by the version this program pins:

* Kueue v0.17.4, `pkg/metrics/metrics.go`: `kueue_pending_workloads{cluster_queue,status}`,
  `kueue_admitted_active_workloads{cluster_queue}`, `kueue_cluster_queue_resource_usage` and
  `kueue_cluster_queue_nominal_quota{cluster_queue,flavor,resource}` (the last two only with the manager
  configuration's `metrics.enableClusterQueueResources: true`, `cmd/kueue/main.go` -> `WithResourceMetrics`),
  `kueue_evicted_workloads_total{cluster_queue,reason,underlying_cause,priority_class,replica_role}` (:521-546).
* vLLM (the serving image is a vllm-tpu nightly of 2026-04-30), `vllm/v1/metrics/loggers.py`
  `PrometheusStatLogger`: `vllm:request_success_total`, `vllm:time_to_first_token_seconds`,
  `vllm:inter_token_latency_seconds` (`vllm:time_per_output_token_seconds` is hidden behind
  `--show-hidden-metrics-for-version` since 0.11), `vllm:num_requests_waiting`, `vllm:num_requests_running`,
  `vllm:kv_cache_usage_perc` (`vllm:gpu_cache_usage_perc` was its pre-0.10 name).
* The endpoint picker, llm-d-router's own build at the router's release (image `llm-d-router-endpoint-picker`,
  llm-d/llm-d-router@71f4f099 v0.10.0 `pkg/epp/metrics/metrics.go`:73-74, :239-240, :253-254, :267-268, registered
  at :427-463): `inference_extension_scheduler_attempts_total{status}`,
  `inference_extension_scheduler_e2e_duration_seconds`, `inference_objective_request_total{model_name,
  target_model_name}`, `inference_pool_ready_pods{name}`. Each is marked deprecated there for an `llm_d_epp_*`
  twin exported beside it: a router release that drops them empties the router row.
* GKE system metrics (https://cloud.google.com/monitoring/api/metrics_kubernetes):
  `kubernetes.io/node/accelerator/tensorcore_utilization` and `kubernetes.io/container/accelerator/duty_cycle`,
  queried with PromQL's UTF-8 syntax, the quoted name inside the braces, and `monitored_resource` naming the
  resource type (https://cloud.google.com/monitoring/promql, "Querying Cloud Monitoring metrics by using PromQL").

Names made only of letters, digits, `_` and `:` (Kueue's, the EPP's) need no quoting
(https://cloud.google.com/stackdriver/docs/managed-prometheus/promql-differences, "UTF-8 support"); vLLM's
`vllm:...` names would not either, but are written `{"__name__"="vllm:..."}` as Google's vLLM dashboard does.
* `up`: the per-target scrape health series Managed Prometheus writes for every PodMonitoring target
  (`prometheus.googleapis.com/up/gauge`, prometheus-engine BENCHMARK.md@v0.17.2).

Managed Prometheus labels every scraped series with `cluster`, `namespace` and `job` (= the PodMonitoring's
name), so every query names its own job and this cluster: nothing from another stack in the project leaks in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from components.model.config.settings import PROJECT, Settings
from components.model.keys import APP_INSTANCE_LABEL, APP_NAME_LABEL, TPU_RESOURCE
from components.model.serving.rollout import ROLLOUT_SCHEDULING_BUDGET_S, rollout_timeout_seconds

_KUEUE = "kubernetes-sigs/kueue pkg/metrics/metrics.go@v0.17.4"
_VLLM = "vllm-project/vllm vllm/v1/metrics/loggers.py (PrometheusStatLogger, the image's vLLM >= 0.11)"
_EPP = "llm-d/llm-d-router pkg/epp/metrics/metrics.go@v0.10.0 (71f4f099)"
_GKE = "https://cloud.google.com/monitoring/api/metrics_kubernetes (TPU system metrics)"
_KEDA = "kedacore/keda pkg/metricscollector/prommetrics.go@v2.20.2 (68a5b502)"
# Every metric a query names, and where its name comes from (tests check that no query names another).
METRIC_SOURCES = {
    "kueue_pending_workloads": _KUEUE,
    "kueue_admitted_active_workloads": _KUEUE,
    "kueue_cluster_queue_resource_usage": _KUEUE,
    "kueue_cluster_queue_nominal_quota": _KUEUE,
    "kueue_evicted_workloads_total": _KUEUE,
    "vllm:request_success_total": _VLLM,
    "vllm:time_to_first_token_seconds_bucket": _VLLM,
    "vllm:inter_token_latency_seconds_bucket": _VLLM,
    "vllm:num_requests_waiting": _VLLM,
    "vllm:num_requests_running": _VLLM,
    "vllm:kv_cache_usage_perc": _VLLM,
    "inference_extension_scheduler_attempts_total": _EPP,
    "inference_extension_scheduler_e2e_duration_seconds_bucket": _EPP,
    "inference_objective_request_total": _EPP,
    "inference_pool_ready_pods": _EPP,
    # the burst slots' prefill signal (components/model/observability/burst_signals.py)
    "llm_d_epp_inflight_tokens": "llm-d/llm-d-router pkg/epp/framework/plugins/requestcontrol/dataproducer/"
    "inflightload/metrics.go@v0.10.0:41-48",
    "kubernetes.io/node/accelerator/tensorcore_utilization": _GKE,
    "kubernetes.io/container/accelerator/duty_cycle": _GKE,
    "up": "GoogleCloudPlatform/prometheus-engine@v0.17.2",
    "keda_scaler_active": _KEDA,  # the burst slots' alerts (components/model/observability/burst_signals.py)
    "keda_scaler_detail_errors_total": _KEDA,
}
RATE_WINDOW = "5m"
KUEUE_JOB = "kueue-controller-metrics"
# Every Kueue gauge carries `replica_role` (pkg/metrics/metrics.go@v0.17.4:331, :628, :670, :694, the label lists
# of the four gauges read here), one of `leader`, `follower` (a replica starts as follower,
# pkg/util/roletracker/tracker.go:27-29, :44) or `standalone` (no leader election, pkg/util/roletracker/logger.go:53-58;
# cmd/kueue/main.go:589-597). A follower sets its gauges too: the new leader clears the follower series it exported
# before (cmd/kueue/main.go:345-347). Excluding `follower` keeps the one leader, and the standalone replica.
REPLICA_ROLE_LABEL = "replica_role"
FOLLOWER_ROLE = "follower"
REPLICA_ROLE_SOURCE = "kubernetes-sigs/kueue@v0.17.4 (21235e3c) pkg/util/roletracker/tracker.go:27-29"
EVICTED_BY_CHECK = "AdmissionCheck"  # kueue apis/kueue/v1beta2/workload_types.go:1020 WorkloadEvictedByAdmissionCheck
# An eviction is an event, not a state: the panel counts evictions over this window, and the alert looks back as
# far and fires at once (no duration).
EVICTION_WINDOW = "10m"
KUEUE_METRICS_SA = "kueue-metrics-scraper"
# GMP's managed collectors run as this service account on Standard clusters (gke-gmp-system on Autopilot):
# GoogleCloudPlatform/prometheus-engine manifests/operator.yaml@v0.17.2.
GMP_COLLECTOR = ("gmp-system", "collector")


def vllm_job(settings: Settings, role: str) -> str:
    """The PodMonitoring (and so the Prometheus `job`) of one role's vLLM leaders."""
    return f"{settings.lws_name(role)}-leaders"


def epp_job(settings: Settings) -> str:
    """The EPP's PodMonitoring (so its Prometheus `job`), declared by the program (components/observability.py).

    Not the chart's own (`<release>`, routerlib `_gke.yaml`): the program declares the scrape objects itself so
    that the token Secret is created after its account, and a new name keeps a live chart-made PodMonitoring of
    the old name from colliding with it while one update replaces the other.
    """
    return f"{settings.serving.guide}-epp"


def epp_selector(settings: Settings) -> dict[str, str]:
    """The labels of the EPP pods: routerlib templates/_helpers.tpl `llm-d-router.selectorLabels` (gateway mode,
    `llm-d-router-gateway: <llm-d-router.name>` = `<release>-epp`, llm-d/llm-d-router@71f4f099 v0.10.0);
    tests/test_charts.py checks them against the rendered Deployment."""
    return {"llm-d-router-gateway": f"{settings.serving.guide}-epp"}


# The EPP serves /metrics on its port named `metrics` (9090, plain HTTP) behind a bearer token unless
# `router.monitoring.prometheus.auth.enabled` is false (routerlib templates/_deployment.yaml:126, _service.yaml).
EPP_METRICS_PORT = "metrics"
EPP_METRICS_SA = "epp-metrics-scraper"
# What the picker itself needs to check a scraper's token (TokenReview, SubjectAccessReview), the ClusterRole the
# chart ships only with `router.monitoring.prometheus.enabled` (routerlib templates/_rbac.yaml:1-40).
EPP_AUTH_RULES = (
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
)


def epp_service_account(settings: Settings) -> str:
    """The picker's own account: `llm-d-router.name` = `<release>-epp` (routerlib templates/_helpers.tpl)."""
    return f"{settings.serving.guide}-epp"


def workload_names(settings: Settings) -> dict[str, str]:
    """Config key -> object name of every enabled slice consumer (JobSet or LeaderWorkerSet)."""
    names = {"demos.subslicing": settings.demos.subslicing.name, "demos.superslicing": settings.demos.superslicing.name}
    out = {}
    for key in settings.workload_topologies():
        out[key] = names[key] if key in names else settings.lws_name(key.split(".", 1)[1])
    return out


def _selector(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _utf8_selector(metric: str, **labels: str) -> str:
    """A Cloud Monitoring metric in PromQL's UTF-8 form: `{"kubernetes.io/...",label="value"}`."""
    return "{" + ",".join([f'"{metric}"', *(f'{k}="{v}"' for k, v in labels.items())]) + "}"


class Queries:
    """PromQL for this stack: every query is scoped to this cluster and to the job that scrapes its source."""

    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self.cluster = settings.cluster.name
        self.namespace = settings.kueue.namespace
        self.cq = settings.kueue.cluster_queue

    def kueue(self, metric: str, **labels: str) -> str:
        """A Kueue gauge of the leader only: with leader election every replica exports the gauges it computes,
        labelled `replica_role` `leader` or `follower` (`standalone` when leader election is off), so a sum over
        2 replicas would count every workload twice (REPLICA_ROLE_SOURCE)."""
        selector = _selector(cluster=self.cluster, job=KUEUE_JOB, cluster_queue=self.cq, **labels)
        return metric + selector[:-1] + f',{REPLICA_ROLE_LABEL}!="{FOLLOWER_ROLE}"' + "}"

    def pending(self) -> str:
        return f"sum by (cluster_queue, status) ({self.kueue('kueue_pending_workloads')})"

    def admitted(self) -> str:
        return f"sum by (cluster_queue) ({self.kueue('kueue_admitted_active_workloads')})"

    def tpu_usage(self) -> str:
        return f"sum({self.kueue('kueue_cluster_queue_resource_usage', resource=TPU_RESOURCE)})"

    def tpu_quota(self) -> str:
        return f"sum({self.kueue('kueue_cluster_queue_nominal_quota', resource=TPU_RESOURCE)})"

    def evicted(self, **labels: str) -> str:
        """Workloads Kueue evicted in the last EVICTION_WINDOW, by reason and underlying cause: the dashboard's panel,
        and (summed over its two filters) the slice-failure alert, so the two always count the same evictions.

        Kueue creates each label set's counter at its first eviction, at 1 (metrics.go:884 only ever calls Inc), and
        `increase` sees no rise in a series that starts at 1 (Managed Prometheus even drops a new counter's first
        sample as its reset point). So a series that appeared within the window counts 1 beside its rise: one with
        no sample in the hour before the window (not merely none at its start, which a slow scrape would fake)."""
        m = self.kueue("kueue_evicted_workloads_total", **labels)
        w = EVICTION_WINDOW
        rise = f"increase({m}[{w}])"
        new = f"count without () ({m} unless last_over_time({m}[1h] offset {w}))"
        # Per series: its rise plus 1 when new; `or` keeps a series on only one side (one sample: no rise).
        return f"sum by (reason, underlying_cause) (({rise} + {new}) or {rise} or {new})"

    def slice_evictions(self) -> str:
        """Workloads evicted because an admission check failed: here the slice controller's, the ClusterQueue's
        only check (components/kueue_objects.py). A Retry check (a failed Slice, a formation timeout) is counted with
        reason AdmissionCheck (kueue v0.17.4 pkg/controller/core/workload_controller.go:767); a Rejected one
        deactivates the Workload, counted as reason Deactivated, underlying_cause AdmissionCheck (:455-491)."""
        retry = self.evicted(reason=EVICTED_BY_CHECK)
        rejected = self.evicted(underlying_cause=EVICTED_BY_CHECK)
        return f"(sum({retry}) or vector(0)) + (sum({rejected}) or vector(0))"

    def node_tensorcore(self) -> str:
        sel = _utf8_selector(
            "kubernetes.io/node/accelerator/tensorcore_utilization",
            monitored_resource="k8s_node",
            cluster_name=self.cluster,
        )
        return f"avg by (node_name) ({sel})"

    def workload_duty_cycle(self, name: str) -> str:
        # JobSet pods are <jobset>-<job>-<i>-<j>-<hash>, LWS pods <lws>-<group>[-<worker>]: the name is a prefix.
        sel = _utf8_selector(
            "kubernetes.io/container/accelerator/duty_cycle",
            monitored_resource="k8s_container",
            cluster_name=self.cluster,
            namespace_name=self.namespace,
        )
        return f'avg by (pod_name) ({sel[:-1]},pod_name=~"{name}-.*"}})'

    def vllm(self, metric: str, role: str, regex: Mapping[str, str] | None = None, **labels: str) -> str:
        """`metric` of the role's leaders; `labels` match exactly, `regex` as regular expressions."""
        # The quoted-name form Google's own vLLM dashboard uses for the `vllm:` names
        # (GoogleCloudPlatform/monitoring-dashboard-samples dashboards/vllm/vllm-prometheus-2.json).
        exact = _selector(cluster=self.cluster, namespace=self.namespace, job=vllm_job(self.s, role), **labels)
        extra = "".join(f',{k}=~"{v}"' for k, v in (regex or {}).items())
        return '{"__name__"="' + metric + '",' + exact[1:-1] + extra + "}"

    def request_rate(self, role: str) -> str:
        return f"sum(rate({self.vllm('vllm:request_success_total', role)}[{RATE_WINDOW}]))"

    def quantile(self, q: float, histogram: str, role: str) -> str:
        return f"histogram_quantile({q}, sum by (le) (rate({self.vllm(histogram + '_bucket', role)}[{RATE_WINDOW}])))"

    def leaders_up(self, role: str) -> str:
        # `or vector(0)`: no target at all (no leader pod) is 0 ready leaders, not "no data".
        return f"sum({self.vllm('up', role)}) or vector(0)"

    def set_was_ready(self, role: str, current: LeaderSet, window_s: int) -> str:
        """Some leader of the role's current LeaderWorkerSet answered its scrape within the window.

        Managed Prometheus names a PodMonitoring target `<pod>:<port name>` (GoogleCloudPlatform/prometheus-engine
        v0.17.2 pkg/operator/apis/monitoring/v1/pod_config.go:333-367), and a leader pod is `<lws>-<group>`: LWS
        names its leaders' StatefulSet after itself (sigs.k8s.io/lws v0.8.0 pkg/controllers/
        leaderworkerset_controller.go:760). The LWS's name carries its revision (components/model/serving/rollout.py),
        so a set that replaced another has targets of its own; one restarted in place keeps its names."""
        up = self.vllm("up", role, regex={"instance": f"{current.name}-[0-9]+:{current.port}"})
        return f"sum(max_over_time({up}[{window_s}s])) > 0"

    def epp(self, metric: str, **labels: str) -> str:
        return metric + _selector(cluster=self.cluster, namespace=self.namespace, job=epp_job(self.s), **labels)


@dataclass(frozen=True)
class LeaderSet:
    """A serving role's current LeaderWorkerSet, as its leaders' scrape targets name it."""

    name: str  # the LWS's name, its revision included
    port: str  # the named port its leaders serve /metrics on


@dataclass(frozen=True)
class AlertRule:
    key: str  # a short stable name (resource names derive from it)
    display_name: str
    query: str
    seconds: int  # how long the condition holds before the policy fires (its duration)
    config_key: str | None  # the config key of the threshold, named in the documentation; None: fires at once
    severity: str
    explanation: str
    # How `seconds` follows from the config key, when it is not the key's value in minutes.
    threshold: str | None = None
    # The serving role whose LeaderWorkerSet the policy is created after: its clock starts with that set.
    after_set: str | None = None

    def documentation(self) -> str:
        if self.threshold is not None:
            return f"{self.explanation}\n\nThreshold: {self.threshold}."
        if self.config_key is None:
            return f"{self.explanation}\n\nNo threshold: it fires on the first match."
        return (
            f"{self.explanation}\n\n"
            f"Threshold: `{PROJECT}:{self.config_key}` = {self.seconds // 60} minutes "
            f"(`pulumi config set --path {self.config_key} <minutes>`)."
        )


def alert_rules(settings: Settings, leader_sets: dict[str, LeaderSet] | None = None) -> list[AlertRule]:
    """The failures the capacity plan warns about, as PromQL alert conditions; `leader_sets`: each serving role's
    current LeaderWorkerSet (with serving)."""
    q = Queries(settings)
    o = settings.observability
    rules = [
        AlertRule(
            "workload-pending",
            f"{settings.cluster.name}: workloads pending in ClusterQueue {settings.kueue.cluster_queue}",
            f"sum({q.kueue('kueue_pending_workloads')}) > 0",
            o.pending_workload_minutes * 60,
            "observability.pendingWorkloadMinutes",
            "WARNING",
            # Kueue v0.17.4 exports no per-workload age, so this is "the queue never drained for that long".
            "At least one workload has been pending in the ClusterQueue without a break for the whole window: "
            "not enough free slices of its shape, or a higher priority holds them. Compare with "
            "`python -m components plan` and `kubectl get workloads -A`.",
        ),
        AlertRule(
            "tpu-quota-full",
            f"{settings.cluster.name}: TPU quota of ClusterQueue {settings.kueue.cluster_queue} fully used",
            # `> 0`: Kueue exports a zero quota and usage too (tpu.cubes 0), which `>=` alone would hold forever.
            f"({q.tpu_usage()} >= {q.tpu_quota()}) > 0",
            o.quota_full_minutes * 60,
            "observability.quotaFullMinutes",
            "WARNING",
            f"Admitted workloads hold every TPU chip of the quota ({settings.tpu.chips} provisioned): "
            "anything new waits or preempts lower priorities.",
        ),
        AlertRule(
            "slice-failure-evictions",
            f"{settings.cluster.name}: workloads evicted for TPU slice failures",
            f"({q.slice_evictions()}) > 0",
            0,
            None,
            "WARNING",
            f"The slice controller failed a workload's admission check in the last {EVICTION_WINDOW}: a Slice "
            "FAILED, did not form in time, was deleted, or (with FailOnUntoleratedDegradedSlice) turned "
            "ACTIVE_DEGRADED under a workload that asked for healthy slices; Kueue evicted and requeued it "
            "(or deactivated it for a rejected check). Run `python -m components health --stack <stack> --live` for "
            "the cube, its sub-block and the tpu.subBlocks change that moves it; `kubectl get slices` shows the "
            "Slices' states.",
        ),
    ]
    if settings.serving.enabled:
        # A set that has not been ready yet is loading its weights (tens of minutes, up to its startup budget): the
        # first deploy, or a set that replaced the old one delete-first. It is held as long as `pulumi up` waits for
        # a new set's groups; one that was ready and lost its leaders is reported after noReadyLeaderMinutes.
        startup = settings.serving.startup_timeout_seconds
        budget = rollout_timeout_seconds(startup)
        for role in settings.serving.roles():
            lws = settings.lws_name(role)
            no_leader = f"({q.leaders_up(role)}) < 1"
            current = (leader_sets or {})[role]
            rules.append(
                AlertRule(
                    f"no-ready-{role}-leader",
                    f"{settings.cluster.name}: no ready {role} leader ({lws})",
                    f"({no_leader}) and on() ({q.set_was_ready(role, current, budget)})",
                    o.no_ready_leader_minutes * 60,
                    "observability.noReadyLeaderMinutes",
                    "CRITICAL",
                    f"No {role} vLLM leader answers /metrics, and the role's current LeaderWorkerSet had a ready "
                    f"leader within the last {budget} s: the {role} side of the serving stack cannot take requests "
                    "(pods crashing, evicted, or waiting for a slice after a failure).",
                )
            )
            rules.append(
                AlertRule(
                    f"{role}-leaders-not-ready-in-budget",
                    f"{settings.cluster.name}: no {role} leader ready within the startup budget ({lws})",
                    no_leader,
                    budget,
                    "serving.startupTimeoutSeconds",
                    "CRITICAL",
                    f"No {role} vLLM leader has answered /metrics for {budget} s: a new LeaderWorkerSet (the first "
                    "deploy, or one that replaced the old set) never became ready, or a failed one did not recover.",
                    threshold=f"`{PROJECT}:serving.startupTimeoutSeconds` = {startup} s, plus "
                    f"{ROLLOUT_SCHEDULING_BUDGET_S} s to admit, slice and schedule a new set's groups: {budget} s, "
                    "as long as `pulumi up` waits for a new set "
                    "(`pulumi config set --path serving.startupTimeoutSeconds <seconds>`)",
                    after_set=role,
                )
            )
    return rules


# Kueue's chart: a release named like the chart (ours: "kueue") has that name as its fullname
# (charts/kueue/templates/_helpers.tpl `kueue.fullname`, `kueue.selectorLabels` at v0.17.4); the manager container
# serves /metrics over HTTPS on its port named `metrics` (8443, manager/manager.yaml) behind controller-runtime's
# authn/authz filter (cmd/kueue/main.go: SecureServing, WithAuthenticationAndAuthorization), and the chart always
# ships the ClusterRole `<fullname>-metrics-reader` (GET /metrics, rbac/metrics_reader_role.yaml).
KUEUE_CHART_NAME = "kueue"
KUEUE_METRICS_PORT = "metrics"


def kueue_selector(release: str) -> dict[str, str]:
    return {APP_NAME_LABEL: KUEUE_CHART_NAME, APP_INSTANCE_LABEL: release, "control-plane": "controller-manager"}


def kueue_metrics_reader(release: str) -> str:
    fullname = release if KUEUE_CHART_NAME in release else f"{release}-{KUEUE_CHART_NAME}"
    return f"{fullname[:63].rstrip('-')}-metrics-reader"
