"""Who may reach which pod of the workload namespace, evaluated from the NetworkPolicies the program declares
(components/network_policies.py) with the API's semantics (tests/network_policy.py)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from components.cli import charts
from components.cli.render import redact
from components.model.keys import JOBSET_NAME_LABEL, WORKER_INDEX_LABEL
from components.network_policies import EPP_EXT_PROC_PORT, EPP_HEALTH_PORT, EPP_METRICS_PORT, GOOGLE_PROBE_RANGES
from components.vllm_containers import KV_TRANSFER_PORT, ROUTER_PORT, SIDE_CHANNEL_PORT
from tests import upstream
from tests.graph_queries import lws, templates
from tests.harness import Run, ok
from tests.network_policy import Source, allowed
from tests.serving_fixtures import router_values
from tests.stack_config import FIXED_SERVING, P, merge

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NS = "llm-d-pd-disaggregation"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
RAY = 6379  # Ray's GCS; any port stands for the dynamic ones
EPHEMERAL = 45000  # a port a bulk-transport listener may bind


def policies(run: Run) -> list[dict[str, Any]]:
    return [r.plain() for r in run.of_type(POLICY)]


def pod(run: Run, role: str, index: int, lws_name: str = "set-a") -> dict[str, str]:
    """The labels LWS gives a pod of a role's group: its template's, its index, the LWS's name."""
    template = templates(lws(run, role))["leader" if index == 0 else "worker"]
    return {**template["metadata"]["labels"], WORKER_INDEX_LABEL: str(index), LWS_NAME: lws_name}


def epp(run: Run) -> dict[str, str]:
    return {"llm-d-router-gateway": "pd-disaggregation-epp"}


def proxy_ip(run: Run) -> str:
    """An address of the proxy-only subnet the run declares (network.proxySubnetCidr)."""
    cidr = run.get("gcp:compute/subnetwork:Subnetwork", "network-proxy").plain()["ipCidrRange"]
    return str(ipaddress.ip_network(cidr).network_address + 5)


COLLECTOR = Source({"app.kubernetes.io/name": "collector"}, "gmp-system")
STRANGER = Source({"app": "anything"}, "default")
NEIGHBOUR = Source({"app": "anything"}, NS)
PROBER = Source(ip="35.191.3.4")


@pytest.fixture(scope="module")
def dev() -> Run:
    return ok()


def reach(run: Run, target: dict[str, str], source: Source, port: int) -> bool:
    return allowed(policies(run), NS, target, source, port)


def test_a_group_reaches_itself_and_decode_pulls_from_prefill_on_any_port(dev: Run) -> None:
    """Ray's ports are dynamic and a policy cannot pair a pod with its own group: a role's pods reach the role; decode
    reaches prefill (KV transfer to 9100, 9600 and ephemeral bulk-transport listeners; the sidecar's prefill request
    to 8000); nothing reaches back from prefill to decode."""
    for role in ("prefill", "decode"):
        leader, worker = pod(dev, role, 0), pod(dev, role, 3)
        assert reach(dev, worker, Source(leader, NS), RAY) and reach(dev, leader, Source(worker, NS), EPHEMERAL)
        # A burst LeaderWorkerSet of the same role, built by the same builder: covered by the same rules.
        assert reach(dev, pod(dev, role, 1, "set-b"), Source(leader, NS), RAY)
    decode, prefill = pod(dev, "decode", 2), pod(dev, "prefill", 2)
    for port in (ROUTER_PORT, KV_TRANSFER_PORT, SIDE_CHANNEL_PORT, EPHEMERAL):
        assert reach(dev, prefill, Source(decode, NS), port), port
    assert not reach(dev, decode, Source(prefill, NS), KV_TRANSFER_PORT)
    assert not reach(dev, pod(dev, "decode", 0), Source(prefill, NS), ROUTER_PORT)


def test_only_the_load_balancer_and_the_picker_reach_the_pools_port_of_the_leaders(dev: Run) -> None:
    (target,) = router_values(dev)["router"]["modelServers"]["targetPorts"]
    assert target["number"] == ROUTER_PORT
    proxy = Source(ip=proxy_ip(dev))
    for role in ("prefill", "decode"):
        leader, worker = pod(dev, role, 0), pod(dev, role, 1)
        for source in (proxy, PROBER, Source(epp(dev), NS)):
            assert reach(dev, leader, source, ROUTER_PORT), (role, source)
            assert not reach(dev, worker, source, ROUTER_PORT), (role, source)
            assert not reach(dev, leader, source, KV_TRANSFER_PORT), (role, source)
        # (The collectors reach prefill's 8000 too: its vLLM serves /metrics there.)
        for source in (STRANGER, NEIGHBOUR, Source(ip="10.0.0.9"), *([COLLECTOR] if role == "decode" else [])):
            assert not reach(dev, leader, source, ROUTER_PORT), (role, source)


def test_the_collectors_reach_each_roles_metrics_port_and_nothing_else(dev: Run) -> None:
    assert reach(dev, pod(dev, "prefill", 0), COLLECTOR, 8000)
    assert reach(dev, pod(dev, "decode", 0), COLLECTOR, 8200)
    assert not reach(dev, pod(dev, "decode", 0), COLLECTOR, 8000)
    assert not reach(dev, pod(dev, "decode", 1), COLLECTOR, 8200)
    assert reach(dev, epp(dev), COLLECTOR, EPP_METRICS_PORT)
    assert not reach(dev, epp(dev), Source({"app.kubernetes.io/name": "collector"}, NS), EPP_METRICS_PORT)
    quiet = ok(merge(FIXED_SERVING, {f"{P}:observability": {"scraping": False}}))
    assert not reach(quiet, pod(quiet, "prefill", 0), COLLECTOR, 8000)
    assert not reach(quiet, epp(quiet), COLLECTOR, EPP_METRICS_PORT)


def test_the_picker_takes_the_load_balancers_ext_proc_and_health_checks_only(dev: Run) -> None:
    proxy = Source(ip=proxy_ip(dev))
    for source in (proxy, PROBER):
        assert reach(dev, epp(dev), source, EPP_EXT_PROC_PORT) and reach(dev, epp(dev), source, EPP_HEALTH_PORT)
    assert not reach(dev, epp(dev), NEIGHBOUR, EPP_EXT_PROC_PORT)
    assert not reach(dev, epp(dev), Source(pod(dev, "decode", 0), NS), EPP_EXT_PROC_PORT)


def test_the_global_class_has_no_proxy_subnet_and_its_front_ends_are_the_probe_ranges() -> None:
    run = ok({f"{P}:serving": {"gateway": {"className": "gke-l7-global-external-managed", "exposeToInternet": True}}})
    leader = pod(run, "prefill", 0)
    assert not reach(run, leader, Source(ip=proxy_ip(run)), ROUTER_PORT)
    assert all(
        reach(run, leader, Source(ip=r.replace("0/", "9/").split("/")[0]), ROUTER_PORT) for r in GOOGLE_PROBE_RANGES
    )


def test_the_namespace_denies_by_default_and_jobsets_reach_jobsets(dev: Run) -> None:
    demo = {JOBSET_NAME_LABEL: "kueue-jobset-simple-subslicing"}
    team = {JOBSET_NAME_LABEL: "a-teams-training", "app": "x"}
    assert reach(dev, demo, Source(team, NS), 8476) and reach(dev, team, Source(demo, NS), 12345)
    assert not reach(dev, demo, Source(pod(dev, "prefill", 0), NS), 8476)
    assert not reach(dev, pod(dev, "prefill", 1), Source(team, NS), RAY)
    assert not reach(dev, demo, STRANGER, 8476)
    # Anything else in the namespace accepts nothing until a policy of its own allows it.
    assert not reach(dev, {"app": "other"}, NEIGHBOUR, 80)
    # Serving off: the deny and the JobSets' rule stay with the namespace.
    demos_only = ok({f"{P}:serving": {"enabled": False}})
    assert {p["metadata"]["name"] for p in policies(demos_only)} == {"default-deny-ingress", "jobset-pods"}


def test_the_deny_comes_after_every_allow_rule_and_names_no_leaderworkerset(dev: Run) -> None:
    deny = next(r for r in dev.of_type(POLICY) if r.plain()["metadata"]["name"] == "default-deny-ingress")
    for reg in dev.of_type(POLICY):
        if reg is not deny:  # serving's rules and the JobSets' (a running demo keeps its pods' connections)
            assert dev.depends_on(deny, reg), reg.name
        assert LWS_NAME not in str(reg.plain()["spec"]), reg.name


def test_the_pickers_ports_are_the_rendered_charts() -> None:
    upstream.require("charts")
    run = ok()
    (release,) = [r for r in charts.releases(run.registrations, redact) if r.resource == "serving-router"]
    (deploy,) = [o for o in charts.render_release(release).objects if o["kind"] == "Deployment"]
    (container,) = [c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "epp"]
    ports = {p["containerPort"] for p in container["ports"]}
    assert {EPP_EXT_PROC_PORT, EPP_HEALTH_PORT, EPP_METRICS_PORT} <= ports
    assert deploy["spec"]["template"]["metadata"]["labels"].items() >= epp(run).items()
