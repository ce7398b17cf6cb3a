"""The prefill/decode serving stack as a building block (docs/package.md): the program's Serving component on a
cluster that already runs Kueue (with the slice controller), LeaderWorkerSet and the inference extension's CRDs.

The block's inputs (`ServingArgs`: the sections a consumer sets) go through one adapter, `serving_settings`, into the
settings model (validated there: the program's one-line errors, naming the input), and the program's own builder
(`graph_args.serving_args`) makes the component's small args from them, as for the program.
"""

from typing import Any, NotRequired, TypedDict

import pulumi

from components.graph_args import serving_args
from components.model.config.checks import PROJECT
from components.model.keys import PRIORITY_LABEL, QUEUE_LABEL
from components.model.serving.deployed import SERVING_SHAPE_OUTPUT, serving_shape
from components.package import NAME
from components.package.blocks import TpuShape, settings_or_stop, validated
from components.package.inputs import problems_text
from components.package.stack_args import KueueSettings, ServingSettings
from components.preflight import check_weights, plan_capacity, read_deployed_serving
from components.serving import Serving as ProgramServing


class ServingArgs(TypedDict):
    project: str
    """The project of the cluster, the weights bucket's IAM and the XLA cache bucket."""
    zone: str
    """The TPU pools' zone (us-central1-ai1a): the region of the cache bucket."""
    cluster_name: str
    """The existing cluster's name (the cache bucket's name and labels derive from it)."""
    tpu: TpuShape
    """The TPU capacity the serving roles are planned onto (the same cubes as the queues')."""
    serving: ServingSettings
    """The serving stack: the model, the weights bucket, each role's slices, the router, as the program's `serving`."""
    kueue: NotRequired[KueueSettings]
    """The existing Kueue objects the roles queue in (namespace, LocalQueue, priorities), as the program's `kueue`."""
    hf_token: NotRequired[pulumi.Input[str]]
    """The Hugging Face token, a Pulumi secret: a Secret and `HF_TOKEN` of the serving pods and the download Job."""
    proxy_subnet_cidr: NotRequired[str]
    """The VPC's proxy-only subnet's range: the model servers' NetworkPolicy admits the Gateway's proxies from it
    (unset: 172.16.0.0/26, the program's own)."""


_RENAMES = {"cluster.name": "clusterName", "network.proxySubnetCidr": "proxySubnetCidr"}


def serving_settings(args: ServingArgs) -> dict[str, Any]:
    """The adapter: the block's inputs as the configuration's tree (serving_args then makes Serving's args)."""
    tpu = dict(args.get("tpu", {}))
    tpu["reservation"] = {"name": "existing-capacity", "block": ""}  # the pools are the caller's, not declared here
    tree: dict[str, Any] = {
        "project": args.get("project"),
        "zone": args.get("zone"),
        "cluster": {"name": args.get("cluster_name")},
        "tpu": tpu,
        "kueue": args.get("kueue", {}),
        "serving": {**args.get("serving", {}), "enabled": True},
    }
    if "hf_token" in args:
        tree["hfToken"] = args["hf_token"]
    if "proxy_subnet_cidr" in args:
        tree["network"] = {"proxySubnetCidr": args["proxy_subnet_cidr"]}
    return tree


class Serving(pulumi.ComponentResource):
    """Prefill/decode disaggregated vLLM serving on TPU7x slices for an existing cluster: the GKE Gateway, the llm-d
    router, one LeaderWorkerSet per role queued in Kueue, the weights bucket's IAM, the XLA cache bucket and the token
    Secret. Export `servingShape` as a stack output: the next update rolls a smaller role beside the running one."""

    gateway_name: pulumi.Output[str]
    """The serving Gateway's name."""
    inference_pool: pulumi.Output[str]
    """The InferencePool the router serves."""
    serving_leaders: pulumi.Output[int]
    """The LeaderWorkerSets' leaders, prefill and decode."""
    verify_command: pulumi.Output[str]
    """The command that waits for the model and asks it two questions."""
    serving_shape: pulumi.Output[dict[str, Any]]
    """The shape each role runs now: export it as the stack output `servingShape`."""

    @staticmethod
    def input_problems(args: ServingArgs) -> list[tuple[str, str]]:
        return _elastic(args) or validated(serving_settings(args), _RENAMES)[1]

    def __init__(self, name: str, args: ServingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        if problems := _elastic(args):
            raise pulumi.RunError(problems_text("invalid inputs", [line for _, line in problems]))
        settings = settings_or_stop(serving_settings(args), _RENAMES)
        check_weights(settings)
        if "proxy_subnet_cidr" not in args and settings.serving.gateway.in_proxy_subnet:
            pulumi.log.warn(
                f"{NAME}:Serving: proxySubnetCidr is unset: the model servers admit the Gateway's proxies from "
                f"{settings.network.proxy_subnet_cidr}, the program's own range; set it to your proxy-only subnet's"
            )
        plan = plan_capacity(settings, None, read_deployed_serving(settings))
        super().__init__(f"{NAME}:index:Serving", name, {}, opts)
        # What the program's Serving waits for is installed on the cluster: one stand-in for all of it.
        installed = pulumi.ComponentResource(
            f"{NAME}:serving:Installed", f"{name}-installed", None, pulumi.ResourceOptions(parent=self)
        )
        q = settings.kueue
        # The Kueue objects exist: the workloads' labels name them by their plain names.
        labels = {
            role: {QUEUE_LABEL: q.local_queue, PRIORITY_LABEL: spec.priority}
            for role, spec in settings.serving.roles().items()
        }
        serving = ProgramServing(
            name,
            serving_args(
                settings,
                namespace=q.namespace,
                queue_labels=labels,
                capacity_plan=plan,
                provider=kubernetes_provider(opts),  # type: ignore[arg-type]
                kueue=installed,  # type: ignore[arg-type]
                inference_extension=installed,  # type: ignore[arg-type]
                proxy_subnet=installed,  # type: ignore[arg-type]
                model_servers_wait_for=[installed],
                project_api=None,
                storage_api=None,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.gateway_name = serving.gateway.object_name
        self.inference_pool = pulumi.Output.from_input(serving.pool_name)
        self.serving_leaders = pulumi.Output.from_input(serving.leaders)
        self.verify_command = serving.verify_command
        self.serving_shape = pulumi.Output.from_input(serving_shape(w.workload for w in plan.workloads))
        self.register_outputs(
            {
                "gatewayName": self.gateway_name,
                "inferencePool": self.inference_pool,
                "servingLeaders": self.serving_leaders,
                "verifyCommand": self.verify_command,
                SERVING_SHAPE_OUTPUT: self.serving_shape,
            }
        )


def _elastic(args: ServingArgs) -> list[tuple[str, str]]:
    """Burst slots need KEDA and the stack's scrapes, which the block does not install: refused by name (the
    settings' own refusal would name `addons.keda.enabled`, which is no input of the block)."""
    out = []
    for role in ("prefill", "decode"):
        if (((args.get("serving") or {}).get(role) or {}).get("autoscaling") or {}).get("enabled"):
            key = f"serving.{role}.autoscaling.enabled"
            why = "the Serving block serves with fixed groups: burst slots need KEDA and the scrapes their signal reads"
            out.append((key, f"{PROJECT}:{key} = true: false in the Serving block ({why}, which TpuSlicingStack runs)"))
    return out


def kubernetes_provider(opts: pulumi.ResourceOptions | None) -> pulumi.ProviderResource:
    """The caller's Kubernetes provider (the component's `providers` option), which Serving names on its charts."""
    given: Any = opts.providers if opts is not None and opts.providers else []
    candidates = list(given.values()) if isinstance(given, dict) else list(given)
    if opts is not None and opts.provider is not None:
        candidates.append(opts.provider)
    for provider in candidates:
        if getattr(provider, "package", None) == "kubernetes":
            return provider
    raise pulumi.RunError(
        f"{NAME}:Serving: a Kubernetes provider for the existing cluster is required: pass it in the resource's "
        "`providers` option (providers: {kubernetes: ...})"
    )
