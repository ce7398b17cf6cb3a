"""Reads the TPU reservation's block and sub-blocks at preview, before any resource is registered.

Pulumi invokes of pulumi-gcp 10.2 (terraform-provider-google-beta's data sources, `services/compute/
data_source_google_compute_reservation{,_block,_sub_block}.go`): `get_reservation` (its block names),
`get_reservation_block` (its sub-block names), `get_reservation_sub_block` (status, health, hosts, VMs in
use, maintenance) and `container.get_cluster` (which sub-block each existing node pool is bound to).
`python -m components plan --reservation FILE` feeds the same result types from a file
(`FileSource`), so both paths share `assignment()`.

What the provider does on a miss, from its source: `get_reservation` of a missing reservation returns
no error and an empty result (its Read turns the API's 404 into "gone", then the data source sets the
id anyway), so a missing `self_link` is the "does not exist" signal; a missing block or sub-block is
an invoke error ("Error reading ReservationBlock: googleapi: Error 404 ..."); `get_cluster` of a
missing cluster fails with "projects/P/locations/L/clusters/N not found", and only that text means "no cluster".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pulumi_gcp as gcp
from pulumi.runtime import rpc

from components.model.config.settings import Settings
from components.model.tpu.reservation import Assignment, BlockView, SubBlock, assign, sub_block_of, unread
from components.model.tpu.reservation import config_key as _key
from components.project_services import AI_ZONES_FEATURE

# The result types through the packages (importing their modules by path would shadow the functions).
GetReservationResult = gcp.compute.GetReservationResult
GetReservationBlockResult = gcp.compute.GetReservationBlockResult
GetReservationSubBlockResult = gcp.compute.GetReservationSubBlockResult
GetClusterResult = gcp.container.GetClusterResult

# What the reads need: reservations.get (the reservation), reservationBlocks.list (its Read lists the
# blocks), reservationBlocks.get, reservationSubBlocks.list (the block's Read lists them) and .get
# (Compute API reference: reservationBlocks.get / .list "Authorization requires ... compute.reservationBlocks.*").
PERMISSIONS = (
    "compute.reservations.get",
    "compute.reservationBlocks.get",
    "compute.reservationBlocks.list",
    "compute.reservationSubBlocks.get",
    "compute.reservationSubBlocks.list",
)
OFFLINE_MARKERS = "no API (offline render: the sub-blocks are markers, taken as ready and free)"
TOKENS = {
    "reservation": "gcp:compute/getReservation:getReservation",
    "block": "gcp:compute/getReservationBlock:getReservationBlock",
    "subBlock": "gcp:compute/getReservationSubBlock:getReservationSubBlock",
    "cluster": "gcp:container/getCluster:getCluster",
}


# An AI zone's name: <region>-ai<n><letter> (us-central1-ai1a; https://cloud.google.com/compute/docs/regions-zones/ai-zones).
_AI_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-ai\d+[a-z]$")


def ai_zone_hint(settings: Settings) -> str:
    """What a fresh project runs once before the first preview when the zone is an AI zone ("" otherwise).

    The reads here run at preview, before `pulumi up` has enabled the `ai-zones-visibility` preview feature
    (components/project_services.py), and Google's documentation does not settle that they see an AI zone's reservation
    without it: "Manage access to AI zones" said "To use AI zones, you must turn them on for your Google Cloud
    project"; its later version ("Manage AI zone visibility") says visibility hides AI zones from listings and
    does not restrict API endpoints once the parent region is active
    (https://cloud.google.com/compute/docs/regions-zones/manage-ai-zones). So a failed or empty read names it.
    """
    if not _AI_ZONE.match(settings.zone):
        return ""
    return (
        f" {settings.zone} is an AI zone: on a project where AI zones were never turned on, turn them on once "
        f"before the first preview (gcloud compute preview-features update {AI_ZONES_FEATURE} "
        f"--activation-status=enabled --rollout-plan=fast-rollout --project={settings.reservation_project}); "
        "`pulumi up` keeps the feature enabled from then on."
    )


class ReservationError(Exception):
    """The reservation or its block cannot be read, or does not exist. Raised before any registration."""


def read_cluster(settings: Settings) -> Any | None:
    """The stack's GKE cluster as `gcp.container.get_cluster` reads it, None when it does not exist yet.

    None for the data source's own miss only (data_source_google_container_cluster.go: the resource Read turns
    the API's 404 into an empty id, then `fmt.Errorf("%s not found", id)` with id = containerClusterFullName(
    project, location, name)): this exact text, nothing looser, since reading a cluster that exists as "none"
    would put its running pools on other sub-blocks, i.e. replace them. Also None while the GKE API is not
    enabled yet (Google's SERVICE_DISABLED error names the service). Any other error (a 403, a bad location, a
    network failure) is raised.
    """
    missing = f"projects/{settings.project}/locations/{settings.region}/clusters/{settings.cluster.name} not found"
    try:
        return gcp.container.get_cluster(name=settings.cluster.name, location=settings.region, project=settings.project)
    except Exception as err:
        text = str(err)
        disabled = "container.googleapis.com" in text and ("SERVICE_DISABLED" in text or "has not been used" in text)
        if missing in text or disabled:
            return None
        raise


class Source(Protocol):
    description: str

    def reservation(self) -> Any: ...
    def block(self) -> Any: ...
    def sub_block(self, name: str) -> Any: ...
    def cluster(self) -> Any | None: ...


class LiveSource:
    """The Compute and GKE APIs, through the provider's data sources."""

    description = "the Compute API (at preview)"

    def __init__(self, settings: Settings) -> None:
        r = settings.tpu.reservation
        assert r.name is not None
        self.name, self.block_name = r.name, r.block
        self.project, self.zone = settings.reservation_project, settings.zone
        self.settings = settings

    def reservation(self) -> Any:
        return gcp.compute.get_reservation(name=self.name, project=self.project, zone=self.zone)

    def block(self) -> Any:
        return gcp.compute.get_reservation_block(
            name=self.block_name, reservation=self.name, project=self.project, zone=self.zone
        )

    def sub_block(self, name: str) -> Any:
        return gcp.compute.get_reservation_sub_block(
            name=name, reservation_block=self.block_name, reservation=self.name, project=self.project, zone=self.zone
        )

    def cluster(self) -> Any | None:
        return read_cluster(self.settings)


class FileSource:
    """Invoke results saved as JSON (the wire shape the provider returns), keyed by data source.

    `{"getReservation": {...}, "getReservationBlock": {...}, "getReservationSubBlock": [{...}, ...],
    "getCluster": {...} or null}`; camelCase fields, exactly as the provider answers the invokes.
    """

    def __init__(self, path: Path, block: str | None = None) -> None:
        self.description, self.asked_block = f"the file {path}", block
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ReservationError(f"cannot read reservation data from {path}: {err}") from None
        if not isinstance(data, dict):
            raise ReservationError(f"{path}: expected a JSON object with getReservation, getReservationBlock, ...")
        self.data = data

    def _typed(self, raw: Any, typ: type) -> Any:
        return rpc.translate_output_properties(raw, lambda prop: prop, typ)

    def reservation(self) -> Any:
        return self._typed(self.data.get("getReservation") or {}, GetReservationResult)

    def block(self) -> Any:
        raw = self.data.get("getReservationBlock")
        if not raw:
            raise ReservationError(f"{self.description} has no getReservationBlock")
        if self.asked_block and raw.get("name") and raw["name"] != self.asked_block:
            raise ReservationError(f"{self.description} holds block {raw['name']}, not {self.asked_block}")
        return self._typed(raw, GetReservationBlockResult)

    def sub_block(self, name: str) -> Any:
        for raw in self.data.get("getReservationSubBlock") or []:
            if raw.get("name") == name:
                return self._typed(raw, GetReservationSubBlockResult)
        raise ReservationError(f"{self.description} has no getReservationSubBlock entry named {name!r}")

    def cluster(self) -> Any | None:
        raw = self.data.get("getCluster")
        return self._typed(raw, GetClusterResult) if raw else None


def _first(items: Any) -> Any:
    return items[0] if items else None


def _int(value: Any) -> int:
    return int(value or 0)


def sub_block_state(result: Any) -> SubBlock:
    """A `GetReservationSubBlockResult` as the model's SubBlock."""
    health = _first(result.health_infos)
    maintenance = _first(result.reservation_sub_block_maintenances)
    topo = _first(result.physical_topologies)

    def count(kind: str) -> int:
        """Hosts, the sub-block's infrastructure and instances with `kind` (pending, ongoing) maintenance."""
        if maintenance is None:
            return 0
        return sum(
            _int(getattr(maintenance, f"{p}maintenance_{kind}_count")) for p in ("", "subblock_infra_", "instance_")
        )

    physical = "/".join(str(topo.get(k) or "?") for k in ("cluster", "block", "sub_block")) if topo else None
    return SubBlock(
        name=result.name,
        status=result.status or None,
        health=(health.health_status if health else None) or None,
        hosts=result.sub_block_count if result.sub_block_count is not None else None,
        in_use=_int(result.in_use_count),
        maintenance_pending=count("pending"),
        maintenance_ongoing=count("ongoing"),
        physical=physical,
    )


def bound_sub_blocks(cluster: Any | None, project: str, reservation: str, block: str) -> dict[str, str | None]:
    """Node pool name -> the sub-block of this block it is bound to (None: bound to something else)."""
    out: dict[str, str | None] = {}
    for pool in (cluster.node_pools if cluster is not None else None) or []:
        config = _first(pool.get("node_configs"))
        affinity = _first(config.get("reservation_affinities")) if config else None
        values = (affinity.get("values") if affinity else None) or []
        subs = [s for s in (sub_block_of(v, project, reservation, block) for v in values) if s is not None]
        if values:
            out[pool["name"]] = subs[0] if subs else None
    return out


def read_failed(what: str, where: str, err: Exception, zone_hint: str = "") -> ReservationError:
    text = str(err)
    hint = ""
    if "403" in text or "PERMISSION" in text.upper() or "forbidden" in text:
        hint = f" The account running Pulumi needs {', '.join(PERMISSIONS)} on the reservation's project."
    return ReservationError(f"could not read {what} of {where}: {text}.{hint}{zone_hint}")


def no_such_reservation(settings: Settings, source: Source) -> ReservationError:
    """The reservation's read answered that it does not exist (no self link: the module docstring)."""
    name, project, zone = settings.tpu.reservation.name, settings.reservation_project, settings.zone
    return ReservationError(
        f"{_key('tpu.reservation.name')} = {name!r}: no such reservation in project {project}, zone {zone} "
        f"({source.description} has none). Check the name, {_key('tpu.reservation.project')} and {_key('zone')}."
        + ai_zone_hint(settings)
    )


def not_read(settings: Settings, offline: bool = False) -> Assignment | None:
    """The mapping when there is nothing to read (no cubes, no specific block), or when reading is not
    possible (`offline`): every cube counts, bound to its `tpu.subBlocks` entry or to the block."""
    tpu = settings.tpu
    r = tpu.reservation
    pools = tpu.pool_names
    if tpu.cubes == 0:
        return unread(pools, "tpu.cubes = 0: no sub-block needed")
    if r.consume_type != "SPECIFIC":
        return unread(pools, f"tpu.reservation.consumeType = {r.consume_type}: no specific reservation to read")
    if not r.block:
        return unread(pools, "tpu.reservation.block is empty: the pools bind to the whole reservation")
    if offline:
        return unread(
            pools,
            f"reservation {r.name} block {r.block} not read (offline, no --reservation file): health, use and "
            "maintenance unknown; planned on the configuration alone, every cube counted",
            tpu.sub_blocks,
        )
    return None


def assignment(
    settings: Settings, source_for: Callable[[Settings], Source] = LiveSource, offline: bool = False
) -> Assignment:
    """The cube-to-sub-block mapping of a stack, read from `source_for(settings)`; raises ReservationError.

    `offline`: the offline commands' run (components/preflight.py offline_run), whose mocks answer markers."""
    tpu = settings.tpu
    r = tpu.reservation
    pools = tpu.pool_names
    skipped = not_read(settings)
    if skipped is not None:
        return skipped
    assert r.name is not None
    source = source_for(settings)
    project, zone = settings.reservation_project, settings.zone
    where = f"reservation {r.name} (project {project}, zone {zone})"
    try:
        res = source.reservation()
    except ReservationError:
        raise
    except Exception as err:
        raise read_failed("the reservation", where, err, ai_zone_hint(settings)) from None
    if not res.self_link:
        raise no_such_reservation(settings, source)
    blocks = list(res.block_names or [])
    if blocks and r.block not in blocks:
        raise ReservationError(
            f"{_key('tpu.reservation.block')} = {r.block!r}: not a block of {where}; its blocks: {', '.join(blocks)}"
        )
    try:
        blk = source.block()
    except ReservationError:
        raise
    except Exception as err:
        if "404" in str(err) or "not found" in str(err):
            raise ReservationError(
                f"{_key('tpu.reservation.block')} = {r.block!r}: no such block in {where}"
                + (f"; its blocks: {', '.join(blocks)}" if blocks else "")
                + ("." + ai_zone_hint(settings) if ai_zone_hint(settings) else "")
            ) from None
        raise read_failed(f"block {r.block}", where, err, ai_zone_hint(settings)) from None

    def read(name: str) -> SubBlock:
        try:
            return sub_block_state(source.sub_block(name))
        except ReservationError:
            raise
        except Exception as err:
            raise read_failed(f"sub-block {name} of block {r.block}", where, err) from None

    try:
        cluster = source.cluster()
    except Exception as err:
        raise ReservationError(
            f"could not read cluster {settings.cluster.name} (which sub-block each existing TPU pool is on): {err}"
        ) from None
    view = BlockView(
        reservation=r.name,
        project=project,
        zone=zone,
        block=r.block,
        names=tuple(sorted(blk.sub_block_names or [])),
        read=read,
        existing=bound_sub_blocks(cluster, project, r.name, r.block),
        source=OFFLINE_MARKERS if offline else source.description,
    )
    return assign(view, pools, tpu.cube.vms, tpu.sub_blocks)
