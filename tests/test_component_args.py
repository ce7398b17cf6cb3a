"""Components take their own args: the inputs Pulumi's analyzer infers for each, with descriptions. (A component
declared alone from its args registering what the whole program does is checked beside it: tests/test_network.py,
tests/test_kueue_objects.py.)"""

import importlib
import pkgutil
from types import SimpleNamespace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.provider.experimental.analyzer import Analyzer

import components
from components import graph_args
from components.cli.mockrun import PROJECT
from components.component import Component
from components.model.keys import PRIORITY_LABEL, QUEUE_LABEL
from components.serving import Serving
from components.tpu_node_pools import TpuCapacity
from tests.graph_queries import shape
from tests.harness import Registration, declare, run_program
from tests.stack_config import dev_settings


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


# Every component the program declares: each module's subclasses of the components' base class.
for _module in pkgutil.iter_modules(components.__path__):
    if not _module.ispkg and _module.name != "__main__":
        importlib.import_module(f"components.{_module.name}")
COMPONENTS = sorted(Component.__subclasses__(), key=lambda c: c.__name__)


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_pulumis_analyzer_infers_every_components_inputs_with_a_description(component: type) -> None:
    # The schema a Pulumi component package would publish (pulumi.provider.experimental, SDK 3.272.0): it fails on
    # a module with `from __future__ import annotations`, a union, or an untyped resource reference.
    definition = Analyzer(PROJECT).analyze([component])["component_definitions"][component.__name__]
    assert definition.inputs and all(p.description for p in definition.inputs.values()), component


@pytest.mark.parametrize(
    ("component", "plain", "inputs"),
    [
        # The graph's shape: counts and names decide what is registered.
        (TpuCapacity, ["nodesPerPool", "pools", "cubeTopology"], ["cluster", "nodeServiceAccount"]),
        (Serving, ["roles", "modelServer", "gatewayName"], ["namespace", "hfToken", "proxySubnet"]),
    ],
    ids=["TpuCapacity", "Serving"],
)
def test_graph_shaping_values_are_plain_and_other_resources_values_are_inputs(
    component: type, plain: list[str], inputs: list[str]
) -> None:
    analyzed = Analyzer(PROJECT).analyze([component])
    properties = analyzed["component_definitions"][component.__name__].inputs
    assert [k for k in plain if not properties[k].plain] == [] and [k for k in inputs if properties[k].plain] == []
    if component is Serving:
        role = analyzed["type_definitions"]["ServingRoleArgs"].properties
        assert all(role[k].plain for k in ("replicas", "vms", "topology", "tensorParallelSize"))
