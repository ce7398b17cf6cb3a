"""Cluster add-ons: JobSet, Kueue and LeaderWorkerSet from their OCI charts, the slice controller's
user-space manifest, and the Gateway API Inference Extension CRDs GKE does not manage itself (vendored).

Charts use `helm.v4.Chart`: it renders client-side, so `pulumi preview` diffs every object of the
chart, and it waits for each Deployment to be available and each Service to have endpoints (the
Kueue webhook "no endpoints available" failure). docs/architecture.md "Why helm.v4.Chart" has the upstream status.
"""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from components.component import PROGRAM_WRITES, Component
from components.model.addons import vendored
from components.model.addons.controllers import budget_spec, deep_merge, nested
from components.model.addons.kueue_config import namespaces_requirement
from components.model.addons.slice_controller import (
    DEPLOYMENT,
    SELECTOR,
    WEBHOOK_CONFIGURATIONS,
    controller_deployment,
    program_objects,
    with_namespace_scope,
)
from components.model.config.addons_settings import HelmAddonSettings
from components.model.config.oci import chart_source


def chart_values(addon: HelmAddonSettings, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The values this program sets on an add-on's chart (keys checked against the pinned values.yaml)."""
    return deep_merge(nested(addon.resources_path, addon.controller_resources.manifest()), extra or {})


class HelmAddonArgs(TypedDict):
    namespace: str
    """The controller's namespace, created here."""
    chart: str
    """The chart: an OCI reference, or a Helm repository's URL and the chart's name joined by "/"."""
    version: str
    """The chart's version."""
    values: dict[str, Any]
    """The values this program sets on the chart (chart_values)."""
    disruption_budget: NotRequired[dict[str, Any] | None]
    """The spec of the controller's PodDisruptionBudget when its chart has none (controllers.disruption_budget)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""


class HelmAddon(Component):
    """One controller: its namespace, its chart, ready (Deployments available) before dependents start, and the
    PodDisruptionBudget its chart lacks."""

    def __init__(self, name: str, args: HelmAddonArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:addons:HelmAddon", name, opts)
        provider = args["provider"]
        self.release = name
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": args["namespace"]}, opts=self.child(provider=provider)
        )
        chart, repository = chart_source(args["chart"])
        self.chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            name=name,
            chart=chart,
            repository_opts={"repo": repository} if repository else None,
            version=args["version"],
            namespace=self.namespace.metadata.name,
            values=args["values"],
            skip_await=False,
            opts=self.child(providers=[provider]),
        )
        budget = args.get("disruption_budget")
        if budget:
            # In the chart's namespace; it selects the chart's pods, so it may exist before them.
            metadata = {"name": f"{name}-controller-manager", "namespace": self.namespace.metadata.name}
            self.disruption_budget = k8s.policy.v1.PodDisruptionBudget(
                f"{name}-disruption-budget", metadata=metadata, spec=budget, opts=self.child(provider=provider)
            )
        self.register_outputs(
            {"namespace": self.namespace.metadata.name, "chart": args["chart"], "version": args["version"]}
        )


def _deployment_transform(gates: list[str], replicas: int) -> pulumi.ResourceTransform:
    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != "kubernetes:apps/v1:Deployment":
            return None
        props = controller_deployment(dict(args.props), gates, replicas)
        return pulumi.ResourceTransformResult(props, args.opts) if props is not None else None

    return transform


def _webhook_scope_transform(requirement: dict[str, Any]) -> pulumi.ResourceTransform:
    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ not in WEBHOOK_CONFIGURATIONS:
            return None
        return pulumi.ResourceTransformResult(with_namespace_scope(dict(args.props), requirement), args.opts)

    return transform


def slice_controller_transforms(
    namespaces: list[str], gates: list[str], replicas: int
) -> list[pulumi.ResourceTransform]:
    """What the program changes in the slice controller's manifest as the provider registers its objects: its
    webhooks scoped to the queued `namespaces`; its Deployment's `replicas` and the opt-in feature `gates`
    (components/model/addons/slice_controller.py says why each)."""
    return [_webhook_scope_transform(namespaces_requirement(namespaces)), _deployment_transform(list(gates), replicas)]


class SliceControllerArgs(TypedDict):
    manifest_url: str
    """The pinned URL of the controller's manifest."""
    queued_namespaces: list[str]
    """The namespaces whose workloads Kueue queues: the only ones its webhooks see."""
    feature_gates: list[str]
    """The opt-in feature gates set on its Deployment."""
    replicas: int
    """The controller's replicas (two or more under a PodDisruptionBudget)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""


class SliceController(Component):
    """The user-space part of the GKE slice controller (the Kueue admission check `accelerator.gke.io/slice`).

    Not redundant with the cluster's `slice_controller_config` add-on: the add-on installs the Slice CRD
    (`slices.accelerator.gke.io`) and the controller that forms slices; this manifest is the Kueue
    admission-check controller that turns admitted Workloads into Slices and holds a finalizer on each
    Workload until it has issued the deletes of its Slices (llm-d's TPU dynamic-slicing guide installs both).
    Workloads and the pools' teardown gates depend on it, so `pulumi destroy` removes it only after the
    workloads are gone and every gate has seen its pool's Slices go (components/teardown.py).
    """

    def __init__(self, name: str, args: SliceControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        namespaces, gates, replicas = args["queued_namespaces"], args["feature_gates"], args["replicas"]
        # What the transforms write into the manifest's objects, as this component's inputs: the change preview
        # compares them as those objects (components/cli/manifest_objects.py), the manifest being fetched at `up`.
        writes = program_objects(namespaces_requirement(namespaces), gates, replicas)
        super().__init__("gke-tpu-slicing:addons:SliceController", name, opts, {PROGRAM_WRITES: writes})
        url = args["manifest_url"]
        # Transforms reach the objects the provider renders from the manifest as each is registered.
        # yaml.v2 waits for its Deployment (slice-controller-controller-manager) to become available.
        self.manifest = k8s.yaml.v2.ConfigFile(
            f"{name}-manifest",
            file=url,
            skip_await=False,
            opts=self.child(
                providers=[args["provider"]], transforms=slice_controller_transforms(namespaces, gates, replicas)
            ),
        )
        # The manifest creates the namespace; deleted before it, the budget never outlives the Deployment.
        self.disruption_budget = (
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-pdb",
                metadata={"name": DEPLOYMENT[1], "namespace": DEPLOYMENT[0]},
                spec=budget_spec(SELECTOR),
                opts=self.child(provider=args["provider"], depends_on=[self.manifest]),
            )
            if replicas >= 2
            else None
        )
        self.register_outputs({"manifestUrl": url})


class InferenceExtensionCrdsArgs(TypedDict):
    version: str
    """The Gateway API Inference Extension release whose CRDs are applied (one this repository vendors)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""


class InferenceExtensionCrds(Component):
    """The Gateway API Inference Extension CRDs of a release that GKE does not manage itself, from the repository.

    Vendored (manifests/vendored/, components/model/addons/vendored.py): the objects are this component's inputs, so
    a preview fetches nothing and shows each CRD's change. GKE manages the GA InferencePool CRD from 1.34 on: applying
    it again fails with AlreadyExists (pulumi-kubernetes >= 4.29 creates client-side), and `pulumi destroy` would
    delete GKE's CRD with every InferencePool in the cluster, so it is left to GKE (sources.toml says what else a
    release ships and is left out, and why). A CRD a new release no longer ships is deleted at `up`, and with it
    every object of its kind (docs/upgrades.md).
    """

    def __init__(self, name: str, args: InferenceExtensionCrdsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:addons:InferenceExtensionCrds", name, opts)
        objs = vendored.objects(vendored.GAIE, args["version"])
        self.crds = k8s.yaml.v2.ConfigGroup(f"{name}-crds", objs=objs, opts=self.child(providers=[args["provider"]]))
        self.register_outputs({"version": args["version"], "crds": [o["metadata"]["name"] for o in objs]})
