"""TPU capacity: the workload policy and one reservation-bound node pool per 4x4x4 cube."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from components.base import Component
from components.cluster import CLOUD_PLATFORM_SCOPE, node_network_config
from components.model.keys import RESERVATION_KEY, SUB_BLOCK_LABEL
from components.model.reservation import Assignment
from components.model.settings import Settings

_CONSUME = {"SPECIFIC": "SPECIFIC_RESERVATION", "ANY": "ANY_RESERVATION", "NONE": "NO_RESERVATION"}


def reservation_path(settings: Settings, sub_block: str | None = None) -> str:
    """What a pool's reservation affinity names: the reservation, its block, or one sub-block of it.

    The sub-block form is xpk's (src/xpk/core/reservation.py: RESERVATION/reservationBlocks/BLOCK/
    reservationSubBlocks/SUB_BLOCK), under the same `projects/P/reservations/` prefix as the block path.
    The provider sends `values` as given and reads back GKE's list unchanged (node_config.go
    expandNodeConfig / flattenGKEReservationAffinity): no normalization on its side.
    """
    r = settings.tpu.reservation
    path = f"projects/{settings.reservation_project}/reservations/{r.name}"
    if r.block:  # one block of the reservation, as the codelab binds it
        path += f"/reservationBlocks/{r.block}"
        if sub_block:
            path += f"/reservationSubBlocks/{sub_block}"
    return path


def reservation_affinity(settings: Settings, sub_block: str | None = None) -> dict[str, object]:
    r = settings.tpu.reservation
    affinity: dict[str, object] = {"consume_reservation_type": _CONSUME[r.consume_type]}
    if r.consume_type == "SPECIFIC":
        affinity.update(key=RESERVATION_KEY, values=[reservation_path(settings, sub_block)])
    return affinity


def placement_policy(settings: Settings, policy_name: pulumi.Input[str]) -> dict[str, object]:
    """What GKE stores for a tpu7x pool placed by a workload policy: policyName and tpuTopology, no type.

    vllm-project/ci-infra#547 (verified on a live cluster): "the API stored policyName and tpuTopology
    with no type". terraform-provider-google-beta resource_container_node_pool.go: `type` is Required
    (an empty string is a value, and expandNodePool sends it as omitted), `tpu_topology` Optional, and
    flattenNodePool reads all three back. Declaring "" and the cube topology leaves nothing to differ.
    `tpu_topology` beside `policy_name` is accepted (ci-infra runs such pools; #547's probe came up RUNNING);
    xpk leaves it out with a workload policy (src/xpk/core/nodepool.py, 968cf324) without naming a refusal.
    Kept: it is the policy's own accelerator topology (tests/test_foundation.py has the evidence).
    """
    return {"type": "", "policy_name": policy_name, "tpu_topology": settings.tpu.cube_topology}


# node_config.go: advanced_machine_features is Optional, ForceNew, not Computed, and flattened whenever GKE
# returns it; GKE turns SMT off on TPU hosts and reports threads_per_core back (vllm-project/ci-infra
# terraform/gcp_old/tpu-inference/k8s/workers.tf, `ignore_changes`), so an undeclared block would read as
# "remove it" = replace the pool. The bridge drops ignored paths from the provider's diff
# (pulumi-terraform-bridge pkg/tfshim/sdk-v2/instance_diff.go processIgnoreChanges).
POOL_IGNORE_CHANGES = ["nodeConfig.advancedMachineFeatures"]


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
        sub_blocks: Assignment | None = None,
    ) -> None:
        """`after`: what the pools (not the policy) wait for, and so what `pulumi destroy` deletes after them.

        `sub_blocks`: the cube-to-sub-block mapping read at preview; None binds every pool to the block.
        """
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
        mapping = sub_blocks.mapping() if sub_blocks is not None else {}
        self.sub_blocks = {tpu.pool_name(i): mapping.get(tpu.pool_name(i)) for i in range(tpu.cubes)}
        self.pools = [
            gcp.container.NodePool(
                f"{name}-{pool}",
                name=pool,
                project=settings.project,
                location=settings.region,
                cluster=cluster.id,
                node_locations=[settings.zone],
                node_count=tpu.cube.vms,
                placement_policy=placement_policy(settings, self.policy.name),
                node_config={
                    "machine_type": tpu.machine_type,
                    "service_account": node_service_account,
                    "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
                    "workload_metadata_config": {"mode": "GKE_METADATA"},
                    "reservation_affinity": reservation_affinity(settings, sub_block),
                    **({"labels": {SUB_BLOCK_LABEL: sub_block}} if sub_block else {}),
                },
                # In place, never a replacement (components/cluster.py node_network_config).
                network_config=node_network_config(settings),
                # placement_policy.policy_name, reservation_affinity, service_account: ForceNew; the name is fixed.
                opts=self.child(
                    depends_on=list(after),
                    delete_before_replace=True,
                    protect=settings.cluster.protect,
                    ignore_changes=POOL_IGNORE_CHANGES,
                ),
            )
            for pool, sub_block in self.sub_blocks.items()
        ]
        self.pool_names = [p.name for p in self.pools]
        self.register_outputs(
            {"workloadPolicy": self.policy.self_link, "pools": self.pool_names, "subBlocks": self.sub_blocks}
        )
