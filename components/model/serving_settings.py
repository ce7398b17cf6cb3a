"""Settings of serving: the prefill/decode roles, the Gateway, the llm-d router and its
sidecar, vLLM."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from components.model import weights
from components.model.checks import (
    K8S_NAMES,
    LWS_NAME_MAX,
    LWS_REVISION_LEN,
    Model,
    SettingError,
    bucket_name,
    dns1035_label,
)
from components.model.k8s_settings import ResourceAmounts, ResourceRequirements, requirements
from components.model.oci import OCI_REFERENCE_RE, image_reference
from components.model.reference_sources import (
    BUCKET,
    GATEWAY_CLASSES,
    GCS_OBJECTS,
    LABELS,
    LLMD_LIMITS,
    LWS_ROOM,
    LWS_SERVICE,
    NODE_SIZES,
    OCI,
    QUANTITY,
    ROUTER_RELEASE,
    THIS_PROGRAM,
    TPU7X,
    VLLM_CACHE,
    VLLM_SCHEDULER,
    Flag,
    OciChart,
    PriorityName,
    Rule,
    Subdomain,
    TopologyName,
)

# What one TPU VM leaves to a serving pod, the bound of its CPU and memory (the TPU VM fit, cross_checks.py).
_TPU_VM = f"{QUANTITY}; {TPU7X}; {NODE_SIZES}"


class ServingResources(ResourceAmounts):
    """Per-pod CPU and memory of a vLLM pod (requests = limits, as in the reference)."""

    cpu: Annotated[
        str | None,
        Rule(
            "a Kubernetes quantity of at most what one TPU VM leaves to pods (223.37 CPUs on tpu7x-standard-4t: "
            "224 vCPUs less GKE's reservation); requests = limits",
            _TPU_VM,
            refused="224",
            accepted="223370m",
        ),
    ] = Field("220", description="per-pod CPU (requests = limits)")
    memory: Annotated[
        str | None,
        Rule(
            "a Kubernetes quantity of at most what one TPU VM leaves to pods (about 933.9Gi on tpu7x-standard-4t: "
            "960 GiB less GKE's reservation and eviction threshold); requests = limits",
            _TPU_VM,
            refused="934Gi",
            accepted="1Ki",
        ),
    ] = Field("850Gi", description="per-pod memory (requests = limits)")


class ServingRole(Model):
    name: Annotated[
        str | None,
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
    replicas: Annotated[
        int, Rule("an integer of at least 1 (LWS groups, one slice each)", THIS_PROGRAM, "serving-replicas", 0, 1)
    ] = Field(4, ge=1, description="LWS groups, one slice each")
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

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        # LWS names its leader pods' headless Service after the LWS (lws v0.8.0 pkg/controllers: the
        # Service is named lws.Name): a Service name is a DNS-1035 label. The 39-character bound is a
        # cross-check at the root (it applies to the default name too).
        return None if v is None else dns1035_label(v, why=": LWS names its headless Service after it")


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
    # A Gateway is a custom resource, and the router chart's HTTPRoute names it in parentRefs[].name.
    name: Annotated[
        Subdomain,
        Rule(
            "a DNS-1123 subdomain (at most 253): a custom resource's name, and an HTTPRoute parentRef's ObjectName",
            f"{K8S_NAMES}; gateway-api v1.4.1 CRDs (ObjectName)",
            "serving-names",
            "Gateway",
            "g." * 126 + "g",
        ),
    ] = Field("llm-d-inference-gateway", description="the Gateway's name")
    class_name: Annotated[
        str,
        Rule(
            "a single-cluster GKE GatewayClass: gke-l7-rilb (internal), or gke-l7-regional-external-managed, "
            "gke-l7-global-external-managed, gke-l7-gxlb (external: only with serving.gateway.exposeToInternet)",
            GATEWAY_CLASSES,
            refused="gke-l7-rilb-mc",
            accepted="gke-l7-gxlb",
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
            context={"serving": {"gateway": {"className": "gke-l7-gxlb"}}},
        ),
    ] = Field(False, description="the opt-in an external Gateway class needs")

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

# vLLM's --kv-cache-dtype choices (vllm-project/vllm vllm/config/cache.py, CacheDType), the union over the
# releases around the pinned nightly (float16 and int8 come and go between releases).
VLLM_KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "int8", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")


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
    chart: OciChart = Field(
        "oci://ghcr.io/llm-d/charts/llm-d-router-gateway",
        description="llm-d's router chart (EPP, InferencePool, HTTPRoute)",
    )
    version: Annotated[
        str,
        Rule(
            "a pinned chart version v0.10.0 or later, or v0 (main's floating chart)",
            f"{ROUTER_RELEASE}; components/modelserver.py (the sidecar flags of v0.10.0)",
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
    ] = Field(
        33821,
        gt=0,
        description="the P/D decider's prefill throughput estimate (re-measure per hardware)",
    )

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


class RoutingSidecarSettings(Model):
    # Unset: SIDECAR_REPOSITORY at the router's release (`ServingSettings.routing_sidecar_image`). Set it only
    # to pull that release from a mirror or by digest: the decode pods pass it llm-d-router v0.10.0's flags.
    image: Annotated[
        str | None,
        Rule(
            "an OCI image reference pinned by a release tag (v0.10.0 or later, not latest/main) or a digest, not "
            "llm-d-routing-sidecar; or unset for the router's own release",
            f"{OCI}; {ROUTER_RELEASE}",
            refused="ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0",
            accepted="mirror.example/llm-d/sidecar@sha256:" + "0" * 64,
        ),
    ] = Field(None, description="the decode pods' routing sidecar (unset: the router's own release)")

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is None:
            return v
        image_reference(v)
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


# Python's official image at an exact tag: the download Job's program needs only the standard library.
DOWNLOAD_IMAGE = "docker.io/library/python:3.12.8-slim-bookworm"


class WeightsDownloadSettings(Model):
    # Opt-in: a Job on the system pool fills serving.weightsBucket from Hugging Face at the revision
    # serving.modelPath pins, and the serving LeaderWorkerSets wait for it (components/weights.py).
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
        Rule(
            "a pinned OCI image reference with python3: an exact tag or a sha256 digest, no 'latest'",
            OCI,
            refused="docker.io/library/python:latest",
            accepted="python@sha256:" + "0" * 64,
        ),
    ] = Field(
        DOWNLOAD_IMAGE, description="the download Job's image (python3; the program uses the standard library only)"
    )

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        image_reference(v)
        match = OCI_REFERENCE_RE.match(v)
        if not match or not (match["tag"] or match["digest"]) or (match["tag"] == "latest" and not match["digest"]):
            raise ValueError(
                "a pinned image reference with python3 (3.8 or later): [registry/]path:<exact tag> or "
                "[registry/]path@sha256:<digest>, no 'latest'"
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
    enabled: Annotated[Flag, Rule(change="serving-layer")] = Field(
        True, description="the whole serving layer (HF Secret, KSA, bucket IAM, Gateway, router, LWS)"
    )
    guide: Annotated[
        str,
        AfterValidator(lambda v: dns1035_label(v, 53, ": it names the router's Helm release and EPP Service")),
        Rule(
            "a DNS-1035 label of at most 53 characters: it names the router's Helm release (Helm's bound) and its "
            "EPP Service, <guide[:40]>-epp (a Service name starts with a letter)",
            f"{K8S_NAMES}; helm/helm pkg/chartutil/validate_name.go (maxReleaseNameLen = 53); llm-d/llm-d-router "
            "71f4f099 config/charts/routerlib/templates/_helpers.tpl (llm-d-router.name)",
            "guide",
            "1-guide",
            "g" * 53,
        ),
    ] = Field(
        "pd-disaggregation",
        description="the router's Helm release and the `llm-d.ai/guide` label the router selects pods by",
    )
    model: Annotated[
        str,
        Rule(
            "a non-empty model name whose last path segment is a label value (at most 63 letters, digits, '-', "
            "'_', '.', alphanumeric at both ends): it labels every pod llm-d.ai/model",
            LABELS,
            refused="",
            accepted="o/" + "m" * 63,
        ),
    ] = Field("Qwen/Qwen3.5-397B-A17B-FP8", description="the model; its last segment labels every pod `llm-d.ai/model`")
    served_model_name: Annotated[
        str | None,
        Rule(
            "a non-empty string (what clients send as `model`), or unset for serving.model",
            "vllm-project/vllm vllm/config/model.py (served_model_name)",
            refused="",
            accepted="m",
        ),
    ] = Field(None, description="vLLM `--served-model-name`, what clients send")
    # No default: bucket names are global, and another project's bucket would answer 403.
    weights_bucket: Annotated[
        str | None,
        BUCKET,
        Rule(
            f"required while serving is on: {BUCKET.allowed}",
            change="weights-bucket",
            refused="gs://my-weights",
            accepted="b" * 3,
        ),
    ] = Field(None, description="the bucket holding the model weights, which the pods only read")
    # VLLM_XLA_CACHE_PATH, the one place the pods may write; unset: Settings.xla_cache_bucket derives it.
    xla_cache_bucket: Annotated[
        str | None,
        BUCKET,
        Rule(
            "a bucket name (the same rule), other than serving.weightsBucket; or unset for xla-cache-<hash of "
            "project and cluster>",
            change="cache-bucket",
            refused="my-weights",
            accepted="c" * 63,
        ),
    ] = Field(None, description="the bucket this stack creates for vLLM's XLA compilation cache")
    model_path: Annotated[
        str,
        Rule(
            "a Cloud Storage object path inside the bucket: 1-1024 bytes of UTF-8, no line breaks, no leading /",
            GCS_OBJECTS,
            refused="/models",
            accepted="m" * 1024,
        ),
    ] = Field(
        "models--Qwen--Qwen3.5-397B-A17B-FP8/snapshots/ea5b4f81096f3901c91dea97f81324302495781d",
        description="the weights' path inside the bucket (`--model=gs://<bucket>/<path>`)",
    )
    image: Annotated[
        str,
        AfterValidator(image_reference),
        Rule(
            "an OCI image reference, [registry[:port]/]repository[:tag][@digest], lowercase repository, tag up to "
            "128 characters, name up to 255",
            OCI,
            refused="docker.io/vLLM/vllm-tpu:nightly",
            accepted="localhost:5000/v/t:" + "x" * 128 + "@sha256:" + "a" * 64,
        ),
    ] = Field(
        "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26",
        description="the vLLM TPU image of prefill and decode",
    )
    max_model_len: Annotated[int, Rule("an integer of at least 1", VLLM_SCHEDULER, refused=0, accepted=1)] = Field(
        9216, ge=1, description="the vLLM flag of the same name"
    )
    max_num_batched_tokens: Annotated[
        int,
        Rule("an integer of at least 1 and at least serving.maxNumSeqs", VLLM_SCHEDULER, refused=511, accepted=512),
    ] = Field(8192, ge=1, description="the vLLM flag of the same name")
    max_num_seqs: Annotated[
        int,
        Rule(
            "an integer of at least 1 and at most serving.maxNumBatchedTokens", VLLM_SCHEDULER, refused=8193, accepted=1
        ),
    ] = Field(512, ge=1, description="the vLLM flag of the same name")
    kv_cache_dtype: Annotated[
        str,
        Rule(
            "a vLLM --kv-cache-dtype: auto, float16, bfloat16, int8, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla",
            VLLM_CACHE,
            refused="fp9",
            accepted="auto",
        ),
    ] = Field("fp8", description="vLLM `--kv-cache-dtype`")
    enable_expert_parallel: Flag = Field(True, description="vLLM `--enable-expert-parallel`")
    # "stream" is runai_streamer (the reference's flags); the GCS FUSE volume is declared only for "mount".
    weights_via: Annotated[
        Literal["stream", "mount"], Rule("stream or mount", THIS_PROGRAM, refused="copy", accepted="mount")
    ] = Field(
        "stream",
        description="`stream`: vLLM streams from `gs://`; `mount`: reads the GCS FUSE volume at `/data`",
    )
    # How long a leader may take to serve /v1/models before the kubelet restarts it, and how long
    # `verify` waits for the leaders. llm-d's TPU7x dynamic-slice recipe allows 15 s + 480 x 30 s = 4 h for a
    # 480B FP8 model (guides/pd-disaggregation/modelserver/tpu/v7/vllm-dynamic-slice/prefill.yaml@b27c4f98).
    startup_timeout_seconds: Annotated[
        int,
        Rule(
            "an integer of at least 3600 (the vLLM pod's own waits: 1800 s for Ray workers, 1800 s for its engine)",
            "manifests/vllm-pod.yaml (--ray_init_timeout, VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT)",
            refused=3599,
            accepted=3600,
        ),
    ] = Field(14400, description="the leaders' startup-probe budget for loading the model")
    # How long a stopping vLLM pod may take (the pod's terminationGracePeriodSeconds): vLLM runs as PID 1 and
    # finishes its in-flight requests on SIGTERM, so this must cover the longest request the Gateway allows.
    termination_grace_period_seconds: Annotated[
        int,
        Rule(
            "an integer of at least 300, the Gateway's request timeout: a pod stopped sooner cuts requests in flight",
            "llm-d/llm-d-router v0.10.0 chart (GCPBackendPolicy timeoutSec 300); components/router.py",
            refused=299,
            accepted=300,
        ),
    ] = Field(360, description="how long a stopping vLLM pod may finish its requests")
    prefill: ServingRole = Field(default_factory=dict)
    decode: ServingRole = Field(default_factory=dict)
    gateway: Annotated[GatewaySettings, Rule(change="gateway")] = Field(default_factory=dict)
    router: Annotated[RouterSettings, Rule(change="router")] = Field(default_factory=dict)
    routing_sidecar: RoutingSidecarSettings = Field(default_factory=dict)
    weights_download: Annotated[WeightsDownloadSettings, Rule(change="weights-download")] = Field(default_factory=dict)

    @field_validator("kv_cache_dtype")
    @classmethod
    def _kv_dtype(cls, v: str) -> str:
        if v not in VLLM_KV_CACHE_DTYPES:
            raise ValueError(f"a vLLM --kv-cache-dtype: {', '.join(VLLM_KV_CACHE_DTYPES)}")
        return v

    @field_validator("model", "served_model_name")
    @classmethod
    def _not_empty(cls, v: str | None) -> str | None:
        # Both end up in vLLM's command line (--served-model-name=) and the model one in every pod's llm-d.ai/model
        # label; an empty name would serve a model clients cannot name.
        if v is not None and not v.strip():
            raise ValueError("a non-empty model name (unset serving.servedModelName to serve under serving.model)")
        return v

    @field_validator("model_path")
    @classmethod
    def _model_path(cls, v: str) -> str:
        # A Cloud Storage object name prefix (https://cloud.google.com/storage/docs/objects#naming: 1-1024
        # bytes of UTF-8, no carriage return or line feed); vLLM reads gs://<bucket>/<path>, so no leading '/'.
        if not v or len(v.encode()) > 1024 or re.search(r"[\r\n]", v) or v.startswith("/"):
            raise ValueError(
                "a Cloud Storage object path inside the bucket: 1-1024 bytes, no line breaks, no leading /"
            )
        return v

    @model_validator(mode="after")
    def _vllm_flags(self) -> ServingSettings:
        # vLLM's SchedulerConfig refuses max_num_batched_tokens < max_num_seqs (vllm-project/vllm
        # vllm/config/scheduler.py, SchedulerConfig._verify_args / verify_max_model_len). Its other check,
        # max_num_batched_tokens >= max_model_len, applies only with chunked prefill off, and the program
        # leaves it on (vLLM's default).
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise SettingError(
                "maxNumBatchedTokens",
                self.max_num_batched_tokens,
                f"at least serving.maxNumSeqs ({self.max_num_seqs}): vLLM refuses fewer batched tokens than "
                "sequences in a batch",
            )
        return self

    @model_validator(mode="after")
    def _download_layout(self) -> ServingSettings:
        # The download Job reads the repository and revision from serving.modelPath: it must be the cache layout.
        problem = weights.layout_problem(self.model, self.model_path)
        if self.weights_download.enabled and problem:
            raise SettingError(
                "modelPath", self.model_path, f"with serving.weightsDownload.enabled, a path of the form {problem}"
            )
        return self

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

    @property
    def routing_sidecar_image(self) -> str:
        """The decode pods' sidecar: `routingSidecar.image` if set, else the router's release of it."""
        return self.routing_sidecar.image or f"{SIDECAR_REPOSITORY}:{router_image_tag(self.router.version)}"

    @property
    def model_served(self) -> str:
        return self.served_model_name or self.model

    def roles(self) -> dict[str, ServingRole]:
        return {"prefill": self.prefill, "decode": self.decode}
