"""Which facts each type token reads: Google Cloud (gcp.py), Kubernetes kinds (kubernetes.py, chart_kinds.py),
the Kubernetes provider itself, the program's own dynamic providers, and the components whose children the
provider renders at run time. A type none of them covers is not modelled (`facts_of` answers None).
"""

from __future__ import annotations

from typing import Any

from components.model.diff import facts as F
from components.model.diff.gcp import FACTS as GCP_FACTS
from components.model.diff.kubernetes import facts_for

Record = dict[str, Any]

K8S_PROVIDER = "pulumi:providers:kubernetes"
DYNAMIC = "pulumi-python:dynamic:Resource"
DYNAMIC_PREFIX = "pulumi-python:dynamic"
# The program's own dynamic providers: what their `diff` decides. The gate's provider reads its replace keys
# from here (replace_keys); tests/test_diff_engine.py calls each provider's `diff` against these facts.
SLICE_GATE = "pulumi-python:dynamic/teardown:SliceGate"
_SLICE_GATE = "components/teardown.py SliceGateProvider.diff (REPLACE_KEYS, delete_before_replace=True)"
DYNAMIC_FACTS: dict[str, tuple[F.Fact, ...]] = {
    DYNAMIC: (),  # a provider without `diff`: any change of the inputs is an update (DYNAMIC_SOURCE)
    # A gate of another pool or cluster is another gate.
    SLICE_GATE: (
        F.Fact("pool", F.REPLACE, _SLICE_GATE, "the gate's provider replaces it"),
        F.Fact("cluster", F.REPLACE, _SLICE_GATE, "the gate's provider replaces it"),
    ),
    # Never replaced (kueue_guard.py ImmutableFieldsProvider.diff); its `check` refuses (see `checks` below).
    "pulumi-python:dynamic/queues:ImmutableFields": (),
    # Never replaced either (teardown.py PoolReplacementsProvider.diff); its `check` refuses too.
    "pulumi-python:dynamic/teardown:PoolReplacements": (),
}
DYNAMIC_DELETE_FIRST = frozenset({SLICE_GATE})
# What a delete of one of them waits for: the engine says it of each delete (and delete-first replacement), and the
# gate's preview check (teardown.py pool_refusals) names it when it refuses the change that would never finish.
DELETE_WAITS: dict[str, str] = {
    SLICE_GATE: "waits until no Slice uses its pool, up to addons.sliceController.drainTimeoutSeconds "
    "(components/teardown.py SliceGateProvider.delete, wait_until_unused)"
}
# Providers whose diff ignores the pickled provider itself (`__provider`): a code change is no change of theirs.
DYNAMIC_OWN_DIFF = frozenset(DYNAMIC_FACTS) - {DYNAMIC}
# Components whose children the Kubernetes provider renders at run time (not visible offline).
REMOTE = ("kubernetes:helm.sh/v4:Chart", "kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup")
PROVIDER_FACTS = (
    F.Fact(
        "clusterIdentifier",
        F.REPLACE,
        f"{F.PULUMI_KUBERNETES}/provider/provider.go:490",
        "a new clusterIdentifier replaces the provider",
    ),
)
DYNAMIC_SOURCE = (
    "pulumi 3.272.0 sdk/python/lib/pulumi/dynamic/dynamic.py:222-231 (default diff: unknown) and "
    "dynamic/__main__.py:121-134: the engine compares the inputs, and a change is an update"
)


def replace_keys(type_: str) -> tuple[str, ...]:
    """The inputs whose change replaces a resource of one of the program's dynamic providers."""
    return tuple(f.path for f in DYNAMIC_FACTS[type_] if f.effect == F.REPLACE)


def is_modelled(record: Record) -> bool:
    """Custom resources and the components whose children the provider renders; not the program's own components."""
    return bool(record.get("custom")) or record["type"] in REMOTE


def facts_of(type_: str) -> tuple[F.Fact, ...] | None:
    """The model's facts for a type token; None when the model does not cover the type."""
    if type_ in GCP_FACTS:
        return GCP_FACTS[type_]
    if type_ == K8S_PROVIDER:
        return PROVIDER_FACTS
    if type_ in REMOTE:
        return ()
    if type_.startswith(DYNAMIC_PREFIX):
        return DYNAMIC_FACTS.get(type_)
    if type_.startswith("kubernetes:"):
        return facts_for(type_)
    return None
