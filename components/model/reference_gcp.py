"""The configuration reference's rules of the Google Cloud keys: project, zone, network, cluster, tpu.

Pure model code: no Pulumi.
"""

from __future__ import annotations

from components.model.machines import COMPUTE_OPTIMIZED
from components.model.reference_sources import (
    DYNAMIC_SLICING,
    GCE_NAMES,
    GKE_CLUSTER_API,
    GKE_NODE_POOL_API,
    MACHINES,
    MAINTENANCE,
    NODE_SIZES,
    PROJECT_IDS,
    PROXY_SUBNETS,
    RESERVATION_API,
    RESERVATION_BLOCK_API,
    SUBNET_RANGES,
    TF_CLUSTER,
    TF_POLICY,
    THIS_PROGRAM,
    TPU7X,
    VPC_MTU,
    ZONES,
    Rule,
)

_NOW = "2026-11-30T12:00:00Z"
_EXCLUSION = {"cluster": {"maintenanceExclusion": {"start": "2026-12-01T00:00:00Z", "end": "2026-12-20T00:00:00Z"}}}

GCP_RULES: dict[str, Rule] = {
    "project": Rule(
        "a project ID: 6-30 lowercase letters, digits and hyphens, starting with a letter, not ending with '-'",
        PROJECT_IDS,
        "project",
        "My_Project",
        "a" * 6,
    ),
    "zone": Rule(
        "a zone, <region>-<suffix> (us-central1-ai1a); the region is the zone without its suffix",
        ZONES,
        "cluster-replace",
        "uscentral1",
        "europe-west4-a",
    ),
    "network.prefix": Rule(
        "a GCE name prefix: lowercase letters, digits, '-', starting with a letter; at most 48 characters, so "
        "that the longest derived name, <prefix>-allow-internal, is a GCE name of at most 63",
        GCE_NAMES,
        "cluster-replace",
        "a" * 49,
        "a" * 48,
    ),
    "network.mtu": Rule("an integer from 1300 to 8896", VPC_MTU, "network", 8897, 1300),
    "network.tpuSubnetCidr": Rule(
        "an IPv4 CIDR block with no host bits set, /29 or larger, not overlapping network.proxySubnetCidr",
        SUBNET_RANGES,
        "subnets",
        "10.10.0.0/30",
        "10.10.0.0/29",
    ),
    "network.proxySubnetCidr": Rule(
        "an IPv4 CIDR block with no host bits set, /26 or larger (64 addresses), not overlapping the TPU subnet",
        PROXY_SUBNETS,
        "subnets",
        "172.16.0.0/27",
        "192.168.0.0/26",
    ),
    "cluster.name": Rule(
        "a GKE cluster name: lowercase letters, digits and '-', starting with a letter, ending with a letter or "
        "digit, 1-40 characters",
        GKE_CLUSTER_API,
        "cluster-replace",
        "a" * 41,
        "a" * 40,
    ),
    "cluster.version": Rule(
        "a GKE version or prefix (1.36, 1.36.0, 1.36.0-gke.3712000), resolved at preview against what the channel "
        "offers; the newest it can reach is at least 1.35.2-gke.1842000 (the slice controller), and "
        "1.36.0-gke.3712000 while sub-slices are used",
        f"{DYNAMIC_SLICING}; components/model/gke_versions.py",
        "cluster-version",
        "1.36.0-gke.3711999",
        "1.36.0-gke.3712000",
    ),
    "cluster.releaseChannel": Rule(
        "RAPID: GKE dynamic slicing (the slice controller this cluster enables) requires the Rapid channel; the "
        "provider also takes REGULAR, STABLE, EXTENDED and UNSPECIFIED",
        f"{DYNAMIC_SLICING}; {TF_CLUSTER} (release_channel.channel)",
        "cluster",
        "REGULAR",
        "RAPID",
    ),
    "cluster.privateNodes": Rule(
        "true or false (false: a warning that every node gets an external IP address)",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation",
        "private-nodes",
        "maybe",
        False,
    ),
    "cluster.controlPlane.privateEndpoint": Rule(
        "true or false; true needs at least one authorized network (where `pulumi up` runs from) or dnsEndpoint",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation",
        "control-plane",
        "maybe",
        True,
    ),
    "cluster.controlPlane.dnsEndpoint": Rule(
        "true or false; true lets privateEndpoint go without authorized networks",
        "https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation (DNS-based endpoint); "
        f"{TF_CLUSTER} (control_plane_endpoints_config.dns_endpoint_config.allow_external_traffic)",
        "control-plane",
        "maybe",
        True,
        {"cluster": {"controlPlane": {"authorizedNetworks": [], "privateEndpoint": True}}},
    ),
    "cluster.controlPlane.authorizedNetworks": Rule(
        "a list of {cidrBlock, displayName}: IPv4 CIDR blocks with no host bits set, not 0.0.0.0/0; at least one "
        "unless unrestrictedPublicEndpoint; at most 100 with private nodes, 50 without",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks (Limitations); "
        f"{TF_CLUSTER} (master_authorized_networks_config.cidr_blocks: IsCIDRNetwork(0, 32))",
        "control-plane",
        [{"cidrBlock": "0.0.0.0/0"}],
        [{"cidrBlock": f"10.0.0.{i}/32"} for i in range(100)],
    ),
    "cluster.controlPlane.unrestrictedPublicEndpoint": Rule(
        "true or false; true (the explicit opt-in to a public endpoint open to any address, with a warning) only "
        "with no authorized networks and no private endpoint",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks",
        "control-plane",
        True,
        True,
        {"cluster": {"controlPlane": {"authorizedNetworks": []}}},
        {"cluster": {"controlPlane": {"authorizedNetworks": [], "privateEndpoint": True}}},
    ),
    "cluster.systemMachineType": Rule(
        "a predefined GCE machine type <family>-standard|highmem|highcpu-<vCPUs> that exists (the sizes of each "
        "family: e2, n1, n2, n2d, n4, c2, c2d, c3, c3d, c4, t2d) whose nodes fit the controllers' requests",
        f"{MACHINES}; {COMPUTE_OPTIMIZED}; {NODE_SIZES}",
        "system-pool",
        "n2-standard-7",
        "n2-standard-8",
    ),
    "cluster.systemNodeCount": Rule(
        "an integer of at least 1 (nodes per zone)", GKE_NODE_POOL_API, "system-pool", 0, 1
    ),
    "cluster.deletionProtection": Rule("true or false", TF_CLUSTER, "cluster", "maybe", False),
    "cluster.protect": Rule(
        "true or false", "https://www.pulumi.com/docs/iac/concepts/options/protect/", "protect", "maybe", True
    ),
    "cluster.dailyMaintenanceStart": Rule(
        "HH:MM in GMT, 00:00 to 23:59",
        f"{TF_CLUSTER} (daily_maintenance_window.start_time)",
        "cluster",
        "24:00",
        "23:59",
    ),
    "cluster.maintenanceExclusion.name": Rule(
        "a non-empty string (the provider requires it; its schema has no other rule)",
        f"{TF_CLUSTER} (maintenance_exclusion.exclusion_name)",
        "cluster",
        "",
        "x",
        _EXCLUSION,
    ),
    "cluster.maintenanceExclusion.start": Rule(
        "an RFC 3339 time with a zone, before end",
        MAINTENANCE,
        "cluster",
        "2026-12-01T00:00:00",
        "2026-12-19T23:59:59Z",
        _EXCLUSION,
    ),
    "cluster.maintenanceExclusion.end": Rule(
        "an RFC 3339 time with a zone, after start and in the future (GKE refuses adding an exclusion that has ended)",
        MAINTENANCE,
        "cluster",
        "2026-11-30T12:00:00Z",
        "2026-12-01T00:00:01Z",
        _EXCLUSION,
    ),
    "cluster.maintenanceExclusion.endTimeBehavior": Rule(
        "UNTIL_END_OF_SUPPORT (GKE ends the exclusion when the minor version's support ends) or unset; only with "
        "scope NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES, and without end",
        f"{MAINTENANCE}; {TF_CLUSTER} (maintenance_exclusion.end_time_behavior)",
        "cluster",
        "FOREVER",
        "UNTIL_END_OF_SUPPORT",
        {"cluster": {"maintenanceExclusion": {"start": "2026-12-01T00:00:00Z", "scope": "NO_MINOR_UPGRADES"}}},
    ),
    "cluster.maintenanceExclusion.scope": Rule(
        "NO_UPGRADES, NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES",
        f"{TF_CLUSTER} (exclusion_options.scope)",
        "cluster",
        "NO_PATCHES",
        "NO_MINOR_OR_NODE_UPGRADES",
        _EXCLUSION,
    ),
    "tpu.machineType": Rule(
        "a TPU machine type that supports dynamic slicing: tpu7x-standard-4t",
        f"{TPU7X}; {DYNAMIC_SLICING}",
        "workload-policy",
        "tpu7x-standard-1t",
        "tpu7x-standard-4t",
    ),
    "tpu.cubeTopology": Rule(
        "a partition of the machine's 4x4x4 cube (4x4x4, 2x4x4, 2x2x4, 2x2x2, 2x2x1 on tpu7x)",
        f"{TPU7X}; {DYNAMIC_SLICING}",
        "workload-policy",
        "4x4x",
        "2x2x1",
        {
            "demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
            "serving": {"enabled": False},
        },
    ),
    "tpu.cubes": Rule(
        "an integer of at least 0 (0 = no TPU pools)",
        THIS_PROGRAM,
        "cubes",
        -1,
        0,
        {"demos": {"superslicing": {"enabled": False}}},
    ),
    "tpu.workloadPolicyName": Rule(
        "a GCE resource policy name: RFC 1035, 1-63 characters", GCE_NAMES, "workload-policy", "Policy", "a" * 63
    ),
    "tpu.acceleratorTopologyMode": Rule(
        "PROVISION_ONLY (needs a SPECIFIC reservation) or AUTO_CONNECT",
        f"{TF_POLICY} (workload_policy.accelerator_topology_mode)",
        "workload-policy",
        "AUTO",
        "AUTO_CONNECT",
    ),
    "tpu.poolPrefix": Rule(
        "a GKE node pool name prefix: RFC 1035, such that the last pool, <prefix>-<tpu.cubes>, has at most "
        "40 characters",
        f"{GCE_NAMES}; GKE's 40-character node pool limit "
        "(https://gitlab.com/thorchain/devops/cluster-launcher/-/merge_requests/67)",
        "pool-prefix",
        "p" * 39,
        "p" * 38,
    ),
    "tpu.reservation.name": Rule(
        "a Compute Engine reservation name (RFC 1035, 1-63 characters) or its numeric resource ID; required when "
        "tpu.cubes > 0 with SPECIFIC",
        f"{RESERVATION_API}; {GCE_NAMES}",
        "reservation",
        "my reservation",
        "r" * 63,
    ),
    "tpu.reservation.project": Rule(
        "a project ID, or unset for the stack's project; another project only for a whole reservation "
        '(block: ""): GKE does not support a block shared from another project',
        PROJECT_IDS,
        "reservation",
        "shared-resv-project",
        "my-tpu-project",
    ),
    "tpu.reservation.block": Rule(
        'a reservation block name (RFC 1035, 1-63 characters, named by GCE) or its numeric resource ID, or "" for '
        "the whole reservation; the preview reads the reservation, so a block that does not exist is reported",
        RESERVATION_BLOCK_API,
        "reservation",
        "block 0",
        "",
    ),
    "tpu.subBlocks": Rule(
        "unset, or one distinct sub-block name (RFC 1035, 1-63 characters) or numeric resource ID per cube, with a "
        "SPECIFIC reservation and one tpu.reservation.block",
        f"{RESERVATION_BLOCK_API}; googleapis/googleapis@f8291d2b google/cloud/compute/v1/compute.proto "
        "(ReservationSubBlock.name)",
        "sub-blocks",
        ["sb-1"],
        ["sb-1", "18446744073709551615"],
    ),
    "tpu.reservation.consumeType": Rule(
        "SPECIFIC, ANY or NONE (ANY and NONE need acceleratorTopologyMode AUTO_CONNECT)",
        "hashicorp/terraform-provider-google-beta google-beta/services/container/node_config.go "
        f"(reservation_affinity.consume_reservation_type); {DYNAMIC_SLICING}",
        "reservation",
        "SOME",
        "NONE",
        {"tpu": {"acceleratorTopologyMode": "AUTO_CONNECT"}},
    ),
}
