"""What serving runs now, as the stack's previous update exported it (pure, no Pulumi).

The rollout plan (planner.rollouts) needs the room beside the RUNNING groups of a role; a change that makes a role
smaller (fewer replicas, a smaller topology) would otherwise be planned as if the running set already had the new
settings. So every update exports, per serving role, the shape its LeaderWorkerSet has (SERVING_SHAPE_OUTPUT, built
by `serving_shape` from the planner's own workloads), and the next run reads it back from
its own stack (components/preflight.py `read_deployed_serving`, where the Pulumi sources are cited).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from components.model.tpu.demand import Workload
from components.model.tpu.geometry import Cube, GeometryError, Topology

# The stack output that carries it, read back on the next run.
SERVING_SHAPE_OUTPUT = "servingShape"
# The builtin provider's invoke that reads a stack's outputs (pulumi/pulumi pkg/resource/deploy/builtins.go).
READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"


@dataclasses.dataclass(frozen=True)
class DeployedRole:
    """The shape of a serving role's running LeaderWorkerSet: what its room beside a new set depends on."""

    replicas: int
    topology: Topology
    priority: str
    priority_value: int

    def describe(self) -> str:
        return f"{self.replicas} x {self.topology} ({self.priority})"

    def applied_to(self, cube: Cube, w: Workload) -> Workload:
        """`w` (the role as configured) with the deployed shape: the old set, while the new one rolls in."""
        shape = {"slice": cube.classify(self.topology), "slices": self.replicas}
        return dataclasses.replace(w, **shape, priority=self.priority, priority_value=self.priority_value)

    def same_as(self, w: Workload) -> bool:
        mine = (self.replicas, self.topology, self.priority, self.priority_value)
        return mine == (w.slices, w.topology, w.priority, w.priority_value)


def serving_shape(workloads: Iterable[Workload]) -> dict[str, dict[str, Any]]:
    """The SERVING_SHAPE_OUTPUT value: per serving role (LWS replica groups), its replicas, topology, priority."""
    return {
        w.key: {
            "replicas": w.slices,
            "topology": str(w.topology),
            "priority": w.priority,
            "priorityValue": w.priority_value,
        }
        for w in workloads
        if w.key.startswith("serving.") and not w.gang
    }


def parse_serving_shape(value: Any, cube: Cube) -> tuple[dict[str, DeployedRole], list[str]]:
    """The roles of a previous SERVING_SHAPE_OUTPUT, and a warning per entry that cannot be used.

    None (the first update, or a stack last updated by a version that did not export it) is no roles: the
    plan then counts the running set with the configured settings, as before.
    """
    if value is None:
        return {}, []
    if not isinstance(value, Mapping):
        return {}, [f"the stack's previous {SERVING_SHAPE_OUTPUT} output is not a mapping; it is ignored"]
    roles: dict[str, DeployedRole] = {}
    warnings: list[str] = []
    for key, entry in value.items():
        try:
            replicas, priority_value = entry["replicas"], entry["priorityValue"]
            # Numbers cross the Pulumi wire as doubles.
            if not all(isinstance(n, int | float) and float(n).is_integer() for n in (replicas, priority_value)):
                raise ValueError("replicas and priorityValue must be whole numbers")
            role = DeployedRole(
                int(replicas), Topology.parse(str(entry["topology"])), str(entry["priority"]), int(priority_value)
            )
            cube.classify(role.topology)
            if role.replicas < 1:
                raise ValueError("replicas must be at least 1")
        except (KeyError, TypeError, ValueError, GeometryError) as err:
            warnings.append(
                f"the stack's previous {SERVING_SHAPE_OUTPUT} output for {key} cannot be read ({err}); its rollout is "
                "planned as if the running set had the configured settings"
            )
            continue
        roles[str(key)] = role
    return roles, warnings
