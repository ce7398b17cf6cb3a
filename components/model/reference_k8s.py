"""The configuration reference's rules of the Kubernetes keys: addons, kueue, demos, and serving (reference_serving.py).

Pure model code: no Pulumi.
"""

from __future__ import annotations

from components.model.checks import K8S_NAMES
from components.model.reference_serving import SERVING_RULES
from components.model.reference_sources import (
    DYNAMIC_SLICING,
    HELM_OCI,
    JOBSET_WEBHOOK,
    KUEUE_CRDS,
    LABELS,
    NODE_SIZES,
    OCI,
    QUANTITY,
    REQUESTS_LIMITS,
    SEMVER,
    THIS_PROGRAM,
    TPU7X,
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
    **SERVING_RULES,
}
