"""The GKE cluster, its system node pool, and the one Kubernetes provider every later layer uses."""

import json
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.component import Component
from components.model.config.cluster_settings import MaintenanceExclusion
from components.model.diff import readback

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def node_network_config(private_nodes: bool) -> dict[str, object]:
    """Every node pool's private-node setting, set on the pool itself.

    Not ForceNew: turning private nodes on updates existing pools in place (model/diff/gcp.py). The other
    `network_config` fields are Computed or read back as GKE set them, so sending only this one changes nothing
    else. The cluster's default (below) only covers pools created later; naming it per pool makes every pool's
    setting explicit.
    """
    return {"enable_private_nodes": private_nodes}


def kubeconfig(name: str, endpoint: str, ca_certificate: str | None) -> str:
    """A kubeconfig that authenticates with gke-gcloud-auth-plugin, so no token is stored in state.

    `ca_certificate` None: the server's certificate is checked against the system's trusted authorities,
    as for GKE's DNS-based endpoint (`gke-<hash>-<project number>.<region>.gke.goog`), which presents a
    publicly trusted certificate rather than one signed by the cluster's CA.
    """
    cluster: dict[str, str] = {"server": f"https://{endpoint}"}
    if ca_certificate is not None:
        cluster["certificate-authority-data"] = ca_certificate
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "provideClusterInfo": True,
            "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [{"name": name, "user": user}],
        }
    )


def dns_endpoint_of(config: Any) -> str | None:
    """The DNS-based endpoint in the cluster's `control_plane_endpoints_config` output (None when absent)."""
    dns = getattr(config, "dns_endpoint_config", None)
    return getattr(dns, "endpoint", None)


def _required_dns_endpoint(config: Any) -> str:
    endpoint = dns_endpoint_of(config)
    if not endpoint:  # GKE documents the field as always present: stop rather than write a broken kubeconfig
        raise ValueError("GKE reported no DNS-based endpoint for the cluster (control_plane_endpoints_config)")
    return endpoint


def control_plane_endpoints_config(dns_endpoint: bool) -> dict[str, object]:
    """The DNS-based endpoint's user access, always sent, true or false.

    Left out, GKE's last value would stay (its parent blocks are Computed); sent, it updates in place and reads
    back false on a cluster created without it: no diff (model/diff/gcp.py).
    `endpoint` (Optional+Computed) is never sent: it is the identity `cluster_identifier` reads.
    """
    return {"dns_endpoint_config": {"allow_external_traffic": dns_endpoint}}


class AuthorizedNetwork(TypedDict):
    cidr_block: str
    """A range allowed to reach the control plane's IP endpoints."""
    display_name: NotRequired[str]
    """What the range is, as GKE shows it."""


def master_authorized_networks_config(
    authorized_networks: list[AuthorizedNetwork] | None, private_endpoint: bool
) -> dict[str, object] | None:
    """Who may reach the IP endpoints: the authorized networks and nothing else (None: the explicit opt-in).

    Updates in place; the block is Computed: once set, removing it keeps GKE's restriction (the safe direction).
    Left out, GKE's defaults would decide its two flags, so both are always sent (model/diff/gcp.py).
    * `gcp_public_cidrs_access_enabled` false: Compute Engine VMs' and Google Cloud services' public addresses
      are not admitted beside the listed ranges (GKE's "Google Cloud public IP addresses" access).
    * `private_endpoint_enforcement_enabled` = privateEndpoint: with only an internal endpoint, the list is what
      restricts who in the VPC (or a network connected to it) reaches it; without enforcement any internal
      address would (GKE's "enable authorized networks on the private endpoint").
    """
    if authorized_networks is None:
        return None
    return {
        "cidr_blocks": [dict(n) for n in authorized_networks],
        "gcp_public_cidrs_access_enabled": False,
        "private_endpoint_enforcement_enabled": private_endpoint,
    }


def cluster_identifier(cluster: gcp.container.Cluster) -> pulumi.Output[str]:
    """Identifies one cluster *instance*: new when the cluster is replaced, stable for its lifetime.

    The kubeconfig alone cannot be the identity (an IP or CA rotation changes it, and would replace
    every Kubernetes object); the name alone is too stable (a cluster replaced under the same name
    would leave Pulumi believing every object still exists). GKE gives each cluster a unique DNS
    endpoint (`gke-<hash>-<project number>.<region>.gke.goog`, on every cluster regardless of version
    or configuration) that survives IP and CA rotation: the id plus that endpoint is the identity.
    The IP endpoint stands in only where GKE reports no DNS endpoint.
    """

    def identity(args: list[Any]) -> str:
        cluster_id, dns, ip = args
        return f"{cluster_id}@{dns or ip}"

    dns = cluster.control_plane_endpoints_config.apply(dns_endpoint_of)
    return pulumi.Output.all(cluster.id, dns, cluster.endpoint).apply(identity)


# The cluster's properties that only shape the temporary default pool (see Cluster below).
CLUSTER_IGNORE_CHANGES = ["initialNodeCount", *readback.ignored("gcp:container/cluster:Cluster")]


def default_pool_config(node_service_account: pulumi.Input[str]) -> dict[str, object]:
    """The temporary default pool's nodes: the dedicated node account with the scope every pool has."""
    return {"service_account": node_service_account, "oauth_scopes": [CLOUD_PLATFORM_SCOPE]}


def node_identity(node_service_account: pulumi.Input[str]) -> dict[str, object]:
    """Every node pool's identity: the dedicated node account, its scope, and GKE's metadata server (Workload
    Identity) for the pods."""
    return {**default_pool_config(node_service_account), "workload_metadata_config": {"mode": "GKE_METADATA"}}


class ExclusionOptions(TypedDict):
    scope: str
    """What the exclusion holds: NO_UPGRADES, NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES."""
    end_time_behavior: NotRequired[str]
    """UNTIL_END_OF_SUPPORT: GKE ends the exclusion with the minor version's support (no end time then)."""


class MaintenanceExclusionArgs(TypedDict):
    exclusion_name: str
    """The exclusion's name."""
    start_time: str
    """When it starts (RFC 3339)."""
    end_time: NotRequired[str]
    """When it ends (RFC 3339); none with an end-time behaviour."""
    exclusion_options: ExclusionOptions
    """Its scope and end-time behaviour."""


def maintenance_exclusion(exclusion: MaintenanceExclusion) -> MaintenanceExclusionArgs:
    """One exclusion as the provider takes it: an end time, or GKE's end-of-support behaviour without one."""
    options = ExclusionOptions(scope=exclusion.scope)
    end: dict[str, str] = {}
    if exclusion.end_time_behavior is not None:
        # The provider drops end_time when a behaviour is set and reads none back (model/diff/gcp.py).
        options["end_time_behavior"] = exclusion.end_time_behavior
    else:
        assert exclusion.end is not None
        end["end_time"] = exclusion.rfc3339(exclusion.end)
    start = exclusion.rfc3339(exclusion.start)
    return MaintenanceExclusionArgs(exclusion_name=exclusion.name, start_time=start, **end, exclusion_options=options)  # type: ignore[typeddict-item]


class SystemPoolArgs(TypedDict):
    name: str
    """The system node pool's name."""
    node_count: int
    """Its nodes per zone of the regional cluster."""
    machine_type: str
    """Its machine type (updates in place)."""


class ClusterArgs(TypedDict):
    name: str
    """The cluster's name."""
    project: str
    """The cluster's project."""
    region: str
    """The regional cluster's region."""
    network: pulumi.Input[str]
    """The VPC's id."""
    subnetwork: pulumi.Input[str]
    """The nodes' subnet's id."""
    node_service_account: pulumi.Input[str]
    """The email of the service account every node runs as."""
    version: str
    """The GKE version `cluster.version` resolved to (components/preflight.py): the control plane's minimum."""
    release_channel: str
    """The release channel."""
    private_nodes: bool
    """Nodes without external IPs."""
    private_endpoint: bool
    """The control plane's IP endpoint only inside the VPC."""
    dns_endpoint: bool
    """Users reach the control plane through GKE's DNS-based endpoint."""
    authorized_networks: NotRequired[list[AuthorizedNetwork]]
    """Who may reach the IP endpoints; left out: the explicit opt-in to an unrestricted public endpoint."""
    maintenance_window_start: NotRequired[str]
    """The daily maintenance window's start (HH:MM, UTC); none: GKE's default."""
    maintenance_exclusion: NotRequired[MaintenanceExclusionArgs]
    """A window without upgrades (with a maintenance window only)."""
    deletion_protection: bool
    """GKE's own deletion protection."""
    protect: bool
    """Pulumi refuses any update or destroy that would delete or replace the cluster or its system pool."""
    workload_pool: str
    """The Workload Identity pool (`<project>.svc.id.goog`)."""
    system_pool: SystemPoolArgs
    """The system node pool, where the add-ons run."""
    nat: NotRequired[gcp.compute.RouterNat]
    """The Cloud NAT private nodes pull images through: the cluster waits for it."""


class Cluster(Component):
    """A regional Standard cluster with every flag of the reference `gcloud container clusters create`."""

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:cluster:Cluster", name, opts)
        project, region, protect = args["project"], args["region"], args["protect"]
        node_service_account = args["node_service_account"]
        window, exclusion = args.get("maintenance_window_start"), args.get("maintenance_exclusion")
        self.cluster = gcp.container.Cluster(
            f"{name}-gke",
            name=args["name"],
            project=project,
            location=region,
            network=args["network"],
            subnetwork=args["subnetwork"],
            release_channel={"channel": args["release_channel"]},
            # Never a reason to replace or downgrade: not ForceNew, not read back, and an update calls GKE only
            # when the state's `master_version` is older (model/diff/readback.py, gcp.py). That state is the
            # last `up`'s (no refresh), so `version` is the higher of the resolved version and the one the control
            # plane runs now (components/preflight.py, gke_versions.to_send): never below what runs. A NEWER one is
            # a requested control-plane upgrade (DesiredMasterVersion), started by `pulumi up` whatever the
            # maintenance window: exclusions and windows hold automatic upgrades only, and Rapid offers patches
            # before they become its auto-upgrade target. With a prefix that is the newest patch of the same minor
            # (which a NO_MINOR_* exclusion allows anyway); `default` can move to a new minor. No node pool sets
            # `version` (Optional+Computed): pools take the control plane's version at creation and follow
            # auto-upgrades, never this value.
            min_master_version=args["version"],
            # The `system` pool below replaces the default pool, so a new system machine type updates a pool,
            # not the cluster. GKE still creates the default pool (initial_node_count per zone) and the provider
            # deletes it once the cluster is up: `node_config` is that pool's, so it runs as the dedicated node
            # account, not the Compute Engine default one (disabled or deleted in many organisations, where the
            # creation would fail). ForceNew and gone from GKE's answer with the pool, so ignored: used at
            # creation, never a replacement (model/diff/readback.py "nodeConfig", gcp.py).
            node_config=default_pool_config(node_service_account),
            remove_default_node_pool=True,
            initial_node_count=1,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy={},
            # Both flags update in place and are always sent, true or false: the block is Computed, so leaving it
            # out would keep the old value. No ForceNew `master_ipv4_cidr_block` nor `private_endpoint_subnetwork`:
            # GKE places the private endpoint in the node subnet (model/diff/gcp.py).
            private_cluster_config={
                "enable_private_nodes": args["private_nodes"],
                "enable_private_endpoint": args["private_endpoint"],
            },
            control_plane_endpoints_config=control_plane_endpoints_config(args["dns_endpoint"]),
            master_authorized_networks_config=master_authorized_networks_config(
                args.get("authorized_networks"), args["private_endpoint"]
            ),
            datapath_provider="ADVANCED_DATAPATH",
            gateway_api_config={"channel": "CHANNEL_STANDARD"},
            monitoring_config={
                "managed_prometheus": {"enabled": True},
                "advanced_datapath_observability_config": {"enable_metrics": True, "enable_relay": False},
            },
            workload_identity_config={"workload_pool": args["workload_pool"]},
            addons_config={
                "http_load_balancing": {"disabled": False},
                "gcp_filestore_csi_driver_config": {"enabled": True},
                "gcs_fuse_csi_driver_config": {"enabled": True},
                "horizontal_pod_autoscaling": {"disabled": False},
                "dns_cache_config": {"enabled": True},
                "slice_controller_config": {"enabled": True},
            },
            # In place (model/diff/gcp.py).
            maintenance_policy=None
            if window is None
            else {
                "daily_maintenance_window": {"start_time": window},
                **({"maintenance_exclusions": [exclusion]} if exclusion is not None else {}),
            },
            deletion_protection=args["deletion_protection"],
            opts=self.child(
                depends_on=[args["nat"]] if "nat" in args else [],
                # A fixed name: a replacement must delete the old cluster first (create-first ends in 409).
                delete_before_replace=True,
                ignore_changes=CLUSTER_IGNORE_CHANGES,
                protect=protect,
            ),
        )
        self.system_pool = gcp.container.NodePool(
            f"{name}-system",
            name=args["system_pool"]["name"],
            project=project,
            location=region,
            cluster=self.cluster.id,
            # Per zone of the regional cluster, as `gcloud --num-nodes` is.
            node_count=args["system_pool"]["node_count"],
            # machine_type updates the pool in place (provider: nodePoolNodeConfigUpdate); the identity
            # fields are ForceNew and replace it, delete-first because the name is fixed.
            node_config={"machine_type": args["system_pool"]["machine_type"], **node_identity(node_service_account)},
            network_config=node_network_config(args["private_nodes"]),
            opts=self.child(delete_before_replace=True, protect=protect),
        )
        context = f"gke_{project}_{region}_"
        if args["dns_endpoint"]:
            # Through GKE's DNS-based endpoint: reachable from wherever `pulumi up` runs (IAM decides), with a
            # private IP endpoint too. Only the kubeconfig changes; the identity below stays the same.
            dns = self.cluster.control_plane_endpoints_config.apply(_required_dns_endpoint)
            self.kubeconfig = pulumi.Output.secret(
                pulumi.Output.all(self.cluster.name, dns).apply(lambda a: kubeconfig(context + a[0], a[1], None))
            )
        else:
            self.kubeconfig = pulumi.Output.secret(
                pulumi.Output.all(
                    self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate
                ).apply(lambda a: kubeconfig(context + a[0], a[1], a[2] or ""))
            )
        # The only Kubernetes provider of the program (default providers are disabled in Pulumi.yaml).
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            cluster_identifier=cluster_identifier(self.cluster),
            opts=self.child(depends_on=[self.system_pool]),
        )
        self.register_outputs(
            {
                "name": self.cluster.name,
                "endpoint": self.cluster.endpoint,
                "systemPool": self.system_pool.name,
                "kubeconfig": self.kubeconfig,
            }
        )
