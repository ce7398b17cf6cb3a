"""Kueue fields the API server never updates: replaced in the order Kueue's finalizers allow, or refused at preview.

Immutable in the pinned Kueue v0.17.4 CRDs (CEL rules, v1beta2 schemas in ../shared/schemas/crds):

* Topology `spec.levels`: `self == oldSelf` (kueue-v0.17.4_topologies.yaml L132-135). Derived from
  `tpu.machineType` (the host shape) and `tpu.cubeTopology`.
* ResourceFlavor `nodeLabels` and `topologyName` once `topologyName` is set (resourceflavors.yaml L373-380,
  "nodeLabels are immutable when topologyName is set", "topologyName is immutable ..."). From `tpu.machineType`
  (the accelerator label) and `kueue.topologyName`.
* LocalQueue `spec.clusterQueue`: `self == oldSelf` (localqueues.yaml L471-475). From `kueue.clusterQueue`.
* ResourceFlavor `metadata.name` (no object is ever renamed: pulumi-kubernetes replaces on a name change), from
  `kueue.flavorName`: the flavor replaces delete-first, so the ClusterQueue that names it does too.
* AdmissionCheck `spec.controllerName` (admissionchecks.yaml L193-195) is the constant `accelerator.gke.io/slice`.

Deleting them is gated by Kueue's `kueue.x-k8s.io/resource-in-use` finalizer (kubernetes-sigs/kueue@v0.17.4):
a Topology stays while a ResourceFlavor names it (pkg/controller/tas/topology_controller.go L109-121), a
ResourceFlavor while a ClusterQueue names it (pkg/controller/core/resourceflavor_controller.go L107-116), a
ClusterQueue while it has reserving workloads (clusterqueue_controller.go L201-209); a LocalQueue has none.
So a replacement can finish only when it deletes LocalQueue, ClusterQueue, ResourceFlavor, Topology in that
order and no workload holds quota in the ClusterQueue. components/kueue_objects.py declares them to replace
delete-first in that order (each takes the next one's name as an Output); this guard refuses, at preview,
any change of those fields while the program runs queued workloads, or did until now: their ClusterQueue
would never empty. Disable the demos and serving first (`pulumi up`), change the key, enable them again.

The guard is a `pulumi.dynamic.Resource` whose provider's `check` compares the previous inputs with the new
ones; the engine calls it during `pulumi preview` (and the preview of `pulumi up`) before any change.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure

from components.dynamic_record import RecordProvider
from components.model.config.settings import Settings

WORKLOADS = "queuedWorkloads"


def queued_workloads(settings: Settings) -> int:
    """The queued workloads this program declares (demo JobSets, serving LeaderWorkerSets)."""
    demos = sum(1 for d in (settings.demos.subslicing, settings.demos.superslicing) if d.enabled)
    return demos + (2 if settings.serving.enabled else 0)


def immutable_fields(
    levels: list[str], accelerator: str, topology_name: str, cluster_queue: str, flavor_name: str
) -> dict[str, dict[str, Any]]:
    """Each immutable field, by the config keys that change it: {field: {"keys": ..., "value": ...}}."""
    return {
        "Topology.spec.levels": {"keys": "tpu.machineType, tpu.cubeTopology", "value": list(levels)},
        "ResourceFlavor.spec.nodeLabels": {"keys": "tpu.machineType", "value": accelerator},
        "ResourceFlavor.spec.topologyName": {"keys": "kueue.topologyName", "value": topology_name},
        "LocalQueue.spec.clusterQueue": {"keys": "kueue.clusterQueue", "value": cluster_queue},
        # A name never changes either: a renamed ResourceFlavor is replaced delete-first, and the ClusterQueue that
        # names it by Output (FLAVOR_ANNOTATION, replace_on_changes=["metadata"]) is deleted before it.
        "ResourceFlavor.metadata.name": {"keys": "kueue.flavorName", "value": flavor_name},
    }


def refusals(olds: dict[str, Any], news: dict[str, Any]) -> list[CheckFailure]:
    """A failure per changed field while queued workloads run (before or after); none on the first run."""
    if not olds:
        return []
    running = max(int(olds.get(WORKLOADS) or 0), int(news.get(WORKLOADS) or 0))
    if not running:
        return []
    out = []
    old_fields, new_fields = olds.get("fields") or {}, news.get("fields") or {}
    for name, new in new_fields.items():
        old = old_fields.get(name)
        if old is None or old["value"] == new["value"]:
            continue
        out.append(
            CheckFailure(
                name,
                f"{new['keys']}: this changes the Kueue {name} from {old['value']!r} to {new['value']!r}, which "
                "the API server never updates (an immutable field); it is replaced together with the LocalQueue, "
                "ClusterQueue and ResourceFlavor, which Kueue deletes only once no workload holds quota in the "
                f"ClusterQueue, and the program runs {running} queued workload(s). Disable demos.*.enabled and "
                "serving.enabled first (`pulumi up`), then change the key, then enable them again",
            )
        )
    return out


class ImmutableFieldsProvider(RecordProvider):
    record_id = "kueue-immutable-fields"
    refusals = staticmethod(refusals)


class ImmutableFields(pulumi.dynamic.Resource, module="queues", name="ImmutableFields"):
    """Type `pulumi-python:dynamic/queues:ImmutableFields`: no cloud or cluster call, state only."""

    def __init__(
        self, name: str, fields: dict[str, dict[str, Any]], queued_workloads: int, opts: pulumi.ResourceOptions
    ) -> None:
        props = {"fields": fields, WORKLOADS: queued_workloads}
        super().__init__(ImmutableFieldsProvider(), name, props, opts)
