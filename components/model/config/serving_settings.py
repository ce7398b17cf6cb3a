"""Settings of serving: vLLM, the buckets, the model; its roles, Gateway and weights download are in
components/model/config/serving_parts_settings.py, the router and its sidecar in router_settings.py."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from components.model.config.autoscaling_settings import DecodeRole, ElasticRole, PrefillRole
from components.model.config.checks import K8S_NAMES, Model, SettingError, accept_if, bucket_name, dns1035_label
from components.model.config.images import SIDECAR_DIGESTS, VLLM_TPU, with_digest
from components.model.config.oci import image_reference
from components.model.config.router_settings import (
    SIDECAR_REPOSITORY,
    RouterSettings,
    RoutingSidecarSettings,
    router_image_tag,
)
from components.model.config.router_settings import router_release as router_release  # components/llmd_router.py
from components.model.config.rules import (
    BUCKET,
    LABELS,
    OCI,
    THIS_PROGRAM,
    VLLM_CACHE,
    VLLM_SCHEDULER,
    Flag,
    Rule,
    at_least,
)
from components.model.config.serving_parts_settings import (
    GATEWAY_REQUEST_TIMEOUT_SECONDS,
    GatewaySettings,
    WeightsDownloadSettings,
)
from components.model.serving import weights

# vLLM's --kv-cache-dtype choices (vllm-project/vllm vllm/config/cache.py, CacheDType), the union over the
# releases around the pinned nightly (float16 and int8 come and go between releases).
VLLM_KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "int8", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")


# The waits the vLLM pod allows itself before it gives up (manifests/vllm-pod.yaml): the leader waits up to
# --ray_init_timeout for its workers, then vLLM up to VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT for its engine.
# A startup probe shorter than their sum would kill a pod that is still legitimately starting.
POD_STARTUP_WAITS_SECONDS = 1800 + 1800
_KV_DTYPE = f"a vLLM --kv-cache-dtype: {', '.join(VLLM_KV_CACHE_DTYPES)}"
# Both model names end up in vLLM's command line (--served-model-name=) and serving.model in every pod's
# llm-d.ai/model label; an empty name would serve a model clients cannot name.
NON_EMPTY = accept_if(str.strip, "a non-empty model name (unset serving.servedModelName to serve under serving.model)")


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
        NON_EMPTY,
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
        NON_EMPTY,
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
    # A Cloud Storage object name prefix (https://cloud.google.com/storage/docs/objects#naming: 1-1024 bytes of
    # UTF-8, no carriage return or line feed); vLLM reads gs://<bucket>/<path>, so no leading '/'.
    model_path: Annotated[
        str,
        accept_if(
            lambda v: v and len(v.encode()) <= 1024 and not re.search(r"[\r\n]", v) and not v.startswith("/"),
            "a Cloud Storage object path inside the bucket: 1-1024 bytes, no line breaks, no leading /",
        ),
        Rule(
            "a Cloud Storage object path inside the bucket: 1-1024 bytes of UTF-8, no line breaks, no leading /",
            "https://cloud.google.com/storage/docs/objects#naming",
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
    ] = Field(VLLM_TPU.reference, description="the vLLM TPU image of prefill and decode")
    max_model_len: Annotated[int, at_least(1, source=VLLM_SCHEDULER)] = Field(
        9216, ge=1, description="the vLLM flag of the same name"
    )
    max_num_batched_tokens: Annotated[
        int, Rule("an integer of at least 1 and at least serving.maxNumSeqs", VLLM_SCHEDULER, refused=511, accepted=512)
    ] = Field(8192, ge=1, description="the vLLM flag of the same name")
    max_num_seqs: Annotated[
        int,
        Rule(
            "an integer of at least 1 and at most serving.maxNumBatchedTokens", VLLM_SCHEDULER, refused=8193, accepted=1
        ),
    ] = Field(512, ge=1, description="the vLLM flag of the same name")
    kv_cache_dtype: Annotated[
        str,
        accept_if(VLLM_KV_CACHE_DTYPES.__contains__, _KV_DTYPE),
        Rule(_KV_DTYPE, VLLM_CACHE, refused="fp9", accepted="auto"),
    ] = Field("fp8", description="vLLM `--kv-cache-dtype`")
    enable_expert_parallel: Flag = Field(True, description="vLLM `--enable-expert-parallel`")
    # "stream" is runai_streamer (the reference's flags); the GCS FUSE volume is declared only for "mount".
    weights_via: Annotated[
        Literal["stream", "mount"], Rule("stream or mount", THIS_PROGRAM, refused="copy", accepted="mount")
    ] = Field(
        "stream", description="`stream`: vLLM streams from `gs://`; `mount`: reads the GCS FUSE volume at `/data`"
    )
    # How long a leader may take to serve /v1/models before the kubelet restarts it, how long `verify` waits for
    # the leaders, and (plus scheduling) how long Kueue waits for a group (components/model/addons/kueue_config.py).
    # llm-d's TPU7x dynamic-slice recipe allows 15 s + 480 x 30 s = 4 h for a 480B FP8 model
    # (guides/pd-disaggregation/modelserver/tpu/v7/vllm-dynamic-slice/prefill.yaml@b27c4f98).
    startup_timeout_seconds: Annotated[
        int,
        accept_if(
            lambda v: v >= POD_STARTUP_WAITS_SECONDS,
            f"at least {POD_STARTUP_WAITS_SECONDS} seconds: the vLLM pod itself waits up to 1800 s for its Ray "
            "workers and 1800 s for its engine, and a shorter startup probe would restart it mid-load",
        ),
        at_least(
            POD_STARTUP_WAITS_SECONDS,
            " (the vLLM pod's own waits: 1800 s for Ray workers, 1800 s for its engine)",
            "manifests/vllm-pod.yaml (--ray_init_timeout, VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT)",
        ),
    ] = Field(
        14400,
        description="the leaders' startup-probe budget for loading the model (Kueue's waitForPodsReady timeout is "
        "this plus 30 minutes)",
    )
    # How long a stopping vLLM pod may take (the pod's terminationGracePeriodSeconds): vLLM runs as PID 1 and
    # finishes its in-flight requests on SIGTERM, so this must cover the longest request the Gateway allows.
    termination_grace_period_seconds: Annotated[
        int,
        accept_if(
            lambda v: v >= GATEWAY_REQUEST_TIMEOUT_SECONDS,
            f"at least {GATEWAY_REQUEST_TIMEOUT_SECONDS} seconds, the Gateway's request timeout (the router "
            "chart's GCPBackendPolicy timeoutSec): a pod stopped sooner cuts requests that are still in flight",
        ),
        at_least(
            GATEWAY_REQUEST_TIMEOUT_SECONDS,
            ", the Gateway's request timeout: a pod stopped sooner cuts requests in flight",
            "llm-d/llm-d-router v0.10.0 chart (GCPBackendPolicy timeoutSec 300); components/llmd_router.py",
        ),
    ] = Field(360, description="how long a stopping vLLM pod may finish its requests")
    # What a new group takes from its pods starting to a ready leader. Elastic serving paces its burst slots and
    # keeps an idle one by it (components/model/serving/burst.py); the startup probe's budget above is the bound.
    model_load_seconds: Annotated[
        int,
        at_least(
            1,
            " and at most serving.startupTimeoutSeconds: a measured expectation (weights streamed, XLA compiled from "
            "the cache), where startupTimeoutSeconds is the budget before the kubelet restarts the leader",
            change="elastic",
        ),
    ] = Field(1200, ge=1, description="how long a new group takes to load the model and serve (measure it)")
    prefill: PrefillRole = Field(default_factory=dict)
    decode: DecodeRole = Field(default_factory=dict)
    gateway: Annotated[GatewaySettings, Rule(change="gateway")] = Field(default_factory=dict)
    router: Annotated[RouterSettings, Rule(change="router")] = Field(default_factory=dict)
    routing_sidecar: RoutingSidecarSettings = Field(default_factory=dict)
    weights_download: Annotated[WeightsDownloadSettings, Rule(change="weights-download")] = Field(default_factory=dict)

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
    def _load_within_the_startup_budget(self) -> ServingSettings:
        if self.model_load_seconds > self.startup_timeout_seconds:
            raise SettingError(
                "modelLoadSeconds",
                self.model_load_seconds,
                f"at most serving.startupTimeoutSeconds ({self.startup_timeout_seconds}): a leader still loading "
                "past its startup budget is restarted by the kubelet",
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

    @property
    def routing_sidecar_image(self) -> str:
        """The decode pods' sidecar: `routingSidecar.image` if set, else the router's release of it."""
        tag = router_image_tag(self.router.version)
        return self.routing_sidecar.image or with_digest(f"{SIDECAR_REPOSITORY}:{tag}", SIDECAR_DIGESTS.get(tag))

    @property
    def model_served(self) -> str:
        return self.served_model_name or self.model

    def roles(self) -> dict[str, ElasticRole]:
        return {"prefill": self.prefill, "decode": self.decode}
