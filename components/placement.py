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
from components.model.tpu.reservation import Assignment
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
    assigned = None  # the sub-blocks of a block chosen for its room, read already
    if offline:
        settings, chosen = stand_ins(settings)
    else:
        settings, chosen = _whole(settings)
        if settings.zone is None or settings.tpu.reservation.block is None:
            settings, read, assigned = _read(settings, source_for)
            chosen += read
    if assigned is None:
        assigned = reads.assignment(settings, source_for, offline)
    return Placed(settings, assigned, tuple(chosen))


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


def _read(
    settings: Settings, source_for: Callable[[Settings], reads.Source]
) -> tuple[Settings, list[str], Assignment | None]:
    tpu, r = settings.tpu, settings.tpu.reservation
    project, chosen, assigned = settings.reservation_project, [], None
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
        settings, line, assigned = _block(settings, source_for)
        chosen.append(line)
    return settings, chosen, assigned


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
    ours, name = settings.tpu.pool_names, settings.tpu.reservation.name
    out = {}
    for block in blocks:
        bound = reads.bound_sub_blocks(cluster, settings.reservation_project, name, block)
        out |= {pool: block for pool, sub_block in bound.items() if pool in ours and sub_block is not None}
    return out


def _block(
    settings: Settings, source_for: Callable[[Settings], reads.Source]
) -> tuple[Settings, str, Assignment | None]:
    """The block the stack's running pools are on, else the only one, else the first with room (and its sub-blocks)."""
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
        line = f"{key('tpu.reservation.block')}: {block}, where the stack's running TPU pools are"
        return with_placement(settings, block=block), line, None
    if len(blocks) == 1:  # the only one: its own sub-blocks' state says what is wrong, as for a block that was set
        line = f"{key('tpu.reservation.block')}: {blocks[0]}, the only one"
        return with_placement(settings, block=blocks[0]), line, None
    refused = []
    for block in blocks:
        candidate = with_placement(settings, block=block)
        try:
            result = reads.assignment(candidate, source_for)
        except reads.ReservationError as err:
            refused.append(f"{block}: {err}")
            continue
        if not result.errors:
            line = (
                f"{key('tpu.reservation.block')}: {block}, the first of {', '.join(blocks)} with room for {cubes} cubes"
            )
            return candidate, line, result
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
    pools = (cluster.node_pools if cluster is not None else None) or []
    for pool in sorted(pools, key=lambda p: str(p["name"])):  # the same pool named on every run
        zones = list(pool.get("node_locations") or [])
        if pool["name"] in tpu.pool_names and zones and settings.zone not in zones:
            raise reads.ReservationError(
                f"{key('zone')} is not set and reservation {tpu.reservation.name} is in {settings.zone}, but the "
                f"stack's pool {pool['name']} runs in {', '.join(zones)}: a new zone would replace every TPU pool. "
                f"Set {key('zone')} = {zones[0]} to keep them, or set it to {settings.zone} to move them"
            )
