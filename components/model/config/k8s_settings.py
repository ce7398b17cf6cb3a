"""Settings of the Kubernetes half: add-ons, Kueue and demo workloads; serving
is components/model/config/serving_settings.py."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field, field_validator, model_validator

from components.model.addons import chart_resources, tested_sets, vendored
from components.model.addons.slice_controller import FEATURE_GATES
from components.model.config.checks import (
    CHART_VERSION_RE,
    DNS_LABEL_MAX,
    QUANTITY_RE,
    Model,
    accept_if,
    dns1035_label,
    dns_subdomain,
    raise_all,
)
from components.model.config.resources_settings import ResourceRequirements, requirements
from components.model.config.rules import (
    FLAG,
    JOBSET_WEBHOOK,
    K8S_NAMES,
    KUEUE_CRDS,
    LABELS,
    NODE_SIZES,
    QUANTITY_RULE,
    SEMVER,
    THIS_PROGRAM,
    Namespace,
    OciChart,
    PriorityName,
    Rule,
    Subdomain,
    TopologyName,
    at_least,
)

# ---------------------------------------------------------------------------------------------
# Cluster add-ons, Kueue, demo workloads


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
    replicas: Annotated[
        int,
        at_least(
            1,
            "; every replica's requests count in the system-pool fit",
            f"{THIS_PROGRAM}; {NODE_SIZES}",
            "addon-replicas",
        ),
    ] = Field(
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
    slice_controller: SliceControllerSettings = Field(default_factory=dict)
    inference_extension: InferenceExtensionSettings = Field(default_factory=dict)

    def helm_addons(self) -> dict[str, HelmAddonSettings]:
        return {"jobset": self.jobset, "kueue": self.kueue, "lws": self.lws}


_IMMUTABLE = Rule(change="kueue-immutable")
Quota = Annotated[
    str, accept_if(QUANTITY_RE.match, "a Kubernetes quantity such as 999999, 500m or 999999Pi"), QUANTITY_RULE
]
_QUOTA = "the ClusterQueue's CPU or memory quota"


class KueueSettings(Model):
    namespace: Annotated[
        Namespace,
        Rule(
            "a namespace name: a DNS-1123 label (at most 63), its own: not an add-on's namespace, not kube-*",
            f"{K8S_NAMES}; kubernetes-sigs/kueue v0.17.4 charts/kueue/templates/webhook/manifests.yaml (mpod.kb.io "
            "fails closed in managedJobsNamespaceSelector) and apis/config/v1beta2/defaults.go (kube-system and "
            "Kueue's own namespace left out)",
            "kueue-names",
            "llm_d",
            "a" * 63,
        ),
    ] = Field("llm-d-pd-disaggregation", description="the workload namespace (LocalQueue, JobSets, serving)")
    topology_name: Annotated[Subdomain, _IMMUTABLE] = Field("slice-topology", description="a Kueue object's name")
    flavor_name: Annotated[Subdomain, _IMMUTABLE] = Field("slice-rf", description="a Kueue object's name")
    admission_check_name: Annotated[Subdomain, Rule(change="kueue-names")] = Field(
        "ac", description="a Kueue object's name"
    )
    cluster_queue: Annotated[Subdomain, _IMMUTABLE] = Field("cq", description="a Kueue object's name")
    # The LocalQueue's name is also the kueue.x-k8s.io/queue-name label the program puts on every workload.
    local_queue: Annotated[
        str,
        AfterValidator(lambda v: dns_subdomain(v, DNS_LABEL_MAX, ": it is the kueue.x-k8s.io/queue-name label")),
        Rule(
            "a DNS-1123 subdomain of at most 63 characters: it is also the kueue.x-k8s.io/queue-name label of "
            "every workload",
            f"{K8S_NAMES}; {LABELS}",
            "local-queue",
            "l" * 64,
            "l.q",
        ),
    ] = Field("lq", description="a Kueue object's name")
    priorities: Annotated[
        dict[str, int],
        Rule(
            "a non-empty map of WorkloadPriorityClass name (a DNS-1123 subdomain of at most 63, the "
            "kueue.x-k8s.io/priority-class label) to an int32 value; every `priority` key names one",
            f"{KUEUE_CRDS} (workloadpriorityclasses: value int32); {LABELS}",
            "kueue-objects",
            {"Low": 1},
            {
                "low-priority-1000": -(2**31),
                "medium-priority-2000": 0,
                "high-priority-3000": 2**31 - 1,
                "p." + "x" * 61: 1,
            },
        ),
    ] = Field(
        default_factory=lambda: {"low-priority-1000": 1000, "medium-priority-2000": 2000, "high-priority-3000": 3000},
        min_length=1,
        description="the WorkloadPriorityClasses",
    )
    # None = the chips the TPU node pools provide, so Kueue's quota preemption matches the hardware.
    tpu_quota: Annotated[int | None, at_least(0, ", or unset for the chips the TPU pools provide")] = Field(
        None, ge=0, description="the ClusterQueue's `google.com/tpu` nominal quota"
    )
    cpu_quota: Quota = Field("999999", description=_QUOTA)
    memory_quota: Quota = Field("999999Pi", description=_QUOTA)

    @field_validator("priorities")
    @classmethod
    def _priorities(cls, v: dict[str, int]) -> dict[str, int]:
        # A WorkloadPriorityClass is named by the kueue.x-k8s.io/priority-class label of each workload: a
        # label value that is also an object name, so a DNS-1123 subdomain of at most 63 characters. Its value
        # is an int32 (kueue v0.17.4 CRD workloadpriorityclasses: value format int32).
        for name, value in v.items():
            try:
                dns_subdomain(name, DNS_LABEL_MAX)
            except ValueError as err:
                raise ValueError(f"priority class {name!r}: {err}") from None
            if not -(2**31) <= value < 2**31:
                raise ValueError(f"priority class {name!r}: a value from -2147483648 to 2147483647 (int32)")
        return v


# The replicated job of each demo JobSet; JobSet names its Jobs <jobset>-<replicated job>-<index>.
DEMO_REPLICATED_JOB = "job-jax"


def longest_pod_name(jobset: str, replicas: int, pods: int) -> str:
    """The longest pod name JobSet's webhook checks: it makes every Job Indexed, then refuses a JobSet whose
    GenPodName + "-abcde" is no DNS-1035 label (kubernetes-sigs/jobset v0.11.1 pkg/webhooks/jobset_webhook.go:127,254;
    pkg/util/placement/placement.go:20). Longer than every Job name, <jobset>-<replicatedJob>-<index>."""
    return f"{jobset}-{DEMO_REPLICATED_JOB}-{replicas - 1}-{pods - 1}-abcde"


def _jobset_name(v: str) -> str:
    # A JobSet's Jobs and pods take its name as prefix, and JobSet's webhook requires them to be DNS-1035 labels.
    return dns1035_label(v, DNS_LABEL_MAX - len(longest_pod_name("", 1, 1)), ": JobSet's pod names start with it")


# The keys both demos have.
DemoEnabled = Annotated[bool, Field(description="whether that demo JobSet exists"), FLAG, Rule(change="demo-enabled")]
DemoTopology = Annotated[TopologyName, Field(description="the demo's slice shape")]
DemoPriority = Annotated[PriorityName, Field(description="the demo's Kueue priority class")]
_DEMO_NAME = "the demo JobSet's name"


class SubslicingDemo(Model):
    enabled: DemoEnabled = True
    name: Annotated[
        str,
        AfterValidator(_jobset_name),
        Rule(
            "a DNS-1035 label such that JobSet's longest pod name, <name>-job-jax-<replicas - 1>-<pods - 1>-abcde, "
            "has at most 63 characters (45 with 1-10 replicas of 1-10 pods)",
            JOBSET_WEBHOOK,
            refused="a" * 46,
            accepted="a" * 45,
            context={"demos": {"subslicing": {"replicas": 10}}},
        ),
    ] = Field("kueue-jobset-simple-subslicing", description=_DEMO_NAME)
    topology: DemoTopology = "2x2x2"
    replicas: Annotated[
        int,
        at_least(
            1,
            " (slices); the longest pod name bounds it with demos.subslicing.name",
            f"{THIS_PROGRAM}; {JOBSET_WEBHOOK}",
        ),
    ] = Field(6, ge=1, description="how many sub-slices the demo asks for")
    priority: DemoPriority = "low-priority-1000"


class SuperslicingDemo(Model):
    enabled: DemoEnabled = True
    name: Annotated[
        str,
        AfterValidator(_jobset_name),
        Rule(
            "a DNS-1035 label such that JobSet's longest pod name, <name>-job-jax-0-<pods - 1>-abcde, has at most 63 "
            "characters (44 with 11-100 pods)",
            JOBSET_WEBHOOK,
            refused="0-superslice",
            accepted="a" * 44,
        ),
    ] = Field("kueue-jobset-simple-superslicing", description=_DEMO_NAME)
    topology: DemoTopology = "4x4x8"
    priority: DemoPriority = "medium-priority-2000"

    @property
    def replicas(self) -> int:
        return 1


_DEMO = Rule(change="demo-jobsets")


class DemosSettings(Model):
    subslicing: Annotated[SubslicingDemo, _DEMO] = Field(default_factory=dict)
    superslicing: Annotated[SuperslicingDemo, _DEMO] = Field(default_factory=dict)

    def jobsets(self) -> dict[str, SubslicingDemo | SuperslicingDemo]:
        return {"subslicing": self.subslicing, "superslicing": self.superslicing}
