"""Kueue fields the API server never updates (`immutable_fields`, with the keys that change each): refused at preview.

Their CEL rules in the pinned Kueue v0.17.4 CRDs and the `kueue.x-k8s.io/resource-in-use` finalizers that gate
deleting them are in components/model/diff/kubernetes.py FACTS; the AdmissionCheck's immutable `controllerName`
is a constant. components/kueue_objects.py replaces them delete-first in the order those finalizers release, and
Pulumi deletes before them whatever their replacement would replace (components/model/diff/dependents.py): the
program's JobSets and LeaderWorkerSets, whose queue label names the LocalQueue. So the replacement finishes (but
for workloads submitted outside the program, which the ClusterQueue waits for) by deleting serving and the demos:
this guard refuses, at preview, a change of those fields that would delete and re-create queued workloads the
program runs before and after, so that outage is a step the user takes (set `demos.*.enabled` and
`serving.enabled` to false with the key or before it).

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
    levels: list[str],
    accelerator: str,
    topology_name: str,
    cluster_queue: str,
    flavor_name: str,
    local_queue: str,
    namespace: str,
) -> dict[str, dict[str, Any]]:
    """Each immutable field, by the config keys that change it: {field: {"keys": ..., "value": ...}}."""
    return {
        "Topology.spec.levels": {"keys": "tpu.machineType, tpu.cubeTopology", "value": list(levels)},
        "ResourceFlavor.spec.nodeLabels": {"keys": "tpu.machineType", "value": accelerator},
        "ResourceFlavor.spec.topologyName": {"keys": "kueue.topologyName", "value": topology_name},
        "LocalQueue.spec.clusterQueue": {"keys": "kueue.clusterQueue", "value": cluster_queue},
        # A name never changes either: a renamed ResourceFlavor is replaced delete-first, and the ClusterQueue that
        # names it by Output (FLAVOR_ANNOTATION in its metadata) is deleted before it, and what is queued on it.
        "ResourceFlavor.metadata.name": {"keys": "kueue.flavorName", "value": flavor_name},
        # The LocalQueue alone is replaced, but the workloads' queue label names it by Output: deleted before it.
        "LocalQueue.metadata.name": {"keys": "kueue.localQueue", "value": local_queue},
        "LocalQueue.metadata.namespace": {"keys": "kueue.namespace", "value": namespace},
    }


# Each object names the next by Output, so a delete-first replacement of one replaces those before it too.
REPLACED_WITH = ["LocalQueue", "ClusterQueue", "ResourceFlavor", "Topology"]
# A field that holds another object's name: its key renames that object too, which is replaced from there.
NAMES = {"LocalQueue.spec.clusterQueue": "ClusterQueue", "ResourceFlavor.spec.topologyName": "Topology"}


def replaced_with(field: str) -> str:
    """What a change of `field` replaces delete-first: the kind it renames or its own, and every kind naming it,
    in deletion order."""
    kinds = REPLACED_WITH[: REPLACED_WITH.index(NAMES.get(field, field.split(".", 1)[0])) + 1]
    if len(kinds) == 1:
        return f"the {kinds[0]} is replaced delete-first, and Pulumi deletes before it"
    return f"the {', '.join(kinds[:-1])} and {kinds[-1]} are replaced delete-first, and Pulumi deletes before them"


def refusals(olds: dict[str, Any], news: dict[str, Any]) -> list[CheckFailure]:
    """A failure per changed field while queued workloads run before and after (the replacement would delete and
    re-create them); none on the first run, nor when the same update turns them off (they are deleted first)."""
    if not olds:
        return []
    running = min(int(olds.get(WORKLOADS) or 0), int(news.get(WORKLOADS) or 0))
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
                f"the API server never updates (an immutable field); {replaced_with(name)} the {running} queued "
                "workload(s) the program runs (serving is down until they are re-created). "
                "Disable demos.*.enabled and serving.enabled first (or in the same `pulumi up`), then enable them "
                "again",
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
