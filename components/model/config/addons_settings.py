"""Settings of the cluster add-ons: the charts (JobSet, Kueue, LeaderWorkerSet, KEDA), the slice controller's
manifest and the Gateway API Inference Extension CRDs; Kueue's objects and the demos are in k8s_settings.py."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field, model_validator

from components.model.addons import chart_resources, tested_sets, vendored
from components.model.addons.slice_controller import FEATURE_GATES
from components.model.config.checks import CHART_VERSION_RE, Model, accept_if, raise_all
from components.model.config.resources_settings import ResourceRequirements, requirements
from components.model.config.rules import (
    FLAG,
    NODE_SIZES,
    SEMVER,
    THIS_PROGRAM,
    HelmChart,
    Namespace,
    OciChart,
    Rule,
    at_least,
)

# The keys every add-on has (each add-on's class gives its pinned defaults).
AddonChart = Annotated[
    OciChart,
    Field(description="the add-on's OCI Helm chart"),
    Rule(refused="oci://registry.k8s.io/jobset/charts/JobSet"),
]
AddonVersion = Annotated[
    str,
    accept_if(CHART_VERSION_RE.match, "a pinned chart version such as 0.11.1 (no ranges, no 'latest')"),
    AfterValidator(lambda v: v.removeprefix("v")),
    Field(description="the chart's pinned version"),
    Rule(
        "a pinned chart version, SemVer with an optional v (no ranges, no latest); the preview refuses a version known "
        "to break the program and warns on a combination that is no tested set",
        f"{SEMVER}; {THIS_PROGRAM}",
        "",
        "^0.11",
        "v1.0.0-rc.1",
    ),
]
AddonNamespace = Annotated[Namespace, Field(description="the controller's namespace"), Rule(change="addon-namespace")]
ControllerResources = Annotated[
    ResourceRequirements, Field(description="the controller's resources (default: the pinned chart's own)")
]


_REPLICAS_FIT, _FIT_SOURCES = "; every replica's requests count in the system-pool fit", f"{THIS_PROGRAM}; {NODE_SIZES}"
_KEDA_PODS = "each KEDA pod's resources, the operator's and its admission webhook's (default: the chart's)"
# The defaults are the newest tested set of add-on versions (components/model/addons/tested_sets.py).
NEWEST = tested_sets.newest().versions


class HelmAddonSettings(Model):
    """An add-on installed from its OCI Helm chart; subclasses give the pinned defaults."""

    chart: AddonChart
    version: AddonVersion
    namespace: AddonNamespace
    # Defaults are the pinned chart's own values.yaml defaults, so the fit check sees real numbers.
    controller_resources: ControllerResources
    # Two or more run under a PodDisruptionBudget, spread over the system nodes, so one webhook endpoint stays
    # through a drain (components/model/addons/controllers.py).
    replicas: Annotated[int, at_least(1, _REPLICAS_FIT, _FIT_SOURCES, "addon-replicas")] = Field(
        2,
        ge=1,
        description="controller replicas (two or more run under a PodDisruptionBudget, spread over the system nodes)",
    )
    # Where the chart's values.yaml keeps the controller's resources.
    resources_path: ClassVar[tuple[str, ...]] = ()

    def pod_count(self) -> int:
        """Controller pods the chart runs on the system pool (the fit check counts each)."""
        return self.replicas

    def chart_default_resources(self) -> ResourceRequirements:
        return type(self).model_fields["controller_resources"].get_default(call_default_factory=True)

    def rendered_resources(self) -> ResourceRequirements:
        """The controller's resources as the chart renders them: the amounts set over the chart's own
        (components/model/addons/chart_resources.py)."""
        return chart_resources.rendered(self.chart_default_resources(), self.controller_resources)

    @model_validator(mode="after")
    def _requests_within_the_charts_limits(self) -> HelmAddonSettings:
        default, ours = self.chart_default_resources(), self.controller_resources
        raise_all(chart_resources.kept_limit_problems("controller_resources", default, ours))
        return self


class JobSetAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("controller", "resources")
    chart: AddonChart = "oci://registry.k8s.io/jobset/charts/jobset"
    version: AddonVersion = NEWEST["jobset"]
    namespace: AddonNamespace = "jobset-system"
    controller_resources: ControllerResources = Field(default_factory=lambda: requirements("500m", "128Mi", "2", "4Gi"))


class KueueAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("controllerManager", "manager", "resources")
    chart: AddonChart = "oci://registry.k8s.io/kueue/charts/kueue"
    version: AddonVersion = NEWEST["kueue"]
    namespace: AddonNamespace = "kueue-system"
    controller_resources: ControllerResources = Field(
        default_factory=lambda: requirements("500m", "512Mi", "2", "512Mi")
    )


class LwsAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("resources",)
    chart: AddonChart = "oci://registry.k8s.io/lws/charts/lws"
    version: AddonVersion = NEWEST["lws"]
    namespace: AddonNamespace = "lws-system"
    controller_resources: ControllerResources = Field(default_factory=lambda: requirements("1", "1Gi", None, None))


class KedaAddon(HelmAddonSettings):
    """KEDA, the burst slots' autoscaler: the values it gets and why, components/model/addons/keda.py."""

    resources_path: ClassVar[tuple[str, ...]] = ("resources", "operator")
    enabled: Annotated[bool, FLAG, Rule(change="keda")] = Field(False, description="whether KEDA is installed")
    # Published in a Helm repository only (kedacore/charts@cbb9bb8c README.md: `helm repo add kedacore <this URL>`).
    chart: Annotated[HelmChart, Field(description="KEDA's Helm chart")] = "https://kedacore.github.io/charts/keda"
    version: AddonVersion = NEWEST["keda"]
    namespace: AddonNamespace = "keda"
    controller_resources: Annotated[ResourceRequirements, Field(description=_KEDA_PODS)] = Field(
        default_factory=lambda: requirements("100m", "100Mi", "1", "1000Mi")  # the chart's, for both pods
    )
    replicas: Annotated[int, at_least(1, _REPLICAS_FIT, _FIT_SOURCES, "keda")] = Field(
        2, ge=1, description="replicas of KEDA's operator and of its admission webhook (2+: under disruption budgets)"
    )

    def pod_count(self) -> int:
        return 2 * self.replicas  # the operator's and the webhook's


class SliceControllerSettings(Model):
    manifest_url: Annotated[
        str,
        accept_if(
            lambda v: v.startswith("https://") and not re.search(r"/(latest|main|master|HEAD)/", v),
            "an https:// URL of a pinned manifest (a tag or commit, not latest/main)",
        ),
        Rule(
            "an https:// URL of a pinned manifest (no /latest/, /main/, /master/ or /HEAD/ in its path)",
            THIS_PROGRAM,
            "manifests",
            "https://example.com/main/x.yaml",
            "https://e/x",
        ),
    ] = Field(
        # the codelab's pinned gist revision
        "https://gist.githubusercontent.com/mwysokin/f8ff6a7f8c2f8808ba30177e51413e32/raw/"
        "9086457ea35cd31a3bb95b714bf72309a2be357c/kueue-slice-controller-v0.8.0-200.yaml",
        description="the slice controller's manifest",
    )
    # How long deleting (or replacing) a TPU pool waits for the Slices on it to be gone before it fails
    # (components/teardown.py). An estimate: GKE does not document how long dismantling a Slice takes.
    drain_timeout_seconds: Annotated[
        int, at_least(1, " (seconds a pool's deletion waits for its Slices to be gone)", change="drain-timeout")
    ] = Field(1200, ge=1, description="how long deleting or replacing a TPU pool waits for its Slices")
    # Two or more run under a PodDisruptionBudget, so one webhook endpoint stays through a drain
    # (components/model/addons/slice_controller.py says why its source allows it).
    replicas: Annotated[
        int,
        at_least(
            1,
            " (two or more run with leader election under a PodDisruptionBudget)",
            "AI-Hypercomputer/xpk@250d4b3c slice/cmd/main.go:90, :225-226; slice/internal/util/cert/cert.go:45-56",
            "slice-controller-replicas",
        ),
    ] = Field(2, ge=1, description="slice controller replicas (two or more run under a PodDisruptionBudget)")
    # The controller's alpha feature gates to turn on (components/model/addons/slice_controller.py): none by default,
    # since the pinned manifest's build may predate them and an unknown gate stops the controller.
    feature_gates: Annotated[
        list[str],
        accept_if(
            lambda v: set(v) <= set(FEATURE_GATES) and len(set(v)) == len(v),
            f"distinct names among {', '.join(FEATURE_GATES)}",
        ),
        Rule(
            "distinct names among FailOnUntoleratedDegradedSlice, UseRetryMechanismForSliceCreation (the slice "
            "controller's alpha gates; only for a manifest built from a revision that has them)",
            "AI-Hypercomputer/xpk@250d4b3c slice/internal/features/features.go:28-50, slice/cmd/main.go:106-116",
            "manifests",
            ["Degraded"],
            ["FailOnUntoleratedDegradedSlice"],
        ),
    ] = Field(
        default_factory=list,
        description="the slice controller's feature gates to turn on (evict on an untolerated degraded Slice, "
        "retry Slice creation)",
    )


def _vendored_release(v: str) -> str:
    tag = v if v.startswith("v") else f"v{v}"
    known = vendored.versions(vendored.GAIE)
    if tag not in known:
        raise ValueError(f"a release this repository vendors: {', '.join(known)} (manifests/vendored/sources.toml)")
    return tag


class InferenceExtensionSettings(Model):
    version: Annotated[
        str,
        AfterValidator(_vendored_release),
        Rule(
            "a release whose CRDs this repository vendors (manifests/vendored/sources.toml): v1.5.0 or v1.6.0, with or "
            "without its v; nothing is fetched at preview or up",
            THIS_PROGRAM,
            "manifests",
            "v1.4.0",
            "1.6.0",
        ),
    ] = Field(
        NEWEST["inferenceExtension"], description="the Gateway API Inference Extension release whose CRDs are applied"
    )


_ADDON = Rule(change="addon-version")


class AddonsSettings(Model):
    jobset: Annotated[JobSetAddon, _ADDON] = Field(default_factory=dict)
    kueue: Annotated[KueueAddon, _ADDON] = Field(default_factory=dict)
    lws: Annotated[LwsAddon, _ADDON] = Field(default_factory=dict)
    keda: Annotated[KedaAddon, _ADDON] = Field(default_factory=dict)
    slice_controller: SliceControllerSettings = Field(default_factory=dict)
    inference_extension: InferenceExtensionSettings = Field(default_factory=dict)

    def helm_addons(self) -> dict[str, HelmAddonSettings]:
        """The add-ons the stack installs from charts."""
        addons: dict[str, HelmAddonSettings] = {"jobset": self.jobset, "kueue": self.kueue, "lws": self.lws}
        return {**addons, "keda": self.keda} if self.keda.enabled else addons
