"""Immutable fields of every Kubernetes kind the program applies, or will: replaced by the provider, or refused.

Three sources, each cited per fact:

* pulumi-kubernetes' own replace-on-change list (`forceNewProperties`, provider/pkg/provider/diff.go at
  commit 94977969d, the newest source available offline; the program pins 4.34.2): the provider replaces
  the object, delete-first when its name and namespace stay (provider/pkg/provider/provider.go L1645-1660);
* the CRDs' CEL transition rules (`oldSelf`), pinned in ../shared/schemas/crds (tests/test_diff_kubernetes.py
  checks that every transition rule of a kind the program applies is here, at the cited line);
* the controllers' validating webhooks: Kueue v0.17.4 (commit 731bece78d5f) for queued LeaderWorkerSets
  and JobSets (and v0.19.2, 8eab68778fc1, for the group size it makes immutable), LWS v0.8.0 (c52b4f929a2f)
  and v0.10.0 (566625933a26), JobSet v0.11.1 (c1a0ef054250).

A REJECT fact is a refused update: when the object is replaced anyway (a replace-on-change property
changed too, or `replaceOnChanges`), the new object is a create and the fact does not apply.
"""

from __future__ import annotations

from typing import Any

from components.model import keys
from components.model.diff.chart_kinds import CHART_KINDS
from components.model.diff.facts import ADDED, ALWAYS, OLD, PRESENCE, PULUMI_KUBERNETES, REJECT, REMOVED, REPLACE, Fact

PK = f"{PULUMI_KUBERNETES}/provider/diff.go"
CRDS = "../shared/schemas/crds"
KUEUE = "kubernetes-sigs/kueue@v0.17.4"
KUEUE_NEXT = "kubernetes-sigs/kueue@v0.19.2"  # the rules Kueue 0.19 adds
LWS_WEBHOOK = "kubernetes-sigs/lws@v0.8.0 pkg/webhooks/leaderworkerset_webhook.go"
JOBSET_WEBHOOK = "kubernetes-sigs/jobset@v0.11.1 pkg/webhooks/jobset_webhook.go"
QUEUE_LABEL = f'metadata.labels["{keys.QUEUE_LABEL}"]'  # pkg/controller/constants/constants.go:23
PRIORITY_LABEL = f'metadata.labels["{keys.PRIORITY_LABEL}"]'  # pkg/controller/constants/constants.go:48


def _replace(source: str, *paths: str, rule: str = "replaced by the provider") -> tuple[Fact, ...]:
    return tuple(Fact(p, REPLACE, source, rule) for p in paths)


# Every kind: another name or namespace is another object (diff.go L207-211).
METADATA = _replace(f"{PK}:207", "metadata.name", "metadata.namespace")
# A Secret: its type always (L155-157); its data too unless the provider sets enableSecretMutable (L28-29).
SECRET = _replace(f"{PK}:156", "type") + _replace(f"{PK}:29", "data", "stringData")
_SELECTOR = ("spec.selector", "spec.selector.matchExpressions", "spec.selector.matchLabels")  # L243-250

_SHAPE = (  # Kueue's SpecShape: pkg/util/pod/pod.go L139-164, compared by validation.go L231-262
    ("spec.containers[*]", PRESENCE),
    ("spec.containers[*].resources.requests", ALWAYS),
    ("spec.containers[*].ports", ALWAYS),
    ("spec.initContainers[*]", PRESENCE),
    ("spec.initContainers[*].resources.requests", ALWAYS),
    ("spec.initContainers[*].ports", ALWAYS),
    ("spec.nodeSelector", ALWAYS),
    ("spec.affinity", ALWAYS),
    ("spec.tolerations", ALWAYS),
    ("spec.runtimeClassName", ALWAYS),
    ("spec.priority", ALWAYS),
    ("spec.topologySpreadConstraints", ALWAYS),
    ("spec.overhead", ALWAYS),
    ("spec.resourceClaims", ALWAYS),
)


def _queued_lws_shape() -> tuple[Fact, ...]:
    """leaderworkerset_webhook.go L183-198: a queued LWS keeps both pod templates' shape."""
    source = f"{KUEUE} pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go:187"
    out = [
        Fact(
            "spec.leaderWorkerTemplate.leaderTemplate",
            REJECT,
            source,
            "leader template added or removed",
            PRESENCE,
            QUEUE_LABEL,
        )
    ]
    for template in ("leaderTemplate", "workerTemplate"):
        for path, when in _SHAPE:
            rule = "pod shape (SpecShape) of a queued LeaderWorkerSet is immutable"
            out.append(Fact(f"spec.leaderWorkerTemplate.{template}.{path}", REJECT, source, rule, when, QUEUE_LABEL))
    return tuple(out)


_PRIORITY = (
    Fact(
        PRIORITY_LABEL, REJECT, f"{KUEUE} pkg/controller/jobframework/validation.go:196", "cannot be removed", REMOVED
    ),
    Fact(
        PRIORITY_LABEL,
        REJECT,
        f"{KUEUE} pkg/controller/jobframework/validation.go:190",
        "cannot be added to a running workload",
        ADDED,
    ),
)


def _cel(file: str, line: int, path: str, message: str, guard: str = "") -> Fact:
    """A CEL transition rule of a pinned CRD (`self == oldSelf`, or `!has(oldSelf.x) || ...` with `guard`)."""
    return Fact(path, REJECT, f"{CRDS}/{file}:{line}", f"CEL: {message}", ALWAYS, guard, OLD)


_JOBSET_CEL = tuple(
    _cel("jobset-v0.11.1_jobsets.yaml", line, path, "Value is immutable")
    for line, path in (
        (180, "spec.failurePolicy"),
        (218, "spec.network"),
        (260, "spec.replicatedJobs[*].dependsOn"),
        (9499, "spec.startupPolicy"),
        (9527, "spec.successPolicy"),
        (10025, "spec.volumeClaimPolicies"),
    )
)

FACTS: dict[str, tuple[Fact, ...]] = {
    # ---------------------------------------------------------------- built-in kinds (diff.go L45-205)
    "kubernetes:core/v1:Namespace": (),
    "kubernetes:core/v1:ServiceAccount": (),
    "kubernetes:core/v1:ConfigMap": _replace(f"{PK}:33", "data", "binaryData"),  # unless enableConfigMapMutable
    "kubernetes:core/v1:Secret": SECRET,
    "kubernetes:core/v1:Service": _replace(f"{PK}:159", "spec.clusterIP"),
    "kubernetes:apps/v1:Deployment": _replace(f"{PK}:171", *_SELECTOR),
    "kubernetes:apps/v1:DaemonSet": _replace(f"{PK}:164", *_SELECTOR),
    "kubernetes:apps/v1:StatefulSet": _replace(
        f"{PK}:196",
        *_SELECTOR,
        "spec.podManagementPolicy",
        "spec.revisionHistoryLimit",
        "spec.serviceName",
        "spec.volumeClaimTemplates",
    ),
    "kubernetes:batch/v1:Job": _replace(
        f"{PK}:178", *_SELECTOR, "spec.completions", "spec.parallelism", "spec.template"
    ),
    "kubernetes:rbac.authorization.k8s.io/v1:Role": (),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": (),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": _replace(f"{PK}:193", "roleRef"),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": _replace(f"{PK}:193", "roleRef"),
    # networking.k8s.io is not in the list at all: a NetworkPolicy's spec updates in place.
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": (),
    # policy/v1 is not in the list (only v1beta1, L62-64): its spec updates in place (Kubernetes 1.15+).
    "kubernetes:policy/v1:PodDisruptionBudget": (),
    # ---------------------------------------------------------------- Gateway API v1.4.1 (no transition rule)
    "kubernetes:gateway.networking.k8s.io/v1:Gateway": (),
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute": (),
    "kubernetes:gateway.networking.k8s.io/v1:GatewayClass": (
        _cel("gateway-api-v1.4.1_gatewayclasses.yaml", 94, "spec.controllerName", "Value is immutable"),
    ),
    # ---------------------------------------------------------------- Managed Prometheus v0.17.2, GAIE v1.5.0
    "kubernetes:monitoring.googleapis.com/v1:PodMonitoring": (),
    "kubernetes:monitoring.googleapis.com/v1:ClusterPodMonitoring": (),
    "kubernetes:inference.networking.k8s.io/v1:InferencePool": (),
    "kubernetes:inference.networking.x-k8s.io/v1alpha2:InferenceObjective": (),
    # ---------------------------------------------------------------- KEDA v2.20.2 (components/model/addons/keda.py)
    # Their CRDs (the chart's templates/crds) hold one CEL rule, minReplicaCount <= maxReplicaCount, no transition
    # rule, and KEDA's webhook checks an update as a create (kedacore/keda@68a5b502 apis/keda/v1alpha1/
    # scaledobject_webhook.go:133-145, triggerauthentication_webhook.go:88-97): both update in place.
    "kubernetes:keda.sh/v1alpha1:ScaledObject": (),
    "kubernetes:keda.sh/v1alpha1:TriggerAuthentication": (),
    # ---------------------------------------------------------------- Kueue v0.17.4
    # Deleting them waits for the `kueue.x-k8s.io/resource-in-use` finalizer (components/kueue_objects.py orders the
    # replacements): a Topology while a ResourceFlavor names it (pkg/controller/tas/topology_controller.go L109-121),
    # a ResourceFlavor while a ClusterQueue names it (pkg/controller/core/resourceflavor_controller.go L107-116), a
    # ClusterQueue while it has reserving workloads (clusterqueue_controller.go L201-209); a LocalQueue has none.
    "kubernetes:kueue.x-k8s.io/v1beta2:Topology": (
        _cel("kueue-v0.17.4_topologies.yaml", 135, "spec.levels", "field is immutable"),
    ),
    "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue": (
        _cel("kueue-v0.17.4_localqueues.yaml", 475, "spec.clusterQueue", "field is immutable"),
    ),
    "kubernetes:kueue.x-k8s.io/v1beta2:AdmissionCheck": (
        _cel("kueue-v0.17.4_admissionchecks.yaml", 195, "spec.controllerName", "field is immutable"),
    ),
    "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor": tuple(
        _cel(
            "kueue-v0.17.4_resourceflavors.yaml",
            line,
            f"spec.{field}",
            f"{what} immutable when topologyName is set",
            "spec.topologyName",
        )
        for line, field, what in (
            (374, "nodeLabels", "nodeLabels are"),
            (377, "tolerations", "tolerations are"),
            (380, "topologyName", "topologyName is"),
        )
    ),
    "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue": (),
    "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass": (),
    # ---------------------------------------------------------------- JobSet v0.11.1 (+ Kueue's job webhook)
    "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet": (
        *_JOBSET_CEL,
        # jobset_webhook.go L350-351: replicatedJobs (pod labels, annotations, nodeSelector, tolerations and
        # scheduling gates excepted while suspended) and managedBy are immutable.
        Fact("spec.replicatedJobs", REJECT, f"{JOBSET_WEBHOOK}:350", "replicatedJobs are immutable"),
        Fact("spec.managedBy", REJECT, f"{JOBSET_WEBHOOK}:351", "managedBy is immutable"),
        # Kueue: the queue name of a job that is not suspended (admitted and running) is immutable.
        # Not a refusal but a conflict: on admission Kueue merges the flavor's and the slice controller's node labels
        # (cloud.google.com/gke-tpu-topology) into the pod template's nodeSelector (pkg/controller/jobs/jobset/
        # jobset_controller.go:148, pkg/podset/podset.go:161-174), an atomic map (the CRD's x-kubernetes-map-type:
        # atomic), so the next apply of that template conflicts with Kueue's field manager (demo_jobsets.py
        # replaces the JobSet on every change).
        Fact(
            QUEUE_LABEL,
            REJECT,
            f"{KUEUE} pkg/controller/jobframework/validation.go:151",
            "queue-name is immutable while the job runs",
        ),
        *_PRIORITY,
    ),
    # ---------------------------------------------------------------- LeaderWorkerSet (+ Kueue's LWS webhook)
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet": (
        Fact(
            QUEUE_LABEL,
            REJECT,
            f"{KUEUE} pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go:166",
            "queue-name is immutable",
        ),
        *_PRIORITY,
        *_queued_lws_shape(),
        # Kueue 0.19 (the LWSImmutableGroupSize gate, beta and on, pkg/features/kube_features.go:951-953): a queued
        # LWS keeps its group size. The program never meets it: the size is part of the set's name (rollout.py).
        Fact(
            "spec.leaderWorkerTemplate.size",
            REJECT,
            f"{KUEUE_NEXT} pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go:225",
            "the group size of a queued LeaderWorkerSet is immutable (Kueue 0.19 and later)",
            ALWAYS,
            QUEUE_LABEL,
        ),
        Fact(
            "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize",
            REJECT,
            f"{LWS_WEBHOOK}:109",
            "subGroupSize is immutable",
        ),
        Fact(
            "spec.leaderWorkerTemplate.subGroupPolicy",
            REJECT,
            f"{LWS_WEBHOOK}:111",
            "subGroupPolicy cannot be added or removed",
            PRESENCE,
        ),
        Fact("spec.networkConfig.subdomainPolicy", REJECT, f"{LWS_WEBHOOK}:117", "cannot be set to null", REMOVED),
    ),
    # A Patch resource of a LeaderWorkerSet (the serving roles' leaders-ready wait): another name or namespace is
    # another patch; pulumi-kubernetes applies it server-side (provider/pkg/await/await.go:190).
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSetPatch": (),
    # LWS v0.10.0: the DisaggregatedSet CRD has no transition rule (upstream-next/lws-v0.10.0/crds) and its
    # webhook checks an update like a create (pkg/webhooks/disaggregatedset/disaggregatedset_webhook.go
    # L55-59): its roles' templates change in place, the controller rolls them out to new LeaderWorkerSets.
    "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet": (),
}


def facts_for(type_: str) -> tuple[Fact, ...] | None:
    """The facts of a Kubernetes type token (metadata included), or None when the model does not cover it."""
    kind = FACTS.get(type_, CHART_KINDS.get(type_))  # the kinds only the charts apply: chart_kinds.py
    return None if kind is None else METADATA + kind


AWAIT = PULUMI_KUBERNETES
# A Job (components/weights_download_job.py): awaited until its `Complete` condition, failed at once on `Failed`
# (provider/pkg/await/job.go L50-56), for at most `pulumi.com/timeoutSeconds` (default 10 minutes, L79 and L131);
# deleted in the foreground, so destroy waits for its pods (provider/pkg/await/await.go L964-967).
WAIT_FOR, SKIP_AWAIT, TIMEOUT = keys.WAIT_FOR_ANNOTATION, keys.SKIP_AWAIT_ANNOTATION, keys.TIMEOUT_ANNOTATION


def update_await(inputs: dict[str, object]) -> str:
    """What pulumi-kubernetes waits for after an in-place update of an object with these inputs.

    It awaits the live object's `pulumi.com/waitFor` after an update as after a create (await/await.go:504), unless
    the inputs say `pulumi.com/skipAwait: "true"` (metadata/overrides.go:108-110). "" when neither is set.
    """
    annotations = ((inputs.get("metadata") or {}).get("annotations") or {}) if isinstance(inputs, dict) else {}
    if str(annotations.get(SKIP_AWAIT, "")).lower() == "true":
        return f"not awaited: {SKIP_AWAIT} ({AWAIT}/metadata/overrides.go:108)"
    if annotations.get(WAIT_FOR):
        return f"awaited again: {WAIT_FOR} {annotations[WAIT_FOR]} ({AWAIT}/await/await.go:504)"
    return ""


# The built-in kinds pulumi-kubernetes knows to be cluster-scoped (provider/pkg/kinds/kinds.go:224-245). A manifest
# may still give one a namespace (Kueue's chart does, on its webhook configurations): the provider keeps it in the
# resource's name (provider/yaml/v2/yaml.go:347-349), the API server ignores it.
CLUSTER_SCOPED = frozenset({
    "APIService", "CertificateSigningRequest", "ClusterRole", "ClusterRoleBinding", "CSIDriver", "CSINode",
    "CustomResourceDefinition", "FlowSchema", "IngressClass", "MutatingWebhookConfiguration", "Namespace", "Node",
    "PersistentVolume", "PodSecurityPolicy", "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass",
    "StorageClass", "ValidatingWebhookConfiguration", "VolumeAttachment",
})  # fmt: skip
# Since v4.29.0 (0d18fe4f0, #4278) a create is client-side unless the provider sets upsertExistingObjects
# (await/await.go:190-243), and the old resource is deleted only after the new one is created.
ALREADY_EXISTS = (
    "the cluster holds this object under the name of a resource this update deletes, after creating this one: "
    f"the create fails with AlreadyExists ({AWAIT}/await/await.go:276)"
)


def cluster_identity(rec: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """The object a Kubernetes record names in the cluster, (group, kind, namespace, name); None for a component, a
    Patch (it applies to an existing object) or a name left to the provider."""
    prefix, group_version, kind = [*rec["type"].split(":"), "", ""][:3]
    metadata = (rec.get("inputs") or {}).get("metadata") or {}
    name = metadata.get("name")
    if prefix != "kubernetes" or not rec.get("custom") or kind.endswith("Patch") or not isinstance(name, str):
        return None
    namespace = "" if kind in CLUSTER_SCOPED else str(metadata.get("namespace") or "")
    return group_version.rpartition("/")[0], kind, namespace, name
