"""Settings of the network: the VPC, its subnets and the names derived from the prefix."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from components.model.config.checks import MTU_MAX, MTU_MIN, Model, SettingError, accept_if, cidr, gce_name
from components.model.config.rules import GCE_NAMES, VPC_MTU, Rule


def _derived(suffix: str) -> property:
    """The name `<prefix>-<suffix>` of one of the network's resources."""
    return property(lambda self: f"{self.prefix}-{suffix}")


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
