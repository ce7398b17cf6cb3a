"""Teardown gates: one per TPU pool, whose delete waits until no Slice uses the pool (docs/teardown.md says in
which order a destroy deletes what, and what each step waits for).

Why: the slice controller releases a Workload's finalizer as soon as it has *issued* the deletes of the
Workload's Slices (xpk `slice/internal/controller/workload_controller.go@250d4b3c`, `cleanupSlices` returns
true right after `deleteSlices`, then `finalizeWorkload`), so a workload's delete completes while its
Slices are still DEACTIVATING, and active Slices block the deletion of their node pool (llm-d's
dynamic-slicing guide). Nothing in Kubernetes or GKE makes Pulumi wait for that; this does.

A delete-first replacement of a pool replaces its gate too, deleting it first: Pulumi deletes every dependent
whose inputs referencing the pool would replace it (its provider's Diff, asked with those inputs unknown) before
the pool (pulumi/pulumi pkg/resource/deploy/step_generator.go, `calculateDependentReplacements`); this provider's
Diff replaces on any change of `pool` or `cluster`. The workloads depend on the gates through `depends_on` alone,
so they stay, and the gate would wait for their Slices until it times out; nor can the graph replace only the
workloads on that pool (Kueue places them at run time). So `PoolReplacements` refuses, at preview, a replacement
of a pool while the program ran queued workloads until now (its provider's `check`, as components/kueue_guard.py
does), even when none of them has a Slice on that pool: the preview reads no cluster, and Kueue may admit one onto
the pool while its gate waits (docs/health.md, "Move after draining"). A replaced pool's `id` is unknown in the
preview. A replaced cluster is exempt: the Kubernetes provider is replaced with it, and with it every workload.
A pool removed (fewer `tpu.cubes`) is refused likewise while queued workloads stay declared: its gate is deleted
with the other removed resources at the end of the update, after the workloads the change turns off (they depend
on it) but never after those it keeps, whose Slices Kueue may have placed, or may place, on that pool.

Pulumi runs every dynamic resource of the program in one `python -m pulumi.dynamic` process whose gRPC server
has four worker threads (`pulumi/dynamic/__main__.py` main, `ThreadPoolExecutor(max_workers=4)`, pulumi
3.272.0): past four pools the gates' waits queue, each timed from its own start.
"""

import time
from collections.abc import Callable
from typing import Any, NamedTuple, TypedDict

import pulumi
import pulumi_gcp as gcp
import yaml
from pulumi.dynamic import CheckFailure, CreateResult, DiffResult, ResourceProvider, UpdateResult
from pulumi.output import Unknown
from pulumi.runtime import rpc

from components.component import Component
from components.dynamic_record import RecordProvider
from components.model.config.settings import Settings
from components.model.diff.families import DELETE_WAITS, SLICE_GATE, replace_keys
from components.model.keys import NODE_POOL_LABEL
from components.model.tpu import slices as model

TIMEOUT_KEY = "addons.sliceController.drainTimeoutSeconds"
POLL_SECONDS = 10.0
# Inputs whose change means another pool (or cluster): the gate is replaced, and so deleted first.
REPLACE_KEYS = replace_keys(SLICE_GATE)
GATE_DELETE_WAITS = DELETE_WAITS[SLICE_GATE].split(" (", 1)[0]  # what the refusal says, without the source

ListNodes = Callable[[str], list[dict[str, str]]]
ListSlices = Callable[[], list[dict[str, Any]] | None]


def wait_until_unused(
    pool: str,
    timeout: float,
    list_nodes: ListNodes,
    list_slices: ListSlices,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll: float = POLL_SECONDS,
) -> float:
    """Returns the seconds waited once no Slice uses `pool`; raises RuntimeError after `timeout`.

    `list_nodes(pool)` gives the labels of the pool's nodes, `list_slices()` every Slice (None when the
    cluster has no Slice API at all, e.g. the slice controller add-on was never enabled).
    """
    start = clock()
    while True:
        found = list_slices()
        uses = [] if found is None else model.slices_using_pool(found, list_nodes(pool))
        waited = clock() - start
        if not uses:
            return waited
        if waited >= timeout:
            raise RuntimeError(model.still_in_use_message(pool, uses, waited, TIMEOUT_KEY))
        pulumi.log.info(f"node pool {pool}: waiting for {len(uses)} Slice(s): {uses[0].describe()} ...")
        sleep(min(poll, max(timeout - waited, 0.0)))


def cluster_listers(kubeconfig: str) -> tuple[ListNodes, ListSlices]:
    """Node and Slice listers for the cluster the kubeconfig names (imported lazily: only deletes need them)."""
    from kubernetes import client, config

    parsed = yaml.safe_load(kubeconfig)
    api = config.new_client_from_config_dict(parsed)
    _require_credential(parsed, api)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    def list_nodes(pool: str) -> list[dict[str, str]]:
        nodes = core.list_node(label_selector=f"{NODE_POOL_LABEL}={pool}").items
        return [dict(n.metadata.labels or {}) for n in nodes]

    def list_slices() -> list[dict[str, Any]] | None:
        groups = client.ApisApi(api).get_api_versions().groups or []
        group = next((g for g in groups if g.name == model.SLICE_GROUP), None)
        if group is None:
            return None
        version = group.preferred_version.version
        try:
            found = custom.list_cluster_custom_object(model.SLICE_GROUP, version, model.SLICE_PLURAL)
        except client.exceptions.ApiException as err:
            if err.status == 404:  # the CRD went away between discovery and the list: no Slices
                return None
            raise
        return list(found["items"])

    return list_nodes, list_slices


def _require_credential(kubeconfig: dict[str, Any], api: Any) -> None:
    """Stops when the kubeconfig's credential plugin gave nothing: the client only logs that failure (its
    `_load_from_exec_plugin` catches every exception, kubernetes/config/kube_config.py) and goes on anonymously,
    so the gate would fail later on a 401 or 403 that does not say why."""
    current = kubeconfig.get("current-context")
    context = next((c["context"] for c in kubeconfig.get("contexts") or [] if c.get("name") == current), {})
    user = next((u["user"] for u in kubeconfig.get("users") or [] if u.get("name") == context.get("user")), {})
    exec_ = user.get("exec")
    if not exec_ or api.configuration.api_key.get("BearerToken") or api.configuration.cert_file:
        return
    command = exec_.get("command", "?")
    raise RuntimeError(
        f"the kubeconfig's credential plugin {command} gave no credential, so the gate cannot ask the cluster "
        f"which Slices use the pool: it must be on the PATH `pulumi` runs with, and logged in "
        f"(gcloud auth login); {exec_.get('installHint', '')} (its error is logged above)"
    )


class SliceGateProvider(ResourceProvider):
    """Stateless: everything a delete needs is in the gate's state, so the pickled provider holds no secret."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['cluster']}/{props['pool']}", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # An unknown input (the engine's question during a pool's delete-first replacement) differs too.
        replaces = [k for k in REPLACE_KEYS if olds.get(k) != news.get(k)]
        changed = bool(replaces) or any(olds.get(k) != news.get(k) for k in ("kubeconfig", "timeoutSeconds"))
        return DiffResult(changes=changed, replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        list_nodes, list_slices = cluster_listers(props["kubeconfig"])
        wait_until_unused(props["pool"], float(props["timeoutSeconds"]), list_nodes, list_slices)


class SliceGate(pulumi.dynamic.Resource, module="teardown", name="SliceGate"):
    """Type `pulumi-python:dynamic/teardown:SliceGate`."""

    def __init__(
        self,
        name: str,
        pool: gcp.container.NodePool,
        kubeconfig: pulumi.Input[str],
        timeout_seconds: int,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = {
            "pool": pool.name,
            "cluster": pool.cluster,
            "kubeconfig": kubeconfig,
            "timeoutSeconds": timeout_seconds,
        }
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"], delete_before_replace=True)
        )
        super().__init__(SliceGateProvider(), name, props, opts)


def workload_keys(settings: Settings) -> list[str]:
    """The keys of the queued workloads the program runs on the TPU pools (demo JobSets, serving)."""
    enabled = {
        "demos.subslicing.enabled": settings.demos.subslicing.enabled,
        "demos.superslicing.enabled": settings.demos.superslicing.enabled,
        "serving.enabled": settings.serving.enabled,
    }
    return [key for key, on in enabled.items() if on]


def _unknown(value: Any) -> bool:
    return isinstance(value, Unknown) or value == rpc.UNKNOWN


class PoolBlock(NamedTuple):
    """Pools a change replaces or removes (`what`) whose gates would wait for the Slices of `running` workloads."""

    what: str  # "replaces" or "removes"
    pools: list[str]
    running: list[str]  # the workloads' keys, to turn off first


def pool_blocks(olds: dict[str, Any], news: dict[str, Any]) -> list[PoolBlock]:
    """A change that replaces a pool that exists (its id unknown at preview) while workloads ran until now, or
    removes one while queued workloads stay declared: either way its gate's delete would wait for Slices that
    nothing deletes (module docstring)."""
    if not olds or _unknown(news.get("cluster")):
        return []
    old_pools, new_pools = olds.get("pools") or {}, news.get("pools") or {}
    # A replacement deletes the gate in the middle of the update, before any workload the change turns off.
    ran = list(olds.get("workloads") or [])
    replaced = [p for p, id_ in new_pools.items() if p in old_pools and _unknown(id_) and not _unknown(old_pools[p])]
    # A removed gate goes at the end, after the workloads the change turns off (they depend on it), not the others.
    staying = list(news.get("workloads") or [])
    removed = [p for p in old_pools if p not in new_pools]
    candidates = (PoolBlock("replaces", sorted(replaced), ran), PoolBlock("removes", sorted(removed), staying))
    return [block for block in candidates if block.pools and block.running]


def pool_refusals(olds: dict[str, Any], news: dict[str, Any]) -> list[CheckFailure]:
    """What `check` refuses: each of `pool_blocks`, naming the pools and the keys to turn off first."""
    out = []
    for what, pools, running in pool_blocks(olds, news):
        off = ", ".join(f"{key}=false" for key in running)
        how = " (delete first)" if what == "replaces" else ""
        reason = (
            f"this change {what} the TPU node pool(s) {', '.join(pools)}{how}, whose teardown gate's delete "
            f"{GATE_DELETE_WAITS}, but nothing deletes the queued workloads that run on the pools (Kueue may place "
            f"them on any pool): {', '.join(running)}. Turn them off first ({off}, then `pulumi up`), then make the "
            "change, then turn them on again"
        )
        out.append(CheckFailure("pools", reason))
    return out


class PoolReplacementsProvider(RecordProvider):
    """State only: its `check` refuses; it never replaces (a code change is no change of its)."""

    record_id = "tpu-pool-replacements"
    refusals = staticmethod(pool_refusals)


class PoolReplacements(pulumi.dynamic.Resource, module="teardown", name="PoolReplacements"):
    """Type `pulumi-python:dynamic/teardown:PoolReplacements`: no cloud or cluster call, state only."""

    def __init__(
        self,
        name: str,
        pools: dict[str, gcp.container.NodePool],
        cluster_id: pulumi.Input[str],
        workloads: list[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {"pools": {pool: p.id for pool, p in pools.items()}, "cluster": cluster_id, "workloads": workloads}
        super().__init__(PoolReplacementsProvider(), name, props, opts)


class SliceGatesArgs(TypedDict):
    kubeconfig: pulumi.Input[str]
    """The cluster's kubeconfig (a secret), which a gate's delete lists the Slices with."""
    pools: dict[str, gcp.container.NodePool]
    """The TPU node pools by name, one gate each."""
    cluster: pulumi.Input[str]
    """The cluster's id: a replaced cluster exempts its pools from the replacement check."""
    timeout_seconds: int
    """How long a gate's delete waits for the pool's Slices to go."""
    workloads: list[str]
    """The keys of the queued workloads the program runs on the pools (workload_keys)."""


class SliceGates(Component):
    """One gate per TPU pool. `opts.depends_on` (the slice controller) is what is deleted only after them."""

    def __init__(self, name: str, args: SliceGatesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:teardown:SliceGates", name, opts)
        timeout = args["timeout_seconds"]
        self.gates = [
            SliceGate(f"{name}-{pool}", p, args["kubeconfig"], timeout, self.child())
            for pool, p in args["pools"].items()
        ]
        # Refuses at preview a pool's replacement that its gate could not finish (the module's docstring).
        # It waits for nothing but the pools' ids (not the slice controller the gates wait for).
        self.replacements = PoolReplacements(
            f"{name}-pool-replacements",
            args["pools"],
            args["cluster"],
            args["workloads"],
            pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"timeoutSeconds": timeout, "gates": len(self.gates)})
