"""Network: the VPC, the TPU subnet, the proxy-only subnet, the nodes' egress and the internal firewall.

Provider facts cited below are from terraform-provider-google-beta release-8.0.0 @93c65b2d60 (what
pulumi-gcp 10.2 bridges), google-beta/services/compute/.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.base import Component
from components.model.settings import Settings

# Every resource here has a fixed name. A replacement under the same name (a shrunk subnet range, a
# firewall's direction: ForceNew in the provider) must delete the old one first, or GCE answers 409.
# MTU, routing mode, a grown range and the firewall's source ranges update in place.
REPLACE_DELETE_FIRST = {"delete_before_replace": True}

# The internal firewall's protocols, each for a reason (README "Security"). Sources are the VPC's own
# ranges only (internal_sources): the nodes' subnet, the pods' range GKE allocated, the proxy-only subnet.
#   tcp:  every in-cluster connection that crosses nodes: vLLM's API and KV transfer between prefill and
#         decode, the router's endpoint picker, webhooks, kubelet, metrics scraping; and the Gateway's
#         Envoy proxies (proxy-only subnet) connecting to the endpoint picker and the model servers.
#   udp:  DNS between pods and kube-dns / NodeLocal DNSCache on other nodes.
#   icmp: path-MTU discovery on the 8896-byte MTU (a dropped "fragmentation needed" stalls large
#         transfers) and ping when diagnosing.
# The old rule allowed every protocol (esp, ah, sctp, gre, ...) from 10.0.0.0/8 and 172.16.0.0/12.
INTERNAL_ALLOWS = [{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}]


class Egress(Component):
    """Cloud Router + Cloud NAT: private nodes (no external IP) still reach image registries and the Hub.

    Google APIs (Artifact Registry, GCS) are reached through the TPU subnet's Private Google Access; other
    registries (registry.k8s.io, docker.io, ghcr.io) and Hugging Face need NAT. Only the TPU subnet is
    NATed, all its ranges (the nodes' primary range and the pods' secondary range GKE adds to it): the
    proxy-only subnet's Envoys need no egress.
    """

    def __init__(
        self,
        name: str,
        settings: Settings,
        network: gcp.compute.Network,
        subnet: gcp.compute.Subnetwork,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gke-tpu-slicing:network:Egress", name, opts)
        net = settings.network
        # name, network and region are ForceNew (resource_compute_router.go lines 163-166, 292-295, 319-323).
        self.router = gcp.compute.Router(
            f"{name}-router",
            name=net.router_name,
            project=settings.project,
            region=settings.region,
            network=network.id,
            opts=self.child(**REPLACE_DELETE_FIRST),
        )
        # name, router and region are ForceNew (resource_compute_router_nat.go lines 304-315, 471-475); the
        # subnetwork list updates in place (resourceComputeRouterNatUpdate).
        self.nat = gcp.compute.RouterNat(
            f"{name}-nat",
            name=net.nat_name,
            project=settings.project,
            region=settings.region,
            router=self.router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[{"name": subnet.id, "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
            # Errors only: a node whose pull or download fails for want of NAT ports (OUT_OF_RESOURCES) or an
            # endpoint NAT drops shows in Cloud Logging. Always sent: `log_config` is Optional and not Computed
            # (resource_compute_router_nat.go lines 407-427) and read back as the API returns it (lines 1644-1658);
            # the API can answer `{enable: false, filter: ALL}` for a NAT sent without one, which then plans as a
            # change on every run (the `log_config { enable = false -> null }` diff reported in
            # metro-digital/terraform-google-cf-projectcfg#12). Updates in place (PATCH of the router, line 1317).
            log_config={"enable": True, "filter": "ERRORS_ONLY"},
            opts=self.child(**REPLACE_DELETE_FIRST),
        )
        self.register_outputs({"router": self.router.self_link, "nat": self.nat.name})


class Network(Component):
    def __init__(self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:network:Network", name, opts)
        self._settings, self._prefix = settings, name
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
        # Private nodes have no external IP: without NAT they could pull nothing but Google-hosted images.
        self.egress = (
            Egress(f"{name}-egress", settings, self.network, self.tpu_subnet, self.child())
            if settings.cluster.private_nodes
            else None
        )
        self.firewall: gcp.compute.Firewall | None = None
        self.register_outputs(
            {
                "network": self.network.self_link,
                "tpuSubnet": self.tpu_subnet.self_link,
                "proxySubnet": self.proxy_subnet.self_link,
            }
        )

    @property
    def egress_ready(self) -> list[pulumi.Resource]:
        """What nodes wait for: the NAT, so the first image pull of a private node does not time out."""
        return [self.egress.nat] if self.egress is not None else []

    def allow_internal(self, pod_range: pulumi.Input[str]) -> gcp.compute.Firewall:
        """The internal firewall, once the pods' range is known (GKE allocates it with the cluster).

        Its sources are the VPC's own ranges, never more: the TPU subnet (the nodes, and the control plane's
        endpoint GKE places in the node subnet), the pods' range, the proxy-only subnet. The service range is
        not a source: Service IPs are translated on the sending node (GKE Dataplane V2), no packet on the VPC
        carries one. `source_ranges` and `allow` update in place (PATCH); only name, direction, params and
        project are ForceNew (resource_compute_firewall.go lines 249, 306, 341, 476; update at line 819).
        """
        net = self._settings.network
        self.firewall = gcp.compute.Firewall(
            f"{self._prefix}-allow-internal",
            name=net.firewall_name,
            project=self._settings.project,
            network=self.network.id,
            direction="INGRESS",
            allows=INTERNAL_ALLOWS,
            source_ranges=[net.tpu_subnet_cidr, pod_range, net.proxy_subnet_cidr],
            opts=self.child(**REPLACE_DELETE_FIRST),
        )
        return self.firewall
