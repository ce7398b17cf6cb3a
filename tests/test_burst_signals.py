"""The burst slots' PromQL (components/model/observability/burst_signals.py), run by a PromQL evaluator
(tests/promql_eval.py) on synthetic series, with KEDA's scale-to-zero rules (kedacore/keda v2.20.2
pkg/scaling/executor/scale_scaledobjects.go:63-113, 187-238: active above the activation threshold, to 0 once
inactive for cooldownPeriod) and a role whose slots take a Slice, load the model, serve, drain and vanish.

What it checks: the slots of a step of load start one after another, each only once the leader of the one before has
run for the chain hold (and so load their model side by side); a loading slot stays on; slots stop after the
cooldown, the highest first; a stopped slot does not turn on again while its leader drains nor before it has been
gone for the rearm time; every query is one series.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from components.model.keys import BURST_SLOT_LABEL
from components.model.observability import monitoring
from components.model.observability.burst_signals import SLOT_TARGET_LABEL, BurstSignals, leader_target_labels
from tests import conformance
from tests.planner_fixtures import elastic, settings
from tests.promql_eval import Evaluator, Series

FORMATION_S = 120  # admission to a running leader pod (the Slice forms), within the 180 s bound the pacing assumes


@dataclass
class Slot:
    number: int
    replicas: int = 0
    last_active: float | None = None
    started: float | None = None  # KEDA set replicas 1
    stopped: float | None = None  # KEDA set replicas 0
    history: list[tuple[str, float]] = field(default_factory=list)

    def state(self, t: float, load_s: int, grace_s: int) -> str | None:
        """What the leader is at `t`: None (no pod or not placed), loading, serving, draining."""
        if self.started is not None and (self.stopped is None or self.stopped < self.started):
            if t < self.started + FORMATION_S:
                return None
            return "loading" if t < self.started + FORMATION_S + load_s else "serving"
        if self.stopped is not None and t < self.stopped + grace_s:
            return "draining" if self.served_before_stop(load_s) else None
        return None

    def served_before_stop(self, load_s: int) -> bool:
        return (
            self.started is not None
            and self.stopped is not None
            and self.stopped >= self.started + FORMATION_S + load_s
        )


class Burst:
    """One role of a stack: its floor of 2 groups, its 3 slots, KEDA over them, and the series they leave."""

    def __init__(self, role: str, demand: Callable[[float], float], **serving: object) -> None:
        self.role = role
        self.s = settings(elastic(role, 5), {"serving": {role: {"replicas": 2}, **serving}})
        self.b = BurstSignals(self.s)
        self.p = self.b.pacing
        # Groups' worth of load at t: decode's KV cache the requests fill (at most 1 per serving leader: a full cache
        # holds no more), prefill's backlog of prompt tokens (spread over the serving leaders, whatever their number).
        self.demand = demand
        self.series = Series()
        self.ev = Evaluator(self.series)
        self.slots = [Slot(k) for k in range(1, 4)]
        self.base = {
            "cluster": self.s.cluster.name,
            "namespace": self.s.kueue.namespace,
            "job": monitoring.vllm_job(self.s, role),
        }
        self.values: dict[int, list[tuple[float, float]]] = {k: [] for k in range(1, 4)}
        self.actual_load_s: int | None = None

    def scrape(self, t: float) -> None:
        load_s, grace = self.load_s, self.s.serving.termination_grace_period_seconds
        leaders = [({"pod": f"floor-{i}"}, "serving") for i in range(2)]
        for slot in self.slots:
            state = slot.state(t, load_s, grace)
            if state is not None:
                leaders.append(({"pod": f"slot{slot.number}-0", SLOT_TARGET_LABEL: str(slot.number)}, state))
        serving = [labels for labels, state in leaders if state == "serving"]
        for labels, state in leaders:
            self.series.add({"__name__": "up", **self.base, **labels}, t, 1.0 if state == "serving" else 0.0)
        for labels in serving:
            if self.role == "decode":
                usage = min(1.0, self.demand(t) / len(serving))
                self.series.add({"__name__": "vllm:kv_cache_usage_perc", **self.base, **labels}, t, usage)
                continue
            serving_ = self.s.serving
            tokens = self.demand(t) * serving_.prefill.autoscaling.backlog_seconds
            tokens *= serving_.router.peak_prefill_throughput / len(serving)
            epp = {**self.base, "job": monitoring.epp_job(self.s), "pod": "epp-0"}
            endpoint = {"endpoint_name": f"{labels['pod']}-rank-0", "producer_name": "inflight-load-producer"}
            self.series.add({"__name__": "llm_d_epp_inflight_tokens", **epp, **endpoint}, t, tokens)

    def poll(self, t: float) -> None:
        for slot in self.slots:
            value = self.ev.scalar(self.b.slot_query(self.role, slot.number), t)
            assert value in (0.0, 1.0)
            self.values[slot.number].append((t, value))
            if value > 0:  # active
                if slot.replicas == 0:
                    slot.replicas, slot.started = 1, t
                    slot.history.append(("on", t))
                slot.last_active = t
            elif slot.replicas == 1 and slot.last_active is not None and t > slot.last_active + self.p.cooldown_seconds:
                slot.replicas, slot.stopped = 0, t
                slot.history.append(("off", t))

    def run(self, until: float) -> None:
        step = math.gcd(self.p.scrape_seconds, self.p.polling_seconds)
        for t in range(0, int(until) + 1, step):
            if t % self.p.scrape_seconds == 0:
                self.scrape(t)
            if t % self.p.polling_seconds == 0:
                self.poll(t)

    def on(self, k: int) -> list[float]:
        return [t for what, t in self.slots[k - 1].history if what == "on"]

    def off(self, k: int) -> list[float]:
        return [t for what, t in self.slots[k - 1].history if what == "off"]

    def serving_from(self, k: int) -> float:
        return self.on(k)[0] + FORMATION_S + self.load_s

    @property
    def load_s(self) -> int:
        """How long a group really loads (serving.modelLoadSeconds is an expectation)."""
        return self.actual_load_s or self.s.serving.model_load_seconds


FAST = {"modelLoadSeconds": 300, "terminationGracePeriodSeconds": 300}  # cooldown 300 + 180 + 300 = 780 s


def test_a_step_of_load_starts_the_slots_one_after_another() -> None:
    # 2 floor groups; from t=600 a prefill backlog of 4.6 groups' worth: 5 groups, all 3 slots at once.
    role = Burst("prefill", lambda t: 4.6 if t >= 600 else 1.0, **FAST)
    role.run(4 * 3600)
    hold, poll = role.p.chain_hold_seconds, role.p.polling_seconds
    first = role.on(1)
    assert len(first) == 1 and 600 <= first[0] <= 600 + role.p.fresh_seconds + poll, first
    for k in (2, 3):
        placed_before = role.on(k - 1)[0] + FORMATION_S  # the leader of the slot before runs (a scrape target)
        (start,) = role.on(k)
        # Not before the leader of the slot before it has run for the chain hold (a sample a scrape late at most) ...
        assert start >= placed_before + hold, (k, start, placed_before)
        # ... and soon after, while that one still loads its model: the slots load side by side.
        assert start <= placed_before + hold + role.p.scrape_seconds + 2 * poll, (k, start, placed_before)
        assert start < role.serving_from(k - 1), (k, start)
    # Loading (up = 0 for the model load) never turned a slot off: each went on once and stays on.
    assert all(role.off(k) == [] for k in (1, 2, 3))


def test_a_slot_stays_on_while_it_loads_longer_than_expected() -> None:
    # The model takes 2000 s, not the 300 s the settings expect: longer than KEDA's cooldown (780 s). A loading
    # leader (up 0, never served) keeps its slot on, so KEDA does not stop it halfway.
    role = Burst("decode", lambda t: 2.2, **FAST)
    role.actual_load_s = 2000
    role.run(2 * 3600)
    assert role.off(1) == [] and len(role.on(1)) == 1


def test_a_slot_turned_on_again_stays_on_while_it_loads_longer_than_expected() -> None:
    # Slot 1 served, stopped once the load went, and the load came back. Its new leader has its old one's pod name,
    # so it writes the same `up` series: the earlier run's samples must not make it a draining leader while it loads
    # for 2000 s, longer than the cooldown (780 s).
    role = Burst("decode", lambda t: 2.2, **FAST)
    role.actual_load_s = 2000

    def demand(t: float) -> float:
        stopped = role.slots[0].stopped
        return 2.2 if t < 5400 or (stopped is not None and t >= stopped) else 1.0

    role.demand = demand
    role.run(5 * 3600)
    assert len(role.off(1)) == 1 and len(role.on(1)) == 2, role.slots[0].history
    assert role.off(1)[0] < role.on(1)[1]


def test_slots_stop_after_the_cooldown_the_highest_first() -> None:
    # 5 groups wanted from 0; at 3 h the load falls to 2.2 groups' worth (3 wanted: slot 1), at 4 h to 1.0 (none).
    def demand(t: float) -> float:
        return 3.6 if t < 3 * 3600 else 2.2 if t < 4 * 3600 else 1.0

    role = Burst("decode", demand, **FAST)
    role.run(5 * 3600)
    cooldown, poll, fresh = role.p.cooldown_seconds, role.p.polling_seconds, role.p.fresh_seconds
    for k in (2, 3):
        (off,) = role.off(k)
        assert 3 * 3600 + cooldown <= off <= 3 * 3600 + cooldown + fresh + 2 * poll, (k, off)
    (off,) = role.off(1)
    assert 4 * 3600 + cooldown <= off <= 4 * 3600 + cooldown + fresh + 2 * poll, off


def test_a_stopped_slot_waits_for_its_leader_to_drain_and_be_gone_before_it_turns_on_again() -> None:
    # Slot 1 only (3 groups wanted), off once the load goes, then the load is back right after KEDA stopped it.
    role = Burst("decode", lambda t: 2.2, **FAST)
    back_at: list[float] = []

    def demand(t: float) -> float:
        stopped = role.slots[0].stopped
        if stopped is not None and t >= stopped:
            if not back_at:
                back_at.append(t)
            return 2.2
        return 2.2 if t < 3600 else 1.0

    role.demand = demand
    role.run(3 * 3600)
    (stopped,) = role.off(1)
    grace = role.s.serving.termination_grace_period_seconds
    last_sample = max(t for t in range(0, int(stopped + grace), role.p.scrape_seconds))  # the draining leader's last
    again = role.on(1)[1]
    # Never while the leader drains, nor before its last sample is rearm_seconds old.
    assert again >= last_sample + role.p.rearm_seconds, (again, last_sample)
    assert again <= last_sample + role.p.rearm_seconds + role.p.scrape_seconds + role.p.polling_seconds
    assert [v for t, v in role.values[1] if stopped < t < last_sample + role.p.rearm_seconds] == [0.0] * len(
        [t for t, _ in role.values[1] if stopped < t < last_sample + role.p.rearm_seconds]
    )


def test_every_query_is_one_series_even_with_no_series_at_all() -> None:
    s = settings(elastic("prefill", 6))
    b = BurstSignals(s)
    ev = Evaluator(Series())
    queries = (b.load("prefill"), b.desired_groups("prefill"), b.running_groups("prefill"), b.slot_query("prefill", 2))
    assert [ev.scalar(q, 1000.0) for q in queries] == [0.0, 4.0, 0.0, 0.0]  # desired: the floor, prefill's 4 replicas
    with pytest.raises(ValueError, match="from 1"):
        b.slot_query("prefill", 0)


def test_the_prefill_backlog_counts_only_serving_leaders_of_the_role() -> None:
    s = settings(elastic("prefill", 6))
    b = BurstSignals(s)
    series = Series()
    epp = {"cluster": s.cluster.name, "namespace": s.kueue.namespace, "job": monitoring.epp_job(s), "pod": "epp-x"}
    job = {"cluster": s.cluster.name, "namespace": s.kueue.namespace, "job": monitoring.vllm_job(s, "prefill")}
    for t in (0.0, 30.0, 60.0):
        for pod, tokens in (("p-0", 33821.0), ("p-1", 33821.0), ("gone-0", 500000.0), ("decode-0", 900000.0)):
            labels = {"endpoint_name": f"{pod}-rank-0", "producer_name": "inflight-load-producer"}
            series.add({"__name__": "llm_d_epp_inflight_tokens", **epp, **labels}, t, tokens)
        for pod in ("p-0", "p-1"):  # the removed endpoint's series stays frozen (router v0.10.0); its pod is gone
            series.add({"__name__": "up", **job, "pod": pod}, t, 1.0)
    ev = Evaluator(series)
    assert ev.scalar(b.load("prefill"), 60.0) == 2.0  # two serving leaders, one second of backlog each
    assert ev.scalar(b.wanted("prefill"), 60.0) == 2.0  # ceil(2 s / 1.5 s)


def test_the_leaders_scrape_copies_the_slot_number_into_a_label_the_podmonitoring_crd_takes() -> None:
    registry = conformance.require_registry()
    pm = {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": {"name": "leaders", "namespace": "ns"},
        "spec": {
            "selector": {"matchLabels": {"llm-d.ai/role": "decode"}},
            "endpoints": [{"port": "http", "path": "/metrics", "interval": "30s"}],
            "targetLabels": leader_target_labels(),
        },
    }
    assert conformance.validate(pm, registry) == []
    assert leader_target_labels()["fromPod"] == [{"from": BURST_SLOT_LABEL, "to": SLOT_TARGET_LABEL}]
