"""The GKE cluster (components/cluster.py): its flags, the default pool it drops for the system pool, and its
maintenance window and exclusions. Its control plane's exposure and the Kubernetes provider: test_cluster_control_plane.

Provider facts (what updates in place, what replaces) are cited next to the code; here the recorded graph shows
the program sends what those facts need."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from components.model.config.capacity_checks import REGIONAL_ZONES
from components.model.config.checks import gke_version_tuple, machine_shape
from components.model.config.settings import ConfigError, load
from components.model.diff import engine
from tests.harness import CLUSTER, POOL, Run, assert_rejected, ok, preview, run_program
from tests.stack_config import CLOCK, SMALLEST, P, dev_settings, merge

# GKE's documented floor for sub-slices (cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing).
SUBSLICING_FLOOR = "1.36.0-gke.3712000"
LASTING = {"name": "no-minor", "start": "2026-12-01T00:00:00Z", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}


def _exclusion(exclusion: dict[str, Any]) -> dict[str, Any]:
    return {f"{P}:cluster": {"maintenanceExclusion": exclusion}}


MAINTENANCE_BAD = [
    (
        "a past maintenance exclusion",
        _exclusion({"start": "2026-05-18T00:00:00Z", "end": "2026-08-15T00:00:00Z"}),
        ["gke-tpu-slicing:cluster.maintenanceExclusion.end", "2026-08-15T00:00:00Z", "in the future"],
    ),
    # Exclusions GKE would not take.
    (
        "end of support with no upgrades",
        _exclusion({**LASTING, "scope": "NO_UPGRADES"}),
        ["maintenanceExclusion.endTimeBehavior", "NO_MINOR_UPGRADES"],
    ),
    (
        "end of support with an end",
        _exclusion({**LASTING, "scope": "NO_MINOR_UPGRADES", "end": "2027-01-01T00:00:00Z"}),
        ["maintenanceExclusion.end = '2027-01-01T00:00:00Z'", "unset when endTimeBehavior"],
    ),
    (
        "no end",
        _exclusion({"start": "2026-12-01T00:00:00Z"}),
        ["maintenanceExclusion.end is not set", "UNTIL_END_OF_SUPPORT"],
    ),
    # GKE's limit (maintenance-windows-and-exclusions, Limitations): a "No upgrades" exclusion lasts 30 days at most.
    (
        "no upgrades for 30 days and a second",
        _exclusion({"start": "2026-12-01T00:00:00Z", "end": "2026-12-31T00:00:01Z"}),
        [
            "maintenanceExclusion.end = '2026-12-31T00:00:01Z'",
            "at most 30 days after start",
            "maintenance-windows-and-exclusions#limitations",
            "endTimeBehavior: UNTIL_END_OF_SUPPORT",
        ],
    ),
]


def test_cluster_flags(dev: Run) -> None:
    c = dev.get(CLUSTER, "cluster-gke").inputs
    assert c["name"] == "qwen-serving-cluster"
    assert c["location"] == "us-central1"  # regional: the zone minus its suffix
    assert c["releaseChannel"] == {"channel": "RAPID"}
    # `cluster.version` defaults to the prefix 1.36: the newest 1.36 the Rapid channel offers (the harness's
    # SERVER_CONFIG lists 1.36.2-gke.1500000 first), not a pinned patch that goes stale.
    assert c["minMasterVersion"] == "1.36.2-gke.1500000"
    assert gke_version_tuple(c["minMasterVersion"]) >= gke_version_tuple(SUBSLICING_FLOOR)
    assert c["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
    assert c["datapathProvider"] == "ADVANCED_DATAPATH"
    assert c["monitoringConfig"]["managedPrometheus"] == {"enabled": True}
    assert c["monitoringConfig"]["advancedDatapathObservabilityConfig"]["enableMetrics"] is True
    assert c["workloadIdentityConfig"] == {"workloadPool": "my-tpu-project.svc.id.goog"}
    assert c["networkingMode"] == "VPC_NATIVE"
    assert c["addonsConfig"] == {
        "httpLoadBalancing": {"disabled": False},
        "gcpFilestoreCsiDriverConfig": {"enabled": True},
        "gcsFuseCsiDriverConfig": {"enabled": True},
        "horizontalPodAutoscaling": {"disabled": False},
        "dnsCacheConfig": {"enabled": True},
        "sliceControllerConfig": {"enabled": True},
    }
    # Pulumi.dev.yaml sets no exclusion (a fixed window expires) and turns deletion protection off.
    assert "maintenancePolicy" not in c
    assert c["deletionProtection"] is False
    # Times as GKE reads them back (protobuf Timestamps: UTC, 0, 3 or 6 fractional digits), or every up would
    # update the policy.
    window = {"start": "2026-12-01T02:00:00.5+02:00", "end": "2026-12-28T19:00:00.000001-05:00"}
    with_window = ok({f"{P}:cluster": {"maintenanceExclusion": window}})
    assert with_window.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"] == {
        "dailyMaintenanceWindow": {"startTime": "03:00"},
        "maintenanceExclusions": [
            {
                "exclusionName": "no-upgrade-next-month",
                "startTime": "2026-12-01T00:00:00.500Z",
                "endTime": "2026-12-29T00:00:00.000001Z",
                "exclusionOptions": {"scope": "NO_UPGRADES"},
            }
        ],
    }
    net = dev.get("gcp:compute/network:Network", "network-main")
    sub = dev.get("gcp:compute/subnetwork:Subnetwork", "network-tpu")
    assert net.urn in dev.get(CLUSTER, "cluster-gke").property_dependencies["network"]
    assert sub.urn in dev.get(CLUSTER, "cluster-gke").property_dependencies["subnetwork"]


def test_cluster_ignores_what_only_shapes_the_default_pool_and_the_system_pool_replaces_it(dev: Run) -> None:
    cluster = dev.get(CLUSTER, "cluster-gke")
    # node_config is ForceNew and GKE stops returning it once the default pool is removed: only its identity
    # (the dedicated node account, tests/test_diff_gcp.py), ignored after creation.
    assert set(cluster.inputs["nodeConfig"]) == {"serviceAccount", "oauthScopes"}
    assert cluster.inputs["removeDefaultNodePool"] is True
    assert cluster.inputs["initialNodeCount"] == 1  # the provider requires it with remove_default_node_pool
    assert cluster.options["ignoreChanges"] == ["initialNodeCount", "nodeConfig"]
    # The system pool is the reference's default pool; its machine type lives on it only.
    pool = dev.get(POOL, "cluster-system").inputs
    assert pool["nodeCount"] == 1
    assert pool["nodeConfig"]["machineType"] == "n2-standard-8"
    assert pool["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert "n2-standard-8" not in json.dumps(cluster.inputs)


def test_the_system_machine_type_updates_the_pool_in_place(dev: Run) -> None:
    bigger = run_program({f"{P}:cluster": {"systemMachineType": "n2-standard-48"}})
    # The model: node_config.machine_type is not ForceNew on google_container_node_pool, nothing else changes.
    (pool,) = [c for c in preview(dev, bigger).changes if c.action != engine.SAME]
    assert (pool.name, pool.action, pool.properties) == ("cluster-system", engine.UPDATE, ["nodeConfig.machineType"])


@pytest.mark.parametrize("year", [2020, 2026, 2031, 2099])
def test_the_defaults_are_valid_on_any_day(year: int) -> None:
    now = datetime(year, 6, 1, tzinfo=UTC)
    # Keys with no default: the bucket, who hears of alerts, who may reach the control plane.
    access = {"controlPlane": {"authorizedNetworks": [{"cidrBlock": "198.51.100.0/24"}]}}

    def settings(**cluster: Any) -> Any:
        required = {"serving": {"weightsBucket": "my-weights"}, "observability": {"notifyNobody": True}}
        config = {"tpu": {"reservation": {"name": "r"}}, "cluster": {**access, **cluster}, **required}
        return load(config, "my-tpu-project", now=now)

    assert settings().cluster.maintenance_exclusion is None
    # ...while an explicit window is judged against that day.
    with pytest.raises(ConfigError, match=r"maintenanceExclusion\.end"):
        settings(maintenanceExclusion={"start": f"{year}-05-01T00:00:00Z", "end": f"{year}-05-20T00:00:00Z"})
    # An end-of-support exclusion has no end date for any day to pass.
    settings(maintenanceExclusion={**LASTING, "scope": "NO_MINOR_UPGRADES"})


def test_a_daily_maintenance_start_without_an_exclusion_is_applied() -> None:
    """`cluster.dailyMaintenanceStart` alone is a window of its own (the provider's maintenance_policy takes
    exactly one of daily_maintenance_window and recurring_window, exclusions optional: resource_container_
    cluster.go lines 1297-1309; updated in place by SetMaintenancePolicy, lines 4991-5016). A stack that sets
    neither key sends no policy, as before (no change to a running cluster)."""
    run = ok({f"{P}:cluster": {"dailyMaintenanceStart": "22:30"}})
    assert run.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"] == {
        "dailyMaintenanceWindow": {"startTime": "22:30"}
    }
    assert "maintenancePolicy" not in run_program().get(CLUSTER, "cluster-gke").inputs
    # Beside an exclusion the window is the one given, or 03:00 when none is.
    exclusion = {**LASTING, "scope": "NO_MINOR_UPGRADES"}
    both = run_program({f"{P}:cluster": {"dailyMaintenanceStart": "22:30", "maintenanceExclusion": exclusion}})
    policy = both.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"]
    assert policy["dailyMaintenanceWindow"] == {"startTime": "22:30"} and len(policy["maintenanceExclusions"]) == 1


def test_an_end_of_support_exclusion_sends_no_end_time() -> None:
    run = ok({f"{P}:cluster": {"maintenanceExclusion": {**LASTING, "scope": "NO_MINOR_OR_NODE_UPGRADES"}}})
    # The provider drops end_time with a behaviour and reads none back: sending one would diff every run.
    assert run.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"]["maintenanceExclusions"] == [
        {
            "exclusionName": "no-minor",
            "startTime": "2026-12-01T00:00:00Z",
            "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"},
        }
    ]


@pytest.mark.parametrize(("case", "overrides", "expected"), MAINTENANCE_BAD, ids=[c[0] for c in MAINTENANCE_BAD])
def test_cluster_settings_that_cannot_work_are_refused_by_name(
    case: str, overrides: dict[str, Any], expected: list[str]
) -> None:
    assert_rejected(overrides, expected, prefix="invalid stack configuration (1 problem)")


def test_a_no_upgrades_exclusion_of_exactly_30_days_is_taken() -> None:
    thirty = {"start": "2026-12-01T00:00:00Z", "end": "2026-12-31T00:00:00Z"}
    run = ok(_exclusion(thirty))
    (exclusion,) = run.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"]["maintenanceExclusions"]
    assert exclusion["endTime"] == "2026-12-31T00:00:00Z"
    # The other scopes are bounded by the minor version's end of support instead, not by 30 days.
    ok(_exclusion({**thirty, "end": "2027-03-01T00:00:00Z", "scope": "NO_MINOR_OR_NODE_UPGRADES"}))


def test_a_minor_exclusion_ending_past_the_versions_end_of_support_warns_where_the_date_is_known() -> None:
    # GKE ends 1.35's standard support on 2027-04-11 (gke_versions.END_OF_STANDARD_SUPPORT, with its source);
    # 1.35 is below the sub-slicing floor, so with super-slices only.
    exclusion = {"start": "2026-12-01T00:00:00Z", "end": "2027-05-01T00:00:00Z", "scope": "NO_MINOR_UPGRADES"}
    only_superslices = {"demos": {"subslicing": {"enabled": False}}, "serving": {"enabled": False}}

    def warnings(version: str, end: str) -> list[str]:
        cluster = {"version": version, "maintenanceExclusion": {**exclusion, "end": end}}
        raw = merge(SMALLEST, {**only_superslices, "cluster": cluster})
        return [w for w in load(raw, "my-tpu-project", now=CLOCK).warnings() if "maintenanceExclusion.end" in w]

    (warning,) = warnings("1.35", "2027-05-01T00:00:00Z")
    assert "2027-05-01T00:00:00Z" in warning and "1.35" in warning and "2027-04-11" in warning
    assert "endTimeBehavior: UNTIL_END_OF_SUPPORT" in warning
    (exact,) = warnings("1.35.2-gke.1842000", "2027-05-01T00:00:00Z")
    assert exact == warning
    # Before that day, or on a minor whose end of support the program does not know (1.36), nothing is said.
    assert warnings("1.35", "2027-04-10T00:00:00Z") == warnings("1.36", "2027-05-01T00:00:00Z") == []


# What dev's system pool may take of a new project's regional N2 quota (docs/quotas.md, "Quotas"): Google publishes no
# fixed default (quotas differ per project and grow with use); dev asks for 24 and the page says what to request.
NEW_PROJECT_REGION_VCPUS = 24


def test_devs_system_pool_fits_a_new_projects_quota_and_every_controller_replica() -> None:
    settings = dev_settings({"addons": {"keda": {"enabled": True}}})  # KEDA on too, as elastic serving turns it on
    vcpus, _ = machine_shape(settings.cluster.system_machine_type)
    assert vcpus * settings.cluster.system_node_count * REGIONAL_ZONES <= NEW_PROJECT_REGION_VCPUS
    # Every controller at its default replicas (the charts', KEDA's, the slice controller's) fits with one zone down.
    cpu, memory, room_cpu, room_memory = settings.system_pool_room()
    assert cpu <= room_cpu and memory <= room_memory, (cpu, room_cpu, memory, room_memory)
