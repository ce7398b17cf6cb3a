"""Settings of the Kubernetes half: add-ons, Kueue and demo workloads; serving
is components/model/serving_settings.py."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from components.model.checks import (
    CHART_VERSION_RE,
    DNS_LABEL_MAX,
    QUANTITY_RE,
    Model,
    SettingError,
    cpu_millis,
    dns1035_label,
    dns_label,
    dns_subdomain,
    memory_bytes,
    parse_topology,
    raise_all,
)
from components.model.oci import oci_chart
from components.model.slice_controller import FEATURE_GATES

# ---------------------------------------------------------------------------------------------
# Cluster add-ons, Kueue, demo workloads


class ResourceAmounts(Model):
    cpu: str | None = None
    memory: str | None = None

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, v: str | None) -> str | None:
        if v is not None and not QUANTITY_RE.match(v):
            raise ValueError("a Kubernetes quantity such as 500m, 2, 512Mi or 4Gi")
        return v


class ResourceRequirements(Model):
    requests: ResourceAmounts = Field(default_factory=dict)
    limits: ResourceAmounts = Field(default_factory=dict)

    @model_validator(mode="after")
    def _requests_within_limits(self) -> ResourceRequirements:
        # The API server refuses a container whose request exceeds its limit (k8s.io/kubernetes
        # pkg/apis/core/validation/validation.go ValidateResourceRequirements: "must be less than or equal to
        # <resource> limit"); the chart would fail at `pulumi up`, so say it here.
        errors = []
        for kind, amount in (("cpu", cpu_millis), ("memory", memory_bytes)):
            request, limit = getattr(self.requests, kind), getattr(self.limits, kind)
            if request is not None and limit is not None and amount(request) > amount(limit):
                errors.append(SettingError(f"requests.{kind}", request, f"at most limits.{kind} ({limit})"))
        raise_all(errors)
        return self

    def manifest(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for kind in ("requests", "limits"):
            amounts = getattr(self, kind).model_dump(exclude_none=True)
            if amounts:
                out[kind] = amounts
        return out


def requirements(req_cpu: str, req_mem: str, lim_cpu: str | None, lim_mem: str | None) -> ResourceRequirements:
    return ResourceRequirements(
        requests=ResourceAmounts(cpu=req_cpu, memory=req_mem),
        limits=ResourceAmounts(cpu=lim_cpu, memory=lim_mem),
    )


class HelmAddonSettings(Model):
    """An add-on installed from its OCI Helm chart; subclasses give the pinned defaults."""

    chart: str
    version: str
    namespace: str
    # Defaults are the pinned chart's own values.yaml defaults, so the fit check sees real numbers.
    controller_resources: ResourceRequirements
    # Where the chart's values.yaml keeps the controller's resources.
    resources_path: ClassVar[tuple[str, ...]] = ()

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not CHART_VERSION_RE.match(v):
            raise ValueError("a pinned chart version such as 0.11.1 (no ranges, no 'latest')")
        return v.removeprefix("v")

    @field_validator("chart")
    @classmethod
    def _chart(cls, v: str) -> str:
        return oci_chart(v)

    _ns = field_validator("namespace")(classmethod(lambda cls, v: dns_label(v)))

    def pod_count(self) -> int:
        """Controller pods the chart runs on the system pool (the fit check counts each)."""
        return 1


class JobSetAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("controller", "resources")
    chart: str = "oci://registry.k8s.io/jobset/charts/jobset"
    version: str = "0.11.1"
    namespace: str = "jobset-system"
    controller_resources: ResourceRequirements = Field(
        default_factory=lambda: requirements("500m", "128Mi", "2", "4Gi")
    )


class KueueAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("controllerManager", "manager", "resources")
    chart: str = "oci://registry.k8s.io/kueue/charts/kueue"
    version: str = "0.17.4"
    namespace: str = "kueue-system"
    controller_resources: ResourceRequirements = Field(
        default_factory=lambda: requirements("500m", "512Mi", "2", "512Mi")
    )
    # The chart's controllerManager.replicas (its default is 1). Two or more run under the chart's
    # PodDisruptionBudget, so one webhook endpoint stays through a drain (components/model/kueue_config.py).
    replicas: int = Field(2, ge=1)

    def pod_count(self) -> int:
        return self.replicas


class LwsAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("resources",)
    chart: str = "oci://registry.k8s.io/lws/charts/lws"
    version: str = "0.8.0"
    namespace: str = "lws-system"
    controller_resources: ResourceRequirements = Field(default_factory=lambda: requirements("1", "1Gi", None, None))


class SliceControllerSettings(Model):
    manifest_url: str = (
        # the codelab's pinned gist revision
        "https://gist.githubusercontent.com/mwysokin/f8ff6a7f8c2f8808ba30177e51413e32/raw/"
        "9086457ea35cd31a3bb95b714bf72309a2be357c/kueue-slice-controller-v0.8.0-200.yaml"
    )
    # How long deleting (or replacing) a TPU pool waits for the Slices on it to be gone before it fails
    # (components/teardown.py). An estimate: GKE does not document how long dismantling a Slice takes.
    drain_timeout_seconds: int = Field(1200, ge=1)
    # The controller's alpha feature gates to turn on (components/model/slice_controller.py): none by default,
    # since the pinned manifest's build may predate them and an unknown gate stops the controller.
    feature_gates: list[str] = Field(default_factory=list)

    @field_validator("feature_gates")
    @classmethod
    def _gates(cls, v: list[str]) -> list[str]:
        unknown = [g for g in v if g not in FEATURE_GATES]
        if unknown or len(set(v)) != len(v):
            raise ValueError(f"distinct names among {', '.join(FEATURE_GATES)}")
        return v

    @field_validator("manifest_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith("https://") or re.search(r"/(latest|main|master|HEAD)/", v):
            raise ValueError("an https:// URL of a pinned manifest (a tag or commit, not latest/main)")
        return v


class InferenceExtensionSettings(Model):
    version: str = "v1.5.0"

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not CHART_VERSION_RE.match(v):
            raise ValueError("a released tag such as v1.5.0")
        return v if v.startswith("v") else f"v{v}"


class AddonsSettings(Model):
    jobset: JobSetAddon = Field(default_factory=dict)
    kueue: KueueAddon = Field(default_factory=dict)
    lws: LwsAddon = Field(default_factory=dict)
    slice_controller: SliceControllerSettings = Field(default_factory=dict)
    inference_extension: InferenceExtensionSettings = Field(default_factory=dict)

    def helm_addons(self) -> dict[str, HelmAddonSettings]:
        return {"jobset": self.jobset, "kueue": self.kueue, "lws": self.lws}


class KueueSettings(Model):
    namespace: str = "llm-d-pd-disaggregation"
    topology_name: str = "slice-topology"
    flavor_name: str = "slice-rf"
    admission_check_name: str = "ac"
    cluster_queue: str = "cq"
    local_queue: str = "lq"
    priorities: dict[str, int] = Field(
        default_factory=lambda: {
            "low-priority-1000": 1000,
            "medium-priority-2000": 2000,
            "high-priority-3000": 3000,
        },
        min_length=1,
    )
    # None = the chips the TPU node pools provide, so Kueue's quota preemption matches the hardware.
    tpu_quota: int | None = Field(None, ge=0)
    cpu_quota: str = "999999"
    memory_quota: str = "999999Pi"

    # A namespace is a DNS-1123 label (k8s ValidateNamespaceName).
    _ns = field_validator("namespace")(classmethod(lambda cls, v: dns_label(v)))
    # Kueue's objects are custom resources, named by DNS-1123 subdomains, and the pinned v0.17.4 CRDs pattern
    # references to them the same way (LocalQueue spec.clusterQueue, ResourceFlavor spec.topologyName,
    # ClusterQueue flavors[].name: maxLength 253 and the subdomain pattern).
    _subdomains = field_validator("topology_name", "flavor_name", "admission_check_name", "cluster_queue")(
        classmethod(lambda cls, v: dns_subdomain(v))
    )
    # The LocalQueue's name is also the kueue.x-k8s.io/queue-name label the program puts on every workload, so
    # it is a label value as well: a subdomain of at most 63 characters.
    _lq = field_validator("local_queue")(
        classmethod(lambda cls, v: dns_subdomain(v, DNS_LABEL_MAX, ": it is the kueue.x-k8s.io/queue-name label"))
    )

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

    @field_validator("cpu_quota", "memory_quota")
    @classmethod
    def _quota(cls, v: str) -> str:
        if not QUANTITY_RE.match(v):
            raise ValueError("a Kubernetes quantity such as 999999, 500m or 999999Pi")
        return v


# The replicated job of each demo JobSet; JobSet names its Jobs <jobset>-<replicated job>-<index>.
DEMO_REPLICATED_JOB = "job-jax"


def longest_job_name(jobset: str, replicas: int) -> str:
    """The longest Job name JobSet generates (kubernetes-sigs/jobset v0.11.1 pkg/util/placement GenJobName)."""
    return f"{jobset}-{DEMO_REPLICATED_JOB}-{replicas - 1}"


def _jobset_name(v: str) -> str:
    # A JobSet's Jobs (and their pods and headless Service) take its name as prefix, and JobSet's webhook
    # requires them to be DNS-1035 labels (jobset_webhook.go validateCreate, IsDNS1035Label).
    return dns1035_label(v, DNS_LABEL_MAX - len(f"-{DEMO_REPLICATED_JOB}-0"), ": JobSet's Job names start with it")


class SubslicingDemo(Model):
    enabled: bool = True
    name: str = "kueue-jobset-simple-subslicing"
    topology: str = "2x2x2"
    replicas: int = Field(6, ge=1)
    priority: str = "low-priority-1000"

    _topo = field_validator("topology")(classmethod(lambda cls, v: parse_topology(v)))
    _name = field_validator("name")(classmethod(lambda cls, v: _jobset_name(v)))


class SuperslicingDemo(Model):
    enabled: bool = True
    name: str = "kueue-jobset-simple-superslicing"
    topology: str = "4x4x8"
    priority: str = "medium-priority-2000"

    _topo = field_validator("topology")(classmethod(lambda cls, v: parse_topology(v)))
    _name = field_validator("name")(classmethod(lambda cls, v: _jobset_name(v)))

    @property
    def replicas(self) -> int:
        return 1


class DemosSettings(Model):
    subslicing: SubslicingDemo = Field(default_factory=dict)
    superslicing: SuperslicingDemo = Field(default_factory=dict)
