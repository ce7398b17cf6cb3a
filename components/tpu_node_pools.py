"""TPU capacity: the workload policy and one reservation-bound node pool per 4x4x4 cube."""

from typing import NotRequired, TypedDict

import pulumi
import pulumi_gcp as gcp

from components.cluster import node_identity, node_network_config
from components.component import Component
from components.model.config.settings import Settings
from components.model.diff import readback
from components.model.keys import RESERVATION_KEY, SUB_BLOCK_LABEL

_CONSUME = {"SPECIFIC": "SPECIFIC_RESERVATION", "ANY": "ANY_RESERVATION", "NONE": "NO_RESERVATION"}


def reservation_path(settings: Settings, sub_block: str | None = None) -> str:
    """What a pool's reservation affinity names: the reservation, its block, or one sub-block of it.

    The sub-block form is xpk's (src/xpk/core/reservation.py: RESERVATION/reservationBlocks/BLOCK/
    reservationSubBlocks/SUB_BLOCK), under the same `projects/P/reservations/` prefix as the block path; read
    back unchanged (model/diff/readback.py).
    """
    r = settings.tpu.reservation
    path = f"projects/{settings.reservation_project}/reservations/{r.name}"
    if r.block:  # one block of the reservation, as the codelab binds it
        path += f"/reservationBlocks/{r.block}"
        if sub_block:
            path += f"/reservationSubBlocks/{sub_block}"
    return path


class ReservationAffinity(TypedDict):
    consume_reservation_type: str
    """SPECIFIC_RESERVATION, ANY_RESERVATION or NO_RESERVATION."""
    key: NotRequired[str]
    """The reservation's key (compute.googleapis.com/reservation-name), with a specific reservation only."""
    values: NotRequired[list[str]]
    """The reservation, block or sub-block path (reservation_path), with a specific reservation only."""


def reservation_affinity(settings: Settings, sub_block: str | None = None) -> ReservationAffinity:
    r = settings.tpu.reservation
    affinity = ReservationAffinity(consume_reservation_type=_CONSUME[r.consume_type])
    if r.consume_type == "SPECIFIC":
        affinity.update(key=RESERVATION_KEY, values=[reservation_path(settings, sub_block)])
    return affinity


def placement_policy(cube_topology: str, policy_name: pulumi.Input[str]) -> dict[str, object]:
    """What GKE stores for a tpu7x pool placed by a workload policy: policyName and tpuTopology, no type.

    Declaring "" and the cube topology leaves nothing to differ (model/diff/readback.py, "placementPolicy").
    `tpu_topology` beside `policy_name` is accepted (ci-infra runs such pools; #547's probe came up RUNNING);
    xpk leaves it out with a workload policy (src/xpk/core/nodepool.py, 968cf324) without naming a refusal.
    Kept: it is the policy's own accelerator topology (tests/test_tpu_node_pools.py has the evidence).
    """
    return {"type": "", "policy_name": policy_name, "tpu_topology": cube_topology}


# What GKE stores otherwise and a difference would replace the pool (SMT off on TPU hosts): model/diff/readback.py.
POOL_IGNORE_CHANGES = readback.ignored("gcp:container/nodePool:NodePool")


class TpuPoolArgs(TypedDict):
    name: str
    """The node pool's name."""
    reservation_affinity: ReservationAffinity
    """The reservation (block, sub-block) its nodes consume."""
    sub_block: NotRequired[str]
    """The reservation sub-block it is bound to, labelled on its nodes; none: bound to the block."""


class TpuCapacityArgs(TypedDict):
    project: str
    """The project of the policy and the pools."""
    region: str
    """The regional cluster's region."""
    zone: str
    """The zone of the reservation, where every pool's nodes run."""
    cluster: pulumi.Input[str]
    """The cluster's id."""
    node_service_account: pulumi.Input[str]
    """The email of the service account the nodes run as."""
    policy_name: str
    """The workload policy's name."""
    cube_topology: str
    """The accelerator topology of one pool: a cube (4x4x4)."""
    accelerator_topology_mode: str
    """The workload policy's accelerator topology mode."""
    machine_type: str
    """The TPU machine type (tpu7x-standard-4t)."""
    nodes_per_pool: int
    """The VMs of one cube."""
    pools: list[TpuPoolArgs]
    """One node pool per cube."""
    private_nodes: bool
    """Nodes without external IPs."""
    protect: bool
    """Pulumi refuses any update or destroy that would delete or replace the policy or a pool."""


class TpuCapacity(Component):
    """`tpu.cubes` node pools of `tpu.cubeTopology`, placed by one HIGH_THROUGHPUT workload policy.

    The pools reference the cluster and the policy only through Outputs and not each other, so
    Pulumi creates them in parallel and `pulumi destroy` deletes them before the policy and cluster.
    """

    def __init__(self, name: str, args: TpuCapacityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:capacity:TpuCapacity", name, opts)
        project, region, protect = args["project"], args["region"], args["protect"]
        self.policy = gcp.compute.ResourcePolicy(
            f"{name}-policy",
            name=args["policy_name"],
            project=project,
            region=region,
            workload_policy={
                "type": "HIGH_THROUGHPUT",
                "accelerator_topology": args["cube_topology"],
                "accelerator_topology_mode": args["accelerator_topology_mode"],
            },
            # The workload policy's fields are ForceNew (model/diff/gcp_force_new.py), not `name`: the provider would
            # PATCH a policy of the new name, which does not exist (resource_compute_resource_policy.go L876-891), so
            # a new name replaces it too. Delete first, the name being fixed; Pulumi then also replaces the pools
            # (their placement_policy is ForceNew) before deleting it.
            # cluster.protect covers the capacity too: losing a pool (or the policy it is placed by)
            # stops every slice on its cube, and recreating it waits for a cube of reserved VMs in one placement.
            opts=self.child(delete_before_replace=True, replace_on_changes=["name"], protect=protect),
        )
        # pool -> its sub-block (None: bound to the block)
        self.sub_blocks = {p["name"]: p.get("sub_block") for p in args["pools"]}
        self.pools = {
            pool["name"]: gcp.container.NodePool(
                f"{name}-{pool['name']}",
                name=pool["name"],
                project=project,
                location=region,
                cluster=args["cluster"],
                node_locations=[args["zone"]],
                node_count=args["nodes_per_pool"],
                placement_policy=placement_policy(args["cube_topology"], self.policy.name),
                node_config={
                    "machine_type": args["machine_type"],
                    **node_identity(args["node_service_account"]),
                    "reservation_affinity": pool["reservation_affinity"],
                    **({"labels": {SUB_BLOCK_LABEL: pool["sub_block"]}} if pool.get("sub_block") else {}),
                },
                # In place, never a replacement (components/cluster.py node_network_config).
                network_config=node_network_config(args["private_nodes"]),
                # ForceNew (model/diff/gcp_force_new.py): policy name, reservation, service account; a fixed name.
                opts=self.child(delete_before_replace=True, protect=protect, ignore_changes=POOL_IGNORE_CHANGES),
            )
            for pool in args["pools"]
        }
        self.pool_names = [p.name for p in self.pools.values()]
        self.register_outputs(
            {"workloadPolicy": self.policy.self_link, "pools": self.pool_names, "subBlocks": self.sub_blocks}
        )
