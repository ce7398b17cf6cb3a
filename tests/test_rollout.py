"""Serving changes roll instead of being refused, a scale-down leaves no Slice behind, and the pods stop cleanly.

The upstream rules these tests model are cited once, in components/model/serving/rollout.py: Kueue v0.17.4's
in-place check of a queued LWS (`kueue_refuses_in_place` below), pulumi-kubernetes' replacement on a name change and
the engine's order of it (`replacement_steps`), its RFC 9535 `pulumi.com/waitFor` and the parser's single `=`
(`ready`), and the slice controller's Slice cleanup.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonpath
import pytest

from components.cli.mocks import FakeReservation, InvokeError, healthy_sub_block
from components.cli.plan import main as plan_main
from components.model.serving.rollout import pod_spec_shape, revision
from tests.harness import (
    JOBSET,
    LWS,
    ROLES,
    Mocks,
    P,
    Run,
    lws,
    normalize,
    ok,
    preview,
    run_program,
    set_arguments,
    templates,
    tpu_pools,
    warnings_of,
)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
NO_DEMOS = {f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}}
# One cube, serving only: 4 + 4 groups of 2x2x2 fill its 8 partitions.
FULL = {**NO_DEMOS, f"{P}:tpu": {"cubes": 1}}
RFC9535 = jsonpath.JSONPathEnvironment(strict=True)


def name(run: Run, role: str) -> str:
    return lws(run, role)["metadata"]["name"]


def kueue_refuses_in_place(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What Kueue's LWS webhook rejects when `old` (running, queued) is updated to `new` under the same name."""
    out = [
        f"{part}: pod shape"
        for part in ("leader", "worker")
        if pod_spec_shape(templates(old)[part]["spec"]) != pod_spec_shape(templates(new)[part]["spec"])
    ]
    if old["metadata"]["labels"][QUEUE_LABEL] != new["metadata"]["labels"][QUEUE_LABEL]:
        out.append("queue-name label")
    return out


PATCH = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSetPatch"


def ready_patch(run: Run, role: str) -> dict[str, Any]:
    """The leaders-ready patch of a role's current LWS (one per revision)."""
    (patch,) = [normalize(r.plain()) for r in run.of_type(PATCH) if r.name.startswith(f"serving-{role}-ready-")]
    assert patch["metadata"]["name"] == name(run, role) and patch["kind"] == "LeaderWorkerSet"
    return patch


def awaited(run: Run, role: str) -> dict[str, Any]:
    """The live LWS as pulumi-kubernetes awaits it on the patch's create: the patch's annotations applied to it."""
    obj = lws(run, role)
    annotations = {**obj["metadata"]["annotations"], **ready_patch(run, role)["metadata"]["annotations"]}
    return {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}


def replacement_steps(before: Run, after: Run, role: str) -> list[str]:
    """What `pulumi up` does to a role's LWS going from `before` to `after`, in order (see the module doc)."""
    old, new = lws(before, role), lws(after, role)
    old_name, new_name = old["metadata"]["name"], new["metadata"]["name"]
    if old == new:
        return []
    if old_name == new_name:
        return [f"update {new_name}"]
    reg = after.get(LWS, f"serving-{role}")
    wait = ready_patch(after, role)["metadata"]["annotations"].get("pulumi.com/waitFor")
    create = f"create {new_name}" + (f" and wait for {wait}" if wait else "")
    if reg.options["deleteBeforeReplace"]:
        return [f"delete {old_name}", create]
    return [create, "... every other create and update of the deployment", f"delete {old_name}"]


def ready(obj: dict[str, Any], groups: int, replicas: int) -> bool:
    """Whether pulumi-kubernetes counts the LWS ready once `groups` of its `replicas` groups are ready."""
    expr = obj["metadata"]["annotations"]["pulumi.com/waitFor"]
    # pulumi-kubernetes' parser: `jsonpath=` prefix, at most one `=`-separated value, the path in braces.
    assert expr.startswith("jsonpath="), expr
    body = expr.removeprefix("jsonpath=")
    assert len(body.replace("==", "").split("=")) == 1, f"{expr}: a single '=' would be read as a value"
    path = re.fullmatch(r"\{\s*(.*?)\s*\}", body)
    assert path, expr
    status: dict[str, Any] = {"replicas": replicas}
    if groups:  # the LWS controller omits readyReplicas while it is 0 (omitempty)
        status["readyReplicas"] = groups
    return bool(RFC9535.findall(path.group(1), {**obj, "status": status}))


def waits_for(run: Run, role: str, replicas: int) -> int:
    """How many of its `replicas` groups the role's new set waits for: the fewest pulumi-kubernetes counts ready."""
    obj = awaited(run, role)
    return next(n for n in range(replicas + 1) if ready(obj, n, replicas))


def planned(run: Run) -> dict[str, tuple[bool, int]]:
    """Per role, (create first, ready groups awaited) as the run's capacity plan says, each checked against the LWS
    and its patch: replaced delete-first unless created first, and awaited for the plan's groups."""
    out = {}
    for r in run.outputs["capacityPlan"]["rollouts"]:
        role = r["key"].removeprefix("serving.")
        assert run.get(LWS, f"serving-{role}").options["deleteBeforeReplace"] is not r["createFirst"], r
        assert waits_for(run, role, r["replicas"]) == r["waitFor"], r
        out[role] = (r["createFirst"], r["waitFor"])
    return out


def four_sub_blocks() -> FakeReservation:
    return FakeReservation({f"sb-{i}": healthy_sub_block(f"sb-{i}") for i in range(1, 5)})


def running_pools(pools: list[Any]) -> list[dict[str, Any]]:
    """getCluster's nodePools once GKE runs `pools` (the TPU pools of a recorded run)."""
    return [
        {
            "name": r.inputs["name"],
            "nodeConfigs": [{"reservationAffinities": [r.inputs["nodeConfig"]["reservationAffinity"]]}],
        }
        for r in pools
    ]


# ------------------------------------------------------------------------------------------------ pod shape


SHAPE = ["leader: pod shape", "worker: pod shape"]
# A change of one role: what Kueue would refuse of it in place, and how many ready groups the new set is awaited for
# before the old set goes, at the end of the update. Dev has room for all the new groups beside the old ones
# (lower-priority demos yield), so the role never has fewer ready leaders than it had.
ROLLS = {
    "resources": ({"prefill": {"resources": {"cpu": "200", "memory": "800Gi"}}}, SHAPE, 4),
    # The HEALTHY-partition selector key follows the shape.
    "topology": ({"decode": {"topology": "2x2x1"}}, SHAPE, 4),
    # Kueue's defaulting copies the priority label into both pod templates, which would restart every group in
    # place; the program rolls it like a shape change instead.
    "priority": ({"prefill": {"priority": "medium-priority-2000"}}, [], 4),
    # In place, Kueue would delete the removed groups' Workloads while the slice controller keeps their Slices
    # until every pod of the LWS has finished: the survivors never do. A new, smaller LWS and the deletion of the
    # whole old one leave no pod of the old LWS (pods carry their own LWS's name label, which the slice controller
    # matches), so every one of its Slices is deleted.
    "scale-down": ({"decode": {"replicas": 2}}, [], 2),
    "scale-up": ({"prefill": {"replicas": 5}}, [], 5),
}


@pytest.mark.parametrize(("change", "refused", "wait_for"), ROLLS.values(), ids=ROLLS.keys())
def test_a_change_kueue_refuses_in_place_or_that_leaves_slices_behind_rolls_to_a_new_lws(
    dev: Run, change: dict[str, Any], refused: list[str], wait_for: int
) -> None:
    ((role, settings),) = change.items()
    after = ok({f"{P}:serving": change})
    assert kueue_refuses_in_place(lws(dev, role), lws(after, role)) == refused
    new = lws(after, role)
    assert new["spec"]["replicas"] == settings.get("replicas", 4)
    assert new["metadata"]["labels"][PRIORITY_LABEL] == settings.get("priority", "high-priority-3000")
    assert name(dev, role) != name(after, role)
    assert replacement_steps(dev, after, role) == [
        f"create {name(after, role)} and wait for jsonpath={{$[?@.readyReplicas>{wait_for - 1}]}}",
        "... every other create and update of the deployment",
        f"delete {name(dev, role)}",
    ]
    assert waits_for(after, role, new["spec"]["replicas"]) == wait_for
    # The other role is not touched.
    assert replacement_steps(dev, after, next(r for r in ROLES if r != role)) == []


def test_changes_kueue_allows_in_place_keep_the_name(dev: Run) -> None:
    # A new image changes the pods but not their shape: the LWS rolls its groups in place (LWS rolling update).
    newer = ok({f"{P}:serving": {"image": "docker.io/vllm/vllm-tpu:nightly-20260601-aaaaaaa-bbbbbbb"}})
    for role in ROLES:
        assert kueue_refuses_in_place(lws(dev, role), lws(newer, role)) == []
        assert replacement_steps(dev, newer, role) == [f"update {name(dev, role)}"]


def test_a_new_local_queue_is_a_new_lws(dev: Run) -> None:
    other = ok({f"{P}:kueue": {"localQueue": "serving-lq"}})
    for role in ROLES:
        assert "queue-name label" in kueue_refuses_in_place(lws(dev, role), lws(other, role))
        assert name(dev, role) != name(other, role)


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_the_longest_configured_name_plus_its_revision_fits_kueues_39(role: str) -> None:
    # Kueue v0.17.4 site/content/en/docs/tasks/run/leaderworkerset.md, "Long LeaderWorkerSet names": the
    # pod-group-name label (63 characters) is the LWS name plus a group suffix, so "the effective LWS name
    # limit is 39 characters" (51 only with the alpha WorkloadIdentifierAnnotations gate).
    configured = f"x{role}".ljust(33, "y")
    got = name(ok({f"{P}:serving": {role: {"name": configured}}}), role)
    assert re.fullmatch(re.escape(configured) + r"-[0-9a-f]{5}", got) and len(got) == 39


# ------------------------------------------------------------------------------------------------ headroom


def test_without_room_the_plan_and_the_preview_say_so_and_the_old_set_goes_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    full = ok(FULL, preview=True)
    warnings = warnings_of(full)
    for role in ROLES:
        assert any(f"{P}:serving.{role} (" in w and "cannot keep it serving" in w for w in warnings), warnings
    # Delete first; the new set gets the old one's room: `up` still waits for its 4 groups.
    assert planned(full) == dict.fromkeys(ROLES, (False, 4))
    resized = ok({**FULL, f"{P}:serving": {"prefill": {"resources": {"cpu": "200"}}}})
    assert replacement_steps(full, resized, "prefill") == [
        f"delete {name(full, 'prefill')}",
        f"create {name(resized, 'prefill')} and wait for jsonpath={{$[?@.readyReplicas>3]}}",
    ]
    # `python -m components plan` prints the same, before anything changes.
    sets = [*set_arguments("dev"), "--set", "tpu.cubes=1"]
    sets += ["--set", "demos.subslicing.enabled=false", "--set", "demos.superslicing.enabled=false"]
    assert plan_main(["plan", "--stack", "dev", *sets]) == 0
    out = capsys.readouterr().out
    assert "ROLLOUT  serving.prefill: 0/4 new groups fit beside the running ones; no room" in out
    assert sum(line.startswith("warning: ") and "cannot keep it serving" in line for line in out.splitlines()) == 2


def test_with_room_for_some_groups_the_old_set_waits_for_that_many(dev: Run) -> None:
    # Two cubes, serving only, 6 + 6 groups: 4 of 16 partitions stay free, room for 4 new groups of either role.
    run = ok({**NO_DEMOS, f"{P}:serving": {"prefill": {"replicas": 6}, "decode": {"replicas": 6}}})
    assert planned(run) == dict.fromkeys(ROLES, (True, 4))
    # Both roles at once need 8 new groups: the plan says to roll them one at a time.
    assert any("not both in one update" in w for w in warnings_of(run)), warnings_of(run)


def test_dev_rolls_create_first_and_names_the_demos_it_preempts_meanwhile(capsys: pytest.CaptureFixture[str]) -> None:
    assert plan_main(["plan", "--stack", "dev", *set_arguments("dev")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("ROLLOUT  serving.decode"))
    assert "4/4 new groups fit" in line and "deleted once 4 of its 4 groups are ready" in line
    assert "preempting demos.subslicing" in line


# ------------------------------------------------------------------------------------------------ pod fields


def test_vllm_is_the_leaders_pid_1_and_gets_the_grace_period(dev: Run) -> None:
    for role in ROLES:
        obj = lws(dev, role)
        leader = templates(obj)["leader"]["spec"]
        (vllm,) = [c for c in leader["containers"] if c["name"] == "vllm-leader"]
        assert vllm["command"][:2] == ["sh", "-c"]
        last = [line for line in vllm["command"][2].splitlines() if line.strip()][-1]
        assert shlex.split(last)[:3] == ["exec", "vllm", "serve"]
        # Both templates: the leader's vLLM needs its Ray workers until its last request.
        for part in ("leader", "worker"):
            assert templates(obj)[part]["spec"]["terminationGracePeriodSeconds"] == 360


def test_the_grace_period_is_a_setting_no_shorter_than_the_gateways_request_timeout() -> None:
    run = ok({f"{P}:serving": {"terminationGracePeriodSeconds": 900}})
    assert templates(lws(run, "decode"))["worker"]["spec"]["terminationGracePeriodSeconds"] == 900
    short = run_program({f"{P}:serving": {"terminationGracePeriodSeconds": 299}})
    assert short.error is not None and short.registrations == []
    assert f"{P}:serving.terminationGracePeriodSeconds = 299: at least 300 seconds" in str(short.error)


def test_every_dynamic_slice_pod_template_skips_gkes_static_topology_check(codelab: Run) -> None:
    templates_seen = 0
    for role in ROLES:
        for template in templates(lws(codelab, role)).values():
            assert template["metadata"]["annotations"]["cloud.google.com/skip-tpu-webhook-check"] == "true"
            templates_seen += 1
    for reg in codelab.of_type(JOBSET):
        for job in normalize(reg.plain())["spec"]["replicatedJobs"]:
            annotations = job["template"]["spec"]["template"]["metadata"]["annotations"]
            assert annotations["cloud.google.com/skip-tpu-webhook-check"] == "true"
            templates_seen += 1
    assert templates_seen == 6  # 2 LWS x (leader, worker) + 2 demo JobSets


def test_the_capacity_plan_output_carries_each_roles_rollout(dev: Run) -> None:
    rollouts = dev.outputs["capacityPlan"]["rollouts"]
    assert [(r["key"], r["surge"], r["preempts"]) for r in rollouts] == [
        (f"serving.{role}", 4, ["demos.subslicing"]) for role in ROLES
    ]
    # ... and the objects roll as the plan says.
    assert planned(dev) == dict.fromkeys(ROLES, (True, 4))


def test_the_lws_rolls_as_the_printed_plan_says_when_a_cube_is_on_an_unusable_sub_block() -> None:
    # Two pools run, then the sub-block under the first turns DEGRADED: that cube no longer counts
    # (components/reservation_reads.py), so 4 + 4 serving groups fill the one usable cube and a new set has no room.
    # The LWS must follow that plan (delete first), not one that still counts both cubes (create first into
    # room that is not there: the wait runs out with the old set up, and the preview said otherwise).
    first = ok(NO_DEMOS, mocks=Mocks(reservation=four_sub_blocks()))
    degraded = four_sub_blocks()
    degraded.sub_blocks["sb-1"].update(
        inUseCount=16, healthInfos=[{"healthStatus": "DEGRADED", "degradedHostCount": 2}]
    )
    degraded.sub_blocks["sb-2"]["inUseCount"] = 16
    degraded.cluster_pools = running_pools(tpu_pools(first))
    run = ok(NO_DEMOS, mocks=Mocks(reservation=degraded))
    assert run.outputs["capacityPlan"]["totals"]["cubes"] == 1
    assert planned(run) == dict.fromkeys(ROLES, (False, 4))


NAMES_SCRIPT = """
import json
from components.cli.plan import settings_input
from components.model.config.settings import load
from components.graph_args import model_server_args, serving_role_args
from components.vllm_leaderworkersets import lws_object_name
from tests.harness import stack_file_config

settings = load(*settings_input(stack_file_config()))
model = model_server_args(settings)
role_args = {r: serving_role_args(settings, r, {}, create_first=True, wait_for=0) for r in ("prefill", "decode")}
print(json.dumps({role: lws_object_name(model, role, role_args[role]) for role in ("prefill", "decode")}))
"""


def test_the_lws_names_do_not_depend_on_the_interpreters_hash_seed(dev: Run) -> None:
    # A name that changed between two `pulumi up` runs of one configuration would replace both roles every time.
    # str hashes, set and dict orders vary with PYTHONHASHSEED (https://docs.python.org/3/using/cmdline.html
    # #envvar-PYTHONHASHSEED); the revision must not.
    registered = {role: name(dev, role) for role in ROLES}
    root = Path(__file__).resolve().parent.parent
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        out = subprocess.run(
            [sys.executable, "-c", NAMES_SCRIPT], cwd=root, env=env, capture_output=True, text=True, check=True
        )
        assert json.loads(out.stdout) == registered, f"PYTHONHASHSEED={seed}"


# Kueue v0.17.4 pkg/util/pod/pod.go, transcribed: SpecShape's keys, and ContainersShape's per container
# (resources.requests and ports). Its LWS webhook's ValidateUpdate refuses a change of any of them in place
# (pkg/controller/jobframework/validation.go ValidateImmutablePodGroupPodSpec), nothing else of the pod spec.
KUEUE_SPEC_SHAPE = {
    "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 1}]}],
    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 2}]}],
    "nodeSelector": {"k": "v"},
    "affinity": {"nodeAffinity": {}},
    "tolerations": [{"key": "t", "operator": "Exists"}],
    "runtimeClassName": "r",
    "priority": 1,
    "topologySpreadConstraints": [{"maxSkew": 1}],
    "overhead": {"cpu": "1"},
    "resourceClaims": [{"name": "x"}],
}
OUTSIDE_THE_SHAPE = {
    "serviceAccountName": "other",
    "terminationGracePeriodSeconds": 7,
    "volumes": [{"name": "v", "emptyDir": {}}],
    "priorityClassName": "p",
    "hostname": "h",
}
CONTAINER_OUTSIDE_THE_SHAPE = {
    "image": "other:1",
    "command": ["x"],
    "env": [{"name": "E", "value": "1"}],
    "readinessProbe": {"httpGet": {"path": "/", "port": 1}},
    "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
}


def _revision(spec: dict[str, Any]) -> str:
    return revision(leader_spec=spec, worker_spec=spec, size=2, replicas=4, queue="lq", priority="p")


@pytest.mark.parametrize("field", sorted(KUEUE_SPEC_SHAPE))
def test_every_field_kueue_refuses_to_change_in_place_renames_the_lws(field: str) -> None:
    base = {k: v for k, v in KUEUE_SPEC_SHAPE.items() if k != field}
    assert _revision(base) != _revision({**base, field: KUEUE_SPEC_SHAPE[field]})
    if field.endswith("ontainers"):  # within a container: its requests and its ports
        (c,) = KUEUE_SPEC_SHAPE[field]
        for changed in ({**c, "resources": {"requests": {"cpu": "2"}}}, {**c, "ports": [{"containerPort": 9}]}):
            assert _revision(KUEUE_SPEC_SHAPE) != _revision({**KUEUE_SPEC_SHAPE, field: [changed]})


def test_what_kueue_lets_change_in_place_keeps_the_name() -> None:
    rev = _revision(KUEUE_SPEC_SHAPE)
    for key, value in OUTSIDE_THE_SHAPE.items():
        assert _revision({**KUEUE_SPEC_SHAPE, key: value}) == rev, key
    for key, value in CONTAINER_OUTSIDE_THE_SHAPE.items():
        (c,) = KUEUE_SPEC_SHAPE["containers"]
        assert _revision({**KUEUE_SPEC_SHAPE, "containers": [{**c, key: value}]}) == rev, key


def test_the_second_up_after_the_first_registers_the_same_lws_and_the_same_replacement_order() -> None:
    # First `up` of a new stack: no cluster yet, the sub-blocks free. Second: GKE runs the pools, so their
    # sub-blocks report VMs in use and getCluster lists them. The plan, and with it each LWS's name, waitFor,
    # timeout and deleteBeforeReplace, must come out the same, or the second run would update or replace serving.
    first = ok(mocks=Mocks(reservation=four_sub_blocks()))
    deployed = four_sub_blocks()
    for r in tpu_pools(first):
        (value,) = r.inputs["nodeConfig"]["reservationAffinity"]["values"]
        deployed.sub_blocks[value.rsplit("/", 1)[1]]["inUseCount"] = 16
    deployed.cluster_pools = running_pools(tpu_pools(first))
    second = ok(mocks=Mocks(reservation=deployed))
    assert second.outputs["capacityPlan"]["rollouts"] == first.outputs["capacityPlan"]["rollouts"]
    for role in ROLES:
        assert lws(second, role) == lws(first, role)
        assert ready_patch(second, role) == ready_patch(first, role)
        assert "pulumi.com/waitFor" in ready_patch(second, role)["metadata"]["annotations"]
        before, after = first.get(LWS, f"serving-{role}"), second.get(LWS, f"serving-{role}")
        assert after.options["deleteBeforeReplace"] == before.options["deleteBeforeReplace"]


# ------------------------------------------------------------------------------------------------ deployed shape
# The program reads what serving runs now from the stack's previous outputs (components/preflight.py
# read_deployed_serving: the stack reads its own outputs, whose Pulumi sources are cited there).


def test_every_update_exports_the_shape_each_lws_gets_and_reads_its_own_stack_back(dev: Run) -> None:
    # Nothing read on a stack's first update: the mocks answer no outputs, and the plan is the configured one.
    assert dev.mocks.stack_references == ["dev"]  # a diy backend's name for the stack itself
    shape = dev.outputs["servingShape"]
    assert sorted(shape) == ["serving.decode", "serving.prefill"]
    for key, entry in shape.items():
        obj = lws(dev, key.split(".", 1)[1])
        leader = templates(obj)["leader"]
        # What the next run plans the old set with is what the object runs: its groups, slice shape and priority.
        assert entry["replicas"] == obj["spec"]["replicas"]
        assert entry["topology"] == leader["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"]
        assert entry["priority"] == obj["metadata"]["labels"][PRIORITY_LABEL]
    assert not any(r["deployed"] for r in dev.outputs["capacityPlan"]["rollouts"])


def test_pulumi_cloud_needs_the_fully_qualified_name_of_the_stack() -> None:
    # pulumi/pulumi pkg/backend/httpstate/backend.go: "a stack reference's name should be of the form
    # '<organization>/<project>/<stack>'"; a diy backend's is 'organization' and takes the bare name.
    assert ok(organization="acme").mocks.stack_references == ["acme/gke-tpu-slicing/dev"]


def _deployed(run: Run) -> Mocks:
    """Mocks whose read of the stack itself answers the outputs `run` exported: the next update of that stack."""
    return Mocks(previous_outputs={"servingShape": run.outputs["servingShape"]})


@pytest.mark.parametrize(
    "smaller", [{"replicas": 2}, {"topology": "2x2x1"}], ids=["fewer replicas", "smaller topology"]
)
def test_a_smaller_role_is_planned_beside_the_bigger_set_that_runs(smaller: dict[str, Any]) -> None:
    # One cube, serving only: 4 + 4 groups of 2x2x2 fill it. Shrunk, decode's new set needs room the running
    # (bigger) set still holds: nothing fits beside it, so the old set must go first.
    full = ok(FULL)
    change = {**FULL, f"{P}:serving": {"decode": smaller}}
    blind = ok(change)  # no previous outputs: the running set counted with the new settings
    assert blind.outputs["capacityPlan"]["rollouts"][1]["createFirst"] is True  # the gap this closes
    run = ok(change, mocks=_deployed(full))
    (decode,) = [r for r in run.outputs["capacityPlan"]["rollouts"] if r["key"] == "serving.decode"]
    assert (decode["createFirst"], decode["surge"]) == (False, 0), decode
    assert decode["deployed"] == f"4 x 2x2x2 ({lws(full, 'decode')['metadata']['labels'][PRIORITY_LABEL]})"
    assert replacement_steps(full, run, "decode")[0] == f"delete {name(full, 'decode')}"
    # Once the old set is gone, the new one gets the whole room: `up` waits for all its groups.
    replicas = lws(run, "decode")["spec"]["replicas"]
    assert waits_for(run, "decode", replicas) == replicas
    assert any("serving.decode (" in m and "cannot keep it serving" in m for m in warnings_of(run))
    assert name(run, "decode") != name(full, "decode")
    # Prefill is unchanged: the previous shape equals the configured one and changes nothing of its plan.
    assert lws(run, "prefill") == lws(blind, "prefill")


def test_a_smaller_role_waits_for_the_groups_that_fit_beside_the_running_set() -> None:
    # Two cubes (16 partitions), serving only, 6 + 6 groups: 4 free. Decode to 5 replicas: counted with the new
    # settings, 5 would fit (the wait for 5 runs out); beside the 6 that run, 4 do.
    six = {**NO_DEMOS, f"{P}:serving": {"prefill": {"replicas": 6}, "decode": {"replicas": 6}}}
    running = ok(six)
    five = {**NO_DEMOS, f"{P}:serving": {"prefill": {"replicas": 6}, "decode": {"replicas": 5}}}
    blind, run = ok(five), ok(five, mocks=_deployed(running))
    assert (waits_for(blind, "decode", 5), waits_for(run, "decode", 5)) == (5, 4)
    assert run.get(LWS, "serving-decode").options["deleteBeforeReplace"] is False
    assert replacement_steps(running, run, "decode")[-1] == f"delete {name(running, 'decode')}"


def test_the_preview_reads_the_same_previous_outputs_and_prints_the_deployed_shape() -> None:
    full = ok(FULL)
    shown = ok({**FULL, f"{P}:serving": {"decode": {"replicas": 2}}}, preview=True, mocks=_deployed(full))
    table = next(m for lvl, m in shown.logs if lvl == "info" and "ROLLOUT  serving.decode" in m)
    line = next(x for x in table.splitlines() if x.startswith("ROLLOUT  serving.decode"))
    assert line.startswith("ROLLOUT  serving.decode: from the deployed 4 x 2x2x2 (") and "0/2 new groups fit" in line
    assert shown.get(LWS, "serving-decode").options["deleteBeforeReplace"] is True


def test_an_unreadable_previous_shape_is_a_warning_and_the_configured_shape_is_used(dev: Run) -> None:
    bad = Mocks(previous_outputs={"servingShape": {"serving.decode": {"replicas": "four"}}})
    run = ok(mocks=bad)
    assert any("servingShape output for serving.decode cannot be read" in m for m in warnings_of(run))
    assert run.outputs["capacityPlan"]["rollouts"] == dev.outputs["capacityPlan"]["rollouts"]


class _RefusingBackend(Mocks):
    """A backend that refuses the stack's read of its own outputs (e.g. the engine's builtin provider erring)."""

    def call(self, args: Any) -> tuple[dict[str, Any], list[Any]]:
        if args.token == "pulumi:pulumi:readStackOutputs":  # as the engine answers a failed invoke: a gRPC error
            raise InvokeError(args.token, "failed to read stack outputs: permission denied")
        return super().call(args)


def test_a_refused_read_of_the_previous_outputs_is_a_warning_and_plans_from_the_settings(dev: Run) -> None:
    run = ok(mocks=_RefusingBackend())
    (warning,) = [m for m in warnings_of(run) if "could not read the servingShape output" in m]
    assert "permission denied" in warning and "settings alone" in warning
    assert run.outputs["capacityPlan"]["rollouts"] == dev.outputs["capacityPlan"]["rollouts"]


def test_an_in_place_roll_of_a_single_group_role_is_shown_to_leave_no_ready_leader(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # LWS v0.8.0 rolls in place with maxUnavailable 1 and no surge (its webhook's defaults); a surge is not used
    # (components/model/serving/rollout.py says why), so one group restarts at a time.
    sets = [*set_arguments("dev"), "--set", "serving.prefill.replicas=1"]
    assert plan_main(["plan", "--stack", "dev", *sets]) == 0
    lines = {x.split(":", 1)[0]: x for x in capsys.readouterr().out.splitlines() if x.startswith("ROLLOUT  ")}
    assert lines["ROLLOUT  serving.prefill"].endswith("its only group restarts, no ready leader until it reloads")
    assert lines["ROLLOUT  serving.decode"].endswith("one group at a time, 3 of 4 ready")


HELPER = "/workspace/vllm/examples/online_serving/multi-node-serving.sh"


def _fake_worker(tmp_path: Path, dev: Run) -> tuple[str, dict[str, str]]:
    """The decode worker's `sh -c` script as Kubernetes runs it, with the vLLM helper and `ray` faked: the helper
    blocks as `ray start --block` does, `ray stop` is recorded."""
    (worker,) = templates(lws(dev, "decode"))["worker"]["spec"]["containers"]
    assert worker["command"][:2] == ["sh", "-c"]
    helper, ray = tmp_path / "multi-node-serving.sh", tmp_path / "bin" / "ray"
    ray.parent.mkdir()
    helper.write_text(f"#!/bin/sh\necho started > {tmp_path}/started\nsleep 600\n")
    ray.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/ray.log\n')
    ray.chmod(0o755)
    # Kubernetes expands $(VAR) in a command before the shell runs.
    script = worker["command"][2].replace(HELPER, str(helper)).replace("$(LWS_LEADER_ADDRESS)", "10.0.0.1")
    return script, {**os.environ, "PATH": f"{ray.parent}:{os.environ['PATH']}"}


def _sigterm_stops_ray(tmp_path: Path, dev: Run, prefix: list[str], pid_1: Callable[[int], int]) -> None:
    """Runs the fake worker under `prefix`, sends SIGTERM to the pid `pid_1` finds (from the started process's pid)
    once the helper runs, and checks that the shell stopped Ray and exited 0 within seconds."""
    script, env = _fake_worker(tmp_path, dev)
    proc = subprocess.Popen([*prefix, "sh", "-c", script], env=env)
    try:
        for _ in range(200):
            if (tmp_path / "started").exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        os.kill(pid_1(proc.pid), 15)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
    assert (tmp_path / "ray.log").read_text().split() == ["stop"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_the_workers_shell_handles_sigterm_and_stops_ray(dev: Run, tmp_path: Path) -> None:
    """The worker's shell is the container's PID 1, and a PID 1 receives only the signals it has a handler for
    (pid_namespaces(7)): the kernel drops SIGTERM otherwise, and the kubelet kills the pod at the end of the grace
    period. So the shell must catch SIGTERM (its SigCgt mask in /proc, the kernel's own test) and, on it, stop
    Ray and exit."""

    def handled(pid: int) -> int:
        caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)$", Path(f"/proc/{pid}/status").read_text(), re.M)[1], 16)
        assert caught & (1 << (15 - 1)), "the worker's shell has no SIGTERM handler: as PID 1 it ignores SIGTERM"
        return pid

    _sigterm_stops_ray(tmp_path, dev, [], handled)


def test_the_worker_stops_on_sigterm_as_pid_1(dev: Run, tmp_path: Path) -> None:
    """The same as the kubelet sees it: the script as PID 1 of a PID namespace of its own (`unshare`, root only),
    SIGTERM sent from outside it, as the container runtime does; it must end within seconds, not the grace period."""
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("unshare --pid needs root")

    def namespaced(pid: int) -> int:
        (child,) = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        assert re.search(r"^NSpid:\s+\d+\s+1$", Path(f"/proc/{child}/status").read_text(), re.M)  # PID 1 in there
        return int(child)

    _sigterm_stops_ray(tmp_path, dev, ["unshare", "--pid", "--fork", "--kill-child"], namespaced)


def awaited_after(inputs: dict[str, Any], live: dict[str, Any]) -> str | None:
    """What pulumi-kubernetes awaits after applying `inputs` (a create or an update in place) on `live`: the waitFor
    of the live object, unless the inputs say skipAwait (pulumi/pulumi-kubernetes@94977969d
    provider/pkg/metadata/overrides.go:108-112, called from provider/pkg/await/await.go:321 and :504)."""
    if (inputs["metadata"].get("annotations") or {}).get("pulumi.com/skipAwait") == "true":
        return None
    return (live["metadata"].get("annotations") or {}).get("pulumi.com/waitFor")


def test_an_in_place_update_of_a_serving_set_awaits_nothing(dev: Run) -> None:
    """An image fix during an incident, with a group down, must not wait for every group again: pulumi-kubernetes
    awaits the live object's waitFor after an update too (await.go:504), so with the wait on the LWS an `up` blocked
    for the startup budget + 30 min and failed. The wait is on the new set's leaders-ready patch, applied once;
    the set's own inputs skip the await, and the patch does not change."""
    fixed = ok({f"{P}:serving": {"image": "docker.io/vllm/vllm-tpu:fixed"}})
    result = {c.name: c for c in preview(dev, fixed).changes}
    for role in ROLES:
        assert replacement_steps(dev, fixed, role) == [f"update {name(dev, role)}"]
        assert awaited_after(lws(fixed, role), awaited(dev, role)) is None
        assert ready_patch(fixed, role) == ready_patch(dev, role)
        update = result[f"serving-{role}"]
        assert (update.action, update.reason.split(":", 1)[0]) == ("update", "not awaited")
        patches = [c for n, c in result.items() if n.startswith(f"serving-{role}-ready-")]
        assert [c.action for c in patches] == ["same"]


def test_a_new_set_is_awaited_once_by_its_own_patch(dev: Run) -> None:
    """The creation keeps the rollout's guarantee: the new set's patch awaits its ready groups (the patch's own
    inputs have no skipAwait; its annotations land on the live set), and it is a new resource per revision, so it
    is created with each new set and never updated into a new wait (its annotations are ignored after the create)."""
    bigger = ok({f"{P}:serving": {"prefill": {"replicas": 5}}})
    patch = ready_patch(bigger, "prefill")
    assert awaited_after(patch, awaited(bigger, "prefill")) == "jsonpath={$[?@.readyReplicas>4]}"
    regs = {r.name: r for r in bigger.of_type(PATCH)}
    (created,) = [n for n in regs if n.startswith("serving-prefill-ready-")]
    assert created.endswith(name(bigger, "prefill").rsplit("-", 1)[1])
    assert regs[created].options["ignoreChanges"] == ["metadata.annotations"]
    assert bigger.depends_on(regs[created], bigger.get(LWS, "serving-prefill"))
    result = {c.name: c for c in preview(dev, bigger).changes}
    assert result[created].action == "create"
    (old,) = [n for n in result if n.startswith("serving-prefill-ready-") and n != created]
    assert result[old].action == "delete"
