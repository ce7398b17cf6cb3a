"""The configuration reference's rules of the serving keys (`serving.*`), part of the Kubernetes keys'
(components/model/reference_k8s.py).

Pure model code: no Pulumi.
"""

from __future__ import annotations

from components.model.checks import K8S_NAMES, LWS_NAME_MAX, LWS_REVISION_LEN
from components.model.reference_sources import (
    BUCKETS,
    DYNAMIC_SLICING,
    GATEWAY_CLASSES,
    GCS_OBJECTS,
    HELM_OCI,
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
    Rule,
)

SERVING_RULES: dict[str, Rule] = {
    "serving.enabled": Rule("true or false", THIS_PROGRAM, "serving-layer", "maybe", False),
    "serving.guide": Rule(
        "a DNS-1035 label of at most 53 characters: it names the router's Helm release (Helm's bound) and its "
        "EPP Service, <guide[:40]>-epp (a Service name starts with a letter)",
        f"{K8S_NAMES}; helm/helm pkg/chartutil/validate_name.go (maxReleaseNameLen = 53); llm-d/llm-d-router "
        "71f4f099 config/charts/routerlib/templates/_helpers.tpl (llm-d-router.name)",
        "guide",
        "1-guide",
        "g" * 53,
    ),
    "serving.model": Rule(
        "a non-empty model name whose last path segment is a label value (at most 63 letters, digits, '-', '_', "
        "'.', alphanumeric at both ends): it labels every pod llm-d.ai/model",
        LABELS,
        "serving-pods",
        "",
        "o/" + "m" * 63,
    ),
    "serving.servedModelName": Rule(
        "a non-empty string (what clients send as `model`), or unset for serving.model",
        "vllm-project/vllm vllm/config/model.py (served_model_name)",
        "serving-pods",
        "",
        "m",
    ),
    "serving.weightsBucket": Rule(
        "required while serving is on: a bucket name without gs://, 3-63 lowercase letters, digits, '-', '_', '.' "
        "(up to 222 with dots, 63 between two), alphanumeric at both ends, not an IP address, no goog prefix, no "
        "google",
        BUCKETS,
        "weights-bucket",
        "gs://my-weights",
        "b" * 3,
    ),
    "serving.xlaCacheBucket": Rule(
        "a bucket name (the same rule), other than serving.weightsBucket; or unset for xla-cache-<hash of project "
        "and cluster>",
        BUCKETS,
        "cache-bucket",
        "my-weights",
        "c" * 63,
    ),
    "serving.terminationGracePeriodSeconds": Rule(
        "an integer of at least 300, the Gateway's request timeout: a pod stopped sooner cuts requests in flight",
        "llm-d/llm-d-router v0.10.0 chart (GCPBackendPolicy timeoutSec 300); components/router.py",
        "serving-pods",
        299,
        300,
    ),
    "serving.modelPath": Rule(
        "a Cloud Storage object path inside the bucket: 1-1024 bytes of UTF-8, no line breaks, no leading /",
        GCS_OBJECTS,
        "serving-pods",
        "/models",
        "m" * 1024,
    ),
    "serving.weightsDownload.enabled": Rule(
        "true or false; true needs serving.modelPath in Hugging Face's cache layout of serving.model, "
        "models--<org>--<name>/snapshots/<40-hex revision> (the Job reads the repository and revision from it)",
        "huggingface/huggingface_hub src/huggingface_hub/file_download.py (repo_folder_name; snapshots/<commit>)",
        "weights-download",
        "maybe",
        True,
    ),
    "serving.weightsDownload.image": Rule(
        "a pinned OCI image reference with python3: an exact tag or a sha256 digest, no 'latest'",
        OCI,
        "weights-download",
        "docker.io/library/python:latest",
        "python@sha256:" + "0" * 64,
    ),
    "serving.image": Rule(
        "an OCI image reference, [registry[:port]/]repository[:tag][@digest], lowercase repository, tag up to "
        "128 characters, name up to 255",
        OCI,
        "serving-pods",
        "docker.io/vLLM/vllm-tpu:nightly",
        "localhost:5000/v/t:" + "x" * 128 + "@sha256:" + "a" * 64,
    ),
    "serving.maxModelLen": Rule("an integer of at least 1", VLLM_SCHEDULER, "serving-pods", 0, 1),
    "serving.maxNumBatchedTokens": Rule(
        "an integer of at least 1 and at least serving.maxNumSeqs", VLLM_SCHEDULER, "serving-pods", 511, 512
    ),
    "serving.maxNumSeqs": Rule(
        "an integer of at least 1 and at most serving.maxNumBatchedTokens", VLLM_SCHEDULER, "serving-pods", 8193, 1
    ),
    "serving.kvCacheDtype": Rule(
        "a vLLM --kv-cache-dtype: auto, float16, bfloat16, int8, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla",
        VLLM_CACHE,
        "serving-pods",
        "fp9",
        "auto",
    ),
    "serving.enableExpertParallel": Rule("true or false", THIS_PROGRAM, "serving-pods", "maybe", False),
    "serving.weightsVia": Rule("stream or mount", THIS_PROGRAM, "serving-pods", "copy", "mount"),
    "serving.startupTimeoutSeconds": Rule(
        "an integer of at least 3600 (the vLLM pod's own waits: 1800 s for Ray workers, 1800 s for its engine)",
        "manifests/vllm-pod.yaml (--ray_init_timeout, VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT)",
        "serving-pods",
        3599,
        3600,
    ),
    "serving.{prefill,decode}.name": Rule(
        f"a DNS-1035 label of at most {LWS_ROOM} characters, or unset for kueue-vllm-<role>-model-streamer: the "
        f"LeaderWorkerSet is named <name>-<{LWS_REVISION_LEN}-digit revision>, and Kueue bounds LWS names to "
        f"{LWS_NAME_MAX}",
        f"{LWS_SERVICE}; {LLMD_LIMITS}",
        "serving-names",
        "x" * (LWS_ROOM + 1),
        "x" * LWS_ROOM,
    ),
    "serving.{prefill,decode}.replicas": Rule(
        "an integer of at least 1 (LWS groups, one slice each)", THIS_PROGRAM, "serving-replicas", 0, 1
    ),
    "serving.{prefill,decode}.topology": Rule(
        "a topology AxBxC that is a partition of a cube or whole cubes, within tpu.cubes",
        f"{DYNAMIC_SLICING}; {TPU7X}",
        "serving-pods",
        "2x2",
        "2x2x1",
    ),
    "serving.{prefill,decode}.priority": Rule(
        "a key of kueue.priorities", THIS_PROGRAM, "serving-replicas", "urgent", "low-priority-1000"
    ),
    "serving.{prefill,decode}.tensorParallelSize": Rule(
        "unset, or exactly the slice's chips x TensorCores per chip (16 for 2x2x2 on tpu7x)",
        f"{TPU7X} (2 TensorCores per chip)",
        "serving-pods",
        8,
        16,
    ),
    "serving.{prefill,decode}.resources.cpu": Rule(
        "a Kubernetes quantity of at most what one TPU VM leaves to pods (223.37 CPUs on tpu7x-standard-4t: "
        "224 vCPUs less GKE's reservation); requests = limits",
        f"{QUANTITY}; {TPU7X}; {NODE_SIZES}",
        "serving-pods",
        "224",
        "223370m",
    ),
    "serving.{prefill,decode}.resources.memory": Rule(
        "a Kubernetes quantity of at most what one TPU VM leaves to pods (about 933.9Gi on tpu7x-standard-4t: "
        "960 GiB less GKE's reservation and eviction threshold); requests = limits",
        f"{QUANTITY}; {TPU7X}; {NODE_SIZES}",
        "serving-pods",
        "934Gi",
        "1Ki",
    ),
    "serving.gateway.name": Rule(
        "a DNS-1123 subdomain (at most 253): a custom resource's name, and an HTTPRoute parentRef's ObjectName",
        f"{K8S_NAMES}; gateway-api v1.4.1 CRDs (ObjectName)",
        "serving-names",
        "Gateway",
        "g." * 126 + "g",
    ),
    "serving.gateway.exposeToInternet": Rule(
        "true or false; true exactly when serving.gateway.className is an external class (then a warning says "
        "what is exposed)",
        GATEWAY_CLASSES,
        "gateway",
        False,
        True,
        {"serving": {"gateway": {"className": "gke-l7-gxlb"}}},
    ),
    "serving.gateway.className": Rule(
        "a single-cluster GKE GatewayClass: gke-l7-rilb (internal), or gke-l7-regional-external-managed, "
        "gke-l7-global-external-managed, gke-l7-gxlb (external: only with serving.gateway.exposeToInternet)",
        GATEWAY_CLASSES,
        "gateway",
        "gke-l7-rilb-mc",
        "gke-l7-gxlb",
        {"serving": {"gateway": {"exposeToInternet": True}}},
    ),
    "serving.router.chart": Rule(
        "an OCI chart reference, oci://<registry>/<repository> (OCI name grammar; no tag: the version key pins it)",
        f"{HELM_OCI}; {OCI}",
        "router",
        "ghcr.io/llm-d/charts/x",
        "oci://r/c",
    ),
    "serving.router.version": Rule(
        "a pinned chart version v0.10.0 or later, or v0 (main's floating chart)",
        f"{ROUTER_RELEASE}; components/modelserver.py (the sidecar flags of v0.10.0)",
        "router",
        "v0.9.0",
        "v0",
    ),
    "serving.router.peakPrefillThroughput": Rule(
        "a number greater than 0 (tokens/s of one prefill server)",
        "llm-d guides/recipes/router (prefix-cache-affinity-filter)",
        "router",
        0,
        0.001,
    ),
    "serving.routingSidecar.image": Rule(
        "an OCI image reference pinned by a release tag (v0.10.0 or later, not latest/main) or a digest, not "
        "llm-d-routing-sidecar; or unset for the router's own release",
        f"{OCI}; {ROUTER_RELEASE}",
        "serving-pods",
        "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0",
        "mirror.example/llm-d/sidecar@sha256:" + "0" * 64,
    ),
}
