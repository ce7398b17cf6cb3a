"""Elastic serving's PromQL under Prometheus' own engine (promtool, tests/promql.py): the hand-written evaluator the
slot simulation runs on (tests/promql_eval.py) agrees with it on every query of the slots, and the slots' alerts
fire when they say (a slot wanted and not admitted, KEDA failing, a slot preempted) and not otherwise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from components.model.observability import monitoring
from components.model.observability.burst_signals import BurstSignals
from tests.harness import Run
from tests.observability_fixtures import ALERT, declared
from tests.planner_fixtures import elastic, settings
from tests.promql import assert_alert, assert_values, legacy
from tests.promql_eval import Evaluator, Series

STEP_S = 30  # the scrape interval the queries are derived from (observability.scrapeInterval's default)
Timeline = Sequence[float | None]  # one sample per STEP_S, None: no sample


def both(series: Mapping[str, Timeline]) -> tuple[Series, dict[str, str]]:
    """The same samples for the evaluator and in promtool's notation (`_` for no sample)."""
    ours = Series()
    for text, values in series.items():
        name, _, rest = text.partition("{")
        labels = dict(kv.split("=", 1) for kv in rest.rstrip("}").split(",") if kv)
        labels = {k: v.strip('"') for k, v in labels.items()}
        for i, v in enumerate(values):
            if v is not None:
                ours.add({"__name__": name, **labels}, i * STEP_S, v)
    return ours, {text: " ".join("_" if v is None else f"{v:g}" for v in values) for text, values in series.items()}


def timeline(*parts: tuple[float | None, int]) -> list[float | None]:
    return [v for v, n in parts for _ in range(n)]


def agree(queries: Mapping[str, str], series: Mapping[str, Timeline], steps: Sequence[int]) -> int:
    """Every query at every step: the evaluator's value is Prometheus' (one promtool run); the checks made."""
    ours, notation = both(series)
    ev = Evaluator(ours)
    checks = [(q, f"{i * STEP_S}s", ev.scalar(q, i * STEP_S)) for q in queries.values() for i in steps]
    assert_values(notation, checks, interval=f"{STEP_S}s")
    return len(checks)


def decode_series(s: object) -> dict[str, Timeline]:
    """Two floor leaders serving, full; slot 1 placed at step 4, loading until 19, serving to 45, gone at 46; slot 2
    placed at 24, loading until it goes at 50; slot 3 never placed."""
    base = f'cluster="{s.cluster.name}",namespace="{s.kueue.namespace}",job="{monitoring.vllm_job(s, "decode")}"'
    up, kv = f"up{{{base},pod=", f"vllm:kv_cache_usage_perc{{{base},pod="
    n = 60
    slot1 = timeline((None, 4), (0.0, 16), (1.0, 26), (None, 14))
    slot2 = timeline((None, 24), (0.0, 26), (None, 10))
    return {
        f'{up}"f-0"}}': [1.0] * n,
        f'{up}"f-1"}}': [1.0] * n,
        f'{kv}"f-0"}}': [1.0] * n,
        f'{kv}"f-1"}}': timeline((0.5, 30), (1.0, 30)),
        f'{up}"s1-0",burst_slot="1"}}': slot1,
        f'{kv}"s1-0",burst_slot="1"}}': [0.5 if v == 1.0 else None for v in slot1],
        f'{up}"s2-0",burst_slot="2"}}': slot2,
    }


STEPS = (2, 3, 4, 5, 6, 7, 8, 10, 19, 20, 21, 23, 24, 25, 27, 30, 45, 46, 47, 48, 50, 51, 52, 53, 55, 59)


@pytest.mark.parametrize("role", ["decode", "prefill"])
def test_the_hand_written_evaluator_is_prometheus_on_every_slot_query(role: str) -> None:
    s = settings(elastic(role, 5), {"serving": {role: {"replicas": 2}}})
    b = BurstSignals(s)
    series = decode_series(s) if role == "decode" else prefill_series(s)
    queries = {
        "load": b.load(role),
        "wanted": b.wanted(role),
        "desired": b.desired_groups(role),
        "running": b.running_groups(role),
        "ready": b.ready_groups(role),
        **{f"slot {k}": b.slot_query(role, k) for k in (1, 2, 3)},
    }
    assert agree(queries, series, STEPS) == len(queries) * len(STEPS)


def prefill_series(s: object) -> dict[str, Timeline]:
    """The decode timeline's leaders for prefill, and the router's in-flight tokens per endpoint: the floor's, a
    slot's while it serves, and a removed endpoint's frozen series (router v0.10.0 keeps it)."""
    out = {k.replace("decode", "prefill"): v for k, v in decode_series(s).items() if k.startswith("up")}
    epp = f'cluster="{s.cluster.name}",namespace="{s.kueue.namespace}",job="{monitoring.epp_job(s)}",pod="epp-0"'
    tokens = "llm_d_epp_inflight_tokens{" + epp + ',producer_name="inflight-load-producer",endpoint_name='
    slot1 = next(v for k, v in out.items() if "s1-0" in k)
    out[f'{tokens}"f-0-rank-0"}}'] = timeline((40000.0, 30), (80000.0, 30))
    out[f'{tokens}"f-1-rank-0"}}'] = [60000.0] * 60
    out[f'{tokens}"s1-0-rank-0"}}'] = [20000.0 if v == 1.0 else None for v in slot1]
    out[f'{tokens}"gone-0-rank-0"}}'] = [900000.0] * 60
    return out


# ------------------------------------------------------------------------------------------------- alerts


def rule(run: Run, name: str) -> tuple[str, int]:
    c = declared(run, ALERT, name)["conditions"][0]["conditionPrometheusQueryLanguage"]
    return c["query"], int(c["duration"].removesuffix("s"))


def keda(metric: str, slot: str, extra: str = "") -> str:
    labels = 'cluster="qwen-serving-cluster",namespace="keda",job="keda-operator"'
    return f'{metric}{{{labels},scaledObject="{slot}",scaler="s0-prometheus",type="scaledobject"{extra}}}'


DECODE = (
    'cluster="qwen-serving-cluster",namespace="llm-d-pd-disaggregation",job="kueue-vllm-decode-model-streamer-leaders"'
)


def test_a_slot_wanted_and_not_admitted_alerts_after_a_slots_start_naming_its_role(dev: Run) -> None:
    query, duration = rule(dev, "observability-decode-burst-slots-not-admitted")
    assert duration == 1380  # 180 s of Slice formation and the 1200 s model load
    slot = "kueue-vllm-decode-model-streamer-c06bc"
    active = keda("keda_scaler_active", slot, ',metric="s0-prometheus",triggerIndex="0"')
    floor = f'up{{{DECODE},pod="kueue-vllm-decode-model-streamer-82212-0"}}'
    leader = f'up{{{DECODE},pod="{slot}-0",burst_slot="2"}}'
    # KEDA wants the slot from 5m; its leader never runs: the reservation is full.
    full = {active: "0x5 1x60", floor: "1x65"}
    assert_alert(query, duration, full, firing=["29m", "40m"], quiet=["5m", "27m"])
    # Its leader runs (loading, up 0) from 12m: admitted and placed, no alert however long it loads.
    placed = {**full, leader: "_x12 0x53"}
    assert_alert(query, duration, placed, quiet=["29m", "40m", "60m"])
    # Another role's slot, or another cluster's KEDA, is not this role's.
    prefill = {active.replace("decode", "prefill"): "1x60", floor: "1x60"}
    assert_alert(query, duration, prefill, quiet=["30m", "50m"])


def test_keda_failing_to_query_or_to_run_alerts_after_ten_minutes(dev: Run) -> None:
    query, duration = rule(dev, "observability-keda-scaling-fails")
    slot = "kueue-vllm-prefill-model-streamer-de070"
    errors = keda("keda_scaler_detail_errors_total", slot, ',metric="s0-prometheus",triggerIndex="0"')
    operator = 'up{cluster="qwen-serving-cluster",namespace="keda",job="keda-operator",pod="keda-operator-x"}'
    # Queries fail every poll from 10m (two a minute); KEDA itself runs.
    failing = {errors: "0x10 2+2x40", operator: "1x50"}
    assert_alert(query, duration, failing, firing=["21m", "40m"], quiet=["9m", "19m"])
    # A blip: one failed poll at 10m, then fine.
    assert_alert(query, duration, {errors: "0x10 1x40", operator: "1x50"}, quiet=["12m", "21m", "30m"])
    # No operator answers its scrape from 10m (its metrics vanish with it).
    assert_alert(query, duration, {operator: "1x10"}, firing=["22m"], quiet=["10m", "19m"])


def test_a_preempted_slot_alerts_at_once_and_a_preempted_demo_does_not(dev: Run) -> None:
    query, duration = rule(dev, "observability-burst-slot-preempted")
    scope = 'cluster="qwen-serving-cluster",job="kueue-controller-metrics",cluster_queue="cq",replica_role="leader"'
    evicted = "kueue_evicted_workloads_total{" + scope + ',reason="Preempted",underlying_cause="",priority_class='
    slot, demo = f'{evicted}"burst-priority-2500"}}', f'{evicted}"low-priority-1000"}}'
    assert duration == 0
    assert_alert(query, duration, {slot: "_x30 1x30"}, firing=["30m", "35m"], quiet=["29m", "45m"])
    assert_alert(query, duration, {demo: "_x30 1x30"}, quiet=["30m", "35m"])
    # The panel counts it by reason, as the alert does.
    panel = BurstSignals(settings(elastic("decode", 6))).slot_evictions()
    assert legacy(panel).startswith("sum by (reason, underlying_cause)")
