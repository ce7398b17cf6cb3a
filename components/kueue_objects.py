"""Kueue objects for dynamic slicing, declared from their args (components/graph_args.py queues_args builds them).

The Topology's levels are derived from the cube and the machine's host shape, so the sub-cube
partition levels that sub-slices need are always there, and always match the pools' node labels.
"""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from components.component import Component
from components.kubernetes_object import KubernetesObject
from components.kueue_guard import ImmutableFields, immutable_fields
from components.model.config.settings import Settings
from components.model.keys import (
    ACCELERATOR_LABEL,
    BLOCK_LABEL,
    FLAVOR_ANNOTATION,
    HOSTNAME_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    TPU_RESOURCE,
    partition_label,
    partition_state_label,
)
from components.model.pod_security import BASELINE, namespace_labels
from components.model.tpu.geometry import Slice, SliceKind

KUEUE_V1BETA2 = "kueue.x-k8s.io/v1beta2"
# The reference declares WorkloadPriorityClass at v1beta1, which Kueue v0.17 still serves but marks
# deprecated (its CRD: `deprecated: true`, "Use v1beta2 instead"); stacks created before the move
# registered it under this type, so the priority classes alias it and update in place.
KUEUE_V1BETA1 = "kueue.x-k8s.io/v1beta1"
SLICE_CONTROLLER = "accelerator.gke.io/slice"
HEALTHY = "HEALTHY"


def healthy_partition_selector(slice_: Slice) -> dict[str, str]:
    """The node selector that keeps a slice's pods off unhealthy partitions.

    GKE labels every node with `...-partition-<shape>-state` for each partition shape of its cube
    (https://docs.cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing#define_the_partition_health_selection);
    llm-d lists `<shape>-state: HEALTHY` as required on dynamic-slice pods
    (llm-d/llm-d docs/infrastructure/providers/gke/dynamic-slicing/README.md@6b047cfb). A sub-slice is one
    partition of its own shape; a super-slice stitches whole cubes, so each of its nodes must sit in a
    healthy cube-sized partition (there is no label for shapes larger than a cube).
    """
    shape = slice_.topology if slice_.kind is SliceKind.SUB else slice_.cube.topology
    return {partition_state_label(shape): HEALTHY}


def topology_levels(settings: Settings) -> list[str]:
    """block > every partition of the cube, largest first, down to one host > hostname."""
    return [BLOCK_LABEL, *(partition_label(p) for p in settings.tpu.cube.partitions()), HOSTNAME_LABEL]


def kueue_object(kind: str, metadata: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"apiVersion": KUEUE_V1BETA2, "kind": kind, "metadata": metadata, **body}


class SliceQueuesArgs(TypedDict):
    namespace: str
    """The workload namespace (created here), where the LocalQueue is."""
    topology_name: str
    """The Kueue Topology's name."""
    levels: list[str]
    """The Topology's node labels, top down (topology_levels)."""
    flavor_name: str
    """The ResourceFlavor's name."""
    accelerator: str
    """The TPU accelerator label value the flavor selects nodes by."""
    admission_check_name: str
    """The AdmissionCheck's name (the slice controller's)."""
    cluster_queue: str
    """The ClusterQueue's name."""
    local_queue: str
    """The LocalQueue's name."""
    tpu_quota: int
    """The chips the ClusterQueue admits (tpu_quota)."""
    cpu_quota: str
    """The ClusterQueue's CPU quota."""
    memory_quota: str
    """The ClusterQueue's memory quota."""
    priorities: dict[str, int]
    """The WorkloadPriorityClasses, name -> value."""
    queued_workloads: int
    """The queued workloads the program runs: while any does, a change of an immutable field is refused."""
    provider: NotRequired[k8s.Provider]
    """The cluster's Kubernetes provider; none: the component's own (its `providers` option)."""
    kueue: NotRequired[k8s.helm.v4.Chart]
    """What the Kueue objects wait for: Kueue's chart (its CRDs and a webhook with endpoints); none: installed."""
    slice_controller: NotRequired[k8s.yaml.v2.ConfigFile]
    """What the AdmissionCheck waits for (never Active without it): the slice controller's manifest; none: installed."""


class SliceQueues(Component):
    """The workload namespace and the Topology, ResourceFlavor, AdmissionCheck, ClusterQueue, LocalQueue and
    WorkloadPriorityClasses the slice controller and the workloads name."""

    def __init__(self, name: str, args: SliceQueuesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:queues:SliceQueues", name, opts)
        # Without them (the package's SliceQueues block, on a cluster that runs Kueue): the caller's provider, no wait.
        provider, kueue = args.get("provider"), args.get("kueue")
        after = [kueue] if kueue is not None else []
        installed = [r for r in (kueue, args.get("slice_controller")) if r is not None]
        self.kueue = kueue  # what waits for Kueue's webhooks to serve (the chart awaits its Deployment and Service)
        self.levels = list(args["levels"])
        # Immutable fields change only through a replacement, which deletes the queued workloads first; the guard
        # refuses one at preview while they run before and after (components/kueue_guard.py).
        fields = immutable_fields(
            self.levels,
            args["accelerator"],
            args["topology_name"],
            args["cluster_queue"],
            args["flavor_name"],
            args["local_queue"],
            args["namespace"],
        )
        self.guard = ImmutableFields(f"{name}-immutable-fields", fields, args["queued_workloads"], self.child())
        # Every Kueue object waits for the Kueue chart: its CRDs and a webhook with endpoints.
        after_kueue = self.child(provider=provider, depends_on=[*after, self.guard])
        # Objects with immutable fields (and fixed names): replaced delete-first, and since each names the next
        # by Output (LocalQueue -> ClusterQueue -> ResourceFlavor -> Topology), Pulumi deletes them in the order
        # Kueue's in-use finalizers release them: LocalQueue, ClusterQueue, ResourceFlavor, Topology.
        replaced = pulumi.ResourceOptions.merge(
            after_kueue, pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)
        )

        # Serving, the demos and the teams' JobSets run here: `baseline`, the strictest level their root pods pass
        # (components/model/pod_security.py), warned about and audited at `restricted`.
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": args["namespace"], "labels": namespace_labels(BASELINE)},
            opts=self.child(provider=provider),
        )
        self.topology = KubernetesObject(
            f"{name}-topology",
            kueue_object(
                "Topology", {"name": args["topology_name"]}, spec={"levels": [{"nodeLabel": n} for n in self.levels]}
            ),
            replaced,
        )
        self.flavor = KubernetesObject(
            f"{name}-flavor",
            kueue_object(
                "ResourceFlavor",
                {"name": args["flavor_name"]},
                spec={
                    "nodeLabels": {ACCELERATOR_LABEL: args["accelerator"]},
                    "topologyName": self.topology.object_name,
                },
            ),
            replaced,
        )
        # The check is only Active once the slice controller runs, so it waits for it too.
        self.admission_check = KubernetesObject(
            f"{name}-admission-check",
            kueue_object(
                "AdmissionCheck", {"name": args["admission_check_name"]}, spec={"controllerName": SLICE_CONTROLLER}
            ),
            self.child(provider=provider, depends_on=installed),
        )
        self.cluster_queue = KubernetesObject(
            f"{name}-cluster-queue",
            kueue_object(
                "ClusterQueue",
                # Names the flavor by Output in its metadata: a delete-first replacement of the flavor deletes the
                # ClusterQueue first (Pulumi asks its Diff with `metadata` wholly unknown, which pulumi-kubernetes
                # replaces: components/model/diff/dependents.py); `replace_on_changes=["metadata"]` adds nothing to it.
                {"name": args["cluster_queue"], "annotations": {FLAVOR_ANNOTATION: self.flavor.object_name}},
                spec={
                    "namespaceSelector": {},
                    "admissionChecksStrategy": {"admissionChecks": [{"name": self.admission_check.object_name}]},
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [
                        {
                            "coveredResources": [TPU_RESOURCE, "cpu", "memory"],
                            "flavors": [
                                {
                                    "name": self.flavor.object_name,
                                    "resources": [
                                        {"name": TPU_RESOURCE, "nominalQuota": str(args["tpu_quota"])},
                                        {"name": "cpu", "nominalQuota": args["cpu_quota"]},
                                        {"name": "memory", "nominalQuota": args["memory_quota"]},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            ),
            pulumi.ResourceOptions.merge(
                after_kueue, pulumi.ResourceOptions(replace_on_changes=["metadata"], delete_before_replace=True)
            ),
        )
        self.local_queue = KubernetesObject(
            f"{name}-local-queue",
            kueue_object(
                "LocalQueue",
                {"name": args["local_queue"], "namespace": self.namespace.metadata.name},
                spec={"clusterQueue": self.cluster_queue.object_name},
            ),
            replaced,
        )
        self.priorities = {
            priority: KubernetesObject(
                f"{name}-priority-{priority}",
                kueue_object(
                    "WorkloadPriorityClass",
                    {"name": priority},
                    value=value,
                    description=f"{priority.split('-', 1)[0].capitalize()} priority workloads",
                ),
                pulumi.ResourceOptions.merge(
                    after_kueue,
                    pulumi.ResourceOptions(
                        aliases=[pulumi.Alias(type_=f"kubernetes:{KUEUE_V1BETA1}:WorkloadPriorityClass")]
                    ),
                ),
            )
            for priority, value in args["priorities"].items()
        }
        self.register_outputs(
            {
                "namespace": self.namespace.metadata.name,
                "topologyLevels": self.levels,
                "clusterQueue": self.cluster_queue.object_name,
                "localQueue": self.local_queue.object_name,
                "tpuQuota": args["tpu_quota"],
            }
        )

    def admission_labels(self, priority: str) -> dict[str, Any]:
        """The labels that queue a workload, naming the LocalQueue and priority class by Output."""
        return {QUEUE_LABEL: self.local_queue.object_name, PRIORITY_LABEL: self.priorities[priority].object_name}

    @property
    def objects(self) -> list[pulumi.Resource]:
        """Everything a workload's admission needs to exist first."""
        return [
            self.topology,
            self.flavor,
            self.admission_check,
            self.cluster_queue,
            self.local_queue,
            *self.priorities.values(),
        ]
