"""Components take their own args: the inputs Pulumi's analyzer infers for each, with descriptions. (A component
declared alone from its args registering what the whole program does is checked beside it: tests/test_network.py,
tests/test_kueue_objects.py.)"""

import pytest
from pulumi.provider.experimental.analyzer import Analyzer

from components.addons import HelmAddon, InferenceExtensionCrds, SliceController
from components.cli.mockrun import PROJECT
from components.cluster import Cluster
from components.demo_jobsets import SlicingJobSet
from components.kueue_objects import SliceQueues
from components.network import Egress, InternalFirewall, Network
from components.node_service_account import NodeIdentity
from components.observability import Observability
from components.project_services import ProjectServices
from components.teardown import SliceGates
from components.tpu_node_pools import TpuCapacity
from components.weights_download_job import WeightsDownload

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
