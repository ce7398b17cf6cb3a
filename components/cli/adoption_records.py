"""The records of `import-file`'s catalogue (components/cli/adoption.py): a resource to import, one left to
`pulumi up` with the reason, and the types and components it leaves to `pulumi up` on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from components.model import import_ids as ids
from components.modelserver import LWS_API

CLUSTER_COMPONENT = "gke-tpu-slicing:cluster:Cluster"
# (logical name, type, parent component) of the one Kubernetes provider (components/cluster.py)
K8S_PROVIDER = ("cluster-k8s", "pulumi:providers:kubernetes", "cluster")
NAMESPACE = "kubernetes:core/v1:Namespace"


@dataclass(frozen=True)
class Entry:
    """One resource as the program registers it: type, logical name, parent component, import id."""

    type: str
    name: str
    parent: str
    id: str
    kubernetes: bool = False


@dataclass(frozen=True)
class Skipped:
    """A resource (or a whole family) the file leaves to `pulumi up`, with the reason and what `up` does."""

    name: str
    type: str
    reason: str
    after_import: str
    parent: str | None = None
    on_request: bool = False


@dataclass
class Adoption:
    entries: list[Entry] = field(default_factory=list)
    components: dict[str, str] = field(default_factory=dict)  # logical name -> component type
    skipped: list[Skipped] = field(default_factory=list)


# Resource types this command knows how to import, and types it leaves to `pulumi up` on purpose.
# tests/test_import_file.py fails on any type the program registers that is in neither.
NOT_IMPORTED_TYPES = {
    K8S_PROVIDER[1]: "`pulumi import` cannot import a provider; `pulumi up --target` records it (no cloud call)",
    "kubernetes:helm.sh/v4:Chart": "a chart's objects are named by the chart's render at run time, which needs "
    "the chart (not available offline); the chart component adopts them on `up`",
    "kubernetes:yaml/v2:ConfigFile": "its objects come from a manifest the provider downloads at run time",
    "kubernetes:yaml/v2:ConfigGroup": "its objects come from manifests the provider downloads at run time",
    "pulumi-python:dynamic/queues:ImmutableFields": "a record of the Kueue fields the API server never updates, "
    "in Pulumi's state only (no API call): `pulumi up` creates it",
    f"kubernetes:{LWS_API}:LeaderWorkerSetPatch": "a patch of the imported LeaderWorkerSet, not an object of its "
    "own: there is nothing to import",
    "gcp:storage/bucket:Bucket": "the XLA compilation cache's bucket is new with this program (the reference "
    "scripts write the cache into the weights bucket): there is nothing to adopt",
}
# Components whose every resource is new with this program: the reference scripts create none of them.
NEW_COMPONENTS = {
    "gke-tpu-slicing:network:Egress": "the reference scripts make public nodes and no Cloud Router or Cloud NAT: "
    "there is nothing to adopt",
    "gke-tpu-slicing:observability:Observability": "the reference scripts create no scrape objects, dashboard or "
    "alert policies: there is nothing to adopt",
    "gke-tpu-slicing:teardown:SliceGates": "the teardown gates exist only in Pulumi's state (creating one calls "
    "no API): there is nothing to adopt",
    "gke-tpu-slicing:weights:WeightsDownload": "the reference scripts copy the weights by hand and make no download "
    "Job or writer identity: there is nothing to adopt",
}


def kube_entry(type_: str, name: str, parent: str, object_name: str, namespace: str | None = None) -> Entry:
    return Entry(type_, name, parent, ids.kubernetes_object(name=object_name, namespace=namespace), kubernetes=True)


def skip(plan: Adoption, names: Sequence[str]) -> Adoption:
    """Moves the named entries to the skipped list: objects the deployment does not have (the scripts
    make no node service account and no `system` pool; a finished demo JobSet may be gone)."""
    known = {e.name for e in plan.entries}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ValueError(f"--skip {', '.join(unknown)}: not in the file; one of: {', '.join(sorted(known))}")
    kept = [e for e in plan.entries if e.name not in names]
    dropped = [
        Skipped(e.name, e.type, "left out with --skip", "created by `pulumi up`", e.parent, on_request=True)
        for e in plan.entries
        if e.name in names
    ]
    return Adoption(kept, dict(plan.components), [*plan.skipped, *dropped])
