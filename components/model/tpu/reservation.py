"""Which cube runs on which sub-block of the reservation block, and whether it can come up.

Pure Python (no Pulumi): the program feeds it what the Compute API reports at preview
(components/reservation_reads.py), `python -m components plan` what a file holds, or nothing.

An All Capacity mode reservation is blocks of sub-blocks; one 4x4x4 cube (one node pool) fills one
sub-block. Each sub-block reports a status (READY, CREATING, DELETING, INVALID), a health
(HEALTHY, DEGRADED, HEALTH_STATUS_UNSPECIFIED), its hosts, how many VMs use it and pending or ongoing
maintenance (Compute API reference, `reservationSubBlocks.get`; the enum values from the client
libraries' ReservationSubBlock.Status and ReservationSubBlockHealthInfo.HealthStatus).

The mapping is stable without state of its own:

* a pool that GKE already runs on a sub-block of the block stays there, whatever that sub-block's
  health (GKE's node pools are the record: the program reads the cluster at preview);
* a new pool takes the first sub-block, in name order, that is usable and not taken;
* `tpu.subBlocks` pins the mapping (cube i on subBlocks[i]) and wins over both.

So adding a cube never moves an existing pool, and a sub-block that turns bad under a running pool is
reported with the exact `tpu.subBlocks` that would move it; nothing is replaced unless the user says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.model.config.checks import PROJECT
from components.model.records import align, record

READY = "READY"
HEALTHY = "HEALTHY"
WHOLE_BLOCK = ""  # BlockView.existing: a pool bound to the whole block, not to one of its sub-blocks


def config_key(path: str) -> str:
    """`path` as Pulumi names the project's key: gke-tpu-slicing:tpu.cubes."""
    return f"{PROJECT}:{path}"


@dataclass(frozen=True)
class SubBlock:
    """One sub-block as the Compute API reports it (None: the API did not say)."""

    name: str
    status: str | None = READY
    health: str | None = HEALTHY
    hosts: int | None = None  # `count`: hosts allocated in the sub-block
    in_use: int = 0  # `inUseCount`: VMs running on it
    maintenance_pending: int = 0  # hosts + infrastructure + instances with pending maintenance
    maintenance_ongoing: int = 0
    physical: str | None = None  # cluster/block/subBlock hashes

    def problems(self, hosts_needed: int, ours: bool) -> list[str]:
        """Why a pool of `hosts_needed` VMs cannot (or should not) run here; `ours`: our pool already does."""
        out = []
        if self.status != READY:
            out.append(f"status {self.status or 'unknown'} (not READY): wait until it is READY")
        if self.health != HEALTHY:
            out.append(f"health {self.health or 'unknown'}: pick another sub-block, or wait until it is repaired")
        if self.hosts is not None and self.hosts < hosts_needed:
            out.append(f"{self.hosts} hosts, a cube needs {hosts_needed}: pick another sub-block")
        if self.maintenance_ongoing:
            out.append(f"maintenance ongoing ({self.maintenance_ongoing}): wait until it ends")
        # Pending maintenance is scheduled, not started: "hosts in the sub-block that have pending maintenance"
        # (terraform-provider-google-beta data_source_google_compute_reservation_sub_block.go,
        # maintenance_pending_count), so they still run. A new pool should not start there; a running pool
        # keeps its capacity until then (a warning, `notice`), or every `up` of a stack whose workloads need
        # that cube would be refused for as long as the notice stands.
        if self.maintenance_pending and not ours:
            out.append(
                f"maintenance pending ({self.maintenance_pending}): wait until it is done, or pick another sub-block"
            )
        if self.in_use and not ours:
            out.append(
                f"in use ({self.in_use} VMs) by something other than this stack's pools: free it, or pick another"
            )
        return out

    def notice(self, ours: bool) -> str | None:
        """What to know about a sub-block our pool runs on that does not stop it from counting."""
        if ours and self.maintenance_pending:
            return (
                f"has maintenance pending ({self.maintenance_pending}): its capacity still counts, and the slices "
                "on it stop when the maintenance starts"
            )
        return None

    def state(self) -> str:
        parts = [self.status or "status?", self.health or "health?"]
        if self.hosts is not None:
            parts.append(f"{self.hosts} hosts")
        parts.append(f"{self.in_use} in use")
        if self.maintenance_pending or self.maintenance_ongoing:
            parts.append(f"maintenance {self.maintenance_pending} pending/{self.maintenance_ongoing} ongoing")
        else:
            parts.append("no maintenance")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        fields = ("name", "status", "health", "hosts", "in_use", "maintenance_pending", "maintenance_ongoing")
        return record(self, *fields, ("physicalTopology", "physical"))


@dataclass(frozen=True)
class BlockView:
    """What was read of one reservation block: its sub-block names (all), a lazy reader of each, and
    the sub-block each of this cluster's node pools is bound to now (pool name -> sub-block name;
    WHOLE_BLOCK when bound to this whole block, as before sub-blocks were read; None: something else)."""

    reservation: str
    project: str
    zone: str
    block: str
    names: tuple[str, ...]
    read: Callable[[str], SubBlock]
    existing: Mapping[str, str | None] = field(default_factory=dict)
    source: str = "the Compute API"

    @property
    def where(self) -> str:
        return f"reservation {self.reservation} block {self.block} (project {self.project}, zone {self.zone})"


@dataclass(frozen=True)
class CubeBinding:
    cube: int
    pool: str
    sub_block: str | None  # None: not read (bound to the block) or nothing usable left
    state: SubBlock | None
    existing: bool  # GKE runs this pool on this sub-block already
    problems: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return record(self, "cube", "pool", "sub_block", "existing", "usable", "problems", "state")


@dataclass(frozen=True)
class Assignment:
    """The cube-to-sub-block mapping, what blocks it (errors) and what to know (warnings)."""

    bindings: tuple[CubeBinding, ...]
    read: bool  # False: planned on the configuration alone
    note: str  # where the data came from, or why it was not read
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    listing: tuple[SubBlock, ...] = ()  # every sub-block read, in name order

    def mapping(self) -> dict[str, str | None]:
        return {b.pool: b.sub_block for b in self.bindings}

    @property
    def usable(self) -> tuple[CubeBinding, ...]:
        return tuple(b for b in self.bindings if b.usable)

    @property
    def unusable(self) -> tuple[CubeBinding, ...]:
        return tuple(b for b in self.bindings if not b.usable)

    def error_message(self) -> str:
        n = len(self.errors)
        return f"TPU reservation cannot hold the cubes ({n} problem{'s' if n != 1 else ''}):\n  " + "\n  ".join(
            self.errors
        )

    def table(self) -> str:
        head = f"SUB-BLOCKS: {self.note}"
        if not self.listing:
            return head
        pools = {b.sub_block: b.pool for b in self.bindings if b.sub_block}
        rows = [["SUB-BLOCK", "POOL", "STATE"]]
        rows += [[sb.name, pools.get(sb.name, "-"), sb.state()] for sb in self.listing]
        return "\n".join([head, *align(rows)])

    def as_dict(self) -> dict[str, Any]:
        return record(
            self, "read", ("source", "note"), ("cubes", "bindings"), ("subBlocks", "listing"), "errors", "warnings"
        )


def unread(pools: Sequence[str], note: str, pinned: Sequence[str] | None = None) -> Assignment:
    """No reservation data: every cube counts as usable, bound to its pinned sub-block or to the block."""
    bindings = tuple(CubeBinding(i, pool, pinned[i] if pinned else None, None, False) for i, pool in enumerate(pools))
    return Assignment(bindings, read=False, note=note)


def assign(view: BlockView, pools: Sequence[str], hosts_needed: int, pinned: Sequence[str] | None) -> Assignment:
    """Binds pool i (`pools[i]`) to a sub-block of `view` (see the module docstring)."""
    known = set(view.names)
    cache: dict[str, SubBlock] = {}

    def state(name: str) -> SubBlock:
        if name not in cache:
            cache[name] = view.read(name)
        return cache[name]

    errors: list[str] = []
    warnings: list[str] = []
    current = {pool: sb for pool, sb in view.existing.items() if sb in known}
    held = set(current.values())  # by any pool of the cluster, ours being removed included
    targets: list[str | None] = [None] * len(pools)

    if pinned is not None:
        for i, name in enumerate(pinned):
            if name not in known:
                errors.append(
                    f"{config_key(f'tpu.subBlocks[{i}]')} = {name!r}: not a sub-block of {view.where}; "
                    f"its sub-blocks: {', '.join(sorted(known)) or 'none'}"
                )
            else:
                targets[i] = name
    else:
        for i, pool in enumerate(pools):
            targets[i] = current.get(pool)
        # A pool bound to the whole block (made before sub-blocks were read) stays so: rebinding it
        # would replace it. GKE put it on some sub-block, which is then in use and skipped below.
        whole = {pool for pool in pools if view.existing.get(pool) == WHOLE_BLOCK}
        taken = {t for t in targets if t} | held
        for i in range(len(pools)):
            if targets[i] is not None or pools[i] in whole:
                continue
            for name in sorted(known - taken):
                if not state(name).problems(hosts_needed, ours=False):
                    targets[i] = name
                    taken.add(name)
                    break

    bindings = []
    for i, pool in enumerate(pools):
        name = targets[i]
        if name is None and pinned is None and view.existing.get(pool) == WHOLE_BLOCK:
            bindings.append(CubeBinding(i, pool, None, None, True))
            warnings.append(
                f"{pool} is bound to the whole block {view.block}, not to one sub-block: it stays so (no "
                f"replacement), and its sub-block's health is not checked; to bind it to one, set "
                f"{config_key('tpu.subBlocks')} (replaces the pool, which stops every slice on it)"
            )
            continue
        if name is None:
            bindings.append(CubeBinding(i, pool, None, None, False, ("no usable sub-block left",)))
            continue
        ours = current.get(pool) == name
        sb = state(name)
        bindings.append(CubeBinding(i, pool, name, sb, ours, tuple(sb.problems(hosts_needed, ours))))
        notice = sb.notice(ours)
        if notice and not bindings[-1].problems:
            warnings.append(f"{pool} (cube {i}) runs on sub-block {name}, which {notice}")
        moved_from = current.get(pool)
        if pool in view.existing and moved_from != name:
            was = (
                f"sub-block {moved_from}"
                if moved_from
                else "the whole block (not one sub-block)"
                if view.existing[pool] == WHOLE_BLOCK
                else "another reservation or block"
            )
            warnings.append(
                f"{pool} runs on {was} and is bound to sub-block {name} now: this update replaces the pool "
                "(reservation affinity is ForceNew), which stops every slice on it"
            )

    blocked = [b for b in bindings if b.problems and not b.existing]
    kept_bad = [b for b in bindings if b.problems and b.existing]
    spare = None
    if kept_bad:  # read further only to propose where a pool could move
        free = sorted(known - {b.sub_block for b in bindings} - held)
        spare = next((n for n in free if not state(n).problems(hosts_needed, ours=False)), None)
    listing = tuple(cache[n] for n in sorted(cache))
    mapping_now = [b.sub_block or "?" for b in bindings]
    for b in kept_bad:
        fix = (
            f"to move it, set {config_key('tpu.subBlocks')}: [{', '.join(_swap(mapping_now, b.cube, spare))}] "
            f"(replaces {b.pool}: its slices stop)"
            if spare
            else f"no usable free sub-block to move it to in {view.where}"
        )
        warnings.append(
            f"{b.pool} (cube {b.cube}) runs on sub-block {b.sub_block}, which is {'; '.join(b.problems)}. "
            f"It is left in place and its capacity is not planned; {fix}"
        )
    if blocked:
        key = config_key("tpu.subBlocks") if pinned is not None else config_key("tpu.cubes")
        value = list(pinned) if pinned is not None else len(pools)
        usable = len(bindings) - len(blocked) - len(kept_bad)
        lines = [
            f"{key} = {value}: {view.where} has room for {usable} of {len(pools)} cubes on usable sub-blocks "
            "(READY, HEALTHY, free, no maintenance)."
        ]
        for b in blocked:
            where = f"sub-block {b.sub_block}" if b.sub_block else "no sub-block"
            lines.append(f"{b.pool} (cube {b.cube}) on {where}: {'; '.join(b.problems)}")
        lines.append("Sub-blocks read (name: state -> pool):")
        pools_on = {b.sub_block: b.pool for b in bindings if b.sub_block}
        for sb in listing:
            pool = pools_on.get(sb.name)
            why = sb.problems(hosts_needed, ours=pool is not None and current.get(pool) == sb.name)
            lines.append(
                f"  {sb.name}: {sb.state()} -> {pool or '-'}" + (f" (not usable: {'; '.join(why)})" if why else "")
            )
        unread_names = sorted(known - set(cache))
        if unread_names:
            lines.append(f"  not read (not needed): {', '.join(unread_names)}")
        lines.append(
            f"What to do: lower {config_key('tpu.cubes')}, pin usable sub-blocks with {config_key('tpu.subBlocks')}, "
            "or wait for the state above to clear and run preview again."
        )
        errors.append("\n    ".join(lines))
    note = f"{view.where}, read from {view.source}"
    return Assignment(tuple(bindings), True, note, tuple(errors), tuple(warnings), listing)


def _swap(mapping: list[str], index: int, name: str | None) -> list[str]:
    out = list(mapping)
    if name is not None:
        out[index] = name
    return out


def sub_block_of(path: str, view_project: str, reservation: str, block: str) -> str | None:
    """The sub-block a node pool's reservation affinity value names, if it is one of this block's
    (WHOLE_BLOCK: the value names the block itself).

    Accepts the forms GKE takes: `projects/P/reservations/R/...` and the short `R/...` (xpk's
    src/xpk/core/reservation.py writes the short form for a reservation of the cluster's project).
    """
    parts = path.split("/")
    if parts[:1] == ["projects"]:
        if len(parts) < 4 or parts[1] != view_project or parts[2] != "reservations":
            return None
        parts = parts[3:]
    if len(parts) == 3 and parts[0] == reservation and parts[1:] == ["reservationBlocks", block]:
        return WHOLE_BLOCK
    if (
        len(parts) == 5
        and parts[0] == reservation
        and parts[1:4] == ["reservationBlocks", block, "reservationSubBlocks"]
    ):
        return parts[4]
    return None
