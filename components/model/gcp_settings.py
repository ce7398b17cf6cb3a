"""Settings of the Google Cloud half: network, cluster, TPU capacity (SPEC sections 1-5)."""

from __future__ import annotations

import ipaddress
from datetime import datetime
from functools import cached_property
from typing import Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from components.model import geometry, gke_versions
from components.model.checks import (
    GKE_CLUSTER_NAME_MAX,
    MIN_SLICE_CONTROLLER_VERSION,
    MTU_MAX,
    MTU_MIN,
    NODE_POOL_NAME_MAX,
    Model,
    SettingError,
    cidr,
    compute_name,
    gce_name,
    gke_version_tuple,
    machine_shape,
    parse_topology,
    project_id,
    raise_all,
)
from components.model.geometry import Topology

# ---------------------------------------------------------------------------------------------
# Google Cloud half (SPEC sections 1-5)


class NetworkSettings(Model):
    prefix: str = "qwen-serving"
    mtu: int = 8896
    tpu_subnet_cidr: str = "10.10.0.0/18"
    proxy_subnet_cidr: str = "172.16.0.0/26"

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        # The longest derived name is <prefix>-allow-internal; GCE names stop at 63 characters.
        return gce_name(v, 63 - len("-allow-internal"), "a GCE name prefix")

    @field_validator("mtu")
    @classmethod
    def _mtu(cls, v: int) -> int:
        if not MTU_MIN <= v <= MTU_MAX:
            raise ValueError(f"an MTU from {MTU_MIN} to {MTU_MAX} (the range GCE VPCs allow)")
        return v

    @field_validator("tpu_subnet_cidr")
    @classmethod
    def _tpu_cidr(cls, v: str) -> str:
        # A subnet's primary range is /29 or larger (https://cloud.google.com/vpc/docs/subnets#valid-ranges).
        return cidr(v, max_prefix=29, why="a subnet's primary range is at least a /29")

    @field_validator("proxy_subnet_cidr")
    @classmethod
    def _proxy_cidr(cls, v: str) -> str:
        # "The proxy-only subnet must provide 64 or more IP addresses ... a prefix length of /26 or shorter"
        # (https://cloud.google.com/load-balancing/docs/proxy-only-subnets#proxy_only_subnet_size).
        return cidr(v, max_prefix=26, why="a proxy-only subnet needs at least 64 addresses")

    @model_validator(mode="after")
    def _disjoint(self) -> NetworkSettings:
        tpu, proxy = ipaddress.ip_network(self.tpu_subnet_cidr), ipaddress.ip_network(self.proxy_subnet_cidr)
        if tpu.overlaps(proxy):
            raise SettingError(
                "proxySubnetCidr",
                self.proxy_subnet_cidr,
                f"must not overlap network.tpuSubnetCidr {self.tpu_subnet_cidr}",
            )
        return self

    @property
    def network_name(self) -> str:
        return f"{self.prefix}-main"

    @property
    def tpu_subnet_name(self) -> str:
        return f"{self.prefix}-tpu"

    @property
    def proxy_subnet_name(self) -> str:
        return f"{self.prefix}-proxy"

    @property
    def firewall_name(self) -> str:
        return f"{self.prefix}-allow-internal"

    @property
    def proxy_firewall_name(self) -> str:
        return f"{self.prefix}-allow-proxy"

    @property
    def router_name(self) -> str:
        return f"{self.prefix}-router"

    @property
    def nat_name(self) -> str:
        return f"{self.prefix}-nat"


class MaintenanceExclusion(Model):
    """A window without upgrades. No default dates: any fixed default is in the past some day.

    Either `end` or `endTimeBehavior: UNTIL_END_OF_SUPPORT` (GKE ends the exclusion when the cluster's
    minor version reaches its end of support, so the stack file never expires). The provider sends no
    end time with that behaviour and reads none back (terraform-provider-google-beta release-8.0.0
    @93c65b2d60, resource_container_cluster.go lines 6387-6389 and 8299-8306): an `end` next to it would
    diff on every run, so exactly one of the two is allowed.
    """

    name: str = "no-upgrade-next-month"
    start: datetime
    end: datetime | None = None
    end_time_behavior: Literal["UNTIL_END_OF_SUPPORT"] | None = None
    scope: Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"] = "NO_UPGRADES"

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError("an RFC 3339 time with a zone, such as 2026-05-18T00:00:00Z")
        return v

    @model_validator(mode="after")
    def _ordered(self, info: ValidationInfo) -> MaintenanceExclusion:
        if self.end_time_behavior is not None:
            # GKE offers end-of-support exclusions for the minor-upgrade scopes only.
            if self.scope == "NO_UPGRADES":
                raise SettingError(
                    "endTimeBehavior",
                    self.end_time_behavior,
                    "only with scope NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES (a NO_UPGRADES exclusion "
                    "needs an end)",
                )
            if self.end is not None:
                raise SettingError(
                    "end",
                    self.rfc3339(self.end),
                    "unset when endTimeBehavior is UNTIL_END_OF_SUPPORT (GKE takes no end time with it)",
                )
            return self
        if self.end is None:
            raise SettingError(
                "end", None, "an RFC 3339 time, or endTimeBehavior: UNTIL_END_OF_SUPPORT (NO_MINOR scopes)"
            )
        if self.end <= self.start:
            raise SettingError("end", self.end.isoformat(), f"must be after start {self.start.isoformat()}")
        # An exclusion that is over protects nothing, and GKE rejects adding one that has ended.
        now = (info.context or {}).get("now")
        if now is not None and self.end <= now:
            raise SettingError(
                "end",
                self.rfc3339(self.end),
                f"a time in the future (it is {self.rfc3339(now.replace(microsecond=0))}): move the window "
                "forward, use endTimeBehavior: UNTIL_END_OF_SUPPORT (NO_MINOR scopes), or set "
                "cluster.maintenanceExclusion to null for none",
            )
        return self

    def rfc3339(self, when: datetime) -> str:
        return when.isoformat().replace("+00:00", "Z")


# GKE's limits on authorized networks (https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks,
# "Limitations"): "Public clusters can have up to 50 authorized network CIDR ranges; private clusters can have up
# to 100" (a private cluster: one with private nodes).
AUTHORIZED_NETWORKS_MAX_PUBLIC = 50
AUTHORIZED_NETWORKS_MAX_PRIVATE = 100


class AuthorizedNetwork(Model):
    """One CIDR range allowed to reach the control plane's IP endpoint (the provider's `cidr_blocks`)."""

    cidr_block: str
    display_name: str | None = None

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

    # true: the IP endpoint has no external address; only the VPC (and networks connected to it) reach it.
    private_endpoint: bool = False
    # true: the DNS-based endpoint accepts user traffic from any network (`allow_external_traffic`; every
    # request still needs IAM's container.clusters.connect and Kubernetes RBAC), and the program connects
    # through it. false: only Google-managed services use it.
    dns_endpoint: bool = False
    authorized_networks: list[AuthorizedNetwork] = Field(default_factory=list)
    # The explicit opt-in to an external endpoint that accepts connections from any address (no
    # authorized networks): authentication still applies, but nothing filters by network.
    unrestricted_public_endpoint: bool = False

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
    name: str = "qwen-serving-cluster"
    # Resolved at preview time against what the channel offers (components/model/gke_versions.py): a prefix
    # follows the channel's patches; GKE's documented floors are checked on what it resolves to.
    version: str = "1.36"
    # Only RAPID (checked below with the reason); a plain string so that any other value gets that reason.
    release_channel: str = "RAPID"
    system_machine_type: str = "n2-standard-32"
    system_node_count: int = Field(1, ge=1)
    deletion_protection: bool = True
    # Pulumi's `protect` option on the cluster, its node pools and the workload policy: any update that
    # would delete or replace them (destroy included) fails before it starts. Off by default, as in
    # Pulumi, so a dev stack tears down freely; staging and prod turn it on in their stack files.
    protect: bool = False
    # HH:MM (GMT) start of the daily maintenance window; pulumi-gcp needs one beside an exclusion.
    daily_maintenance_start: str = Field("03:00", pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
    # None by default: a default window would lie in the past some day (an error, see MaintenanceExclusion).
    maintenance_exclusion: MaintenanceExclusion | None = None
    # Nodes with internal addresses only (no external IP on any node, as `compute.vmExternalIpAccess`
    # demands); the network then gets a Cloud Router and Cloud NAT so nodes still pull images and weights.
    private_nodes: bool = True
    control_plane: ControlPlaneSettings = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        # Cluster.name: "can be up to 40 characters ... Lowercase letters, numbers, and hyphens only. Must start
        # with a letter. Must end with a number or a letter" (googleapis/googleapis@f8291d2b
        # google/container/v1/cluster_service.proto:2912).
        return gce_name(v, GKE_CLUSTER_NAME_MAX, "a GKE cluster name")

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

    @field_validator("release_channel")
    @classmethod
    def _channel(cls, v: str) -> str:
        # The cluster always enables the slice controller (addons_config.slice_controller_config).
        if v != "RAPID":
            raise ValueError(
                "RAPID: GKE dynamic slicing (the slice controller this cluster enables) requires a Standard "
                f"cluster on the Rapid channel, {gke_versions.DYNAMIC_SLICING_DOC}"
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
    def version_spec(self) -> gke_versions.VersionSpec:
        return gke_versions.parse(self.version)

    @field_validator("system_machine_type")
    @classmethod
    def _machine(cls, v: str) -> str:
        machine_shape(v)
        return v

    @property
    def system_pool_name(self) -> str:
        # The pool that replaces GKE's default pool (docs/codelab.md, deliberate difference 3).
        return "system"


class ReservationSettings(Model):
    name: str | None = None
    project: str | None = None  # defaults to the stack's project
    block: str = "block-0"  # "" = the whole reservation, not one block
    consume_type: Literal["SPECIFIC", "ANY", "NONE"] = "SPECIFIC"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return None if v is None else compute_name(v, "a Compute Engine reservation name")

    @field_validator("block")
    @classmethod
    def _block(cls, v: str) -> str:
        return v if v == "" else compute_name(v, 'a reservation block name (or "" for the whole reservation)')

    @field_validator("project")
    @classmethod
    def _project(cls, v: str | None) -> str | None:
        return None if v is None else project_id(v)


class TpuSettings(Model):
    machine_type: str = "tpu7x-standard-4t"
    cube_topology: str = "4x4x4"
    cubes: int = Field(2, ge=0)
    workload_policy_name: str = "superslice-policy"
    accelerator_topology_mode: Literal["PROVISION_ONLY", "AUTO_CONNECT"] = "PROVISION_ONLY"
    pool_prefix: str = "tpu7-pool"
    reservation: ReservationSettings = Field(default_factory=dict)
    # Pins cube i (pool <prefix>-<i+1>) to sub-block subBlocks[i] of tpu.reservation.block; unset: the
    # program picks (components/model/reservation.py). Checked against the reservation at preview.
    sub_blocks: list[str] | None = None

    @field_validator("sub_blocks")
    @classmethod
    def _sub_blocks(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        for name in v:
            compute_name(name, "reservation sub-block names")
        dupes = sorted({n for n in v if v.count(n) > 1})
        if dupes:
            raise ValueError(f"distinct sub-block names, one per cube ({', '.join(dupes)} repeated)")
        return v

    @field_validator("machine_type")
    @classmethod
    def _machine(cls, v: str) -> str:
        sliceable = geometry.sliceable_machine_types()
        if v not in geometry.SYSTEMS:
            raise ValueError(f"a TPU machine type with known chips per VM: {', '.join(sliceable)}")
        if v not in sliceable:
            raise ValueError(f"a machine type that supports dynamic slicing: {', '.join(sliceable)}")
        return v

    _topo = field_validator("cube_topology")(classmethod(lambda cls, v: parse_topology(v)))

    @field_validator("workload_policy_name")
    @classmethod
    def _policy(cls, v: str) -> str:
        return gce_name(v, 63, "a GCE resource policy name")

    @field_validator("pool_prefix")
    @classmethod
    def _pool(cls, v: str) -> str:
        # Pools are named <prefix>-<n>: the longest name is checked against tpu.cubes below.
        return gce_name(v, NODE_POOL_NAME_MAX - 2, "a node pool name prefix")

    @model_validator(mode="after")
    def _consistent(self) -> TpuSettings:
        errors = []
        system = geometry.SYSTEMS[self.machine_type]
        assert system.cube is not None
        allowed = system.partitions(system.cube)
        if Topology.parse(self.cube_topology) not in allowed:
            errors.append(
                SettingError(
                    "cubeTopology",
                    self.cube_topology,
                    f"one node pool's ICI block on {self.machine_type}: {', '.join(str(t) for t in allowed)}",
                )
            )
        r = self.reservation
        if self.cubes > 0 and r.consume_type == "SPECIFIC" and not r.name:
            errors.append(
                SettingError(
                    "reservation.name", r.name, "the name of the TPU reservation (required when tpu.cubes > 0)"
                )
            )
        if self.sub_blocks is not None:
            if r.consume_type != "SPECIFIC" or not r.block:
                errors.append(
                    SettingError(
                        "subBlocks",
                        self.sub_blocks,
                        "only with a SPECIFIC reservation and one tpu.reservation.block (sub-blocks belong to a block)",
                    )
                )
            elif len(self.sub_blocks) != self.cubes:
                errors.append(
                    SettingError(
                        "subBlocks",
                        self.sub_blocks,
                        f"one sub-block per cube: {self.cubes} names for tpu.cubes = {self.cubes} "
                        f"(got {len(self.sub_blocks)}); cube i runs on subBlocks[i]",
                    )
                )
        if self.accelerator_topology_mode == "PROVISION_ONLY" and r.consume_type != "SPECIFIC":
            errors.append(
                SettingError(
                    "reservation.consumeType",
                    r.consume_type,
                    "SPECIFIC: acceleratorTopologyMode PROVISION_ONLY needs a specific reservation",
                )
            )
        longest = self.pool_name(self.cubes - 1) if self.cubes > 0 else ""
        if len(longest) > NODE_POOL_NAME_MAX:
            errors.append(
                SettingError(
                    "poolPrefix",
                    self.pool_prefix,
                    f"at most {NODE_POOL_NAME_MAX - len(longest) + len(self.pool_prefix)} characters with tpu.cubes = "
                    f"{self.cubes}: the last pool, {longest!r}, must be a GKE node pool name of at most "
                    f"{NODE_POOL_NAME_MAX} characters",
                )
            )
        raise_all(errors)
        return self

    @cached_property
    def system(self) -> geometry.TpuSystem:
        return geometry.system(self.machine_type)

    @cached_property
    def cube(self) -> geometry.Cube:
        return geometry.Cube(self.system, Topology.parse(self.cube_topology))

    def pool_name(self, index: int) -> str:
        return f"{self.pool_prefix}-{index + 1}"
