"""`python -m components diff`: each action on real one-key changes of the stack files, the second run of every
stack against the read-back model, the pull-request mode against a git revision, the output and exit codes.

Expected actions come from the model (components/model/diff/) and its cited facts; these tests pin which
resources a change touches and what the command prints.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.cli import diff
from components.model.diff import engine
from tests.harness import LWS, POOL
from tests.preview import NO_WORKLOADS_SETS, change, preview, record, run
from tests.stack_config import FIXED_SERVING_SETS, ROOT, STACKS

DISAGG = "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet"


def actions(result: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["action"] for c in result["changes"] if c["action"] != "same"}


def clause(type_: str, path: str) -> str:
    """How a reason names the model's fact at `path` of a type (changed, or unknown), with its source."""
    fact = next(f for f in engine.facts_of(type_) or () if f.path == path)
    return f"{fact.rule} ({fact.source}"


# ------------------------------------------------------------------------------------------------ each action


def test_adding_a_cube_creates_one_pool_and_updates_what_counts_chips() -> None:
    code, result = preview("dev", "--change", "tpu.cubes=3")
    assert code == 0
    assert actions(result) == {
        "capacity-tpu7-pool-3": "create",
        "teardown-tpu7-pool-3": "create",  # its teardown gate
        "queues-cluster-queue": "update",  # the TPU quota: chips provisioned
        "observability-dashboard": "update",  # the provisioned-chips line
        "observability-tpu-quota-full": "update",  # the alert's threshold
        "teardown-pool-replacements": "update",  # the record of the pools' ids (state only)
    }
    assert change(result, "queues-cluster-queue")["properties"] == [
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    ]
    assert result["totals"]["create"] == 2 and result["totals"]["rejected"] == 0


def test_another_reservation_replaces_every_tpu_pool_delete_first() -> None:
    code, result = preview("dev", *NO_WORKLOADS_SETS, "--change", "tpu.reservation.name=other-reservation")
    assert code == 0
    assert actions(result) == {
        "capacity-tpu7-pool-1": "replace",
        "capacity-tpu7-pool-2": "replace",
        "teardown-tpu7-pool-1": "replace",  # a gate's provider replaces it with its pool (delete-first)
        "teardown-tpu7-pool-2": "replace",
        "teardown-pool-replacements": "update",  # the pools' new ids (state only)
    }
    assert change(result, "teardown-tpu7-pool-1")["deleteFirst"] is True
    pool = change(result, "capacity-tpu7-pool-1")
    assert pool["deleteFirst"] is True
    assert pool["properties"] == ["nodeConfig.reservationAffinity.values[0]"]
    assert clause(POOL, "nodeConfig.reservationAffinity.values") in pool["reason"]


def test_the_system_machine_type_updates_the_system_pool_in_place() -> None:
    code, result = preview("dev", "--change", "cluster.systemMachineType=n2-standard-48")
    assert (code, actions(result)) == (0, {"cluster-system": "update"})
    assert change(result, "cluster-system")["properties"] == ["nodeConfig.machineType"]


def test_a_serving_shape_change_is_what_the_program_registers_allows() -> None:
    """An in-place LeaderWorkerSet shape change under Kueue is refused by its webhook; a rollout to new objects
    (new names, or a DisaggregatedSet whose controller rolls) is a create and a delete, or an update."""
    code, result = preview("dev", *FIXED_SERVING_SETS, "--change", "serving.decode.topology=2x2x4")
    by_name = {c["name"]: c for c in result["changes"]}
    touched = [c for c in result["changes"] if c["type"] in (LWS, DISAGG) and c["action"] != "same"]
    assert touched, "a decode shape change must touch the decode role"
    for c in touched:
        if c["type"] == LWS and c["action"] in ("update", "rejected"):
            assert c["action"] == "rejected", c
            shape = next(f for f in engine.facts_of(LWS) or () if "SpecShape" in f.rule)
            assert f"{shape.rule} ({shape.source})" in c["reason"], c
        else:
            assert c["action"] in ("create", "delete", "update", "replace"), c
    assert code == (1 if any(c["action"] == "rejected" for c in by_name.values()) else 0)


def test_a_smaller_role_is_replaced_delete_first_when_the_running_set_fills_the_room() -> None:
    # One cube, serving only: 4 + 4 groups fill it. The changed run reads the first run's servingShape, as the
    # next `pulumi up` reads the stack's previous outputs (components/preflight.py read_deployed_serving): beside the
    # 4 running decode groups, none of the 2 new ones fits, so the old set goes first.
    only_serving = ("tpu.cubes=1", "demos.subslicing.enabled=false", "demos.superslicing.enabled=false")
    sets = [*FIXED_SERVING_SETS, *(a for kv in only_serving for a in ("--set", kv))]
    code, result = preview("dev", *sets, "--change", "serving.decode.replicas=2")
    assert code == 0
    touched = {c["name"]: c for c in result["changes"] if c["type"] == LWS and c["action"] != "same"}
    assert (touched["serving-decode"]["action"], touched["serving-decode"]["deleteFirst"]) == ("replace", True)
    # Prefill would await a different number of groups on its own next rollout (more room beside a smaller decode),
    # but that count belongs to the wait of a set's creation: neither prefill's set nor its leaders-ready patch
    # (annotations ignored after its create) changes, so nothing of prefill is awaited again.
    assert "serving-prefill" not in touched
    (patch,) = [c for c in result["changes"] if c["name"].startswith("serving-prefill-ready-")]
    assert (patch["action"], patch["reason"]) == (
        "same",
        "ignored: metadata.annotations (" + patch["reason"].split("(", 1)[1],
    )


def test_an_image_change_updates_the_sets_in_place_and_awaits_nothing() -> None:
    """pulumi-kubernetes awaits the live object's waitFor after an update (provider/pkg/await/await.go:504) unless the
    inputs skip the await (provider/pkg/metadata/overrides.go:108): the preview says which, and an image change
    touches neither set's leaders-ready patch, the one awaited resource."""
    code, result = preview("dev", "--change", "serving.image=docker.io/vllm/vllm-tpu:fixed")
    # Both floors and every burst slot (their pods are built alike) update in place.
    sets = ["serving-decode", "serving-prefill", *(f"burst-{r}-{k}" for r in ("decode", "prefill") for k in (1, 2))]
    assert (code, actions(result)) == (0, dict.fromkeys(sets, "update"))
    for name in sets:
        assert change(result, name)["reason"].startswith("not awaited: pulumi.com/skipAwait")


def test_a_topology_level_change_is_refused_and_replaces_the_policy_and_pools() -> None:
    # 2x4x4 cubes: the Kueue Topology loses its 4x4x4 level; dev's sub-slices still fit (its super-slice demo is off).
    code, result = preview("dev", *FIXED_SERVING_SETS, "--change", "tpu.cubeTopology=2x4x4")
    assert code == 1
    # Kueue never updates spec.levels (a CEL rule): an in-place update is rejected;
    # a program that replaces the Topology instead (deleting the queued workloads first) refuses while they run.
    topology = change(result, "queues-topology")
    assert topology["action"] in ("replace", "rejected") and topology["properties"] == ["spec.levels"]
    if topology["action"] == "rejected":
        assert clause("kubernetes:kueue.x-k8s.io/v1beta2:Topology", "spec.levels") in topology["reason"]
    else:
        refusals = [c for c in result["changes"] if c["action"] == "rejected"]
        assert any("Topology.spec.levels" in c["reason"] for c in refusals), refusals
    policy = change(result, "capacity-policy")
    assert policy["action"] == "replace" and policy["deleteFirst"]
    assert clause("gcp:compute/resourcePolicy:ResourcePolicy", "workloadPolicy.acceleratorTopology") in policy["reason"]
    for name in ("capacity-tpu7-pool-1", "capacity-tpu7-pool-2"):
        pool = change(result, name)
        # placement_policy references the replaced policy: unknown in the preview, and ForceNew.
        assert pool["action"] == "replace" and "placementPolicy: unknown" in pool["reason"]


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_replacing_a_protected_resource_is_rejected(stack: str) -> None:
    code, result = preview(stack, "--change", "tpu.reservation.name=other-reservation")
    assert code == 1
    pools = [c for c in result["changes"] if c["type"] == POOL and c["name"] != "cluster-system"]
    assert pools and all(c["action"] == "rejected" for c in pools)
    fact = clause(POOL, "nodeConfig.reservationAffinity.values")
    assert all("protected" in c["reason"] and fact in c["reason"] for c in pools)


def test_disabling_a_demo_deletes_its_jobset() -> None:
    code, result = preview("dev", "--change", "demos.subslicing.enabled=false")
    assert code == 0 and actions(result).get("subslicing-jobset") == "delete"
    assert not {a for n, a in actions(result).items() if n != "subslicing-jobset"} - {"update", "delete"}


def test_a_new_cluster_name_replaces_the_cluster_and_every_kubernetes_object() -> None:
    code, result = preview("dev", "--change", "cluster.name=other-cluster")
    assert code == 0
    cluster = change(result, "cluster-gke")
    assert cluster["action"] == "replace" and clause("gcp:container/cluster:Cluster", "name") in cluster["reason"]
    kubernetes = [c for c in result["changes"] if c["type"].startswith("kubernetes:")]
    assert kubernetes and all(c["action"] == "replace" for c in kubernetes), [
        c["name"] for c in kubernetes if c["action"] != "replace"
    ]
    provider = change(result, "cluster-k8s")
    assert (
        provider["action"] == "replace"
        and clause("pulumi:providers:kubernetes", "clusterIdentifier") in provider["reason"]
    )


def test_no_change_is_all_same() -> None:
    code, result = preview("dev", "--change", "tpu.cubes=2")
    assert code == 0 and actions(result) == {}
    assert result["totals"]["same"] == len(result["changes"]) > 50


# ------------------------------------------------------------------------------------------------ second run


@pytest.mark.parametrize("stack", STACKS)
def test_the_second_run_changes_nothing(stack: str) -> None:
    _, result = preview(stack, "--second-run")
    changed = sorted((c["type"], c["name"], *c["properties"]) for c in result["changes"] if c["action"] != "same")
    assert changed == [], f"the second `pulumi up` of {stack} would change {changed}"


# ------------------------------------------------------------------------------------------------ --base


def test_base_runs_the_program_at_a_git_revision(tmp_path: Path) -> None:
    """A copy of this tree committed in a scratch repository; the stack file then changes in the worktree."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for rel in files:
        if (ROOT / rel).is_file() and not rel.startswith(("tests/", "benchmarks/", ".github/")):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, tmp_path / rel)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run([*git, *args], cwd=tmp_path, check=True)
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(stack_file.read_text().replace("cubes: 2", "cubes: 3"))
    code, out, err = run("dev", "--base", "HEAD", "--json", directory=tmp_path)
    assert code == 0, err
    assert actions(json.loads(out)).get("capacity-tpu7-pool-3") == "create"
    code, out, err = run("dev", "--base", "no-such-ref", directory=tmp_path)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--base 'no-such-ref'" in err
    assert "a branch, tag or commit" in err, err  # what it takes, not git's own command line


# ------------------------------------------------------------------------------------------------ output, errors


def test_the_json_output_is_the_documented_shape() -> None:
    _, result = preview("dev", "--change", "tpu.cubes=3")
    assert set(result) == {"changes", "totals"}
    assert set(result["totals"]) == set(engine.ACTIONS)
    for c in result["changes"]:
        assert set(c) == {"name", "type", "action", "properties", "reason", "deleteFirst"}
        assert c["action"] in engine.ACTIONS and isinstance(c["properties"], list)


def test_the_table_lists_what_changes_and_the_totals() -> None:
    code, out, _ = run("dev", *NO_WORKLOADS_SETS, "--change", "tpu.reservation.name=other-reservation")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("stack dev: 1 update, 4 replace, ") and lines[0].endswith(" same")
    assert any(line.startswith("replace   capacity-tpu7-pool-1") and "(delete first)" in line for line in lines)
    assert "why: nodeConfig.reservationAffinity.values: ForceNew" in out
    assert "cluster-gke" not in out  # unchanged resources are only counted


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--change", "tpu.cubes=0"], "tpu.cubes"),  # the program refuses the configuration
        (["--change", "novalue"], "expected KEY=VALUE"),
    ],
)
def test_bad_configuration_is_one_line_and_exits_2(args: list[str], fragment: str) -> None:
    code, out, err = run("dev", *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and fragment in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [([], "one of the arguments"), (["--second-run", "--base", "HEAD"], "not allowed with"), (["--stack"], "expected")],
)
def test_argument_errors_print_one_line(capsys: pytest.CaptureFixture[str], args: list[str], fragment: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        diff.main(["--stack", "dev", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and fragment in err


def test_a_missing_stack_file_exits_2() -> None:
    err = io.StringIO()
    code = diff.main(["--stack", "nosuchstack", "--second-run"], io.StringIO(), err)
    err = err.getvalue()
    assert code == 2 and "Pulumi.nosuchstack.yaml" in err and len(err.strip().splitlines()) == 1


def test_secrets_are_never_printed() -> None:
    token = "hf_SECRETvalue123456"
    for extra in ([], ["--json"]):
        code, out, err = run("dev", "--set", "hfToken=hf_oldTOKEN0000000", "--change", f"hfToken={token}", *extra)
        assert code == 0, err
        assert token not in out + err and "hf_oldTOKEN0000000" not in out + err
    _, result = preview("dev", "--set", "hfToken=hf_oldTOKEN0000000", "--change", f"hfToken={token}")
    secret = change(result, "serving-hf-token")
    # A Secret's data is replace-on-change for the provider unless enableSecretMutable (diff.go L28-29);
    # the key changed, never its value, is what the output names.
    assert secret["action"] == "replace" and secret["properties"] == ["stringData"]
    # Pods that read it see an unknown reference while it is replaced: an update, not a refused shape change.
    others = {c["name"]: c for c in result["changes"] if c["action"] != "same" and c["name"] != secret["name"]}
    assert {c["action"] for c in others.values()} <= {"update"}
    assert all(
        p.endswith("(unknown: depends on a replaced resource)") for c in others.values() for p in c["properties"]
    )


# ------------------------------------------------------------------------------------------------ Pulumi options


def test_an_alias_keeps_the_resource() -> None:
    old_type = "kubernetes:kueue.x-k8s.io/v1beta1:WorkloadPriorityClass"
    new_type = "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"
    obj = {"metadata": {"name": "high"}, "value": 3000}
    new = record("p", new_type, obj, aliases=[{"spec": {"type": old_type, "parentUrn": ""}}])
    (only,) = engine.diff([record("p", old_type, obj)], [new]).changes
    assert only.action == engine.SAME and "alias" in only.reason
    # without the alias: a new resource for the object the cluster still holds (another version of one kind is the
    # same object), whose create fails before the old one is deleted
    without = {c.action: c for c in engine.diff([record("p", old_type, obj)], [{**new, "aliases": []}]).changes}
    assert sorted(without) == [engine.DELETE, engine.REJECTED] and "AlreadyExists" in without[engine.REJECTED].reason


WEBHOOKS = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


@pytest.mark.parametrize(
    ("type_", "old_meta", "new_meta", "created"),
    [
        # cluster-scoped: a namespace in the manifest names no other object (Kueue's chart writes one)
        (WEBHOOKS, {"name": "w", "namespace": "a"}, {"name": "w", "namespace": "b"}, engine.REJECTED),
        (CONFIG_MAP, {"name": "c", "namespace": "a"}, {"name": "c", "namespace": "a"}, engine.REJECTED),
        (CONFIG_MAP, {"name": "c", "namespace": "a"}, {"name": "c", "namespace": "b"}, engine.CREATE),
        (CONFIG_MAP, {"name": "c", "namespace": "a"}, {"name": "d", "namespace": "a"}, engine.CREATE),
        ("kubernetes:core/v1:ConfigMapPatch", {"name": "c"}, {"name": "c"}, engine.CREATE),  # a patch upserts
        (CONFIG_MAP, {}, {}, engine.CREATE),  # names the provider generates differ
    ],
    ids=["cluster-scoped", "same-object", "other-namespace", "other-name", "patch", "auto-named"],
)
def test_a_create_of_an_object_the_update_deletes_under_another_name_is_refused(
    type_: str, old_meta: dict[str, str], new_meta: dict[str, str], created: str
) -> None:
    """The provider creates client-side and deletes the old resource after: a new resource for an object the cluster
    still holds fails with AlreadyExists (components/model/diff/kubernetes.py ALREADY_EXISTS)."""
    old, new = record("old", type_, {"metadata": old_meta}), record("new", type_, {"metadata": new_meta})
    actions = {c.name: c.action for c in engine.diff([old], [new]).changes}
    assert actions == {"old": engine.DELETE, "new": created}


def test_ignored_changes_are_not_diffed_and_replace_on_changes_replaces() -> None:
    cluster = "gcp:container/cluster:Cluster"
    old = record("c", cluster, {"name": "c", "initialNodeCount": 1})
    new = record("c", cluster, {"name": "c", "initialNodeCount": 3}, options={"ignoreChanges": ["initialNodeCount"]})
    (ignored,) = engine.diff([old], [new]).changes
    assert ignored.action == engine.SAME and ignored.reason.startswith("ignored: initialNodeCount")
    js = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
    before = record("j", js, {"metadata": {"name": "j"}, "spec": {"suspend": False}})
    after = record(
        "j", js, {"metadata": {"name": "j"}, "spec": {"suspend": True}}, options={"replaceOnChanges": ["spec"]}
    )
    (c,) = engine.diff([before], [after]).changes
    assert c.action == engine.REPLACE and "replaceOnChanges" in c.reason
    assert c.delete_first  # a named object under the same name: the provider deletes first (provider.go L1647)


def test_a_create_first_replacement_under_a_fixed_name_is_rejected() -> None:
    pool = {"name": "p", "cluster": "c", "nodeConfig": {"serviceAccount": "a@x"}}
    old = record("p", POOL, pool)
    new = record("p", POOL, {**pool, "nodeConfig": {"serviceAccount": "b@x"}})
    (c,) = engine.diff([old], [new]).changes
    assert c.action == engine.REJECTED and "409" in c.reason and clause(POOL, "nodeConfig.serviceAccount") in c.reason
    (c,) = engine.diff([old], [{**new, "options": {"deleteBeforeReplace": True}}]).changes
    assert c.action == engine.REPLACE and c.delete_first


def test_deleting_a_protected_resource_is_rejected() -> None:
    (c,) = engine.diff([record("p", POOL, {"name": "p"}, protect=True)], []).changes
    assert c.action == engine.REJECTED and "protect" in c.reason
    # Replacement needs both states protected (pulumi/pulumi#8873): dropping protect in the same change allows it.
    old = record("p", POOL, {"name": "p", "cluster": "a"}, protect=True, options={"deleteBeforeReplace": True})
    new = {**old, "inputs": {"name": "p", "cluster": "b"}, "protect": False}
    assert engine.diff([old], [new]).changes[0].action == engine.REPLACE


def test_placeholders_left_name_the_set_flags_that_fill_them() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = diff.main(["--stack", "dev", "--second-run"], out, err)
    err_text = err.getvalue()
    assert code == 2 and out.getvalue() == "" and len(err_text.strip().splitlines()) == 1
    hint = err_text[err_text.index("for this command alone") :]
    for key in ("gcp:project", "tpu.reservation.name", "serving.weightsBucket"):
        assert f"--set {key}=VALUE" in hint, key
