"""The whole graph of one stack, declared from its settings: what `__main__.py` runs.

Reads like the architecture: network, cluster, capacity, add-ons, queues, workloads, serving, observability,
exports. A function, not module code, so that the same graph can be declared inside a component. Each component
takes its own args (a TypedDict of only what it uses), built here from the settings; what one component needs of
another is an attribute of it (`services.compute_api`, `network.network.id`) passed in an arg.
"""

import pulumi
import pulumi_kubernetes as k8s

from components.addons import (
    HelmAddon,
    HelmAddonArgs,
    InferenceExtensionCrds,
    InferenceExtensionCrdsArgs,
    SliceController,
    SliceControllerArgs,
    chart_values,
)
from components.cluster import AuthorizedNetwork, Cluster, ClusterArgs, SystemPoolArgs, maintenance_exclusion
from components.demo_jobsets import SlicingJobSet, SlicingJobSetArgs
from components.kueue_guard import queued_workloads
from components.kueue_objects import SliceQueues, SliceQueuesArgs, topology_levels, tpu_quota
from components.model.addons.kueue_config import kueue_chart_values, queued_namespaces
from components.model.commands import stack_credentials_command
from components.model.config.k8s_settings import HelmAddonSettings
from components.model.config.settings import Settings
from components.model.observability import dashboard, monitoring, slice_alerts
from components.model.serving.deployed import SERVING_SHAPE_OUTPUT, serving_shape
from components.model.tpu.reservation import Assignment
from components.network import EgressNames, InternalFirewall, InternalFirewallArgs, Network, NetworkArgs
from components.node_service_account import NodeIdentity, NodeIdentityArgs
from components.observability import (
    KueueScrape,
    LeaderScrape,
    LogAlert,
    MetricAlert,
    Observability,
    ObservabilityArgs,
    RouterScrape,
    Scrapes,
)
from components.preflight import (
    check_weights,
    plan_capacity,
    read_deployed_serving,
    read_sub_blocks,
    resolve_cluster_version,
)
from components.project_services import ProjectServices, ProjectServicesArgs, apis
from components.serving import Serving
from components.teardown import SliceGates, SliceGatesArgs, workload_keys
from components.tpu_node_pools import TpuCapacity, TpuCapacityArgs, TpuPoolArgs, reservation_affinity
from components.vllm_leaderworkersets import leader_metrics_target


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
    sub_blocks = read_sub_blocks(settings, offline)  # the reservation's sub-blocks, read before anything is registered
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
    if c.private_nodes:  # no external IP: without NAT they could pull nothing but Google-hosted images
        network_args["egress"] = EgressNames(router_name=net.router_name, nat_name=net.nat_name)
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
        # Kueue: two replicas under a PodDisruptionBudget, webhooks only in the workload namespace, the integrations
        # in use, and (with observability) the ClusterQueue resource metrics: components/model/addons/kueue_config.py.
        values = chart_values(addon, kueue_chart_values(settings) if name == "kueue" else None)
        chart = {"namespace": addon.namespace, "chart": addon.chart, "version": addon.version}
        return HelmAddon(name, HelmAddonArgs(**chart, values=values, provider=provider), _under(opts))

    jobset, kueue, lws = helm_addon("jobset", a.jobset), helm_addon("kueue", a.kueue), helm_addon("lws", a.lws)
    # The slice controller admits Kueue workloads of JobSets: both controllers must be serving first.
    slice_controller = SliceController(
        "slice-controller",
        SliceControllerArgs(
            manifest_url=a.slice_controller.manifest_url,
            queued_namespaces=queued_namespaces(settings),
            feature_gates=list(a.slice_controller.feature_gates),
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
                namespace=queues.namespace.metadata.name,
                queue_labels=queues.admission_labels(demo.priority),
                provider=provider,
            ),
            _under(opts, after_demo_needs),
        )
        for key, demo in (("subslicing", settings.demos.subslicing), ("superslicing", settings.demos.superslicing))
        if demo.enabled
    }
    serving = (
        Serving(
            "serving",
            settings,
            provider=provider,
            queues=queues,
            lws=lws,
            inference_extension=inference_extension,
            proxy_subnet=network.proxy_subnet,
            pools=tpu_ready,
            capacity_plan=capacity_plan,
            project_api=services.project_api,
            storage_api=[services.storage_api] if services.storage_api is not None else [],
            opts=_under(opts),
        )
        if settings.serving.enabled
        else None
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


def cluster_args(
    settings: Settings, network: Network, node_service_account: pulumi.Input[str], version: str
) -> ClusterArgs:
    c, cp = settings.cluster, settings.cluster.control_plane
    args = ClusterArgs(
        name=c.name,
        project=settings.project,
        region=settings.region,
        network=network.network.id,
        subnetwork=network.tpu_subnet.id,
        node_service_account=node_service_account,
        version=version,
        release_channel=c.release_channel,
        private_nodes=c.private_nodes,
        private_endpoint=cp.private_endpoint,
        dns_endpoint=cp.dns_endpoint,
        deletion_protection=c.deletion_protection,
        protect=c.protect,
        workload_pool=settings.workload_pool,
        system_pool=SystemPoolArgs(
            name=c.system_pool_name, node_count=c.system_node_count, machine_type=c.system_machine_type
        ),
    )
    if not cp.unrestricted_public_endpoint:
        args["authorized_networks"] = [
            AuthorizedNetwork(cidr_block=n.cidr_block, **({"display_name": n.display_name} if n.display_name else {}))
            for n in cp.authorized_networks
        ]
    if c.maintenance_window_start is not None:
        args["maintenance_window_start"] = c.maintenance_window_start
        if c.maintenance_exclusion is not None:
            args["maintenance_exclusion"] = maintenance_exclusion(c.maintenance_exclusion)
    if network.egress is not None:
        args["nat"] = network.egress.nat
    return args


def capacity_args(
    settings: Settings, sub_blocks: Assignment, cluster: pulumi.Input[str], node_service_account: pulumi.Input[str]
) -> TpuCapacityArgs:
    tpu = settings.tpu
    mapping = sub_blocks.mapping()
    pools = []
    for i in range(tpu.cubes):
        name, sub_block = tpu.pool_name(i), mapping.get(tpu.pool_name(i))
        pool = TpuPoolArgs(name=name, reservation_affinity=reservation_affinity(settings, sub_block))
        if sub_block is not None:
            pool["sub_block"] = sub_block
        pools.append(pool)
    return TpuCapacityArgs(
        project=settings.project,
        region=settings.region,
        zone=settings.zone,
        cluster=cluster,
        node_service_account=node_service_account,
        policy_name=tpu.workload_policy_name,
        cube_topology=tpu.cube_topology,
        accelerator_topology_mode=tpu.accelerator_topology_mode,
        machine_type=tpu.machine_type,
        nodes_per_pool=tpu.cube.vms,
        pools=pools,
        private_nodes=settings.cluster.private_nodes,
        protect=settings.cluster.protect,
    )


def queues_args(
    settings: Settings, provider: k8s.Provider, kueue: k8s.helm.v4.Chart, slice_controller: k8s.yaml.v2.ConfigFile
) -> SliceQueuesArgs:
    q = settings.kueue
    return SliceQueuesArgs(
        namespace=q.namespace,
        topology_name=q.topology_name,
        levels=topology_levels(settings),
        flavor_name=q.flavor_name,
        accelerator=settings.tpu.system.accelerator,
        admission_check_name=q.admission_check_name,
        cluster_queue=q.cluster_queue,
        local_queue=q.local_queue,
        tpu_quota=tpu_quota(settings),
        cpu_quota=q.cpu_quota,
        memory_quota=q.memory_quota,
        priorities=dict(q.priorities),
        queued_workloads=queued_workloads(settings),
        provider=provider,
        kueue=kueue,
        slice_controller=slice_controller,
    )


def observability_args(
    settings: Settings,
    provider: k8s.Provider,
    kueue: HelmAddon,
    workload_namespace: pulumi.Input[str],
    router: k8s.helm.v4.Chart | None,
    monitoring_api: pulumi.CustomResource | None,
) -> ObservabilityArgs:
    o = settings.observability
    args = ObservabilityArgs(
        project=settings.project,
        cluster_name=settings.cluster.name,
        notification_channels=list(o.notification_channels),
        provider=provider,
        metric_alerts=[],
        log_alerts=[],
    )
    if o.scrapes:
        scrapes = Scrapes(
            interval=o.scrape_interval,
            kueue=KueueScrape(release=kueue.release, namespace=kueue.namespace.metadata.name, chart=kueue.chart),
            workload_namespace=workload_namespace,
            vllm_leaders={},
        )
        if router is not None:
            scrapes["router"] = RouterScrape(
                chart=router,
                job=monitoring.epp_job(settings),
                selector=monitoring.epp_selector(settings),
                service_account=monitoring.epp_service_account(settings),
            )
        if settings.serving.enabled:
            for role in settings.serving.roles():
                selector, port = leader_metrics_target(settings, role)
                scrapes["vllm_leaders"][role] = LeaderScrape(
                    job=monitoring.vllm_job(settings, role), selector=selector, port=port
                )
        args["scrapes"] = scrapes
    if o.has_dashboard:
        args["dashboard_json"] = dashboard.dashboard_json(settings)
    if o.has_alerts:
        args["metric_alerts"] = [
            MetricAlert(
                key=r.key,
                display_name=r.display_name,
                severity=r.severity,
                query=r.query,
                minutes=r.minutes,
                documentation=r.documentation(),
            )
            for r in monitoring.alert_rules(settings)
        ]
        slice_rule = slice_alerts.failed_slice_alert(settings)
        args["log_alerts"] = [
            LogAlert(
                key=slice_rule.key,
                display_name=slice_rule.display_name,
                severity=slice_rule.severity,
                filter=slice_rule.filter,
                documentation=slice_rule.documentation,
            )
        ]
    if monitoring_api is not None:
        args["monitoring_api"] = monitoring_api  # type: ignore[typeddict-item]
    return args
