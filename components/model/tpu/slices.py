"""Which TPU `Slice` objects use a node pool, as pure data (the teardown gate polls the cluster with it).

What a Slice looks like, from the slice controller's source (AI-Hypercomputer/xpk, branch `slice-main`,
commit 250d4b3c, the Go module `tpu-slice-controller`):

* CRD `slices.accelerator.gke.io`, cluster-scoped, versions v1beta1 (storage) and v1alpha1 (served,
  deprecated): `slice/config/crd/bases/accelerator.gke.io_slices.yaml`, `slice/api/v1beta1/slice_types.go`.
  The gate asks the API server for the group's preferred version rather than assuming one.
* A Slice names no node pool and no node: `spec.partitionIds` lists the partition IDs it is formed from,
  `spec.topology` its shape (`slice_types.go` SliceSpec). The controller fills the IDs from the value of one
  node label per node of the Workload's topology assignment (`internal/topology/topology.go`
  ParseAssignment, getTPUPartitionIDValue): `cloud.google.com/gke-tpu-partition-<shape>-id` for a
  sub-slice (2x2x1, 2x2x2, 2x2x4, 2x4x4: `subsliceTopology.RequiredSliceLevel`), and the cube's
  `cloud.google.com/gke-tpu-partition-4x4x4-id` for a super-slice (`supersliceTopology`,
  `internal/core/constants.go` TPUSubBlockLabel). The controller treats the IDs as unique in the cluster
  (`validatePartitionConflicts` in `internal/controller/workload_controller.go` compares them across every
  Slice), so a Slice uses a pool exactly when one of its IDs is that label's value on one of the pool's nodes.
* Deleting a Slice does not remove it at once: GKE dismantles it (Ready condition reason `DEACTIVATING`,
  `internal/core/constants.go` MMIGHealthStatusDeactivating) and the object stays until then, with a
  deletionTimestamp. Until it is gone the pool's deletion is blocked (llm-d's dynamic-slicing guide).
* GKE labels every node with its pool: `cloud.google.com/gke-nodepool`
  (https://cloud.google.com/kubernetes-engine/docs/how-to/node-pools, "Deploying workloads to specific node pools").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from components.model.keys import OWNER_NAME, OWNER_NAMESPACE, partition_label

SLICE_GROUP = "accelerator.gke.io"
SLICE_PLURAL = "slices"
CUBE_PARTITION = "4x4x4"  # xpk slice/internal/core/constants.go TPUSubBlockLabel
# xpk slice/internal/topology/topology.go@250d4b3c L81 SupportedSubsliceTopologies: ParseTopologyV7 makes these
# subsliceTopology (RequiredSliceLevel: the shape's own partition label), every other shape supersliceTopology.
SUBSLICE_SHAPES = frozenset({"2x2x1", "2x2x2", "2x2x4", "2x4x4"})


@dataclass(frozen=True)
class SliceUse:
    name: str
    state: str  # the Ready condition's reason (ACTIVE, DEACTIVATING, ...), with ", deleting" once deleted; or "unknown"
    owner: str  # namespace/name of the Kueue Workload, or "" when the annotations are missing

    def describe(self) -> str:
        return f"{self.name} ({self.state}{', workload ' + self.owner if self.owner else ''})"


def _state(slice_: Mapping[str, Any]) -> str:
    conditions = (slice_.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    reason = str(ready["reason"]) if ready and ready.get("reason") else ""
    # A Slice with a deletionTimestamp is "deleted" to the slice controller (core.go GetSliceState), yet it
    # still exists, and holds its partitions, until GKE has dismantled it: it counts, and says so.
    if (slice_.get("metadata") or {}).get("deletionTimestamp"):
        return f"{reason}, deleting" if reason else "deleting"
    return reason or "unknown"


def slices_using_pool(slices: Iterable[Mapping[str, Any]], node_labels: Iterable[Mapping[str, str]]) -> list[SliceUse]:
    """The Slices formed from partitions of these nodes (the nodes of one pool), sorted by name."""
    nodes = [dict(labels) for labels in node_labels]
    out: list[SliceUse] = []
    for s in slices:
        spec = s.get("spec") or {}
        ids = set(spec.get("partitionIds") or [])
        shape = str(spec.get("topology") or "")
        # The controller's own rule: a sub-slice shape's IDs are values of that shape's label, any other shape's
        # (a super-slice) of the cube's; never guessed from which labels the nodes carry.
        key = partition_label(shape if shape in SUBSLICE_SHAPES else CUBE_PARTITION)
        if ids & {labels[key] for labels in nodes if key in labels}:
            meta = s.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            owner = "/".join(p for p in (annotations.get(OWNER_NAMESPACE), annotations.get(OWNER_NAME)) if p)
            out.append(SliceUse(str(meta.get("name", "?")), _state(s), owner))
    return sorted(out, key=lambda u: u.name)


def still_in_use_message(pool: str, uses: list[SliceUse], waited: float, timeout_key: str) -> str:
    listed = ", ".join(u.describe() for u in uses[:10]) + (f" and {len(uses) - 10} more" if len(uses) > 10 else "")
    return (
        f"node pool {pool}: {len(uses)} TPU Slice(s) still use its nodes after {waited:.0f}s: {listed}. "
        "The pool has not been deleted (GKE refuses to delete a pool under active Slices). Stop or delete the "
        "workloads that own them (`kubectl get slices`), wait until GKE has dismantled them (DEACTIVATING, then "
        f"gone), and run the command again; {timeout_key} sets how long this waits."
    )
