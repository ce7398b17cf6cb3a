"""Replace-on-change (ForceNew) properties of every Google Cloud type the program registers, or will.

pulumi-gcp bridges terraform-provider-google-beta one to one: a ForceNew attribute of the Terraform
schema is a replace-on-change property of the Pulumi resource (snake_case -> camelCase; a list or set
without MaxItems 1 gets a plural name: `guest_accelerator` -> `guestAccelerators`).

Pin: pulumi-gcp 10.2.0 (requirements.txt; pulumi_gcp/pulumi-plugin.json of the installed package).
pulumi-gcp's own repository pins the provider as its `upstream` git submodule; its last 9.x tag
(v9.35.0) pins 3dc173a39774 = v7.45.0, and the 10.x major bridges the provider's 8.x major: the
installed 10.2.0 SDK no longer has `google_beyondcorp_app_connection`, `_app_connector` and
`_app_gateway`, which the provider removed in 8.0.0 (website/docs/guides/version_8_upgrade.html.markdown
L137-147). The facts are read from the provider at commit 93c65b2d60fe (branch release-8.0.0, the
newest 8.x source available offline): gcp_force_new.py is generated from its schema files
(`python -m tests.provider_schema --write`), with every ForceNew attribute but the few that
tests/provider_schema.py EXCLUDED leaves out, each with its reason; tests/test_diff_gcp.py checks it
against the sources and every path against the installed SDK's property names.
`:block`: ForceNew on a block; SDKv2 compares its item count (adding or removing it replaces; a change
inside it follows the inner field's own ForceNew).
"""

from __future__ import annotations

from components.model.diff.facts import ALWAYS, DISABLED, GROW, PRESENCE, REJECT, REPLACE, SHRINK, Fact
from components.model.diff.gcp_force_new import FORCE_NEW as _FORCE_NEW

TPGB = "hashicorp/terraform-provider-google-beta@93c65b2d60fe google-beta/"

# The conditional replacements: a CustomizeDiff, not a schema flag, so not in the generated table below
# (tests/test_diff_gcp.py checks that each attribute exists). Cited at the CustomizeDiff's line.
_CONDITIONAL: dict[str, tuple[tuple[str, tuple[tuple, ...]], ...]] = {
    "gcp:compute/subnetwork:Subnetwork": (
        (
            "services/compute/resource_compute_subnetwork.go",
            (("ipCidrRange", 512, SHRINK),),  # customdiff.ForceNewIfChange("ip_cidr_range", IsShrinkageIpCidr), L63-80
        ),
    ),
    "gcp:container/cluster:Cluster": (
        (
            "services/container/resource_container_cluster.go",
            (
                ("enableL4IlbSubsetting", 259, DISABLED),  # ForceNewIfChange(..., isBeenEnabled), L228-239
                ("enableFqdnNetworkPolicy", 260, DISABLED),
            ),
        ),
    ),
}


def _groups(packed: str) -> dict[str, tuple[tuple[str, tuple[tuple, ...]], ...]]:
    """gcp_force_new.py's words as _CONDITIONAL's shape: `gcp:...` opens a type, `....go` a file."""
    out: dict[str, list] = {}
    for word in packed.split():
        if word.startswith("gcp:"):
            groups = out.setdefault(word, [])
        elif word.endswith(".go"):
            groups.append((word, entries := []))
        else:
            path, line, *block = word.split(":")
            entries.append((path, int(line), PRESENCE) if block else (path, int(line)))
    return {type_: tuple((file, tuple(entries)) for file, entries in groups) for type_, groups in out.items()}


def _facts() -> dict[str, tuple[Fact, ...]]:
    out: dict[str, tuple[Fact, ...]] = {}
    for type_, groups in _groups(_FORCE_NEW).items():
        facts: list[Fact] = []
        for file, entries in groups + _CONDITIONAL.get(type_, ()):
            for path, line, *condition in entries:
                when = condition[0] if condition else ALWAYS
                rule = {ALWAYS: "ForceNew", PRESENCE: "ForceNew block"}.get(when, f"ForceNew when {when}")
                facts.append(Fact(path, REPLACE, f"{TPGB}{file}:{line}", rule, when))
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
    )
}
# In-place updates and sent fields the resource code relies on (an attribute not in FORCE_NEW updates in place),
# under TPGB services/:
# compute/resource_compute_router_nat.go:1317: an update is a PATCH of the router (log_config included: L1234-1239);
#   log_config (L407-427: `enable` and `filter`, both Required inside the Optional block) is not ForceNew.
# compute/resource_compute_subnetwork.go:1441-1509: a change of log_config (L631-694, Optional, not ForceNew) is a
#   PATCH of the subnetwork with its fingerprint; no block sends `enable: false` (L2258-2273; nothing for a
#   proxy-only subnet, L2265-2268).
# compute/resource_compute_firewall.go:819: source_ranges and allow update in place (PATCH).
# container/resource_container_node_pool.go:588-593,2078-2082: network_config.enable_private_nodes is
#   Optional+Computed, updated by UpdateNodePool with NodeNetworkConfig (TestAccContainerNodePool_
#   withEnablePrivateNodesToggle, resource_container_node_pool_test.go:1458, toggles it on one pool).
# container/resource_container_cluster.go (Cluster):
#   :2276 control_plane_endpoints_config.dns_endpoint_config.allow_external_traffic is Optional, not Computed,
#   under Optional+Computed blocks (L2254-2294); sent from the configuration on create and every endpoints
#   update (expandControlPlaneEndpointsConfig L7095-7110, ForceSendFields), in place (UpdateCluster with
#   DesiredControlPlaneEndpointsConfig L4105-4118), read back as GKE stores it (flattenDnsEndpointConfig
#   L8047-8058): false on a cluster created without it.
#   :6909-6936 master_authorized_networks_config: the block and its two flags are Optional+Computed, the flags sent
#   only when set (expandMasterAuthorizedNetworksConfig, GetOkExists); in place (L4105-4118); both toggle in place
#   (resource_container_cluster_test.go:1802 _withGcpPublicCidrsAccessEnabledToggle, :1896
#   _withAuthorizedNetworkPrivateEnforcementToggle).
#   :2335-2340,4122-4127 private_cluster_config (Computed): enable_private_nodes updates the default in place
#   (DesiredDefaultEnablePrivateNodes); enable_private_endpoint the endpoints (L4105-4112). A block with only these
#   two flags plans empty after apply (resource_container_cluster_test.go:1132, 12593); the private endpoint goes
#   in the node subnet without the ForceNew master_ipv4_cidr_block / private_endpoint_subnetwork.
#   :4918-4935 min_master_version: an update calls GKE only when the state's master_version is older
#   (`if cur.LessThan(des)`).
#   :3336-3338 node_config is sent as the cluster's NodeConfig at creation: the default pool's, which the
#   provider deletes once the cluster is up (L3515-3535; website/docs/r/container_cluster.html.markdown, "with a
#   separately managed node pool").
#   :4991-5016 maintenance_policy updates in place (SetMaintenancePolicy); :6387-6389,8299-8306 a maintenance
#   exclusion's end_time is dropped when an end_time_behavior is set, and none is read back.
# What the engine reads per Google Cloud type: the replace-on-change facts, then the refusals.
FACTS: dict[str, tuple[Fact, ...]] = {t: FORCE_NEW[t] + API_REFUSALS.get(t, ()) for t in FORCE_NEW}
