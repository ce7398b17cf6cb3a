"""Modeled creation time per resource type: what `pulumi up` (or the reference script's command)
blocks on until the step is done.

No public source states typical creation times for most of these; those figures are marked
`ESTIMATE` and are round numbers from experience, not measurements. What the sources do establish is
the shape of the model: GKE creates node pools of one cluster concurrently, a multi-host TPU pool
comes up all-or-nothing, IAM propagation is not waited for by either tool, and an awaited chart is
bounded by Helm's timeout. The ratio parallel/sequential is dominated by the TPU pool figure: with
any positive pool time it grows with the number of cubes, because the reference creates pools in a
loop and the graph creates them side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.graph import Node

ESTIMATE = "estimate"
NODE_POOLS = "https://cloud.google.com/kubernetes-engine/docs/how-to/node-pools"
TPU_POOLS = "https://cloud.google.com/tpu/docs/tpus-in-gke"
IAM = "https://cloud.google.com/iam/docs/access-change-propagation"
HELM_WAIT = "https://helm.sh/docs/helm/helm_install/"


@dataclass(frozen=True)
class Figure:
    seconds: float
    source: str  # a URL, or ESTIMATE
    note: str


TPU_POOL = Figure(
    600,
    f"{ESTIMATE}; all-or-nothing per multi-host pool ({TPU_POOLS}); pools of one cluster are created "
    f"concurrently ({NODE_POOLS})",
    "16 reservation-bound tpu7x VMs placed by the workload policy",
)
SYSTEM_POOL = Figure(180, f"{ESTIMATE}; concurrent with the TPU pools ({NODE_POOLS})", "n2-standard-32, 1 per zone")

FIGURES: dict[str, Figure] = {
    "gcp:projects/service:Service": Figure(30, ESTIMATE, "one API enablement operation"),
    "gcp:compute/previewFeature:PreviewFeature": Figure(10, ESTIMATE, "ai-zones-visibility"),
    "gcp:compute/network:Network": Figure(20, ESTIMATE, "custom-mode VPC"),
    "gcp:compute/subnetwork:Subnetwork": Figure(15, ESTIMATE, "TPU subnet, proxy-only subnet"),
    "gcp:compute/firewall:Firewall": Figure(10, ESTIMATE, "allow-internal"),
    "gcp:serviceaccount/account:Account": Figure(5, ESTIMATE, "node service account"),
    "gcp:projects/iAMMember:IAMMember": Figure(
        10, f"{ESTIMATE}; propagation (typically 2 min, {IAM}) is waited for by neither tool", "node role"
    ),
    "gcp:container/cluster:Cluster": Figure(
        480, ESTIMATE, "regional Standard control plane; the default pool is created and removed"
    ),
    "gcp:compute/resourcePolicy:ResourcePolicy": Figure(10, ESTIMATE, "workload policy"),
    "pulumi:providers:kubernetes": Figure(0, "local (no API call)", "Kubernetes provider"),
    "kubernetes:helm.sh/v4:Chart": Figure(
        60, f"{ESTIMATE}; bounded by Helm's --wait timeout, 5m by default ({HELM_WAIT})", "Deployments available"
    ),
    "kubernetes:yaml/v2:ConfigFile": Figure(60, ESTIMATE, "slice controller manifest, awaited like a chart"),
    "kubernetes:kustomize/v2:Directory": Figure(5, ESTIMATE, "CRDs only"),
    "kubernetes:gateway.networking.k8s.io/v1:Gateway": Figure(
        5, ESTIMATE, "the object; GKE programs the load balancer asynchronously in both"
    ),
    "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet": Figure(2, ESTIMATE, "admission and pods run after, in both"),
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet": Figure(2, ESTIMATE, "model loading runs after, in both"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": Figure(5, ESTIMATE, "weights bucket roles"),
}
KUBERNETES_OBJECT = Figure(1, ESTIMATE, "one API object (Namespace, ServiceAccount, Kueue objects)")
UNKNOWN = Figure(5, f"{ESTIMATE} (type not in the table)", "")


def is_tpu_pool(node: Node) -> bool:
    machine = (node.inputs.get("nodeConfig") or {}).get("machineType", "")
    return isinstance(machine, str) and machine.startswith("tpu")


def figure(node: Node) -> Figure:
    if node.component:
        return Figure(0, "local component", "")
    if node.type == "gcp:container/nodePool:NodePool":
        return TPU_POOL if is_tpu_pool(node) else SYSTEM_POOL
    if node.type in FIGURES:
        return FIGURES[node.type]
    if node.type.startswith("kubernetes:"):
        return KUBERNETES_OBJECT
    return UNKNOWN


def seconds(node: Node) -> float:
    return figure(node).seconds
