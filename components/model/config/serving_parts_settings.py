"""The parts of the serving settings: the prefill/decode roles and their resources, the Gateway, the weights download
(the router and its sidecar: components/model/config/router_settings.py; the section: serving_settings.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from components.model.config.checks import (
    K8S_NAMES,
    LWS_NAME_MAX,
    LWS_REVISION_LEN,
    Model,
    SettingError,
    accept_if,
    dns1035_label,
    dns_subdomain,
)
from components.model.config.images import PYTHON
from components.model.config.oci import pinned_image
from components.model.config.resources_settings import ResourceAmounts
from components.model.config.rules import (
    GATEWAY_CLASSES,
    LLMD_LIMITS,
    LWS_ROOM,
    LWS_SERVICE,
    NODE_SIZES,
    OCI,
    QUANTITY,
    TPU7X,
    Flag,
    PriorityName,
    Rule,
    TopologyName,
    at_least,
)

# The longest a request may run through the Gateway: the router chart's GCPBackendPolicy sets the load balancer's
# backend timeout of the InferencePool to 300 s, fixed (llm-d/llm-d-router v0.10.0
# config/charts/llm-d-router-gateway/templates/gke.yaml `timeoutSec: 300`; the HTTPRoute timeout is unused on GKE,
# values.yaml `httpRoute.requestTimeout`). A serving pod asked to stop gets at least that long to finish them.
GATEWAY_REQUEST_TIMEOUT_SECONDS = 300

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
# The regional classes' Envoy proxies run in the region's proxy-only subnet and connect to the backends from it; the
# global class's Google Front Ends from Google's probe ranges (https://cloud.google.com/load-balancing/docs/firewall-
# rules, "Load balancers based on the open source Envoy proxy ... traffic ... sent from IP addresses in the proxy-only
# subnet").
REGIONAL_GATEWAY_CLASSES = ("gke-l7-rilb", "gke-l7-regional-external-managed")


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

    @property
    def in_proxy_subnet(self) -> bool:
        """Whether the Gateway's proxies connect to the backends from the proxy-only subnet."""
        return self.class_name in REGIONAL_GATEWAY_CLASSES


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
