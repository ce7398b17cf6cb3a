"""The whole graph of one stack, declared from its settings: what `__main__.py` runs.

Reads like the architecture: network, cluster, capacity, add-ons, queues, workloads, serving, observability,
exports. A function, not module code, so that the same graph can be declared inside a component.
"""

import pulumi

from components.addons import Addons
from components.capacity import TpuCapacity
from components.cluster import Cluster
from components.identity import NodeIdentity
from components.model.commands import stack_credentials_command
from components.model.deployed import SERVING_SHAPE_OUTPUT, serving_shape
from components.model.settings import Settings
from components.network import Network
from components.observability import Observability
from components.project import ProjectServices
from components.queues import SliceQueues
from components.serving import Serving
from components.stack import (
    check_weights,
    plan_capacity,
    read_deployed_serving,
    read_sub_blocks,
    resolve_cluster_version,
)
from components.teardown import SliceGates
from components.workloads import demo_workloads


def _under(
    opts: pulumi.ResourceOptions | None, own: pulumi.ResourceOptions | None = None
) -> pulumi.ResourceOptions | None:
    """A top-level component's options under the caller's (the package's component as parent); `own` unchanged
    without them, so the program's URNs stay as they are."""
    return own if opts is None else pulumi.ResourceOptions.merge(opts, own)


def declare_stack(settings: Settings, opts: pulumi.ResourceOptions | None = None) -> dict[str, object]:
    """Registers every resource of the stack; returns the stack's outputs, in export order.

    `opts` reach every top-level component (components/package/ passes its component as their parent).
    """
    outputs: dict[str, object] = {}
    sub_blocks = read_sub_blocks(settings)  # the reservation's sub-blocks, read before anything is registered
    check_weights(settings)  # the model's snapshot in the weights bucket, where the preview may read it
    # What serving runs now, from the stack's previous outputs: a smaller role rolls beside its running, bigger set.
    capacity_plan = plan_capacity(settings, sub_blocks, read_deployed_serving(settings))
    # Asks GKE which versions the channel offers now: still before anything is registered.
    cluster_version = resolve_cluster_version(settings)

    services = ProjectServices("project", settings, _under(opts))
    after_apis = pulumi.ResourceOptions(depends_on=services.ready)

    # The VPC, its subnets and firewall call only the Compute API; the AI-zones feature matters from the
    # cluster on (benchmarks: waiting for it put the feature on the modeled critical path).
    network = Network(
        "network", settings, _under(opts, pulumi.ResourceOptions(depends_on=[services.services["compute"]]))
    )
    identity = NodeIdentity("identity", settings, _under(opts, after_apis))
    # Nodes start only once their service account holds its role, or GKE runs them degraded.
    after_identity = pulumi.ResourceOptions(depends_on=[*services.ready, *identity.bindings])
    cluster = Cluster(
        "cluster",
        settings,
        network.network,
        network.tpu_subnet,
        identity.email,
        cluster_version,
        _under(opts, after_identity),
        egress=network.egress_ready,
    )
    # The internal firewall's sources include the pods' range, which GKE allocates with the cluster.
    network.allow_internal(cluster.cluster.cluster_ipv4_cidr)

    # Kubernetes layers: all through the cluster's provider. Add-ons run on the system pool.
    k8s = cluster.provider
    addons = Addons(settings, k8s, opts)
    # The TPU pools wait for nothing in the cluster: they come up while the add-ons install.
    capacity = TpuCapacity(
        "capacity", settings, cluster.cluster, identity.email, _under(opts, after_identity), sub_blocks=sub_blocks
    )
    # One gate per pool, after it: its delete waits until no Slice uses the pool. Workloads wait for the gates
    # and the gates for the slice controller, so `pulumi destroy` (and a pool's delete-first replacement) runs
    # workloads, gate, pool, and the slice controller only after every gate (docs/teardown.md).
    gates = SliceGates(
        "teardown",
        settings,
        cluster.kubeconfig,
        capacity.pools,
        cluster.cluster.id,
        _under(opts, pulumi.ResourceOptions(depends_on=[addons.slice_controller])),
    )
    tpu_ready = [*capacity.pools, *gates.gates]
    queues = SliceQueues(
        "queues", settings, k8s, kueue=addons.kueue, slice_controller=addons.slice_controller, opts=_under(opts)
    )
    demos = demo_workloads(
        settings,
        queues,
        k8s,
        jobset=addons.jobset,
        pools=tpu_ready,
        slice_controller=addons.slice_controller,
        opts=opts,
    )
    serving = (
        Serving(
            "serving",
            settings,
            provider=k8s,
            queues=queues,
            lws=addons.lws,
            inference_extension=addons.inference_extension,
            proxy_subnet=network.proxy_subnet,
            pools=tpu_ready,
            capacity_plan=capacity_plan,
            project_api=services.services["cloudresourcemanager"],
            storage_api=[services.services["storage"]],
            opts=_under(opts),
        )
        if settings.serving.enabled
        else None
    )
    observability = (
        Observability(
            "observability",
            settings,
            provider=k8s,
            kueue=addons.kueue,
            workload_namespace=queues.namespace.metadata.name,
            router=serving.router if serving is not None else None,
            services=services,
            opts=_under(opts),
        )
        if settings.observability.enabled
        else None
    )

    outputs["clusterName"] = cluster.cluster.name
    outputs["clusterEndpoint"] = cluster.cluster.endpoint
    outputs["network"] = network.network.name
    outputs["nodePools"] = capacity.pool_names
    outputs["cubeSubBlocks"] = capacity.sub_blocks  # pool -> reservation sub-block (None: bound to the block)
    outputs["workloadPolicy"] = capacity.policy.self_link
    outputs["kubeconfig"] = cluster.kubeconfig
    outputs["credentialsCommand"] = stack_credentials_command(settings)  # kubectl's context (docs/access.md)
    outputs["kueueTopologyLevels"] = queues.levels
    outputs["capacityPlan"] = capacity_plan.as_dict()
    outputs["demoJobSets"] = {key: demo.jobset.object_name for key, demo in demos.items()}
    if serving is not None:
        outputs["gatewayName"] = serving.gateway.object_name
        outputs["gatewayNamespace"] = queues.namespace.metadata.name
        outputs["servedModelName"] = settings.serving.model_served
        outputs["inferencePool"] = serving.pool_name
        outputs["servingLeaders"] = serving.leaders
        outputs["verifyCommand"] = serving.verify_command
        # Read back by the next run (read_deployed_serving): the shape each role's LeaderWorkerSet now has.
        outputs[SERVING_SHAPE_OUTPUT] = serving_shape(w.workload for w in capacity_plan.workloads)
    if observability is not None and observability.dashboard_url is not None:
        outputs["dashboardUrl"] = observability.dashboard_url
    return outputs
