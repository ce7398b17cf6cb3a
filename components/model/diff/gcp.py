"""Replace-on-change (ForceNew) properties of every Google Cloud type the program registers, or will.

pulumi-gcp bridges terraform-provider-google-beta one to one: a ForceNew attribute of the Terraform
schema is a replace-on-change property of the Pulumi resource (snake_case -> camelCase; a block list
without MaxItems 1 gets a plural name: `guest_accelerator` -> `guestAccelerators`).

Pin: pulumi-gcp 10.2.0 (requirements.txt; pulumi_gcp/pulumi-plugin.json of the installed package).
pulumi-gcp's own repository pins the provider as its `upstream` git submodule; its last 9.x tag
(v9.35.0) pins 3dc173a39774 = v7.45.0, and the 10.x major bridges the provider's 8.x major: the
installed 10.2.0 SDK no longer has `google_beyondcorp_app_connection`, `_app_connector` and
`_app_gateway`, which the provider removed in 8.0.0 (website/docs/guides/version_8_upgrade.html.markdown
L137-147). The facts are read from the provider at commit 93c65b2d60fe (branch release-8.0.0, the
newest 8.x source available offline); tests/test_diff_model.py checks every path against the installed
SDK's property names. Each entry: (property path, line in the cited file[, condition]).
BLOCK: ForceNew on a block; SDKv2 compares its item count (adding or removing it replaces; a change
inside it follows the inner field's own ForceNew).
"""

from __future__ import annotations

from components.model.diff.facts import ALWAYS, DISABLED, GROW, PRESENCE, REJECT, REPLACE, SHRINK, Fact

TPGB = "hashicorp/terraform-provider-google-beta@93c65b2d60fe google-beta/"
BLOCK = PRESENCE

# type -> ((file under google-beta/services/, ((path, line[, condition]), ...)), ...)
_SCHEMAS: dict[str, tuple[tuple[str, tuple[tuple, ...]], ...]] = {
    "gcp:projects/service:Service": (
        (
            "resourcemanager/resource_google_project_service.go",
            (
                ("service", 136),
                ("project", 143),
            ),
        ),
    ),
    "gcp:compute/previewFeature:PreviewFeature": (
        (
            "compute/resource_compute_preview_feature.go",
            (
                ("name", 148),
                ("project", 181),
            ),
        ),
    ),
    "gcp:compute/network:Network": (
        (
            "compute/resource_compute_network.go",
            (
                ("name", 143),
                ("autoCreateSubnetworks", 156),
                ("description", 168),
                ("internalIpv6Range", 182),
                ("networkProfile", 209),
                ("params", 220, BLOCK),
                ("params.resourceManagerTags", 228),
                ("project", 305),
            ),
        ),
    ),
    "gcp:compute/subnetwork:Subnetwork": (
        (
            "compute/resource_compute_subnetwork.go",
            (
                ("name", 547),
                ("network", 560),
                ("description", 577),
                ("externalIpv6Prefix", 586),
                ("internalIpv6Prefix", 593),
                ("params", 698, BLOCK),
                ("params.resourceManagerTags", 706),
                ("region", 748),
                ("reservedInternalRange", 755),
                ("resolveSubnetMask", 763),
                ("project", 903),
            ),
        ),
        (
            "compute/resource_compute_subnetwork.go",
            (
                ("ipCidrRange", 512, SHRINK),  # customdiff.ForceNewIfChange("ip_cidr_range", IsShrinkageIpCidr), L63-80
            ),
        ),
    ),
    "gcp:compute/firewall:Firewall": (
        (
            "compute/resource_compute_firewall.go",
            (
                ("name", 249),
                ("direction", 306),
                ("params", 341, BLOCK),
                ("project", 476),
            ),
        ),
    ),
    "gcp:serviceaccount/account:Account": (
        (
            "resourcemanager/resource_google_service_account.go",
            (
                ("accountId", 93),
                ("project", 118),
            ),
        ),
    ),
    "gcp:compute/resourcePolicy:ResourcePolicy": (
        (
            "compute/resource_compute_resource_policy.go",
            (
                ("diskConsistencyGroupPolicy.enabled", 177),
                ("groupPlacementPolicy.gpuTopology", 209),
                ("groupPlacementPolicy.tpuTopology", 222),
                ("region", 299),
                ("workloadPolicy.type", 469),
                ("workloadPolicy.acceleratorTopology", 476),
                ("workloadPolicy.acceleratorTopologyMode", 484),
                ("workloadPolicy.maxTopologyDistance", 498),
                ("project", 511),
            ),
        ),
    ),
    "gcp:monitoring/alertPolicy:AlertPolicy": (
        ("monitoring/resource_monitoring_alert_policy.go", (("project", 1313),)),
    ),
    "gcp:monitoring/dashboard:Dashboard": (("monitoring/resource_monitoring_dashboard.go", (("project", 114),)),),
    "gcp:compute/router:Router": (
        (
            "compute/resource_compute_router.go",
            (
                ("name", 166),
                ("encryptedInterconnectRouter", 259),
                ("nccGateway", 287),
                ("network", 295),
                ("params", 303, BLOCK),
                ("region", 323),
                ("project", 336),
            ),
        ),
    ),
    "gcp:compute/routerNat:RouterNat": (
        (
            "compute/resource_compute_router_nat.go",
            (
                ("name", 307),
                ("router", 315),
                ("endpointTypes", 378),
                ("initialNatIps", 397),
                ("region", 475),
                ("type", 528),
                ("project", 546),
            ),
        ),
    ),
    "gcp:storage/bucket:Bucket": (
        (
            "storage/resource_storage_bucket.go",
            (
                ("name", 135),
                ("location", 196),
                ("project", 207),
                ("enableObjectRetention", 375),
                ("customPlacementConfig.dataLocations", 576),
                ("hierarchicalNamespace", 628, BLOCK),
                ("hierarchicalNamespace.enabled", 636),
            ),
        ),
    ),
    "gcp:container/cluster:Cluster": (
        (
            "container/resource_container_cluster.go",
            (
                ("name", 298),
                ("location", 332),
                ("clusterAutoscaling.autoProvisioningDefaults.bootDiskKmsKey", 877),
                ("clusterIpv4Cidr", 1070),
                ("description", 1079),
                ("enableKubernetesAlpha", 1113),
                ("enableTpu", 1138),
                ("tpuConfig.enabled", 1157),
                ("tpuConfig.useServiceNetworking", 1168),
                ("enableAutopilot", 1193),
                ("initialNodeCount", 1235),
                ("confidentialNodes", 1719, BLOCK),
                ("confidentialNodes.enabled", 1727),
                ("confidentialNodes.confidentialInstanceType", 1733),
                ("masterAuth.clientCertificateConfig", 1754, BLOCK),
                ("masterAuth.clientCertificateConfig.issueClientCertificate", 1761),
                ("network", 1818),
                ("nodePools", 1854, BLOCK),
                ("project", 2024),
                ("subnetwork", 2032),
                ("ipAllocationPolicy", 2064, BLOCK),
                ("ipAllocationPolicy.clusterIpv4CidrBlock", 2076),
                ("ipAllocationPolicy.servicesIpv4CidrBlock", 2086),
                ("ipAllocationPolicy.clusterSecondaryRangeName", 2097),
                ("ipAllocationPolicy.servicesSecondaryRangeName", 2106),
                ("ipAllocationPolicy.podCidrOverprovisionConfig", 2122, BLOCK),
                ("networkingMode", 2236),
                ("privateClusterConfig.masterIpv4CidrBlock", 2346),
                ("privateClusterConfig.privateEndpointSubnetwork", 2364),
                ("defaultMaxPodsPerNode", 2427),
                ("datapathProvider", 2629),
                ("dataplaneOptimizationMode", 2638),
                ("userManagedKeysConfig.clusterCa", 2843),
                ("userManagedKeysConfig.etcdApiCa", 2849),
                ("userManagedKeysConfig.etcdPeerCa", 2855),
                ("userManagedKeysConfig.aggregationCa", 2861),
            ),
        ),
        (
            "container/resource_container_cluster.go",
            (
                ("enableL4IlbSubsetting", 259, DISABLED),  # ForceNewIfChange(..., isBeenEnabled), L228-239
                ("enableFqdnNetworkPolicy", 260, DISABLED),
            ),
        ),
        (
            "container/node_config.go",
            (
                ("nodeConfig", 284, BLOCK),  # the cluster's node_config is schemaNodeConfig() (L1848)
            ),
        ),
    ),
    "gcp:container/nodePool:NodePool": (
        (
            "container/resource_container_node_pool.go",
            (
                ("project", 243),
                ("cluster", 249),
                ("location", 256),
                ("placementPolicy", 386, BLOCK),
                ("placementPolicy.policyName", 397),
                ("queuedProvisioning", 414, BLOCK),
                ("queuedProvisioning.enabled", 420),
                ("maxPodsPerNode", 430),
                ("initialNodeCount", 483),
                ("name", 531),
                ("namePrefix", 539),
                ("networkConfig.acceleratorNetworkProfile", 580),
                ("networkConfig.createPodRange", 585),
                ("networkConfig.podRange", 597),
                ("networkConfig.podIpv4CidrBlock", 604),
                ("networkConfig.additionalNodeNetworkConfigs", 613, BLOCK),
                ("networkConfig.additionalNodeNetworkConfigs.network", 621),
                ("networkConfig.additionalNodeNetworkConfigs.subnetwork", 628),
                ("networkConfig.additionalPodNetworkConfigs", 637, BLOCK),
                ("networkConfig.additionalPodNetworkConfigs.subnetwork", 644),
                ("networkConfig.additionalPodNetworkConfigs.secondaryPodRange", 650),
                ("networkConfig.additionalPodNetworkConfigs.maxPodsPerNode", 656),
                ("networkConfig.podCidrOverprovisionConfig", 667, BLOCK),
                ("networkConfig.subnetwork", 698),
            ),
        ),
        (
            "container/node_config.go",
            (
                ("nodeConfig.guestAccelerators", 320, BLOCK),
                ("nodeConfig.guestAccelerators.count", 327),
                ("nodeConfig.guestAccelerators.type", 333),
                ("nodeConfig.guestAccelerators.gpuDriverInstallationConfig", 342, BLOCK),
                ("nodeConfig.guestAccelerators.gpuDriverInstallationConfig.gpuDriverVersion", 349),
                ("nodeConfig.guestAccelerators.gpuPartitionSize", 359),
                ("nodeConfig.guestAccelerators.gpuSharingConfig", 366, BLOCK),
                ("nodeConfig.guestAccelerators.gpuSharingConfig.gpuSharingStrategy", 373),
                ("nodeConfig.guestAccelerators.gpuSharingConfig.maxSharedClientsPerGpu", 379),
                ("nodeConfig.localSsdCount", 442),
                ("nodeConfig.ephemeralStorageConfig", 454, BLOCK),
                ("nodeConfig.ephemeralStorageConfig.localSsdCount", 460),
                ("nodeConfig.ephemeralStorageLocalSsdConfig", 473, BLOCK),
                ("nodeConfig.ephemeralStorageLocalSsdConfig.localSsdCount", 479),
                ("nodeConfig.ephemeralStorageLocalSsdConfig.dataCacheCount", 486),
                ("nodeConfig.localNvmeSsdBlockConfig", 499, BLOCK),
                ("nodeConfig.localNvmeSsdBlockConfig.localSsdCount", 505),
                ("nodeConfig.secondaryBootDisks", 518, BLOCK),
                ("nodeConfig.secondaryBootDisks.diskImage", 524),
                ("nodeConfig.secondaryBootDisks.mode", 530),
                ("nodeConfig.metadata", 566),
                ("nodeConfig.minCpuPlatform", 575),
                ("nodeConfig.oauthScopes", 583),
                ("nodeConfig.preemptible", 598),
                ("nodeConfig.reservationAffinity", 607, BLOCK),
                ("nodeConfig.reservationAffinity.consumeReservationType", 613),
                ("nodeConfig.reservationAffinity.key", 620),
                ("nodeConfig.reservationAffinity.values", 626),
                ("nodeConfig.spot", 638),
                ("nodeConfig.serviceAccount", 647),
                ("nodeConfig.shieldedInstanceConfig", 669, BLOCK),
                ("nodeConfig.shieldedInstanceConfig.enableSecureBoot", 677),
                ("nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring", 684),
                ("nodeConfig.sandboxConfig", 764, BLOCK),
                ("nodeConfig.bootDiskKmsKey", 790),
                ("nodeConfig.nodeGroup", 1303),
                ("nodeConfig.advancedMachineFeatures", 1312, BLOCK),
                ("nodeConfig.advancedMachineFeatures.threadsPerCore", 1318),
                ("nodeConfig.advancedMachineFeatures.enableNestedVirtualization", 1324),
                ("nodeConfig.soleTenantConfig", 1341, BLOCK),
                ("nodeConfig.soleTenantConfig.nodeAffinities", 1348, BLOCK),
                ("nodeConfig.soleTenantConfig.nodeAffinities.key", 1355),
                ("nodeConfig.soleTenantConfig.nodeAffinities.operator", 1361),
                ("nodeConfig.soleTenantConfig.nodeAffinities.values", 1368),
                ("nodeConfig.hostMaintenancePolicy", 1387, BLOCK),
                ("nodeConfig.hostMaintenancePolicy.maintenanceInterval", 1394),
                ("nodeConfig.hostMaintenancePolicy.opportunisticMaintenanceStrategy", 1401, BLOCK),
                ("nodeConfig.hostMaintenancePolicy.opportunisticMaintenanceStrategy.nodeIdleTimeWindow", 1409),
                (
                    "nodeConfig.hostMaintenancePolicy.opportunisticMaintenanceStrategy.maintenanceAvailabilityWindow",
                    1415,
                ),
                ("nodeConfig.hostMaintenancePolicy.opportunisticMaintenanceStrategy.minNodesPerPool", 1421),
                ("nodeConfig.confidentialNodes.confidentialInstanceType", 1446),
                ("nodeConfig.enableConfidentialStorage", 1477),
                ("nodeConfig.localSsdEncryptionMode", 1483),
                ("nodeConfig.maxRunDuration", 1490),
                ("nodeConfig.flexStart", 1496),
            ),
        ),
    ),
    # IAM members: the shared member schema (tpgiamresource) plus the parent's identifier, all ForceNew.
    "gcp:projects/iAMMember:IAMMember": (
        (
            "../tpgiamresource/resource_iam_member.go",
            (
                ("role", 67),
                ("member", 72),
                ("condition", 80, BLOCK),
                ("condition.expression", 86),
                ("condition.title", 91),
                ("condition.description", 96),
            ),
        ),
        ("resourcemanager/iam_project.go", (("project", 38),)),
    ),
    "gcp:storage/bucketIAMMember:BucketIAMMember": (
        (
            "../tpgiamresource/resource_iam_member.go",
            (
                ("role", 67),
                ("member", 72),
                ("condition", 80, BLOCK),
                ("condition.expression", 86),
                ("condition.title", 91),
                ("condition.description", 96),
            ),
        ),
        ("storage/iam_storage_bucket.go", (("bucket", 36),)),
    ),
}


def _facts() -> dict[str, tuple[Fact, ...]]:
    out: dict[str, tuple[Fact, ...]] = {}
    for type_, groups in _SCHEMAS.items():
        facts: list[Fact] = []
        for file, entries in groups:
            where = f"{TPGB}services/{file}".replace("services/../", "")
            for path, line, *condition in entries:
                when = condition[0] if condition else ALWAYS
                rule = {ALWAYS: "ForceNew", PRESENCE: "ForceNew block"}.get(when, f"ForceNew when {when}")
                facts.append(Fact(path, REPLACE, f"{where}:{line}", rule, when))
        out[type_] = tuple(facts)
    return out


FORCE_NEW: dict[str, tuple[Fact, ...]] = _facts()

# Updates the provider sends and the API refuses (no ForceNew: `pulumi up` fails on them halfway).
# A subnet whose range grows is updated through expandIpCidrRange (resource_compute_subnetwork.go L1259-1269),
# which GCE does not support for proxy-only subnets: "This command doesn't work for secondary subnets or for
# subnets that are used exclusively for load balancer proxies" (the API method's documented behaviour, in
# `gcloud compute networks subnets expand-ip-range`'s reference).
EXPAND_IP_RANGE = "https://cloud.google.com/sdk/gcloud/reference/compute/networks/subnets/expand-ip-range"
PROXY_PURPOSES = ("REGIONAL_MANAGED_PROXY", "GLOBAL_MANAGED_PROXY", "INTERNAL_HTTPS_LOAD_BALANCER")
API_REFUSALS: dict[str, tuple[Fact, ...]] = {
    "gcp:compute/subnetwork:Subnetwork": (
        Fact(
            "ipCidrRange",
            REJECT,
            f"{TPGB}services/compute/resource_compute_subnetwork.go:1269 expandIpCidrRange; {EXPAND_IP_RANGE}",
            "a proxy-only subnet's range cannot be expanded",
            GROW,
            guard="purpose",
            guard_values=PROXY_PURPOSES,
        ),
    ),
}
# What the engine reads per Google Cloud type: the replace-on-change facts, then the refusals.
FACTS: dict[str, tuple[Fact, ...]] = {t: FORCE_NEW[t] + API_REFUSALS.get(t, ()) for t in FORCE_NEW}
