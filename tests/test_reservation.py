"""The reservation's sub-blocks: read at preview, one pool per usable sub-block, stable as cubes grow.

The fake answers the invokes in the wire shape of pulumi-gcp 10.2's result types (GetReservationResult,
GetReservationBlockResult, GetReservationSubBlockResult, GetClusterResult: camelCase fields, nested
results as one-item lists), and misses the way terraform-provider-google-beta's data sources do
(components/cli/mocks.py FakeReservation).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from components.cli.mocks import FakeReservation, InvokeError, healthy_sub_block
from components.cli.plan import main as plan_main
from components.cli.snapshot import records
from components.model.config.settings import ConfigError, load
from components.model.diff import engine, readback
from tests.harness import (
    CODELAB_MIX,
    REQUIRED_KEYS,
    Mocks,
    P,
    Run,
    assert_rejected,
    rejected,
    run_program,
    set_arguments,
    tpu_pools,
)

BLOCK_PATH = "projects/my-tpu-project/reservations/tpu7x-reservation/reservationBlocks/block-0"
SUB_BLOCK_TOKEN = "gcp:compute/getReservationSubBlock:getReservationSubBlock"


def fake(
    count: int, running: Run | None = None, *, exists: bool = True, blocks: tuple = ("block-0",), **changes: Any
) -> FakeReservation:
    """`count` healthy free sub-blocks sb-1..; `changes` patches one by name (wire-shape fields); GKE runs the
    pools of `running`; `exists=False` or `blocks=()`: the reservation or its block is missing."""
    reservation = FakeReservation(
        {f"sb-{i}": healthy_sub_block(f"sb-{i}") for i in range(1, count + 1)}, exists, blocks
    )
    for name, patch in changes.items():
        name = name.replace("_", "-")
        reservation.sub_blocks[name] = deep_merge(reservation.sub_blocks[name], patch)
    if running is not None:
        reservation.cluster_pools = [
            {"name": name, "nodeConfigs": [{"reservationAffinities": [inputs["nodeConfig"]["reservationAffinity"]]}]}
            for name, inputs in pools(running).items()
        ]
    return reservation


def failing(invoke: str, message: str) -> FakeReservation:
    """Two healthy sub-blocks; the invoke whose token ends with `invoke` fails with the provider's `message`."""

    class Failing(FakeReservation):
        def call(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
            if token.endswith(invoke):
                raise InvokeError(token, message)
            return super().call(token, args)

    return Failing(fake(2).sub_blocks)


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, list) and value and isinstance(value[0], dict) and isinstance(out.get(key), list):
            out[key] = [{**out[key][0], **value[0]}]
        else:
            out[key] = value
    return out


DEGRADED = {"healthInfos": [{"healthStatus": "DEGRADED", "degradedHostCount": 2}]}
IN_USE = {"inUseCount": 16}
MAINTENANCE = {"reservationSubBlockMaintenances": [{"maintenancePendingCount": 3}]}
NO_SUPER = {f"{P}:demos": {"superslicing": {"enabled": False}}}


def run_with(reservation: FakeReservation, overrides: dict[str, Any] | None = None) -> Run:
    return run_program(overrides, mocks=Mocks(reservation=reservation))


def pools(run: Run) -> dict[str, dict[str, Any]]:
    return {r.inputs["name"]: r.inputs for r in tpu_pools(run)}


def on(run: Run) -> dict[str, str]:
    """Pool name -> the sub-block its reservation affinity names."""
    out = {}
    for name, inputs in pools(run).items():
        (value,) = inputs["nodeConfig"]["reservationAffinity"]["values"]
        assert value.startswith(BLOCK_PATH + "/reservationSubBlocks/"), value
        out[name] = value.rsplit("/", 1)[1]
        assert inputs["nodeConfig"]["labels"] == {"gke-tpu-slicing/reservation-sub-block": out[name]}
    return out


# ---------------------------------------------------------------------------------------------
# The states


def test_all_healthy_pools_take_the_first_sub_blocks_and_the_stack_exports_the_mapping() -> None:
    reservation = fake(6)
    run = run_with(reservation)
    assert on(run) == {"tpu7-pool-1": "sb-1", "tpu7-pool-2": "sb-2"}
    assert run.outputs["cubeSubBlocks"] == {"tpu7-pool-1": "sb-1", "tpu7-pool-2": "sb-2"}
    # Read lazily: only the sub-blocks a cube needs, through the invokes with the reservation's zone.
    read = [args for token, args in reservation.calls if token == SUB_BLOCK_TOKEN]
    assert [a["name"] for a in read] == ["sb-1", "sb-2"]
    assert all(a["zone"] == "us-central1-ai1a" and a["reservationBlock"] == "block-0" for a in read)
    plan = run.outputs["capacityPlan"]["subBlocks"]
    assert [c["subBlock"] for c in plan["cubes"]] == ["sb-1", "sb-2"]


def test_fewer_healthy_than_cubes_fails_naming_the_key_and_listing_every_sub_block() -> None:
    run = run_with(fake(3, sb_1=DEGRADED, sb_3=MAINTENANCE))
    message = rejected(
        run,
        f"{P}:tpu.cubes = 2",
        "room for 1 of 2 cubes",
        "tpu7-pool-2 (cube 1) on no sub-block: no usable sub-block left",
        "sb-1: READY, DEGRADED, 16 hosts, 0 in use, no maintenance -> -",
        "sb-2: READY, HEALTHY, 16 hosts, 0 in use, no maintenance -> tpu7-pool-1",
        "sb-3: READY, HEALTHY, 16 hosts, 0 in use, maintenance 3 pending/0 ongoing -> -",
        "What to do: lower gke-tpu-slicing:tpu.cubes",
    )
    assert message.startswith("TPU reservation cannot hold the cubes (1 problem)")


@pytest.mark.parametrize(
    ("bad", "first", "pinned"),
    [
        ({"sb_1": DEGRADED}, "sb-2", "tpu7-pool-1 (cube 0) on sub-block sb-1: health DEGRADED"),
        ({"sb_1": IN_USE}, "sb-2", "tpu7-pool-1 (cube 0) on sub-block sb-1: in use (16 VMs) by something other than"),
        ({"sb_2": MAINTENANCE}, "sb-1", "tpu7-pool-2 (cube 1) on sub-block sb-2: maintenance pending (3): wait until"),
    ],
)
def test_an_unusable_sub_block_is_skipped_or_refused_when_pinned(bad: dict[str, Any], first: str, pinned: str) -> None:
    assert on(run_with(fake(4, **bad))) == {"tpu7-pool-1": first, "tpu7-pool-2": "sb-3"}
    refused = run_with(fake(4, **bad), {f"{P}:tpu": {"subBlocks": ["sb-1", "sb-2"]}})
    rejected(refused, f"{P}:tpu.subBlocks = ['sb-1', 'sb-2']", pinned)


@pytest.mark.parametrize(
    ("patch", "words"),
    [
        ({"status": "CREATING"}, "status CREATING (not READY)"),
        ({"subBlockCount": 8}, "8 hosts, a cube needs 16"),
        ({"reservationSubBlockMaintenances": [{"maintenanceOngoingCount": 1}]}, "maintenance ongoing (1)"),
    ],
)
def test_other_states_that_keep_a_cube_off_a_sub_block(patch: dict[str, Any], words: str) -> None:
    rejected(run_with(fake(2, sb_1=patch)), "sb-1: ", f"-> - (not usable: {words}")


AI_ZONES_ONCE = (
    "gcloud compute preview-features update ai-zones-visibility --activation-status=enabled "
    "--rollout-plan=fast-rollout --project=my-tpu-project"
)


def test_a_missing_or_unreadable_reservation_is_one_clear_error() -> None:
    # The reads run at preview, before `pulumi up` enables the `ai-zones-visibility` preview feature, and Google's
    # documentation does not settle that they see an AI zone's reservation without it ("Manage access to AI
    # zones": "To use AI zones, you must turn them on for your Google Cloud project"; its later "Manage AI zone
    # visibility": visibility hides AI zones from listings, API endpoints are not restricted once the parent region
    # is active; https://cloud.google.com/compute/docs/regions-zones/manage-ai-zones). So in an AI zone a
    # reservation not found, or a read refused, names the command a fresh project runs once (the codelab's first
    # step); elsewhere nothing is added.
    missing = fake(4, exists=False)
    message = rejected(
        run_with(missing),
        f"{P}:tpu.reservation.name = 'tpu7x-reservation': no such reservation in project my-tpu-project, "
        "zone us-central1-ai1a",
        "us-central1-ai1a is an AI zone",
        AI_ZONES_ONCE,
    )
    assert message.count("preview-features") == 1
    assert "preview-features" not in rejected(run_with(missing, {f"{P}:zone": "us-central1-a"}), "no such reservation")
    # A reservation that lists no block names: the block read's 404 says it.
    rejected(run_with(fake(4, blocks=())), f"{P}:tpu.reservation.block = 'block-0': no such block", AI_ZONES_ONCE)
    rejected(
        run_with(fake(4), {f"{P}:tpu": {"reservation": {"block": "block-9"}}}),
        f"{P}:tpu.reservation.block = 'block-9': not a block of reservation tpu7x-reservation",
        "its blocks: block-0",
    )
    refused = failing("getReservation", "googleapi: Error 400: Invalid value for field 'zone'")
    rejected(run_with(refused), "Invalid value for field", AI_ZONES_ONCE)
    rejected(
        run_with(failing("getReservation", "googleapi: Error 403: Required 'compute.reservations.get' permission")),
        "could not read the reservation of reservation tpu7x-reservation",
        "Error 403",
        "compute.reservations.get, compute.reservationBlocks.get",
    )


# The provider's own miss (terraform-provider-google-beta google-beta/services/container/
# data_source_google_container_cluster.go: after the resource Read's 404, `fmt.Errorf("%s not found", id)`, id from
# containerClusterFullName = projects/P/locations/L/clusters/N), and errors that merely contain "not found".
FRESH = "projects/my-tpu-project/locations/us-central1/clusters/qwen-serving-cluster not found"
GKE_OFF = (
    'Error when reading or editing Container Cluster "qwen-serving-cluster": googleapi: Error 403: Kubernetes '
    "Engine API has not been used in project 123 before or it is disabled. Enable it by visiting "
    "https://console.developers.google.com/apis/api/container.googleapis.com/overview?project=123\nDetails: "
    '[{"reason": "SERVICE_DISABLED", "metadata": {"service": "container.googleapis.com"}}]'
)
NOT_A_MISS = (
    'Error when reading or editing Container Cluster "qwen-serving-cluster": googleapi: Error 400: Location '
    '"us-central1" not found or not supported',
    "projects/my-tpu-project/locations/us-central1/clusters/other-cluster not found",
    "Post https://oauth2.googleapis.com/token: credentials file not found",
)


@pytest.mark.parametrize(("message", "fresh"), [(FRESH, True), (GKE_OFF, True), *((m, False) for m in NOT_A_MISS)])
def test_only_the_data_sources_own_miss_reads_as_no_cluster_yet(message: str, fresh: bool) -> None:
    run = run_with(failing("gcp:container/getCluster:getCluster", message))
    if fresh:  # the first preview of a new stack: nothing runs yet, the pools take the first sub-blocks
        assert run.error is None, run.error
        assert on(run) == {"tpu7-pool-1": "sb-1", "tpu7-pool-2": "sb-2"}
    else:  # a cluster read as "none" would move its running pools to other sub-blocks: stop instead
        rejected(run, "could not read cluster qwen-serving-cluster", message.split(":")[0])


# ---------------------------------------------------------------------------------------------
# Stability without state


def test_growing_from_two_to_three_cubes_keeps_the_existing_pools() -> None:
    first = run_with(fake(5, sb_1=IN_USE))  # sb-1 is someone else's: the pools start at sb-2
    assert first.error is None, first.error
    assert on(first) == {"tpu7-pool-1": "sb-2", "tpu7-pool-2": "sb-3"}
    # GKE now runs the two pools (their sub-blocks full), and sb-1 has been freed meanwhile.
    grown = fake(5, first, sb_2=IN_USE, sb_3=IN_USE)
    second = run_with(grown, {f"{P}:tpu": {"cubes": 3}})
    assert on(second) == {"tpu7-pool-1": "sb-2", "tpu7-pool-2": "sb-3", "tpu7-pool-3": "sb-1"}
    for name in ("tpu7-pool-1", "tpu7-pool-2"):
        assert pools(second)[name] == pools(first)[name], f"{name} would change"


def test_a_sub_block_that_turns_bad_under_a_running_pool_is_reported_not_moved() -> None:
    first = run_with(fake(4), NO_SUPER)
    run = run_with(fake(4, first, sb_1={**IN_USE, **DEGRADED}, sb_2=IN_USE), NO_SUPER)
    assert pools(run) == pools(first), "nothing moves by itself"
    warnings = [msg for level, msg in run.logs if level == "warn"]
    (warning,) = [w for w in warnings if "tpu7-pool-1" in w and "sb-1" in w]
    assert "health DEGRADED" in warning
    assert f"to move it, set {P}:tpu.subBlocks: [sb-3, sb-2] (replaces tpu7-pool-1: its slices stop)" in warning
    # Its capacity does not count: the plan has one cube.
    assert run.outputs["capacityPlan"]["totals"]["cubes"] == 1
    # Following the advice moves exactly that pool.
    moved = fake(4, first, sb_1={**IN_USE, **DEGRADED}, sb_2=IN_USE)
    after = run_with(moved, {**NO_SUPER, f"{P}:tpu": {"subBlocks": ["sb-3", "sb-2"]}})
    assert on(after) == {"tpu7-pool-1": "sb-3", "tpu7-pool-2": "sb-2"}
    assert pools(after)["tpu7-pool-2"] == pools(first)["tpu7-pool-2"]
    assert any("tpu7-pool-1 runs on sub-block sb-1 and is bound to sub-block sb-3" in m for _, m in after.logs)
    # A workload that needs that cube cannot come up: refused, with the way out in the message.
    needs_both = fake(4, first, sb_1={**IN_USE, **DEGRADED}, sb_2=IN_USE)
    rejected(
        run_with(needs_both, CODELAB_MIX),
        "demos.superslicing.topology = '4x4x8' needs 2 cubes but tpu.cubes = 2 (1 usable, 1 on unusable sub-blocks)",
        "Cubes not counted:\n    tpu7-pool-1 (cube 0) runs on sub-block sb-1, which is health DEGRADED",
        f"set {P}:tpu.subBlocks: [sb-3, sb-2]",
    )


def test_pending_maintenance_under_a_running_pool_is_a_warning_not_a_refused_up() -> None:
    # The codelab mix's super-slice needs both cubes. A maintenance notice on the sub-block under a running pool
    # (hosts that "have pending maintenance", not under it yet) must not refuse every `up` of the stack until it
    # is done, nor ask to replace the pool: the cube still counts and the preview says what is coming.
    first = run_with(fake(4), CODELAB_MIX)
    state = fake(4, first, sb_1={**IN_USE, **MAINTENANCE}, sb_2=IN_USE)
    run = run_with(state, CODELAB_MIX)
    assert pools(run) == pools(first)
    assert run.outputs["capacityPlan"]["totals"]["cubes"] == 2
    warnings = [msg for level, msg in run.logs if level == "warn"]
    assert any(
        "tpu7-pool-1 (cube 0) runs on sub-block sb-1, which has maintenance pending (3)" in w
        and "stop when the maintenance starts" in w
        for w in warnings
    ), warnings
    assert not any("to move it" in w for w in warnings), warnings
    # Once the maintenance runs, the cube is really gone: that still does not count.
    ongoing = fake(
        4, first, sb_1={**IN_USE, "reservationSubBlockMaintenances": [{"maintenanceOngoingCount": 3}]}, sb_2=IN_USE
    )
    rejected(
        run_with(ongoing, CODELAB_MIX), "tpu7-pool-1 (cube 0) runs on sub-block sb-1, which is maintenance ongoing (3)"
    )


def test_pools_bound_to_the_whole_block_before_stay_so_until_pinned() -> None:
    # A stack deployed before sub-blocks were read: its pools name the block, GKE put them on sb-1, sb-2.
    def deployed() -> FakeReservation:
        state = fake(3, sb_1=IN_USE, sb_2=IN_USE)
        affinity = {"consumeReservationType": "SPECIFIC_RESERVATION", "values": [BLOCK_PATH]}
        state.cluster_pools = [
            {"name": f"tpu7-pool-{i}", "nodeConfigs": [{"reservationAffinities": [affinity]}]} for i in (1, 2)
        ]
        return state

    run = run_with(deployed(), {f"{P}:tpu": {"cubes": 3}})
    inputs = pools(run)
    for name in ("tpu7-pool-1", "tpu7-pool-2"):  # not replaced: the same block-level binding, no label
        assert inputs[name]["nodeConfig"]["reservationAffinity"]["values"] == [BLOCK_PATH]
        assert "labels" not in inputs[name]["nodeConfig"]
        assert any(
            f"{name} is bound to the whole block block-0, not to one sub-block: it stays so" in m for _, m in run.logs
        )
    assert inputs["tpu7-pool-3"]["nodeConfig"]["labels"] == {"gke-tpu-slicing/reservation-sub-block": "sb-3"}
    assert run.outputs["cubeSubBlocks"] == {"tpu7-pool-1": None, "tpu7-pool-2": None, "tpu7-pool-3": "sb-3"}
    # Pinning a pool onto a sub-block GKE already fills (with that very pool, unknowably) is refused...
    refused = run_with(deployed(), {f"{P}:tpu": {"subBlocks": ["sb-3", "sb-2"]}})
    rejected(refused, "tpu7-pool-2 (cube 1) on sub-block sb-2: in use (16 VMs)")
    # ... onto a free one, announced as the replacement it is.
    moved = run_with(
        deployed(), {**NO_SUPER, f"{P}:serving": {"enabled": False}, f"{P}:tpu": {"cubes": 1, "subBlocks": ["sb-3"]}}
    )
    assert any(
        "tpu7-pool-1 runs on the whole block (not one sub-block) and is bound to sub-block sb-3 now: this update "
        "replaces the pool" in m
        for _, m in moved.logs
    )


def test_explicit_sub_blocks_pin_the_mapping_and_are_checked_against_the_reservation() -> None:
    run = run_with(fake(6), {f"{P}:tpu": {"subBlocks": ["sb-5", "sb-3"]}})
    assert on(run) == {"tpu7-pool-1": "sb-5", "tpu7-pool-2": "sb-3"}
    rejected(
        run_with(fake(3), {f"{P}:tpu": {"subBlocks": ["sb-1", "sb-7"]}}),
        f"{P}:tpu.subBlocks[1] = 'sb-7': not a sub-block of reservation tpu7x-reservation block block-0",
        "its sub-blocks: sb-1, sb-2, sb-3",
    )


def test_sub_blocks_settings_are_validated_before_anything_is_read() -> None:
    for sub_blocks, refused in [
        (["a"], r"tpu.subBlocks = \[.*one sub-block per cube: 2 names"),
        (["a", "a"], "distinct sub-block names"),
    ]:
        with pytest.raises(ConfigError, match=refused):
            load({**REQUIRED_KEYS, "tpu": {"reservation": {"name": "r"}, "subBlocks": sub_blocks}}, "my-tpu-project")
    with pytest.raises(ConfigError, match=r"only with a SPECIFIC reservation and one tpu\.reservation\.block"):
        load({**REQUIRED_KEYS, "tpu": {"reservation": {"name": "r", "block": ""}, "subBlocks": ["a", "b"]}}, "p-1234")


# ---------------------------------------------------------------------------------------------
# The second `up`: what GKE returns for the pools against what the program declares


def test_the_second_up_finds_no_difference_in_the_pools_forcenew_blocks() -> None:
    # The pools as GKE stores them (components/model/diff/readback.py, its sources there) against what the program
    # declares, through the change preview's ForceNew table (checked against the provider's schema by
    # tests/test_provider_schema.py).
    run = run_with(fake(3))
    (policy,) = run.of_type(readback.POLICY)
    for pool in tpu_pools(run):
        assert pool.options["ignoreChanges"] == ["nodeConfig.advancedMachineFeatures"]
        declared = records([policy, pool])

        def second_up(config: list[Any], state: list[Any]) -> list[tuple[str, list[str]]]:
            changes = engine.diff(state, config, readback.SUPPRESSORS).changes
            return [(c.action, c.properties) for c in changes if c.action != "same"]

        assert second_up(declared, readback.read_back(declared)) == [], pool.name
        # The controls: the earlier declaration differs (type, missing tpuTopology) in place, and without the
        # ignore GKE's advanced machine features replace the pool, as another sub-block does.
        old = copy.deepcopy(declared)
        old[1]["inputs"]["placementPolicy"] = {"type": "COMPACT", "policyName": policy.inputs["name"]}
        assert second_up(old, readback.read_back(declared)) == [
            ("update", ["placementPolicy.tpuTopology", "placementPolicy.type"])
        ]
        unignored = copy.deepcopy(declared)
        unignored[1]["options"]["ignoreChanges"] = []
        assert second_up(unignored, readback.read_back(unignored)) == [
            ("replace", ["nodeConfig.advancedMachineFeatures"])
        ]
        moved = readback.read_back(declared)
        moved[1]["inputs"]["nodeConfig"]["reservationAffinity"]["values"] = [BLOCK_PATH]
        assert second_up(declared, moved) == [("replace", ["nodeConfig.reservationAffinity.values[0]"])]


# ---------------------------------------------------------------------------------------------
# The offline plan


def plan(capsys: pytest.CaptureFixture[str], tmp_path: Path, state: FakeReservation | None, *argv: str) -> tuple:
    """`plan --stack dev` with the invoke results of `state` as a file, exactly as the fake (the provider's wire
    shape) answers them: (exit code, stdout, stderr, the file)."""
    path = tmp_path / "reservation.json"
    if state is not None:
        args = {"name": "tpu7x-reservation", "project": "my-tpu-project", "zone": "us-central1-ai1a"}
        data = {
            "getReservation": state.call("gcp:compute/getReservation:getReservation", args),
            "getReservationBlock": state.call(
                "gcp:compute/getReservationBlock:getReservationBlock",
                {**args, "name": "block-0", "reservation": args["name"]},
            ),
            "getReservationSubBlock": list(state.sub_blocks.values()),
            "getCluster": None
            if state.cluster_pools is None
            else {"name": "qwen-serving-cluster", "nodePools": state.cluster_pools},
        }
        path.write_text(json.dumps(data))
        argv = (*argv, "--reservation", str(path))
    code = plan_main(["plan", "--stack", "dev", *set_arguments("dev"), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, path


def test_offline_plan_shows_sub_blocks_and_plans_on_usable_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _, path = plan(capsys, tmp_path, fake(3, sb_1=DEGRADED))
    assert code == 0
    assert "SUB-BLOCKS: reservation tpu7x-reservation block block-0" in out
    assert f"read from the file {path}" in out
    assert "sb-2       tpu7-pool-1  READY, HEALTHY" in out
    assert "sb-3       tpu7-pool-2  READY, HEALTHY" in out
    assert "sb-1       -            READY, DEGRADED" in out


def test_offline_plan_refuses_what_cannot_come_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err, _ = plan(capsys, tmp_path, fake(2, sb_2=MAINTENANCE))
    assert code == 1
    assert "gke-tpu-slicing:tpu.cubes = 2" in err and "sb-2: READY, HEALTHY, 16 hosts, 0 in use, maintenance" in err


def test_offline_plan_without_data_says_what_it_did_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _, _ = plan(capsys, tmp_path, None, "--json")
    assert code == 0
    data = json.loads(out)["subBlocks"]
    assert data["read"] is False
    assert "not read (offline, no --reservation file)" in data["source"]
    assert [c["usable"] for c in data["cubes"]] == [True, True]


def test_unusable_cubes_are_not_counted_by_the_admission_simulation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two pools run; the sub-block under one turned bad: a super-slice of both cubes cannot be admitted.
    state = fake(3, run_with(fake(3)), sb_1={**IN_USE, **DEGRADED}, sb_2=IN_USE)
    code, out, err, _ = plan(capsys, tmp_path, state, "--json", "--set", "demos.superslicing.enabled=true")
    assert code == 1
    totals = json.loads(out)
    assert totals["totals"]["cubes"] == 1 and totals["totals"]["chipsProvisioned"] == 64
    assert [c["pool"] for c in totals["cubes"]] == ["tpu7-pool-2"]
    assert "tpu.cubes = 2 (1 usable, 1 on unusable sub-blocks)" in err


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"{BLOCK_PATH}/reservationSubBlocks/sb-4", "sb-4"),
        # xpk's short form for a reservation of the cluster's project (src/xpk/core/reservation.py).
        ("tpu7x-reservation/reservationBlocks/block-0/reservationSubBlocks/sb-4", "sb-4"),
        (BLOCK_PATH, ""),  # the whole block
        ("tpu7x-reservation/reservationBlocks/block-0", ""),
        ("projects/other/reservations/tpu7x-reservation/reservationBlocks/block-0/reservationSubBlocks/x", None),
        ("tpu7x-reservation/reservationBlocks/block-1/reservationSubBlocks/sb-4", None),
        ("other-reservation", None),
    ],
)
def test_which_sub_block_an_existing_pools_affinity_names(value: str, expected: str | None) -> None:
    from components.model.tpu.reservation import sub_block_of

    assert sub_block_of(value, "my-tpu-project", "tpu7x-reservation", "block-0") == expected


def test_the_quick_start_names_the_one_time_ai_zones_command_the_error_names() -> None:
    """Dev's zone is an AI zone: a new user meets the one-time command in the README's prerequisites, as the
    preview's error would print it (without the project, which gcloud takes from its configuration)."""
    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    assert AI_ZONES_ONCE.rsplit(" --project=", 1)[0] in readme
    assert readme.index("ai-zones-visibility") < readme.index("pulumi preview && pulumi up")


def test_a_reservation_block_shared_from_another_project_is_rejected() -> None:
    assert_rejected(
        {f"{P}:tpu": {"reservation": {"project": "other-project", "block": "block-0"}}},
        [
            "gke-tpu-slicing:tpu.reservation.project",
            "'other-project'",
            "my-tpu-project",
            "GKE does not support",
            "tpu.reservation.block",
        ],
        prefix="invalid stack configuration (1 problem)",
    )
    # The stack's own project, spelled out, is fine.
    same = run_program({f"{P}:tpu": {"reservation": {"project": "my-tpu-project"}}})
    assert same.error is None, same.error
