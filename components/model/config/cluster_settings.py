"""Settings of the GKE cluster: the control plane, its authorized networks, the
maintenance window and exclusion, the system pool."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from components.model.config import gke_versions
from components.model.config.checks import (
    GKE_CLUSTER_NAME_MAX,
    MIN_SLICE_CONTROLLER_VERSION,
    Model,
    SettingError,
    accept_if,
    cidr,
    gce_name,
    gke_version_tuple,
    machine_shape,
)
from components.model.config.machines import COMPUTE_OPTIMIZED
from components.model.config.maintenance_settings import MaintenanceExclusion
from components.model.config.rules import (
    AUTHORIZED_NETWORKS,
    DNS_ENDPOINT,
    DYNAMIC_SLICING,
    GKE_NODE_POOL_API,
    ISOLATION,
    MACHINES,
    NODE_SIZES,
    PULUMI_PROTECT,
    TF_CLUSTER,
    Flag,
    Rule,
    at_least,
)

# GKE's limits on authorized networks (https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks,
# "Limitations"): "Public clusters can have up to 50 authorized network CIDR ranges; private clusters can have up
# to 100" (a private cluster: one with private nodes).
AUTHORIZED_NETWORKS_MAX_PUBLIC = 50
AUTHORIZED_NETWORKS_MAX_PRIVATE = 100


def node_service_account_id(cluster_name: str) -> str:
    """The node service account's ID, `<name[:24]>-nodes` (service account IDs stop at 30 characters)."""
    return f"{cluster_name[:24].rstrip('-')}-nodes"


class AuthorizedNetwork(Model):
    """One CIDR range allowed to reach the control plane's IP endpoint (the provider's `cidr_blocks`)."""

    cidr_block: str = Field(description="the range, an IPv4 CIDR block with no host bits set")
    display_name: str | None = Field(None, description="the range's name in the cluster's configuration")

    # The provider validates IsCIDRNetwork(0, 32): IPv4 and canonical (no host bits), any length.
    _cidr = field_validator("cidr_block")(classmethod(lambda cls, v: cidr(v)))


class ControlPlaneSettings(Model):
    """Who can reach the control plane: its IP endpoint, and its DNS-based endpoint.

    The program's Kubernetes provider connects to the IP endpoint (`cluster.endpoint`), so whoever runs
    `pulumi up` must connect from one of `authorizedNetworks` (and, with `privateEndpoint`, from the VPC
    or a network connected to it), unless `dnsEndpoint` is true: then it connects to GKE's DNS-based
    endpoint, which every cluster has and which IAM guards instead of an IP filter (GKE's recommended way
    to reach a control plane without a public IP: "Use only the DNS-based endpoint to access your control
    plane", https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation#dns-based_endpoint).
    """

    private_endpoint: Annotated[
        Flag,
        Rule(
            "true or false; true needs at least one authorized network (where `pulumi up` runs from) or dnsEndpoint",
            ISOLATION,
            accepted=True,
        ),
    ] = Field(False, description="the control plane's IP endpoint without an external address")
    # true: the DNS-based endpoint accepts user traffic from any network (`allow_external_traffic`; every
    # request still needs IAM's container.clusters.connect and Kubernetes RBAC), and the program connects
    # through it. false: only Google-managed services use it.
    dns_endpoint: Annotated[
        Flag,
        Rule(
            "true or false; true lets privateEndpoint go without authorized networks",
            f"{DNS_ENDPOINT}; {TF_CLUSTER} (control_plane_endpoints_config.dns_endpoint_config.allow_external_traffic)",
            accepted=True,
            context={"cluster": {"controlPlane": {"authorizedNetworks": [], "privateEndpoint": True}}},
        ),
    ] = Field(
        False,
        description="GKE's DNS-based endpoint takes user traffic (IAM-checked, from any network) and `pulumi up` "
        "connects through it",
    )
    authorized_networks: Annotated[
        list[AuthorizedNetwork],
        Rule(
            "a list of {cidrBlock, displayName}: IPv4 CIDR blocks with no host bits set, not 0.0.0.0/0; at least "
            "one unless unrestrictedPublicEndpoint; at most 100 with private nodes, 50 without",
            f"{AUTHORIZED_NETWORKS} (Limitations); "
            f"{TF_CLUSTER} (master_authorized_networks_config.cidr_blocks: IsCIDRNetwork(0, 32))",
            refused=[{"cidrBlock": "0.0.0.0/0"}],
            accepted=[{"cidrBlock": f"10.0.0.{i}/32"} for i in range(100)],
        ),
    ] = Field(default_factory=list, description="the ranges that may reach the control plane's IP endpoint")
    unrestricted_public_endpoint: Annotated[
        Flag,
        Rule(
            "true or false; true (the explicit opt-in to a public endpoint open to any address, with a warning) "
            "only with no authorized networks and no private endpoint",
            AUTHORIZED_NETWORKS,
            refused=True,
            accepted=True,
            context={"cluster": {"controlPlane": {"authorizedNetworks": []}}},
            refused_context={"cluster": {"controlPlane": {"authorizedNetworks": [], "privateEndpoint": True}}},
        ),
    ] = Field(False, description="the opt-in to a public endpoint any address may reach")

    @model_validator(mode="after")
    def _workable(self) -> ControlPlaneSettings:
        cidrs = [n.cidr_block for n in self.authorized_networks]
        if self.unrestricted_public_endpoint:
            if self.private_endpoint:
                raise SettingError(
                    "unrestrictedPublicEndpoint",
                    True,
                    "false when privateEndpoint is true (there is no public endpoint)",
                )
            if cidrs:
                raise SettingError(
                    "unrestrictedPublicEndpoint",
                    True,
                    f"false when authorizedNetworks is set ({', '.join(cidrs)}): the two contradict each other",
                )
            return self
        if "0.0.0.0/0" in cidrs:
            raise SettingError(
                f"authorizedNetworks.{cidrs.index('0.0.0.0/0')}.cidrBlock",
                "0.0.0.0/0",
                "a range narrower than every address; to expose the endpoint to any address set "
                "cluster.controlPlane.unrestrictedPublicEndpoint: true and no authorized networks instead",
            )
        if not cidrs:
            if self.private_endpoint:
                if self.dns_endpoint:
                    # DNS-only: `pulumi up` reaches the control plane through the DNS-based endpoint (IAM).
                    return self
                raise SettingError(
                    "authorizedNetworks",
                    [],
                    "at least one range when privateEndpoint is true: the network `pulumi up` runs from (a CI "
                    "runner's subnet, a VPN or Interconnect range), since the program creates every Kubernetes "
                    "object through the control plane's internal endpoint; or dnsEndpoint: true to connect "
                    "through GKE's DNS-based endpoint (IAM-checked, from any network) instead",
                )
            raise SettingError(
                "authorizedNetworks",
                [],
                "at least one CIDR range that may reach the control plane's public endpoint (where `pulumi up` "
                "and kubectl run from), or privateEndpoint: true with such a range or with dnsEndpoint: true, "
                "or the explicit opt-in unrestrictedPublicEndpoint: true to accept connections from any address",
            )
        return self


class ClusterSettings(Model):
    name: Annotated[
        str,
        AfterValidator(lambda v: gce_name(v, GKE_CLUSTER_NAME_MAX, "a GKE cluster name")),
        Rule(
            "a GKE cluster name: lowercase letters, digits and '-', starting with a letter, ending with a letter or "
            "digit, 1-40 characters",
            "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster; "
            "googleapis/googleapis@f8291d2b google/container/v1/cluster_service.proto:2912 (Cluster.name)",
            "cluster-replace",
            "a" * 41,
            "a" * 40,
        ),
    ] = Field(
        "qwen-serving-cluster", description="the GKE cluster's name; the node service account is `<name[:24]>-nodes`"
    )
    # Resolved at preview time against what the channel offers (components/model/config/gke_versions.py): a prefix
    # follows the channel's patches; GKE's documented floors are checked on what it resolves to.
    version: Annotated[
        str,
        Rule(
            "a GKE version or prefix (1.36, 1.36.0, 1.36.0-gke.3712000), resolved at preview against what the "
            "channel offers; the newest it can reach is at least 1.35.2-gke.1842000 (the slice controller), and "
            "1.36.0-gke.3712000 while sub-slices are used",
            f"{DYNAMIC_SLICING}; components/model/config/gke_versions.py",
            "cluster-version",
            "1.36.0-gke.3711999",
            "1.36.0-gke.3712000",
        ),
    ] = Field("1.36", description="the control plane's `min_master_version`")
    # Only RAPID, since the cluster always enables the slice controller (addons_config.slice_controller_config);
    # a plain string so that any other value gets that reason.
    release_channel: Annotated[
        str,
        accept_if(
            lambda v: v == "RAPID",
            "RAPID: GKE dynamic slicing (the slice controller this cluster enables) requires a Standard cluster on the "
            f"Rapid channel, {gke_versions.DYNAMIC_SLICING_DOC}",
        ),
        Rule(
            "RAPID: GKE dynamic slicing (the slice controller this cluster enables) requires the Rapid channel; the "
            "provider also takes REGULAR, STABLE, EXTENDED and UNSPECIFIED",
            f"{DYNAMIC_SLICING}; {TF_CLUSTER} (release_channel.channel)",
            "cluster",
            "REGULAR",
            "RAPID",
        ),
    ] = Field("RAPID", description="the cluster's release channel")
    system_machine_type: Annotated[
        str,
        AfterValidator(lambda v: machine_shape(v) and v),  # refused naming the families or the sizes that exist
        Rule(
            "a predefined GCE machine type <family>-standard|highmem|highcpu-<vCPUs> that exists (the sizes of "
            "each family: e2, n1, n2, n2d, n4, c2, c2d, c3, c3d, c4, t2d) whose nodes fit the controllers' requests",
            f"{MACHINES}; {COMPUTE_OPTIMIZED}; {NODE_SIZES}",
            "system-pool",
            "n2-standard-7",
            "n2-standard-16",
        ),
    ] = Field("n2-standard-32", description="machine type of the `system` pool (controllers, router)")
    system_node_count: Annotated[int, at_least(1, " (nodes per zone)", GKE_NODE_POOL_API, "system-pool")] = Field(
        1, ge=1, description="`system` nodes per zone of the regional cluster"
    )
    deletion_protection: Annotated[Flag, Rule(source=TF_CLUSTER, change="cluster")] = Field(
        True, description="GKE's deletion protection on the cluster"
    )
    # Pulumi's `protect` option on the cluster, its node pools and the workload policy: any update that
    # would delete or replace them (destroy included) fails before it starts. Off by default, as in
    # Pulumi, so a dev stack tears down freely; staging and prod turn it on in their stack files.
    protect: Annotated[Flag, Rule(source=PULUMI_PROTECT, change="protect", accepted=True)] = Field(
        False, description="Pulumi `protect` on the cluster, system pool, TPU pools and workload policy"
    )
    daily_maintenance_start: Annotated[
        str,
        Rule(
            "HH:MM in GMT, 00:00 to 23:59",
            f"{TF_CLUSTER} (daily_maintenance_window.start_time)",
            "cluster",
            "24:00",
            "23:59",
        ),
    ] = Field(
        "03:00",
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="start (HH:MM GMT) of the daily maintenance window, sent when set and beside an exclusion "
        "(which needs one); unset with no exclusion, GKE maintains at any time",
    )
    # None by default: a default window would lie in the past some day (an error, see MaintenanceExclusion).
    maintenance_exclusion: Annotated[
        MaintenanceExclusion | None,
        Rule(
            change="cluster",
            context={
                "cluster": {"maintenanceExclusion": {"start": "2026-12-01T00:00:00Z", "end": "2026-12-20T00:00:00Z"}}
            },
        ),
    ] = None
    # No external IP on any node, as `compute.vmExternalIpAccess` demands.
    private_nodes: Annotated[
        Flag,
        Rule(
            "true or false (false: a warning that every node gets an external IP address)", ISOLATION, "private-nodes"
        ),
    ] = Field(True, description="nodes with internal addresses only (Cloud Router and Cloud NAT for their egress)")
    control_plane: Annotated[ControlPlaneSettings, Rule(change="control-plane")] = Field(default_factory=dict)

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        newest = gke_versions.parse(v).newest_possible()
        if newest is not None and newest < gke_version_tuple(MIN_SLICE_CONTROLLER_VERSION):
            raise ValueError(
                f"{MIN_SLICE_CONTROLLER_VERSION} or newer (the first GKE release with the slice controller, "
                f"{gke_versions.DYNAMIC_SLICING_DOC})"
            )
        return v

    @model_validator(mode="after")
    def _authorized_networks_limit(self) -> ClusterSettings:
        count = len(self.control_plane.authorized_networks)
        limit = AUTHORIZED_NETWORKS_MAX_PRIVATE if self.private_nodes else AUTHORIZED_NETWORKS_MAX_PUBLIC
        if count > limit:
            kind = "private nodes" if self.private_nodes else "public nodes (privateNodes: false)"
            raise SettingError(
                "controlPlane.authorizedNetworks",
                f"{count} ranges",
                f"at most {limit} ranges (GKE's limit for a cluster with {kind})",
            )
        return self

    @property
    def maintenance_window_start(self) -> str | None:
        """The daily window's start to send: when `dailyMaintenanceStart` is set, or an exclusion needs a window
        (the provider's maintenance_policy takes exactly one of daily_maintenance_window and recurring_window,
        resource_container_cluster.go lines 1304-1309, so an exclusion alone cannot be sent). None: no policy,
        GKE's own (maintenance at any time), as before on stacks that set neither."""
        if "daily_maintenance_start" in self.model_fields_set or self.maintenance_exclusion is not None:
            return self.daily_maintenance_start
        return None

    @property
    def version_spec(self) -> gke_versions.VersionSpec:
        return gke_versions.parse(self.version)

    @property
    def system_pool_name(self) -> str:
        # The pool that replaces GKE's default pool (docs/codelab.md, deliberate difference 3).
        return "system"
