"""Observability's alert policies: each names its threshold key, thresholds and channels come from the settings,
notifying nobody takes the named opt-out, and each watches what it says (Kueue's evictions, the slice log line)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import LWS, Run, assert_rejected, ok, run_program, warnings_of
from tests.observability_fixtures import ALERT, PM, declared, policies
from tests.stack_config import P


def promql(policy: dict[str, Any]) -> dict[str, Any]:
    return policy["conditions"][0]["conditionPrometheusQueryLanguage"]


THRESHOLD_KEYS = {
    "observability-workload-pending": ("pendingWorkloadMinutes", 30),
    "observability-tpu-quota-full": ("quotaFullMinutes", 30),
    "observability-no-ready-prefill-leader": ("noReadyLeaderMinutes", 10),
    "observability-no-ready-decode-leader": ("noReadyLeaderMinutes", 10),
}
# A role's set that has not been ready yet is held for its startup budget: 14400 s, the default
# serving.startupTimeoutSeconds, plus the 1800 s `pulumi up` allows a new set to be admitted, sliced and scheduled.
STARTUP_BUDGET = {
    "observability-prefill-leaders-not-ready-in-budget": 16200,
    "observability-decode-leaders-not-ready-in-budget": 16200,
}
# Elastic serving's (dev's burst slots): a slot wanted and not admitted for as long as a slot starts (180 s of
# Slice formation and the default 1200 s model load); KEDA failing for 600 s.
ELASTIC = {
    "observability-prefill-burst-slots-not-admitted": 1380,
    "observability-decode-burst-slots-not-admitted": 1380,
    "observability-keda-scaling-fails": 600,
}
# events, not states: no duration, no threshold key
AT_ONCE = {"observability-slice-failure-evictions", "observability-burst-slot-preempted"}
LOG_BASED = {"observability-slice-failed"}  # a log-match condition: no PromQL
CHANNEL = "projects/my-tpu-project/notificationChannels/123456"


def test_each_alert_names_its_threshold_key(dev: Run) -> None:
    found = policies(dev)
    assert set(found) == set(THRESHOLD_KEYS) | set(STARTUP_BUDGET) | set(ELASTIC) | AT_ONCE | LOG_BASED
    for name, seconds in ELASTIC.items():
        assert promql(found[name])["duration"] == f"{seconds}s", name
        assert f"Threshold: {'a slot' if 'burst' in name else seconds}" in found[name]["documentation"]["content"]
    for name, seconds in STARTUP_BUDGET.items():
        assert promql(found[name])["duration"] == f"{seconds}s"
        # Its clock starts at its creation: after the role's LeaderWorkerSet, not with the cluster.
        role = name.split("-")[1]
        assert dev.get(LWS, f"serving-{role}").urn in dev.get(ALERT, name).dependencies
        content = found[name]["documentation"]["content"]
        assert f"`{P}:serving.startupTimeoutSeconds` = 14400 s, plus 1800 s" in content and f": {seconds} s" in content
    # The dev stack opts out explicitly (notifyNobody): its policies notify nobody.
    assert [p["notificationChannels"] for p in found.values()] == [[]] * len(found)
    for name in AT_ONCE:
        assert len(found[name]["conditions"]) == 1 and promql(found[name])["duration"] == "0s"
        assert "No threshold: it fires on the first match." in found[name]["documentation"]["content"]
    for name, (key, minutes) in THRESHOLD_KEYS.items():
        policy = found[name]
        assert f"`{P}:observability.{key}` = {minutes} minutes" in policy["documentation"]["content"], name
        assert len(policy["conditions"]) == 1
        assert (promql(policy)["duration"], promql(policy)["disableMetricValidation"]) == (f"{minutes * 60}s", True)


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
    assert quota_full.endswith(") > 0")  # a zero quota (no cubes) and zero usage are not "fully used"
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
    # A label set's first eviction creates its counter at 1, which `increase` cannot see: new series count too.
    for cause in ('reason="AdmissionCheck"', 'underlying_cause="AdmissionCheck"'):
        m = f"kueue_evicted_workloads_total{{{scope},{cause},{leader}}}"
        assert f"count without () ({m} unless last_over_time({m}[1h] offset 10m))" in query  # seen before: not new
    assert "Preempted" not in query


def test_a_scrape_interval_past_promqls_lookback_is_warned_about() -> None:
    """PromQL finds an instant sample within 5 minutes only: scraped less often, a series comes and goes."""

    def warned(interval: str, **more: bool) -> list[str]:
        run = ok({f"{P}:observability": {"scrapeInterval": interval, **more}})
        return [w for w in warnings_of(run) if "observability.scrapeInterval" in w]

    (found,) = warned("5m1s")
    assert "= 5m1s: longer than the 5 minutes" in found and "miss what they watch" in found, found
    assert len(warned("300001ms")) == 1
    assert warned("5m") == warned("4m60s") == warned("1h", alerts=False) == []


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
