"""The dependents a delete-first replacement deletes first (components/model/diff/dependents.py), as Pulumi's
engine does: on hand-made records and on the program's one-key changes."""

from __future__ import annotations

from typing import Any

from components.model.diff import dependents, engine
from tests.harness import JOBSET, LWS
from tests.preview import NO_WORKLOADS_SETS, change, preview, record, urn

LQ = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"


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
    name the LocalQueue by Output, so its delete-first replacement deletes them first: the guard refuses it."""
    code, result = preview("dev", "--change", "kueue.localQueue=other-lq")
    assert code == 1 and change(result, "queues-immutable-fields")["action"] == "rejected"
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
    code, real = preview("dev", *NO_WORKLOADS_SETS, "--change", "tpu.reservation.name=other-reservation")
    reason = change(real, "teardown-tpu7-pool-1")["reason"]
    assert code == 0 and reason.count("pool: unknown, the gate's provider replaces it") == 1, reason
