"""Components take their own args: one declared alone, from its args, registers what the whole program does."""

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.runtime.settings import set_root_resource

from components import graph_args
from components.addons import HelmAddon, InferenceExtensionCrds, SliceController
from components.cli.mockrun import PROJECT, RecordingMonitor, Registration
from components.cluster import Cluster
from components.demo_jobsets import SlicingJobSet
from components.kueue_objects import SliceQueues
from components.model.config.settings import Settings, load
from components.model.diff import engine
from components.model.keys import PRIORITY_LABEL, QUEUE_LABEL
from components.network import Egress, InternalFirewall, InternalFirewallArgs, Network, NetworkArgs
from components.node_service_account import NodeIdentity
from components.observability import Observability
from components.project_services import ProjectServices
from components.serving import Serving
from components.teardown import SliceGates
from components.tpu_node_pools import TpuCapacity
from components.weights_download_job import WeightsDownload
from tests.harness import CLOCK, Mocks, run_program, stack_file_config

FIREWALL = "gcp:compute/firewall:Firewall"
# The URN the firewall had while the Network component declared it (the recorded runs' URN scheme).
FORMER_FIREWALL = f"urn:pulumi:dev::{PROJECT}::gke-tpu-slicing:network:Network${FIREWALL}::network-allow-internal"


def dev_settings() -> Settings:
    prefix = f"{PROJECT}:"
    config = stack_file_config("dev")
    raw = {k.removeprefix(prefix): v for k, v in config.items() if k.startswith(prefix)}
    return load(raw, config["gcp:project"], now=CLOCK)


def declare(body: Callable[[], None]) -> list[Registration]:
    mocks = Mocks()
    monitor = RecordingMonitor(mocks)
    set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack="dev", monitor=monitor)
    pulumi.runtime.test(body)()
    return monitor.registrations


def shape(regs: list[Registration], types: set[str]) -> dict[tuple[str, str], Any]:
    return {(r.type, r.name): (r.plain(), r.options) for r in regs if r.type in types}


def test_the_network_and_its_firewall_from_their_args_alone_register_as_in_the_program() -> None:
    s = dev_settings()
    net = s.network

    def body() -> None:
        network = Network(
            "network",
            NetworkArgs(
                project=s.project,
                region=s.region,
                network_name=net.network_name,
                mtu=net.mtu,
                tpu_subnet_name=net.tpu_subnet_name,
                tpu_subnet_cidr=net.tpu_subnet_cidr,
                proxy_subnet_name=net.proxy_subnet_name,
                proxy_subnet_cidr=net.proxy_subnet_cidr,
                egress={"router_name": net.router_name, "nat_name": net.nat_name},
            ),
        )
        InternalFirewall(
            "network",
            InternalFirewallArgs(
                project=s.project,
                firewall_name=net.firewall_name,
                network=network.network.id,
                tpu_subnet_cidr=net.tpu_subnet_cidr,
                pod_range="10.4.0.0/14",  # what the harness's cluster reports
                proxy_subnet_cidr=net.proxy_subnet_cidr,
            ),
            pulumi.ResourceOptions(parent=network),
        )

    alone = declare(body)
    whole = run_program()
    assert whole.error is None, whole.error
    types = {r.type for r in alone if r.custom}
    assert FIREWALL in types and len(types) >= 5
    assert shape(alone, types) == shape(whole.registrations, types)


def test_the_firewall_keeps_the_urn_it_had_under_the_network() -> None:
    run = run_program()
    firewall = run.get(FIREWALL, "network-allow-internal")
    assert run.by_urn(firewall.parent).type == "gke-tpu-slicing:network:InternalFirewall"
    record = {"urn": firewall.urn, "aliases": firewall.aliases}
    assert FORMER_FIREWALL in engine._alias_urns(record)


def test_the_queues_from_their_args_alone_register_as_in_the_program() -> None:
    s = dev_settings()
    types = {"kubernetes:kueue.x-k8s.io/v1beta2:" + k for k in ("Topology", "ResourceFlavor", "LocalQueue")}

    def body() -> None:
        provider = k8s.Provider("cluster-k8s", kubeconfig="{}")
        kueue = pulumi.ComponentResource("test:index:Kueue", "kueue")
        SliceQueues("queues", graph_args.queues_args(s, provider, kueue, kueue))

    alone, whole = declare(body), run_program()
    assert whole.error is None, whole.error
    mine, theirs = shape(alone, types), shape(whole.registrations, types)
    assert len(mine) == 3 and mine == theirs


class RecordedPlan:
    """The capacity plan as the whole program recorded it (its `capacityPlan` output): each role's rollout."""

    def __init__(self, outputs: dict[str, Any]) -> None:
        self.rollouts = {r["key"]: r for r in outputs["capacityPlan"]["rollouts"]}

    def rollout(self, key: str) -> SimpleNamespace:
        r = self.rollouts[key]
        return SimpleNamespace(create_first=r["createFirst"], wait_for=r["waitFor"])


def test_serving_from_its_args_alone_registers_as_in_the_program() -> None:
    s = dev_settings()
    whole = run_program()
    assert whole.error is None, whole.error

    def body() -> None:
        provider = k8s.Provider("cluster-k8s", kubeconfig="{}")
        other = pulumi.ComponentResource("test:index:Other", "other")
        labels = {
            role: {QUEUE_LABEL: s.kueue.local_queue, PRIORITY_LABEL: r.priority}
            for role, r in s.serving.roles().items()
        }
        args = graph_args.serving_args(
            s,
            namespace=s.kueue.namespace,
            queue_labels=labels,
            capacity_plan=RecordedPlan(whole.outputs),  # type: ignore[arg-type]
            provider=provider,
            kueue=other,  # type: ignore[arg-type]
            inference_extension=other,  # type: ignore[arg-type]
            proxy_subnet=other,  # type: ignore[arg-type]
            model_servers_wait_for=[],
            project_api=None,
            storage_api=None,
        )
        Serving("serving", args)

    def children(regs: list[Registration]) -> list[Registration]:
        return [r for r in regs if r.parent.endswith("gke-tpu-slicing:serving:Serving::serving")]

    mine, theirs = children(declare(body)), children(whole.registrations)
    types = {r.type for r in mine}
    assert {"kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "kubernetes:helm.sh/v4:Chart"} <= types
    mine, theirs = shape(mine, types), shape(theirs, types)
    assert len(mine) >= 10 and mine == theirs


COMPONENTS = [
    ProjectServices,
    Network,
    Egress,
    InternalFirewall,
    NodeIdentity,
    Cluster,
    TpuCapacity,
    SliceGates,
    HelmAddon,
    SliceController,
    InferenceExtensionCrds,
    SliceQueues,
    SlicingJobSet,
    WeightsDownload,
    Serving,
    Observability,
]


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_pulumis_analyzer_infers_every_components_inputs_with_a_description(component: type) -> None:
    # The schema a Pulumi component package would publish (pulumi.provider.experimental, SDK 3.272.0): it fails on
    # a module with `from __future__ import annotations`, a union, or an untyped resource reference.
    definition = Analyzer(PROJECT).analyze([component])["component_definitions"][component.__name__]
    assert definition.inputs and all(p.description for p in definition.inputs.values()), component


def test_graph_shaping_values_are_plain_and_other_resources_values_are_inputs() -> None:
    inputs = Analyzer(PROJECT).analyze([TpuCapacity])["component_definitions"]["TpuCapacity"].inputs
    assert inputs["nodesPerPool"].plain and inputs["pools"].plain and inputs["cubeTopology"].plain
    assert not inputs["cluster"].plain and not inputs["nodeServiceAccount"].plain


def test_servings_counts_and_names_are_plain_and_its_namespace_and_token_inputs() -> None:
    analyzed = Analyzer(PROJECT).analyze([Serving])
    inputs = analyzed["component_definitions"]["Serving"].inputs
    assert inputs["roles"].plain and inputs["modelServer"].plain and inputs["gatewayName"].plain
    assert not inputs["namespace"].plain and not inputs["hfToken"].plain and not inputs["proxySubnet"].plain
    role = analyzed["type_definitions"]["ServingRoleArgs"].properties
    assert role["replicas"].plain and role["vms"].plain and role["topology"].plain and role["tensorParallelSize"].plain
