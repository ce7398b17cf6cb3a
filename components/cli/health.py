"""`python -m components health --stack S`: each cube's health and the change that would help, never the move.

Per cube: its sub-block's status, health and maintenance (the preview's reads, components/reservation_reads.py),
its nodes' partitions, its Slices and the Kueue Workloads a slice failure evicted or holds
(components/model/observability/health_evaluation.py); when a cube should move, the `tpu.subBlocks` value and what
the change preview says it does (components/cli/diff.py change_preview). `--write` puts that value into the stack
file (for the health workflow's pull request); nothing in the cloud or the cluster changes.
Exit status: 0 healthy, 1 an action is needed, 2 bad arguments or unreadable input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from components import placement
from components import reservation_reads as reservation
from components.cli import health_reads
from components.cli.plan import (
    OneLineParser,
    StackFileError,
    add_stack_arguments,
    apply_set,
    fail,
    load_config,
    parse_args,
    read_stack,
    secret_keys,
)
from components.cli.verify_reads import VerifyError, add_kubeconfig_arguments, api_client
from components.model.config.settings import PROJECT, ConfigError, Settings
from components.model.observability import health, health_evaluation


class HealthError(Exception):
    """Bad arguments or unreadable input: one line, exit 2."""


def _items(value: Any, what: str) -> list[dict[str, Any]]:
    if isinstance(value, dict) and "items" in value:
        value = value["items"]
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(i, dict) for i in value):
        raise HealthError(f"the cluster state's {what}: expected a list of objects or a List with items")
    return value


def read_state_file(path: Path) -> dict[str, list[dict[str, Any]]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise HealthError(f"cannot read the cluster state from {path}: {' '.join(str(err).split())}") from None
    if not isinstance(data, dict):
        raise HealthError(f"{path}: expected a JSON object with nodes, slices and workloads")
    return {k: _items(data.get(k), f"{k} ({path})") for k in ("nodes", "slices", "workloads")}


class _DataSource(reservation.FileSource):
    """The reservation reads held in memory (the live answers, in the file's shape)."""

    def __init__(self, data: dict[str, Any], description: str, block: str | None = None) -> None:
        self.description, self.data, self.asked_block = description, data, block


def _reservation_sources(args: argparse.Namespace) -> Callable[[Settings], reservation.FileSource]:
    """The reads for each zone and block asked (components/placement.py asks several while they are unset)."""
    if args.reservation is not None:
        return placement.from_file(args.reservation)
    if not args.live:
        raise HealthError("give --reservation FILE, or --live to read the reservation from the Compute API")
    session, read = health_reads.adc_session(), {}

    def source_for(settings: Settings) -> reservation.FileSource:
        r = settings.tpu.reservation
        assert r.name is not None and settings.zone is not None
        where = (settings.zone, r.block or "")
        if where not in read:
            data = health_reads.reservation_data(
                session,
                project=settings.reservation_project,
                zone=settings.zone,
                reservation=r.name,
                block=r.block or "",
                cluster=(settings.project, settings.region, settings.cluster.name),
            )
            read[where] = _DataSource(data, "the Compute API", r.block)
        return read[where]

    return source_for


def _cluster_state(args: argparse.Namespace, settings: Settings, pools: list[str]) -> dict[str, list[dict[str, Any]]]:
    if args.cluster_state is not None:
        return read_state_file(args.cluster_state)
    if not args.live:
        raise HealthError("give --cluster-state FILE, or --live to read the cluster from the Kubernetes API")
    if args.gke:
        config = health_reads.gke_kubeconfig(
            health_reads.adc_session(),
            project=settings.project,
            location=settings.region,
            name=settings.cluster.name,
            dns=settings.cluster.control_plane.dns_endpoint,
        )
        return health_reads.cluster_state(health_reads.api_client_from(config), pools)
    return health_reads.cluster_state(api_client(args.kubeconfig, args.context), pools)


def report(args: argparse.Namespace) -> tuple[health.Report, Settings, dict[str, Any]]:
    try:
        config = read_stack(args.dir, args.stack, args.set)
        settings = load_config(config, args.dir, args.stack, args.set)
    except (StackFileError, ConfigError) as err:
        raise HealthError(str(err)) from None
    tpu = settings.tpu
    if tpu.cubes == 0 or tpu.reservation.consume_type != "SPECIFIC" or tpu.reservation.block == "":
        raise HealthError(
            f"stack {args.stack}: no sub-blocks to check ({PROJECT}:tpu.cubes = {tpu.cubes}, consumeType "
            f"{tpu.reservation.consume_type}, block {tpu.reservation.block!r}): the check needs cubes on one block "
            "of a SPECIFIC reservation"
        )
    try:
        source_for = _reservation_sources(args)
        placed = placement.place(settings, source_for)  # the zone and block a preview would read, if unset
        settings, tpu, assignment = placed.settings, placed.settings.tpu, placed.sub_blocks
        source = source_for(settings)
        names = list(source.block().sub_block_names or [])
    except (reservation.ReservationError, health_reads.ReadError) as err:
        raise HealthError(str(err)) from None
    pools = tpu.pool_names
    try:
        state = _cluster_state(args, settings, pools)
    except (health_reads.ReadError, VerifyError) as err:
        raise HealthError(str(err)) from None
    cache: dict[str, Any] = {b.sub_block: b.state for b in assignment.bindings if b.sub_block and b.state}
    cache.update({sb.name: sb for sb in assignment.listing})

    def read(name: str) -> Any:
        if name not in cache:
            try:
                cache[name] = reservation.sub_block_state(source.sub_block(name))
            except reservation.ReservationError as err:
                raise HealthError(str(err)) from None
        return cache[name]

    result = health_evaluation.evaluate(
        assignment,
        block_names=names,
        read=read,
        hosts_needed=tpu.cube.vms,
        nodes=state["nodes"],
        slices=state["slices"],
        workloads=state["workloads"],
        check=settings.kueue.admission_check_name,
        block=tpu.reservation.block,
        gates=settings.addons.slice_controller.feature_gates,
    )
    if result.proposal is not None:
        from components.teardown import workload_keys

        result.drain_first = workload_keys(settings)  # what teardown.py pool_refusals names
        result.unprotect_first = ["cluster.protect"] if settings.cluster.protect else []  # tpu_node_pools.py protect=
        result.stack_file = f"Pulumi.{args.stack}.yaml"
    return result, settings, config


def preview(args: argparse.Namespace, result: health.Report, settings: Settings, config: dict[str, Any]) -> None:
    """Fills `result.preview` with what the change preview says the proposal does (the pools it replaces, what
    it refuses, what waits for a drain), run on the real sub-block names."""
    from components.cli import diff
    from components.cli.mocks import FakeReservation, healthy_sub_block

    assert result.proposal is not None
    current = [str(c.sub_block) for c in result.cubes]
    # The zone and block the report read (a preview reads them too), and the deployed mapping, pinned: what the
    # pools run on now.
    before = apply_set(config, f"zone={settings.zone}")
    before = apply_set(before, f"tpu.reservation.block={settings.tpu.reservation.block}")
    for i, name in enumerate(current):
        before = apply_set(before, f"tpu.subBlocks[{i}]={name}")
    names = sorted({*current, *result.proposal})
    fake = FakeReservation(
        {n: healthy_sub_block(n) for n in names},
        blocks=(settings.tpu.reservation.block,),
        self_link_prefix="<selfLink of ",
    )
    changes = [f"tpu.subBlocks[{i}]={n}" for i, n in enumerate(result.proposal)]
    try:
        outcome = diff.change_preview(before, args.stack, set(secret_keys(args.dir, args.stack)), changes, fake)
    except diff.DiffError as err:
        result.preview = {"error": " ".join(str(err).split())}
        return
    result.preview = {
        "totals": {k: v for k, v in outcome.totals.items() if v and k != "same"},
        "changes": [c.as_dict() for c in outcome.changes if c.action != "same"],
        "rejected": bool(outcome.rejected),
    }


def preview_lines(result: health.Report) -> list[str]:
    p = result.preview
    if not p:
        return []
    if "error" in p:
        return [f"what the move does: the change preview could not run: {p['error']}"]
    lines = ["what the move does (the change preview of it):"]
    lines.append("  " + ", ".join(f"{n} {a}" for a, n in p["totals"].items()))
    for c in p["changes"]:
        flag = " (delete first)" if c["deleteFirst"] else ""
        lines.append(f"  {c['action']:9} {c['name']}  {c['type'].rsplit(':', 1)[-1]}{flag}")
        if c["reason"]:
            lines.append(f"  {'':9} why: {c['reason']}")
    for c in (c for c in result.cubes if c.move_to):
        restart = sorted({o for _, _, o in c.slices if o} | {w.name for w in c.workloads})
        runs = f"these workloads restart: {', '.join(restart)}" if restart else "no workload runs on it"
        gate = f"; its {len(c.slices)} Slice(s) must be gone before the pool is deleted (the teardown gate waits)"
        lines.append(f"  {c.pool} moves {c.sub_block} -> {c.move_to}: {runs}{gate if c.slices else ''}")
    if p["rejected"]:
        lines.append(
            "  the preview REJECTS this change as it stands: see the rejected lines above"
            + (f", and the next step ({result.next_action}) above" if result.next_action != health.MOVE else "")
        )
    return lines


_KEY_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>['\"]?gke-tpu-slicing:tpu['\"]?):\s*(#.*)?$")


def _without_sub_blocks(stack_file: dict[str, Any]) -> dict[str, Any]:
    config = dict(stack_file.get("config") or {})
    config[f"{PROJECT}:tpu"] = {k: v for k, v in (config.get(f"{PROJECT}:tpu") or {}).items() if k != "subBlocks"}
    return config


def write_sub_blocks(path: Path, value: Sequence[str]) -> None:
    """Sets `tpu.subBlocks` in the stack file, keeping every other line (and comment) as it is."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _KEY_LINE.match(line)), None)
    flow = f"[{', '.join(value)}]"
    if start is None:
        raise HealthError(f"{path}: no `gke-tpu-slicing:tpu:` map to put subBlocks in; set it by hand: {flow}")
    parent = len(_KEY_LINE.match(lines[start]).group("indent"))  # type: ignore[union-attr]
    end, child = len(lines), None
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(lines[j]) - len(lines[j].lstrip())
        if indent <= parent:
            end = j
            break
        child = indent if child is None else child
    pad = " " * (child if child is not None else parent + 2)
    new = [f"{pad}subBlocks: {flow}\n"]
    hit = next((j for j in range(start + 1, end) if re.match(rf"^{pad}subBlocks:", lines[j])), None)
    if hit is None:
        lines[start + 1 : start + 1] = new
    else:
        stop = hit + 1
        # The entry's own lines: deeper ones, and a block sequence's dashes at the key's indent (YAML allows both).
        while stop < end and (
            not lines[stop].strip()
            or len(lines[stop]) - len(lines[stop].lstrip()) > len(pad)
            or re.match(rf"^{pad}(-(\s|$)|#)", lines[stop])
        ):
            stop += 1
        tail = stop  # a comment at the key's indent after the entry belongs to the key below it: kept
        while tail > hit + 1 and (not lines[tail - 1].strip() or re.match(rf"^{pad}#", lines[tail - 1])):
            tail -= 1
        if any(re.match(rf"^{pad}#", line) for line in lines[tail:stop]):
            stop = tail
        lines[hit:stop] = new
    out = "".join(lines)
    try:
        before, after = yaml.safe_load(text), yaml.safe_load(out)
    except yaml.YAMLError:  # one line, never a traceback: the workflow reads exit 1 as "action needed"
        raise HealthError(f"{path}: could not set tpu.subBlocks in place; set it by hand: {flow}") from None
    if ((after.get("config") or {}).get(f"{PROJECT}:tpu") or {}).get("subBlocks") != list(value):
        raise HealthError(f"{path}: could not set tpu.subBlocks in place; set it by hand: {flow}")
    if _without_sub_blocks(after) != _without_sub_blocks(before):
        raise HealthError(f"{path}: setting tpu.subBlocks would change other keys; set it by hand: {flow}")
    path.write_text(out)


def main(
    argv: Sequence[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    run_preview: Callable[..., None] = preview,
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    parser = OneLineParser(
        prog="python -m components health",
        description="Check each TPU cube: its reservation sub-block, its nodes' partitions, its Slices and the "
        "workloads a slice failure evicted; print the tpu.subBlocks change that would move a cube off a bad "
        "sub-block, with the change preview of it. Reads only; moves nothing.",
    )
    add_stack_arguments(parser, stack_required=True)
    parser.add_argument("--reservation", type=Path, metavar="FILE", help="the reservation reads (plan's format)")
    parser.add_argument(
        "--cluster-state", type=Path, metavar="FILE", help='JSON {"nodes": [...], "slices": [...], "workloads": [...]}'
    )
    parser.add_argument(
        "--live", action="store_true", help="read what no file gives from the Compute and Kubernetes APIs"
    )
    add_kubeconfig_arguments(
        parser,
        lambda parser: parser.add_argument(
            "--gke",
            action="store_true",
            help="with --live: reach the stack's cluster as the program does (its DNS-based endpoint when "
            "cluster.controlPlane.dnsEndpoint, gke-gcloud-auth-plugin), without a kubeconfig",
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-preview", action="store_true", help="do not run the change preview of the proposal")
    parser.add_argument("--write", action="store_true", help="write the proposed tpu.subBlocks into the stack file")
    args = parse_args(parser, argv, "health")
    try:
        result, settings, config = report(args)
        if result.proposal is not None and not args.no_preview:
            run_preview(args, result, settings, config)
        if args.write and result.proposal is not None:
            write_sub_blocks(args.dir / f"Pulumi.{args.stack}.yaml", result.proposal)
    except HealthError as e:
        return fail(err, " ".join(str(e).split()))  # one line, however the message was wrapped
    if args.json:
        print(json.dumps(result.as_dict(), indent=2), file=out)
    else:
        print(f"stack {args.stack}: {result.source}", file=out)
        print(result.table(), file=out)
        details = result.details() + preview_lines(result)
        if details:
            print("", *details, sep="\n", file=out)
        print("", "action needed" if result.action_needed else "healthy: nothing to do", sep="\n", file=out)
    return 1 if result.action_needed else 0


if __name__ == "__main__":
    sys.exit(main())
