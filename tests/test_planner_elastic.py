"""The capacity plan of the burst slots (components/model/tpu/elastic.py): every reachable state simulated, the floors
admitted and only lower priorities preempted in each, the usable cubes' bound refused at preview, and the rollout
room counted beside the slots that are on."""

from __future__ import annotations

from typing import Any

import pytest

from components.model.tpu import planner
from components.model.tpu.elastic import ElasticPlan, slot_key
from components.model.tpu.report import Plan
from tests.planner_fixtures import NO_DEMOS, both, cubes, elastic, run_plan, settings

CODELAB = {"demos": {"superslicing": {"enabled": True}}}
DEMO_HIGH = {"demos": {"subslicing": {"priority": "high-priority-3000", "replicas": 2}}}


def the_elastic(plan: Plan) -> ElasticPlan:
    assert plan.elastic is not None
    return plan.elastic


CASES: dict[str, tuple[dict[str, Any], ...]] = {
    "dev, both roles": (both(8, 8),),
    "decode only": (elastic("decode", 10),),
    "the codelab's mix": (CODELAB, both(6, 6)),
    "a demo at the floors' priority": (DEMO_HIGH, both(6, 6)),
    "four cubes, unequal roles": (cubes(4), both(9, 14)),
    "larger slots than the floor's": (cubes(4), NO_DEMOS, {"serving": {"decode": {"topology": "2x2x4"}}}, both(7, 6)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_reachable_state_admits_the_floors_and_preempts_only_lower_priorities(case: str) -> None:
    s = settings(*CASES[case])
    plan = planner.plan(s)
    e = the_elastic(plan)
    slots = s.burst_slots()
    assert plan.ok, plan.errors
    assert len(e.states) == (slots.get("prefill", 0) + 1) * (slots.get("decode", 0) + 1)
    assert {st.on for st in e.states} == {
        (("prefill", i), ("decode", j))
        for i in range(slots.get("prefill", 0) + 1)
        for j in range(slots.get("decode", 0) + 1)
    }
    floors = {w.key for w in plan.workloads if w.key.startswith("serving.")}
    burst = s.burst_priority()
    assert burst is not None
    for st in e.states:
        assert st.floors_admitted, st
        assert st.slots_admitted == sum(n for _, n in st.on) and not st.pending, st  # within the bounds: all admitted
        for p in st.preemptions:
            assert p.victim_priority < p.by_priority == burst.value, p
            assert p.victim_key not in floors and not p.victim_key.startswith("serving."), p


def test_beyond_the_bounds_slots_wait_and_still_never_preempt_a_floor() -> None:
    # Refused at preview (next test), but the states still show why: the slots that do not fit stay pending.
    e = the_elastic(run_plan({"kueue": {"tpuQuota": 1000}}, both(6, 12)))
    assert all(st.floors_admitted for st in e.states)
    assert [st.pending for st in e.states if st.pending][-1] == (slot_key("decode", 7), slot_key("decode", 8))
    assert all(not p.victim_key.startswith("serving.") for st in e.states for p in st.preemptions)


def test_slots_preempt_the_demos_they_need_room_from_and_the_table_says_so() -> None:
    e = the_elastic(run_plan(both(8, 8)))
    # 2 cubes: 8 floor groups and the 6-slice demo leave 2 partitions free; the third slot preempts the demo.
    assert [s.preempts for s in e.slot_plans if not s.preempts] != []  # the first slots take free room
    assert {v for s in e.slot_plans for v in s.preempts} == {"demos.subslicing"}
    state = {st.on: st for st in e.states}
    assert state[("prefill", 1), ("decode", 1)].preemptions == ()
    assert state[("prefill", 4), ("decode", 4)].slots_admitted == 8
    table = run_plan(both(8, 8)).table()
    assert "BURST  serving.prefill: 4 slots, serving.decode: 4 slots at burst-priority-2500 (2500), 64 chips" in table
    assert f"{slot_key('decode', 2)} (2x2x2, 8 chips): preempts demos.subslicing" in table
    assert "25 reachable states: floors admitted in every one, every slot on admitted in 25" in table


def test_without_autoscaling_the_plan_and_its_output_are_unchanged() -> None:
    plan = run_plan()
    assert plan.elastic is None and "BURST" not in plan.table() and "elastic" not in plan.as_dict()
    assert all("slots_running" not in r.as_dict() for r in plan.rollouts)
    on = run_plan(both(8, 8)).as_dict()
    assert on["elastic"]["slots"] == {"prefill": 4, "decode": 4} and len(on["elastic"]["states"]) == 25


def test_slots_the_usable_cubes_cannot_hold_are_refused_naming_the_key() -> None:
    # The quota allows them, but 2 cubes hold 16 partitions: 8 floor groups, 2 prefill slots and 6 decode slots fill
    # them, so the last 2 of the 8 decode slots (the slots of both roles arrive interleaved) never fit.
    plan = run_plan({"kueue": {"tpuQuota": 1000}}, both(6, 12))
    assert not plan.ok
    [error] = plan.errors
    assert error.startswith(f"{planner._qualified('serving.decode.autoscaling.maxGroups')} = 12: with every burst slot")
    assert "2 of its 8 slots (serving.decode.autoscaling[7], serving.decode.autoscaling[8])" in error
    assert "at most 10 here" in error
    assert "serving.prefill 4 x 2x2x2, serving.decode 4 x 2x2x2" in error  # what a slot cannot preempt
    assert "impossible TPU request" in plan.error_message()


def test_a_rollout_counts_the_burst_slots_beside_it() -> None:
    worst = planner.plan(settings(both(8, 8)))  # every slot on: the new floor groups take slots' room
    decode = worst.rollout("serving.decode")
    assert (decode.slots_running, decode.surge) == (4, 4)
    assert any(v.startswith("serving.") and "autoscaling" in v for v in decode.preempts), decode.preempts
    assert any("preempts burst slots for its new groups" in w for w in worst.warnings)
    quiet = planner.plan(settings())  # no slot: the demo's room is enough
    decode = quiet.rollout("serving.decode")
    assert decode.slots_running == 0 and decode.preempts == ("demos.subslicing",)
    assert not any("burst slots" in w for w in quiet.warnings)
    some = planner.plan(settings(elastic("decode", 6)))  # decode's 4 groups and 2 slots
    decode = some.rollout("serving.decode")
    assert (decode.slots_running, decode.slots_carried) == (2, 2)  # the carried slots fit beside the old ones
    assert "its 2 burst slots start on in the new revision, 2 beside the old ones" in some.table()
