"""Cluster add-ons: JobSet, Kueue and LeaderWorkerSet from their OCI charts, the slice controller's
user-space manifest, and the Gateway API Inference Extension CRDs (SPEC 6).

Charts use `helm.v4.Chart`: it renders client-side, so `pulumi preview` diffs every object of the
chart, and it waits for each Deployment to be available and each Service to have endpoints (the
Kueue webhook "no endpoints available" failure). README "Why helm.v4.Chart" has the upstream status.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component
from components.model.k8s_settings import HelmAddonSettings
from components.model.monitoring import kueue_chart_values
from components.model.settings import Settings

GAIE_CRDS = "https://github.com/kubernetes-sigs/gateway-api-inference-extension/config/crd?ref={version}"


def nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} from ("a", "b")."""
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return out


def chart_values(addon: HelmAddonSettings, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The values this program sets on an add-on's chart (keys checked against the pinned values.yaml)."""
    return {**nested(addon.resources_path, addon.controller_resources.manifest()), **(extra or {})}


class HelmAddon(Component):
    """One controller: its namespace and its chart, ready (Deployments available) before dependents start."""

    def __init__(
        self,
        name: str,
        addon: HelmAddonSettings,
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
        extra_values: dict[str, Any] | None = None,
    ) -> None:
        super().__init__("gke-tpu-slicing:addons:HelmAddon", name, opts)
        self.release = name
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": addon.namespace},
            opts=self.child(provider=provider),
        )
        self.values = chart_values(addon, extra_values)
        self.chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            name=name,
            chart=addon.chart,
            version=addon.version,
            namespace=self.namespace.metadata.name,
            values=self.values,
            skip_await=False,
            opts=self.child(providers=[provider]),
        )
        self.register_outputs(
            {"namespace": self.namespace.metadata.name, "chart": addon.chart, "version": addon.version}
        )


class SliceController(Component):
    """The user-space part of the GKE slice controller (the Kueue admission check `accelerator.gke.io/slice`)."""

    def __init__(
        self, name: str, settings: Settings, provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("gke-tpu-slicing:addons:SliceController", name, opts)
        url = settings.addons.slice_controller.manifest_url
        # yaml.v2 waits for its Deployment (slice-controller-controller-manager) to become available.
        self.manifest = k8s.yaml.v2.ConfigFile(
            f"{name}-manifest", file=url, skip_await=False, opts=self.child(providers=[provider])
        )
        self.register_outputs({"manifestUrl": url})


class InferenceExtensionCrds(Component):
    """The Gateway API Inference Extension CRDs (InferencePool, InferenceObjective) at a pinned tag."""

    def __init__(
        self, name: str, settings: Settings, provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("gke-tpu-slicing:addons:InferenceExtensionCrds", name, opts)
        source = GAIE_CRDS.format(version=settings.addons.inference_extension.version)
        self.crds = k8s.kustomize.v2.Directory(f"{name}-crds", directory=source, opts=self.child(providers=[provider]))
        self.register_outputs({"source": source})


class Addons:
    """The add-on layer. Each add-on is its own component; this only wires their order."""

    def __init__(self, settings: Settings, provider: k8s.Provider) -> None:
        a = settings.addons
        self.jobset = HelmAddon("jobset", a.jobset, provider)
        # Observability turns on Kueue's ClusterQueue resource metrics (the TPU quota chart and alert).
        self.kueue = HelmAddon("kueue", a.kueue, provider, extra_values=kueue_chart_values(settings))
        self.lws = HelmAddon("lws", a.lws, provider)
        # The slice controller admits Kueue workloads of JobSets: both controllers must be serving first.
        self.slice_controller = SliceController(
            "slice-controller", settings, provider, pulumi.ResourceOptions(depends_on=[self.kueue, self.jobset])
        )
        self.inference_extension = InferenceExtensionCrds("inference-extension", settings, provider)
