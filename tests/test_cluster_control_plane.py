"""The cluster's control plane and nodes as exposed: private nodes with NAT egress, the IP and DNS endpoints,
authorized networks, the settings refused; and the Kubernetes provider that reaches the cluster through them."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
import yaml

from components.cli import mockrun
from components.teardown import REPLACE_KEYS
from tests.graph_queries import inputs_of
from tests.harness import (
    CLUSTER,
    POOL,
    UNKNOWN,
    Mocks,
    Run,
    assert_rejected,
    is_secret,
    is_unknown,
    ok,
    run_program,
    warnings_of,
)
from tests.stack_config import ROOT, P, merge, stack_file_config

ROUTER = "gcp:compute/router:Router"
NAT = "gcp:compute/routerNat:RouterNat"
K8S = "pulumi:providers:kubernetes"
GATE = "pulumi-python:dynamic/teardown:SliceGate"
OFFICE = [{"cidrBlock": "198.51.100.0/24", "displayName": "office"}]
DNS_SERVER = {"server": "https://gke-a1b2c3d4e5f6-123456789012.us-central1.gke.goog"}
IDENTIFIER = "cluster-gke-id@gke-a1b2c3d4e5f6-123456789012.us-central1.gke.goog"


class RotatedIp(Mocks):
    """The same cluster after an IP rotation: a new IP endpoint, the same DNS endpoint."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        id_, state = super().new_resource(args)
        if args.typ == CLUSTER:
            state["endpoint"] = "203.0.113.99"
        return id_, state


def identifier(run: Run) -> str:
    assert run.error is None, run.error
    return run.get(K8S, "cluster-k8s").inputs["clusterIdentifier"]


def _cp(control_plane: dict[str, Any], private_nodes: bool = False) -> dict[str, Any]:
    """The program's control-plane defaults (dev's keys removed) plus `control_plane`; public nodes by default
    (the stricter range limit)."""
    defaults = {"unrestrictedPublicEndpoint": None, "privateEndpoint": None, "dnsEndpoint": None}
    return {f"{P}:cluster": {"privateNodes": private_nodes, "controlPlane": {**defaults, **control_plane}}}


# The codelab's public deployment: nodes with external IPs, an IP endpoint open to every address (both opt-ins).
PUBLIC_DEV = _cp({"unrestrictedPublicEndpoint": True})
# Private nodes and one authorized network instead of the public opt-ins.
PRIVATE_DEV = _cp({"authorizedNetworks": OFFICE}, private_nodes=True)
DNS_ONLY = _cp({"privateEndpoint": True, "dnsEndpoint": True}, private_nodes=True)


@pytest.fixture(scope="module", params=["staging", "prod"])
def private(request: pytest.FixtureRequest) -> Run:
    return ok(stack=request.param)


def kubeconfig_cluster(run: Run) -> dict[str, Any]:
    provider = run.get(K8S, "cluster-k8s")
    return json.loads(provider.inputs["kubeconfig"]["value"])["clusters"][0]["cluster"]


def changed_keys(old: dict[str, Any], new: dict[str, Any]) -> set[str]:
    return {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}


def authorized(cidr_blocks: list[dict[str, str]], enforced_on_the_internal_endpoint: bool) -> dict[str, Any]:
    """The authorized networks GKE is sent: only the listed ranges, not Google Cloud's public addresses (GKE's
    default decides when the flag is left out, the provider sends it only when set)."""
    return {
        "cidrBlocks": cidr_blocks,
        "gcpPublicCidrsAccessEnabled": False,
        "privateEndpointEnforcementEnabled": enforced_on_the_internal_endpoint,
    }


CONTROL_PLANE_BAD = [
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
    (
        "more ranges than GKE allows with private nodes",
        _cp({"authorizedNetworks": [{"cidrBlock": f"10.{i}.0.0/16"} for i in range(101)]}, private_nodes=True),
        ["cluster.controlPlane.authorizedNetworks = '101 ranges'", "at most 100", "private nodes"],
    ),
]


def test_kubernetes_provider_and_its_identity_which_changes_with_the_cluster_instance_only(dev: Run) -> None:
    provider = dev.get(K8S, "cluster-k8s")
    # The cluster instance: its id and GKE's per-cluster DNS endpoint (its replacement: below).
    assert provider.inputs["clusterIdentifier"] == IDENTIFIER
    assert dev.get(CLUSTER, "cluster-gke").urn in provider.property_dependencies["clusterIdentifier"]
    # A cluster replaced under the same name gets a new DNS endpoint: a new provider, new objects.
    assert identifier(run_program(mocks=Mocks(cluster_hash="0f0f0f0f0f0f"))) != identifier(dev)
    # An IP rotation of the same cluster does not replace every Kubernetes object.
    assert identifier(run_program(mocks=RotatedIp())) == identifier(dev)
    assert is_secret(provider.inputs["kubeconfig"])
    kubeconfig = json.loads(provider.inputs["kubeconfig"]["value"])
    # dev reaches the control plane through GKE's DNS-based endpoint (it has no public IP endpoint), which
    # presents a publicly trusted certificate: no CA in the kubeconfig.
    assert kubeconfig["clusters"][0]["cluster"] == DNS_SERVER
    assert kubeconfig["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert dev.get(CLUSTER, "cluster-gke").urn in provider.property_dependencies["kubeconfig"]
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["config"]["pulumi:disable-default-providers"] == ["kubernetes"]


def test_first_preview_of_a_fresh_stack_with_unknown_kubeconfig() -> None:
    run = ok(preview=True, mocks=Mocks(known_cluster=False))
    provider = run.get(K8S, "cluster-k8s")
    assert is_unknown(provider.inputs.get("kubeconfig", UNKNOWN))
    # The identifier names a cluster instance, so it is unknown until the cluster exists.
    assert is_unknown(provider.inputs.get("clusterIdentifier", UNKNOWN))
    assert {r.type for r in run.registrations} >= {CLUSTER, POOL, K8S}


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
    # Sent, so what the API reads back matches (not Computed in the provider); every translation and error logged.
    assert nat.inputs["logConfig"] == {"enable": True, "filter": "ALL"}
    # No node boots before it has egress: the cluster (and so its default pool and every pool) waits for NAT.
    assert private.depends_on(cluster, nat)
    assert all(private.depends_on(p, nat) for p in pools)


def test_staging_and_prod_control_planes_accept_only_their_authorized_networks(private: Run) -> None:
    cluster = private.get(CLUSTER, "cluster-gke").inputs
    # The public endpoint's list leaves in-VPC clients alone.
    deployers = [{"cidrBlock": "198.51.100.0/24", "displayName": "deployers"}]
    assert cluster["masterAuthorizedNetworksConfig"] == authorized(deployers, False)
    assert not any("unrestrictedPublicEndpoint" in w or "privateNodes" in w for w in warnings_of(private))


def test_dev_is_private_reached_through_the_dns_endpoint_and_its_preview_warns_of_nothing(dev: Run) -> None:
    # Nothing open to every address, nothing to list: no external IP on any node (Cloud NAT for egress), no
    # public IP endpoint, and GKE's DNS-based endpoint (IAM-checked) for people, CI and the program alike.
    cluster = dev.get(CLUSTER, "cluster-gke").inputs
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    assert all(p.inputs["networkConfig"] == {"enablePrivateNodes": True} for p in dev.of_type(POOL))
    assert len(dev.of_type(NAT)) == 1
    assert kubeconfig_cluster(dev) == DNS_SERVER
    # The settings' warnings (what is exposed); the capacity plan's and the version's are about other things.
    assert not [w for w in warnings_of(dev) if w.startswith(f"{P}:cluster.")], warnings_of(dev)


def test_the_public_opt_ins_say_what_is_exposed() -> None:
    public = run_program(PUBLIC_DEV)
    cluster = public.get(CLUSTER, "cluster-gke").inputs
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": False, "enablePrivateEndpoint": False}
    assert "masterAuthorizedNetworksConfig" not in cluster
    # Always sent: its parent blocks are Computed, so leaving it out would keep what GKE last had.
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": False}}
    # Without it the program connects to the IP endpoint and trusts the cluster's CA.
    assert kubeconfig_cluster(public) == {
        "server": "https://203.0.113.10",
        "certificate-authority-data": "Q0EtY2VydA==",
    }
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
    dev, private = ok(PUBLIC_DEV), ok(PRIVATE_DEV)
    before = {p.name: p.inputs for p in dev.of_type(POOL)}
    after = {p.name: p.inputs for p in private.of_type(POOL)}
    assert before.keys() == after.keys()
    for name in before:
        changed = changed_keys(before[name], after[name])
        assert changed == {"networkConfig"}, (name, changed)
        assert after[name]["networkConfig"] == {"enablePrivateNodes": True}
    c0, c1 = dev.get(CLUSTER, "cluster-gke").inputs, private.get(CLUSTER, "cluster-gke").inputs
    assert changed_keys(c0, c1) == {"privateClusterConfig", "masterAuthorizedNetworksConfig"}
    assert "masterIpv4CidrBlock" not in c1["privateClusterConfig"], "ForceNew, and the legacy peering model"
    assert len(private.of_type(NAT)) == 1


def test_a_private_endpoint_with_an_authorized_network_is_accepted() -> None:
    run = run_program(_cp({"privateEndpoint": True, "authorizedNetworks": OFFICE}, private_nodes=True))
    cluster = run.get(CLUSTER, "cluster-gke").inputs
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    # With only the internal endpoint, the list is enforced there too: not every address in the VPC gets in.
    assert cluster["masterAuthorizedNetworksConfig"] == authorized(OFFICE, True)
    assert not any("unrestricted" in w for w in warnings_of(run))


def test_a_private_control_plane_is_reached_through_the_dns_endpoint_without_authorized_networks(dev: Run) -> None:
    run = ok(DNS_ONLY)
    cluster = run.get(CLUSTER, "cluster-gke").inputs
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    # Authorized networks still sent (empty, enforced on the internal endpoint): only GKE's own ranges reach the
    # IP endpoint; people and CI come in through the DNS endpoint.
    assert cluster["masterAuthorizedNetworksConfig"] == authorized([], True)
    # The kubeconfig targets GKE's per-cluster DNS name; no cluster CA (the DNS endpoint's certificate is
    # publicly trusted, and a pinned cluster CA would refuse it).
    assert kubeconfig_cluster(run) == DNS_SERVER
    # The identity is the same one the IP-endpoint stacks have: switching endpoints replaces no Kubernetes object.
    assert identifier(run) == identifier(dev) == IDENTIFIER


def test_offline_the_kubeconfig_names_the_dns_endpoint_as_a_marker() -> None:
    run = mockrun.execute(merge(stack_file_config("dev"), DNS_ONLY), stack="dev")
    assert run.error is None, run.error
    provider = next(r for r in run.registrations if r.type == K8S)
    server = json.loads(provider.inputs["kubeconfig"]["value"])["clusters"][0]["cluster"]
    assert server == {"server": "https://<cluster-gke.dnsEndpoint>"}


def test_turning_the_dns_endpoint_on_changes_one_cluster_block_and_the_kubeconfig_only() -> None:
    # Staging and prod have it on (CI's hosted runners reach them through it); from off to on:
    staging = ok({f"{P}:cluster": {"controlPlane": {"dnsEndpoint": False}}}, stack="staging")
    dns = ok(stack="staging")
    before, after = inputs_of(staging), inputs_of(dns)
    assert before.keys() == after.keys()
    changed = {key for key in before if before[key] != after[key]}
    gates = {key for key in changed if key[0] == GATE}
    assert len(gates) == len(staging.of_type(GATE)) > 0  # the teardown gates carry the kubeconfig too
    assert changed - gates == {(CLUSTER, "cluster-gke"), (K8S, "cluster-k8s")}
    assert changed_keys(*(inputs[CLUSTER, "cluster-gke"] for inputs in (before, after))) == {
        "controlPlaneEndpointsConfig"
    }
    # Only the kubeconfig: the provider's identity stays, and a gate replaces only on its pool or cluster.
    assert all(changed_keys(before[key], after[key]) == {"kubeconfig"} for key in {(K8S, "cluster-k8s"), *gates})
    assert not {"kubeconfig"} & set(REPLACE_KEYS)


@pytest.mark.parametrize(("case", "overrides", "expected"), CONTROL_PLANE_BAD, ids=[c[0] for c in CONTROL_PLANE_BAD])
def test_cluster_settings_that_cannot_work_are_refused_by_name(
    case: str, overrides: dict[str, Any], expected: list[str]
) -> None:
    assert_rejected(overrides, expected, prefix="invalid stack configuration (1 problem)")
