"""The label, annotation and resource keys the program writes or reads, each once (kueue's `pkg/controller/constants`
style: one constant, one line saying whose key it is).

No Pulumi here: the resources, the models and the change preview import them from this module.
"""

# Google Cloud and GKE node labels and keys.
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
"""The TPU generation GKE labels every TPU node with (the ResourceFlavor and the pods select it)."""
BLOCK_LABEL = "cloud.google.com/gce-topology-block"
"""The reservation block a node runs in: the Kueue Topology's top level."""
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
"""The node pool GKE labels every node with."""
SLICE_TOPOLOGY_ANNOTATION = "cloud.google.com/gke-tpu-slice-topology"
"""The slice topology a dynamic-slice pod asks the slice controller for."""
SKIP_TPU_WEBHOOK_CHECK = "cloud.google.com/skip-tpu-webhook-check"
"""Lets a dynamic-slice pod without a static TPU topology selector pass GKE's TPU admission webhook."""
TPU_SLICE_LABEL = "cloud.google.com/gke-tpu-slice"
"""The slice a node belongs to, set by the slice controller: LWS's exclusive topology keeps one group per slice."""
METADATA_SERVER_LABEL = "iam.gke.io/gke-metadata-server-enabled"
"""GKE's label on nodes that run its metadata server (Workload Identity): a pod that selects it gets its own
service account's identity, never the node's."""
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
"""The key of a node pool's SPECIFIC reservation affinity."""
TPU_RESOURCE = "google.com/tpu"
"""The TPU chips' extended resource on a node, in a pod's requests and in the ClusterQueue's quota."""


def partition_label(shape: object) -> str:
    """The id of the partition of `shape` a TPU node is in (a Kueue Topology level)."""
    return f"cloud.google.com/gke-tpu-partition-{shape}-id"


def partition_state_label(shape: object) -> str:
    """The health of the partition of `shape` a TPU node is in (HEALTHY when usable)."""
    return f"cloud.google.com/gke-tpu-partition-{shape}-state"


# The GKE slice controller's annotations on a Slice (xpk slice/internal/core/constants.go).
OWNER_NAMESPACE = "accelerator.gke.io/owner-workload-namespace"
"""The namespace of the Kueue Workload that owns a Slice."""
OWNER_NAME = "accelerator.gke.io/owner-workload-name"
"""The name of the Kueue Workload that owns a Slice."""

# Kubernetes' own.
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""A node's name: the Kueue Topology's bottom level, and the Kueue manager's spread key."""
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
"""A namespace's name, set by the API server on every namespace."""
APP_NAME_LABEL = "app.kubernetes.io/name"
"""The application's name (Helm charts' selector labels)."""
APP_INSTANCE_LABEL = "app.kubernetes.io/instance"
"""The Helm release of an application (Helm charts' selector labels)."""
SERVICE_ACCOUNT_NAME_ANNOTATION = "kubernetes.io/service-account.name"
"""The service account a service-account-token Secret is issued for."""

# Kueue's (kueue pkg/controller/constants/constants.go).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The LocalQueue a workload is queued in."""
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
"""The WorkloadPriorityClass of a workload."""

# LeaderWorkerSet's (sigs.k8s.io/lws api/leaderworkerset/v1).
LWS_GROUP = "leaderworkerset.x-k8s.io"
"""LeaderWorkerSet's API group."""
LWS_API = f"{LWS_GROUP}/v1"
"""The LeaderWorkerSet API version the program declares."""
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""A pod's index in its group, 0 for the leader; set by LWS per pod."""
EXCLUSIVE_TOPOLOGY_ANNOTATION = "leaderworkerset.sigs.k8s.io/exclusive-topology"
"""The node label whose value one group has to itself."""

# llm-d's and the Gateway API Inference Extension's.
GUIDE_LABEL = "llm-d.ai/guide"
"""The llm-d guide a model server follows (the router's InferencePool selects by it)."""
MODEL_LABEL = "llm-d.ai/model"
"""The model a model server serves."""
ROLE_LABEL = "llm-d.ai/role"
"""A model server's role: prefill or decode."""
ENGINE_TYPE_LABEL = "inference.networking.k8s.io/engine-type"
"""The inference engine a model server runs (vllm)."""

# pulumi-kubernetes' await annotations (provider/pkg/metadata/overrides.go).
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"
"""What the provider waits for after an object's create or update."""
TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
"""How long the provider waits for an object."""
SKIP_AWAIT_ANNOTATION = "pulumi.com/skipAwait"
"""The provider does not wait for the object."""

# This program's own.
SUB_BLOCK_LABEL = "gke-tpu-slicing/reservation-sub-block"
"""The reservation sub-block a TPU node's pool is bound to."""
BURST_SLOT_LABEL = "gke-tpu-slicing/burst-slot"
"""The number of the burst slot a serving pod belongs to (none on a floor's pods): its leader's series carry it."""
FLAVOR_ANNOTATION = "gke-tpu-slicing/resource-flavor"
"""The ResourceFlavor a ClusterQueue uses, by Output, so a replaced flavor replaces the ClusterQueue first."""

# Pod Security Admission's namespace labels (https://kubernetes.io/docs/concepts/security/pod-security-admission/).
PSA_LABEL = "pod-security.kubernetes.io/{mode}"
"""The level a namespace's pods are held to, per mode (enforce, warn, audit)."""
PSA_VERSION_LABEL = "pod-security.kubernetes.io/{mode}-version"
"""The Kubernetes minor whose rules that mode applies."""

# JobSet's (sigs.k8s.io/jobset api/jobset/v1alpha2/jobset_types.go:24).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""The JobSet a pod belongs to, set by the JobSet controller on every pod template (pkg/controllers/jobset_controller.go
labelAndAnnotateObject)."""
