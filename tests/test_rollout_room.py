"""Room to roll: per role, whether the new set is created beside the old one or after it and how many of its groups
`up` waits for, as the capacity plan, `components plan`, the preview and the LWS all say, on the first and second up."""

from __future__ import annotations

from typing import Any

import pytest

from components.cli.mocks import FakeReservation, healthy_sub_block
from components.cli.plan import main as plan_main
from tests.harness import LWS, ROLES, Mocks, P, Run, lws, ok, set_arguments, tpu_pools, warnings_of
from tests.rollout_fixtures import FULL, NO_DEMOS, name, ready_patch, replacement_steps, waits_for


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
    sets = [*set_arguments("dev"), "--set", "serving.prefill.replicas=1"]
    assert plan_main(["plan", "--stack", "dev", *sets]) == 0
    lines = {x.split(":", 1)[0]: x for x in capsys.readouterr().out.splitlines() if x.startswith("ROLLOUT  ")}
    assert lines["ROLLOUT  serving.prefill"].endswith("its only group restarts, no ready leader until it reloads")
    assert lines["ROLLOUT  serving.decode"].endswith("one group at a time, 3 of 4 ready")
