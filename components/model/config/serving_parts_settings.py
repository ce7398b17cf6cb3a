"""The parts of the serving settings: the prefill/decode roles and their resources, the Gateway, the llm-d
router and its sidecar, the weights download (components/model/config/serving_settings.py holds the section)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from components.model.addons import chart_resources
from components.model.config.checks import (
    K8S_NAMES,
    LWS_NAME_MAX,
    LWS_REVISION_LEN,
    Model,
    SettingError,
    accept_if,
    dns1035_label,
    dns_subdomain,
    raise_all,
)
from components.model.config.images import PYTHON, floating
from components.model.config.oci import image_reference, pinned_image
from components.model.config.resources_settings import (
    Limits,
    Requests,
    ResourceAmounts,
    ResourceRequirements,
    requirements,
)
from components.model.config.rules import (
    GATEWAY_CLASSES,
    LLMD_LIMITS,
    LWS_ROOM,
    LWS_SERVICE,
    NODE_SIZES,
    OCI,
    QUANTITY,
    REQUESTS_LIMITS,
    ROUTER_RELEASE,
    TPU7X,
    Flag,
    OciChart,
    PriorityName,
    Rule,
    TopologyName,
    at_least,
)

# What one TPU VM leaves to a serving pod, the bound of its CPU and memory (the TPU VM fit, cross_checks.py).
_TPU_VM = f"{QUANTITY}; {TPU7X}; {NODE_SIZES}"


class ServingResources(ResourceAmounts):
    """Per-pod CPU and memory of a vLLM pod (requests = limits, as in the reference)."""

    cpu: Annotated[
        str | None,
        Rule(
            "a Kubernetes quantity of at most what one TPU VM leaves to pods (223.37 CPUs on tpu7x-standard-4t: "
            "224 vCPUs less GKE's reservation), on decode less the routing sidecar's requests; requests = limits",
            _TPU_VM,
            refused="224",
            accepted="222370m",
        ),
    ] = Field("220", description="per-pod CPU (requests = limits)")
    memory: Annotated[
        str | None,
        Rule(
            "a Kubernetes quantity of at most what one TPU VM leaves to pods (about 933.9Gi on tpu7x-standard-4t: "
            "960 GiB less GKE's reservation and eviction threshold), on decode less the routing sidecar's requests; "
            "requests = limits",
            _TPU_VM,
            refused="934Gi",
            accepted="1Ki",
        ),
    ] = Field("850Gi", description="per-pod memory (requests = limits)")


class ServingRole(Model):
    # LWS names its leader pods' headless Service after the LWS (lws v0.8.0 pkg/controllers: the Service is named
    # lws.Name): a Service name is a DNS-1035 label. The 39-character bound is a cross-check at the root (it
    # applies to the default name too).
    name: Annotated[
        str | None,
        AfterValidator(lambda v: v if v is None else dns1035_label(v, why=": LWS names its headless Service after it")),
        Rule(
            f"a DNS-1035 label of at most {LWS_ROOM} characters, or unset for kueue-vllm-<role>-model-streamer: the "
            f"LeaderWorkerSet is named <name>-<{LWS_REVISION_LEN}-digit revision>, and Kueue bounds LWS names to "
            f"{LWS_NAME_MAX}",
            f"{LWS_SERVICE}; {LLMD_LIMITS}",
            "serving-names",
            "x" * (LWS_ROOM + 1),
            "x" * LWS_ROOM,
        ),
    ] = Field(None, description="the LeaderWorkerSet's name")
    replicas: Annotated[int, at_least(1, " (LWS groups, one slice each)", change="serving-replicas")] = Field(
        4, ge=1, description="LWS groups, one slice each"
    )
    topology: Annotated[TopologyName, Rule(refused="2x2")] = Field(
        "2x2x2", description="each group's slice; the group size (its VMs) is derived"
    )
    priority: Annotated[PriorityName, Rule(change="serving-replicas", accepted="low-priority-1000")] = Field(
        "high-priority-3000", description="the groups' Kueue priority class"
    )
    tensor_parallel_size: Annotated[
        int | None,
        Rule(
            "unset, or exactly the slice's chips x TensorCores per chip (16 for 2x2x2 on tpu7x)",
            f"{TPU7X} (2 TensorCores per chip)",
            refused=8,
            accepted=16,
        ),
    ] = Field(None, ge=1, description="set only to assert the derived `--tensor-parallel-size`")
    resources: ServingResources = Field(default_factory=dict)


# GKE's single-cluster GatewayClasses and the load balancer each one makes
# (https://cloud.google.com/kubernetes-engine/docs/how-to/gatewayclass-capabilities, "Architecture" and "Load
# balancer"; https://cloud.google.com/kubernetes-engine/docs/concepts/gateway-api#gatewayclass). Each also has a
# multi-cluster `-mc` twin, which needs a fleet and a config cluster this program does not set up.
INTERNAL_GATEWAY_CLASSES = {"gke-l7-rilb": "a regional internal Application Load Balancer"}
EXTERNAL_GATEWAY_CLASSES = {
    "gke-l7-regional-external-managed": "a regional external Application Load Balancer",
    "gke-l7-global-external-managed": "a global external Application Load Balancer",
}
# gke-l7-gxlb makes a classic Application Load Balancer, which cannot call the endpoint picker: the InferencePool
# backend is a Service Extensions callout, and the classic balancer takes no extensions
# (https://cloud.google.com/service-extensions/docs/lb-extensions-overview, "Supported Application Load Balancers").
CLASSIC_GATEWAY_CLASS = "gke-l7-gxlb"


class GatewaySettings(Model):
    # A Gateway is a custom resource, and the router chart's HTTPRoute names it in parentRefs[].name, cut to 63
    # (`trunc 63`): a longer name would leave the route attached to no Gateway.
    name: Annotated[
        str,
        AfterValidator(lambda v: dns_subdomain(v, 63, ": the router chart's HTTPRoute names the Gateway cut to 63")),
        Rule(
            "a DNS-1123 subdomain of at most 63 characters: a custom resource's name, which the router chart's "
            "HTTPRoute names in its parentRef cut to 63",
            f"{K8S_NAMES}; llm-d/llm-d-router 71f4f099 config/charts/llm-d-router-gateway/templates/_helpers.tpl",
            "serving-names",
            "Gateway",
            "g." * 31 + "g",
        ),
    ] = Field("llm-d-inference-gateway", description="the Gateway's name")
    class_name: Annotated[
        str,
        accept_if(
            lambda v: v in INTERNAL_GATEWAY_CLASSES or v in EXTERNAL_GATEWAY_CLASSES,
            f"one of GKE's single-cluster GatewayClasses: {', '.join(INTERNAL_GATEWAY_CLASSES)} (internal), "
            f"{', '.join(EXTERNAL_GATEWAY_CLASSES)} (external, with serving.gateway.exposeToInternet: true); not "
            f"{CLASSIC_GATEWAY_CLASS}, a classic load balancer, which cannot call the router's endpoint picker",
        ),
        Rule(
            "a single-cluster GKE GatewayClass: gke-l7-rilb (internal), or gke-l7-regional-external-managed, "
            "gke-l7-global-external-managed (external: only with serving.gateway.exposeToInternet); not the classic "
            "gke-l7-gxlb, which takes no Service Extensions, so no InferencePool",
            GATEWAY_CLASSES,
            refused="gke-l7-gxlb",
            accepted="gke-l7-global-external-managed",
            context={"serving": {"gateway": {"exposeToInternet": True}}},
        ),
    ] = Field("gke-l7-rilb", description="the Gateway's GKE class (default: regional internal)")
    expose_to_internet: Annotated[
        Flag,
        Rule(
            "true or false; true exactly when serving.gateway.className is an external class (then a warning says "
            "what is exposed)",
            GATEWAY_CLASSES,
            refused=False,
            accepted=True,
            context={"serving": {"gateway": {"className": "gke-l7-regional-external-managed"}}},
        ),
    ] = Field(False, description="the opt-in an external Gateway class needs")

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
# The oldest router whose sidecar takes the flags the decode pods pass (components/vllm_containers.py).
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


# What the router chart (llm-d-router v0.10.0 routerlib/values.yaml:59-65) gives the picker where eppResources is
# silent: Helm merges the block set over it key by key (components/model/addons/chart_resources.py).
EPP_CHART_RESOURCES = requirements("8", "8Gi", None, "16Gi")


class RouterSettings(Model):
    # llm-d's published gateway-mode chart. llm-d-router's release workflow pushes it at each release tag
    # (hack/push-chart.sh: chart version = the semver tag); `v0` is what every push to main overwrites, so
    # a release tag is the tightest pin upstream offers (llm-d/llm-d-router@71f4f099 = v0.10.0).
    chart: OciChart = Field(
        "oci://ghcr.io/llm-d/charts/llm-d-router-gateway",
        description="llm-d's router chart (EPP, InferencePool, HTTPRoute)",
    )
    version: Annotated[
        str,
        Rule(
            "a pinned chart version v0.10.0 or later, or v0 (main's floating chart)",
            f"{ROUTER_RELEASE}; components/vllm_containers.py (the sidecar flags of v0.10.0)",
            refused="v0.9.0",
            accepted="v0",
        ),
    ] = Field("v0.10.0", description="the router chart's release")
    # The endpoint picker runs on the system pool; llm-d's guides/recipes/router/base.values.yaml sizes it so.
    epp_resources: ResourceRequirements = Field(
        default_factory=lambda: requirements("4", "8Gi", None, "16Gi"), description="the endpoint picker's resources"
    )
    # prefix-cache-affinity-filter's TTFT estimate (tokens/s of one prefill server). llm-d's
    # pd-disaggregation values measured 33821 on their reference fleet and ask to re-measure per
    # hardware and model (guides/recipes/router/calibration/calibrate.sh).
    peak_prefill_throughput: Annotated[
        float,
        Rule(
            "a number greater than 0 (tokens/s of one prefill server)",
            "llm-d guides/recipes/router (prefix-cache-affinity-filter)",
            refused=0,
            accepted=0.001,
        ),
    ] = Field(33821, gt=0, description="the P/D decider's prefill throughput estimate (re-measure per hardware)")

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

    @model_validator(mode="after")
    def _epp_requests_within_the_charts_limits(self) -> RouterSettings:
        raise_all(chart_resources.kept_limit_problems("epp_resources", EPP_CHART_RESOURCES, self.epp_resources))
        return self

    def rendered_epp_resources(self) -> ResourceRequirements:
        """The picker's resources as the chart renders them: the amounts set over the chart's own."""
        return chart_resources.rendered(EPP_CHART_RESOURCES, self.epp_resources)


# The sidecar runs on a TPU VM beside decode's vLLM: its requests count in the pod's (a native sidecar's requests
# add to the main containers', https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/#resource-
# sharing-within-containers), and Kueue keeps the pod shape of a running LeaderWorkerSet, requests included
# (components/model/serving/rollout.py): requests change by a new decode LeaderWorkerSet, limits in place.
_SIDECAR = "; requests at most limits; decode's vLLM requests plus these fit one TPU VM"
_SIDECAR_SOURCES = f"{QUANTITY}; {REQUESTS_LIMITS}; {TPU7X}; {NODE_SIZES}"
_LIMIT = "a Kubernetes quantity; requests at most limits"


class SidecarRequests(Requests):
    cpu: Annotated[
        str | None, Rule("a Kubernetes quantity" + _SIDECAR, _SIDECAR_SOURCES, "serving-replicas", "-1", "0.001")
    ] = Field(None, description="the container's CPU request")
    memory: Annotated[
        str | None, Rule("a Kubernetes quantity" + _SIDECAR, _SIDECAR_SOURCES, "serving-replicas", "4 Gi", "1Ki")
    ] = Field(None, description="the container's memory request")


class SidecarLimits(Limits):
    cpu: Annotated[str | None, Rule(_LIMIT, _SIDECAR_SOURCES, "serving-pods", "-1", "1e3")] = Field(
        None, description="the container's CPU limit"
    )
    memory: Annotated[str | None, Rule(_LIMIT, _SIDECAR_SOURCES, "serving-pods", "4 Gi", "64Gi")] = Field(
        None, description="the container's memory limit"
    )


class SidecarResources(ResourceRequirements):
    requests: SidecarRequests = Field(default_factory=dict)
    limits: SidecarLimits = Field(default_factory=dict)


class RoutingSidecarSettings(Model):
    # Unset: SIDECAR_REPOSITORY at the router's release (`ServingSettings.routing_sidecar_image`). Set it only
    # to pull that release from a mirror or by digest: the decode pods pass it llm-d-router v0.10.0's flags.
    image: Annotated[
        str | None,
        Rule(
            "an OCI image reference pinned by a release tag (v0.10.0 or later; latest/main only with a digest), a "
            "digest or both, not llm-d-routing-sidecar; or unset for the router's own release",
            f"{OCI}; {ROUTER_RELEASE}",
            refused="ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0",
            accepted="mirror.example/llm-d/sidecar@sha256:" + "0" * 64,
        ),
    ] = Field(None, description="the decode pods' routing sidecar (unset: the router's own release)")
    resources: SidecarResources = Field(
        default_factory=lambda: SidecarResources(
            requests=SidecarRequests(cpu="1", memory="256Mi"), limits=SidecarLimits(cpu="2", memory="1Gi")
        ),
        description="the routing sidecar's resources, an estimate (a Go reverse proxy: its connections to the "
        "prefill leaders and to its own vLLM)",
    )

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is None:
            return v
        image_reference(v)
        match = _IMAGE_RE.match(v)
        tag = match["tag"] if match else None
        if not match or floating(v):
            raise ValueError(
                "a pinned image reference, <registry>/<path>:<release tag>[@sha256:<digest>] or "
                "<registry>/<path>@sha256:<digest> (no 'latest' or 'main' without a digest), or unset for "
                f"{SIDECAR_REPOSITORY}:<serving.router.version>"
            )
        release = router_release(tag) if tag and _RELEASE_TAG_RE.match(tag) else None
        if match["repository"].endswith(f"/{RETIRED_SIDECAR_NAME}") or (release and release < MIN_ROUTER_RELEASE):
            raise ValueError(
                f"llm-d-router v0.10.0's sidecar or later ({SIDECAR_REPOSITORY}; unset = the router's release): "
                "older ones (llm-d-routing-sidecar up to v0.8.0, llm-d-router-disagg-sidecar v0.9.0) forward to "
                "vLLM on 8001 instead of 8200 under the flags the decode pods pass"
            )
        return v


class WeightsDownloadSettings(Model):
    # Opt-in: a Job on the system pool fills serving.weightsBucket from Hugging Face at the revision
    # serving.modelPath pins, and the serving LeaderWorkerSets wait for it (components/weights_download_job.py).
    enabled: Annotated[
        Flag,
        Rule(
            "true or false; true needs serving.modelPath in Hugging Face's cache layout of serving.model, "
            "models--<org>--<name>/snapshots/<40-hex revision> (the Job reads the repository and revision from it)",
            "huggingface/huggingface_hub src/huggingface_hub/file_download.py (repo_folder_name; snapshots/<commit>)",
            accepted=True,
        ),
    ] = Field(False, description="a Job that fills the weights bucket from Hugging Face before serving starts")
    image: Annotated[
        str,
        AfterValidator(pinned_image),
        Rule(
            "a pinned OCI image reference with python3 (3.8 or later): an exact tag, a sha256 digest or both, no "
            "'latest' without a digest",
            OCI,
            refused="docker.io/library/python:latest",
            accepted="python@sha256:" + "0" * 64,
        ),
    ] = Field(
        PYTHON.reference, description="the download Job's image (python3; the program uses the standard library only)"
    )
