"""The whole graph of one stack, declared from its settings: what `__main__.py` runs.

Reads like the architecture: network, cluster, capacity, add-ons, queues, workloads, serving, observability,
exports. A function, not module code, so that the same graph can be declared inside a component. Each component
takes its own args (a TypedDict of only what it uses), built from the settings here or in components/graph_args.py;
what one component needs of another is an attribute of it (`services.compute_api`, `network.network.id`) passed
in an arg.
"""

import pulumi

from components.addons import (
    HelmAddon,
    HelmAddonArgs,
    InferenceExtensionCrds,
    InferenceExtensionCrdsArgs,
    SliceController,
    SliceControllerArgs,
    chart_values,
)
from components.burst_slots import BurstSlots
from components.cluster import Cluster
from components.demo_jobsets import SlicingJobSet, SlicingJobSetArgs
from components.graph_args import (
    burst_args,
    capacity_args,
    cluster_args,
    keda_args,
    observability_args,
    queues_args,
    serving_args,
)
from components.keda import Keda
from components.kueue_objects import SliceQueues
from components.model.addons.controllers import deep_merge, disruption_budget, ha_values
from components.model.addons.kueue_config import kueue_chart_values, queued_namespaces
from components.model.commands import stack_credentials_command
from components.model.config.addons_settings import HelmAddonSettings
from components.model.config.settings import Settings
from components.model.serving.deployed import SERVING_SHAPE_OUTPUT, serving_shape
from components.network import EgressNames, InternalFirewall, InternalFirewallArgs, Network, NetworkArgs
from components.network_policies import NamespacePolicies, NamespacePoliciesArgs
from components.node_service_account import NodeIdentity, NodeIdentityArgs
from components.observability import Observability
from components.preflight import (
    check_weights,
    place_capacity,
    plan_capacity,
    read_deployed_serving,
    resolve_cluster_version,
)
from components.project_services import ProjectServices, ProjectServicesArgs, apis
from components.serving import Serving
from components.teardown import SliceGates, SliceGatesArgs, workload_keys
from components.tpu_node_pools import TpuCapacity


def _under(
    opts: pulumi.ResourceOptions | None, own: pulumi.ResourceOptions | None = None
) -> pulumi.ResourceOptions | None:
    """A top-level component's options under the caller's; `own` unchanged without them (the program's URNs)."""
    return own if opts is None else pulumi.ResourceOptions.merge(opts, own)


def declare_stack(
    settings: Settings, opts: pulumi.ResourceOptions | None = None, *, offline: bool = False
) -> dict[str, object]:
    """Registers every resource of the stack; returns the stack's outputs, in export order.

    `opts` reach every top-level component (components/package/ passes its component as their parent).
    `offline`: the offline commands' run (components/preflight.py offline_run): GKE's versions are not asked, the
    reservation's answers are the mocks' markers.
    """
    outputs: dict[str, object] = {}
    # The zone and block left to the reservation, and its sub-blocks, read before anything is registered.
    placed = place_capacity(settings, offline)
    settings, sub_blocks = placed.settings, placed.sub_blocks
    check_weights(settings)  # the model's snapshot in the weights bucket, where the preview may read it
    # What serving runs now, from the stack's previous outputs: a smaller role rolls beside its running, bigger set.
    capacity_plan = plan_capacity(settings, sub_blocks, read_deployed_serving(settings))
    # Asks GKE which versions the channel offers now: still before anything is registered.
    cluster_version = resolve_cluster_version(settings, offline)
    project, region, net, c = settings.project, settings.region, settings.network, settings.cluster

    services = ProjectServices("project", ProjectServicesArgs(project=project, apis=list(apis(settings))), _under(opts))
    after_apis = pulumi.ResourceOptions(depends_on=services.ready)

    # The VPC, its subnets and firewall call only the Compute API; the AI-zones feature matters from the
    # cluster on (benchmarks: waiting for it put the feature on the modeled critical path).
    after_compute = pulumi.ResourceOptions(depends_on=[services.compute_api])
    network_args = NetworkArgs(
        project=project,
        region=region,
        network_name=net.network_name,
        mtu=net.mtu,
        tpu_subnet_name=net.tpu_subnet_name,
        tpu_subnet_cidr=net.tpu_subnet_cidr,
        proxy_subnet_name=net.proxy_subnet_name,
        proxy_subnet_cidr=net.proxy_subnet_cidr,
    )
    if (flow_logs := net.flow_logs.log_config()) is not None:
        network_args["flow_logs"] = flow_logs
    if c.private_nodes:  # no external IP: without NAT they could pull nothing but Google-hosted images
        network_args["egress"] = EgressNames(
            router_name=net.router_name, nat_name=net.nat_name, log_filter=net.nat_logs
        )
    network = Network("network", network_args, _under(opts, after_compute))
    identity = NodeIdentity(
        "identity",
        NodeIdentityArgs(project=project, account_id=settings.node_service_account_id, cluster_name=c.name),
        _under(opts, after_apis),
    )
    # Nodes start only once their service account holds its role, or GKE runs them degraded.
    after_identity = pulumi.ResourceOptions(depends_on=[*services.ready, *identity.bindings])
    cluster = Cluster(
        "cluster", cluster_args(settings, network, identity.email, cluster_version), _under(opts, after_identity)
    )
    # The internal firewall's sources include the pods' range, which GKE allocates with the cluster. Under the
    # network component, which declared it before it had a component of its own (its URN is kept).
    InternalFirewall(
        "network",
        InternalFirewallArgs(
            project=project,
            firewall_name=net.firewall_name,
            network=network.network.id,
            tpu_subnet_cidr=net.tpu_subnet_cidr,
            pod_range=cluster.cluster.cluster_ipv4_cidr,
            proxy_subnet_cidr=net.proxy_subnet_cidr,
        ),
        pulumi.ResourceOptions(parent=network, depends_on=[services.compute_api]),
    )

    # Kubernetes layers: all through the cluster's provider. Add-ons run on the system pool.
    provider = cluster.provider
    a = settings.addons

    def helm_addon(name: str, addon: HelmAddonSettings) -> HelmAddon:
        # Each controller: replicas under a PodDisruptionBudget, spread over the system nodes
        # (components/model/addons/controllers.py). Kueue: webhooks only in the workload namespace, the integrations
        # in use, waitForPodsReady and (with observability) the ClusterQueue resource metrics (kueue_config.py).
        extra = deep_merge(ha_values(name, addon.replicas), kueue_chart_values(settings) if name == "kueue" else {})
        chart = {"namespace": addon.namespace, "chart": addon.chart, "version": addon.version}
        budget = disruption_budget(name, addon.replicas)
        args = HelmAddonArgs(**chart, values=chart_values(addon, extra), disruption_budget=budget, provider=provider)
        return HelmAddon(name, args, _under(opts))

    jobset, kueue, lws = helm_addon("jobset", a.jobset), helm_addon("kueue", a.kueue), helm_addon("lws", a.lws)
    # KEDA's objects are to wait for its `ready` (components/keda.py).
    keda_opts = _under(opts, after_apis)  # its role binding on the project calls the IAM API
    keda = Keda("keda", keda_args(settings, provider, services.project_api), keda_opts) if a.keda.enabled else None
    # The slice controller admits Kueue workloads of JobSets: both controllers must be serving first.
    slice_controller = SliceController(
        "slice-controller",
        SliceControllerArgs(
            manifest_url=a.slice_controller.manifest_url,
            queued_namespaces=queued_namespaces(settings),
            feature_gates=list(a.slice_controller.feature_gates),
            replicas=a.slice_controller.replicas,
            provider=provider,
        ),
        _under(opts, pulumi.ResourceOptions(depends_on=[kueue, jobset])),
    )
    inference_extension = InferenceExtensionCrds(
        "inference-extension",
        InferenceExtensionCrdsArgs(version=a.inference_extension.version, provider=provider),
        _under(opts),
    )
    # The TPU pools wait for nothing in the cluster: they come up while the add-ons install.
    capacity = TpuCapacity(
        "capacity",
        capacity_args(settings, sub_blocks, cluster.cluster.id, identity.email),
        _under(opts, after_identity),
    )
    # One gate per pool, after it: its delete waits until no Slice uses the pool. Workloads wait for the gates
    # and the gates for the slice controller, so `pulumi destroy` (and a pool's delete-first replacement) runs
    # workloads, gate, pool, and the slice controller only after every gate (docs/teardown.md).
    gates = SliceGates(
        "teardown",
        SliceGatesArgs(
            kubeconfig=cluster.kubeconfig,
            pools=capacity.pools,
            cluster=cluster.cluster.id,
            timeout_seconds=a.slice_controller.drain_timeout_seconds,
            workloads=workload_keys(settings),
        ),
        _under(opts, pulumi.ResourceOptions(depends_on=[slice_controller])),
    )
    tpu_ready = [*capacity.pools.values(), *gates.gates]
    queues = SliceQueues(
        "queues", queues_args(settings, provider, kueue.chart, slice_controller.manifest), _under(opts)
    )
    # The demos after the JobSet controller, the Kueue objects (the labels name the LocalQueue and priority class;
    # the rest must exist too) and the TPU pools. And after the slice controller:
    # `pulumi destroy` deletes each JobSet (foreground: Pulumi waits for its Kueue Workload) while the controller
    # that holds the Workload's slice finalizer is still running.
    after_demo_needs = pulumi.ResourceOptions(depends_on=[jobset, *tpu_ready, slice_controller, *queues.objects])
    demos = {
        key: SlicingJobSet(
            key,
            SlicingJobSetArgs(
                jobset_name=demo.name,
                machine_type=settings.tpu.machine_type,
                cube_topology=settings.tpu.cube_topology,
                topology=demo.topology,
                replicas=demo.replicas,
                image=settings.demos.image,
                namespace=queues.namespace.metadata.name,
                queue_labels=queues.admission_labels(demo.priority),
                provider=provider,
            ),
            _under(opts, after_demo_needs),
        )
        for key, demo in (("subslicing", settings.demos.subslicing), ("superslicing", settings.demos.superslicing))
        if demo.enabled
    }
    serving = None
    if settings.serving.enabled:
        floor_wait = [lws, *queues.objects, *tpu_ready]  # the LWS controller, the Kueue objects, the pools, the gates
        spec = serving_args(
            settings,
            namespace=queues.namespace.metadata.name,
            queue_labels={
                role: queues.admission_labels(spec.priority) for role, spec in settings.serving.roles().items()
            },
            capacity_plan=capacity_plan,
            provider=provider,
            kueue=kueue.chart,
            inference_extension=inference_extension.crds,
            proxy_subnet=network.proxy_subnet,
            model_servers_wait_for=floor_wait,
            project_api=services.project_api,
            storage_api=services.storage_api,
        )
        serving = Serving("serving", spec, _under(opts))
        burst_priority = settings.burst_priority()
        if burst_priority is not None and keda is not None:  # with autoscaling, KEDA is on (a cross-check)
            BurstSlots(
                "burst",
                burst_args(
                    settings,
                    floors=spec["roles"],
                    queue_labels=queues.admission_labels(burst_priority.name),
                    serving=spec,
                    service_account=serving.service_account.metadata.name,
                    hf_secret=serving.hf_secret.metadata.name if serving.hf_secret else None,
                    model_servers_wait_for=serving.model_servers_wait_for,
                    keda_ready=keda.ready,
                ),
                _under(opts),
            )
    # After serving's policies: the deny never precedes what it must let through (components/network_policies.py).
    NamespacePolicies(
        "workload-network",
        NamespacePoliciesArgs(namespace=queues.namespace.metadata.name, provider=provider),
        _under(opts, pulumi.ResourceOptions(depends_on=list(serving.network_policies.values()) if serving else [])),
    )
    observability = (
        Observability(
            "observability",
            observability_args(
                settings,
                provider,
                kueue,
                queues.namespace.metadata.name,
                serving.router if serving is not None else None,
                services.monitoring_api,
                {role: (serving.lws_names[role], lws) for role, lws in serving.lws.items()} if serving else None,
                keda.addon if keda is not None else None,
            ),
            _under(opts),
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
