"""The VPC, its subnets, Cloud NAT and the internal firewall (components/network.py)."""

from __future__ import annotations

import ipaddress
import re

import pulumi
import pytest

from components.cli.mockrun import PROJECT
from components.model.config.network_settings import NetworkSettings
from components.model.diff import engine
from components.network import InternalFirewall, InternalFirewallArgs, Network, NetworkArgs
from tests.graph_queries import shape
from tests.harness import CLUSTER, Run, declare, run_program
from tests.stack_config import P, dev_settings

FIREWALL = "gcp:compute/firewall:Firewall"


def test_network(dev: Run) -> None:
    net = dev.get("gcp:compute/network:Network", "network-main")
    assert net.inputs["name"] == "qwen-serving-main"
    assert net.inputs["mtu"] == 8896
    assert net.inputs["routingMode"] == "REGIONAL"
    assert net.inputs["autoCreateSubnetworks"] is False

    tpu = dev.get("gcp:compute/subnetwork:Subnetwork", "network-tpu")
    assert [tpu.inputs[k] for k in ("name", "region", "ipCidrRange")] == [
        "qwen-serving-tpu",
        "us-central1",
        "10.10.0.0/18",
    ]
    assert tpu.inputs["privateIpGoogleAccess"] is True
    assert "purpose" not in tpu.inputs

    proxy = dev.get("gcp:compute/subnetwork:Subnetwork", "network-proxy")
    assert proxy.inputs["name"] == "qwen-serving-proxy"
    assert proxy.inputs["ipCidrRange"] == "172.16.0.0/26"
    assert (proxy.inputs["purpose"], proxy.inputs["role"]) == ("REGIONAL_MANAGED_PROXY", "ACTIVE")

    fw = dev.get(FIREWALL, "network-allow-internal")
    assert fw.inputs["name"] == "qwen-serving-allow-internal"
    cluster = dev.get(CLUSTER, "cluster-gke")
    assert cluster.urn in fw.property_dependencies["sourceRanges"], "the pods' range is the cluster's output"
    # Both subnets and the firewall hang off the VPC by reference, not by name.
    for child in (tpu, proxy, fw):
        assert net.urn in child.property_dependencies["network"]


def test_network_prefix_names_exactly_the_resources_it_names(dev: Run) -> None:
    described = re.findall(r"`(?:<prefix>)?-([a-z-]+)`", NetworkSettings.model_fields["prefix"].description or "")
    named = {str(r.inputs.get("name")) for r in dev.registrations if r.type.startswith("gcp:compute/")}
    assert {f"qwen-serving-{s}" for s in described} == {n for n in named if n.startswith("qwen-serving-")}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_internal_firewall_admits_only_the_vpcs_own_ranges(stack: str) -> None:
    run = run_program(stack=stack)
    assert run.error is None, run.error
    (fw,) = run.of_type(FIREWALL)
    tpu = run.get("gcp:compute/subnetwork:Subnetwork", "network-tpu").inputs["ipCidrRange"]
    proxy = run.get("gcp:compute/subnetwork:Subnetwork", "network-proxy").inputs["ipCidrRange"]
    pods = "10.4.0.0/14"  # what the harness's GKE allocates (clusterIpv4Cidr), read back from the cluster
    # Not the codelab's every protocol from 10.0.0.0/8 and 172.16.0.0/12: the VPC's own ranges (the TPU
    # subnet, the pods' range GKE allocated, the proxy-only subnet) and the protocols the cluster uses.
    assert fw.inputs["sourceRanges"] == [tpu, pods, proxy]
    assert fw.inputs["direction"] == "INGRESS"
    assert fw.inputs["allows"] == [{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}]
    # Nothing as wide as the codelab's 10.0.0.0/8 or 172.16.0.0/12.
    for source in fw.inputs["sourceRanges"]:
        assert ipaddress.ip_network(source).prefixlen >= 14, source


def test_the_firewall_follows_the_subnets_and_the_pods_range_in_place() -> None:
    moved = run_program({f"{P}:network": {"tpuSubnetCidr": "10.20.0.0/18", "proxySubnetCidr": "10.21.0.0/26"}})
    assert moved.error is None, moved.error
    (fw,) = moved.of_type(FIREWALL)
    assert fw.inputs["sourceRanges"] == ["10.20.0.0/18", "10.4.0.0/14", "10.21.0.0/26"]
    # In place: the provider PATCHes source_ranges; the firewall keeps its name and direction (ForceNew).
    assert fw.inputs["name"] == "qwen-serving-allow-internal" and fw.inputs["direction"] == "INGRESS"


# The URN the firewall had while the Network component declared it (the recorded runs' URN scheme).
FORMER_FIREWALL = f"urn:pulumi:dev::{PROJECT}::gke-tpu-slicing:network:Network${FIREWALL}::network-allow-internal"


def test_the_network_and_its_firewall_from_their_args_alone_register_as_in_the_program(dev: Run) -> None:
    s = dev_settings()
    net = s.network

    def body() -> None:
        network = Network(
            "network",
            NetworkArgs(
                project=s.project,
                region=s.region,
                network_name=net.network_name,
                mtu=net.mtu,
                tpu_subnet_name=net.tpu_subnet_name,
                tpu_subnet_cidr=net.tpu_subnet_cidr,
                proxy_subnet_name=net.proxy_subnet_name,
                proxy_subnet_cidr=net.proxy_subnet_cidr,
                egress={"router_name": net.router_name, "nat_name": net.nat_name, "log_filter": net.nat_logs},
                flow_logs=net.flow_logs.log_config() or {},
            ),
        )
        InternalFirewall(
            "network",
            InternalFirewallArgs(
                project=s.project,
                firewall_name=net.firewall_name,
                network=network.network.id,
                tpu_subnet_cidr=net.tpu_subnet_cidr,
                pod_range="10.4.0.0/14",  # what the harness's cluster reports
                proxy_subnet_cidr=net.proxy_subnet_cidr,
            ),
            pulumi.ResourceOptions(parent=network),
        )

    alone = declare(body)
    types = {r.type for r in alone if r.custom}
    assert FIREWALL in types and len(types) >= 5
    assert shape(alone, types) == shape(dev.registrations, types)


def test_the_firewall_keeps_the_urn_it_had_under_the_network(dev: Run) -> None:
    firewall = dev.get(FIREWALL, "network-allow-internal")
    assert dev.by_urn(firewall.parent).type == "gke-tpu-slicing:network:InternalFirewall"
    record = {"urn": firewall.urn, "aliases": firewall.aliases}
    assert FORMER_FIREWALL in engine._alias_urns(record)
