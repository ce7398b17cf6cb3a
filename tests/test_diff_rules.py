"""The change preview's engine rules that follow Pulumi's own engine, on the cases where a reading of the preview
went wrong: dependents of a delete-first replacement, unknown inputs under `replaceOnChanges`, an API's refusal
that is no ForceNew, and a TPU pool's replacement under running workloads.

Each rule is checked twice: on hand-made records (what the rule says, whatever the program does) and on the
program's real one-key changes (what `python -m components diff` answers for them).
"""

from __future__ import annotations

from typing import Any

from pulumi.output import UNKNOWN

from components.model.diff import dependents, engine, gcp
from components.teardown import PoolReplacementsProvider, replacement_refusals
from tests.test_diff import NO_WORKLOADS_SETS as NO_WORKLOADS
from tests.test_diff import change, preview, record, urn

LQ = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
SUBNET = "gcp:compute/subnetwork:Subnetwork"


# ------------------------------------------------------------------ dependents of a delete-first replacement


def queue_graph(queue_name: str, lws_name: str, protect: bool = False) -> list[dict[str, Any]]:
    """A LocalQueue (delete-first), a LeaderWorkerSet and a JobSet queued on it by Output, and a ClusterQueue
    that only waits for it (`depends_on`, no input from it)."""
    lq = record("lq", LQ, {"metadata": {"name": queue_name}}, options={"deleteBeforeReplace": True})
    label = {"kueue.x-k8s.io/queue-name": queue_name}
    deps = {"metadata": [urn("lq", LQ)]}
    lws = record("lws", LWS, {"metadata": {"name": lws_name, "labels": label}}, property_dependencies=deps)
    js = record("js", JOBSET, {"metadata": {"name": "js", "labels": label}}, property_dependencies=deps)
    js["protect"] = protect
    other = record("cq", CQ, {"metadata": {"name": "cq"}}, dependencies=[urn("lq", LQ)])
    return [lq, lws, js, other]


def test_the_dependents_of_a_delete_first_replacement_are_deleted_first_too() -> None:
    # The LeaderWorkerSet gets a new name (its own replacement would create the new one first), the JobSet keeps
    # its own: both are deleted before the LocalQueue (step_generator.go calculateDependentReplacements).
    result = engine.diff(queue_graph("a", "lws-1"), queue_graph("b", "lws-2")).by_name()
    assert (result["lq"].action, result["lq"].delete_first) == (engine.REPLACE, True)
    for name in ("lws", "js"):
        assert (result[name].action, result[name].delete_first) == (engine.REPLACE, True), result[name]
        assert "deleted before lq" in result[name].reason and "calculateDependentReplacements" in result[name].reason
    assert result["cq"].action == engine.SAME  # a `depends_on` alone carries no unknown input


def test_a_dependent_is_re_created_even_when_its_own_inputs_do_not_change() -> None:
    old = queue_graph("a", "lws-1")
    new = queue_graph("b", "lws-1")
    new[1]["inputs"]["metadata"]["labels"] = old[1]["inputs"]["metadata"]["labels"]  # as if it held the old value
    lws = engine.diff(old, new).by_name()["lws"]
    assert (lws.action, lws.delete_first) == (engine.REPLACE, True)


def test_a_protected_dependent_stops_the_replacement() -> None:
    js = engine.diff(queue_graph("a", "l", protect=True), queue_graph("b", "l", protect=True)).by_name()["js"]
    assert js.action == engine.REJECTED and "protected" in js.reason and dependents.PROTECTED_DEPENDENT in js.reason


def test_a_local_queue_rename_deletes_the_serving_sets_first() -> None:
    """kueue.localQueue: the serving LeaderWorkerSets take new names (create-first on their own), but their labels
    name the LocalQueue by Output, so its delete-first replacement deletes them first."""
    code, result = preview("dev", "--change", "kueue.localQueue=other-lq")
    assert code == 0
    for name in ("serving-decode", "serving-prefill", "subslicing-jobset"):  # dev runs no super-slicing demo
        c = change(result, name)
        assert (c["action"], c["deleteFirst"]) == ("replace", True), c
        assert "deleted before queues-local-queue" in c["reason"]


def test_a_dependents_reason_says_each_clause_once() -> None:
    """A teardown gate is a dependent of its pool's delete-first replacement because its `pool` input turns unknown,
    and its own diff replaces it for the same unknown `pool`: one clause, not the same sentence twice."""
    pool_type, gate_type = "gcp:container/nodePool:NodePool", "pulumi-python:dynamic/teardown:SliceGate"
    fact = "nodeConfig.reservationAffinity.values"

    def graph(sub_block: str) -> list[dict[str, Any]]:
        affinity = {"nodeConfig": {"reservationAffinity": {"values": [sub_block]}}}
        pool = record("pool", pool_type, {"name": "p", **affinity}, options={"deleteBeforeReplace": True})
        gate = record("gate", gate_type, {"pool": "p", "cluster": "c"}, property_dependencies={"pool": [pool["urn"]]})
        return [pool, gate]

    result = engine.diff(graph("sb-1"), graph("sb-3")).by_name()
    assert result["pool"].action == engine.REPLACE and fact in result["pool"].reason
    gate = result["gate"]
    assert (gate.action, gate.delete_first) == (engine.REPLACE, True)
    assert gate.reason.count("pool: unknown, the gate's provider replaces it") == 1, gate.reason
    assert gate.reason.startswith("deleted before pool")
    code, real = preview("dev", *NO_WORKLOADS, "--change", "tpu.reservation.name=other-reservation")
    reason = change(real, "teardown-tpu7-pool-1")["reason"]
    assert code == 0 and reason.count("pool: unknown, the gate's provider replaces it") == 1, reason


# ------------------------------------------------------------------ an unknown input under replaceOnChanges


def test_an_unknown_input_under_replace_on_changes_replaces_its_owner() -> None:
    """A create-first replacement (a new name): the dependent's annotation holds the replaced object's id, the same
    string in both runs, but unknown in the preview; `replaceOnChanges: [metadata]` then replaces the dependent."""
    cm = "kubernetes:core/v1:ConfigMap"
    old_cm, new_cm = record("cm", cm, {"metadata": {"name": "a"}}), record("cm", cm, {"metadata": {"name": "b"}})
    annotated = {"metadata": {"name": "cq", "annotations": {"x": "<cm.id>"}}}
    opts = {"replaceOnChanges": ["metadata"]}
    deps = {"metadata": [urn("cm", cm)]}
    old = [old_cm, record("cq", CQ, annotated, options=opts, property_dependencies=deps)]
    new = [new_cm, record("cq", CQ, annotated, options=opts, property_dependencies=deps)]
    result = engine.diff(old, new).by_name()
    assert (result["cm"].action, result["cm"].delete_first) == (engine.REPLACE, False)
    assert result["cq"].action == engine.REPLACE and "metadata: unknown, replaceOnChanges" in result["cq"].reason
    # without replaceOnChanges the unknown is an update
    new[1] = record("cq", CQ, annotated, property_dependencies=deps)
    assert engine.diff(old, new).by_name()["cq"].action == engine.UPDATE


def test_a_topology_or_flavor_rename_without_workloads_replaces_every_queue_object_delete_first() -> None:
    expected = {
        "kueue.topologyName=other-topology": ("queues-topology", "queues-flavor", "queues-cluster-queue"),
        "kueue.flavorName=other-rf": ("queues-flavor", "queues-cluster-queue"),
    }
    for key, replaced in expected.items():
        code, result = preview("dev", *NO_WORKLOADS, "--change", key)
        assert code == 0, key
        for name in (*replaced, "queues-local-queue"):
            c = change(result, name)
            assert (c["action"], c["deleteFirst"]) == ("replace", True), (key, c)


# ------------------------------------------------------------------ refusals by the API


def subnet(cidr: str, purpose: str) -> dict[str, Any]:
    return record("s", SUBNET, {"name": "s", "ipCidrRange": cidr, "purpose": purpose, "region": "r"})


def test_growing_a_proxy_only_subnet_is_rejected_and_a_private_one_updates() -> None:
    for purpose in ("REGIONAL_MANAGED_PROXY", "GLOBAL_MANAGED_PROXY"):
        (c,) = engine.diff([subnet("172.16.0.0/26", purpose)], [subnet("172.16.0.0/25", purpose)]).changes
        assert c.action == engine.REJECTED and gcp.API_REFUSALS[SUBNET][0].source in c.reason
    (c,) = engine.diff([subnet("10.8.0.0/14", "PRIVATE")], [subnet("10.8.0.0/13", "PRIVATE")]).changes
    assert c.action == engine.UPDATE
    # shrinking or moving it is a replacement (ForceNew when shrink), not a refused update
    moved = {**subnet("172.16.1.0/26", "REGIONAL_MANAGED_PROXY"), "options": {"deleteBeforeReplace": True}}
    (c,) = engine.diff([subnet("172.16.0.0/26", "REGIONAL_MANAGED_PROXY")], [moved]).changes
    assert c.action == engine.REPLACE and "ForceNew when shrink" in c.reason


def test_a_larger_proxy_subnet_is_rejected_by_diff() -> None:
    code, result = preview("dev", "--change", "network.proxySubnetCidr=172.16.0.0/25")
    proxy = change(result, "network-proxy")
    assert code == 1 and proxy["action"] == "rejected" and "proxy-only" in proxy["reason"]


# ------------------------------------------------------------------ a TPU pool replaced under workloads


def guard_inputs(ids: dict[str, Any], workloads: list[str], cluster: Any = "c-id") -> dict[str, Any]:
    return {"pools": ids, "cluster": cluster, "workloads": workloads}


def test_the_program_refuses_a_pool_replacement_while_workloads_ran() -> None:
    """What the provider's `check` gets at preview: a replaced pool's id is unknown (pulumi.output.Unknown)."""
    old = guard_inputs({"tpu7-pool-1": "id-1", "tpu7-pool-2": "id-2"}, ["serving.enabled"])
    replaced = guard_inputs({"tpu7-pool-1": UNKNOWN, "tpu7-pool-2": "id-2"}, [])
    (failure,) = PoolReplacementsProvider().check(old, replaced).failures
    assert failure.property == "pools" and "tpu7-pool-1" in failure.reason and "tpu7-pool-2" not in failure.reason
    assert "serving.enabled=false" in failure.reason
    assert replacement_refusals({}, replaced) == []  # the first run: nothing ran
    assert replacement_refusals({**old, "workloads": []}, replaced) == []  # nothing ran on the pools
    assert replacement_refusals(old, {**replaced, "cluster": UNKNOWN}) == []  # the cluster goes too: all drained
    added = guard_inputs({"tpu7-pool-1": "id-1", "tpu7-pool-2": "id-2", "tpu7-pool-3": UNKNOWN}, [])
    assert replacement_refusals(old, added) == []  # a new pool is created, not replaced
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
    code, result = preview("dev", *NO_WORKLOADS, "--change", "tpu.reservation.name=other-reservation")
    assert code == 0 and change(result, "teardown-pool-replacements")["action"] == "update"  # the new ids
    assert change(result, "capacity-tpu7-pool-1")["action"] == "replace"
    # A new cluster replaces the Kubernetes provider, and with it every workload, deleted before the pools.
    code, result = preview("dev", "--change", "cluster.name=other-cluster")
    assert code == 0 and change(result, "teardown-pool-replacements")["action"] == "update"
    for name in ("serving-decode", "subslicing-jobset", "teardown-tpu7-pool-1", "capacity-tpu7-pool-1"):
        assert change(result, name)["deleteFirst"] is True, name
