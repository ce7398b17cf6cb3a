"""What the planner places: one slice consumer per enabled config key, as Kueue sees it (see planner.py)."""

from __future__ import annotations

from dataclasses import dataclass

from components.model.config.settings import Settings
from components.model.tpu.geometry import Cube, Slice, SliceKind, Topology

# The codelab applies the demos and the serving stack in this order.
STEP_SUBSLICING, STEP_SUPERSLICING, STEP_SERVING = 0, 1, 2


@dataclass(frozen=True)
class Workload:
    """One slice consumer from the stack config, as Kueue sees it."""

    key: str  # config key without the project prefix, e.g. demos.subslicing or serving.prefill
    name: str  # the Kubernetes object (JobSet or LeaderWorkerSet)
    slice: Slice  # the shape of each slice, classified against the cube
    slices: int  # slices in all (JobSet replicated jobs, or LWS replica groups)
    priority: str  # WorkloadPriorityClass name
    priority_value: int
    gang: bool  # True: one Kueue workload for all slices (JobSet); False: one per slice (LWS replica group)
    step: int = 0  # arrival step; workloads of one step are applied together

    @classmethod
    def of(
        cls,
        cube: Cube,
        key: str,
        topology: str | Topology,
        slices: int,
        priority: str,
        priority_value: int,
        *,
        gang: bool,
        step: int = 0,
        name: str | None = None,
    ) -> Workload:
        shape = topology if isinstance(topology, Topology) else Topology.parse(topology)
        return cls(key, name or key, cube.classify(shape), slices, priority, priority_value, gang, step)

    @property
    def topology(self) -> Topology:
        return self.slice.topology

    @property
    def kind(self) -> SliceKind:
        return self.slice.kind

    @property
    def chips(self) -> int:
        return self.slices * self.slice.chips

    @property
    def kueue_workloads(self) -> int:
        return 1 if self.gang else self.slices


def workloads_from_settings(settings: Settings) -> list[Workload]:
    """Every enabled slice consumer, in the codelab's arrival order."""
    cube, priorities = settings.tpu.cube, settings.kueue.priorities
    sub, sup = settings.demos.subslicing, settings.demos.superslicing
    demos = (("demos.subslicing", sub, STEP_SUBSLICING), ("demos.superslicing", sup, STEP_SUPERSLICING))
    wanted = [(key, demo, True, step, demo.name) for key, demo, step in demos if demo.enabled]
    if settings.serving.enabled:
        roles = settings.serving.roles().items()
        wanted += [(f"serving.{role}", spec, False, STEP_SERVING, settings.lws_name(role)) for role, spec in roles]
    return [
        Workload.of(
            cube, key, s.topology, s.replicas, s.priority, priorities[s.priority], gang=gang, step=step, name=name
        )
        for key, s, gang, step, name in wanted
    ]
