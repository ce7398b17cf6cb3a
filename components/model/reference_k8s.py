"""The configuration reference's rules of the Kubernetes keys: addons, kueue, demos, serving.

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
    JOBSET_WEBHOOK,
    KUEUE_CRDS,
    LABELS,
    LLMD_LIMITS,
    LWS_ROOM,
    LWS_SERVICE,
    NODE_SIZES,
    OCI,
    QUANTITY,
    REQUESTS_LIMITS,
    ROUTER_RELEASE,
    SEMVER,
    THIS_PROGRAM,
    TPU7X,
    VLLM_CACHE,
    VLLM_SCHEDULER,
    Rule,
)


def _cpu_mem(kind: str, amount: str) -> dict[str, Rule]:
    """Rules of one `requests` / `limits` block of a controller's resources."""
    return {
        f"{kind}.cpu": Rule(
            "a Kubernetes quantity (the full grammar: 500m, 2, 1.5, 2e3, 100u); requests at most limits",
            f"{QUANTITY}; {REQUESTS_LIMITS}",
            "addon-version",
            "-1",
            "0.001" if kind == "requests" else "1e3",
        ),
        f"{kind}.memory": Rule(
            "a Kubernetes quantity (512Mi, 4Gi, 1e9, 1G); requests at most limits",
            f"{QUANTITY}; {REQUESTS_LIMITS}",
            "addon-version",
            "4 Gi",
            amount,
        ),
    }


_RESOURCES: dict[str, Rule] = {}
for _prefix in ("addons.{jobset,kueue,lws}.controllerResources", "serving.router.eppResources"):
    for _key, _rule in {**_cpu_mem("requests", "1Ki"), **_cpu_mem("limits", "64Gi")}.items():
        _RESOURCES[f"{_prefix}.{_key}"] = Rule(
            _rule.allowed + "; the requests of all controllers fit the system pool",
            _rule.source + f"; {NODE_SIZES}",
            "router" if _prefix.startswith("serving") else "addon-version",
            _rule.refused,
            _rule.accepted,
        )

K8S_RULES: dict[str, Rule] = {
    "addons.{jobset,kueue,lws}.chart": Rule(
        "an OCI chart reference, oci://<registry>/<repository> (OCI name grammar; no tag: the version key pins it)",
        f"{HELM_OCI}; {OCI}",
        "addon-version",
        "oci://registry.k8s.io/jobset/charts/JobSet",
        "oci://r/c",
    ),
    "addons.{jobset,kueue,lws}.version": Rule(
        "a pinned chart version, SemVer with an optional v (no ranges, no latest)",
        SEMVER,
        "addon-version",
        "^0.11",
        "v0.0.0-rc.1",
    ),
    "addons.{jobset,kueue,lws}.namespace": Rule(
        "a namespace name: a DNS-1123 label (lowercase letters, digits, '-', at most 63)",
        K8S_NAMES,
        "addon-namespace",
        "Jobset-System",
        "0" * 63,
    ),
    **_RESOURCES,
    "addons.kueue.replicas": Rule(
        "an integer of at least 1; every replica's requests count in the system-pool fit",
        f"{THIS_PROGRAM}; {NODE_SIZES}",
        "kueue-replicas",
        0,
        1,
    ),
    "addons.sliceController.drainTimeoutSeconds": Rule(
        "an integer of at least 1 (seconds a pool's deletion waits for its Slices to be gone)",
        THIS_PROGRAM,
        "drain-timeout",
        0,
        1,
    ),
    "addons.sliceController.featureGates": Rule(
        "distinct names among FailOnUntoleratedDegradedSlice, UseRetryMechanismForSliceCreation (the slice "
        "controller's alpha gates; only for a manifest built from a revision that has them)",
        "AI-Hypercomputer/xpk@250d4b3c slice/internal/features/features.go:28-50, slice/cmd/main.go:106-116",
        "manifests",
        ["Degraded"],
        ["FailOnUntoleratedDegradedSlice"],
    ),
    "addons.sliceController.manifestUrl": Rule(
        "an https:// URL of a pinned manifest (no /latest/, /main/, /master/ or /HEAD/ in its path)",
        THIS_PROGRAM,
        "manifests",
        "https://example.com/main/x.yaml",
        "https://e/x",
    ),
    "addons.inferenceExtension.version": Rule(
        "a released tag such as v1.5.0", THIS_PROGRAM, "manifests", "main", "1.5.0"
    ),
    "kueue.namespace": Rule(
        "a namespace name: a DNS-1123 label (at most 63), its own: not an add-on's namespace, not kube-*",
        f"{K8S_NAMES}; kubernetes-sigs/kueue v0.17.4 charts/kueue/templates/webhook/manifests.yaml (mpod.kb.io "
        "fails closed in managedJobsNamespaceSelector) and apis/config/v1beta2/defaults.go (kube-system and "
        "Kueue's own namespace left out)",
        "kueue-names",
        "llm_d",
        "a" * 63,
    ),
    "kueue.admissionCheckName": Rule(
        "a DNS-1123 subdomain (at most 253): a custom resource's name, and Kueue's CRDs pattern references to "
        "these objects so",
        f"{K8S_NAMES}; {KUEUE_CRDS}",
        "kueue-names",
        "Slice_RF",
        "a." * 126 + "a",
    ),
    "kueue.{topologyName,flavorName,clusterQueue}": Rule(
        "a DNS-1123 subdomain (at most 253): a custom resource's name, and Kueue's CRDs pattern references to "
        "these objects so",
        f"{K8S_NAMES}; {KUEUE_CRDS}",
        "kueue-immutable",
        "Slice_RF",
        "a." * 126 + "a",
    ),
    "kueue.localQueue": Rule(
        "a DNS-1123 subdomain of at most 63 characters: it is also the kueue.x-k8s.io/queue-name label of every "
        "workload",
        f"{K8S_NAMES}; {LABELS}",
        "local-queue",
        "l" * 64,
        "l.q",
    ),
    "kueue.priorities": Rule(
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
    "kueue.tpuQuota": Rule(
        "an integer of at least 0, or unset for the chips the TPU pools provide",
        THIS_PROGRAM,
        "kueue-objects",
        -1,
        0,
    ),
    "kueue.{cpuQuota,memoryQuota}": Rule(
        "a Kubernetes quantity (full grammar, no sign)", QUANTITY, "kueue-objects", "lots", "1e3"
    ),
    "demos.{subslicing,superslicing}.enabled": Rule("true or false", THIS_PROGRAM, "demo-enabled", "maybe", False),
    "demos.subslicing.name": Rule(
        "a DNS-1035 label such that JobSet's longest Job name, <name>-job-jax-<replicas - 1>, has at most 63 "
        "characters (53 with 1-10 replicas)",
        JOBSET_WEBHOOK,
        "demo-jobsets",
        "a" * 54,
        "a" * 53,
        {"demos": {"subslicing": {"replicas": 10}}},
    ),
    "demos.superslicing.name": Rule(
        "a DNS-1035 label of at most 53 characters: JobSet names its one Job <name>-job-jax-0",
        JOBSET_WEBHOOK,
        "demo-jobsets",
        "0-superslice",
        "a" * 53,
    ),
    "demos.{subslicing,superslicing}.topology": Rule(
        "a topology AxBxC that is a partition of a cube (sub-slice) or whole cubes (super-slice), within tpu.cubes",
        f"{DYNAMIC_SLICING}; {TPU7X}",
        "demo-jobsets",
        "3x3x3",
        "2x2x1",
    ),
    "demos.subslicing.replicas": Rule(
        "an integer of at least 1 (slices); the longest Job name bounds it with demos.subslicing.name",
        f"{THIS_PROGRAM}; {JOBSET_WEBHOOK}",
        "demo-jobsets",
        0,
        1,
    ),
    "demos.{subslicing,superslicing}.priority": Rule(
        "a key of kueue.priorities", THIS_PROGRAM, "demo-jobsets", "urgent", "high-priority-3000"
    ),
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
