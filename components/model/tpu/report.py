"""The planner's results and their two renderings: the table (`python -m components plan`, the preview
warning) and the JSON form (`as_dict()`, the `capacityPlan` stack output)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from components.model.records import align, record
from components.model.tpu.demand import Workload
from components.model.tpu.geometry import Topology
from components.model.tpu.reservation import Assignment

if TYPE_CHECKING:
    from components.model.tpu.elastic import ElasticPlan

T = TypeVar("T")
TABLE_PREEMPTIONS = 10  # preemptions listed in the table; `as_dict()` has them all


class Status(StrEnum):
    ADMITTED = "admitted"
    PENDING = "pending"  # never admitted
    PREEMPTED = "preempted"  # admitted, then evicted by a higher priority, not readmitted
    PARTIAL = "partial"  # only for a whole LeaderWorkerSet: some replica groups admitted, some not


@dataclass(frozen=True)
class Placement:
    """Where one slice (or, for a super-slice, its part in one cube) sits."""

    key: str  # the workload's config key
    unit: str  # the Kueue workload: the key for a JobSet, key[group] for an LWS replica group
    slice_index: int  # index among the workload's slices (the replica group of an LWS)
    topology: Topology  # the whole slice's shape
    cube: int
    offset: tuple[int, ...]  # chip coordinates of the part's corner inside the cube
    extent: Topology  # the part inside this cube: the slice itself, or the whole cube for a super-slice
    part: int = 0  # which cube of a super-slice (0 for a sub-slice)

    def as_dict(self) -> dict[str, Any]:
        fields = ("unit", ("slice", "slice_index"), "topology", "offset", "extent", "part")
        return record(self, ("workload", "key"), *fields)


@dataclass(frozen=True)
class CubePlan:
    index: int
    pool: str
    chips: int
    used_chips: int
    placements: tuple[Placement, ...]

    def as_dict(self) -> dict[str, Any]:
        return record(self, "index", "pool", "chips", "used_chips", "placements")


@dataclass(frozen=True)
class Preemption:
    """One eviction during the simulation: `by` (strictly higher priority) preempted `victim`."""

    victim: str  # Kueue workload label
    victim_key: str
    victim_priority: int
    by: str
    by_key: str
    by_priority: int
    by_priority_class: str
    step: int

    def as_dict(self) -> dict[str, Any]:
        return record(self, "victim", "victim_priority", "by", "by_priority", "step")


@dataclass(frozen=True)
class UnitPlan:
    """The outcome for one Kueue workload."""

    label: str
    key: str
    group: int | None  # the LWS replica group; None for a JobSet
    slices: int
    chips: int
    status: Status
    reason: str
    preempted_by: str | None
    cubes: tuple[int, ...]
    waiting_for: str = ""  # why it is not admitted (empty when admitted)

    def as_dict(self) -> dict[str, Any]:
        return record(self, ("unit", "label"), "status", "reason", "preempted_by", "cubes")


@dataclass(frozen=True)
class WorkloadPlan:
    """The outcome for one config key (a JobSet, or every replica group of an LWS)."""

    workload: Workload
    status: Status
    reason: str
    admitted_slices: int
    admitted_chips: int
    units: tuple[UnitPlan, ...]

    @property
    def key(self) -> str:
        return self.workload.key

    def as_dict(self) -> dict[str, Any]:
        workload = ("key", "name", "topology", "kind", "slices", "chips", "priority", "priority_value", "gang")
        own = ("status", "reason", "admitted_slices", "admitted_chips", "units")
        return record(self.workload, *workload) | record(self, *own)


@dataclass(frozen=True)
class RolloutPlan:
    """How a serving role moves to a new LeaderWorkerSet when its pod shape, replicas, priority or queue change.

    The new set is created beside the old one (components/model/serving/rollout.py); `surge` is how many of its groups
    Kueue admits while every old group still runs (same or higher priorities are not preempted, lower ones may
    be). With a surge, the old set is deleted once `wait_for` new groups are ready; without one, the old set
    has to go first and the role serves nothing until the new groups load.
    """

    key: str  # serving.prefill
    name: str  # the configured LWS name (the object adds its revision)
    topology: Topology
    replicas: int  # groups of the new set
    surge: int  # new groups admitted while the old set runs
    running: int  # groups of the role the plan admits: what the new set gets once the old one is gone
    preempts: tuple[str, ...]  # workloads the new groups preempt while both sets run
    waiting: str  # why no more new groups fit, when surge < replicas
    # The deployed shape the new set rolls from ("4 x 2x2x2, high-priority"), read from the stack's previous
    # outputs when it differs from the configured one; "" when it is the same or was not read.
    deployed: str = ""
    slots_running: int = 0  # the role's burst slots on while it rolls; the new revision starts as many at 1
    slots_carried: int = 0  # of those, the new revision's admitted while the old slots still run

    @property
    def create_first(self) -> bool:
        return self.surge > 0

    @property
    def wait_for(self) -> int:
        """Ready groups of the new set before the old one is deleted (create-first) or the update ends."""
        return self.surge if self.create_first else self.running

    def in_place(self) -> str:
        """What a change LWS rolls in place (image, flags, env, probes) does to the role's ready leaders.

        LWS v0.8.0 rolls with maxUnavailable 1 and no surge (pkg/webhooks/leaderworkerset_webhook.go `Default`):
        one group at a time, the others serving. A surge is not used: see components/model/serving/rollout.py.
        """
        if self.replicas == 1:
            return "in place (image, flags): its only group restarts, no ready leader until it reloads"
        return f"in place (image, flags): one group at a time, {self.replicas - 1} of {self.replicas} ready"

    def describe(self) -> str:
        if self.create_first:
            text = (
                f"new LeaderWorkerSet first; the old one is deleted once {self.wait_for} of its "
                f"{self.replicas} groups are ready"
            )
            if self.preempts:
                text += f" (meanwhile preempting {', '.join(self.preempts)})"
            return text
        return (
            f"no room for a new {self.topology} group beside the running ones: the old "
            f"LeaderWorkerSet is deleted first and {self.key} has no ready leader until the new groups load"
        )

    def as_dict(self) -> dict[str, Any]:
        fields = ("key", "name", "topology", "replicas", "surge", "running", "create_first", "wait_for", "preempts")
        slots = ("slots_running", "slots_carried") if self.slots_running else ()
        return record(self, *fields, "waiting", "deployed", *slots)


@dataclass(frozen=True)
class Plan:
    machine_type: str
    cube_topology: Topology
    cube_chips: int
    quota: int | None
    cubes: tuple[CubePlan, ...]
    workloads: tuple[WorkloadPlan, ...]
    preemptions: tuple[Preemption, ...]
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    rollouts: tuple[RolloutPlan, ...] = ()  # serving roles only (planner.plan)
    sub_blocks: Assignment | None = None  # which cube is on which sub-block; None: not read
    elastic: ElasticPlan | None = None  # the burst slots' states (components/model/tpu/elastic.py); None: none

    @property
    def chips_provisioned(self) -> int:
        return len(self.cubes) * self.cube_chips

    @property
    def chips_requested(self) -> int:
        return sum(w.workload.chips for w in self.workloads)

    @property
    def chips_admitted(self) -> int:
        return sum(w.admitted_chips for w in self.workloads)

    @property
    def chips_free(self) -> int:
        """Chips no slice uses once every workload the plan admits runs."""
        return sum(c.chips - c.used_chips for c in self.cubes)

    @property
    def idle_cubes(self) -> int:
        """Cubes no admitted slice uses: headroom (more replicas, other workloads) the reservation bills anyway."""
        return sum(1 for c in self.cubes if c.used_chips == 0)

    def headroom(self) -> str:
        n = len(self.cubes)
        return (
            f"HEADROOM  {self.idle_cubes} of {n} cube{'s' if n != 1 else ''} idle (no slice placed once every "
            f"admitted workload runs; reserved, so billed all the same); {self.chips_free} of "
            f"{self.chips_provisioned} chips free"
        )

    @property
    def ok(self) -> bool:
        return not self.errors

    def workload(self, key: str) -> WorkloadPlan:
        return _find(self.workloads, key, lambda w: w.key)

    def unit(self, label: str) -> UnitPlan:
        return _find((u for w in self.workloads for u in w.units), label, lambda u: u.label)

    def placements(self) -> list[Placement]:
        return [p for c in self.cubes for p in c.placements]

    def error_message(self) -> str:
        n = len(self.errors)
        text = f"impossible TPU request ({n} problem{'s' if n != 1 else ''}):\n  " + "\n  ".join(self.errors)
        if self.sub_blocks and self.sub_blocks.unusable:
            # The cubes left out explain the error, and say how to bring them back.
            text += "\n  Cubes not counted:\n    " + "\n    ".join(self.sub_blocks.warnings)
        return text

    def as_dict(self) -> dict[str, Any]:
        out = {
            "machineType": self.machine_type,
            "cubeTopology": str(self.cube_topology),
            "totals": {
                "cubes": len(self.cubes),
                "chipsProvisioned": self.chips_provisioned,
                "chipsRequested": self.chips_requested,
                "chipsAdmitted": self.chips_admitted,
                "chipsFree": self.chips_free,
                "idleCubes": self.idle_cubes,
                "tpuQuota": self.quota,
            },
        } | record(self, "cubes", "workloads", "preemptions", "errors", "warnings", "rollouts", "sub_blocks")
        return out if self.elastic is None else out | {"elastic": self.elastic.as_dict()}

    def rollout(self, key: str) -> RolloutPlan:
        return _find(self.rollouts, key, lambda r: r.key)

    def table(self) -> str:
        """A compact fixed-width summary: totals, one row per workload, one row per (cube, workload)."""
        n = len(self.cubes)
        head = (
            f"TPU plan: {n} x {self.cube_topology} cube{'s' if n != 1 else ''} ({self.machine_type}) = "
            f"{self.chips_provisioned} chips provisioned; {self.chips_requested} requested, "
            f"{self.chips_admitted} admitted"
        )
        if self.quota is not None:
            head += f"; kueue.tpuQuota {self.quota}"
        rows = [["WORKLOAD", "TOPOLOGY", "SLICES", "CHIPS", "PRIORITY", "STATUS", "REASON"]]
        for w in self.workloads:
            wl = w.workload
            slices = f"{w.admitted_slices}/{wl.slices}"
            rows.append([wl.key, str(wl.topology), slices, str(wl.chips), wl.priority, w.status.value, w.reason])
        cube_rows = [["CUBE", "POOL", "USED", "WORKLOAD", "SLICES", "SHAPE", "WHERE"]]
        for c in self.cubes:
            first = [str(c.index), c.pool, f"{c.used_chips}/{c.chips}"]
            groups: dict[str, list[Placement]] = {}
            for p in c.placements:
                groups.setdefault(p.key, []).append(p)
            if not groups:
                cube_rows.append([*first, "-", "", "", "free"])
            for key, ps in groups.items():
                if ps[0].extent == ps[0].topology:
                    where = " ".join(",".join(str(x) for x in p.offset) for p in ps)
                else:
                    where = " ".join(f"cube {p.part + 1}/{p.topology.chips // c.chips}" for p in ps)
                cube_rows.append([*first, key, ranges(p.slice_index for p in ps), str(ps[0].topology), where])
                first = ["", "", ""]
        lines = [head, self.headroom(), "", *align(rows)]
        if self.preemptions:
            shown = [f"{p.by} preempts {p.victim}" for p in self.preemptions[:TABLE_PREEMPTIONS]]
            if len(self.preemptions) > TABLE_PREEMPTIONS:
                shown.append(f"... {len(self.preemptions) - TABLE_PREEMPTIONS} more in the stack output")
            lines += ["", "PREEMPTIONS  " + "; ".join(shown)]
        if self.rollouts:
            # What a change of a role's pod shape, replicas, priority or queue will do (see RolloutPlan).
            lines.append("")
            lines += [
                f"ROLLOUT  {r.key}: "
                + (f"from the deployed {r.deployed}: " if r.deployed else "")
                + f"{r.surge}/{r.replicas} new groups fit beside the running ones; {r.describe()}; {r.in_place()}"
                + (
                    f"; its {r.slots_running} burst slots start on in the new revision, {r.slots_carried} beside "
                    "the old ones"
                    if r.slots_running
                    else ""
                )
                for r in self.rollouts
            ]
        if self.elastic is not None:
            lines += ["", *self.elastic.table()]
        tail = ["", self.sub_blocks.table()] if self.sub_blocks else []
        return "\n".join([*lines, "", *align(cube_rows), *tail])


def _find(items: Iterable[T], name: str, key: Callable[[T], str]) -> T:
    """The item named `name`; KeyError when none is."""
    for item in items:
        if key(item) == name:
            return item
    raise KeyError(name)


def ranges(values: Iterable[int]) -> str:
    """0,1,2,3,5 -> '0-3,5'."""
    out: list[str] = []
    for v in sorted(set(values)):
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ",".join(out)
