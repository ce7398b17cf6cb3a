"""The building blocks: the package's components a team composes on a cluster of its own (docs/package.md).

A block's inputs (in the settings' names and sections where it has the program's keys: the generated `tpu`, `kueue`
types) are put into the configuration's tree with everything the block does not declare turned off, so the
settings model validates them as the whole stack's, with the program's one-line errors naming the input, before
any resource. The block then declares the program's own components from the args the program builds
(components/graph_args.py): the same resources for the same values, through the caller's Kubernetes provider.
"""

from typing import Any, NotRequired, TypedDict

import pulumi

from components.addons import deep_merge
from components.graph_args import capacity_args, queues_args
from components.kueue_objects import SliceQueues as ProgramSliceQueues
from components.model.config.checks import PROJECT, ConfigError
from components.model.config.root_settings import Settings
from components.package import NAME
from components.package.inputs import problem_paths, problems_text, settings_from
from components.package.stack_args import KueueSettings, TpuSettings
from components.preflight import clock, place_capacity
from components.teardown import SliceGates, SliceGatesArgs
from components.tpu_node_pools import TpuCapacity as ProgramTpuCapacity

# What a block leaves to the existing cluster: nothing else of the stack is declared, so none of its checks apply.
_NOTHING_ELSE = {
    "demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
    "serving": {"enabled": False},
    "observability": {"enabled": False},
    # The cluster is the caller's: its control plane's access is not this block's to check.
    "cluster": {"controlPlane": {"privateEndpoint": True, "dnsEndpoint": True}},
}


def validated(tree: dict[str, Any], renames: dict[str, str]) -> tuple[Settings | None, list[tuple[str, str]]]:
    """The settings of a block's inputs put into the configuration's tree, or its problems as the block's inputs
    name them (`renames`: a settings key -> the block's input that gives it)."""
    try:
        return settings_from(deep_merge(_NOTHING_ELSE, tree), now=clock()), []
    except ConfigError as err:
        problems = []
        for path, line in problem_paths(err):
            for key, input_ in renames.items():
                if path == key or path.startswith(f"{key}."):
                    path, line = input_ + path[len(key) :], line.replace(f"{PROJECT}:{key}", f"{PROJECT}:{input_}", 1)
            problems.append((path, line))
        return None, problems


def settings_or_stop(tree: dict[str, Any], renames: dict[str, str]) -> Settings:
    settings, problems = validated(tree, renames)
    if settings is None:
        raise pulumi.RunError(problems_text("invalid inputs", [line for _, line in problems]))
    return settings


class TpuCapacityArgs(TypedDict):
    project: str
    """The project of the cluster, the workload policy and the node pools."""
    zone: str
    """The reservation's zone, where the pools' nodes run (us-central1-ai1a); the cluster is in its region."""
    tpu: TpuSettings
    """The machine type, the cubes (a node pool each), the reservation and its block: the program's `tpu`."""
    cluster: pulumi.Input[str]
    """The existing cluster's id (projects/P/locations/REGION/clusters/NAME)."""
    node_service_account: pulumi.Input[str]
    """The email of the service account the TPU nodes run as."""
    kubeconfig: pulumi.Input[str]
    """A kubeconfig for the cluster (kept secret): a pool's teardown gate lists the Slices with it."""
    private_nodes: NotRequired[bool]
    """The cluster's nodes have no external IP (the pools' network config must say the same). Default: false."""
    protect: NotRequired[bool]
    """Pulumi refuses any update or destroy that would delete or replace the policy or a pool. Default: false."""
    drain_timeout_seconds: NotRequired[int]
    """How long a pool's delete waits for its Slices to go (addons.sliceController.drainTimeoutSeconds)."""
    workloads: NotRequired[list[str]]
    """Your queued workloads on the pools, by name: while any is listed, a pool's replacement is refused."""


_CAPACITY_RENAMES = {
    "cluster.privateNodes": "privateNodes",
    "cluster.protect": "protect",
    "addons.sliceController.drainTimeoutSeconds": "drainTimeoutSeconds",
}


def _capacity_tree(args: TpuCapacityArgs) -> dict[str, Any]:
    cluster = {k: args[k] for k in ("private_nodes", "protect") if k in args}  # type: ignore[literal-required]
    tree: dict[str, Any] = {"project": args.get("project"), "zone": args.get("zone"), "tpu": args.get("tpu", {})}
    tree["cluster"] = cluster
    if "drain_timeout_seconds" in args:
        tree["addons"] = {"sliceController": {"drainTimeoutSeconds": args["drain_timeout_seconds"]}}
    return tree


class TpuCapacity(pulumi.ComponentResource):
    """TPU7x capacity on a reservation for an existing regional GKE cluster: one HIGH_THROUGHPUT workload policy,
    one node pool per 4x4x4 cube (each on a sub-block of the reservation's block, read at preview), and one teardown
    gate per pool whose delete waits until no Slice uses it."""

    workload_policy: pulumi.Output[str]
    """The workload policy (self link)."""
    node_pools: pulumi.Output[list[str]]
    """The node pools, one per cube."""
    cube_sub_blocks: pulumi.Output[dict[str, str]]
    """Each pool's reservation sub-block (null: bound to the block)."""

    @staticmethod
    def input_problems(args: TpuCapacityArgs) -> list[tuple[str, str]]:
        return validated(_capacity_tree(args), _CAPACITY_RENAMES)[1]

    def __init__(self, name: str, args: TpuCapacityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        settings = settings_or_stop(_capacity_tree(args), _CAPACITY_RENAMES)
        placed = place_capacity(settings)  # before anything is registered, as the program reads them
        settings, sub_blocks = placed.settings, placed.sub_blocks
        super().__init__(f"{NAME}:index:TpuCapacity", name, {}, opts)
        capacity = ProgramTpuCapacity(
            name,
            capacity_args(settings, sub_blocks, args["cluster"], args["node_service_account"]),
            pulumi.ResourceOptions(parent=self),
        )
        gates = SliceGates(
            f"{name}-teardown",
            SliceGatesArgs(
                kubeconfig=pulumi.Output.secret(args["kubeconfig"]),
                pools=capacity.pools,
                cluster=args["cluster"],
                timeout_seconds=settings.addons.slice_controller.drain_timeout_seconds,
                workloads=list(args.get("workloads", [])),
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.workload_policy = capacity.policy.self_link
        self.node_pools = pulumi.Output.from_input(capacity.pool_names)
        self.cube_sub_blocks = pulumi.Output.from_input(capacity.sub_blocks)  # type: ignore[arg-type]
        self.gates = gates
        self.register_outputs(
            {
                "workloadPolicy": self.workload_policy,
                "nodePools": self.node_pools,
                "cubeSubBlocks": self.cube_sub_blocks,
            }
        )


class TpuShape(TypedDict):
    """The TPU capacity the queues admit onto, as the program's `tpu` keys of the same names."""

    machine_type: NotRequired[str]
    """The TPU VM type (the Topology's host level and the flavor's accelerator label). Default: "tpu7x-standard-4t"."""
    cube_topology: NotRequired[str]
    """One node pool's ICI block (the Topology's partition levels). Default: "4x4x4"."""
    cubes: int
    """The TPU node pools, one per cube: the ClusterQueue's TPU quota unless kueue.tpuQuota sets it."""


class SliceQueuesArgs(TypedDict):
    tpu: TpuShape
    """The TPU capacity the queues admit onto."""
    kueue: NotRequired[KueueSettings]
    """The Kueue objects' names, priorities and quotas, as the program's `kueue` keys. Default: the program's."""
    queued_workloads: NotRequired[int]
    """Your queued workloads: while any runs, a change of an immutable Kueue field is refused at preview."""


def _queues_tree(args: SliceQueuesArgs) -> dict[str, Any]:
    tpu = dict(args.get("tpu", {}))
    # No pool is declared here: the reservation is not this block's (its name only satisfies the pools' rule).
    tpu["reservation"] = {"name": "existing-capacity", "block": ""}
    return {"project": "existing-cluster", "tpu": tpu, "kueue": args.get("kueue", {})}


class SliceQueues(pulumi.ComponentResource):
    """The Kueue objects of TPU7x dynamic slicing on a cluster that runs Kueue and GKE's slice controller: the workload
    namespace, a Topology whose levels follow the cube's partitions, the ResourceFlavor, the slice AdmissionCheck,
    ClusterQueue, LocalQueue and WorkloadPriorityClasses, and a guard that refuses at preview a change Kueue could not
    carry out while workloads are queued."""

    namespace: pulumi.Output[str]
    """The workload namespace (its LocalQueue's)."""
    local_queue: pulumi.Output[str]
    """The LocalQueue workloads name in the kueue.x-k8s.io/queue-name label."""
    cluster_queue: pulumi.Output[str]
    """The ClusterQueue."""
    topology_levels: pulumi.Output[list[str]]
    """The node labels of the Kueue Topology's levels, from the cube down to one host."""

    @staticmethod
    def input_problems(args: SliceQueuesArgs) -> list[tuple[str, str]]:
        return validated(_queues_tree(args), {})[1]

    def __init__(self, name: str, args: SliceQueuesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        settings = settings_or_stop(_queues_tree(args), {})
        super().__init__(f"{NAME}:index:SliceQueues", name, {}, opts)
        queue_args = queues_args(settings, None, None, None)  # type: ignore[arg-type]
        for inherited in ("provider", "kueue", "slice_controller"):  # the caller's provider; Kueue is installed
            queue_args.pop(inherited)  # type: ignore[misc]
        queue_args["queued_workloads"] = int(args.get("queued_workloads", 0))
        queues = ProgramSliceQueues(name, queue_args, pulumi.ResourceOptions(parent=self))
        self.namespace = queues.namespace.metadata.name
        self.local_queue = queues.local_queue.object_name
        self.cluster_queue = queues.cluster_queue.object_name
        self.topology_levels = pulumi.Output.from_input(queues.levels)
        self.queues = queues
        self.register_outputs(
            {
                "namespace": self.namespace,
                "localQueue": self.local_queue,
                "clusterQueue": self.cluster_queue,
                "topologyLevels": self.topology_levels,
            }
        )
