"""Exposure: private nodes with Cloud NAT, who may reach the control plane, the internal firewall's sources.

Provider facts (what updates in place, what replaces) are cited next to the code in components/cluster.py
and components/network.py; here the recorded graph shows the program sends what those facts need.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest

from components.cli import mockrun
from components.teardown import REPLACE_KEYS
from tests.harness import Run, assert_rejected, merge, run_program, stack_file_config, warnings_of

P = "gke-tpu-slicing"
CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
ROUTER = "gcp:compute/router:Router"
NAT = "gcp:compute/routerNat:RouterNat"
FIREWALL = "gcp:compute/firewall:Firewall"
OFFICE = [{"cidrBlock": "198.51.100.0/24", "displayName": "office"}]
# Keys dev's control plane sets, removed (None) so that a test starts from the program's defaults.
NO_DEV_CONTROL_PLANE = {"unrestrictedPublicEndpoint": None, "privateEndpoint": None, "dnsEndpoint": None}
# The codelab's public deployment: nodes with external IPs, an IP endpoint open to every address (both opt-ins).
PUBLIC_DEV = {
    f"{P}:cluster": {
        "privateNodes": False,
        "controlPlane": {**NO_DEV_CONTROL_PLANE, "unrestrictedPublicEndpoint": True},
    }
}
# Private nodes and one authorized network instead of the public opt-ins.
PRIVATE_DEV = {
    f"{P}:cluster": {
        "privateNodes": True,
        "controlPlane": {**NO_DEV_CONTROL_PLANE, "authorizedNetworks": OFFICE},
    }
}


@pytest.fixture(scope="module", params=["staging", "prod"])
def private(request: pytest.FixtureRequest) -> Run:
    run = run_program(stack=request.param)
    assert run.error is None, run.error
    return run


def test_staging_and_prod_nodes_are_private_with_nat_egress(private: Run) -> None:
    cluster = private.get(CLUSTER, "cluster-gke")
    assert cluster.inputs["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": False}
    pools = private.of_type(POOL)
    assert len(pools) >= 2 and {p.name for p in pools} >= {"cluster-system"}
    for pool in pools:  # every pool says so itself: the system pool and each TPU pool
        assert pool.inputs["networkConfig"] == {"enablePrivateNodes": True}, pool.name
    (router,) = private.of_type(ROUTER)
    (nat,) = private.of_type(NAT)
    net = private.get("gcp:compute/network:Network", "network-main")
    subnet = private.get("gcp:compute/subnetwork:Subnetwork", "network-tpu")
    assert router.inputs["name"] == "qwen-serving-router" and router.inputs["region"] == "us-central1"
    assert net.urn in router.property_dependencies["network"]
    assert router.urn in nat.property_dependencies["router"]
    assert nat.inputs["natIpAllocateOption"] == "AUTO_ONLY"
    # Only the TPU subnet (nodes and the pods' secondary range), not the proxy-only subnet.
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert nat.inputs["subnetworks"] == [{"name": "network-tpu-id", "sourceIpRangesToNats": ["ALL_IP_RANGES"]}]
    assert subnet.urn in nat.property_dependencies["subnetworks"]
    # Sent, so what the API reads back matches (not Computed in the provider) and NAT errors are logged.
    assert nat.inputs["logConfig"] == {"enable": True, "filter": "ERRORS_ONLY"}
    # No node boots before it has egress: the cluster (and so its default pool and every pool) waits for NAT.
    assert private.depends_on(cluster, nat)
    assert all(private.depends_on(p, nat) for p in pools)


def test_staging_and_prod_control_planes_accept_only_their_authorized_networks(private: Run) -> None:
    cluster = private.get(CLUSTER, "cluster-gke").inputs
    # Only the listed range: not Google Cloud's public addresses (GKE's default decides when the flag is left
    # out, the provider sends it only when set); the public endpoint's list leaves in-VPC clients alone.
    assert cluster["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "198.51.100.0/24", "displayName": "deployers"}],
        "gcpPublicCidrsAccessEnabled": False,
        "privateEndpointEnforcementEnabled": False,
    }
    assert not any("unrestrictedPublicEndpoint" in w or "privateNodes" in w for w in warnings_of(private))


def test_dev_is_private_reached_through_the_dns_endpoint_and_its_preview_warns_of_nothing(dev: Run) -> None:
    # Nothing open to every address, nothing to list: no external IP on any node (Cloud NAT for egress), no
    # public IP endpoint, and GKE's DNS-based endpoint (IAM-checked) for people, CI and the program alike.
    cluster = dev.get(CLUSTER, "cluster-gke").inputs
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    assert all(p.inputs["networkConfig"] == {"enablePrivateNodes": True} for p in dev.of_type(POOL))
    assert len(dev.of_type(NAT)) == 1
    assert kubeconfig_cluster(dev) == {"server": "https://gke-a1b2c3d4e5f6-123456789012.us-central1.gke.goog"}
    # The settings' warnings (what is exposed); the capacity plan's and the version's are about other things.
    assert not [w for w in warnings_of(dev) if w.startswith(f"{P}:cluster.")], warnings_of(dev)


def test_the_public_opt_ins_say_what_is_exposed() -> None:
    public = run_program(PUBLIC_DEV)
    cluster = public.get(CLUSTER, "cluster-gke").inputs
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": False, "enablePrivateEndpoint": False}
    assert "masterAuthorizedNetworksConfig" not in cluster
    assert all(p.inputs["networkConfig"] == {"enablePrivateNodes": False} for p in public.of_type(POOL))
    assert public.of_type(ROUTER) == [] and public.of_type(NAT) == []
    warnings = warnings_of(public)
    assert any(
        "cluster.controlPlane.unrestrictedPublicEndpoint = true" in w and "any address on the internet" in w
        for w in warnings
    )
    assert any("cluster.privateNodes = false" in w and "external IP" in w for w in warnings)


def test_turning_private_nodes_on_updates_the_pools_it_does_not_replace_them() -> None:
    """Only `network_config.enable_private_nodes` (not ForceNew) and the cluster's private-node default
    (not ForceNew) change; every ForceNew input of every pool stays as it was."""
    dev, private = run_program(PUBLIC_DEV), run_program(PRIVATE_DEV)
    assert dev.error is None and private.error is None, (dev.error, private.error)
    before = {p.name: p.inputs for p in dev.of_type(POOL)}
    after = {p.name: p.inputs for p in private.of_type(POOL)}
    assert before.keys() == after.keys()
    for name in before:
        changed = {k for k in before[name].keys() | after[name].keys() if before[name].get(k) != after[name].get(k)}
        assert changed == {"networkConfig"}, (name, changed)
        assert after[name]["networkConfig"] == {"enablePrivateNodes": True}
    c0, c1 = dev.get(CLUSTER, "cluster-gke").inputs, private.get(CLUSTER, "cluster-gke").inputs
    changed = {k for k in c0.keys() | c1.keys() if c0.get(k) != c1.get(k)}
    assert changed == {"privateClusterConfig", "masterAuthorizedNetworksConfig"}
    assert "masterIpv4CidrBlock" not in c1["privateClusterConfig"], "ForceNew, and the legacy peering model"
    assert len(private.of_type(NAT)) == 1


def test_a_private_endpoint_with_an_authorized_network_is_accepted() -> None:
    run = run_program(
        {
            f"{P}:cluster": {
                "privateNodes": True,
                "controlPlane": {**NO_DEV_CONTROL_PLANE, "privateEndpoint": True, "authorizedNetworks": OFFICE},
            }
        }
    )
    cluster = run.get(CLUSTER, "cluster-gke").inputs
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    # With only the internal endpoint, the list is enforced there too: not every address in the VPC gets in.
    assert cluster["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "198.51.100.0/24", "displayName": "office"}],
        "gcpPublicCidrsAccessEnabled": False,
        "privateEndpointEnforcementEnabled": True,
    }
    assert not any("unrestricted" in w for w in warnings_of(run))


# ------------------------------------------------------------------------------------------------
# GKE's DNS-based endpoint: how `pulumi up` reaches a control plane with no public IP
#
# GKE: "Use only the DNS-based endpoint to access your control plane" (kubernetes-engine/docs/concepts/
# network-isolation). terraform-provider-google-beta release-8.0.0 @93c65b2d60, resource_container_cluster.go:
# `allow_external_traffic` is Optional, not Computed (line 2276), sent on create and on every endpoints update
# (lines 3202, 4105-4118, 7095-7110) and read back as stored (8047-8058); the update is in place.

K8S = "pulumi:providers:kubernetes"
GATE = "pulumi-python:dynamic/teardown:SliceGate"
DNS_ONLY = {
    f"{P}:cluster": {
        "privateNodes": True,
        "controlPlane": {"unrestrictedPublicEndpoint": None, "privateEndpoint": True, "dnsEndpoint": True},
    }
}


def kubeconfig_cluster(run: Run) -> dict[str, Any]:
    provider = run.get(K8S, "cluster-k8s")
    return json.loads(provider.inputs["kubeconfig"]["value"])["clusters"][0]["cluster"]


def test_every_stack_says_whether_the_dns_endpoint_takes_user_traffic() -> None:
    # Always sent: its parent blocks are Computed, so leaving it out would keep what GKE last had.
    public = run_program(PUBLIC_DEV)
    cluster = public.get(CLUSTER, "cluster-gke").inputs
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": False}}
    # Without it the program connects to the IP endpoint and trusts the cluster's CA.
    assert kubeconfig_cluster(public) == {
        "server": "https://203.0.113.10",
        "certificate-authority-data": "Q0EtY2VydA==",
    }


def test_a_private_control_plane_is_reached_through_the_dns_endpoint_without_authorized_networks(dev: Run) -> None:
    run = run_program(DNS_ONLY)
    assert run.error is None, run.error
    cluster = run.get(CLUSTER, "cluster-gke").inputs
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    # Authorized networks still sent (empty, enforced on the internal endpoint): only GKE's own ranges reach the
    # IP endpoint; people and CI come in through the DNS endpoint.
    assert cluster["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [],
        "gcpPublicCidrsAccessEnabled": False,
        "privateEndpointEnforcementEnabled": True,
    }
    # The kubeconfig targets GKE's per-cluster DNS name; no cluster CA (the DNS endpoint's certificate is
    # publicly trusted, and a pinned cluster CA would refuse it).
    assert kubeconfig_cluster(run) == {"server": "https://gke-a1b2c3d4e5f6-123456789012.us-central1.gke.goog"}
    # The identity is the same one the IP-endpoint stacks have: switching endpoints replaces no Kubernetes object.
    assert (
        run.get(K8S, "cluster-k8s").inputs["clusterIdentifier"]
        == dev.get(K8S, "cluster-k8s").inputs["clusterIdentifier"]
        == "cluster-gke-id@gke-a1b2c3d4e5f6-123456789012.us-central1.gke.goog"
    )


def test_offline_the_kubeconfig_names_the_dns_endpoint_as_a_marker() -> None:
    run = mockrun.execute(merge(stack_file_config("dev"), DNS_ONLY), stack="dev")
    assert run.error is None, run.error
    provider = next(r for r in run.registrations if r.type == K8S)
    server = json.loads(provider.inputs["kubeconfig"]["value"])["clusters"][0]["cluster"]
    assert server == {"server": "https://<cluster-gke.dnsEndpoint>"}


def test_turning_the_dns_endpoint_on_changes_one_cluster_block_and_the_kubeconfig_only() -> None:
    # Staging and prod have it on (CI's hosted runners reach them through it); from off to on:
    staging = run_program({f"{P}:cluster": {"controlPlane": {"dnsEndpoint": False}}}, stack="staging")
    dns = run_program(stack="staging")
    assert staging.error is None and dns.error is None, (staging.error, dns.error)
    before = {(r.type, r.name): r.inputs for r in staging.registrations}
    after = {(r.type, r.name): r.inputs for r in dns.registrations}
    assert before.keys() == after.keys()
    changed = {key for key in before if before[key] != after[key]}
    gates = {key for key in changed if key[0] == GATE}
    assert len(gates) == len(staging.of_type(GATE)) > 0  # the teardown gates carry the kubeconfig too
    assert changed - gates == {(CLUSTER, "cluster-gke"), (K8S, "cluster-k8s")}

    def keys_changed(key: tuple[str, str]) -> set[str]:
        old, new = before[key], after[key]
        return {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}

    assert keys_changed((CLUSTER, "cluster-gke")) == {"controlPlaneEndpointsConfig"}
    # Only the kubeconfig: the provider's identity stays, and a gate replaces only on its pool or cluster.
    assert all(keys_changed(key) == {"kubeconfig"} for key in {(K8S, "cluster-k8s"), *gates})
    assert not {"kubeconfig"} & set(REPLACE_KEYS)


# ------------------------------------------------------------------------------------------------
# Settings that cannot work, or would expose the control plane without saying so


def _cp(control_plane: dict[str, Any]) -> dict[str, Any]:
    """The program's control-plane defaults with public nodes (the stricter range limit), plus `control_plane`."""
    return {f"{P}:cluster": {"privateNodes": False, "controlPlane": {**NO_DEV_CONTROL_PLANE, **control_plane}}}


BAD = [
    (
        "public endpoint, nobody authorized, no opt-in",
        _cp({}),
        ["cluster.controlPlane.authorizedNetworks = []", "unrestrictedPublicEndpoint: true"],
    ),
    (
        "private endpoint nobody can reach",
        _cp({"privateEndpoint": True}),
        ["cluster.controlPlane.authorizedNetworks = []", "privateEndpoint is true", "pulumi up", "dnsEndpoint: true"],
    ),
    (
        "every address as an authorized network",
        _cp({"authorizedNetworks": [{"cidrBlock": "0.0.0.0/0"}]}),
        ["cluster.controlPlane.authorizedNetworks.0.cidrBlock = '0.0.0.0/0'", "unrestrictedPublicEndpoint"],
    ),
    (
        "host bits set",
        _cp({"authorizedNetworks": [{"cidrBlock": "198.51.100.7/24"}]}),
        ["cluster.controlPlane.authorizedNetworks.0.cidrBlock = '198.51.100.7/24'", "no host bits"],
    ),
    (
        "not IPv4",
        _cp({"authorizedNetworks": [{"cidrBlock": "2001:db8::/32"}]}),
        ["authorizedNetworks.0.cidrBlock = '2001:db8::/32'", "IPv4"],
    ),
    (
        "opt-in beside authorized networks",
        _cp({"unrestrictedPublicEndpoint": True, "authorizedNetworks": OFFICE}),
        ["cluster.controlPlane.unrestrictedPublicEndpoint = true", "198.51.100.0/24"],
    ),
    (
        "opt-in with a private endpoint",
        _cp({"unrestrictedPublicEndpoint": True, "privateEndpoint": True}),
        ["cluster.controlPlane.unrestrictedPublicEndpoint = true", "no public endpoint"],
    ),
    (
        "more ranges than GKE allows with public nodes",
        _cp({"authorizedNetworks": [{"cidrBlock": f"10.{i}.0.0/16"} for i in range(51)]}),
        ["cluster.controlPlane.authorizedNetworks = '51 ranges'", "at most 50", "public nodes"],
    ),
    ("unknown key", _cp({"authorisedNetworks": OFFICE}), ["controlPlane.authorisedNetworks", "authorizedNetworks"]),
]


@pytest.mark.parametrize(("case", "overrides", "expected"), BAD, ids=[c[0] for c in BAD])
def test_control_plane_settings_that_cannot_work_are_refused_by_name(
    case: str, overrides: dict[str, Any], expected: list[str]
) -> None:
    assert_rejected(overrides, expected, prefix="invalid stack configuration (1 problem)")


def test_a_hundred_ranges_are_allowed_with_private_nodes() -> None:
    ranges = [{"cidrBlock": f"10.{i}.0.0/16"} for i in range(100)]
    private = {"privateNodes": True, "controlPlane": NO_DEV_CONTROL_PLANE}
    run = run_program(
        {f"{P}:cluster": {**private, "controlPlane": {**private["controlPlane"], "authorizedNetworks": ranges}}}
    )
    assert run.error is None, run.error
    too_many = [*ranges, {"cidrBlock": "10.200.0.0/16"}]
    assert_rejected(
        {f"{P}:cluster": {**private, "controlPlane": {**private["controlPlane"], "authorizedNetworks": too_many}}},
        ["cluster.controlPlane.authorizedNetworks = '101 ranges'", "at most 100", "private nodes"],
    )


# ------------------------------------------------------------------------------------------------
# The internal firewall: the VPC's own ranges, the protocols the cluster uses


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_internal_firewall_admits_only_the_vpcs_own_ranges(stack: str) -> None:
    run = run_program(stack=stack)
    assert run.error is None, run.error
    (fw,) = run.of_type(FIREWALL)
    tpu = run.get("gcp:compute/subnetwork:Subnetwork", "network-tpu").inputs["ipCidrRange"]
    proxy = run.get("gcp:compute/subnetwork:Subnetwork", "network-proxy").inputs["ipCidrRange"]
    pods = "10.4.0.0/14"  # what the harness's GKE allocates (clusterIpv4Cidr), read back from the cluster
    assert fw.inputs["sourceRanges"] == [tpu, pods, proxy]
    assert fw.inputs["direction"] == "INGRESS"
    assert {a["protocol"] for a in fw.inputs["allows"]} == {"tcp", "udp", "icmp"}
    assert all("ports" not in a for a in fw.inputs["allows"])
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


def test_the_old_wide_source_key_is_gone() -> None:
    assert_rejected(
        {f"{P}:network": {"internalSourceRanges": ["10.0.0.0/8"]}},
        ["network.internalSourceRanges", "unknown key"],
        prefix="invalid stack configuration (1 problem)",
    )
