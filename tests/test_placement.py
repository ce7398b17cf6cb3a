"""The zone and block a stack leaves unset, read from the reservation at preview: what is chosen, what is refused,
and that a running stack's pools never move because the reservation changed around them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.cli import plan
from components.cli.mocks import FakeReservation, healthy_sub_block
from components.model.diff import engine
from components.placement import OFFLINE_BLOCK
from tests.graph_queries import tpu_pools
from tests.harness import CLUSTER, POOL, preview, rejected
from tests.reservation_fixtures import DEGRADED, IN_USE, fake, on, pools, run_with
from tests.stack_config import P, stack_file_config

NO_SUPER = {f"{P}:demos": {"superslicing": {"enabled": False}}}


def infos(run: object) -> list[str]:
    return [msg for level, msg in run.logs if level == "info"]  # type: ignore[attr-defined]


def test_dev_sets_neither_zone_nor_block() -> None:
    config = stack_file_config("dev")
    assert f"{P}:zone" not in config and "block" not in config[f"{P}:tpu"]["reservation"]


def test_dev_previews_against_a_reservation_in_the_other_zone_whose_only_block_has_another_name() -> None:
    reservation = fake(4, blocks=("tpu7x-blk-west",), zone="us-central1-c")
    run = run_with(reservation)
    assert run.error is None, run.error
    assert on(run, "tpu7x-blk-west") == {"tpu7-pool-1": "sb-1", "tpu7-pool-2": "sb-2"}
    assert {name: p["nodeLocations"] for name, p in pools(run).items()} == {
        "tpu7-pool-1": ["us-central1-c"],
        "tpu7-pool-2": ["us-central1-c"],
    }
    assert run.get(CLUSTER, "cluster-gke").inputs["location"] == "us-central1"
    # Both zones offering tpu7x were asked, in the table's order; the block was read under the zone found.
    asked = [args["zone"] for token, args in reservation.calls if token.endswith("getReservation")]
    assert asked[:2] == ["us-central1-ai1a", "us-central1-c"]
    (said,) = [m for m in infos(run) if m.startswith("placement: ")]
    assert f"{P}:zone: us-central1-c" in said and f"{P}:tpu.reservation.block: tpu7x-blk-west, the only one" in said
    assert (
        "pulumi config set zone us-central1-c; pulumi config set --path tpu.reservation.block 'tpu7x-blk-west'" in said
    )


def test_the_explicit_keys_still_win_and_nothing_is_looked_for() -> None:
    reservation = fake(4, zone=None)
    run = run_with(reservation, {f"{P}:zone": "us-central1-ai1a", f"{P}:tpu": {"reservation": {"block": "block-0"}}})
    assert run.error is None, run.error
    assert on(run) == {"tpu7-pool-1": "sb-1", "tpu7-pool-2": "sb-2"}
    assert not [m for m in infos(run) if m.startswith("placement: ")]
    assert [a["zone"] for t, a in reservation.calls if t.endswith("getReservation")] == ["us-central1-ai1a"]


def test_a_reservation_in_no_zone_or_in_two_is_refused_naming_the_key() -> None:
    rejected(
        run_with(fake(4, exists=False)),
        f"{P}:zone is not set and reservation tpu7x-reservation (project my-tpu-project) is in none of "
        "us-central1-ai1a, us-central1-c",
        "us-central1-ai1a is an AI zone",
    )
    rejected(run_with(fake(4, zone=None)), "is in us-central1-ai1a or us-central1-c", f"set {P}:zone")


def test_the_first_block_with_room_is_taken() -> None:
    reservation = fake(4, blocks=("blk-b", "blk-a"), sb_1=DEGRADED, sb_2=IN_USE)
    reservation.block_sub_blocks = {"blk-a": ("sb-1", "sb-2"), "blk-b": ("sb-3", "sb-4")}
    run = run_with(reservation, NO_SUPER)
    assert run.error is None, run.error
    assert on(run, "blk-b") == {"tpu7-pool-1": "sb-3", "tpu7-pool-2": "sb-4"}
    (said,) = [m for m in infos(run) if m.startswith("placement: ")]
    assert "blk-b, the first of blk-a, blk-b with room for 2 cubes" in said
    # No block with room: each one's count, and the key that shows one block's sub-blocks.
    reservation = fake(4, blocks=("blk-b", "blk-a"), sb_1=DEGRADED, sb_3=IN_USE)
    reservation.block_sub_blocks = {"blk-a": ("sb-1", "sb-2"), "blk-b": ("sb-3", "sb-4")}
    rejected(
        run_with(reservation, NO_SUPER),
        f"{P}:tpu.reservation.block is not set and no block of reservation tpu7x-reservation has room for "
        f"{P}:tpu.cubes = 2",
        "blk-a: room for 1 of 2 cubes\n  blk-b: room for 1 of 2 cubes",
    )


def test_a_running_stack_keeps_its_block_when_another_block_with_room_appears_first() -> None:
    first = run_with(fake(4, blocks=("blk-m",)), NO_SUPER)
    assert on(first, "blk-m") == {"tpu7-pool-1": "sb-1", "tpu7-pool-2": "sb-2"}
    # GKE runs both pools on blk-m (their sub-blocks now in use); a block sorting first, all free, appears.
    later = fake(8, first, blocks=("blk-a", "blk-m"), sb_1=IN_USE, sb_2=IN_USE)
    later.block_sub_blocks = {"blk-a": ("sb-5", "sb-6", "sb-7", "sb-8"), "blk-m": ("sb-1", "sb-2", "sb-3", "sb-4")}
    second = run_with(later, NO_SUPER)
    assert second.error is None, second.error
    assert pools(second) == pools(first), "the pools would be replaced"
    assert [c for c in preview(first, second).changes if c.type == POOL and c.action != engine.SAME] == []
    (said,) = [m for m in infos(second) if m.startswith("placement: ")]
    assert "blk-m, where the stack's running TPU pools are" in said


def test_a_running_stack_whose_reservation_is_found_in_another_zone_is_refused_not_moved() -> None:
    first = run_with(fake(4), NO_SUPER)  # the pools run in us-central1-ai1a
    moved = fake(4, first, zone="us-central1-c", sb_1=IN_USE, sb_2=IN_USE)
    rejected(
        run_with(moved, NO_SUPER),
        f"{P}:zone is not set and reservation tpu7x-reservation is in us-central1-c, but the stack's pool "
        "tpu7-pool-1 runs in us-central1-ai1a: a new zone would replace every TPU pool",
        f"Set {P}:zone = us-central1-ai1a to keep them",
    )


def test_a_reservation_shared_from_another_project_is_bound_whole() -> None:
    # GKE cannot bind a block of a reservation shared from another project: unset, the block is the whole one.
    run = run_with(fake(4), {f"{P}:tpu": {"reservation": {"project": "shared-resv-project"}}})
    assert run.error is None, run.error
    values = {p["nodeConfig"]["reservationAffinity"]["values"][0] for p in pools(run).values()}
    assert values == {"projects/shared-resv-project/reservations/tpu7x-reservation"}


def test_no_reservation_to_read_needs_the_zone_set() -> None:
    rejected(
        run_with(fake(4), {f"{P}:tpu": {"cubes": 0}, f"{P}:serving": {"enabled": False}, **_no_demos()}),
        f"{P}:zone is not set: a zone (us-central1-ai1a, us-central1-c offer tpu7x-standard-4t): with tpu.cubes = 0",
    )


def _no_demos() -> dict[str, object]:
    return {f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}}


def test_offline_the_first_zone_and_a_block_marker_stand_in(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with out.open("w") as stdout:
        code = plan.main(["--stack", "dev", *_placeholders()], stdout=stdout)
    text = out.read_text()
    assert code == 0, text
    assert (
        f"placement: reservation my-reservation not read (offline): zone us-central1-ai1a (the first zone offering "
        f"tpu7x-standard-4t) and block {OFFLINE_BLOCK} stand in; `pulumi preview` reads them"
    ) in text


def test_plan_with_a_reservation_file_reads_the_zone_and_block_from_it(tmp_path: Path) -> None:
    link = "https://www.googleapis.com/compute/v1/projects/my-project/zones/us-central1-c/reservations/my-reservation"
    data = {
        "getReservation": {"name": "my-reservation", "selfLink": link, "blockNames": ["blk-9"]},
        "getReservationBlock": {"name": "blk-9", "subBlockNames": ["sb-1", "sb-2"]},
        "getReservationSubBlock": [healthy_sub_block("sb-1"), healthy_sub_block("sb-2")],
        "getCluster": None,
    }
    file = tmp_path / "reservation.json"
    file.write_text(json.dumps(data))
    out = tmp_path / "out.txt"
    with out.open("w") as stdout:
        code = plan.main(["--stack", "dev", *_placeholders(), "--reservation", str(file)], stdout=stdout)
    text = out.read_text()
    assert code == 0, text
    assert f"placement: {P}:zone: us-central1-c" in text and "blk-9, the only one" in text
    assert "SUB-BLOCKS: reservation my-reservation block blk-9 (project my-project, zone us-central1-c)" in text


def _placeholders() -> list[str]:
    return [
        "--set",
        "gcp:project=my-project",
        "--set",
        "tpu.reservation.name=my-reservation",
        "--set",
        "serving.weightsBucket=my-weights",
    ]


@pytest.mark.parametrize("zone", [None, "us-central1-ai1a"])
def test_the_pools_bind_to_the_block_read(zone: str | None) -> None:
    # Whatever found the zone, the pools' affinity names the block the reservation lists.
    reservation = FakeReservation(
        {name: healthy_sub_block(name) for name in ("x-1", "x-2")}, blocks=("only-block",), zone="us-central1-ai1a"
    )
    run = run_with(reservation, {f"{P}:zone": zone} if zone else None)
    assert run.error is None, run.error
    assert {p.inputs["nodeConfig"]["reservationAffinity"]["values"][0].split("/")[5] for p in tpu_pools(run)} == {
        "only-block"
    }


def test_diff_against_a_base_takes_the_zone_and_block_of_the_base_pools_where_the_stack_leaves_them_unset() -> None:
    # `diff --base` stands for a preview of the running stack: its pools are the base's, and a preview keeps theirs.
    from components.cli.diff import _as_running

    affinity = "projects/p/reservations/r/reservationBlocks/blk-7/reservationSubBlocks/sb-1"
    pool = {"nodeLocations": ["us-central1-c"], "nodeConfig": {"reservationAffinity": {"values": [affinity]}}}
    system = {"nodeLocations": ["x"], "nodeConfig": {"machineType": "n2-standard-8"}}
    old = [{"type": "gcp:container/nodePool:NodePool", "inputs": inputs} for inputs in (system, pool)]
    config = {f"{P}:tpu": {"reservation": {"name": "r"}}}
    placed = _as_running(config, old)
    assert placed[f"{P}:zone"] == "us-central1-c" and placed[f"{P}:tpu"]["reservation"]["block"] == "blk-7"
    # Keys the stack sets are its own; an offline marker on the base is no block to keep.
    pinned = {f"{P}:zone": "us-central1-ai1a", f"{P}:tpu": {"reservation": {"name": "r", "block": "b"}}}
    assert _as_running(pinned, old) == pinned
    marker = [
        {
            **old[1],
            "inputs": {
                **pool,
                "nodeConfig": {
                    "reservationAffinity": {"values": [f"projects/p/reservations/r/reservationBlocks/{OFFLINE_BLOCK}"]}
                },
            },
        }
    ]
    assert "block" not in _as_running(config, marker)[f"{P}:tpu"]["reservation"]
