"""Network: the VPC, the TPU subnet, the proxy-only subnet and the internal firewall (SPEC 2)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.base import Component
from components.model.settings import Settings

# Every resource here has a fixed name. A replacement under the same name (a shrunk subnet range, a
# firewall's direction: ForceNew in the provider) must delete the old one first, or GCE answers 409.
# MTU, routing mode, a grown range and the firewall's source ranges update in place.
REPLACE_DELETE_FIRST = {"delete_before_replace": True}


class Network(Component):
    def __init__(self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:network:Network", name, opts)
        net = settings.network
        self.network = gcp.compute.Network(
            f"{name}-main",
            name=net.network_name,
            project=settings.project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            # TPU7x data-center networking wants jumbo frames.
            mtu=net.mtu,
            opts=self.child(**REPLACE_DELETE_FIRST),
        )
        self.tpu_subnet = gcp.compute.Subnetwork(
            f"{name}-tpu",
            name=net.tpu_subnet_name,
            project=settings.project,
            region=settings.region,
            network=self.network.id,
            ip_cidr_range=net.tpu_subnet_cidr,
            private_ip_google_access=True,
            opts=self.child(**REPLACE_DELETE_FIRST),
        )
        # The regional internal L7 Gateway (gke-l7-rilb) runs its Envoy proxies in this range.
        self.proxy_subnet = gcp.compute.Subnetwork(
            f"{name}-proxy",
            name=net.proxy_subnet_name,
            project=settings.project,
            region=settings.region,
            network=self.network.id,
            ip_cidr_range=net.proxy_subnet_cidr,
            purpose="REGIONAL_MANAGED_PROXY",
            role="ACTIVE",
            opts=self.child(**REPLACE_DELETE_FIRST),
        )
        self.firewall = gcp.compute.Firewall(
            f"{name}-allow-internal",
            name=net.firewall_name,
            project=settings.project,
            network=self.network.id,
            direction="INGRESS",
            allows=[{"protocol": "all"}],
            source_ranges=net.internal_source_ranges,
            opts=self.child(**REPLACE_DELETE_FIRST),
        )
        self.register_outputs(
            {
                "network": self.network.self_link,
                "tpuSubnet": self.tpu_subnet.self_link,
                "proxySubnet": self.proxy_subnet.self_link,
                "firewall": self.firewall.self_link,
            }
        )
