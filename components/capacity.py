"""TPU capacity: the workload policy and one reservation-bound node pool per 4x4x4 cube (SPEC 4-5)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from components.base import Component
from components.cluster import CLOUD_PLATFORM_SCOPE, node_network_config
from components.model.settings import Settings

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
_CONSUME = {"SPECIFIC": "SPECIFIC_RESERVATION", "ANY": "ANY_RESERVATION", "NONE": "NO_RESERVATION"}


def reservation_affinity(settings: Settings) -> dict[str, object]:
    r = settings.tpu.reservation
    affinity: dict[str, object] = {"consume_reservation_type": _CONSUME[r.consume_type]}
    if r.consume_type == "SPECIFIC":
        path = f"projects/{settings.reservation_project}/reservations/{r.name}"
        if r.block:  # one block of the reservation, as the codelab binds it
            path += f"/reservationBlocks/{r.block}"
        affinity.update(key=RESERVATION_KEY, values=[path])
    return affinity


class TpuCapacity(Component):
    """`tpu.cubes` node pools of `tpu.cubeTopology`, placed by one HIGH_THROUGHPUT workload policy.

    The pools reference the cluster and the policy only through Outputs and not each other, so
    Pulumi creates them in parallel and `pulumi destroy` deletes them before the policy and cluster.
    """

    def __init__(
        self,
        name: str,
        settings: Settings,
        cluster: gcp.container.Cluster,
        node_service_account: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
        after: Sequence[pulumi.Resource] = (),
    ) -> None:
        """`after`: what the pools (not the policy) wait for, and so what `pulumi destroy` deletes after them."""
        super().__init__("gke-tpu-slicing:capacity:TpuCapacity", name, opts)
        tpu = settings.tpu
        self.policy = gcp.compute.ResourcePolicy(
            f"{name}-policy",
            name=tpu.workload_policy_name,
            project=settings.project,
            region=settings.region,
            workload_policy={
                "type": "HIGH_THROUGHPUT",
                "accelerator_topology": tpu.cube_topology,
                "accelerator_topology_mode": tpu.accelerator_topology_mode,
            },
            # Every field of a resource policy is ForceNew and the name is fixed: delete first. Pulumi
            # then also replaces the pools (their placement_policy is ForceNew) before deleting it.
            # cluster.protect covers the capacity too: losing a pool (or the policy it is placed by)
            # stops every slice on its cube, and recreating it waits for a cube of reserved VMs in one placement.
            opts=self.child(delete_before_replace=True, protect=settings.cluster.protect),
        )
        self.pools = [
            gcp.container.NodePool(
                f"{name}-{tpu.pool_name(i)}",
                name=tpu.pool_name(i),
                project=settings.project,
                location=settings.region,
                cluster=cluster.id,
                node_locations=[settings.zone],
                node_count=tpu.cube.vms,
                placement_policy={"type": "COMPACT", "policy_name": self.policy.name},
                node_config={
                    "machine_type": tpu.machine_type,
                    "service_account": node_service_account,
                    "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
                    "workload_metadata_config": {"mode": "GKE_METADATA"},
                    "reservation_affinity": reservation_affinity(settings),
                },
                # In place, never a replacement (components/cluster.py node_network_config).
                network_config=node_network_config(settings),
                # placement_policy, reservation_affinity and service_account are ForceNew; the name is fixed.
                opts=self.child(depends_on=list(after), delete_before_replace=True, protect=settings.cluster.protect),
            )
            for i in range(tpu.cubes)
        ]
        self.pool_names = [p.name for p in self.pools]
        self.register_outputs({"workloadPolicy": self.policy.self_link, "pools": self.pool_names})
