"""The records of `import-file` (components/cli/adoption.py): a resource to import, one left to `pulumi up`
with the reason, and the types and components it leaves to `pulumi up` on purpose, with why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from components.vllm_leaderworkersets import LWS_API

K8S_PROVIDER = "pulumi:providers:kubernetes"


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


@dataclass(frozen=True)
class Component:
    """A parent component: its type, logical name and parent's name in the file (None under the stack)."""

    type: str
    logical_name: str
    parent: str | None = None


@dataclass
class Adoption:
    # Components by their name in the file: the logical name, unless another component has it (the internal
    # firewall's component is named like the network component it is under).
    components: dict[str, Component] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # The Kubernetes provider the objects name: its logical name and its parent component's name.
    provider: tuple[str, str | None] = ("", None)


CHART_AFTER = (
    "created by the first `pulumi up`, run with PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true so that each "
    "object is applied over the existing one instead of failing with AlreadyExists"
)
# Types left to `pulumi up` on purpose: why, and what `up` does (`{name}` is the resource's name input).
# A type in neither this table nor components/model/import_ids.py stops the command (adoption.py).
NOT_IMPORTED_TYPES = {
    K8S_PROVIDER: (
        "`pulumi import` cannot import a provider; `pulumi up --target` records it (no cloud call)",
        "recorded in the stack by `pulumi up --target <provider URN>` between the two parts",
    ),
    "kubernetes:helm.sh/v4:Chart": (
        "its objects are registered by the provider when `up` renders the chart (helm.v4.Chart is a component "
        "the provider constructs), not by the program; the chart component adopts them on `up`",
        CHART_AFTER,
    ),
    "kubernetes:yaml/v2:ConfigFile": (
        "its objects come from a manifest the provider downloads at run time",
        CHART_AFTER,
    ),
    "kubernetes:yaml/v2:ConfigGroup": (
        "its objects (the inference extension's CRDs, from the repository) are registered by the provider when `up` "
        "constructs the group, not by the program",
        CHART_AFTER,
    ),
    "kubernetes:policy/v1:PodDisruptionBudget": (
        "the reference scripts run one LeaderWorkerSet controller and one slice controller, with no disruption budget "
        "for either: there is nothing to adopt",
        "`pulumi up` creates them, beside each controller's second replica",
    ),
    "pulumi-python:dynamic/queues:ImmutableFields": (
        "a record of the Kueue fields the API server never updates, in Pulumi's state only (no API call): "
        "`pulumi up` creates it",
        "`pulumi up` records the current values; later changes of them are checked at preview",
    ),
    f"kubernetes:{LWS_API}:LeaderWorkerSetPatch": (
        "a patch of the imported LeaderWorkerSet, not an object of its own: there is nothing to import",
        "`pulumi up` applies it and waits once for the set's ready groups (ready at once when they run)",
    ),
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": (
        "the reference scripts declare no NetworkPolicy: there is nothing to adopt",
        "created by `pulumi up` (serving's rules before the namespace's default deny)",
    ),
    "gcp:storage/bucket:Bucket": (
        "the XLA compilation cache's bucket is new with this program (the reference scripts write the cache "
        "into the weights bucket): there is nothing to adopt",
        "created by `pulumi up` as {name}",
    ),
}
# Components whose every resource is new with this program: the reference scripts create none of them.
NEW_COMPONENTS = {
    "gke-tpu-slicing:keda:Keda": (
        "the reference scripts install no KEDA: there is nothing to adopt",
        "`pulumi up` installs KEDA's chart and grants its operator read access to Managed Prometheus",
    ),
    "gke-tpu-slicing:serving:BurstSlots": (
        "the reference scripts serve with fixed groups and make no burst slots: there is nothing to adopt",
        "`pulumi up` creates every burst slot at 0 groups, its ScaledObject and the TriggerAuthentication",
    ),
    "gke-tpu-slicing:network:Egress": (
        "the reference scripts make public nodes and no Cloud Router or Cloud NAT: there is nothing to adopt",
        "`pulumi up` creates the Cloud Router and Cloud NAT, then turns the nodes private in place",
    ),
    "gke-tpu-slicing:observability:Observability": (
        "the reference scripts create no scrape objects, dashboard or alert policies: there is nothing to adopt",
        "`pulumi up` creates every resource of the component (scrape objects, dashboard, alert policies)",
    ),
    "gke-tpu-slicing:teardown:SliceGates": (
        "the teardown gates exist only in Pulumi's state (creating one calls no API): there is nothing to adopt",
        "`pulumi up` creates one gate per TPU pool",
    ),
    "gke-tpu-slicing:weights:WeightsDownload": (
        "the reference scripts copy the weights by hand and make no download Job or writer identity: there is "
        "nothing to adopt",
        "`pulumi up` creates the Job (which finds a filled snapshot and ends), its namespace, account and write access",
    ),
}


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
    return Adoption(dict(plan.components), kept, [*plan.skipped, *dropped], plan.provider)
