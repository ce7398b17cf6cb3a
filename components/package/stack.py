"""The whole stack as one component: everything the program declares, from one typed args (docs/package.md).

The inputs are validated by the program's own settings model before anything is registered (the component
itself included); the graph is `components/graph.py: declare_stack` with this component as every top-level
component's parent. Its outputs are the program's stack outputs.
"""

from typing import Any

import pulumi
from pydantic.alias_generators import to_camel

from components.graph import declare_stack
from components.model.config.checks import ConfigError
from components.package import NAME
from components.package.inputs import problem_paths, settings_from
from components.package.stack_args import TpuSlicingStackArgs
from components.preflight import clock

TYPE = f"{NAME}:index:TpuSlicingStack"


class TpuSlicingStack(pulumi.ComponentResource):
    """TPU7x (Ironwood) dynamic slicing on GKE: the network, a regional cluster, one TPU7x node pool per 4x4x4 cube
    on a reservation's sub-blocks, Kueue with slice admission, the sub- and super-slicing demos, a prefill/decode
    vLLM serving stack behind a GKE Gateway, and its monitoring. One per Pulumi stack."""

    cluster_name: pulumi.Output[str]
    """The GKE cluster's name."""
    cluster_endpoint: pulumi.Output[str]
    """The control plane's IP endpoint."""
    network: pulumi.Output[str]
    """The VPC's name."""
    node_pools: pulumi.Output[list[str]]
    """The TPU node pools, one per cube."""
    cube_sub_blocks: pulumi.Output[dict[str, str]]
    """Each TPU pool's reservation sub-block (null: bound to the block)."""
    workload_policy: pulumi.Output[str]
    """The TPU pools' workload policy (self link)."""
    kubeconfig: pulumi.Output[str]
    """A kubeconfig for the cluster (its DNS-based endpoint, gke-gcloud-auth-plugin credentials)."""
    credentials_command: pulumi.Output[str]
    """The gcloud command that gives kubectl a context for the cluster."""
    kueue_topology_levels: pulumi.Output[list[str]]
    """The node labels of the Kueue Topology's levels, from the cube down to one host."""
    capacity_plan: pulumi.Output[dict[str, Any]]
    """The capacity plan: each workload's slices, chips and cubes."""
    demo_job_sets: pulumi.Output[dict[str, str]]
    """The demo JobSets enabled, by demo."""
    gateway_name: pulumi.Output[str]
    """The serving Gateway's name (with serving enabled)."""
    gateway_namespace: pulumi.Output[str]
    """The namespace of the Gateway and the workloads."""
    served_model_name: pulumi.Output[str]
    """The model name requests ask for."""
    inference_pool: pulumi.Output[str]
    """The InferencePool the router serves."""
    serving_leaders: pulumi.Output[int]
    """The serving LeaderWorkerSets' leaders, prefill and decode."""
    verify_command: pulumi.Output[str]
    """The command that waits for the model and asks it two questions."""
    serving_shape: pulumi.Output[dict[str, Any]]
    """The shape each serving role runs now. Export it as the stack output `servingShape`: the next update reads
    it to roll a smaller role beside its running, bigger set."""
    dashboard_url: pulumi.Output[str]
    """The Cloud Monitoring dashboard (with observability enabled)."""

    @staticmethod
    def input_problems(args: TpuSlicingStackArgs) -> list[tuple[str, str]]:
        """(input path, message) of every problem of `args`: what the provider reports before constructing."""
        try:
            settings_from(args, now=clock())
        except ConfigError as err:
            return problem_paths(err)
        return []

    def __init__(self, name: str, args: TpuSlicingStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        # Validated before anything is registered, this component included: one error naming every bad input.
        try:
            settings = settings_from(args, now=clock())
        except ConfigError as err:
            raise pulumi.RunError(str(err)) from None
        for warning in settings.warnings():
            pulumi.log.warn(warning)
        super().__init__(TYPE, name, {}, opts)
        outputs = declare_stack(settings, pulumi.ResourceOptions(parent=self))
        for key, value in outputs.items():
            setattr(self, OUTPUTS[key], value)
        self.register_outputs(outputs)


# The schema's description is the docstring as written (the SDK strips only its ends): one paragraph of it.
TpuSlicingStack.__doc__ = " ".join((TpuSlicingStack.__doc__ or "").split())


# The program's stack output -> this component's attribute: an output the program adds and this class does not
# declare stops the component (tests/test_package.py runs the dev stack through it).
OUTPUTS = {to_camel(attr): attr for attr in TpuSlicingStack.__annotations__}
