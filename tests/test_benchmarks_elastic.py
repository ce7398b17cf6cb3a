"""The load-trace model of `python -m benchmarks` (benchmarks/elastic.py): its accounting and its pacing on loads
whose answer is known (no timing: the model runs in simulated time)."""

from __future__ import annotations

import math
from collections.abc import Callable

from benchmarks import elastic
from benchmarks.elastic import DAY_S, STEP_S, percentile, simulate
from components.model.serving.burst import pacing

STEP_AT = 6 * 3600


def flat(groups: float) -> Callable[[float], float]:
    return lambda t: groups


def step(low: float, high: float, until: float = DAY_S) -> Callable[[float], float]:
    """`low` groups' worth, `high` from STEP_AT until `until`."""
    return lambda t: high if STEP_AT <= t < until else low


def test_a_load_within_the_floor_holds_the_floor_all_day_and_leaves_the_rest_to_batch() -> None:
    s = elastic.scenario_settings()
    r = simulate(s, {"prefill": flat(3.0), "decode": flat(2.5)})
    assert r["roles"] == {
        "prefill": {"floor": 3, "peak": 3, "chipsPerGroup": 8},
        "decode": {"floor": 3, "peak": 3, "chipsPerGroup": 8},
    }
    assert r["staticChipHours"] == r["elasticChipHours"] == 6 * 8 * 24
    assert r["batchElasticChipHours"] == r["reservationChipHours"] - 6 * 8 * 24 == 8 * 64 * 24 - 1152
    assert r["addedGroups"] == 0 and r["shortGroupHours"] == 0


def test_one_added_group_is_ready_after_the_poll_its_slice_and_its_model_load() -> None:
    s = elastic.scenario_settings()
    r = simulate(s, {"prefill": step(2.0, 3.0), "decode": flat(2.0)})
    # A batch pod's grace (30 s), its Slices' release (120 s), the slot's Slice formation (180 s), the model load
    # (serving.modelLoadSeconds' default, 1200 s): 1530 s.
    assert r["slotStartSeconds"] == 1530
    assert r["addedGroups"] == 1 and r["neverReadyWhileWanted"] == 0
    # The step lands on a poll: the slot turns on at once and serves after its start (51 steps of 30 s).
    assert r["p95StepToReadySeconds"] == r["maxReadySeconds"] == 1530
    # Static holds 3 + 2 groups all day; elastic holds the third from the step on.
    assert r["staticChipHours"] == 5 * 8 * 24
    assert r["elasticChipHours"] == 4 * 8 * 24 + 8 * (DAY_S - STEP_AT) / 3600


def test_each_chain_starts_the_slots_of_a_step_at_its_own_pace() -> None:
    s = elastic.scenario_settings()
    p = pacing(s)
    loads = {"prefill": step(2.0, 5.0), "decode": flat(2.0)}  # three slots wanted from the step on
    placed, ready, none = (simulate(s, loads, chain) for chain in (elastic.PLACED, elastic.READY, elastic.NONE))
    start = math.ceil(placed["slotStartSeconds"] / STEP_S) * STEP_S
    hold = math.ceil(p.chain_hold_seconds / p.polling_seconds) * p.polling_seconds
    after_placed = math.ceil((elastic.PLACED_S + p.chain_hold_seconds) / STEP_S) * STEP_S
    assert placed["addedGroups"] == ready["addedGroups"] == none["addedGroups"] == 3
    assert none["maxReadySeconds"] == start  # all three at once
    assert placed["maxReadySeconds"] == 2 * after_placed + start  # each once the one before runs for the hold
    assert ready["maxReadySeconds"] == 3 * start + 2 * hold  # each after the previous serves for the hold
    assert none["shortGroupHours"] < placed["shortGroupHours"] < ready["shortGroupHours"]
    assert placed["slotStarts"] == ready["slotStarts"] == none["slotStarts"] == 3


def test_a_spike_gone_before_a_slot_runs_buys_one_slot_chained_and_every_wanted_one_unchained() -> None:
    s = elastic.scenario_settings()
    spike = {"prefill": step(2.0, 6.0, until=STEP_AT + 4 * 60), "decode": flat(2.0)}  # four slots' worth, 4 minutes
    starts = {chain: simulate(s, spike, chain)["slotStarts"] for chain in elastic.CHAINS}
    assert starts == {elastic.READY: 1, elastic.PLACED: 1, elastic.NONE: 4}


def test_a_burst_shorter_than_a_slot_start_is_never_served_and_counts_as_infinitely_late() -> None:
    s = elastic.scenario_settings()
    short = STEP_AT + 10 * 60  # ten minutes of load: a slot takes longer to start
    r = simulate(s, {"prefill": step(2.0, 3.0, until=short), "decode": flat(2.0)})
    assert r["addedGroups"] == 1 and r["neverReadyWhileWanted"] == 1
    assert math.isinf(r["p95StepToReadySeconds"]) and r["maxReadySeconds"] == 0
    # The slot was bought anyway and kept for the cooldown: chip-hours, no service.
    assert r["elasticChipHours"] > 4 * 8 * 24


def test_the_nearest_rank_percentile() -> None:
    assert percentile([], 0.95) == 0.0
    assert percentile([float(v) for v in range(1, 101)], 0.95) == 95.0
    assert percentile([1.0, math.inf], 0.95) == math.inf
