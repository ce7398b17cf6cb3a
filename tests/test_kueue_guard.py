"""Kueue objects with immutable fields: replaced delete-first in the order Kueue's finalizers allow, or refused.

The rules (CEL `self == oldSelf` in the pinned v0.17.4 CRDs; the `resource-in-use` finalizer logic of Kueue
v0.17.4's controllers) are cited in components/kueue_guard.py; here the recorded graph is run through the
engine's delete-before-replace algorithm and the guard's check is given the inputs of two program runs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.cli.diff import CHECKS
from components.cli.snapshot import records
from components.kueue_guard import ImmutableFieldsProvider, refusals
from components.model.diff import dependents, engine
from components.model.diff.families import facts_of
from components.model.keys import FLAVOR_ANNOTATION
from tests.harness import Registration, Run, ok, unwrap
from tests.stack_config import ROOT, P

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
GUARD = "pulumi-python:dynamic/queues:ImmutableFields"
NO_WORKLOADS = {
    f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
    f"{P}:serving": {"enabled": False},
}


def kueue(run: Run, kind: str) -> Registration:
    (reg,) = run.of_type(f"{KUEUE}:{kind}")
    return reg


def dependent_replacements(run: Run, root: Registration) -> list[Registration]:
    """What Pulumi deletes, in order, before a delete-first replacement of `root` (then `root` itself), as the
    change preview finds them (components/model/diff/dependents.py: calculateDependentReplacements, and what
    pulumi-kubernetes answers with a whole input unknown)."""
    by_urn = {r.urn: r for r in run.registrations}
    recs = records(run.registrations)
    (rec,) = [r for r in recs if r["urn"] == root.urn]
    found = [by_urn[dep["urn"]] for dep, _ in dependents.dependents(rec, recs, set(), facts_of)]
    return [*reversed(found), root]


def kind_of(reg: Registration) -> str:
    return reg.type.rsplit(":", 1)[-1]


def blockers(run: Run, reg: Registration) -> list[Registration]:
    """The objects whose existence keeps Kueue's in-use finalizer on `reg` (kubernetes-sigs/kueue@v0.17.4):
    a Topology's ResourceFlavors (tas/topology_controller.go), a ResourceFlavor's ClusterQueues
    (core/resourceflavor_controller.go), a ClusterQueue's admitted workloads (core/clusterqueue_controller.go)."""
    kind, name = kind_of(reg), reg.plain("metadata")["name"]
    if kind == "Topology":
        return [r for r in run.of_type(f"{KUEUE}:ResourceFlavor") if r.plain("spec").get("topologyName") == name]
    if kind == "ResourceFlavor":
        cqs = run.of_type(f"{KUEUE}:ClusterQueue")
        return [
            cq for cq in cqs if name in [f["name"] for g in cq.plain("spec")["resourceGroups"] for f in g["flavors"]]
        ]
    if kind == "ClusterQueue":
        return [r for r in run.registrations if r.type.endswith((":JobSet", ":LeaderWorkerSet"))]
    return []


def assert_finalizers_release(run: Run, order: list[Registration]) -> None:
    """Deleting `order` in turn, nothing is deleted while an object keeps its in-use finalizer."""
    deleted: set[str] = set()
    for reg in order:
        waiting = [b.name for b in blockers(run, reg) if b.urn not in deleted]
        assert not waiting, f"{reg.name} is deleted while {waiting} keep its finalizer"
        deleted.add(reg.urn)


@pytest.fixture(scope="module")
def idle() -> Run:
    return ok(NO_WORKLOADS)


def test_objects_with_immutable_fields_replace_delete_first(dev: Run) -> None:
    for kind in ("Topology", "ResourceFlavor", "LocalQueue"):
        reg = kueue(dev, kind)
        assert reg.options["replaceOnChanges"] == ["spec"] and reg.options["deleteBeforeReplace"] is True, kind
    cq = kueue(dev, "ClusterQueue")
    assert cq.options["replaceOnChanges"] == ["metadata"] and cq.options["deleteBeforeReplace"] is True
    # The ClusterQueue's metadata names the flavor by Output: that is what makes a flavor replacement reach it.
    assert cq.plain("metadata")["annotations"] == {FLAVOR_ANNOTATION: "slice-rf"}
    assert kueue(dev, "ResourceFlavor").urn in cq.property_dependencies["metadata"]
    # Objects whose fields all update in place keep updating in place.
    for kind in ("AdmissionCheck", "WorkloadPriorityClass"):
        for reg in dev.of_type(f"{KUEUE}:{kind}"):
            assert reg.options["replaceOnChanges"] == [], kind


@pytest.mark.parametrize("root", ["Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"])
def test_each_replacement_deletes_in_the_order_kueues_finalizers_release(idle: Run, root: str) -> None:
    order = dependent_replacements(idle, kueue(idle, root))
    expected = ["LocalQueue", "ClusterQueue", "ResourceFlavor", "Topology"]
    assert [kind_of(r) for r in order] == expected[: expected.index(root) + 1]
    assert_finalizers_release(idle, order)


def test_with_workloads_pulumi_deletes_them_first_and_the_replacement_finishes(dev: Run) -> None:
    """The guard's premise: a Topology replacement deletes the queued workloads before the ClusterQueue (their
    `metadata` names the LocalQueue by Output; wholly unknown, pulumi-kubernetes replaces them whatever their
    `replaceOnChanges`), so it finishes, at the cost of serving and the demos."""
    order = dependent_replacements(dev, kueue(dev, "Topology"))
    kinds = [kind_of(r) for r in order]
    assert kinds[-4:] == ["LocalQueue", "ClusterQueue", "ResourceFlavor", "Topology"], kinds
    workloads = {r.name for r in order if r.type.endswith((":JobSet", ":LeaderWorkerSet"))}
    # dev runs no super-slice demo; its burst slots are queued LeaderWorkerSets too
    assert workloads == {"subslicing-jobset", "serving-prefill", "serving-decode"} | {
        f"burst-{role}-{k}" for role in ("prefill", "decode") for k in (1, 2)
    }
    # Neither LeaderWorkerSet has a replaceOnChanges path: the provider's own diff replaces it.
    assert not any(r.options["replaceOnChanges"] for r in order if r.type.endswith(":LeaderWorkerSet"))
    assert_finalizers_release(dev, order)


def test_a_wholly_unknown_input_replaces_a_kubernetes_object_as_the_provider_answers() -> None:
    """pulumi-kubernetes's Diff with a top-level input unknown: the merge patch nulls each old field under it
    (components/model/diff/dependents.py), so metadata.name replaces whatever `replaceOnChanges` says, and a
    `replaceOnChanges` path replaces only where an old field was nulled."""
    jobset, crd = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", f"{KUEUE}:LocalQueue"

    def why(type_: str, inputs: dict[str, Any], key: str, replace_on_changes: list[str]) -> list[str]:
        rec = {"type": type_, "inputs": inputs, "options": {"replaceOnChanges": replace_on_changes}}
        return dependents.unknown_replaces(rec, [key], facts_of(type_) or ())

    meta = {"metadata": {"name": "js", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}}
    assert any(r.startswith("metadata.name: unknown") for r in why(jobset, meta, "metadata", []))
    assert why(crd, {"spec": {"clusterQueue": "cq"}}, "spec", []) == []
    assert why(crd, {"spec": {"clusterQueue": "cq"}}, "spec", ["spec"]) != []
    assert why(crd, {"spec": {}}, "spec", ["spec"]) == []  # nothing nulled: no detailed diff, no replacement


def test_turning_the_workloads_off_with_the_change_goes_through_and_deletes_them_first(dev: Run) -> None:
    """The change preview of the same update: no refusal, each workload deleted before the Topology, and every queue
    object replaced delete-first."""
    off = ok({f"{P}:kueue": {"topologyName": "slice-topology-2"}, **NO_WORKLOADS})
    result = engine.diff(records(dev.registrations), records(off.registrations), checks=CHECKS).by_name()
    assert not [c for c in result.values() if c.action == engine.REJECTED]
    for name in ("queues-topology", "queues-flavor", "queues-cluster-queue", "queues-local-queue"):
        assert (result[name].action, result[name].delete_first) == (engine.REPLACE, True), name
    for name in ("subslicing-jobset", "serving-prefill", "serving-decode"):
        assert result[name].action == engine.DELETE and result[name].reason.startswith("deleted before queues-topology")


LOCAL_QUEUE = (f"{KUEUE}:LocalQueue", "queues-local-queue")


def guard_inputs(run: Run) -> dict[str, Any]:
    (guard,) = run.of_type(GUARD)
    return unwrap(guard.inputs)


CHANGES = {
    "kueue.topologyName": ("topologyName", "slice-topology-2"),
    "kueue.flavorName": ("flavorName", "slice-rf-2"),
    "kueue.clusterQueue": ("clusterQueue", "cq-2"),
    "kueue.localQueue": ("localQueue", "lq-2"),
    "kueue.namespace": ("namespace", "slice-workloads-2"),
    "kueue.admissionCheckName": ("admissionCheckName", "ac-2"),
}
# The changes refused while workloads run and the immutable field each would change.
REFUSED = {
    "kueue.clusterQueue": "LocalQueue.spec.clusterQueue",
    "kueue.topologyName": "ResourceFlavor.spec.topologyName",
    "kueue.flavorName": "ResourceFlavor.metadata.name",
    "kueue.localQueue": "LocalQueue.metadata.name",
    "kueue.namespace": "LocalQueue.metadata.namespace",
}


def changed(key: str) -> dict[str, Any]:
    return {f"{P}:kueue": dict([CHANGES[key]])}


def identity(reg: Registration) -> tuple[str, str | None]:
    meta = reg.plain("metadata")
    return meta["name"], meta.get("namespace")


def deleted_before(before: Run, after: Run) -> list[Registration]:
    """What the update deletes, in order: each renamed delete-first Kueue object after its dependents."""
    deleted_first: list[Registration] = []
    for reg in before.registrations:
        if not reg.type.startswith(KUEUE) or not reg.options.get("deleteBeforeReplace"):
            continue
        if identity(after.get(reg.type, reg.name)) != identity(reg):
            deleted_first += dependent_replacements(before, reg)
    return deleted_first


def replaced_kinds(before: Run, after: Run) -> str:
    """The Kueue kinds the update replaces delete-first, in deletion order, as the refusal names them."""
    kinds = list(dict.fromkeys(kind_of(r) for r in deleted_before(before, after) if r.type.startswith(KUEUE)))
    return f"the {kinds[0]} is" if len(kinds) == 1 else f"the {', '.join(kinds[:-1])} and {kinds[-1]} are"


@pytest.mark.parametrize("key", sorted(CHANGES))
def test_every_change_that_deletes_the_workloads_first_is_refused_while_they_run(dev: Run, key: str) -> None:
    """pulumi-kubernetes replaces an object whose metadata.name or namespace changes (provider/pkg/provider/diff.go);
    with deleteBeforeReplace its dependents that would be replaced go first (step_generator.go
    calculateDependentReplacements), the queued workloads among them, whose queue label names the LocalQueue: a
    change that deletes them first is refused while they run."""
    after = ok(changed(key))
    deleted_first = deleted_before(dev, after)
    workloads = {r.name for r in deleted_first if r.type.endswith((":JobSet", ":LeaderWorkerSet"))}
    refused = [f.property for f in refusals(guard_inputs(dev), guard_inputs(after))]
    assert bool(refused) == bool(workloads) == (key in REFUSED), (workloads, refused)


@pytest.mark.parametrize(("key", "field"), REFUSED.items())
def test_a_change_is_refused_at_preview_while_workloads_run(codelab: Run, dev: Run, key: str, field: str) -> None:
    overrides = changed(key)
    before, after = guard_inputs(codelab), guard_inputs(ok(overrides))
    # What the refusal says is replaced is what the update would replace (a renamed ClusterQueue or Topology too).
    replaced = replaced_kinds(dev, ok(overrides))
    (failure,) = refusals(before, after)
    assert failure.property == field
    # The key, the old and the new value, what is replaced; codelab runs 4 queued workloads, the changed (dev)
    # program 3: those 3 would be deleted and re-created.
    old, new = codelab.get(*LOCAL_QUEUE).plain("metadata"), CHANGES[key][1]
    assert failure.reason.startswith(f"{key}: this changes the Kueue {field} from ")
    assert f" to {new!r}, " in failure.reason and f"{replaced} replaced delete-first" in failure.reason
    if key in ("kueue.localQueue", "kueue.namespace"):
        assert f"from {old[field.rsplit('.', 1)[1]]!r} to " in failure.reason
    assert "the 3 queued workload(s)" in failure.reason
    assert "Disable demos.*.enabled and serving.enabled first" in failure.reason
    # The provider's Check is what the engine calls during preview.
    assert [f.property for f in ImmutableFieldsProvider().check(before, after).failures] == [field]
    # Turning the workloads off in the same update goes through: the replacement deletes them first (tested above),
    # and the user asked for it; so does the change once they are gone, and turning them on with it.
    after_idle = guard_inputs(ok({**overrides, **NO_WORKLOADS}))
    idle = guard_inputs(ok(NO_WORKLOADS))
    assert refusals(before, after_idle) == refusals(idle, after_idle) == refusals(idle, after) == []


def test_derived_fields_are_guarded_with_the_keys_that_drive_them(dev: Run) -> None:
    before = guard_inputs(dev)
    fields = before["fields"]
    levels = [lv["nodeLabel"] for lv in kueue(dev, "Topology").plain("spec")["levels"]]
    assert fields["Topology.spec.levels"]["value"] == levels
    flavor = kueue(dev, "ResourceFlavor").plain("spec")
    assert fields["ResourceFlavor.spec.nodeLabels"]["value"] in flavor["nodeLabels"].values()
    other = {**before, "fields": {**fields, "Topology.spec.levels": {**fields["Topology.spec.levels"], "value": []}}}
    (failure,) = refusals(other, before)
    assert failure.reason.startswith("tpu.machineType, tpu.cubeTopology: ")


def test_what_is_not_an_immutable_field_is_not_refused(dev: Run) -> None:
    before = guard_inputs(dev)
    assert refusals({}, before) == []  # the first `up`
    for overrides in ({f"{P}:tpu": {"cubes": 3}}, {f"{P}:kueue": {"cpuQuota": "20000"}}, NO_WORKLOADS):
        assert refusals(before, guard_inputs(ok(overrides))) == [], overrides


def test_every_guarded_field_is_an_immutable_field_of_the_model(dev: Run) -> None:
    """The guard's fields are the preview model's facts (checked against the pinned CRDs in
    test_diff_kubernetes.py), and every CEL rule of a Kueue kind is guarded but on what the program never changes:
    the AdmissionCheck's controllerName (a constant) and the flavor's tolerations (never set)."""
    from components.model.diff import kubernetes

    guarded = set(guard_inputs(dev)["fields"])
    for field in guarded:
        kind, path = field.split(".", 1)
        facts = (*kubernetes.METADATA, *kubernetes.FACTS[f"{KUEUE}:{kind}"])
        assert any(f.path == path for f in facts), field
    cel = {f"{t.rsplit(':', 1)[1]}.{f.path}" for t, fs in kubernetes.FACTS.items() if t.startswith(KUEUE) for f in fs}
    assert cel - guarded == {"AdmissionCheck.spec.controllerName", "ResourceFlavor.spec.tolerations"}
    assert "tolerations" not in kueue(dev, "ResourceFlavor").plain("spec")


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_the_change_page_names_the_object_each_key_renames(dev: Run, key: str) -> None:
    """docs/changes.md says, per key, which renamed object the replacement starts from (the last one deleted)."""
    deleted = [r for r in deleted_before(dev, ok(changed(key))) if r.type.startswith(KUEUE)]
    text = " ".join((ROOT / "docs" / "changes.md").read_text().split())
    assert re.search(rf"renamed (or moved )?{kind_of(deleted[-1])} \([^)]*`{re.escape(key)}`", text), key
