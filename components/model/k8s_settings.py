"""Settings of the Kubernetes half: add-ons, Kueue, demo workloads and serving (SPEC sections 6-9)."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from components.model.checks import (
    CHART_VERSION_RE,
    QUANTITY_RE,
    Model,
    SettingError,
    bucket_name,
    dns_label,
    parse_topology,
)

# ---------------------------------------------------------------------------------------------
# Cluster add-ons, Kueue, demo workloads (SPEC sections 6-8)


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

    def manifest(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for kind in ("requests", "limits"):
            amounts = getattr(self, kind).model_dump(exclude_none=True)
            if amounts:
                out[kind] = amounts
        return out


def _resources(req_cpu: str, req_mem: str, lim_cpu: str | None, lim_mem: str | None) -> ResourceRequirements:
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
        if not v.startswith("oci://"):
            raise ValueError("an OCI chart reference, oci://<registry>/<path>")
        return v

    _ns = field_validator("namespace")(classmethod(lambda cls, v: dns_label(v)))

    def pod_count(self) -> int:
        """Controller pods the chart runs on the system pool (the fit check counts each)."""
        return 1


class JobSetAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("controller", "resources")
    chart: str = "oci://registry.k8s.io/jobset/charts/jobset"
    version: str = "0.11.1"
    namespace: str = "jobset-system"
    controller_resources: ResourceRequirements = Field(default_factory=lambda: _resources("500m", "128Mi", "2", "4Gi"))


class KueueAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("controllerManager", "manager", "resources")
    chart: str = "oci://registry.k8s.io/kueue/charts/kueue"
    version: str = "0.17.4"
    namespace: str = "kueue-system"
    controller_resources: ResourceRequirements = Field(
        default_factory=lambda: _resources("500m", "512Mi", "2", "512Mi")
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
    controller_resources: ResourceRequirements = Field(default_factory=lambda: _resources("1", "1Gi", None, None))


class SliceControllerSettings(Model):
    manifest_url: str = (
        # the codelab's pinned gist revision
        "https://gist.githubusercontent.com/mwysokin/f8ff6a7f8c2f8808ba30177e51413e32/raw/"
        "9086457ea35cd31a3bb95b714bf72309a2be357c/kueue-slice-controller-v0.8.0-200.yaml"
    )
    # How long deleting (or replacing) a TPU pool waits for the Slices on it to be gone before it fails
    # (components/teardown.py). An estimate: GKE does not document how long dismantling a Slice takes.
    drain_timeout_seconds: int = Field(1200, ge=1)

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

    _names = field_validator(
        "namespace", "topology_name", "flavor_name", "admission_check_name", "cluster_queue", "local_queue"
    )(classmethod(lambda cls, v: dns_label(v)))

    @field_validator("priorities")
    @classmethod
    def _priorities(cls, v: dict[str, int]) -> dict[str, int]:
        for name in v:
            dns_label(name)
        return v


class SubslicingDemo(Model):
    enabled: bool = True
    name: str = "kueue-jobset-simple-subslicing"
    topology: str = "2x2x2"
    replicas: int = Field(6, ge=1)
    priority: str = "low-priority-1000"

    _topo = field_validator("topology")(classmethod(lambda cls, v: parse_topology(v)))
    _name = field_validator("name")(classmethod(lambda cls, v: dns_label(v)))


class SuperslicingDemo(Model):
    enabled: bool = True
    name: str = "kueue-jobset-simple-superslicing"
    topology: str = "4x4x8"
    priority: str = "medium-priority-2000"

    _topo = field_validator("topology")(classmethod(lambda cls, v: parse_topology(v)))
    _name = field_validator("name")(classmethod(lambda cls, v: dns_label(v)))

    @property
    def replicas(self) -> int:
        return 1


class DemosSettings(Model):
    subslicing: SubslicingDemo = Field(default_factory=dict)
    superslicing: SuperslicingDemo = Field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Serving (SPEC section 9)


class ServingResources(ResourceAmounts):
    """Per-pod CPU and memory of a vLLM pod (requests = limits, as in the reference)."""

    cpu: str | None = "220"
    memory: str | None = "850Gi"


class ServingRole(Model):
    # The LeaderWorkerSet's name; None = kueue-vllm-<role>-model-streamer, the reference's.
    name: str | None = None
    replicas: int = Field(4, ge=1)
    topology: str = "2x2x2"
    priority: str = "high-priority-3000"
    # None = chips in the slice x TensorCores per chip; set only to assert a value.
    tensor_parallel_size: int | None = Field(None, ge=1)
    resources: ServingResources = Field(default_factory=dict)

    _topo = field_validator("topology")(classmethod(lambda cls, v: parse_topology(v)))

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return None if v is None else dns_label(v)


# GKE's single-cluster GatewayClasses and the load balancer each one makes
# (https://cloud.google.com/kubernetes-engine/docs/how-to/gatewayclass-capabilities, "Architecture" and "Load
# balancer"; https://cloud.google.com/kubernetes-engine/docs/concepts/gateway-api#gatewayclass). Each also has a
# multi-cluster `-mc` twin, which needs a fleet and a config cluster this program does not set up.
INTERNAL_GATEWAY_CLASSES = {"gke-l7-rilb": "a regional internal Application Load Balancer"}
EXTERNAL_GATEWAY_CLASSES = {
    "gke-l7-regional-external-managed": "a regional external Application Load Balancer",
    "gke-l7-global-external-managed": "a global external Application Load Balancer",
    "gke-l7-gxlb": "a classic global external Application Load Balancer",
}


class GatewaySettings(Model):
    name: str = "llm-d-inference-gateway"
    # Internal by default: reachable from the VPC (and what is peered or connected to it) only.
    class_name: str = "gke-l7-rilb"
    # An external class puts the model's endpoint on the internet; it takes this explicit opt-in.
    expose_to_internet: bool = False

    _name = field_validator("name")(classmethod(lambda cls, v: dns_label(v)))

    @field_validator("class_name")
    @classmethod
    def _class(cls, v: str) -> str:
        if v not in INTERNAL_GATEWAY_CLASSES and v not in EXTERNAL_GATEWAY_CLASSES:
            raise ValueError(
                f"one of GKE's single-cluster GatewayClasses: {', '.join(INTERNAL_GATEWAY_CLASSES)} (internal), "
                f"{', '.join(EXTERNAL_GATEWAY_CLASSES)} (external, with serving.gateway.exposeToInternet: true)"
            )
        return v

    @model_validator(mode="after")
    def _exposure(self) -> GatewaySettings:
        if self.class_name in EXTERNAL_GATEWAY_CLASSES and not self.expose_to_internet:
            raise SettingError(
                "className",
                self.class_name,
                f"{', '.join(INTERNAL_GATEWAY_CLASSES)} (internal); {self.class_name} makes "
                f"{EXTERNAL_GATEWAY_CLASSES[self.class_name]} that serves the model to the internet, which needs "
                "serving.gateway.exposeToInternet: true as well",
            )
        if self.expose_to_internet and self.class_name in INTERNAL_GATEWAY_CLASSES:
            raise SettingError(
                "exposeToInternet",
                True,
                f"false with the internal class {self.class_name}; to expose serving, also set "
                f"serving.gateway.className to one of {', '.join(EXTERNAL_GATEWAY_CLASSES)}",
            )
        return self

    @property
    def external(self) -> bool:
        return self.class_name in EXTERNAL_GATEWAY_CLASSES


# llm-d-router releases the endpoint picker, the P/D sidecar and both charts together from one tag
# (llm-d/llm-d-router@v0.10.0 .github/workflows/ci-release.yaml: image `${repo}-disagg-sidecar` at the tag;
# hack/push-chart.sh: chart version = that tag; .github/ISSUE_TEMPLATE/new-release.md lists all of them under
# one ${VERSION}). The sidecar was renamed from llm-d-routing-sidecar in v0.9.0 (Makefile SIDECAR_IMAGE_NAME).
SIDECAR_REPOSITORY = "ghcr.io/llm-d/llm-d-router-disagg-sidecar"
RETIRED_SIDECAR_NAME = "llm-d-routing-sidecar"
# The chart `v0` is main's, whose images are tagged `main` (.github/workflows/ci-dev.yaml; routerlib
# values.yaml router.epp.image.tag: main).
FLOATING_CHART_VERSION = "v0"
FLOATING_IMAGE_TAG = "main"
# The oldest router whose sidecar takes the flags the decode pods pass (components/modelserver.py).
MIN_ROUTER_RELEASE = (0, 10)
_RELEASE_TAG_RE = re.compile(r"^v?\d+\.\d+(\.\d+)?(-[0-9A-Za-z.-]+)?$")
_IMAGE_RE = re.compile(
    r"^(?P<repository>[a-z0-9]+([._-][a-z0-9]+)*(\.[a-z0-9-]+)*(:\d+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?P<digest>@sha256:[0-9a-f]{64})?$"
)


def router_release(chart_version: str) -> tuple[int, ...] | None:
    """(major, minor[, patch]) of a pinned router chart version; None for `v0`, main's floating chart."""
    if chart_version.removeprefix("v") == FLOATING_CHART_VERSION.removeprefix("v"):
        return None
    return tuple(int(part) for part in re.findall(r"\d+", chart_version.split("-", 1)[0])[:3])


def router_image_tag(chart_version: str) -> str:
    """The tag of the images released with a router chart version (`main` for `v0`)."""
    if router_release(chart_version) is None:
        return FLOATING_IMAGE_TAG
    return "v" + chart_version.removeprefix("v")


class RouterSettings(Model):
    # llm-d's published gateway-mode chart. llm-d-router's release workflow pushes it at each release tag
    # (hack/push-chart.sh: chart version = the semver tag); `v0` is what every push to main overwrites, so
    # a release tag is the tightest pin upstream offers (llm-d/llm-d-router@71f4f099 = v0.10.0).
    chart: str = "oci://ghcr.io/llm-d/charts/llm-d-router-gateway"
    version: str = "v0.10.0"
    # The endpoint picker runs on the system pool; llm-d's guides/recipes/router/base.values.yaml sizes it so.
    epp_resources: ResourceRequirements = Field(default_factory=lambda: _resources("4", "8Gi", None, "16Gi"))
    # prefix-cache-affinity-filter's TTFT estimate (tokens/s of one prefill server). llm-d's
    # pd-disaggregation values measured 33821 on their reference fleet and ask to re-measure per
    # hardware and model (guides/recipes/router/calibration/calibrate.sh).
    peak_prefill_throughput: float = Field(33821, gt=0)

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not re.match(r"^v?\d+(\.\d+){0,2}(-[0-9A-Za-z.-]+)?$", v):
            raise ValueError("a pinned chart version such as v0.10.0 (no ranges, no 'latest')")
        release = router_release(v)
        if release is not None and release < MIN_ROUTER_RELEASE:
            raise ValueError(
                "v0.10.0 or later (or v0, main's floating chart): the decode pods' routing sidecar is the same "
                "llm-d-router release and takes that release's flags (it proxies to vLLM on 8200 by default only "
                "from v0.10.0 on; v0.9.0 and earlier default to 8001)"
            )
        return v

    @field_validator("chart")
    @classmethod
    def _chart(cls, v: str) -> str:
        if not v.startswith("oci://"):
            raise ValueError("an OCI chart reference, oci://<registry>/<path>")
        return v


class RoutingSidecarSettings(Model):
    # Unset: SIDECAR_REPOSITORY at the router's release (`ServingSettings.routing_sidecar_image`). Set it only
    # to pull that release from a mirror or by digest: the decode pods pass it llm-d-router v0.10.0's flags.
    image: str | None = None

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is None:
            return v
        match = _IMAGE_RE.match(v)
        tag = match["tag"] if match else None
        if not match or not (tag or match["digest"]) or tag in ("latest", FLOATING_IMAGE_TAG):
            raise ValueError(
                "a pinned image reference, <registry>/<path>:<release tag> or <registry>/<path>@sha256:<digest> "
                f"(no 'latest' or 'main'), or unset for {SIDECAR_REPOSITORY}:<serving.router.version>"
            )
        release = router_release(tag) if tag and _RELEASE_TAG_RE.match(tag) else None
        if match["repository"].endswith(f"/{RETIRED_SIDECAR_NAME}") or (release and release < MIN_ROUTER_RELEASE):
            raise ValueError(
                f"llm-d-router v0.10.0's sidecar or later ({SIDECAR_REPOSITORY}; unset = the router's release): "
                "older ones (llm-d-routing-sidecar up to v0.8.0, llm-d-router-disagg-sidecar v0.9.0) forward to "
                "vLLM on 8001 instead of 8200 under the flags the decode pods pass"
            )
        return v


# The waits the vLLM pod allows itself before it gives up (manifests/vllm-pod.yaml): the leader waits up to
# --ray_init_timeout for its workers, then vLLM up to VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT for its engine.
# A startup probe shorter than their sum would kill a pod that is still legitimately starting.
POD_STARTUP_WAITS_SECONDS = 1800 + 1800
# The longest a request may run through the Gateway: the router chart's GCPBackendPolicy sets the load balancer's
# backend timeout of the InferencePool to 300 s, fixed (llm-d/llm-d-router v0.10.0
# config/charts/llm-d-router-gateway/templates/gke.yaml `timeoutSec: 300`; the HTTPRoute timeout is unused on GKE,
# values.yaml `httpRoute.requestTimeout`). A serving pod asked to stop gets at least that long to finish them.
GATEWAY_REQUEST_TIMEOUT_SECONDS = 300


class ServingSettings(Model):
    enabled: bool = True
    guide: str = "pd-disaggregation"
    model: str = "Qwen/Qwen3.5-397B-A17B-FP8"
    served_model_name: str | None = None  # defaults to model
    # The bucket holding the model's weights (its name, no gs://): required while serving is enabled, no default
    # (bucket names are global; another project's bucket would answer 403). The pods get read access only.
    weights_bucket: str | None = None
    # The bucket this stack creates for vLLM's XLA compilation cache (VLLM_XLA_CACHE_PATH), the one place the pods
    # may write; None = a name derived from the project and the cluster (Settings.xla_cache_bucket).
    xla_cache_bucket: str | None = None
    model_path: str = "models--Qwen--Qwen3.5-397B-A17B-FP8/snapshots/ea5b4f81096f3901c91dea97f81324302495781d"
    image: str = "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26"
    max_model_len: int = Field(9216, ge=1)
    max_num_batched_tokens: int = Field(8192, ge=1)
    max_num_seqs: int = Field(512, ge=1)
    kv_cache_dtype: str = "fp8"
    enable_expert_parallel: bool = True
    # How vLLM reads the weights: "stream" = runai_streamer straight from gs:// (the reference's flags);
    # "mount" = from the GCS FUSE CSI volume at /data, which is only declared in that case.
    weights_via: Literal["stream", "mount"] = "stream"
    # How long a leader may take to serve /v1/models before the kubelet restarts it, and how long
    # `verify` waits for the leaders. llm-d's TPU7x dynamic-slice recipe allows 15 s + 480 x 30 s = 4 h for a
    # 480B FP8 model (guides/pd-disaggregation/modelserver/tpu/v7/vllm-dynamic-slice/prefill.yaml@b27c4f98).
    startup_timeout_seconds: int = 14400
    # How long a stopping vLLM pod may take (the pod's terminationGracePeriodSeconds): vLLM runs as PID 1 and
    # finishes its in-flight requests on SIGTERM, so this must cover the longest request the Gateway allows.
    termination_grace_period_seconds: int = 360
    prefill: ServingRole = Field(default_factory=dict)
    decode: ServingRole = Field(default_factory=dict)
    gateway: GatewaySettings = Field(default_factory=dict)
    router: RouterSettings = Field(default_factory=dict)
    routing_sidecar: RoutingSidecarSettings = Field(default_factory=dict)

    @field_validator("weights_bucket")
    @classmethod
    def _weights_bucket(cls, v: str | None, info: ValidationInfo) -> str | None:
        # A field check (`enabled` comes first), so that it is reported with every other problem of the section.
        if v is None and info.data.get("enabled", True):
            raise ValueError(
                "required while serving.enabled is true: the name of the bucket holding this environment's model "
                "weights (no default: bucket names are global, and the pods get read access to this one only)"
            )
        return None if v is None else bucket_name(v)

    @field_validator("xla_cache_bucket")
    @classmethod
    def _cache_bucket(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and v == info.data.get("weights_bucket"):
            raise ValueError(
                "a bucket other than serving.weightsBucket: the stack creates the cache bucket and the pods may "
                "write there, while they only read the weights"
            )
        return None if v is None else bucket_name(v)

    @field_validator("startup_timeout_seconds")
    @classmethod
    def _startup(cls, v: int) -> int:
        if v < POD_STARTUP_WAITS_SECONDS:
            raise ValueError(
                f"at least {POD_STARTUP_WAITS_SECONDS} seconds: the vLLM pod itself waits up to 1800 s for its Ray "
                "workers and 1800 s for its engine, and a shorter startup probe would restart it mid-load"
            )
        return v

    @field_validator("termination_grace_period_seconds")
    @classmethod
    def _grace(cls, v: int) -> int:
        if v < GATEWAY_REQUEST_TIMEOUT_SECONDS:
            raise ValueError(
                f"at least {GATEWAY_REQUEST_TIMEOUT_SECONDS} seconds, the Gateway's request timeout (the router "
                "chart's GCPBackendPolicy timeoutSec): a pod stopped sooner cuts requests that are still in flight"
            )
        return v

    # The guide names the router's Helm release (at most 53 characters) and labels every model server.
    _guide = field_validator("guide")(classmethod(lambda cls, v: dns_label(v, 53)))

    @property
    def routing_sidecar_image(self) -> str:
        """The decode pods' sidecar: `routingSidecar.image` if set, else the router's release of it."""
        return self.routing_sidecar.image or f"{SIDECAR_REPOSITORY}:{router_image_tag(self.router.version)}"

    @property
    def model_served(self) -> str:
        return self.served_model_name or self.model

    def roles(self) -> dict[str, ServingRole]:
        return {"prefill": self.prefill, "decode": self.decode}
