"""Settings of the network: the VPC, its subnets and the names derived from the prefix."""

from __future__ import annotations

import ipaddress

from pydantic import (
    field_validator,
    model_validator,
)

from components.model.checks import (
    MTU_MAX,
    MTU_MIN,
    Model,
    SettingError,
    cidr,
    gce_name,
)


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
