"""The teardown gates (components/teardown.py): what their delete waits for, how it gives up, what they keep secret.

The Slices here are shaped as the slice controller writes them (xpk `slice/` at 250d4b3c: `spec.partitionIds`
from the `cloud.google.com/gke-tpu-partition-<shape>-id` node labels, the cube's 4x4x4 label for a super-slice,
the owner annotations of `internal/core/constants.go`); the destroy order and a pool's delete-first replacement
on the recorded graph, and the preview's refusal of a pool's replacement under running workloads.
"""

from __future__ import annotations

import base64
import graphlib
from typing import Any

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.output import UNKNOWN

from components import teardown
from components.model import keys
from components.model.tpu import slices as model
from components.teardown import (
    GATE_DELETE_WAITS,
    PoolReplacementsProvider,
    SliceGateProvider,
    cluster_listers,
    pool_refusals,
)
from tests import harness, upstream
from tests.fakes import KUBE_TOKEN, serve_kube, slice_
from tests.graph_queries import NO_DEMOS, tpu_pools
from tests.harness import Registration, Run, is_secret, ok, unwrap
from tests.preview import NO_WORKLOADS, NO_WORKLOADS_SETS, change, preview
from tests.stack_config import FIXED_SERVING_SETS, P

GATE = "pulumi-python:dynamic/teardown:SliceGate"


def node(pool: str, cube: str, sub: str) -> dict[str, str]:
    return {keys.NODE_POOL_LABEL: pool, keys.partition_label("4x4x4"): cube, keys.partition_label("2x2x2"): sub}


POOL_A = [node("tpu7-pool-0", "cube-a", "a-0"), node("tpu7-pool-0", "cube-a", "a-1")]
POOL_B = [node("tpu7-pool-1", "cube-b", "b-0")]
NODES = {"tpu7-pool-0": POOL_A, "tpu7-pool-1": POOL_B}


def test_a_slice_uses_a_pool_through_the_partition_label_of_its_shape() -> None:
    sub = slice_("sub", "2x2x2", ["a-1"])
    sup = slice_("super", "4x4x8", ["cube-a", "cube-b"])
    elsewhere = slice_("other", "2x2x2", ["b-0"])
    assert [u.name for u in model.slices_using_pool([sub, sup, elsewhere], POOL_A)] == ["sub", "super"]
    assert [u.name for u in model.slices_using_pool([sub, sup, elsewhere], POOL_B)] == ["other", "super"]
    # A sub-slice ID is compared with its own shape's label only: "cube-a" as a 2x2x2 ID is not pool A's.
    assert model.slices_using_pool([slice_("odd", "2x2x2", ["cube-a"])], POOL_A) == []
    # A pool whose nodes are gone has no partitions left to hold a Slice.
    assert model.slices_using_pool([sub, sup], []) == []


def test_which_label_a_slice_names_follows_the_controllers_rule_not_the_nodes_labels() -> None:
    """xpk slice/internal/topology/topology.go@250d4b3c: 2x2x1, 2x2x2, 2x2x4, 2x4x4 are sub-slices (their own
    label, L81 SupportedSubsliceTopologies); every other shape, a whole cube included, names 4x4x4 IDs."""
    cubes_only = [{keys.NODE_POOL_LABEL: "p", keys.partition_label("4x4x4"): "x"}]
    # A 2x4x4 sub-slice never names a cube ID, even on nodes that carry no 2x4x4 label.
    assert model.slices_using_pool([slice_("sub", "2x4x4", ["x"])], cubes_only) == []
    assert [u.name for u in model.slices_using_pool([slice_("cube", "4x4x4", ["x"])], cubes_only)] == ["cube"]
    assert [u.name for u in model.slices_using_pool([slice_("sub", "2x2x2", ["a-0"])], POOL_A)] == ["sub"]


def test_a_deleted_slice_still_holds_its_pool_and_says_it_is_being_deleted() -> None:
    """The controller calls a Slice with a deletionTimestamp deleted (core.go GetSliceState) and releases its
    Workload; the object, and its partitions, stay until GKE has dismantled it."""
    gone = slice_("sub", "2x2x2", ["a-0"], reason="DEACTIVATING", deleting=True)
    (use,) = model.slices_using_pool([gone], POOL_A)
    assert use.state == "DEACTIVATING, deleting"
    bare = {**gone, "status": {}}
    assert model.slices_using_pool([bare], POOL_A)[0].state == "deleting"
    assert model.slices_using_pool([{**bare, "metadata": {"name": "new"}}], POOL_A)[0].state == "unknown"


class FakeCluster:
    """Slices that disappear after `polls` polls; a clock that advances with each sleep."""

    def __init__(self, slices: list[dict] | None, polls: int = 10**9) -> None:
        self.slices, self.polls, self.now, self.listed = slices, polls, 0.0, 0

    def list_slices(self) -> list[dict] | None:
        self.listed += 1
        return [] if self.slices is not None and self.listed > self.polls else self.slices

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def wait(cluster: FakeCluster, pool: str = "tpu7-pool-0", timeout: float = 1200.0) -> float:
    return teardown.wait_until_unused(
        pool, timeout, NODES.__getitem__, cluster.list_slices, clock=lambda: cluster.now, sleep=cluster.sleep
    )


def test_the_delete_waits_until_the_deactivating_slices_are_gone() -> None:
    cluster = FakeCluster([slice_("sub", "2x2x2", ["a-0"], reason="DEACTIVATING", deleting=True)], polls=3)
    assert wait(cluster) == 30.0  # three polls 10 s apart saw the Slice, the fourth did not
    assert cluster.listed == 4


def test_slices_of_other_pools_do_not_hold_a_pool() -> None:
    cluster = FakeCluster([slice_("other", "2x2x2", ["b-0"])])
    assert wait(cluster, "tpu7-pool-0") == 0.0
    with pytest.raises(RuntimeError):
        wait(FakeCluster([slice_("other", "2x2x2", ["b-0"])]), "tpu7-pool-1", timeout=60)


def test_without_the_slice_api_there_is_nothing_to_wait_for() -> None:
    assert wait(FakeCluster(None)) == 0.0


def test_the_wait_is_bounded_and_its_error_names_the_slices_their_workloads_and_the_key() -> None:
    cluster = FakeCluster([slice_("sub", "2x2x2", ["a-0"]), slice_("super", "4x4x8", ["cube-a", "cube-b"])])
    with pytest.raises(RuntimeError) as err:
        wait(cluster, timeout=45)
    message = str(err.value)
    assert message.startswith("node pool tpu7-pool-0: 2 TPU Slice(s) still use its nodes after 45s")
    assert "sub (ACTIVE, workload llm-d-pd-disaggregation/wl-sub)" in message
    assert "super (ACTIVE, workload llm-d-pd-disaggregation/wl-super)" in message
    assert "has not been deleted" in message and teardown.TIMEOUT_KEY in message
    assert cluster.now == 45.0  # the last sleep is cut to the deadline


def test_the_gate_is_replaced_delete_first_when_its_pool_or_cluster_may_change() -> None:
    provider = SliceGateProvider()
    olds = {"pool": "tpu7-pool-0", "cluster": "c", "kubeconfig": "k", "timeoutSeconds": 1200}
    same = provider.diff("id", olds, dict(olds))
    assert same.changes is False and same.replaces == []
    for key in ("pool", "cluster"):
        diff = provider.diff("id", olds, {**olds, key: UNKNOWN})
        assert diff.replaces == [key] and diff.delete_before_replace is True
    # A rotated kubeconfig or another timeout updates the gate in place: no wait runs.
    for key, value in (("kubeconfig", "k2"), ("timeoutSeconds", 60)):
        diff = provider.diff("id", olds, {**olds, key: value})
        assert diff.changes is True and diff.replaces == []


def test_the_pickled_provider_is_a_reference_and_holds_no_secret() -> None:
    """Pulumi stores the provider pickled in the gate's state: it names the class, importable from the project."""
    pickled = base64.b64decode(serialize_provider(SliceGateProvider()))
    assert b"components.teardown" in pickled and b"SliceGateProvider" in pickled
    assert type(dill.loads(pickled)) is SliceGateProvider


def test_one_gate_per_pool_with_the_kubeconfig_secret_end_to_end(dev: Run) -> None:
    gates = dev.of_type(GATE)
    assert sorted(g.plain("pool") for g in gates) == sorted(p.inputs["name"] for p in tpu_pools(dev))
    for gate in gates:
        assert is_secret(gate.inputs["kubeconfig"])
        assert gate.options["additionalSecretOutputs"] == ["kubeconfig"]
        assert gate.plain("timeoutSeconds") == 1200
    run = ok({f"{P}:addons": {"sliceController": {"drainTimeoutSeconds": 300}}})
    assert {g.plain("timeoutSeconds") for g in run.of_type(GATE)} == {300}
    none = ok(
        {f"{P}:tpu": {"cubes": 0}, f"{P}:zone": "us-central1-ai1a", f"{P}:serving": {"enabled": False}, **NO_DEMOS}
    )
    assert none.of_type(GATE) == [] and none.of_type(harness.POOL)


def slice_api(request: pytest.FixtureRequest, groups: list[str], list_status: int = 200) -> tuple[str, list]:
    """Pool A's first node and one Slice (its list answering `list_status`), the API groups `groups` served at
    v1alpha1 and v1beta1, the latter preferred: the kubeconfig's text and the requests."""
    versions = {g: [{"groupVersion": f"{g}/{v}", "version": v} for v in ("v1alpha1", "v1beta1")] for g in groups}
    listed = [{"name": g, "versions": vs, "preferredVersion": vs[1]} for g, vs in versions.items()]
    nodes = {"kind": "NodeList", "apiVersion": "v1", "items": [{"metadata": {"labels": POOL_A[0]}}]}
    path, seen = serve_kube(
        request,
        {
            "/apis": (200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": listed}),
            "/api/v1/nodes": (200, nodes),
            f"/apis/{model.SLICE_GROUP}/v1beta1/{model.SLICE_PLURAL}": (
                list_status,
                {"items": [slice_("sub", "2x2x2", ["a-0"])]},
            ),
        },
    )
    return path.read_text(), seen


def test_the_listers_ask_for_the_pools_nodes_and_the_preferred_slice_version(request: pytest.FixtureRequest) -> None:
    kubeconfig, seen = slice_api(request, ["apps", model.SLICE_GROUP])
    list_nodes, list_slices = cluster_listers(kubeconfig)
    assert list_nodes("tpu7-pool-0") == [POOL_A[0]]
    assert [s["metadata"]["name"] for s in list_slices() or []] == ["sub"]
    assert {r.authorization for r in seen} == {f"Bearer {KUBE_TOKEN}"}  # the kubeconfig's credential, on every request
    assert ("/api/v1/nodes", {"labelSelector": ["cloud.google.com/gke-nodepool=tpu7-pool-0"]}) in [
        (r.path, r.query) for r in seen
    ]
    assert "/apis/accelerator.gke.io/v1beta1/slices" in [r.path for r in seen]
    # No Slice API (the add-on never enabled) and a CRD gone mid-way both mean: nothing to wait for.
    assert cluster_listers(slice_api(request, ["apps"])[0])[1]() is None
    assert cluster_listers(slice_api(request, [model.SLICE_GROUP], list_status=404)[0])[1]() is None
    with pytest.raises(Exception, match="403"):
        cluster_listers(slice_api(request, [model.SLICE_GROUP], list_status=403)[0])[1]()


SLICE_CONTROLLER = ("kubernetes:yaml/v2:ConfigFile", "slice-controller-manifest")


def teardown_order(run: Run) -> list[str]:
    """A deletion order Pulumi may use: every resource after everything that depends on it."""
    dependents: dict[str, set[str]] = {r.urn: set() for r in run.registrations}
    for reg in run.registrations:
        for edge in run.direct_edges(reg):
            if edge in dependents and edge != reg.parent:  # a parent is not deleted before its children
                dependents[edge].add(reg.urn)
    return list(graphlib.TopologicalSorter(dependents).static_order())  # CycleError on a dependency cycle


REPLACEMENTS = "pulumi-python:dynamic/teardown:PoolReplacements"


def gate_of(run: Run, pool: Registration) -> Registration:
    (gate,) = [g for g in run.of_type(GATE) if pool.urn in g.property_dependencies.get("pool", [])]
    return gate


def dependent_replacements(run: Run, root: Registration) -> list[Registration]:
    """What Pulumi deletes before a delete-first replacement of `root`, in deletion order.

    pulumi/pulumi pkg/resource/deploy/step_generator.go `calculateDependentReplacements`: walk the dependents;
    one whose inputs reference a resource being replaced is asked its provider's Diff with those inputs
    unknown, and is replaced (deleted first) if the Diff says so; deletions run in reverse dependency order
    before the root's. Only the gates' Diff is ours to call; every other dependent of a pool references it
    by `depends_on` alone (asserted), which never replaces.
    """
    providers = {GATE: SliceGateProvider(), REPLACEMENTS: PoolReplacementsProvider()}
    replace = {root.urn}
    found: list[Registration] = []
    for reg in run.registrations:  # registration order is a dependency order
        keys = [k for k, urns in reg.property_dependencies.items() if replace & set(urns)]
        if not keys or not reg.custom:
            continue
        assert reg.type in providers, f"{reg.type} {reg.name} references {root.name} by an input: model its Diff"
        olds = unwrap(reg.inputs)
        news = {**olds, **dict.fromkeys(keys, harness.UNKNOWN)}  # the engine's unknown, as the wire sends it
        diff = providers[reg.type].diff(reg.id, olds, news)
        if diff.replaces:
            replace.add(reg.urn)
            found.append(reg)
    return list(reversed(found))


def guard_inputs(ids: dict[str, Any], workloads: list[str], cluster: Any = "c-id") -> dict[str, Any]:
    return {"pools": ids, "cluster": cluster, "workloads": workloads}


def test_destroy_deletes_workloads_then_each_gate_then_its_pool_then_the_slice_controller(codelab: Run) -> None:
    order = teardown_order(codelab)
    position = {urn: i for i, urn in enumerate(order)}
    workloads = codelab.of_type(harness.JOBSET) + codelab.of_type(harness.LWS)
    pools = tpu_pools(codelab)
    slice_controller = codelab.get(*SLICE_CONTROLLER)
    kueue, jobset = codelab.get(harness.CHART, "kueue-chart"), codelab.get(harness.CHART, "jobset-chart")
    # both demos, both floors and dev's four burst slots
    assert len(workloads) == 8 and len(pools) == 2 and len(codelab.of_type(GATE)) == 2
    for pool in pools:
        gate = gate_of(codelab, pool)
        # The gate's delete waits until no Slice uses the pool: after every workload, before the pool.
        for w in workloads:
            assert position[w.urn] < position[gate.urn], f"{w.name} before {gate.name}"
            assert codelab.depends_on(w, gate) and codelab.depends_on(w, slice_controller), w.name
        assert position[gate.urn] < position[pool.urn]
        # The slice controller (which deletes the Slices of deleted Workloads) outlives every gate's wait.
        assert codelab.depends_on(gate, slice_controller)
        assert position[gate.urn] < position[slice_controller.urn]
    # ...and goes before Kueue and JobSet, whose objects it watches; the cluster goes last of all.
    assert position[slice_controller.urn] < position[kueue.urn]
    assert position[slice_controller.urn] < position[jobset.urn]
    assert codelab.depends_on(slice_controller, kueue) and codelab.depends_on(slice_controller, jobset)
    cluster = codelab.get(harness.CLUSTER, "cluster-gke")
    assert all(position[r.urn] < position[cluster.urn] for r in codelab.registrations if codelab.depends_on(r, cluster))


def test_destroy_deletes_each_scaledobject_before_its_slot_and_kedas_chart_and_each_slot_before_its_class(
    dev: Run,
) -> None:
    """Elastic serving's objects (docs/teardown.md): a ScaledObject or the TriggerAuthentication while KEDA's operator
    still runs to remove its finalizer.keda.sh; a ScaledObject before the slot it scales (KEDA would otherwise scale a
    set being deleted); every slot, like a floor, before the WorkloadPriorityClass and the LocalQueue its labels name
    (with the class gone first, Kueue could not requeue it) and before every gate."""
    order = teardown_order(dev)
    position = {urn: i for i, urn in enumerate(order)}
    keda_chart = dev.get(harness.CHART, "keda-chart")
    burst_class = dev.get(f"{harness.KUEUE}/v1beta2:WorkloadPriorityClass", "queues-priority-burst-priority-2500")
    local_queue = dev.get(f"{harness.KUEUE}/v1beta2:LocalQueue", "queues-local-queue")
    slots = [w for w in dev.of_type(harness.LWS) if w.name.startswith("burst-")]
    scalers = dev.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")
    (auth,) = dev.of_type("kubernetes:keda.sh/v1alpha1:TriggerAuthentication")
    assert len(slots) == len(scalers) == 4
    for scaler in [*scalers, auth]:
        assert position[scaler.urn] < position[keda_chart.urn], scaler.name
    for slot in slots:
        (scaler,) = [s for s in scalers if s.name == f"{slot.name}-scaler"]
        assert position[scaler.urn] < position[slot.urn] < position[burst_class.urn], slot.name
        assert position[slot.urn] < position[local_queue.urn]
        assert all(position[slot.urn] < position[gate.urn] for gate in dev.of_type(GATE)), slot.name
    # Not by chance: each edge is a dependency.
    assert all(dev.depends_on(s, keda_chart) for s in scalers)
    assert all(dev.depends_on(s, burst_class) and dev.depends_on(s, local_queue) for s in slots)


def test_a_pool_replacement_deletes_its_gate_first_and_only_its_gate(dev: Run) -> None:
    """The pools are replaced delete-first; the gate's delete (the wait for Slices) completes before the pool's."""
    pools = tpu_pools(dev)
    for pool in pools:
        gate = gate_of(dev, pool)
        assert pool.options["deleteBeforeReplace"] is True
        assert dependent_replacements(dev, pool) == [gate]
        # The gate itself has the pool's fixed name: it too is replaced delete-first.
        assert gate.options["deleteBeforeReplace"] is True
    # A replaced workload policy replaces every pool first (placementPolicy is ForceNew), and with each its gate.
    policy = dev.get("gcp:compute/resourcePolicy:ResourcePolicy", "capacity-policy")
    assert all(policy.urn in p.property_dependencies["placementPolicy"] for p in pools)


def test_the_program_refuses_a_pool_replacement_while_workloads_ran() -> None:
    """What the provider's `check` gets at preview: a replaced pool's id is unknown (pulumi.output.Unknown)."""
    old = guard_inputs({"tpu7-pool-1": "id-1", "tpu7-pool-2": "id-2"}, ["serving.enabled"])
    replaced = guard_inputs({"tpu7-pool-1": UNKNOWN, "tpu7-pool-2": "id-2"}, [])
    (failure,) = PoolReplacementsProvider().check(old, replaced).failures
    assert failure.property == "pools" and "tpu7-pool-1" in failure.reason and "tpu7-pool-2" not in failure.reason
    assert "serving.enabled=false" in failure.reason
    assert pool_refusals({}, replaced) == []  # the first run: nothing ran
    assert pool_refusals({**old, "workloads": []}, replaced) == []  # nothing ran on the pools
    assert pool_refusals(old, {**replaced, "cluster": UNKNOWN}) == []  # the cluster goes too: all drained
    added = guard_inputs({"tpu7-pool-1": "id-1", "tpu7-pool-2": "id-2", "tpu7-pool-3": UNKNOWN}, [])
    assert pool_refusals(old, added) == []  # a new pool is created, not replaced
    assert (
        PoolReplacementsProvider().diff("id", {**old, "__provider": "a"}, {**old, "__provider": "b"}).changes is False
    )


def test_diff_shows_the_refusal_of_a_pool_replacement_under_workloads() -> None:
    code, result = preview("dev", "--change", "tpu.reservation.name=other-reservation")
    guard = change(result, "teardown-pool-replacements")
    assert code == 1 and guard["action"] == "rejected"
    for key in ("demos.subslicing.enabled", "serving.enabled"):  # what ran
        assert key in guard["reason"], key
    assert "demos.superslicing.enabled" not in guard["reason"]  # dev does not run it
    # The provider's own reason, as `pulumi preview` shows it: the replacement is delete-first, and the keys to set.
    assert "replaces the TPU node pool(s) tpu7-pool-1, tpu7-pool-2 (delete first)" in guard["reason"]
    assert "(demos.subslicing.enabled=false, serving.enabled=false, then `pulumi up`)" in guard["reason"]
    code, result = preview("dev", *NO_WORKLOADS_SETS, "--change", "tpu.reservation.name=other-reservation")
    assert code == 0 and change(result, "teardown-pool-replacements")["action"] == "update"  # the new ids
    assert change(result, "capacity-tpu7-pool-1")["action"] == "replace"
    # A new cluster replaces the Kubernetes provider, and with it every workload, deleted before the pools.
    code, result = preview("dev", "--change", "cluster.name=other-cluster")
    assert code == 0 and change(result, "teardown-pool-replacements")["action"] == "update"
    for name in ("serving-decode", "subslicing-jobset", "teardown-tpu7-pool-1", "capacity-tpu7-pool-1"):
        assert change(result, name)["deleteFirst"] is True, name


def test_the_program_refuses_removing_a_pool_while_queued_workloads_stay_declared() -> None:
    """A removed pool's gate is deleted at the end of the update and waits for the pool's Slices: those of the
    queued workloads the program still declares never go (Kueue may have placed them on that pool, and may place a
    new one there until the pool is gone). Workloads turned off in the same change are deleted before the gate
    (they depend on it), so that change is taken."""
    both = {"tpu7-pool-1": "id-1", "tpu7-pool-2": "id-2"}
    running = ["demos.subslicing.enabled", "serving.enabled"]
    assert PoolReplacementsProvider().check(guard_inputs(both, running), guard_inputs(both, running)).failures == []
    removed = guard_inputs({"tpu7-pool-1": "id-1"}, running)
    (failure,) = PoolReplacementsProvider().check(guard_inputs(both, running), removed).failures
    assert failure.property == "pools" and "removes the TPU node pool(s) tpu7-pool-2" in failure.reason
    assert "tpu7-pool-1" not in failure.reason
    assert "demos.subslicing.enabled=false, serving.enabled=false" in failure.reason
    assert pool_refusals(guard_inputs(both, []), removed)  # turned on in the same change: Kueue may use the pool
    assert pool_refusals(guard_inputs(both, running), guard_inputs({"tpu7-pool-1": "id-1"}, [])) == []
    assert pool_refusals(guard_inputs(both, running), {**removed, "cluster": UNKNOWN}) == []  # all go with it


def test_diff_refuses_fewer_cubes_under_workloads_and_says_what_the_gate_waits_for() -> None:
    upstream.require("charts")  # exit status 1 (refused), not 3 (a chart unknown without its sources)
    code, result = preview("dev", *FIXED_SERVING_SETS, "--change", "tpu.cubes=1")  # one cube holds no burst slot
    guard = change(result, "teardown-pool-replacements")
    assert code == 1 and guard["action"] == "rejected", guard
    assert (
        f"removes the TPU node pool(s) tpu7-pool-2, whose teardown gate's delete {GATE_DELETE_WAITS}"
        in (guard["reason"])
    )
    assert "(demos.subslicing.enabled=false, serving.enabled=false, then `pulumi up`)" in guard["reason"]
    gate = change(result, "teardown-tpu7-pool-2")
    assert gate["action"] == "delete" and "waits until no Slice uses its pool" in gate["reason"]
    # Without queued workloads, or turning them off in the same change, the pool and its gate just go.
    for args in (NO_WORKLOADS_SETS, tuple(a for kv in NO_WORKLOADS for a in ("--change", kv))):
        code, result = preview("dev", *args, "--change", "tpu.cubes=1")
        assert code == 0, result
        assert change(result, "capacity-tpu7-pool-2")["action"] == "delete"
        assert change(result, "teardown-tpu7-pool-2")["action"] == "delete"
