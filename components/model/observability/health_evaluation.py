"""Each cube's health and the action it needs, from the reads (the command's pure core; the states and the report
it returns are in components/model/observability/health.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from components.model.config.checks import PROJECT
from components.model.keys import NODE_POOL_LABEL
from components.model.observability.health import (
    ACTION,
    OK,
    SLICE_DEGRADED,
    SLICE_OK,
    SUB_BLOCKS_KEY,
    WATCH,
    CubeHealth,
    Report,
    partition_summary,
    slice_failed_states,
    unplaced_action,
    workload_states,
)
from components.model.tpu.reservation import Assignment, SubBlock
from components.model.tpu.slices import slices_using_pool


def spares(
    names: Sequence[str], read: Callable[[str], SubBlock], taken: set[str], hosts_needed: int, count: int
) -> list[str]:
    """Up to `count` usable free sub-blocks in name order (read lazily: a healthy block costs no read)."""
    out: list[str] = []
    for name in sorted(set(names) - taken):
        if len(out) >= count:
            break
        if not read(name).problems(hosts_needed, ours=False):
            out.append(name)
    return out


def evaluate(
    assignment: Assignment,
    *,
    block_names: Sequence[str],
    read: Callable[[str], SubBlock],
    hosts_needed: int,
    nodes: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]],
    check: str,
    block: str = "",
    gates: Sequence[str] = (),
) -> Report:
    """Each cube's health and the action it needs (the rules: components/model/observability/health.py's docstring);
    `gates`: the slice controller's feature gates turned on (addons.sliceController.featureGates)."""
    failed = slice_failed_states(gates)
    labels_of = [dict((n.get("metadata") or {}).get("labels") or {}) for n in nodes]
    states = workload_states(workloads, check)
    placed: set[str] = set()
    cubes: list[CubeHealth] = []
    for b in assignment.bindings:
        pool_nodes = [lab for lab in labels_of if lab.get(NODE_POOL_LABEL) == b.pool]
        uses = slices_using_pool(slices, pool_nodes)
        on_cube = {u.name for u in uses}
        owners = {u.owner for u in uses if u.owner}
        mine = [w for w in states if w.name in owners or on_cube & set(w.slices)]
        placed.update(w.name for w in mine)
        text, degraded = partition_summary(pool_nodes)
        problems, rows = b.problems if b.existing else (), [(u.name, u.state, u.owner) for u in uses]
        cubes.append(CubeHealth(b.cube, b.pool, b.sub_block, b.state, problems, text, degraded, rows, mine))
    unplaced = [w for w in states if w.name not in placed]

    # Which cubes should move: a bad sub-block under a running pool, maintenance on its way, or partitions or
    # Slices that GKE reports degraded or failed while the sub-block still reads healthy.
    def wants_move(c: CubeHealth) -> str | None:
        sb = c.sub_block_state
        if c.sub_block_problems:
            return "its sub-block is " + "; ".join(c.sub_block_problems)
        if sb is not None and sb.maintenance_pending:
            return (
                f"maintenance is pending on its sub-block ({sb.maintenance_pending}): without live migration the "
                "slices on it stop when the maintenance starts"
            )
        if c.degraded_nodes:
            return f"{c.degraded_nodes} of its nodes report a partition not HEALTHY ({c.partitions})"
        if any(state.split(",")[0] in failed | SLICE_DEGRADED for _, state, _ in c.slices):
            return "a Slice on it is " + ", ".join(
                sorted({s.split(",")[0] for _, s, _ in c.slices if s.split(",")[0] in failed | SLICE_DEGRADED})
            )
        return None

    movers = [(c, why) for c in cubes if (why := wants_move(c)) is not None and c.sub_block is not None]
    taken = {c.sub_block for c in cubes if c.sub_block}
    found = spares(block_names, read, taken, hosts_needed, len(movers)) if movers else []
    notes: list[str] = []
    mapping = [c.sub_block for c in cubes]
    for (c, why), spare in zip(movers, found + [None] * (len(movers) - len(found)), strict=True):
        c.status = ACTION
        if spare is not None:
            c.move_to = spare
            c.action = f"move to {spare}: {why}"
        else:
            c.action = (
                f"no healthy free sub-block in block {block or '?'} to move it to: {why}. What else helps: lower "
                f"{PROJECT}:tpu.cubes (fewer cubes), add capacity in another block of the reservation, or wait for "
                "the repair or the maintenance to end"
            )
    existing = {b.pool for b in assignment.bindings if b.existing}
    for c in cubes:
        if c.status == OK and c.pool not in existing:
            c.status = WATCH
            c.action = "not running yet: the next `pulumi up` creates it" + (
                f" ({'; '.join(b.problems)})" if (b := assignment.bindings[c.cube]).problems else ""
            )
        elif c.status == OK and any(w.state != "pending" for w in c.workloads):  # a pending one only waits
            c.status = ACTION if any(w.state == "rejected" for w in c.workloads) else WATCH
            c.action = (
                unplaced_action(c.workloads)
                if c.status == ACTION
                else "watch: the slice controller retries, Kueue requeues"
            )
        elif c.status == OK and any(s.split(",")[0] not in SLICE_OK for _, s, _ in c.slices):
            c.status, c.action = WATCH, "watch: Slices are forming or being dismantled"
    proposal = None
    if any(c.move_to for c in cubes):
        if any(m is None for m in mapping):
            whole = ", ".join(c.pool for c in cubes if c.sub_block is None)
            notes.append(
                f"no {SUB_BLOCKS_KEY} can be proposed: {whole} runs on no known sub-block (bound to the whole "
                f"block, or not created yet); pin every cube first"
            )
        else:
            proposal = [c.move_to or str(c.sub_block) for c in cubes]
    return Report(cubes, unplaced, proposal, notes, assignment.note)
