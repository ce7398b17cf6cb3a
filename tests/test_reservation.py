"""The reservation's sub-blocks, read at preview: one pool per usable sub-block, every state that keeps a cube off
one, a missing or unreadable reservation, block or cluster, and the offline plan from a file of the same reads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from components.cli.mocks import FakeReservation, InvokeError
from components.cli.plan import main as plan_main
from components.model.tpu.reservation import sub_block_of
from tests.harness import assert_rejected, ok, rejected
from tests.reservation_fixtures import BLOCK_PATH, DEGRADED, IN_USE, MAINTENANCE, fake, on, run_with
from tests.stack_config import ROOT, P, set_arguments

SUB_BLOCK_TOKEN = "gcp:compute/getReservationSubBlock:getReservationSubBlock"


def failing(invoke: str, message: str) -> FakeReservation:
    """Two healthy sub-blocks; the invoke whose token ends with `invoke` fails with the provider's `message`."""

    class Failing(FakeReservation):
        def call(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
            if token.endswith(invoke):
                raise InvokeError(token, message)
            return super().call(token, args)

    return Failing(fake(2).sub_blocks)


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
    missing, zone = fake(4, exists=False), {f"{P}:zone": "us-central1-ai1a"}  # unset: tests/test_placement.py
    message = rejected(
        run_with(missing, zone),
        f"{P}:tpu.reservation.name = 'tpu7x-reservation': no such reservation in project my-tpu-project, "
        "zone us-central1-ai1a",
        "us-central1-ai1a is an AI zone",
        AI_ZONES_ONCE,
    )
    assert message.count("preview-features") == 1
    assert "preview-features" not in rejected(run_with(missing, {f"{P}:zone": "us-central1-a"}), "no such reservation")
    # A reservation that lists no block names: the block read's 404 says it.
    block_0 = {f"{P}:tpu": {"reservation": {"block": "block-0"}}}
    rejected(
        run_with(fake(4, blocks=()), block_0), f"{P}:tpu.reservation.block = 'block-0': no such block", AI_ZONES_ONCE
    )
    # Left unset, the block is read from that list: an empty one names the key.
    rejected(
        run_with(fake(4, blocks=())),
        f"{P}:tpu.reservation.block is not set and reservation tpu7x-reservation lists no blocks",
    )
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
    assert sub_block_of(value, "my-tpu-project", "tpu7x-reservation", "block-0") == expected


def test_the_quick_start_turns_on_ai_zones_before_the_first_preview() -> None:
    """Dev's zone is an AI zone: the quick start's bootstrap step turns on the feature the preview's error names
    (the same feature, rollout and activation) before the first `pulumi up`."""
    from components.bootstrap import Bootstrap
    from tests.harness import declare

    readme = (ROOT / "README.md").read_text()
    assert readme.index("python -m components bootstrap") < readme.index("pulumi up\n```")
    args = {"project": "my-tpu-project", "region": "us-central1", "state_bucket": "s", "stacks": ["dev"]}
    regs = declare(lambda: Bootstrap("bootstrap", args | {"cluster_name": "c"}) and None)  # type: ignore[arg-type]
    (feature,) = [r.inputs for r in regs if r.type == "gcp:compute/previewFeature:PreviewFeature"]
    name, status, plan = re.search(
        r"update (\S+) --activation-status=(\w+) --rollout-plan=([\w-]+)", AI_ZONES_ONCE
    ).groups()
    assert (feature["name"], feature["activationStatus"].lower()) == (name, status)
    assert (
        feature["rolloutOperation"]["rolloutInput"]["predefinedRolloutPlan"]
        == f"ROLLOUT_PLAN_{plan.replace('-', '_').upper()}"
    )


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
    ok({f"{P}:tpu": {"reservation": {"project": "my-tpu-project"}}})
