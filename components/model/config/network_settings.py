"""Settings of the network: the VPC, its subnets and the names derived from the prefix."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from components.model.config.checks import MTU_MAX, MTU_MIN, Model, SettingError, accept_if, cidr, gce_name
from components.model.config.rules import FLOW_LOGS, GCE_NAMES, NAT_LOGS, TF_NAT, TF_SUBNETWORK, VPC_MTU, Flag, Rule


def _derived(suffix: str) -> property:
    """The name `<prefix>-<suffix>` of one of the network's resources."""
    return property(lambda self: f"{self.prefix}-{suffix}")


# The provider's enum (resource_compute_subnetwork.go:644; "" is no interval).
Interval = Literal[
    "INTERVAL_5_SEC", "INTERVAL_30_SEC", "INTERVAL_1_MIN", "INTERVAL_5_MIN", "INTERVAL_10_MIN", "INTERVAL_15_MIN"
]


class FlowLogSettings(Model):
    """VPC flow logs of the TPU subnet: one record per flow (5-tuple) and interval, so their volume grows with the
    flows each interval sees, not with bytes. Serving's flows are long-lived (the router's and the prefill-to-decode
    KV connections, scrapes): a longer interval collapses each into fewer records, which keeps every flow (sampling
    1) affordable, and a short one a forensic timeline does not need (docs/quotas.md, "Network logs")."""

    enabled: Annotated[Flag, Rule(source=FLOW_LOGS)] = Field(
        True, description="VPC flow logs of the TPU subnet (nodes and pods) in Cloud Logging"
    )
    aggregation_interval: Annotated[
        Interval,
        Rule(
            "INTERVAL_5_SEC, INTERVAL_30_SEC, INTERVAL_1_MIN, INTERVAL_5_MIN, INTERVAL_10_MIN or INTERVAL_15_MIN",
            f"{FLOW_LOGS}; {TF_SUBNETWORK} (log_config.aggregation_interval)",
            refused="INTERVAL_2_MIN",
            accepted="INTERVAL_15_MIN",
        ),
    ] = Field("INTERVAL_5_MIN", description="how long one record aggregates a flow's packets (records per flow)")
    sampling: Annotated[
        float,
        accept_if(lambda v: 0 < v <= 1, "a number greater than 0 and at most 1 (to log nothing, set enabled: false)"),
        Rule(
            "a number greater than 0 and at most 1: the share of flow records kept (1: every one)",
            f"{FLOW_LOGS}; {TF_SUBNETWORK} (log_config.flow_sampling: [0, 1])",
            refused=0,
            accepted=1,
        ),
    ] = Field(1.0, description="the share of flow records kept (1: every flow shows, as forensics needs)")

    def log_config(self) -> dict[str, Any] | None:
        """The subnetwork's `log_config`, or None (no block: the provider sends `enable: false`, L2270-2272). All
        four fields are sent: the API returns each (flattenComputeSubnetworkLogConfig, L2064-2092), and the
        provider's defaults (L649, 658, 669, 679: 5 s, "true", 0.5, all metadata) are not this program's. All
        metadata: a pod's name and namespace, since GKE reuses pod IPs."""
        if not self.enabled:
            return None
        return {
            "aggregation_interval": self.aggregation_interval,
            "flow_sampling": self.sampling,
            "metadata": "INCLUDE_ALL_METADATA",
            "filter_expr": "true",
        }


class NetworkSettings(Model):
    # The longest derived name is <prefix>-allow-internal; GCE names stop at 63 characters.
    prefix: Annotated[
        str,
        AfterValidator(lambda v: gce_name(v, 63 - len("-allow-internal"), "a GCE name prefix")),
        Rule(
            "a GCE name prefix: lowercase letters, digits, '-', starting with a letter; at most 48 characters, so "
            "that the longest derived name, <prefix>-allow-internal, is a GCE name of at most 63",
            GCE_NAMES,
            "cluster-replace",
            "a" * 49,
            "a" * 48,
        ),
    ] = Field(
        "qwen-serving", description="names `<prefix>-main`, `-tpu`, `-proxy`, `-allow-internal`, `-router`, `-nat`"
    )
    mtu: Annotated[
        int,
        accept_if(lambda v: MTU_MIN <= v <= MTU_MAX, f"an MTU from {MTU_MIN} to {MTU_MAX} (the range GCE VPCs allow)"),
        Rule(f"an integer from {MTU_MIN} to {MTU_MAX}", VPC_MTU, "network", MTU_MAX + 1, MTU_MIN),
    ] = Field(MTU_MAX, description="the VPC's MTU (the largest GCE allows, as the codelab sets it)")
    tpu_subnet_cidr: Annotated[
        str,
        AfterValidator(lambda v: cidr(v, max_prefix=29, why="a subnet's primary range is at least a /29")),
        Rule(
            "an IPv4 CIDR block with no host bits set, /29 or larger, not overlapping network.proxySubnetCidr, with an "
            "address for every node at the peak (the TPU VMs, the system nodes, a surge node), the control plane's "
            "private endpoint, an internal Gateway and the 4 Google Cloud reserves",
            "https://cloud.google.com/vpc/docs/subnets#valid-ranges",
            "subnets",
            "10.10.0.0/30",
            "10.10.0.0/26",
        ),
    ] = Field("10.10.0.0/18", description="primary range of the TPU and node subnet")
    proxy_subnet_cidr: Annotated[
        str,
        AfterValidator(lambda v: cidr(v, max_prefix=26, why="a proxy-only subnet needs at least 64 addresses")),
        Rule(
            "an IPv4 CIDR block with no host bits set, /26 or larger (64 addresses), not overlapping the TPU subnet",
            "https://cloud.google.com/load-balancing/docs/proxy-only-subnets#proxy_only_subnet_size",
            "subnets",
            "172.16.0.0/27",
            "192.168.0.0/26",
        ),
    ] = Field("172.16.0.0/26", description="the proxy-only subnet the regional internal Gateway needs")

    flow_logs: Annotated[FlowLogSettings, Rule(change="network-logs")] = Field(default_factory=dict)
    nat_logs: Annotated[
        Literal["ALL", "ERRORS_ONLY", "TRANSLATIONS_ONLY"],
        Rule(
            "ALL (every connection NAT translates and every packet it drops), ERRORS_ONLY or TRANSLATIONS_ONLY",
            f"{NAT_LOGS}; {TF_NAT} (log_config.filter)",
            "network-logs",
            "NONE",
            "ERRORS_ONLY",
        ),
    ] = Field("ALL", description="what Cloud NAT logs of the nodes' and pods' egress (with cluster.privateNodes)")

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

    network_name = _derived("main")
    tpu_subnet_name = _derived("tpu")
    proxy_subnet_name = _derived("proxy")
    firewall_name = _derived("allow-internal")
    router_name = _derived("router")
    nat_name = _derived("nat")
