"""Settings of the llm-d router and its decode sidecar: the chart, the endpoint picker, the sidecar's image and
resources (components/model/config/serving_settings.py holds the section)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from components.model.addons import chart_resources
from components.model.config.checks import Model, VersionOrder, raise_all, version_order
from components.model.config.images import floating
from components.model.config.oci import image_reference
from components.model.config.resources_settings import Limits, Requests, ResourceRequirements, requirements
from components.model.config.rules import (
    NODE_SIZES,
    OCI,
    QUANTITY,
    REQUESTS_LIMITS,
    ROUTER_RELEASE,
    TPU7X,
    OciChart,
    Rule,
)

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
# The oldest router whose sidecar takes the flags the decode pods pass (components/vllm_containers.py): v0.10.0's
# first pre-release already defaults to vLLM on 8200 (llm-d/llm-d-router@4a0edbb0 = v0.10.0-rc.1
# pkg/sidecar/proxy/options.go:92).
MIN_ROUTER_RELEASE = version_order("v0.10.0-rc.1")
_RELEASE_TAG_RE = re.compile(r"^v?\d+\.\d+(\.\d+)?(-[0-9A-Za-z.-]+)?$")
_IMAGE_RE = re.compile(
    r"^(?P<repository>[a-z0-9]+([._-][a-z0-9]+)*(\.[a-z0-9-]+)*(:\d+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?P<digest>@sha256:[0-9a-f]{64})?$"
)


def router_release(chart_version: str) -> VersionOrder | None:
    """The place of a pinned router chart version among releases; None for `v0`, main's floating chart."""
    if chart_version.removeprefix("v") == FLOATING_CHART_VERSION.removeprefix("v"):
        return None
    return version_order(chart_version)


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
