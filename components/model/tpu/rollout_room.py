"""The rollout room: how each serving role would roll to a new LeaderWorkerSet, counted beside everything that runs,
the active burst slots included (components/model/tpu/elastic.py).

A role's new set (its floor) arrives after everything else at the role's priority, and may take room from
anything below it, burst slots included; the new revision's slots (as many as were on: slot k's query reads the
leaders of slot k in either set, components/model/observability/burst_signals.py) arrive after it at the burst priority
and take only free room or what runs below them, never the old slots' (the same priority).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from components.model.serving.deployed import DeployedRole
from components.model.tpu.demand import Workload
from components.model.tpu.geometry import Cube
from components.model.tpu.report import Plan, RolloutPlan, Status
from components.model.tpu.reservation import config_key as _qualified

# The key of the new LeaderWorkerSet of a role while it rolls (beside the old one, under the role's key).
NEW_SET = " (new set)"


def _surge(cube: Cube, cubes: int, workloads: Sequence[Workload], rolling: Sequence[Workload], **kw: object) -> Plan:
    """The plan once the new sets of `rolling` arrive while every workload of the stack still runs: after all of
    them, in their own order (a role's floor, then its slots)."""
    after = max(w.step for w in workloads) + 1 - min(w.step for w in rolling)
    new_sets = [dataclasses.replace(w, key=w.key + NEW_SET, step=w.step + after) for w in rolling]
    from components.model.tpu.planner import plan_workloads  # the planner imports this module

    return plan_workloads(cube, cubes, [*workloads, *new_sets], **kw)  # type: ignore[arg-type]


def rollouts(
    cube: Cube,
    cubes: int,
    workloads: Sequence[Workload],
    base: Plan,
    deployed: Mapping[str, DeployedRole] | None = None,
    active: Sequence[Workload] = (),
    **kw: object,
) -> tuple[tuple[RolloutPlan, ...], tuple[str, ...]]:
    """How each serving role would roll (see RolloutPlan), and warnings for the rollouts that cannot keep serving.

    A role's new set arrives after everything else, at the role's priority: Kueue admits its groups where room
    is free or held by strictly lower priorities, never by the old set (same priority). Roles are planned one
    at a time (a config change usually touches one); a warning says when both at once would not fit.
    The old set runs with its `deployed` shape (the previous update's, components/model/serving/deployed.py) where one
    was read; without one, with the configured settings. `active`: the burst slots on while it rolls (each role's
    first ones, components/model/tpu/elastic.py `slot_workloads`); the role's own come back in its new revision.
    """
    deployed = deployed or {}
    olds = {
        w.key: deployed[w.key].applied_to(cube, w)
        for w in workloads
        if w.key in deployed and not deployed[w.key].same_as(w)
    }
    # Every workload as it runs before this update. It is what a role that changes now rolls beside; a role that
    # does not change is planned for a later change, once this update is done (so its own waitFor does not
    # change with another role's rollout).
    running_now = [*(olds.get(w.key, w) for w in workloads), *active]
    workloads = [*workloads, *active]
    serving = [w for w in workloads if w.key.startswith("serving.") and not w.gang]
    out: list[RolloutPlan] = []
    warnings: list[str] = []
    for w in serving:
        slots = [a for a in active if a.key.startswith(f"{w.key}.")]
        with_new = _surge(cube, cubes, running_now if w.key in olds else workloads, [w, *slots], **kw)
        new = with_new.workload(w.key + NEW_SET)
        waiting = next((u.waiting_for for u in new.units if u.status is not Status.ADMITTED), "")
        victims = tuple(dict.fromkeys(p.victim_key for p in with_new.preemptions if p.by_key == new.key))
        running = base.workload(w.key).admitted_slices
        r = RolloutPlan(w.key, w.name, w.topology, w.slices, new.admitted_slices, running, victims, waiting)
        if w.key in olds:
            r = dataclasses.replace(r, deployed=deployed[w.key].describe())
        if slots:
            carried = sum(with_new.workload(s.key + NEW_SET).admitted_slices for s in slots)
            r = dataclasses.replace(r, slots_running=len(slots), slots_carried=carried)
            taken = [v for v in victims if v.startswith("serving.")]
            if taken:
                warnings.append(
                    f"{_qualified(w.key)}: a change that rolls it to a new LeaderWorkerSet while {len(slots)} of its "
                    f"burst slots are on preempts burst slots for its new groups ({', '.join(taken)}); a preempted "
                    "slot keeps its Slices until it scales to 0, and the new group waits for them: roll when fewer "
                    "slots are on, or make room (more tpu.cubes, fewer lower-priority workloads)"
                )
        out.append(r)
        if not r.create_first and r.running:
            warnings.append(
                f"{_qualified(w.key)} ({w.name}, {w.slices} x {w.topology}): a change of its resources, topology, "
                f"replicas, priority or queue cannot keep it serving: no new group fits beside the running ones "
                f"({waiting}), so the running LeaderWorkerSet is deleted first and {w.key} has no ready leader until "
                "the new groups have loaded the model; free room first (more tpu.cubes, fewer lower-priority demos)"
            )
    rolling = [w for w, r in zip(serving, out, strict=True) if r.create_first]
    if len(rolling) > 1:
        together = _surge(cube, cubes, running_now if olds else workloads, rolling, **kw)
        short = [r for r in out if r.create_first and together.workload(r.key + NEW_SET).admitted_slices < r.wait_for]
        if short:
            need = sum(r.wait_for for r in out if r.create_first)
            got = sum(together.workload(r.key + NEW_SET).admitted_slices for r in out if r.create_first)
            warnings.append(
                f"{' and '.join(_qualified(r.key) for r in out if r.create_first)}: each can roll to a new "
                f"LeaderWorkerSet alone, but not both in one update ({need} new groups must be ready before the "
                f"old ones go, {got} fit at once): change their pod shapes, replicas, priorities or queue in "
                "separate updates"
            )
    return tuple(out), tuple(warnings)
