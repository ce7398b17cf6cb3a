"""Room to roll: per role, whether the new set is created beside the old one or after it and how many groups `up` waits
for, counted with the shape the stack's previous outputs say runs, as the plan, the preview and the LWS all say."""

from __future__ import annotations

from typing import Any

import pytest

from components.cli.mocks import FakeReservation, InvokeError, healthy_sub_block
from components.cli.plan import main as plan_main
from tests.graph_queries import ROLES, lws, templates, tpu_pools
from tests.harness import LWS, Mocks, Run, ok, warnings_of
from tests.rollout_fixtures import FULL, NO_DEMOS, PRIORITY_LABEL, name, ready_patch, replacement_steps, waits_for
from tests.stack_config import FIXED_SERVING, FIXED_SERVING_SETS, P, merge, set_arguments


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


def test_without_room_the_plan_and_the_preview_say_so_and_the_old_set_goes_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    full = ok(FULL, preview=True)
    warnings = warnings_of(full)
    for role in ROLES:
        assert any(f"{P}:serving.{role} (" in w and "cannot keep it serving" in w for w in warnings), warnings
    # Delete first; the new set gets the old one's room: `up` still waits for its 4 groups.
    assert planned(full) == dict.fromkeys(ROLES, (False, 4))
    resized = ok(merge(FULL, {f"{P}:serving": {"prefill": {"resources": {"cpu": "200"}}}}))
    assert replacement_steps(full, resized, "prefill") == [
        f"delete {name(full, 'prefill')}",
        f"create {name(resized, 'prefill')} and wait for jsonpath={{$[?@.readyReplicas>3]}}",
    ]
    # `python -m components plan` prints the same, before anything changes.
    sets = [*set_arguments("dev"), *FIXED_SERVING_SETS, "--set", "tpu.cubes=1"]
    sets += ["--set", "demos.subslicing.enabled=false", "--set", "demos.superslicing.enabled=false"]
    assert plan_main(["plan", "--stack", "dev", *sets]) == 0
    out = capsys.readouterr().out
    assert "ROLLOUT  serving.prefill: 0/4 new groups fit beside the running ones; no room" in out
    assert sum(line.startswith("warning: ") and "cannot keep it serving" in line for line in out.splitlines()) == 2


def test_with_room_for_some_groups_the_old_set_waits_for_that_many(dev: Run) -> None:
    # Two cubes, serving only, 6 + 6 groups: 4 of 16 partitions stay free, room for 4 new groups of either role.
    six = {f"{P}:serving": {"prefill": {"replicas": 6}, "decode": {"replicas": 6}}}
    run = ok(merge(merge(FIXED_SERVING, NO_DEMOS), six))
    assert planned(run) == dict.fromkeys(ROLES, (True, 4))
    # Both roles at once need 8 new groups: the plan says to roll them one at a time.
    assert any("not both in one update" in w for w in warnings_of(run)), warnings_of(run)


def test_dev_rolls_create_first_and_names_the_demos_it_preempts_meanwhile(capsys: pytest.CaptureFixture[str]) -> None:
    assert plan_main(["plan", "--stack", "dev", *set_arguments("dev"), *FIXED_SERVING_SETS]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("ROLLOUT  serving.decode"))
    assert "4/4 new groups fit" in line and "deleted once 4 of its 4 groups are ready" in line
    assert "preempting demos.subslicing" in line
    # With dev's burst slots, counted all on (the preview cannot read how many are): they have preempted the demo
    # already, the new floor takes the free room, and its new slots find none beside the old ones until those go.
    assert plan_main(["plan", "--stack", "dev", *set_arguments("dev")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("ROLLOUT  serving.decode"))
    assert "4/4 new groups fit" in line and "preempting" not in line
    assert line.endswith("its 2 burst slots start on in the new revision, 0 beside the old ones")


def test_the_capacity_plan_output_carries_each_roles_rollout(dev: Run) -> None:
    rollouts = dev.outputs["capacityPlan"]["rollouts"]
    assert [(r["key"], r["surge"], r["preempts"], r["slotsRunning"], r["slotsCarried"]) for r in rollouts] == [
        (f"serving.{role}", 4, [], 2, 0) for role in ROLES
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


def test_an_in_place_roll_of_a_single_group_role_is_shown_to_leave_no_ready_leader(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # LWS v0.8.0 rolls in place with maxUnavailable 1 and no surge (its webhook's defaults); a surge is not used
    # (components/model/serving/rollout.py says why), so one group restarts at a time.
    sets = [*set_arguments("dev"), *FIXED_SERVING_SETS, "--set", "serving.prefill.replicas=1"]
    assert plan_main(["plan", "--stack", "dev", *sets]) == 0
    lines = {x.split(":", 1)[0]: x for x in capsys.readouterr().out.splitlines() if x.startswith("ROLLOUT  ")}
    assert lines["ROLLOUT  serving.prefill"].endswith("its only group restarts, no ready leader until it reloads")
    assert lines["ROLLOUT  serving.decode"].endswith("one group at a time, 3 of 4 ready")


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
    change = merge(FULL, {f"{P}:serving": {"decode": smaller}})
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
    base = merge(FIXED_SERVING, NO_DEMOS)
    six = merge(base, {f"{P}:serving": {"prefill": {"replicas": 6}, "decode": {"replicas": 6}}})
    running = ok(six)
    five = merge(base, {f"{P}:serving": {"prefill": {"replicas": 6}, "decode": {"replicas": 5}}})
    blind, run = ok(five), ok(five, mocks=_deployed(running))
    assert (waits_for(blind, "decode", 5), waits_for(run, "decode", 5)) == (5, 4)
    assert run.get(LWS, "serving-decode").options["deleteBeforeReplace"] is False
    assert replacement_steps(running, run, "decode")[-1] == f"delete {name(running, 'decode')}"


def test_the_preview_reads_the_same_previous_outputs_and_prints_the_deployed_shape() -> None:
    full = ok(FULL)
    shown = ok(merge(FULL, {f"{P}:serving": {"decode": {"replicas": 2}}}), preview=True, mocks=_deployed(full))
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
