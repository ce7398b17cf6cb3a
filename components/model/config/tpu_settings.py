"""Settings of the TPU capacity: the machine type, the cubes, the reservation and its
block, the workload policy and the TPU pools."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from components.model.config.checks import (
    NODE_POOL_NAME_MAX,
    Model,
    SettingError,
    compute_name,
    gce_name,
    parse_topology,
    raise_all,
)
from components.model.config.rules import (
    DYNAMIC_SLICING,
    GCE_NAMES,
    NODE_POOL_LIMIT,
    RESERVATION_API,
    RESERVATION_BLOCK_API,
    TF_POLICY,
    TPU7X,
    ProjectId,
    Rule,
    at_least,
)
from components.model.tpu import geometry
from components.model.tpu.geometry import Topology


class ReservationSettings(Model):
    name: Annotated[
        str | None,
        AfterValidator(lambda v: v if v is None else compute_name(v, "a Compute Engine reservation name")),
        Rule(
            "a Compute Engine reservation name (RFC 1035, 1-63 characters) or its numeric resource ID; required "
            "when tpu.cubes > 0 with SPECIFIC",
            f"{RESERVATION_API}; {GCE_NAMES}",
            refused="my reservation",
            accepted="r" * 63,
        ),
    ] = Field(None, description="the reservation the pools consume")
    project: Annotated[
        ProjectId | None,
        Rule(
            "a project ID, or unset for the stack's project; another project only for a whole reservation "
            '(block: ""): GKE does not support a block shared from another project',
            refused="shared-resv-project",
            accepted="my-tpu-project",
            context={"tpu": {"reservation": {"block": "block-0"}}},
        ),
    ] = Field(None, description="the project owning the reservation (shared reservations)")
    block: Annotated[
        str | None,
        AfterValidator(lambda v: v and compute_name(v, 'a reservation block name (or "" for the whole reservation)')),
        Rule(
            "unset (read at preview), a reservation block name (RFC 1035, 1-63 characters, named by GCE) or its "
            'numeric resource ID, or "" for the whole reservation; the preview reads the reservation, so a block '
            "that does not exist is reported",
            RESERVATION_BLOCK_API,
            refused="block 0",
            accepted="",
        ),
    ] = Field(
        None,
        description="the reservation block the pools consume; unset: the block the running pools are on, else the "
        "first (by name) with room for the cubes, read at preview; the whole reservation when shared from another "
        "project",
    )
    consume_type: Annotated[
        Literal["SPECIFIC", "ANY", "NONE"],
        Rule(
            "SPECIFIC, ANY or NONE (ANY and NONE need acceleratorTopologyMode AUTO_CONNECT)",
            "hashicorp/terraform-provider-google-beta google-beta/services/container/node_config.go "
            f"(reservation_affinity.consume_reservation_type); {DYNAMIC_SLICING}",
            refused="SOME",
            accepted="NONE",
            context={"tpu": {"acceleratorTopologyMode": "AUTO_CONNECT"}, "zone": "us-central1-ai1a"},
        ),
    ] = Field("SPECIFIC", description="the pools' reservation affinity")


_SLICING = f"{TPU7X}; {DYNAMIC_SLICING}"


class TpuSettings(Model):
    machine_type: Annotated[
        str,
        Rule(
            "a TPU machine type that supports dynamic slicing: tpu7x-standard-4t",
            _SLICING,
            "workload-policy",
            "tpu7x-standard-1t",
            "tpu7x-standard-4t",
        ),
    ] = Field(
        "tpu7x-standard-4t", description="the TPU VM type (the TPU facts table, `components/model/tpu/geometry.py`)"
    )
    cube_topology: Annotated[
        str,
        AfterValidator(parse_topology),
        Rule(
            "a partition of the machine's 4x4x4 cube (4x4x4, 2x4x4, 2x2x4, 2x2x2, 2x2x1 on tpu7x); a smaller cube "
            "takes sub-slices only (GKE stitches super-slices from 4x4x4 cubes)",
            _SLICING,
            "workload-policy",
            "4x4x",
            "2x2x1",
            {
                "demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
                "serving": {"enabled": False},
            },
        ),
    ] = Field("4x4x4", description="one node pool's ICI block and the workload policy's accelerator topology")
    cubes: Annotated[
        int,
        at_least(
            0,
            " (0 = no TPU pools, and zone set: there is no reservation to read it from)",
            change="cubes",
            context={"demos": {"superslicing": {"enabled": False}}, "zone": "us-central1-ai1a"},
        ),
    ] = Field(
        2, ge=0, description="TPU node pools `<poolPrefix>-1..N`, the ClusterQueue's TPU quota, the super-slice ceiling"
    )
    workload_policy_name: Annotated[
        str,
        AfterValidator(lambda v: gce_name(v, 63, "a GCE resource policy name")),
        Rule("a GCE resource policy name: RFC 1035, 1-63 characters", GCE_NAMES, "workload-policy", "Policy", "a" * 63),
    ] = Field("superslice-policy", description="name of the `HIGH_THROUGHPUT` workload policy")
    accelerator_topology_mode: Annotated[
        Literal["PROVISION_ONLY", "AUTO_CONNECT"],
        Rule(
            "PROVISION_ONLY (needs a SPECIFIC reservation) or AUTO_CONNECT",
            f"{TF_POLICY} (workload_policy.accelerator_topology_mode)",
            "workload-policy",
            "AUTO",
            "AUTO_CONNECT",
        ),
    ] = Field("PROVISION_ONLY", description="how the workload policy connects the chips")
    # Pools are named <prefix>-<n>: the longest name is checked against tpu.cubes below.
    pool_prefix: Annotated[
        str,
        AfterValidator(lambda v: gce_name(v, NODE_POOL_NAME_MAX - 2, "a node pool name prefix")),
        Rule(
            "a GKE node pool name prefix: RFC 1035, such that the last pool, <prefix>-<tpu.cubes>, has at most "
            "40 characters",
            f"{GCE_NAMES}; {NODE_POOL_LIMIT}",
            "pool-prefix",
            "p" * 39,
            "p" * 38,
        ),
    ] = Field("tpu7-pool", description="TPU node pool names")
    reservation: Annotated[ReservationSettings, Rule(change="reservation")] = Field(default_factory=dict)
    # Unset: components/model/tpu/reservation.py picks; checked against the reservation at preview.
    sub_blocks: Annotated[
        list[str] | None,
        Rule(
            "unset, or one distinct sub-block name (RFC 1035, 1-63 characters) or numeric resource ID per cube, "
            "with a SPECIFIC reservation and one tpu.reservation.block",
            f"{RESERVATION_BLOCK_API}; googleapis/googleapis@f8291d2b google/cloud/compute/v1/compute.proto "
            "(ReservationSubBlock.name)",
            "sub-blocks",
            ["sb-1"],
            ["sb-1", "18446744073709551615"],
        ),
    ] = Field(
        None,
        description="pins cube i to sub-block subBlocks[i] of the block (unset: the program picks healthy free ones)",
    )

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
            if r.consume_type != "SPECIFIC" or r.block == "":
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

    @property
    def chips(self) -> int:
        """The chips the TPU node pools provide."""
        return self.cubes * self.cube.chips

    def pool_name(self, index: int) -> str:
        return f"{self.pool_prefix}-{index + 1}"

    @property
    def pool_names(self) -> list[str]:
        """The stack's TPU pools, one a cube, in cube order."""
        return [self.pool_name(i) for i in range(self.cubes)]
