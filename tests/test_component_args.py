"""Components take their own args: the inputs Pulumi's analyzer infers for each, with descriptions. (A component
declared alone from its args registering what the whole program does is checked beside it: tests/test_network.py,
tests/test_kueue_objects.py.)"""

from types import SimpleNamespace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.provider.experimental.analyzer import Analyzer

from components import graph_args
from components.addons import HelmAddon, InferenceExtensionCrds, SliceController
from components.cli.mockrun import PROJECT
from components.cluster import Cluster
from components.demo_jobsets import SlicingJobSet
from components.kueue_objects import SliceQueues
from components.model.keys import PRIORITY_LABEL, QUEUE_LABEL
from components.network import Egress, InternalFirewall, Network
from components.node_service_account import NodeIdentity
from components.observability import Observability
from components.project_services import ProjectServices
from components.serving import Serving
from components.teardown import SliceGates
from components.tpu_node_pools import TpuCapacity
from components.weights_download_job import WeightsDownload
from tests.harness import Registration, declare, dev_settings, run_program, shape


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
