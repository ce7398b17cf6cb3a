"""The cluster's GKE version and release channel: resolved at preview from what GKE offers, floors as errors.

GKE's answer comes from the harness's SERVER_CONFIG through `engine_versions`, which applies the data
source's own filtering (cited there); the floors are GKE's documented ones, typed here from
https://cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing#requirements.
"""

from __future__ import annotations

import copy
import inspect
from functools import partial
from typing import Any

import pulumi
import pytest
from pulumi_gcp.container import GetEngineVersionsResult
from pydantic.alias_generators import to_camel

from components.cli import mockrun
from tests import graph_queries
from tests.fakes import SERVER_CONFIG, engine_versions
from tests.harness import CLUSTER, POOL, Mocks, Run, run_program, warnings_of
from tests.harness import rejected as any_rejected
from tests.stack_config import P, stack_file_config

INVOKE = "gcp:container/getEngineVersions:getEngineVersions"
SLICING_FLOOR = "1.35.2-gke.1842000"  # super-slicing (topologies of whole 4x4x4 cubes)
SUBSLICING_FLOOR = "1.36.0-gke.3712000"  # sub-slicing (topologies smaller than 4x4x4)
rejected = partial(any_rejected, prefix="invalid stack configuration (1 problem)")
NO_SUBSLICES = {"demos": {"subslicing": {"enabled": False}}, "serving": {"enabled": False}}


def at(version: str, mocks: Mocks | None = None, *, cluster: dict[str, Any] | None = None, **sections: Any) -> Run:
    """A run with `cluster.version` = `version`, other `cluster` keys and other `sections` of the configuration."""
    config = {f"{P}:cluster": {"version": version, **(cluster or {})}, **{f"{P}:{k}": v for k, v in sections.items()}}
    return run_program(config, mocks=mocks)


def failing(token: str, field: str, message: str) -> Mocks:
    """Mocks whose invoke `token` fails with `message`, as a provider's error reaches the program."""

    class Failing(Mocks):
        def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
            return ({}, [(field, message)]) if args.token == token else super().call(args)

    return Failing()


def version_of(run: Run) -> str:
    assert run.error is None, run.error
    return run.get(CLUSTER, "cluster-gke").inputs["minMasterVersion"]


def later_day(**rapid: Any) -> dict[str, Any]:
    """SERVER_CONFIG with the RAPID channel's answer replaced: GKE on another day."""
    server = copy.deepcopy(SERVER_CONFIG)
    server["channels"]["RAPID"].update(rapid)
    server["validMasterVersions"] = sorted(
        set(server["validMasterVersions"]) | set(server["channels"]["RAPID"]["validVersions"]), reverse=True
    )
    return server


# ------------------------------------------------------------------------------------------------
# The mocks answer exactly what the pinned SDK's result type holds


def test_the_mocks_answer_in_the_sdk_result_types_shape() -> None:
    fields = [p for p in inspect.signature(GetEngineVersionsResult.__init__).parameters if p != "__self__"]
    args = pulumi.runtime.MockCallArgs(
        INVOKE, {"location": "us-central1", "project": "p", "versionPrefix": "1.36."}, ""
    )
    result = engine_versions(SERVER_CONFIG, args.args)
    assert set(result) == {to_camel(f) for f in fields}
    # ...and the SDK accepts it (its constructor type-checks every field).
    GetEngineVersionsResult(**{f: result[to_camel(f)] for f in fields})


def test_the_harness_answers_like_the_data_source() -> None:
    # First match of each channel's list for the prefix; defaults unfiltered (the data source's loop).
    answer = engine_versions(SERVER_CONFIG, {"versionPrefix": "1.35."})
    assert answer["releaseChannelLatestVersion"] == {"RAPID": "1.35.3-gke.1100000", "REGULAR": "1.35.3-gke.1100000"}
    assert answer["releaseChannelDefaultVersion"]["RAPID"] == "1.36.1-gke.2000000"
    assert answer["validMasterVersions"] == ["1.35.3-gke.1100000", "1.35.2-gke.1842000"]
    assert engine_versions(SERVER_CONFIG, {"versionPrefix": "1.37."})["releaseChannelLatestVersion"] == {}


# ------------------------------------------------------------------------------------------------
# Resolution


def test_a_prefix_resolves_to_the_newest_version_the_channel_offers_for_the_region() -> None:
    mocks = Mocks()
    assert version_of(at("1.36", mocks)) == "1.36.2-gke.1500000"
    (call,) = [c for c in mocks.calls if c.token == INVOKE]
    # The region of the regional cluster, the stack's project, and "1.36." (a bare "1.3" would match 1.30).
    assert call.args == {"location": "us-central1", "project": "my-tpu-project", "versionPrefix": "1.36."}


@pytest.mark.parametrize(
    ("version", "sections", "resolved"),
    [
        ("1.36.1", {}, "1.36.1-gke.2000000"),
        ("default", {}, SERVER_CONFIG["channels"]["RAPID"]["defaultVersion"]),
        ("1.36.0-gke.3712000", {}, "1.36.0-gke.3712000"),  # an exact version the channel offers: as given
        # Offered on RAPID and above the slicing floor, below the sub-slicing one: fine without sub-slices.
        ("1.35.3-gke.1100000", NO_SUBSLICES, "1.35.3-gke.1100000"),
    ],
)
def test_a_version_the_channel_offers_is_resolved(version: str, sections: dict[str, Any], resolved: str) -> None:
    assert version_of(at(version, **sections)) == resolved


OLD_DAY = later_day(defaultVersion="1.35.3-gke.1100000", validVersions=["1.36.0-gke.2459000", "1.35.3-gke.1100000"])
FORMS = ["'default'", "prefix such as 1.36", "1.36.0-gke.3712000"]


@pytest.mark.parametrize(
    ("version", "sections", "server", "fragments"),
    [
        # Above every floor, but (no longer) on the RAPID channel's list.
        (
            "1.36.0-gke.4000000",
            {},
            SERVER_CONFIG,
            [
                "RAPID channel offers in us-central1",
                "the newest 1.36 on RAPID: 1.36.2-gke.1500000",
                "RAPID's default: 1.36.1-gke.2000000",
            ],
        ),
        # A valid master version of the location, but no RAPID one any more.
        (SLICING_FLOOR, NO_SUBSLICES, SERVER_CONFIG, ["is not offered"]),
        # Offered, above the slicing floor, below the sub-slicing one: the error names who needs the floor.
        (
            "1.35.3-gke.1100000",
            {},
            SERVER_CONFIG,
            [SUBSLICING_FLOOR, "use-gke-dynamic-slicing", "demos.subslicing", "serving.prefill"],
        ),
        ("1.36", {}, OLD_DAY, ["resolves to 1.36.0-gke.2459000", f"older than {SUBSLICING_FLOOR}"]),
        ("default", {}, OLD_DAY, ["resolves to 1.35.3-gke.1100000"]),
        ("1.37", {}, SERVER_CONFIG, ["a prefix of a version the RAPID channel offers", "RAPID's default"]),
        *((version, {}, SERVER_CONFIG, FORMS) for version in ["latest", "1.36.x", "v1.36", "1", "1.36.0-gke", ""]),
    ],
)
def test_a_version_the_channel_does_not_offer_or_below_a_floor_is_refused(
    version: str, sections: dict[str, Any], server: dict[str, Any], fragments: list[str]
) -> None:
    rejected(at(version, Mocks(server_config=server), **sections), f"{P}:cluster.version = {version!r}", *fragments)


def test_a_later_answer_changes_only_the_clusters_min_master_version() -> None:
    """GKE offers a newer patch another day: nothing but `min_master_version` moves (an in-place update
    that never downgrades, components/cluster.py), no pool carries a version that could replace it."""
    today = run_program()
    later = run_program(mocks=Mocks(server_config=later_day(validVersions=["1.36.3-gke.100000", "1.36.2-gke.1500000"])))
    assert (version_of(today), version_of(later)) == ("1.36.2-gke.1500000", "1.36.3-gke.100000")
    before, after = graph_queries.inputs_of(today), graph_queries.inputs_of(later)
    assert before.keys() == after.keys()
    assert {key for key in before if before[key] != after[key]} == {(CLUSTER, "cluster-gke")}
    cluster_before, cluster_after = before[(CLUSTER, "cluster-gke")], after[(CLUSTER, "cluster-gke")]
    assert {
        k for k in cluster_before.keys() | cluster_after.keys() if cluster_before.get(k) != cluster_after.get(k)
    } == {"minMasterVersion"}
    # Node versions are never set: pools take the control plane's version at creation (Optional+Computed).
    assert all("version" not in p.inputs for p in today.of_type(POOL))
    assert "nodeVersion" not in today.get(CLUSTER, "cluster-gke").inputs


# ------------------------------------------------------------------------------------------------
# GKE's floors, as errors naming the key


@pytest.mark.parametrize(
    ("version", "floor", "overrides"),
    [
        ("1.35", SUBSLICING_FLOOR, {}),  # no 1.35 can reach the sub-slicing floor
        ("1.34", SLICING_FLOOR, NO_SUBSLICES),
        ("1.35.1", SLICING_FLOOR, NO_SUBSLICES),
        ("1.35.1-gke.1000000", SLICING_FLOOR, NO_SUBSLICES),
    ],
)
def test_a_version_that_can_never_reach_the_floor_is_refused_before_gke_is_asked(
    version: str, floor: str, overrides: dict[str, Any]
) -> None:
    mocks = Mocks()
    rejected(at(version, mocks, **overrides), f"gke-tpu-slicing:cluster.version = '{version}'", floor)
    assert [c for c in mocks.calls if c.token == INVOKE] == []


def test_a_failing_invoke_stops_with_what_to_do() -> None:
    no_api = failing(INVOKE, "location", "googleapi: Error 403: Kubernetes Engine API has not been used")
    any_rejected(
        run_program(mocks=no_api),
        "could not read the GKE versions offered in us-central1",
        "cluster.version = '1.36'",
        "container.googleapis.com",
    )


# ------------------------------------------------------------------------------------------------
# Offline commands cannot read the list: they say so


def _offline(version: str) -> mockrun.MockRun:
    config = stack_file_config("dev")
    config[f"{P}:cluster"] = {**config[f"{P}:cluster"], "version": version}
    return mockrun.execute(config, stack="dev")


def test_offline_an_exact_version_is_shown_as_given_and_a_prefix_as_a_marker_with_a_warning() -> None:
    exact = _offline("1.36.0-gke.3712000")
    assert exact.error is None, exact.error
    cluster = next(r for r in exact.registrations if r.type == CLUSTER)
    assert cluster.inputs["minMasterVersion"] == "1.36.0-gke.3712000"
    assert any("not read" in m and "not checked" in m for lvl, m in exact.logs if lvl == "warn")
    prefix = _offline("1.36")
    cluster = next(r for r in prefix.registrations if r.type == CLUSTER)
    assert cluster.inputs["minMasterVersion"] == "<the newest 1.36 on RAPID, read at preview>"
    assert any("cluster.version = '1.36'" in m and "not read" in m for lvl, m in prefix.logs if lvl == "warn")
    # The floors that need no list still apply offline.
    low = _offline("1.35.3-gke.1100000")
    assert low.error is not None and SUBSLICING_FLOOR in str(low.error)


# ------------------------------------------------------------------------------------------------
# The release channel


@pytest.mark.parametrize("channel", ["REGULAR", "STABLE", "EXTENDED"])
def test_only_the_rapid_channel_is_accepted_with_the_slice_controller(channel: str) -> None:
    run = run_program({f"{P}:cluster": {"releaseChannel": channel}})
    rejected(run, f"gke-tpu-slicing:cluster.releaseChannel = '{channel}'", "RAPID", "slice controller", "#requirements")


def test_every_problem_of_the_cluster_is_reported_together() -> None:
    run = run_program({f"{P}:cluster": {"releaseChannel": "STABLE", "version": "v1"}})
    any_rejected(run, "cluster.releaseChannel", "cluster.version", prefix="invalid stack configuration (2 problems)")


# ------------------------------------------------------------------------------------------------
# A maintenance exclusion the version undoes: the provider requests an upgrade to min_master_version whenever
# the control plane runs an older one (resource_container_cluster.go lines 4918-4935, release-8.0.0
# @93c65b2d60), and exclusions hold automatic upgrades only (GKE, maintenance-windows-and-exclusions).

FREEZE = {"name": "freeze", "start": "2026-12-01T00:00:00Z", "end": "2026-12-20T00:00:00Z", "scope": "NO_UPGRADES"}
NO_MINOR = {"name": "no-minor", "start": "2026-12-01T00:00:00Z", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}


def exclusion_warnings(run: Run) -> list[str]:
    assert run.error is None, run.error
    return [m for level, m in run.logs if level == "warn" and "cluster.maintenanceExclusion scope" in m]


@pytest.mark.parametrize(
    ("version", "exclusion", "expected"),
    [
        ("1.36", FREEZE, "a newer patch"),
        ("default", FREEZE, "a newer patch or minor version"),
        ("default", {**NO_MINOR, "scope": "NO_MINOR_UPGRADES"}, "a new minor version"),
    ],
)
def test_a_version_that_would_upgrade_during_the_exclusion_is_warned(
    version: str, exclusion: dict[str, Any], expected: str
) -> None:
    run = at(version, cluster={"maintenanceExclusion": exclusion})
    (warning,) = exclusion_warnings(run)
    assert f"cluster.version = '{version}'" in warning and exclusion["scope"] in warning
    assert expected in warning and f"now {version_of(run)}" in warning


@pytest.mark.parametrize(
    ("version", "exclusion"),
    [
        ("1.36.0-gke.3712000", FREEZE),  # exact: nothing moves
        ("1.36", {**NO_MINOR, "scope": "NO_MINOR_OR_NODE_UPGRADES"}),  # prod's: patches are allowed anyway
        ("1.36", None),
    ],
)
def test_a_version_the_exclusion_allows_is_not_warned(version: str, exclusion: dict[str, Any] | None) -> None:
    run = at(version, cluster={"maintenanceExclusion": exclusion})
    assert exclusion_warnings(run) == []


def test_prod_is_not_warned() -> None:
    assert exclusion_warnings(run_program(stack="prod")) == []


def running_cluster(server: dict[str, Any], master_version: str) -> Mocks:
    """GKE's answer `server`, and a cluster of the stack that runs `master_version` (getCluster's live read)."""
    mocks = Mocks(server_config=server)
    mocks.reservation.cluster_pools = []  # the cluster exists (no TPU pool read back is needed here)
    mocks.reservation.master_version = master_version
    return mocks


def test_a_version_the_channel_dropped_under_a_running_cluster_sends_the_running_version() -> None:
    """Rapid moved past `cluster.version` while the cluster runs: GKE has upgraded it itself, so the update
    goes on with the version it runs as the minimum, a full GKE version. Never the spec as given: the
    provider's version library (hashicorp/go-version, resource_container_cluster.go lines 4918-4935) ranks
    1.36.0-gke.N, a pre-release, below a bare 1.36.0, so `1.36.0` would read as newer than what runs and be
    requested (GKE: 400 "No valid versions with the prefix"). Only a fresh stack is refused."""
    moved_on = later_day(validVersions=["1.37.1-gke.100000", "1.37.0-gke.200000"], defaultVersion="1.37.0-gke.200000")
    fresh = at("1.36", Mocks(server_config=moved_on))
    rejected(fresh, "gke-tpu-slicing:cluster.version = '1.36'", "a prefix of a version the RAPID channel offers")
    running = running_cluster(moved_on, "1.37.0-gke.200000")
    for spec in ("1.36", "1.36.2", "1.36.2-gke.1500000"):
        run = at(spec, running)
        assert version_of(run) == "1.37.0-gke.200000", spec
        (warning,) = [m for level, m in run.logs if level == "warn" and f"cluster.version = '{spec}'" in m]
        assert "running cluster is not affected" in warning and "rebuild or a new environment" in warning
    # A floor is never waived: the workloads need it whatever runs.
    low = at("1.35", running)
    assert low.error is not None and "1.36.0-gke.3712000" in str(low.error)


def test_a_cluster_gke_upgraded_past_the_resolved_version_is_never_asked_to_go_back() -> None:
    """Rapid moved dev to 1.37 while `cluster.version` = 1.36 still resolves (a newer 1.36 patch): the state's
    `master_version` is the one of the last `up` (`pulumi up` does not refresh; the provider compares with it,
    resource_container_cluster.go lines 4918-4935, and reads the live one only afterwards, line 3752), so
    sending the 1.36 patch would request a downgrade GKE refuses. The running version is sent instead; the
    second run sends the same, so nothing changes; below the running version the resolved one is sent."""
    newer_patch = later_day(validVersions=["1.37.0-gke.200000", "1.36.3-gke.100000", "1.36.2-gke.1500000"])
    upgraded = running_cluster(newer_patch, "1.37.0-gke.200000")
    run = at("1.36", upgraded)
    assert version_of(run) == "1.37.0-gke.200000"
    assert any("already runs 1.37.0-gke.200000" in m for level, m in run.logs if level == "info")
    again = at("1.36", upgraded)
    assert version_of(again) == version_of(run)
    # An older control plane: the resolved patch is the minimum (a requested upgrade, as before).
    behind = running_cluster(newer_patch, "1.36.2-gke.1500000")
    assert version_of(at("1.36", behind)) == "1.36.3-gke.100000"
    # A fresh stack (no cluster yet): the resolved version.
    assert version_of(at("1.36", Mocks(server_config=newer_patch))) == ("1.36.3-gke.100000")


def test_the_cluster_read_failing_stops_with_what_was_read() -> None:
    denied = "googleapi: Error 403: Permission denied on container.clusters.get"
    refused = failing("gcp:container/getCluster:getCluster", "name", denied)
    # No specific reservation to read: the version is the first to read the cluster.
    any_rejected(at("1.36", refused, tpu={"reservation": {"block": ""}}), "could not read cluster", "403")


def test_a_minor_exclusion_past_the_default_versions_end_of_support_warns_once_resolved() -> None:
    # 'default' names no minor until GKE answers: the preview checks the exclusion's end against what it resolves to
    # (1.35 on OLD_DAY, whose standard support ends 2027-04-11: gke_versions.END_OF_STANDARD_SUPPORT).
    exclusion = {"start": "2026-12-01T00:00:00Z", "end": "2027-05-01T00:00:00Z", "scope": "NO_MINOR_UPGRADES"}
    run = at("default", Mocks(server_config=OLD_DAY), cluster={"maintenanceExclusion": exclusion}, **NO_SUBSLICES)
    assert version_of(run) == "1.35.3-gke.1100000"
    (warning,) = [w for w in warnings_of(run) if "maintenanceExclusion.end" in w]
    assert "support of 1.35 on 2027-04-11" in warning and "UNTIL_END_OF_SUPPORT" in warning
    # On the harness's usual day 'default' is a 1.36, whose end of support the program does not know: no warning.
    usual = at("default", cluster={"maintenanceExclusion": exclusion}, **NO_SUBSLICES)
    assert not [w for w in warnings_of(usual) if "maintenanceExclusion.end" in w]
