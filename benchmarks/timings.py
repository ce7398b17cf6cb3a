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

from benchmarks import graph
from benchmarks.graph import Node
from components.model.serving import weights

ESTIMATE = "estimate"
NODE_POOLS = "https://cloud.google.com/kubernetes-engine/docs/how-to/node-pools"
TPU_POOLS = "https://cloud.google.com/tpu/docs/tpus-in-gke"
IAM = "https://cloud.google.com/iam/docs/access-change-propagation"
HELM_WAIT = "https://helm.sh/docs/helm/helm_install/"
# Cloud Monitoring's create methods answer with the created object, not a long-running operation.
DASHBOARD_CREATE = "https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards/create"
ALERT_CREATE = "https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies/create"
# pulumi-kubernetes' await table (provider/pkg/await/awaiters.go, v4): RBAC objects have no awaiter, a
# ServiceAccount is ready at once on Kubernetes >= 1.24, a service-account-token Secret waits until the token
# controller has filled in its token; a custom resource without `pulumi.com/waitFor` is not awaited
# (provider/pkg/await/condition/ready.go: "Otherwise we no-op").
K8S_AWAIT = "pulumi-kubernetes provider/pkg/await/awaiters.go"
K8S_AWAIT_CR = "pulumi-kubernetes provider/pkg/await/condition/ready.go"
SLICE_GATE = "pulumi-python:dynamic/teardown:SliceGate"
WORKLOADS = ("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")


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
    "gcp:compute/router:Router": Figure(10, ESTIMATE, "Cloud Router of the private nodes' NAT"),
    "gcp:compute/routerNat:RouterNat": Figure(20, ESTIMATE, "Cloud NAT of the private nodes"),
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
    "kubernetes:yaml/v2:ConfigGroup": Figure(5, ESTIMATE, "GAIE CRDs only, no workload to await"),
    "kubernetes:gateway.networking.k8s.io/v1:Gateway": Figure(
        5, ESTIMATE, "the object; GKE programs the load balancer asynchronously in both"
    ),
    "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet": Figure(2, ESTIMATE, "admission and pods run after, in both"),
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet": Figure(
        2, ESTIMATE, "the object; `up` then waits for its leaders to load the model, as long as in both: left out"
    ),
    # the per-revision patch that carries the ready-leaders wait (components/vllm_leaderworkersets.py leaders_ready)
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSetPatch": Figure(
        1, ESTIMATE, "the wait for the new set's leaders, as long as in both: left out"
    ),
    "gcp:storage/bucketIAMMember:BucketIAMMember": Figure(5, ESTIMATE, "weights and XLA cache bucket roles"),
    # buckets.insert answers with the created bucket, no long-running operation
    # (https://cloud.google.com/storage/docs/json_api/v1/buckets/insert).
    "gcp:storage/bucket:Bucket": Figure(2, ESTIMATE, "the XLA cache bucket: one synchronous call"),
    "gcp:monitoring/dashboard:Dashboard": Figure(
        2, f"{ESTIMATE}; one synchronous call ({DASHBOARD_CREATE})", "dashboard JSON"
    ),
    "gcp:monitoring/alertPolicy:AlertPolicy": Figure(
        2, f"{ESTIMATE}; one synchronous call ({ALERT_CREATE})", "PromQL alert policy"
    ),
    "kubernetes:core/v1:ServiceAccount": Figure(1, f"{ESTIMATE}; not awaited ({K8S_AWAIT})", "one API object"),
    "kubernetes:core/v1:Secret": Figure(
        2, f"{ESTIMATE}; awaited until the token controller fills a token Secret ({K8S_AWAIT})", "scraper token"
    ),
    **{
        f"kubernetes:rbac.authorization.k8s.io/v1:{kind}": Figure(
            1, f"{ESTIMATE}; not awaited ({K8S_AWAIT})", "one API object"
        )
        for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    },
    "kubernetes:monitoring.googleapis.com/v1:PodMonitoring": Figure(
        1, f"{ESTIMATE}; a custom resource, not awaited ({K8S_AWAIT_CR})", "GMP scrape object"
    ),
    # components/teardown.py: creating a gate calls no API (its delete is what waits, for the Slices).
    SLICE_GATE: Figure(1, f"{ESTIMATE}; no API call on create", "teardown gate of one TPU pool"),
    # components/kueue_guard.py: a record in Pulumi's state; its check runs at preview.
    "pulumi-python:dynamic/queues:ImmutableFields": Figure(1, f"{ESTIMATE}; no API call", "Kueue immutable fields"),
    # components/teardown.py: the record of the pools, in Pulumi's state; its check runs at preview.
    "pulumi-python:dynamic/teardown:PoolReplacements": Figure(1, f"{ESTIMATE}; no API call", "TPU pools' record"),
}
KUBERNETES_OBJECT = Figure(1, ESTIMATE, "one API object (Namespace, Kueue objects)")
JOB = "kubernetes:batch/v1:Job"


def download(node: Node) -> Figure:
    """The weights download Job (awaited until Complete): the model's size at the typical copy rate."""
    pod = ((node.inputs.get("spec") or {}).get("template") or {}).get("spec") or {}
    env = {e.get("name"): e.get("value") for c in pod.get("containers", []) for e in c.get("env", [])}
    model = str(env.get("HF_REPO", ""))
    return Figure(
        weights.typical_download_seconds(model),
        f"{ESTIMATE}; {weights.facts(model).gigabytes} GB ({weights.facts(model).source}) at "
        f"{weights.TYPICAL_THROUGHPUT_BYTES_S / 1e6:.0f} MB/s",
        "the weights download Job, awaited until Complete (pulumi-kubernetes provider/pkg/await/job.go)",
    )


UNKNOWN = Figure(5, f"{ESTIMATE} (type not in the table)", "")


def is_tpu_pool(node: Node) -> bool:
    machine = (node.inputs.get("nodeConfig") or {}).get("machineType", "")
    return isinstance(machine, str) and machine.startswith("tpu")


def in_cluster(node: Node) -> bool:
    """A node created through the cluster's API (add-ons, Kubernetes objects, the Kubernetes provider)."""
    return node.type.startswith("kubernetes:") or node.type == "pulumi:providers:kubernetes"


def is_cluster(node: Node) -> bool:
    return node.type == "gcp:container/cluster:Cluster"


def chain_floor(nodes: dict[str, Node]) -> tuple[float, list[Node]]:
    """The chain network -> cluster -> TPU pool -> workload, the least any creation order can take.

    Every resource's modeled time up to the cluster (the API enablement, the network, the TPU subnet: its
    longest chain), then one TPU pool, then one workload: what is left once nothing in the cluster delays a pool.
    """
    ancestors = {n.urn for n in nodes.values() if is_cluster(n)}
    todo = list(ancestors)
    while todo:
        for pred in nodes[todo.pop()].waits_for:
            if pred not in ancestors:
                ancestors.add(pred)
                todo.append(pred)
    upto, path = graph.longest_path({u: nodes[u] for u in ancestors}, seconds)
    # Ties go to the first label, so the chain printed is the same whatever order the run registered in.
    pool = min((n for n in nodes.values() if is_tpu_pool(n)), key=lambda n: n.label)
    workload = min((n for n in nodes.values() if n.type in WORKLOADS), key=lambda n: (-seconds(n), n.label))
    return upto + seconds(pool) + seconds(workload), [*path, pool, workload]


def figure(node: Node) -> Figure:
    if node.component:
        return Figure(0, "local component", "")
    if node.type == "gcp:container/nodePool:NodePool":
        return TPU_POOL if is_tpu_pool(node) else SYSTEM_POOL
    if node.type == JOB:
        return download(node)
    if node.type in FIGURES:
        return FIGURES[node.type]
    if node.type.startswith("kubernetes:"):
        return KUBERNETES_OBJECT
    return UNKNOWN


def seconds(node: Node) -> float:
    return figure(node).seconds
