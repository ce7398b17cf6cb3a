"""The args of each component, built from the settings: what components/graph.py passes them.

Each builder reads the settings and names every key of its component's args; what one component needs of another
(an Output, a resource to wait for) comes in as an argument, never from the other component's internals.
"""

from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.addons import HelmAddon, chart_values
from components.burst_slots import BurstRoleArgs, BurstSlotsArgs
from components.cluster import AuthorizedNetwork, ClusterArgs, SystemPoolArgs, maintenance_exclusion
from components.keda import KedaArgs
from components.kueue_guard import queued_workloads
from components.kueue_objects import SliceQueuesArgs, healthy_partition_selector, topology_levels
from components.llmd_router import RouterArgs
from components.model.addons.keda import OPERATOR_APP, OPERATOR_JOB, OPERATOR_METRICS_PORT, keda_chart_values
from components.model.commands import stack_credentials_command
from components.model.config.settings import Settings
from components.model.keys import ACCELERATOR_LABEL
from components.model.observability import dashboard, monitoring, slice_alerts
from components.model.observability.burst_signals import BurstSignals, leader_target_labels
from components.model.tpu import planner
from components.model.tpu.reservation import Assignment
from components.network import Network
from components.network_policies import ServingNetwork
from components.observability import (
    KueueScrape,
    LogAlert,
    MetricAlert,
    ObservabilityArgs,
    PodScrape,
    RouterScrape,
    Scrapes,
)
from components.serving import ServingArgs, WeightsDownloadSpec
from components.tpu_node_pools import TpuCapacityArgs, TpuPoolArgs, reservation_affinity
from components.vllm_containers import ModelServerArgs
from components.vllm_leaderworkersets import ServingRoleArgs, leader_metrics_target


def keda_args(settings: Settings, provider: k8s.Provider, project_api: gcp.projects.Service | None) -> KedaArgs:
    keda = settings.addons.keda
    args = KedaArgs(
        project=settings.project,
        workload_pool=settings.workload_pool,
        namespace=keda.namespace,
        chart=keda.chart,
        version=keda.version,
        values=chart_values(keda, keda_chart_values(keda, settings.observability.scrapes)),
        provider=provider,
    )
    if project_api is not None:
        args["project_api"] = project_api
    return args


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
        tpu_quota=settings.tpu_quota(),
        cpu_quota=q.cpu_quota,
        memory_quota=q.memory_quota,
        # With burst slots, their derived class too (components/model/serving/burst.py).
        priorities={**q.priorities, **({burst.name: burst.value} if (burst := settings.burst_priority()) else {})},
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
    leader_sets: dict[str, tuple[str, pulumi.Resource]] | None = None,
    keda: HelmAddon | None = None,
) -> ObservabilityArgs:
    """`leader_sets`: each serving role's current LeaderWorkerSet, its name and resource (with serving); `keda`:
    KEDA's chart, when installed."""
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
            slots = settings.burst_slots()
            for role in settings.serving.roles():
                selector, port = leader_metrics_target(model_server_args(settings), role)
                leaders = PodScrape(job=monitoring.vllm_job(settings, role), selector=selector, port=port)
                if role in slots:  # the slot's number, which its queries read
                    leaders["target_labels"] = leader_target_labels()
                scrapes["vllm_leaders"][role] = leaders
        if keda is not None:
            scrapes["keda"] = PodScrape(
                job=OPERATOR_JOB,
                selector={"app": OPERATOR_APP},
                port=OPERATOR_METRICS_PORT,
                namespace=keda.namespace.metadata.name,
                after=[keda.chart],
            )
        args["scrapes"] = scrapes
    if o.has_dashboard:
        args["dashboard_json"] = dashboard.dashboard_json(settings)
    if o.has_alerts:
        sets = leader_sets or {}
        current = {
            role: monitoring.LeaderSet(name, leader_metrics_target(model_server_args(settings), role)[1])
            for role, (name, _) in sets.items()
        }
        args["metric_alerts"] = []
        for r in [*monitoring.alert_rules(settings, current), *BurstSignals(settings).alert_rules()]:
            alert = MetricAlert(
                key=r.key,
                display_name=r.display_name,
                severity=r.severity,
                query=r.query,
                seconds=r.seconds,
                documentation=r.documentation(),
            )
            if r.after_set is not None:
                alert["after"] = [sets[r.after_set][1]]
            args["metric_alerts"].append(alert)
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


def hf_token(settings: Settings) -> pulumi.Output[str] | None:
    """`hfToken` as a Pulumi secret, None when unset."""
    return None if settings.hf_token is None else pulumi.Output.secret(settings.hf_token.get_secret_value())


def model_server_args(settings: Settings) -> ModelServerArgs:
    s = settings.serving
    return ModelServerArgs(
        guide=s.guide,
        model_label=settings.model_label,
        model_served=s.model_served,
        image=s.image,
        routing_sidecar_image=s.routing_sidecar_image,
        routing_sidecar_resources=s.routing_sidecar.resources.manifest(),
        weights_bucket=s.weights_bucket or "",
        model_path=s.model_path,
        weights_via=s.weights_via,
        max_model_len=s.max_model_len,
        max_num_batched_tokens=s.max_num_batched_tokens,
        max_num_seqs=s.max_num_seqs,
        kv_cache_dtype=s.kv_cache_dtype,
        enable_expert_parallel=s.enable_expert_parallel,
        startup_timeout_seconds=s.startup_timeout_seconds,
        termination_grace_period_seconds=s.termination_grace_period_seconds,
        xla_cache_bucket=settings.xla_cache_bucket,
        local_queue=settings.kueue.local_queue,
    )


def serving_role_args(
    settings: Settings, role: str, queue_labels: dict[str, pulumi.Input[str]], *, create_first: bool, wait_for: int
) -> ServingRoleArgs:
    """One role's LWS: its group size, chips and tensor-parallel size derived from its slice."""
    spec, slice_ = settings.serving.roles()[role], settings.serving_slice(role)
    return ServingRoleArgs(
        name=settings.lws_name(role),
        replicas=spec.replicas,
        priority=spec.priority,
        topology=str(slice_.topology),
        vms=slice_.vms,
        chips_per_pod=slice_.chips_per_pod,
        tensor_parallel_size=slice_.tensorcores,
        node_selector={ACCELERATOR_LABEL: slice_.cube.system.accelerator, **healthy_partition_selector(slice_)},
        resources=spec.resources.model_dump(exclude_none=True),
        queue_labels=queue_labels,
        create_first=create_first,
        wait_for=wait_for,
    )


def serving_args(
    settings: Settings,
    *,
    namespace: pulumi.Input[str],
    queue_labels: dict[str, dict[str, pulumi.Input[str]]],
    capacity_plan: planner.Plan,
    provider: k8s.Provider,
    kueue: k8s.helm.v4.Chart,
    inference_extension: k8s.yaml.v2.ConfigGroup,
    proxy_subnet: gcp.compute.Subnetwork,
    model_servers_wait_for: list[Any],
    project_api: gcp.projects.Service | None,
    storage_api: gcp.projects.Service | None,
) -> ServingArgs:
    """`queue_labels`: each role's admission labels; each role rolls as the stack's one `capacity_plan` says."""
    s = settings.serving
    roles = {}
    for role in s.roles():
        rollout = capacity_plan.rollout(f"serving.{role}")
        roles[role] = serving_role_args(
            settings, role, queue_labels[role], create_first=rollout.create_first, wait_for=rollout.wait_for
        )
    router = s.router
    args = ServingArgs(
        project=settings.project,
        region=settings.region,
        cluster_name=settings.cluster.name,
        workload_pool=settings.workload_pool,
        namespace=namespace,
        model_server=model_server_args(settings),
        roles=roles,
        gateway_name=s.gateway.name,
        gateway_class=s.gateway.class_name,
        router=RouterArgs(
            chart=router.chart,
            version=router.version,
            epp_resources=router.epp_resources.manifest(),
            peak_prefill_throughput=router.peak_prefill_throughput,
        ),
        credentials_command=stack_credentials_command(settings),
        provider=provider,
        kueue=kueue,
        inference_extension=inference_extension,
        proxy_subnet=proxy_subnet,
        network=ServingNetwork(epp_selector=monitoring.epp_selector(settings), scraped=settings.observability.scrapes),
        model_servers_wait_for=model_servers_wait_for,
    )
    if s.gateway.in_proxy_subnet:  # the regional classes' proxies connect from it
        args["network"]["proxy_subnet_cidr"] = settings.network.proxy_subnet_cidr
    if s.weights_download.enabled:
        args["weights_download"] = WeightsDownloadSpec(
            model=s.model, image=s.weights_download.image, system_pool=settings.cluster.system_pool_name
        )
    token = hf_token(settings)
    if token is not None:
        args["hf_token"] = token
    if project_api is not None:
        args["project_api"] = project_api
    if storage_api is not None:
        args["storage_api"] = storage_api
    return args


def burst_args(
    settings: Settings,
    *,
    floors: dict[str, ServingRoleArgs],
    queue_labels: dict[str, pulumi.Input[str]],
    serving: ServingArgs,
    service_account: pulumi.Input[str],
    hf_secret: pulumi.Input[str] | None,
    model_servers_wait_for: list[Any],
    keda_ready: list[Any],
) -> BurstSlotsArgs:
    """The burst slots of every role with autoscaling: `floors`, the roles' floor LeaderWorkerSets; `queue_labels`,
    the admission labels at the burst priority."""
    signals, burst = BurstSignals(settings), settings.burst_priority()
    assert burst is not None  # only with slots
    roles = {
        role: BurstRoleArgs(floor=floors[role], queries=[signals.slot_query(role, k) for k in range(1, n + 1)])
        for role, n in settings.burst_slots().items()
    }
    args = BurstSlotsArgs(
        project=settings.project,
        namespace=serving["namespace"],
        model_server=serving["model_server"],
        roles=roles,
        priority=burst.name,
        queue_labels=queue_labels,
        polling_seconds=signals.pacing.polling_seconds,
        cooldown_seconds=signals.pacing.cooldown_seconds,
        service_account=service_account,
        provider=serving["provider"],
        model_servers_wait_for=model_servers_wait_for,
        keda_ready=keda_ready,
    )
    if hf_secret is not None:
        args["hf_secret"] = hf_secret
    return args
