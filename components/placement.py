"""Where the TPU pools go when the stack leaves it to the reservation: its zone and its block, read at preview.

`zone` unset: the reservation is looked for in each zone offering the machine type (the TPU facts table,
components/model/tpu/geometry.py); exactly one must hold it. `tpu.reservation.block` unset: the block the stack's
running TPU pools are bound to, else the first block, by name, with room for the cubes (the same choice of sub-blocks
as a set block: components/model/tpu/reservation.py `assign`); the whole reservation when it is shared from another
project (GKE cannot bind a block of it).

Both feed the node pools' ForceNew `node_locations` and `reservation_affinity`, so a choice that moved would replace
the pools. It does not move under a running stack: GKE's node pools are the record, as for sub-blocks. A running pool
keeps its block whatever the other blocks hold (one added in front, one with more room); a reservation found in
another zone than the one its running pools are in is refused, naming the zone to set. A fresh stack takes the
first block with room; set the keys to pin another (the preview prints what it read, with the commands).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components import reservation_reads as reads
from components.model.config.settings import Settings
from components.model.tpu.reservation import Assignment, sub_block_of
from components.model.tpu.reservation import config_key as key

# The marker an offline run binds the pools to (nothing is read): `pulumi preview` reads the block.
OFFLINE_BLOCK = "<block with room, read at preview>"
_ZONE_IN_LINK = re.compile(r"/zones/([^/]+)/")


@dataclass(frozen=True)
class Placed:
    """The settings with the zone and block in place, the cubes' sub-blocks, and what was read (one line each)."""

    settings: Settings
    sub_blocks: Assignment
    chosen: tuple[str, ...] = ()


def from_file(path: Path) -> Callable[[Settings], reads.Source]:
    """The reads answered from a saved file (`--reservation FILE`), for the block each candidate asks."""
    return lambda settings: reads.FileSource(path, settings.tpu.reservation.block)


def with_placement(settings: Settings, zone: str | None = None, block: str | None = None) -> Settings:
    """`settings` with `zone` and `tpu.reservation.block` set, as if the stack had set them."""
    updates: dict[str, Any] = {} if zone is None else {"zone": zone}
    if block is not None:
        tpu = settings.tpu
        reservation = tpu.reservation.model_copy(update={"block": block})
        updates["tpu"] = tpu.model_copy(update={"reservation": reservation})
    return settings.model_copy(update=updates)


def place(
    settings: Settings, source_for: Callable[[Settings], reads.Source] = reads.LiveSource, offline: bool = False
) -> Placed:
    """The stack's placement and sub-blocks; raises reads.ReservationError (nothing is registered yet)."""
    if offline:
        settings, chosen = stand_ins(settings)
    else:
        settings, chosen = _whole(settings)
        if settings.zone is None or settings.tpu.reservation.block is None:
            settings, read = _read(settings, source_for)
            chosen += read
    return Placed(settings, reads.assignment(settings, source_for, offline), tuple(chosen))


def _whole(settings: Settings) -> tuple[Settings, list[str]]:
    """An unset block where there is none to choose: no pools on the reservation, or one shared from another project."""
    tpu, r = settings.tpu, settings.tpu.reservation
    if r.block is not None:
        return settings, []
    if tpu.cubes == 0 or r.consume_type != "SPECIFIC":
        return with_placement(settings, block=""), []
    if r.project not in (None, settings.project):
        line = f"{key('tpu.reservation.block')}: the whole reservation (shared from project {r.project})"
        return with_placement(settings, block=""), [line]
    return settings, []


def stand_ins(settings: Settings) -> tuple[Settings, list[str]]:
    """Offline, nothing is read: the first zone offering the machine type and OFFLINE_BLOCK stand in."""
    settings, chosen = _whole(settings)
    tpu = settings.tpu
    zone = None if settings.zone is not None else tpu.system.zones[0]
    block = OFFLINE_BLOCK if tpu.reservation.block is None else None
    what = [f"zone {zone} (the first zone offering {tpu.machine_type})"] if zone else []
    what += [f"block {block}"] if block else []
    if what:
        chosen.append(
            f"reservation {tpu.reservation.name} not read (offline): {' and '.join(what)} stand in; "
            "`pulumi preview` reads them"
        )
    return with_placement(settings, zone, block), chosen


def _read(settings: Settings, source_for: Callable[[Settings], reads.Source]) -> tuple[Settings, list[str]]:
    tpu, r = settings.tpu, settings.tpu.reservation
    project, chosen = settings.reservation_project, []
    if settings.zone is None:
        zones = tpu.system.zones
        found = [z for z in zones if _holds(source_for(with_placement(settings, z)), with_placement(settings, z))]
        if len(found) != 1:
            where = f"{' or '.join(found)}" if found else f"none of {', '.join(zones)}"
            raise reads.ReservationError(
                f"{key('zone')} is not set and reservation {r.name} (project {project}) is in {where}, the zones "
                f"offering {tpu.machine_type}: set {key('zone')} to the reservation's zone, and check "
                f"{key('tpu.reservation.name')} and {key('tpu.reservation.project')}."
                + reads.ai_zone_hint(with_placement(settings, zones[0]))
            )
        settings = with_placement(settings, found[0])
        chosen.append(f"{key('zone')}: {found[0]}, the one of {', '.join(zones)} holding reservation {r.name}")
        _same_zone(settings, source_for)
    if settings.tpu.reservation.block is None:
        settings, line = _block(settings, source_for)
        chosen.append(line)
    return settings, chosen


def _holds(source: reads.Source, settings: Settings) -> bool:
    """Does the settings' zone hold the reservation? A missing one reads as no self link (reservation_reads)."""
    zone, project = settings.zone, settings.reservation_project
    try:
        res = source.reservation()
    except reads.ReservationError:
        raise
    except Exception as err:
        where = f"reservation {settings.tpu.reservation.name} (project {project}, zone {zone})"
        raise reads.read_failed("the reservation", where, err, reads.ai_zone_hint(settings)) from None
    link = _ZONE_IN_LINK.search(res.self_link or "")
    return bool(res.self_link) and (link is None or link.group(1) == zone)


def _running(settings: Settings, cluster: Any, blocks: list[str]) -> dict[str, str]:
    """Our TPU pool name -> the block of this reservation it is bound to now (GKE's node pools are the record)."""
    r, tpu = settings.tpu.reservation, settings.tpu
    ours = {tpu.pool_name(i) for i in range(tpu.cubes)}
    out = {}
    for pool in (cluster.node_pools if cluster is not None else None) or []:
        config = (pool.get("node_configs") or [None])[0] or {}
        affinity = (config.get("reservation_affinities") or [None])[0] or {}
        for value in affinity.get("values") or []:
            for block in blocks:
                if (
                    pool["name"] in ours
                    and sub_block_of(value, settings.reservation_project, r.name, block) is not None
                ):
                    out[pool["name"]] = block
    return out


def _block(settings: Settings, source_for: Callable[[Settings], reads.Source]) -> tuple[Settings, str]:
    r, cubes = settings.tpu.reservation, settings.tpu.cubes
    source = source_for(settings)
    res = source.reservation()
    if not res.self_link:
        raise reads.no_such_reservation(settings, source)
    blocks = sorted(res.block_names or [])
    if not blocks:
        raise reads.ReservationError(
            f"{key('tpu.reservation.block')} is not set and reservation {r.name} lists no blocks: set it "
            '("" binds the pools to the whole reservation)'
        )
    try:
        cluster = source.cluster()
    except Exception as err:
        raise reads.ReservationError(
            f"could not read cluster {settings.cluster.name} (the block its TPU pools are on): {err}"
        ) from None
    running = _running(settings, cluster, blocks)
    if running:  # a running stack keeps its pools' block, whatever the others hold
        block = sorted(running.values())[0]
        return with_placement(settings, block=block), (
            f"{key('tpu.reservation.block')}: {block}, where the stack's running TPU pools are"
        )
    if len(blocks) == 1:  # the only one: its own sub-blocks' state says what is wrong, as for a block that was set
        return with_placement(settings, block=blocks[0]), f"{key('tpu.reservation.block')}: {blocks[0]}, the only one"
    refused = []
    for block in blocks:
        candidate = with_placement(settings, block=block)
        try:
            result = reads.assignment(candidate, source_for)
        except reads.ReservationError as err:
            refused.append(f"{block}: {err}")
            continue
        if not result.errors:
            return candidate, (
                f"{key('tpu.reservation.block')}: {block}, the first of {', '.join(blocks)} with room for {cubes} cubes"
            )
        refused.append(f"{block}: room for {len(result.usable)} of {cubes} cubes")
    raise reads.ReservationError(
        f"{key('tpu.reservation.block')} is not set and no block of reservation {r.name} has room for "
        f"{key('tpu.cubes')} = {cubes} (READY, HEALTHY, free sub-blocks):\n  "
        + "\n  ".join(refused)
        + f"\nSet {key('tpu.reservation.block')}"
        f" to see one block's sub-blocks, lower {key('tpu.cubes')}, or wait for sub-blocks to free up."
    )


def _same_zone(settings: Settings, source_for: Callable[[Settings], reads.Source]) -> None:
    """A zone read from the reservation never moves running pools: refuse one they are not in."""
    try:
        cluster = source_for(settings).cluster()
    except Exception:  # reads.assignment reads the cluster next and says what failed
        return
    tpu = settings.tpu
    ours = {tpu.pool_name(i) for i in range(tpu.cubes)}
    pools = (cluster.node_pools if cluster is not None else None) or []
    for pool in sorted(pools, key=lambda p: str(p["name"])):  # the same pool named on every run
        zones = list(pool.get("node_locations") or [])
        if pool["name"] in ours and zones and settings.zone not in zones:
            raise reads.ReservationError(
                f"{key('zone')} is not set and reservation {tpu.reservation.name} is in {settings.zone}, but the "
                f"stack's pool {pool['name']} runs in {', '.join(zones)}: a new zone would replace every TPU pool. "
                f"Set {key('zone')} = {zones[0]} to keep them, or set it to {settings.zone} to move them"
            )
