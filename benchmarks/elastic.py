"""Benchmark 6: what elastic serving buys, on a synthetic day of load (a model, not a measurement; not a test).

    python -m benchmarks.elastic [--json]

One day at 30-second steps of a diurnal load with an evening burst, per role in groups' worth of load (what
`ceil(load / target)` asks for, the signal of components/model/observability/burst_signals.py). Two ways to serve it
on the same reservation (8 cubes of 4x4x4, groups of 2x2x2 = 8 chips):

* static: each role holds its peak all day (`replicas` = the most groups the day ever asks for);
* elastic: each role holds the day's least as its floor, with burst slots up to the peak, paced exactly as the
  slots' queries pace them (`wanted_on`: wanted, and serving or loading, or the slot before it has run (placed) for
  the chain hold and this one has been gone for the rearm time) and stopped by KEDA's cooldown, every number taken
  from the stack settings through components/model/serving/burst.py `pacing`.

A slot that turns on takes its slice from batch work (the reservation is assumed full of batch jobs): the victim's
pods stop (BATCH_GRACE_S) and its Slices are released (SLICE_RELEASE_S), the slot's Slice forms (its bound,
SLICE_ACTIVATION_TIMEOUT_S), the model loads (serving.modelLoadSeconds); a slot that stops drains for the
termination grace period. Whatever serving does not hold is batch's. Assumptions the figures rest on: load is open
loop (it does not fall because serving is slow), every formation takes its bound, the floor is always ready, KEDA
polls and Prometheus scrapes on the same 30 s grid, and batch always has work waiting.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.model.config.settings import Settings, load
from components.model.serving.burst import SLICE_ACTIVATION_TIMEOUT_S, SLICE_RELEASE_S, Pacing, pacing

DAY_S = 24 * 3600
STEP_S = 30
CUBES = 8
BATCH_GRACE_S = 30  # a batch pod's default terminationGracePeriodSeconds (the demos set none)
BURST = (20 * 3600, 20 * 3600 + 40 * 60, 4.0)  # 20:00-20:40, four more groups' worth for each role
# 10:00-10:04, a spike of four more groups' worth (a batch of long prompts) that is gone before any slot could serve it:
# what a slot bought for it costs is batch's, and what the chain is for.
SPIKE = (10 * 3600, 10 * 3600 + 4 * 60, 4.0)


def diurnal(t: float) -> float:
    """0 at 04:00, 1 at 16:00."""
    return (1 - math.cos(2 * math.pi * (t - 4 * 3600) / DAY_S)) / 2


def trace(base: float, swing: float) -> Callable[[float], float]:
    def load(t: float) -> float:
        extra = sum(more for start, end, more in (BURST, SPIKE) if start <= t < end)
        return base + swing * diurnal(t) + extra

    return load


ROLES = {"prefill": trace(2.0, 5.0), "decode": trace(3.0, 6.0)}


@dataclass
class BurstSlot:
    """One slot: KEDA's replicas and where its group is, as the slot's query sees it."""

    number: int
    starts: int = 0  # KEDA's scale-ups: each takes a slice from batch work
    replicas: int = 0
    last_active: float | None = None
    admitted: float | None = None  # KEDA set replicas 1
    stopped: float | None = None  # KEDA set replicas 0
    ready: float | None = None  # the leader serves
    gone: float | None = None  # the leader's last sample: its pod deleted

    def serving(self, t: float) -> bool:
        return self.ready is not None and self.ready <= t and self.replicas == 1

    def loading(self, t: float, placed: float) -> bool:
        return self.replicas == 1 and self.admitted is not None and self.admitted + placed <= t and not self.serving(t)

    def holds_chips(self, t: float) -> bool:
        """Holds its slice: from KEDA's scale-up until its pod is gone."""
        if self.replicas == 1:
            return True
        return self.gone is not None and t < self.gone


@dataclass
class Role:
    name: str
    floor: int
    slots: list[BurstSlot]
    ready_series: list[int] = field(default_factory=list)
    wanted_series: list[int] = field(default_factory=list)
    held_series: list[int] = field(default_factory=list)


# What slot k waits for of slot k-1 before it turns on (the chain), held for the chain hold:
READY, PLACED, NONE = "ready", "placed", "none"
CHAINS = (READY, PLACED, NONE)
PLACED_S = BATCH_GRACE_S + SLICE_RELEASE_S + SLICE_ACTIVATION_TIMEOUT_S  # KEDA's scale-up to a running leader pod


def wanted_on(
    slot: BurstSlot, before: BurstSlot | None, wanted: int, floor: int, t: float, p: Pacing, chain: str = PLACED
) -> bool:
    """The slot query's rule (components/model/observability/burst_signals.py `slot_query`), on states instead of
    series: wanted, and serving or loading, or [the slot before has been `chain` for the chain hold and this one's
    last leader is gone for the rearm time]. `chain`: READY (the slot before serves), PLACED (its leader pod runs:
    admitted, its Slice formed, loading or serving; the program's), NONE (no chain: every wanted slot at once)."""
    if wanted < floor + slot.number:
        return False
    if slot.serving(t) or slot.loading(t, PLACED_S):
        return True
    if chain == NONE or before is None:
        held = True
    elif chain == READY:
        held = before.serving(t) and t - (before.ready or t) >= p.chain_hold_seconds
    else:
        held = before.replicas == 1 and before.admitted is not None
        held = held and t - (before.admitted + PLACED_S) >= p.chain_hold_seconds
    rearmed = slot.gone is None or t - slot.gone >= p.rearm_seconds  # a draining slot's `gone` is still ahead
    return held and rearmed


def simulate(settings: Settings, loads: dict[str, Callable[[float], float]], chain: str = PLACED) -> dict[str, Any]:
    """One day of `loads` (role -> groups' worth at t), static and elastic; the figures of `render`. `chain`: what
    slot k waits for of slot k-1 (`wanted_on`); the program's is PLACED, the others are what-ifs."""
    p = pacing(settings)
    chips = {role: settings.serving_slice(role).chips for role in loads}
    wanted_at = {role: [math.ceil(f(t)) for t in range(0, DAY_S, STEP_S)] for role, f in loads.items()}
    peak = {role: max(w) for role, w in wanted_at.items()}
    floor = {role: min(w) for role, w in wanted_at.items()}
    roles = {r: Role(r, floor[r], [BurstSlot(k) for k in range(1, peak[r] - floor[r] + 1)]) for r in loads}
    placed = PLACED_S
    grace = settings.serving.termination_grace_period_seconds
    load_s = settings.serving.model_load_seconds
    for i, t in enumerate(range(0, DAY_S, STEP_S)):
        for r, role in roles.items():
            wanted = wanted_at[r][i]
            for k, slot in enumerate(role.slots):
                before = role.slots[k - 1] if k else None
                if t % p.polling_seconds == 0:
                    if wanted_on(slot, before, wanted, role.floor, t, p, chain):
                        if slot.replicas == 0:
                            slot.replicas, slot.admitted, slot.ready, slot.gone = 1, t, t + placed + load_s, None
                            slot.starts += 1
                        slot.last_active = t
                    elif (
                        slot.replicas == 1
                        and slot.last_active is not None
                        and t > slot.last_active + p.cooldown_seconds
                    ):
                        served = slot.serving(t)
                        slot.replicas, slot.stopped, slot.ready = 0, t, None
                        slot.gone = t + (grace if served else 0)
            role.wanted_series.append(min(wanted, role.floor + len(role.slots)))
            role.ready_series.append(role.floor + sum(s.serving(t) for s in role.slots))
            role.held_series.append(role.floor + sum(s.holds_chips(t) for s in role.slots))
    hours = STEP_S / 3600
    total = CUBES * settings.tpu.cube.chips * DAY_S / 3600
    static = sum(peak[r] * chips[r] for r in roles) * DAY_S / 3600
    elastic = sum(sum(role.held_series) * chips[r] * hours for r, role in roles.items())
    delays = step_delays(roles)
    ready = [d for d, waited in delays if not waited]
    short = sum(
        max(0, w - rd) for role in roles.values() for w, rd in zip(role.wanted_series, role.ready_series, strict=True)
    )
    return {
        "roles": {r: {"floor": floor[r], "peak": peak[r], "chipsPerGroup": chips[r]} for r in roles},
        "reservationChipHours": total,
        "staticChipHours": static,
        "elasticChipHours": elastic,
        "batchStaticChipHours": total - static,
        "batchElasticChipHours": total - elastic,
        "addedGroups": len(delays),
        "neverReadyWhileWanted": len(delays) - len(ready),
        # A group never ready while wanted counts as infinitely late: the percentile says so when it falls on one.
        "p95StepToReadySeconds": percentile([math.inf if waited else d for d, waited in delays], 0.95),
        "maxReadySeconds": max(ready, default=0.0),
        "slotStartSeconds": placed + load_s,
        "shortGroupHours": short * hours,
        "slotStarts": sum(slot.starts for role in roles.values() for slot in role.slots),
        "pacing": {"chainHold": p.chain_hold_seconds, "cooldown": p.cooldown_seconds, "rearm": p.rearm_seconds},
    }


def step_delays(roles: dict[str, Role]) -> list[tuple[float, bool]]:
    """For every group a rise of the wanted count adds above the floor: (seconds until that many groups serve,
    False), or (seconds until the load no longer wants it, True) when they never did meanwhile."""
    out = []
    for role in roles.values():
        w, ready = role.wanted_series, role.ready_series
        for i in range(1, len(w)):
            for g in range(max(w[i - 1], role.floor) + 1, w[i] + 1):
                j = i
                while j < len(w) and w[j] >= g and ready[j] < g:
                    j += 1
                out.append(((j - i) * STEP_S, j == len(w) or ready[j] < g))
    return out


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (0 without values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def scenario_settings() -> Settings:
    """The prod stack's shape: 8 cubes, 2x2x2 groups, the floors at the day's least, slots up to its peak."""
    peaks = {r: max(math.ceil(f(t)) for t in range(0, DAY_S, STEP_S)) for r, f in ROLES.items()}
    floors = {r: min(math.ceil(f(t)) for t in range(0, DAY_S, STEP_S)) for r, f in ROLES.items()}
    serving = {
        r: {"replicas": floors[r], "autoscaling": {"enabled": True, "maxGroups": peaks[r]}}
        for r in ("prefill", "decode")
    }
    raw = {
        "tpu": {"cubes": CUBES, "reservation": {"name": "r"}},
        "demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
        "serving": {"weightsBucket": "my-weights", **serving},
        "addons": {"keda": {"enabled": True}},
        "observability": {"notifyNobody": True},
        "cluster": {"controlPlane": {"authorizedNetworks": [{"cidrBlock": "198.51.100.0/24"}]}},
    }
    return load(raw, "my-project-123")


def _minutes(seconds: float) -> str:
    return "never (the load fell first)" if math.isinf(seconds) else f"{seconds / 60:.1f} min"


WHAT_IFS = {READY: "chained on the slot before serving", NONE: "not chained (every wanted slot at once)"}


def render(r: dict[str, Any], what_ifs: dict[str, dict[str, Any]] | None = None) -> str:
    """The figures of the program's chain (PLACED), and a line per other chain."""
    roles = ", ".join(f"{name} {v['floor']}..{v['peak']} groups" for name, v in r["roles"].items())
    lines = [
        f"Elastic serving, one synthetic day ({CUBES} cubes, {r['reservationChipHours']:.0f} chip-hours; {roles})",
        f"  serving chip-hours: static peak {r['staticChipHours']:.0f}, elastic {r['elasticChipHours']:.0f} "
        f"(x{r['elasticChipHours'] / r['staticChipHours']:.2f})",
        f"  chip-hours left to batch: static {r['batchStaticChipHours']:.0f}, elastic "
        f"{r['batchElasticChipHours']:.0f} (x{r['batchElasticChipHours'] / r['batchStaticChipHours']:.2f})",
        f"  load step to a ready group: p95 {_minutes(r['p95StepToReadySeconds'])}, slowest ready "
        f"{_minutes(r['maxReadySeconds'])}; {r['neverReadyWhileWanted']} of {r['addedGroups']} added groups never "
        f"ready while wanted (one slot starts in {r['slotStartSeconds'] / 60:.1f} min)",
        f"  groups short of the load (wanted, not serving): {r['shortGroupHours']:.1f} group-hours elastic, 0 static",
        f"  slot starts (each takes a slice from batch work): {r['slotStarts']}",
    ]
    for chain, w in (what_ifs or {}).items():
        lines.append(
            f"  what-if, {WHAT_IFS[chain]}: {w['neverReadyWhileWanted']} of {w['addedGroups']} never ready, "
            f"{w['shortGroupHours']:.1f} group-hours short, {w['slotStarts']} slot starts, serving chip-hours "
            f"x{w['elasticChipHours'] / w['staticChipHours']:.2f}"
        )
    return "\n".join(lines)


def run() -> dict[str, Any]:
    """The figures `python -m benchmarks` prints: the day with the program's chain, and each other chain's."""
    s = scenario_settings()
    return {chain: simulate(s, ROLES, chain) for chain in CHAINS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.elastic", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args(argv)
    result = run()
    print(json.dumps(result, indent=2) if args.json else render(result[PLACED], {c: result[c] for c in WHAT_IFS}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
