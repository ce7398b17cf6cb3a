"""Settings of the TPU capacity: the machine type, the cubes, the reservation and its
block, the workload policy and the TPU pools."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from components.model import geometry
from components.model.checks import (
    NODE_POOL_NAME_MAX,
    Model,
    SettingError,
    compute_name,
    gce_name,
    parse_topology,
    project_id,
    raise_all,
)
from components.model.geometry import Topology


class ReservationSettings(Model):
    name: str | None = None
    project: str | None = None  # defaults to the stack's project
    block: str = "block-0"  # "" = the whole reservation, not one block
    consume_type: Literal["SPECIFIC", "ANY", "NONE"] = "SPECIFIC"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return None if v is None else compute_name(v, "a Compute Engine reservation name")

    @field_validator("block")
    @classmethod
    def _block(cls, v: str) -> str:
        return v if v == "" else compute_name(v, 'a reservation block name (or "" for the whole reservation)')

    @field_validator("project")
    @classmethod
    def _project(cls, v: str | None) -> str | None:
        return None if v is None else project_id(v)


class TpuSettings(Model):
    machine_type: str = "tpu7x-standard-4t"
    cube_topology: str = "4x4x4"
    cubes: int = Field(2, ge=0)
    workload_policy_name: str = "superslice-policy"
    accelerator_topology_mode: Literal["PROVISION_ONLY", "AUTO_CONNECT"] = "PROVISION_ONLY"
    pool_prefix: str = "tpu7-pool"
    reservation: ReservationSettings = Field(default_factory=dict)
    # Pins cube i (pool <prefix>-<i+1>) to sub-block subBlocks[i] of tpu.reservation.block; unset: the
    # program picks (components/model/reservation.py). Checked against the reservation at preview.
    sub_blocks: list[str] | None = None

    @field_validator("sub_blocks")
    @classmethod
    def _sub_blocks(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        for name in v:
            compute_name(name, "reservation sub-block names")
        dupes = sorted({n for n in v if v.count(n) > 1})
        if dupes:
            raise ValueError(f"distinct sub-block names, one per cube ({', '.join(dupes)} repeated)")
        return v

    @field_validator("machine_type")
    @classmethod
    def _machine(cls, v: str) -> str:
        sliceable = geometry.sliceable_machine_types()
        if v not in geometry.SYSTEMS:
            raise ValueError(f"a TPU machine type with known chips per VM: {', '.join(sliceable)}")
        if v not in sliceable:
            raise ValueError(f"a machine type that supports dynamic slicing: {', '.join(sliceable)}")
        return v

    _topo = field_validator("cube_topology")(classmethod(lambda cls, v: parse_topology(v)))

    @field_validator("workload_policy_name")
    @classmethod
    def _policy(cls, v: str) -> str:
        return gce_name(v, 63, "a GCE resource policy name")

    @field_validator("pool_prefix")
    @classmethod
    def _pool(cls, v: str) -> str:
        # Pools are named <prefix>-<n>: the longest name is checked against tpu.cubes below.
        return gce_name(v, NODE_POOL_NAME_MAX - 2, "a node pool name prefix")

    @model_validator(mode="after")
    def _consistent(self) -> TpuSettings:
        errors = []
        system = geometry.SYSTEMS[self.machine_type]
        assert system.cube is not None
        allowed = system.partitions(system.cube)
        if Topology.parse(self.cube_topology) not in allowed:
            errors.append(
                SettingError(
                    "cubeTopology",
                    self.cube_topology,
                    f"one node pool's ICI block on {self.machine_type}: {', '.join(str(t) for t in allowed)}",
                )
            )
        r = self.reservation
        if self.cubes > 0 and r.consume_type == "SPECIFIC" and not r.name:
            errors.append(
                SettingError(
                    "reservation.name", r.name, "the name of the TPU reservation (required when tpu.cubes > 0)"
                )
            )
        if self.sub_blocks is not None:
            if r.consume_type != "SPECIFIC" or not r.block:
                errors.append(
                    SettingError(
                        "subBlocks",
                        self.sub_blocks,
                        "only with a SPECIFIC reservation and one tpu.reservation.block (sub-blocks belong to a block)",
                    )
                )
            elif len(self.sub_blocks) != self.cubes:
                errors.append(
                    SettingError(
                        "subBlocks",
                        self.sub_blocks,
                        f"one sub-block per cube: {self.cubes} names for tpu.cubes = {self.cubes} "
                        f"(got {len(self.sub_blocks)}); cube i runs on subBlocks[i]",
                    )
                )
        if self.accelerator_topology_mode == "PROVISION_ONLY" and r.consume_type != "SPECIFIC":
            errors.append(
                SettingError(
                    "reservation.consumeType",
                    r.consume_type,
                    "SPECIFIC: acceleratorTopologyMode PROVISION_ONLY needs a specific reservation",
                )
            )
        longest = self.pool_name(self.cubes - 1) if self.cubes > 0 else ""
        if len(longest) > NODE_POOL_NAME_MAX:
            errors.append(
                SettingError(
                    "poolPrefix",
                    self.pool_prefix,
                    f"at most {NODE_POOL_NAME_MAX - len(longest) + len(self.pool_prefix)} characters with tpu.cubes = "
                    f"{self.cubes}: the last pool, {longest!r}, must be a GKE node pool name of at most "
                    f"{NODE_POOL_NAME_MAX} characters",
                )
            )
        raise_all(errors)
        return self

    @cached_property
    def system(self) -> geometry.TpuSystem:
        return geometry.system(self.machine_type)

    @cached_property
    def cube(self) -> geometry.Cube:
        return geometry.Cube(self.system, Topology.parse(self.cube_topology))

    def pool_name(self, index: int) -> str:
        return f"{self.pool_prefix}-{index + 1}"
