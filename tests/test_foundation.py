"""SPEC sections 0-5 on the real program and the real Pulumi.dev.yaml, property by property.

Expected values are the SPEC's (the codelab's gcloud flags), typed here from SPEC.md, not read
back from the code under test.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.harness import (
    ROOT,
    UNKNOWN,
    Mocks,
    Run,
    assert_rejected,
    is_secret,
    is_unknown,
    ok,
    run_program,
    warnings_of,
)

P = "gke-tpu-slicing"
CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"


def test_apis_and_ai_zones_preview_feature(dev: Run) -> None:
    services = sorted(r.inputs["service"] for r in dev.of_type("gcp:projects/service:Service"))
    assert services == sorted(
        f"{api}.googleapis.com"
        # monitoring: the observability section's dashboard and alert policies (on in the dev stack);
        # storage: serving's XLA cache bucket
        for api in (
            "container",
            "compute",
            "iam",
            "cloudresourcemanager",
            "file",
            "networkservices",
            "monitoring",
            "storage",
        )
    )
    assert all(r.inputs["disableOnDestroy"] is False for r in dev.of_type("gcp:projects/service:Service"))
    feature = dev.get("gcp:compute/previewFeature:PreviewFeature", "project-ai-zones-visibility")
    assert feature.inputs["name"] == "ai-zones-visibility"
    assert feature.inputs["activationStatus"] == "ENABLED"
    assert feature.inputs["rolloutOperation"] == {
        "rolloutInput": {"predefinedRolloutPlan": "ROLLOUT_PLAN_FAST_ROLLOUT"}
    }


def test_network(dev: Run) -> None:
    net = dev.get("gcp:compute/network:Network", "network-main")
    assert net.inputs["name"] == "qwen-serving-main"
    assert net.inputs["mtu"] == 8896
    assert net.inputs["routingMode"] == "REGIONAL"
    assert net.inputs["autoCreateSubnetworks"] is False

    tpu = dev.get("gcp:compute/subnetwork:Subnetwork", "network-tpu")
    assert (tpu.inputs["name"], tpu.inputs["region"], tpu.inputs["ipCidrRange"]) == (
        "qwen-serving-tpu",
        "us-central1",
        "10.10.0.0/18",
    )
    assert tpu.inputs["privateIpGoogleAccess"] is True
    assert "purpose" not in tpu.inputs

    proxy = dev.get("gcp:compute/subnetwork:Subnetwork", "network-proxy")
    assert proxy.inputs["name"] == "qwen-serving-proxy"
    assert proxy.inputs["ipCidrRange"] == "172.16.0.0/26"
    assert (proxy.inputs["purpose"], proxy.inputs["role"]) == ("REGIONAL_MANAGED_PROXY", "ACTIVE")

    fw = dev.get("gcp:compute/firewall:Firewall", "network-allow-internal")
    assert fw.inputs["name"] == "qwen-serving-allow-internal"
    # Not the codelab's every protocol from 10.0.0.0/8 and 172.16.0.0/12: the VPC's own ranges (the TPU
    # subnet, the pods' range GKE allocated, the proxy-only subnet) and the protocols the cluster uses.
    assert fw.inputs["allows"] == [{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}]
    assert fw.inputs["sourceRanges"] == ["10.10.0.0/18", "10.4.0.0/14", "172.16.0.0/26"]
    cluster = dev.get(CLUSTER, "cluster-gke")
    assert cluster.urn in fw.property_dependencies["sourceRanges"], "the pods' range is the cluster's output"
    # Both subnets and the firewall hang off the VPC by reference, not by name.
    for child in (tpu, proxy, fw):
        assert net.urn in child.property_dependencies["network"]


def test_cluster_flags(dev: Run) -> None:
    c = dev.get(CLUSTER, "cluster-gke").inputs
    assert c["name"] == "qwen-serving-cluster"
    assert c["location"] == "us-central1"  # regional: the zone minus its suffix
    assert c["releaseChannel"] == {"channel": "RAPID"}
    # `cluster.version` defaults to the prefix 1.36: the newest 1.36 the Rapid channel offers (the harness's
    # SERVER_CONFIG lists 1.36.2-gke.1500000 first), not a pinned patch that goes stale.
    assert c["minMasterVersion"] == "1.36.2-gke.1500000"
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
    window = {"start": "2026-12-01T00:00:00Z", "end": "2026-12-29T00:00:00Z"}
    with_window = ok({f"{P}:cluster": {"maintenanceExclusion": window}})
    assert with_window.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"] == {
        "dailyMaintenanceWindow": {"startTime": "03:00"},
        "maintenanceExclusions": [
            {
                "exclusionName": "no-upgrade-next-month",
                "startTime": "2026-12-01T00:00:00Z",
                "endTime": "2026-12-29T00:00:00Z",
                "exclusionOptions": {"scope": "NO_UPGRADES"},
            }
        ],
    }
    net = dev.get("gcp:compute/network:Network", "network-main")
    sub = dev.get("gcp:compute/subnetwork:Subnetwork", "network-tpu")
    assert net.urn in dev.get(CLUSTER, "cluster-gke").property_dependencies["network"]
    assert sub.urn in dev.get(CLUSTER, "cluster-gke").property_dependencies["subnetwork"]


def test_system_pool_is_the_default_pool_of_the_reference(dev: Run) -> None:
    pool = dev.get(POOL, "cluster-system").inputs
    assert pool["nodeCount"] == 1
    assert pool["nodeConfig"]["machineType"] == "n2-standard-32"
    assert pool["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert dev.get(CLUSTER, "cluster-gke").inputs["removeDefaultNodePool"] is True


def test_workload_policy(dev: Run) -> None:
    policy = dev.get("gcp:compute/resourcePolicy:ResourcePolicy", "capacity-policy").inputs
    assert policy["name"] == "superslice-policy"
    assert policy["region"] == "us-central1"
    assert policy["workloadPolicy"] == {
        "type": "HIGH_THROUGHPUT",
        "acceleratorTopology": "4x4x4",
        "acceleratorTopologyMode": "PROVISION_ONLY",
    }


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_pools_send_the_topology_of_their_workload_policy_beside_its_name(stack: str) -> None:
    """Decided: `placement_policy.tpu_topology` is kept beside the workload policy's `policy_name`.

    * The API accepts the two together on tpu7x pools: vllm-project/ci-infra runs such pools
      (terraform/gcp_old/tpu-inference/k8s/workers.tf, `placement_policy { type = "", policy_name, tpu_topology }`)
      and its #547 confirmed against a live cluster that "a probe pool came up RUNNING and the API stored
      `policyName` and `tpuTopology` with no `type`".
    * xpk leaves `--tpu-topology` out when it uses a workload policy (AI-Hypercomputer/xpk main
      src/xpk/core/nodepool.py: "--tpu-topology should also not be passed when workload policy is used", from
      968cf324 "Stop using GPP if WP is used"): that commit drops `--placement-type=COMPACT`, which is exclusive
      with a workload policy, and the topology with it, naming no refusal of the topology by the API.
    * The provider's `tpu_topology` is Optional, not Computed (resource_container_node_pool.go lines 399-403)
      and read back as GKE stores it (line 1614): sent, it equals what GKE stores, so the second run is a no-op
      (test_reservation.py, test_the_second_up_finds_no_difference_in_the_pools_forcenew_blocks).
    So it stays, and it is always the policy's own `accelerator_topology`, never a second value."""
    run = ok(stack=stack)
    (policy,) = run.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    pools = [r for r in run.of_type(POOL) if r.name != "cluster-system"]
    assert pools
    for pool in pools:
        placement = pool.inputs["placementPolicy"]
        assert placement["type"] == "" and placement["policyName"] == policy.inputs["name"]
        assert placement["tpuTopology"] == policy.inputs["workloadPolicy"]["acceleratorTopology"]


def test_tpu_node_pools(dev: Run) -> None:
    pools = sorted((r for r in dev.of_type(POOL) if r.name != "cluster-system"), key=lambda r: r.name)
    assert [p.inputs["name"] for p in pools] == ["tpu7-pool-1", "tpu7-pool-2"]
    # The harness's block: healthy free sub-blocks subblock-001..; the pools take the first ones in order.
    for pool, sub_block in zip(pools, ["subblock-001", "subblock-002"], strict=True):
        p = pool.inputs
        assert p["location"] == "us-central1"
        assert p["nodeLocations"] == ["us-central1-ai1a"]
        assert p["nodeCount"] == 16  # 4x4x4 = 64 chips / 4 chips per VM
        # What GKE stores for a pool placed by a workload policy: no type (vllm-project/ci-infra#547).
        assert p["placementPolicy"] == {"type": "", "policyName": "superslice-policy", "tpuTopology": "4x4x4"}
        cfg = p["nodeConfig"]
        assert cfg["machineType"] == "tpu7x-standard-4t"
        assert cfg["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert cfg["reservationAffinity"] == {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [
                "projects/my-tpu-project/reservations/tpu7x-reservation/reservationBlocks/block-0/"
                f"reservationSubBlocks/{sub_block}"
            ],
        }
        assert cfg["labels"] == {"gke-tpu-slicing/reservation-sub-block": sub_block}


def test_node_pools_are_parallel_and_ordered_after_cluster_and_policy(dev: Run) -> None:
    cluster = dev.get(CLUSTER, "cluster-gke")
    policy = dev.get("gcp:compute/resourcePolicy:ResourcePolicy", "capacity-policy")
    p1, p2 = dev.get(POOL, "capacity-tpu7-pool-1"), dev.get(POOL, "capacity-tpu7-pool-2")
    for pool in (p1, p2):
        # Through Output references, so destroy deletes the pool before the policy and the cluster.
        assert cluster.urn in pool.property_dependencies["cluster"]
        assert policy.urn in pool.property_dependencies["placementPolicy"]
    assert not dev.depends_on(p1, p2)
    assert not dev.depends_on(p2, p1)


def test_everything_waits_for_the_apis(dev: Run) -> None:
    compute = dev.get("gcp:projects/service:Service", "project-compute")
    container = dev.get("gcp:projects/service:Service", "project-container")
    # The dashboard and alert policies call the Monitoring API alone, and wait for it alone (docs/benchmarks.md).
    monitoring = dev.get("gcp:projects/service:Service", "project-monitoring")
    # ... and the XLA cache bucket for the Cloud Storage API alone. The Kueue immutable-fields record lives in
    # Pulumi's state only: it calls no API (components/kueue_guard.py).
    storage = dev.get("gcp:projects/service:Service", "project-storage")
    state_only = "pulumi-python:dynamic/queues:ImmutableFields"
    for reg in dev.registrations:
        if reg.custom and not reg.type.startswith(("gcp:projects/service", "pulumi:providers", state_only)):
            api = monitoring if reg.type.startswith("gcp:monitoring/") else compute
            api = storage if reg.type == "gcp:storage/bucket:Bucket" else api
            assert dev.depends_on(reg, api), reg.name
    assert dev.depends_on(dev.get(CLUSTER, "cluster-gke"), container)


def test_kubernetes_provider(dev: Run) -> None:
    provider = dev.get("pulumi:providers:kubernetes", "cluster-k8s")
    # The cluster instance: its id and GKE's per-cluster DNS endpoint (test_day2 covers replacement).
    assert provider.inputs["clusterIdentifier"] == "cluster-gke-id@gke-a1b2c3d4e5f6-123456789012.us-central1.gke.goog"
    assert dev.get(CLUSTER, "cluster-gke").urn in provider.property_dependencies["clusterIdentifier"]
    assert is_secret(provider.inputs["kubeconfig"])
    kubeconfig = json.loads(provider.inputs["kubeconfig"]["value"])
    # dev reaches the control plane through GKE's DNS-based endpoint (it has no public IP endpoint), which
    # presents a publicly trusted certificate: no CA in the kubeconfig.
    assert kubeconfig["clusters"][0]["cluster"] == {
        "server": "https://gke-a1b2c3d4e5f6-123456789012.us-central1.gke.goog"
    }
    assert kubeconfig["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert dev.get(CLUSTER, "cluster-gke").urn in provider.property_dependencies["kubeconfig"]
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["config"]["pulumi:disable-default-providers"] == ["kubernetes"]


def test_stack_outputs(dev: Run) -> None:
    assert dev.outputs["clusterName"] == "qwen-serving-cluster"
    assert dev.outputs["clusterEndpoint"] == "203.0.113.10"
    assert dev.outputs["network"] == "qwen-serving-main"
    assert dev.outputs["nodePools"] == ["tpu7-pool-1", "tpu7-pool-2"]
    assert dev.outputs["workloadPolicy"].endswith("/superslice-policy")
    assert dev.secret_outputs >= {"kubeconfig"}
    assert "clusterName" not in dev.secret_outputs


def test_components_have_type_tokens_and_own_their_children(dev: Run) -> None:
    components = [r for r in dev.registrations if not r.custom and not r.remote]
    tokens = {r.type for r in components}
    assert {
        "gke-tpu-slicing:project:ProjectServices",
        "gke-tpu-slicing:network:Network",
        "gke-tpu-slicing:identity:NodeIdentity",
        "gke-tpu-slicing:cluster:Cluster",
        "gke-tpu-slicing:capacity:TpuCapacity",
    } <= tokens
    for token in tokens:
        assert token.startswith("gke-tpu-slicing:") and token.count(":") == 2, token
    component_urns = {r.urn for r in components}
    for reg in dev.registrations:
        if reg.custom or reg.remote:
            assert reg.parent in component_urns, f"{reg.type} {reg.name} is not inside a component"
            assert reg.name.startswith(dev.by_urn(reg.parent).name + "-"), reg.name
    # register_outputs was called with real outputs by every component
    for comp in components:
        assert dev.component_outputs.get(comp.urn), comp.type


def test_first_preview_of_a_fresh_stack_with_unknown_kubeconfig() -> None:
    run = ok(preview=True, mocks=Mocks(known_cluster=False))
    provider = run.get("pulumi:providers:kubernetes", "cluster-k8s")
    assert is_unknown(provider.inputs.get("kubeconfig", UNKNOWN))
    # The identifier names a cluster instance, so it is unknown until the cluster exists.
    assert is_unknown(provider.inputs.get("clusterIdentifier", UNKNOWN))
    assert {r.type for r in run.registrations} >= {CLUSTER, POOL, "pulumi:providers:kubernetes"}


@pytest.mark.parametrize(
    ("cubes", "pools"),
    [(0, []), (1, ["tpu7-pool-1"]), (3, ["tpu7-pool-1", "tpu7-pool-2", "tpu7-pool-3"])],
)
def test_cube_count_sets_the_pools(cubes: int, pools: list[str]) -> None:
    overrides: dict = {f"{P}:tpu": {"cubes": cubes}}
    if cubes == 1:  # the 4x4x8 super-slice demo needs two cubes
        overrides[f"{P}:demos"] = {"superslicing": {"enabled": False}}
    if cubes == 0:  # no TPU pools: nothing to reserve, nothing to schedule
        overrides = {
            f"{P}:tpu": {"cubes": 0, "reservation": {"name": None}},
            f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
            f"{P}:serving": {"enabled": False},
        }
    run = ok(overrides)
    assert sorted(r.inputs["name"] for r in run.of_type(POOL) if r.name != "cluster-system") == pools


def test_shared_reservation_without_block_and_other_cube_topology() -> None:
    run = ok(
        {
            f"{P}:tpu": {
                "cubeTopology": "2x4x4",
                "reservation": {"project": "shared-resv-project", "block": ""},
            },
            f"{P}:demos": {"superslicing": {"enabled": False}},
        }
    )
    pool = run.get(POOL, "capacity-tpu7-pool-1").inputs
    assert pool["nodeConfig"]["reservationAffinity"]["values"] == [
        "projects/shared-resv-project/reservations/tpu7x-reservation"
    ]
    assert pool["nodeCount"] == 8  # 2x4x4 = 32 chips / 4 per VM
    policy = run.get("gcp:compute/resourcePolicy:ResourcePolicy", "capacity-policy").inputs
    assert policy["workloadPolicy"]["acceleratorTopology"] == "2x4x4"


# ------------------------------------------------------------------------------------------------
# Bad configuration: one clear error, naming key, value and what is allowed, and nothing registered.

BAD_CONFIG = [
    ("typo", {f"{P}:netwrok": {"mtu": 8896}}, ["gke-tpu-slicing:netwrok", "unknown key", "network"]),
    ("nested typo", {f"{P}:network": {"mtuu": 8896}}, ["network.mtuu", "unknown key", "mtu"]),
    ("wrong type", {f"{P}:tpu": {"cubes": "two"}}, ["tpu.cubes", "'two'", "integer"]),
    ("zone", {f"{P}:zone": "uscentral1"}, ["gke-tpu-slicing:zone", "'uscentral1'", "<region>-<suffix>"]),
    ("not a CIDR", {f"{P}:network": {"tpuSubnetCidr": "10.10.0.0/33"}}, ["network.tpuSubnetCidr", "CIDR"]),
    (
        "overlapping CIDRs",
        {f"{P}:network": {"proxySubnetCidr": "10.10.4.0/26"}},
        ["network.proxySubnetCidr", "10.10.4.0/26", "overlap", "10.10.0.0/18"],
    ),
    ("MTU too high", {f"{P}:network": {"mtu": 9000}}, ["network.mtu", "9000", "1300", "8896"]),
    ("MTU too low", {f"{P}:network": {"mtu": 576}}, ["network.mtu", "576", "1300", "8896"]),
    ("machine type", {f"{P}:tpu": {"machineType": "tpu9-standard-8t"}}, ["tpu.machineType", "tpu7x-standard-4t"]),
    ("not AxBxC", {f"{P}:tpu": {"cubeTopology": "4x4x"}}, ["tpu.cubeTopology", "'4x4x'", "AxBxC"]),
    ("negative cubes", {f"{P}:tpu": {"cubes": -1}}, ["tpu.cubes", "-1", "greater than or equal to 0"]),
    ("no reservation", {f"{P}:tpu": {"reservation": {"name": None}}}, ["tpu.reservation.name", "required"]),
    (
        "maintenance window backwards",
        {f"{P}:cluster": {"maintenanceExclusion": {"start": "2026-12-29T00:00:00Z", "end": "2026-12-01T00:00:00Z"}}},
        ["cluster.maintenanceExclusion.end", "2026-12-01", "after start"],
    ),
    (
        "version before the slice controller",
        {f"{P}:cluster": {"version": "1.35.1-gke.1000000"}},
        ["cluster.version", "1.35.1-gke.1000000", "1.35.2-gke.1842000", "use-gke-dynamic-slicing"],
    ),
    ("not a GKE version", {f"{P}:cluster": {"version": "latest"}}, ["cluster.version", "'latest'"]),
    (
        "PROVISION_ONLY without SPECIFIC",
        {f"{P}:tpu": {"reservation": {"consumeType": "ANY"}}},
        ["tpu.reservation.consumeType", "'ANY'", "PROVISION_ONLY", "SPECIFIC"],
    ),
]


@pytest.mark.parametrize(("case", "overrides", "expected"), BAD_CONFIG, ids=[c[0] for c in BAD_CONFIG])
def test_bad_config_fails_before_any_resource(case: str, overrides: dict, expected: list[str]) -> None:
    assert_rejected(overrides, expected, prefix="invalid stack configuration (1 problem)")


def test_all_problems_are_reported_together() -> None:
    run = run_program({f"{P}:network": {"mtu": 1}, f"{P}:tpu": {"cubes": -2}})
    assert "(2 problems)" in str(run.error)
    assert run.registrations == []


def test_secret_value_is_never_echoed_in_errors() -> None:
    # A secret set under a misspelt key is still a secret: the error names the key, not the value.
    run = run_program(secrets={f"{P}:hfTokn": "hf_typo_secret"})
    assert "gke-tpu-slicing:hfTokn: unknown key; did you mean gke-tpu-slicing:hfToken?" in str(run.error)
    assert "hf_typo_secret" not in str(run.error)
    assert run.registrations == []


def test_preview_warnings(dev: Run) -> None:
    # The version is resolved, not warned about (tests/test_gke_versions.py refuses versions below the floors).
    assert not any("cluster.version" in w for w in warnings_of(dev))
