"""The fake reservation the reservation tests read, and what they read off a run: pools, their sub-blocks.

The fake answers the invokes in the wire shape of pulumi-gcp 10.2's result types (GetReservationResult,
GetReservationBlockResult, GetReservationSubBlockResult, GetClusterResult: camelCase fields, nested
results as one-item lists), and misses the way terraform-provider-google-beta's data sources do
(components/cli/mocks.py FakeReservation).
"""

from __future__ import annotations

import copy
from typing import Any

from components.cli.mocks import FakeReservation, healthy_sub_block
from tests.graph_queries import tpu_pools
from tests.harness import Mocks, Run, run_program

BLOCK_PATH = "projects/my-tpu-project/reservations/tpu7x-reservation/reservationBlocks/block-0"


def fake(
    count: int,
    running: Run | None = None,
    *,
    exists: bool = True,
    blocks: tuple = ("block-0",),
    zone: str | None = "us-central1-ai1a",
    **changes: Any,
) -> FakeReservation:
    """`count` healthy free sub-blocks sb-1..; `changes` patches one by name (wire-shape fields); GKE runs the
    pools of `running` (in their zone); `exists=False` or `blocks=()`: the reservation or its block is missing; `zone`:
    where the reservation is (None: in every zone asked)."""
    reservation = FakeReservation(
        {f"sb-{i}": healthy_sub_block(f"sb-{i}") for i in range(1, count + 1)}, exists, blocks, zone=zone
    )
    for name, patch in changes.items():
        name = name.replace("_", "-")
        reservation.sub_blocks[name] = deep_merge(reservation.sub_blocks[name], patch)
    if running is not None:
        reservation.cluster_pools = [
            {
                "name": name,
                "nodeLocations": inputs["nodeLocations"],
                "nodeConfigs": [{"reservationAffinities": [inputs["nodeConfig"]["reservationAffinity"]]}],
            }
            for name, inputs in pools(running).items()
        ]
    return reservation


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, list) and value and isinstance(value[0], dict) and isinstance(out.get(key), list):
            out[key] = [{**out[key][0], **value[0]}]
        else:
            out[key] = value
    return out


DEGRADED = {"healthInfos": [{"healthStatus": "DEGRADED", "degradedHostCount": 2}]}
IN_USE = {"inUseCount": 16}
MAINTENANCE = {"reservationSubBlockMaintenances": [{"maintenancePendingCount": 3}]}


def run_with(reservation: FakeReservation, overrides: dict[str, Any] | None = None) -> Run:
    return run_program(overrides, mocks=Mocks(reservation=reservation))


def pools(run: Run) -> dict[str, dict[str, Any]]:
    return {r.inputs["name"]: r.inputs for r in tpu_pools(run)}


def on(run: Run, block: str = "block-0") -> dict[str, str]:
    """Pool name -> the sub-block of `block` its reservation affinity names."""
    out = {}
    for name, inputs in pools(run).items():
        (value,) = inputs["nodeConfig"]["reservationAffinity"]["values"]
        assert value.startswith(BLOCK_PATH.replace("block-0", block) + "/reservationSubBlocks/"), value
        out[name] = value.rsplit("/", 1)[1]
        assert inputs["nodeConfig"]["labels"] == {"gke-tpu-slicing/reservation-sub-block": out[name]}
    return out
