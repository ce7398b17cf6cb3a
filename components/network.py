"""Network: the VPC, the TPU subnet, the proxy-only subnet, the nodes' egress and the internal firewall.

ForceNew facts: components/model/diff/gcp_force_new.py; in-place updates and read-backs: model/diff/gcp.py,
readback.py.
"""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_gcp as gcp

from components.component import Component

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


class EgressArgs(TypedDict):
    project: str
    """The project of the router and the NAT."""
    region: str
    """The region of the router, the NAT and the subnet."""
    router_name: str
    """The Cloud Router's name."""
    nat_name: str
    """The Cloud NAT's name."""
    network: pulumi.Input[str]
    """The VPC's id."""
    subnetwork: pulumi.Input[str]
    """The id of the subnet whose ranges are NATed (the TPU subnet: the nodes and the pods)."""
    log_filter: NotRequired[str]
    """What the NAT logs: ALL, ERRORS_ONLY or TRANSLATIONS_ONLY (default: ERRORS_ONLY)."""


class Egress(Component):
    """Cloud Router + Cloud NAT: private nodes (no external IP) still reach image registries and the Hub.

    Google APIs (Artifact Registry, GCS) are reached through the TPU subnet's Private Google Access; other
    registries (registry.k8s.io, docker.io, ghcr.io) and Hugging Face need NAT. Only the TPU subnet is
    NATed, all its ranges (the nodes' primary range and the pods' secondary range GKE adds to it): the
    proxy-only subnet's Envoys need no egress.
    """

    def __init__(self, name: str, args: EgressArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:network:Egress", name, opts)
        self.router = gcp.compute.Router(
            f"{name}-router",
            name=args["router_name"],
            project=args["project"],
            region=args["region"],
            network=args["network"],
            opts=self.child(**REPLACE_DELETE_FIRST),
        )
        self.nat = gcp.compute.RouterNat(
            f"{name}-nat",
            name=args["nat_name"],
            project=args["project"],
            region=args["region"],
            router=self.router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[{"name": args["subnetwork"], "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
            # Always on: at least a pull or download that fails for want of NAT ports (OUT_OF_RESOURCES) shows in
            # Cloud Logging, and with ALL every connection the nodes and pods open to the internet. Always sent: a
            # NAT sent without one can read back with the API's default and plan a change on every run
            # (model/diff/readback.py, "RouterNat logConfig"). Updated in place (model/diff/gcp.py).
            log_config={"enable": True, "filter": args.get("log_filter", "ERRORS_ONLY")},
            opts=self.child(**REPLACE_DELETE_FIRST),
        )
        self.register_outputs({"router": self.router.self_link, "nat": self.nat.name})


class EgressNames(TypedDict):
    router_name: str
    """The Cloud Router's name."""
    nat_name: str
    """The Cloud NAT's name."""
    log_filter: NotRequired[str]
    """What the NAT logs: ALL, ERRORS_ONLY or TRANSLATIONS_ONLY (default: ERRORS_ONLY)."""


class NetworkArgs(TypedDict):
    project: str
    """The project of the VPC."""
    region: str
    """The region of the subnets (and of the NAT)."""
    network_name: str
    """The VPC's name."""
    mtu: int
    """The VPC's MTU (TPU7x data-center networking wants jumbo frames: 8896)."""
    tpu_subnet_name: str
    """The nodes' subnet's name."""
    tpu_subnet_cidr: str
    """The nodes' subnet's primary range."""
    proxy_subnet_name: str
    """The proxy-only subnet's name (the regional internal Gateway's Envoys)."""
    proxy_subnet_cidr: str
    """The proxy-only subnet's range."""
    egress: NotRequired[EgressNames]
    """The Cloud Router and NAT of private nodes (no external IP); none without."""
    flow_logs: NotRequired[dict[str, Any]]
    """The TPU subnet's VPC flow logs (the provider's `log_config`, FlowLogSettings.log_config); none without."""


class Network(Component):
    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:network:Network", name, opts)
        project, region = args["project"], args["region"]
        self.network = gcp.compute.Network(
            f"{name}-main",
            name=args["network_name"],
            project=project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            # TPU7x data-center networking wants jumbo frames.
            mtu=args["mtu"],
            opts=self.child(**REPLACE_DELETE_FIRST),
        )

        def subnet(kind: str, subnet_name: str, cidr: str, **extra: Any) -> gcp.compute.Subnetwork:
            return gcp.compute.Subnetwork(
                f"{name}-{kind}",
                name=subnet_name,
                project=project,
                region=region,
                network=self.network.id,
                ip_cidr_range=cidr,
                opts=self.child(**REPLACE_DELETE_FIRST),
                **extra,
            )

        # Flow logs on the TPU subnet only: GCE takes none on a proxy-only subnet (its log_config's description).
        logs = {"log_config": args["flow_logs"]} if args.get("flow_logs") else {}
        self.tpu_subnet = subnet(
            "tpu", args["tpu_subnet_name"], args["tpu_subnet_cidr"], private_ip_google_access=True, **logs
        )
        # The regional internal L7 Gateway (gke-l7-rilb) runs its Envoy proxies in this range.
        proxy = {"purpose": "REGIONAL_MANAGED_PROXY", "role": "ACTIVE"}
        self.proxy_subnet = subnet("proxy", args["proxy_subnet_name"], args["proxy_subnet_cidr"], **proxy)
        # Private nodes have no external IP: without NAT they could pull nothing but Google-hosted images.
        names = args.get("egress")
        self.egress = (
            Egress(
                f"{name}-egress",
                EgressArgs(
                    project=project,
                    region=region,
                    router_name=names["router_name"],
                    nat_name=names["nat_name"],
                    network=self.network.id,
                    subnetwork=self.tpu_subnet.id,
                    **({"log_filter": names["log_filter"]} if "log_filter" in names else {}),
                ),
                self.child(),
            )
            if names is not None
            else None
        )
        self.register_outputs(
            {
                "network": self.network.self_link,
                "tpuSubnet": self.tpu_subnet.self_link,
                "proxySubnet": self.proxy_subnet.self_link,
            }
        )


class InternalFirewallArgs(TypedDict):
    project: str
    """The project of the VPC."""
    firewall_name: str
    """The firewall's name."""
    network: pulumi.Input[str]
    """The VPC's id."""
    tpu_subnet_cidr: str
    """The nodes' subnet's range (the nodes, and the control plane's endpoint GKE places in it)."""
    pod_range: pulumi.Input[str]
    """The pods' range, which GKE allocates with the cluster (its `cluster_ipv4_cidr`)."""
    proxy_subnet_cidr: str
    """The proxy-only subnet's range (the Gateway's Envoys)."""


class InternalFirewall(Component):
    """The internal firewall: tcp, udp and icmp from the VPC's own ranges, never more.

    Its own component because the pods' range exists only with the cluster, which needs the network first.
    Its sources: the TPU subnet (the nodes, and the control plane's endpoint GKE places in the node subnet), the
    pods' range, the proxy-only subnet. The service range is not a source: Service IPs are translated on the
    sending node (GKE Dataplane V2), no packet on the VPC carries one.
    """

    def __init__(self, name: str, args: InternalFirewallArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:network:InternalFirewall", name, opts)
        self.firewall = gcp.compute.Firewall(
            f"{name}-allow-internal",
            name=args["firewall_name"],
            project=args["project"],
            network=args["network"],
            direction="INGRESS",
            allows=INTERNAL_ALLOWS,
            source_ranges=[args["tpu_subnet_cidr"], args["pod_range"], args["proxy_subnet_cidr"]],
            # The Network component declared it until it had a component of its own: under that component (this
            # one's parent, components/graph.py), it keeps the URN it had as its child.
            opts=self.child(
                aliases=[pulumi.Alias(parent=opts.parent)] if opts and opts.parent else None, **REPLACE_DELETE_FIRST
            ),
        )
        self.register_outputs({"firewall": self.firewall.self_link})
