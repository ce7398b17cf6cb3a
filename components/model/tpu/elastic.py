"""The capacity plan of elastic serving: every state the burst slots can reach, simulated like the base plan.

A role's slots turn on in order and off in reverse (components/model/observability/burst_signals.py: slot k is
wanted from `replicas + k` groups on, and turns on only once slot k-1's leader runs: admitted and placed), so with
n_p prefill and n_d decode slots the reachable states are (i, j) for 0 <= i <= n_p, 0 <= j <= n_d: (n_p + 1) x
(n_d + 1) of them. Each state is the stack's workloads plus i prefill and j decode slots, each slot one Kueue Workload
of one slice at the burst priority, arriving after everything else (the prefill and decode slots interleaved, slot 1
of each first), scheduled by the same simulation as the base plan (components/model/tpu/admission.py).

What it guarantees, and refuses at preview otherwise: with every slot on, every slot is admitted, so both roles'
slots together fit the usable cubes beside the floors and whatever else a slot cannot preempt. A slot then never
waits for room a floor would need, and no floor ever needs a slot's room while the cubes are whole (which matters:
a preempted slot keeps its Slices until it scales to 0, components/model/serving/burst.py). Slots preempt only
what runs below the burst priority, and a floor is never preempted (tests/test_planner_elastic.py checks both in
every state).

Two roles wanting the last free slice: slots of both roles have one priority, so neither preempts the other
(`withinClusterQueue: LowerPriority`), and Kueue admits them in order of priority, then of their Workload's
creation time, then UID (kubernetes-sigs/kueue v0.17.4 pkg/cache/queue/cluster_queue.go:752-783 `baseCompareFunc`,
pkg/workload/workload.go:1256-1277 `GetQueueOrderTimestamp`: the creation time unless evicted by an admission
check), and BestEffortFIFO lets a later one that fits pass one that does not (apis/kueue/v1beta2/
clusterqueue_types.go:180-183). A slot's Workload is created when KEDA scales it to 1: the slot that asked first
gets the slice, the other waits until one frees. The bound above keeps that from happening while the cubes are
whole; it can with cubes lost to an unusable sub-block, or beside other teams' workloads at or above the burst
priority.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.model.config.settings import Settings
from components.model.records import record
from components.model.tpu.demand import STEP_SERVING, Workload
from components.model.tpu.geometry import Cube
from components.model.tpu.report import Plan, Preemption, Status
from components.model.tpu.reservation import config_key

# Slots arrive after everything the stack applies (components/model/tpu/demand.py steps).
STEP_BURST = STEP_SERVING + 1
ROLES = ("prefill", "decode")


def slot_key(role: str, slot: int) -> str:
    """The plan's key of a role's burst slot `slot` (1-based)."""
    return f"serving.{role}.autoscaling[{slot}]"


def slot_workloads(settings: Settings, cube: Cube, on: Mapping[str, int]) -> list[Workload]:
    """The first `on[role]` slots of each role, as the planner's workloads, interleaved by slot number."""
    burst = settings.burst_priority()
    if burst is None:
        return []
    roles = settings.serving.roles()
    out = []
    for slot in range(1, max(on.values(), default=0) + 1):
        for role in ROLES:
            if slot <= on.get(role, 0):
                name = f"{settings.lws_name(role)} slot {slot}"
                topology = roles[role].topology
                out.append(
                    Workload.of(
                        cube,
                        slot_key(role, slot),
                        topology,
                        1,
                        burst.name,
                        burst.value,
                        gang=True,
                        step=STEP_BURST,
                        name=name,
                    )
                )
    return out


@dataclass(frozen=True)
class StatePlan:
    """One reachable state: `on[role]` slots on."""

    on: tuple[tuple[str, int], ...]
    floors_admitted: bool  # every floor group the state (0, 0) admits is admitted here too
    slots_admitted: int
    pending: tuple[str, ...]  # slots not admitted
    preemptions: tuple[Preemption, ...]

    def as_dict(self) -> dict[str, Any]:
        # The preemptions' details are the slots' (`SlotPlan.preempts`): a state says how many (the stack output
        # holds every state, 625 of them for 24 + 24 slots).
        out = {"on": dict(self.on)} | record(self, "floors_admitted", "slots_admitted", "pending")
        return out | {"preemptions": len(self.preemptions)}


@dataclass(frozen=True)
class SlotPlan:
    role: str
    slot: int
    key: str
    topology: str
    chips: int
    preempts: tuple[str, ...]  # what it preempts in some reachable state

    def as_dict(self) -> dict[str, Any]:
        return record(self, "role", "slot", "topology", "chips", "preempts")


@dataclass(frozen=True)
class ElasticPlan:
    priority: str
    priority_value: int
    slots: dict[str, int]  # role -> slots
    slot_plans: tuple[SlotPlan, ...]
    states: tuple[StatePlan, ...]
    errors: tuple[str, ...]

    @property
    def burst_chips(self) -> int:
        return sum(s.chips for s in self.slot_plans)

    def as_dict(self) -> dict[str, Any]:
        return {
            "priority": self.priority,
            "priorityValue": self.priority_value,
            "slots": self.slots,
            "burstChips": self.burst_chips,
        } | record(self, "slot_plans", "states", "errors")

    def table(self) -> list[str]:
        roles = ", ".join(f"serving.{r}: {n} slot{'s' if n != 1 else ''}" for r, n in self.slots.items())
        lines = [
            f"BURST  {roles} at {self.priority} ({self.priority_value}), {self.burst_chips} chips above the floors"
        ]
        for s in self.slot_plans:
            victims = ", ".join(s.preempts) if s.preempts else "nothing"
            lines.append(f"  {s.key} ({s.topology}, {s.chips} chips): preempts {victims}")
        floors = all(st.floors_admitted for st in self.states)
        full = sum(1 for st in self.states if not st.pending)
        lines.append(
            f"  {len(self.states)} reachable states: floors admitted in {'every one' if floors else 'NOT every one'}, "
            f"every slot on admitted in {full}"
        )
        return lines


def _floor_units(plan: Plan) -> set[str]:
    return {u.label for w in plan.workloads if w.key.startswith("serving.") and not w.workload.gang for u in w.units}


def plan_elastic(
    settings: Settings, cube: Cube, cubes: int, workloads: Sequence[Workload], base: Plan, **kw: Any
) -> ElasticPlan | None:
    """Every reachable state of the burst slots, simulated (see the module doc); None without slots."""
    from components.model.tpu.planner import plan_workloads  # the planner imports this module

    slots = settings.burst_slots()
    burst = settings.burst_priority()
    if not slots or burst is None:
        return None
    floors = {label for label in _floor_units(base) if base.unit(label).status is Status.ADMITTED}
    ranges = [range(slots.get(role, 0) + 1) for role in ROLES]
    states, victims = [], {}
    for i in ranges[0]:
        for j in ranges[1]:
            on = {"prefill": i, "decode": j}
            extra = slot_workloads(settings, cube, on)
            result = plan_workloads(cube, cubes, [*workloads, *extra], **kw)
            keys = {w.key for w in extra}
            pending = tuple(w.key for w in extra if result.workload(w.key).status is not Status.ADMITTED)
            preemptions = tuple(p for p in result.preemptions if p.by_key in keys)
            for p in preemptions:
                victims.setdefault(p.by_key, {})[p.victim_key] = None
            admitted = all(result.unit(label).status is Status.ADMITTED for label in floors)
            states.append(
                StatePlan(tuple(on.items()), admitted, len(extra) - len(pending), pending, preemptions)
            )  # fmt: skip
    roles = settings.serving.roles()
    slot_plans = tuple(
        SlotPlan(
            role,
            k,
            slot_key(role, k),
            roles[role].topology,
            settings.serving_slice(role).chips,
            tuple(victims.get(slot_key(role, k), {})),
        )
        for role in ROLES
        for k in range(1, slots.get(role, 0) + 1)
    )
    full = states[-1]  # every slot on
    errors = _bound_errors(settings, cube, cubes, full, base) if full.pending else ()
    return ElasticPlan(burst.name, burst.value, slots, slot_plans, tuple(states), errors)


def _bound_errors(settings: Settings, cube: Cube, cubes: int, full: StatePlan, base: Plan) -> tuple[str, ...]:
    """One error per role with a slot that never fits, even with every lower priority preempted."""
    burst = settings.burst_priority()
    assert burst is not None
    kept = [w for w in base.workloads if w.workload.priority_value >= burst.value and w.admitted_slices]
    held = ", ".join(f"{w.key} {w.admitted_slices} x {w.workload.topology}" for w in kept) or "nothing"
    out = []
    for role in ROLES:
        pending = [k for k in full.pending if k.startswith(f"serving.{role}.")]
        if not pending:
            continue
        spec = settings.serving.roles()[role]
        slots = settings.burst_slots()[role]
        fit = slots - len(pending)
        out.append(
            f"{config_key(f'serving.{role}.autoscaling.maxGroups')} = {spec.replicas + slots}: with every burst slot "
            f"of both roles on, {len(pending)} of its {slots} slots ({', '.join(pending)}) find no {spec.topology} "
            f"partition in the {cubes} usable cube{'s' if cubes != 1 else ''} ({cubes} x {cube.topology}) beside "
            f"what a slot cannot preempt ({held}) and the other slots: at most {spec.replicas + fit} here, or fewer "
            "slots for the other role"
        )
    return tuple(out)


def with_elastic(plan: Plan, elastic: ElasticPlan | None) -> Plan:
    """The plan with its elastic part, whose bound errors refuse the preview like the plan's own: with every cube
    usable, slots that never fit are a configuration no cluster could run. With cubes on unusable sub-blocks they
    are a warning instead: the slots that do not fit stay pending (they preempt no floor), and refusing would hold
    up the very change that moves the cube (the sub-block warnings' `tpu.subBlocks`)."""
    if elastic is None:
        return plan
    if plan.sub_blocks is not None and plan.sub_blocks.unusable:
        lost = len(plan.sub_blocks.unusable)
        why = f" (while {lost} cube{'s are' if lost != 1 else ' is'} on unusable sub-blocks: those slots stay pending)"
        return dataclasses.replace(
            plan, elastic=elastic, warnings=plan.warnings + tuple(e + why for e in elastic.errors)
        )
    return dataclasses.replace(plan, elastic=elastic, errors=plan.errors + elastic.errors)
