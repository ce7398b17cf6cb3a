"""The PromQL of elastic serving: each role's load and desired groups, and each burst slot's activation query, which
a KEDA ScaledObject of that slot reads (threshold 1, activation above 0, between 0 and 1 replica). Pure strings
and numbers, scoped like every query of components/model/observability/monitoring.py (this cluster, the workload
namespace, the job scraping the role's leaders).

The signal per role follows llm-d's token-aware KEDA guide for P/D disaggregation (llm-d/llm-d@560d420e
guides/workload-autoscaling/keda-epp-token-aware/README.md; its queries pd-disaggregation/base/prefill-scaledobject.yaml
@04c0115b and decode-scaledobject.yaml@56cb1218): the groups a role wants are ceil(load / target), as an HPA with
`AverageValue` would compute, with

* prefill: seconds of prefill backlog, the router's in-flight uncached prompt tokens (`llm_d_epp_inflight_tokens` of
  its `inflight-load-producer`, which the program's router configuration runs: components/llmd_router.py) over
  serving.router.peakPrefillThroughput, against serving.prefill.autoscaling.backlogSeconds;
* decode: vLLM's KV cache occupancy summed over the decode leaders, against serving.decode.autoscaling.kvCacheUsage.

The pinned router (llm-d/llm-d-router@71f4f099 v0.10.0) exports `inflight_tokens` per endpoint named
`<pod>-rank-<port index>` (pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload/metrics.go:41-48,
producer.go:427-441; pkg/epp/datastore/datastore.go:519-526) and does not drop a removed endpoint's series (fixed
after v0.10.0, llm-d-router#2577, as the guide says): the backlog counts only endpoints whose pod is a serving leader
of the role, which both drops those frozen series and scopes the EPP's series to the role.

Managed Service for Prometheus keeps no staleness (https://cloud.google.com/stackdriver/docs/managed-prometheus/
promql-differences, "Staleness"): an instant selector returns a vanished pod's last sample for the whole 5-minute
lookback. So a leader's state is its newest sample within `Pacing.fresh_seconds` (`last_over_time`), and a leader
without one is gone. Every function used exists in Prometheus 2.44, the version Managed Prometheus is at parity with
(same page), and every query returns exactly one series without labels, as KEDA's Prometheus scaler requires
(kedacore/keda v2.20.2 pkg/scalers/prometheus_scaler.go:264-307: an empty or multi-series result is an error).
"""

from __future__ import annotations

from components.model.addons.keda import OPERATOR_JOB
from components.model.config.checks import LWS_REVISION_LEN
from components.model.config.settings import PROJECT, Settings
from components.model.keys import BURST_SLOT_LABEL
from components.model.observability.monitoring import RATE_WINDOW, AlertRule, Queries
from components.model.serving.burst import Pacing, pacing

# The target label the vLLM leaders' PodMonitoring copies from the pod label components.model.keys.BURST_SLOT_LABEL
# (`targetLabels.fromPod`; GoogleCloudPlatform/prometheus-engine@7920a2a2 v0.17.2 pkg/operator/apis/monitoring/v1/
# pod_config.go:556-574 turns the label key into its sanitized meta label): the slot's number, empty on a floor's
# leader. The series of one slot number span both revisions of a rollout.
SLOT_TARGET_LABEL = "burst_slot"
INFLIGHT_TOKENS = "llm_d_epp_inflight_tokens"
INFLIGHT_PRODUCER = "inflight-load-producer"  # the producer's type, its name when the configuration gives none
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
# The endpoint picker names an endpoint after its pod and the index of its target port.
ENDPOINT_POD = "(.+)-rank-[0-9]+"
PREEMPTED = "Preempted"  # kueue v0.17.4 apis/kueue/v1beta2/workload_types.go:1012 WorkloadEvictedByPreemption
# KEDA's operator, per ScaledObject (kedacore/keda@68a5b502 pkg/metricscollector/prommetrics.go:35, :61-68, :78-86):
# whether its trigger is active at the last poll (pkg/scaling/scale_handler.go:1033), and the errors of its queries,
# a counter set to 0 at the first good poll (prommetrics.go:266-277, scale_handler.go:1042). Its `namespace` label
# meets the target's own and is kept as `exported_namespace` (Prometheus' honor_labels: false): the program selects
# its ScaledObjects by name.
KEDA_ACTIVE, KEDA_ERRORS = "keda_scaler_active", "keda_scaler_detail_errors_total"
KEDA_FAILING_S = 600  # KEDA holds every slot as it is while it cannot query: tolerated for two rate windows


def leader_target_labels() -> dict[str, list[dict[str, str]]]:
    """The vLLM leaders' PodMonitoring `targetLabels` with autoscaling on: the metadata labels GMP's CRD gives by
    default (pod_types.go:245-254) and the slot number copied from the pod label."""
    return {
        "metadata": ["container", "pod", "top_level_controller_name", "top_level_controller_type"],
        "fromPod": [{"from": BURST_SLOT_LABEL, "to": SLOT_TARGET_LABEL}],
    }


def _one(expr: str) -> str:
    """`expr` aggregated to one series without labels, 0 when it has none."""
    return f"({expr} or vector(0))"


class BurstSignals:
    """The queries of one stack's burst slots."""

    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self.q = Queries(settings)
        self.pacing: Pacing = pacing(settings)

    # -- selectors ----------------------------------------------------------------------------
    def leaders(self, role: str, slot: int | None = None) -> str:
        """`up` of the role's leaders (floor and slots), or of slot `slot`'s leaders only (either revision)."""
        return self.q.vllm("up", role, **({} if slot is None else {SLOT_TARGET_LABEL: str(slot)}))

    def _fresh(self, selector: str) -> str:
        """Each series' newest sample within the freshness window (none for a vanished target)."""
        return f"last_over_time({selector}[{self.pacing.fresh_seconds}s])"

    # -- load and desired groups --------------------------------------------------------------
    def target(self, role: str) -> tuple[str, float]:
        """The load per group the role scales to: its config key and value."""
        serving = self.s.serving
        if role == "prefill":
            return "serving.prefill.autoscaling.backlogSeconds", serving.prefill.autoscaling.backlog_seconds
        return "serving.decode.autoscaling.kvCacheUsage", serving.decode.autoscaling.kv_cache_usage

    def load(self, role: str) -> str:
        """The role's load in the unit of its target: seconds of prefill backlog, or decode groups' worth of full
        KV cache. One series."""
        if role == "prefill":
            tokens = self.q.epp(INFLIGHT_TOKENS, producer_name=INFLIGHT_PRODUCER)
            per_pod = f'label_replace({tokens}, "pod", "$1", "endpoint_name", "{ENDPOINT_POD}")'
            serving = f"({self._fresh(self.leaders(role))} == 1)"
            backlog = _one(f"sum({per_pod} and on (pod) {serving})")
            return f"({backlog} / {self.s.serving.router.peak_prefill_throughput:g})"
        return _one(f"sum({self._fresh(self.q.vllm(KV_CACHE_USAGE, role))})")

    def wanted(self, role: str) -> str:
        """Groups the role's load asks for: ceil(load / target), unbounded."""
        return f"ceil({self.load(role)} / {self.target(role)[1]:g})"

    def desired_groups(self, role: str) -> str:
        """Groups the role should run: the wanted count within [replicas, maxGroups] (the dashboard's 'desired')."""
        spec = self.s.serving.roles()[role]
        top = spec.replicas + self.s.burst_slots().get(role, 0)
        return f"clamp_max(clamp_min({self.wanted(role)}, {spec.replicas}), {top})"

    def running_groups(self, role: str) -> str:
        """Groups whose leader runs (a scrape target): admitted, placed, loading or serving."""
        return _one(f"count({self._fresh(self.leaders(role))})")

    def ready_groups(self, role: str) -> str:
        """Groups whose leader serves (its vLLM answers /metrics)."""
        return _one(f"count({self._fresh(self.leaders(role))} == 1)")

    # -- one slot ------------------------------------------------------------------------------
    def slot_query(self, role: str, slot: int) -> str:
        """1 while slot `slot` (1-based) of `role` should run, else 0: the KEDA trigger of that slot.

        on   = wanted >= replicas + slot
               and (the slot's leader serves, or is loading,
                    or [the previous slot's leader has run for chain_hold_seconds (slot 1: always)
                        and the slot's last leader has been gone for rearm_seconds])

        Thresholds rise with the slot, so the slots turn on in order and off in reverse. A slot turns on only once
        the leader of the slot before it runs (admitted, its Slice formed, its pod started: a scrape target), so a
        step of load buys one slot per placement and chain hold rather than every slot at once, and a slot that
        finds no room stops the chain behind it; the slots then load their model side by side. (Waiting for the
        slot before to serve instead lets the signal see each new group first, at a model load per slot: the
        benchmark's what-if, docs/benchmarks.md.) Once on, a slot stays on while it is wanted and its leader loads or
        serves; KEDA's cooldownPeriod (`Pacing.cooldown_seconds`) holds it for that long after the last poll that
        wanted it. A draining leader (SIGTERM: vLLM stops answering) is neither loading nor serving, and a slot turns
        on again only after its leader has been gone for the rearm time, so it never reuses a Workload that is still
        being finalized (components/model/serving/burst.py). Each term reads slot `slot`'s leaders of either
        revision (one `burst_slot` value): a rollout's new slot turns on at its first poll while the old one serves.
        """
        if slot < 1:
            raise ValueError("slots are numbered from 1")
        p = self.pacing
        spec = self.s.serving.roles()[role]
        mine = self.leaders(role, slot)
        fresh = self._fresh(mine)
        wanted = f"({self.wanted(role)} >= bool {spec.replicas + slot})"
        serving = f"({_one(f'max({fresh})')} >= bool 1)"
        # A leader that has a fresh sample, reads 0 and never served within the loading window: still loading (a
        # draining one has served).
        loading = (
            f"({_one(f'count(max_over_time({mine}[{p.loading_window_seconds}s]) < 1 and {fresh} == 0)')} >= bool 1)"
        )
        rearmed = _one(f"sum(absent_over_time({mine}[{p.rearm_seconds}s]))")
        if slot == 1:
            start = rearmed
        else:
            before = _one(f"count({self._fresh(self.leaders(role, slot - 1))})")
            # Every step from chain_hold_seconds ago to now: Managed Prometheus' ranges include their start, as
            # Prometheus 2.44's (tests/test_burst_promql.py checks this against Prometheus' engine).
            held = f"(min_over_time({before}[{p.chain_hold_seconds}s:{p.scrape_seconds}s]) >= bool 1)"
            start = f"{held} * {rearmed}"
        return f"{wanted} * clamp_max({serving} + {loading} + {start}, 1)"

    # -- what the dashboard shows and the alerts watch -------------------------------------------------------------
    def slot_evictions(self) -> str:
        """Burst slots Kueue evicted, by reason (a preempted slot requeues): the dashboard's count, with burst slots."""
        burst = self.s.burst_priority()
        assert burst is not None, "a stack without burst slots has no burst priority"
        return self.q.evicted(priority_class=burst.name)

    def keda(self, metric: str, role: str | None = None) -> str:
        """A metric of KEDA's operator about the ScaledObjects of `role`'s slots (every role's without one)."""
        roles = [role] if role else list(self.s.burst_slots())
        names = "|".join(self.s.lws_name(r) for r in roles)
        labels = f'cluster="{self.q.cluster}",namespace="{self.s.addons.keda.namespace}",job="{OPERATOR_JOB}"'
        return f'{metric}{{{labels},scaledObject=~"({names})-[0-9a-f]{{{LWS_REVISION_LEN}}}"}}'

    def unplaced_slots(self, role: str) -> str:
        """Slots KEDA wants on (their trigger active) whose leader does not run: not admitted, or still forming.
        A slot's ScaledObject has its LeaderWorkerSet's name, and the leader pod is `<name>-0` (LWS names its
        leaders' StatefulSet after itself: sigs.k8s.io/lws v0.8.0 pkg/controllers/leaderworkerset_controller.go:760)."""
        wanted = f'label_replace({self.keda(KEDA_ACTIVE, role)} == 1, "pod", "$1-0", "scaledObject", "(.+)")'
        return f"count({wanted} unless on (pod) {self._fresh(self.leaders(role))})"

    def keda_failing(self) -> str:
        """KEDA cannot scale the slots: its queries fail, or no operator answers its scrape."""
        errors = f"sum(increase({self.keda(KEDA_ERRORS)}[{RATE_WINDOW}])) > 0"
        up = f'up{{cluster="{self.q.cluster}",namespace="{self.s.addons.keda.namespace}",job="{OPERATOR_JOB}"}}'
        return f"({errors}) or on () ({_one(f'sum({self._fresh(up)})')} < 1)"

    def alert_rules(self) -> list[AlertRule]:
        """The alerts of elastic serving: none without burst slots."""
        slots, burst = self.s.burst_slots(), self.s.burst_priority()
        if not slots or burst is None:
            return []
        cluster, p = self.s.cluster.name, self.pacing
        rules = [
            AlertRule(
                f"{role}-burst-slots-not-admitted",
                f"{cluster}: {role} burst slots wanted but not admitted ({self.s.lws_name(role)})",
                f"({self.unplaced_slots(role)}) > 0",
                p.slot_start_seconds,
                "serving.modelLoadSeconds",
                "WARNING",
                f"KEDA has wanted a {role} burst slot on for longer than a slot takes to start, and its leader does "
                "not run: the reservation is full (everything left runs at or above the burst priority "
                f"{burst.name}), or a higher priority holds the room. The load waits on the groups that run. "
                "`python -m components plan` shows what the slots preempt; `kubectl get workloads -n "
                f"{self.s.kueue.namespace}` shows the slot's pending Workload and why.",
                threshold=f"a slot's start: 180 s for its Slice to form plus `{PROJECT}:serving.modelLoadSeconds` "
                f"({self.s.serving.model_load_seconds} s), {p.slot_start_seconds} s",
            )
            for role in slots
        ]
        preempted = f"sum({self.q.evicted(priority_class=burst.name, reason=PREEMPTED)}) > 0"
        rules.append(
            AlertRule(
                "burst-slot-preempted",
                f"{cluster}: a burst slot was preempted",
                preempted,
                0,
                None,
                "WARNING",
                "Kueue preempted a burst slot for a higher priority (a floor's group that requeued, a rollout's new "
                "floor, or another team's workload): the slot's group is requeued, and its Slices stay held by its "
                "gated pod until the slot turns off, while the preemptor waits for them. If the slot stays wanted, "
                "turn it off yourself: `kubectl annotate scaledobject -n "
                f"{self.s.kueue.namespace} <slot> autoscaling.keda.sh/paused-replicas=0`, then remove the annotation "
                "once the preemptor runs.",
            )
        )
        rules.append(
            AlertRule(
                "keda-scaling-fails",
                f"{cluster}: KEDA cannot scale the burst slots",
                self.keda_failing(),
                KEDA_FAILING_S,
                None,
                "WARNING",
                "KEDA's queries of the burst slots fail, or no KEDA operator answers: KEDA then holds every slot as "
                "it is, so no slot turns on for more load, and none turns off to give batch its slices back. "
                f"`kubectl describe scaledobject -n {self.s.kueue.namespace}` shows the error (KEDAScalerFailed).",
                threshold=f"{KEDA_FAILING_S} s of failures (KEDA polls every {self.pacing.polling_seconds} s)",
            )
        )
        return rules
