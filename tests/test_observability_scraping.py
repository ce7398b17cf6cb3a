"""Observability's scrape objects: each selects exactly its pods at the port they serve metrics on, Kueue's with
a token allowed to read them, the charts export what the queries read, and GMP's CRDs accept them."""

from __future__ import annotations

import copy
import shlex
from typing import Any

import pytest
import yaml

from tests import conformance, graph_queries
from tests.graph_queries import label_selector_matches as selects
from tests.harness import CHART, LWS, Run, normalize, ok
from tests.observability_fixtures import PM, all_queries, declared, scrape_hooks
from tests.stack_config import FIXED_SERVING, P, merge

RBAC = "kubernetes:rbac.authorization.k8s.io/v1:"
# Labels the LWS controller adds to the pods of a group (kubernetes-sigs/lws leaderworkerset_types.go).
LWS_NAME, WORKER_INDEX = "leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/worker-index"


def simulated_pods(lws: dict[str, Any]) -> list[dict[str, str]]:
    """The labels of every pod the LWS controller makes from this LWS: one leader and size-1 workers per group."""
    lwt, name = lws["spec"]["leaderWorkerTemplate"], lws["metadata"]["name"]
    leader = {**lwt["leaderTemplate"]["metadata"]["labels"], LWS_NAME: name, WORKER_INDEX: "0"}
    workers = [
        {**lwt["workerTemplate"]["metadata"]["labels"], LWS_NAME: name, WORKER_INDEX: str(worker)}
        for worker in range(1, lwt["size"])
    ]
    return [leader, *workers] * lws["spec"]["replicas"]


@pytest.mark.parametrize(
    "overrides", [{}, merge(FIXED_SERVING, {f"{P}:serving": {"decode": {"topology": "2x2x4", "replicas": 2}}})]
)
def test_vllm_scrape_objects_select_the_leaders_of_their_role_and_only_them(overrides: dict[str, Any]) -> None:
    run = ok(overrides)
    all_lws = {role: declared(run, LWS, f"serving-{role}") for role in ("prefill", "decode")}
    for role, lws in all_lws.items():
        pm = declared(run, PM, f"observability-{role}-leaders")
        assert pm["metadata"]["namespace"] == lws["metadata"]["namespace"]
        for other, other_lws in all_lws.items():
            for pod in simulated_pods(other_lws):
                is_leader_of_role = other == role and pod[WORKER_INDEX] == "0"
                assert selects(pm["spec"]["selector"], pod) == is_leader_of_role, (role, other, pod)
        # The port it scrapes is the leader container's vLLM port: the one `vllm serve --port` binds.
        (endpoint,) = pm["spec"]["endpoints"]
        leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
        serve = next(line for line in leader["command"][2].splitlines() if line.startswith("exec vllm serve"))
        vllm_port = int(next(a for a in shlex.split(serve) if a.startswith("--port=")).split("=", 1)[1])
        (port,) = [p for p in leader["ports"] if p["name"] == endpoint["port"]]
        assert port["containerPort"] == vllm_port
        assert endpoint["path"] == "/metrics"
        # Every container port name of a leader pod is unique to it, so the named port is unambiguous.
        init = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"].get("initContainers", [])
        names = [p["name"] for c in [leader, *init] for p in c.get("ports", [])]
        assert names.count(endpoint["port"]) == 1


def test_kueue_scrape_object_uses_a_token_allowed_to_read_metrics(dev: Run) -> None:
    pm = declared(dev, PM, "observability-kueue")
    assert pm["metadata"]["namespace"] == "kueue-system"
    (endpoint,) = pm["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"], endpoint["path"]) == ("metrics", "https", "/metrics")
    secret = declared(dev, "kubernetes:core/v1:Secret", "observability-kueue-scraper-token")
    sa = declared(dev, "kubernetes:core/v1:ServiceAccount", "observability-kueue-scraper")
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": sa["metadata"]["name"]}
    assert endpoint["authorization"]["credentials"]["secret"] == {"name": secret["metadata"]["name"], "key": "token"}
    # Same namespace as the Secret: GMP reads secrets from the PodMonitoring's namespace only.
    assert secret["metadata"]["namespace"] == sa["metadata"]["namespace"] == pm["metadata"]["namespace"]
    crb = declared(dev, f"{RBAC}ClusterRoleBinding", "observability-kueue-metrics-reader")
    assert crb["roleRef"]["name"] == "kueue-metrics-reader"  # the chart's `<fullname>-metrics-reader`
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "kueue-system"}]
    role = declared(dev, f"{RBAC}Role", "observability-kueue-token-read")
    assert role["rules"][0]["resourceNames"] == [secret["metadata"]["name"]]
    binding = declared(dev, f"{RBAC}RoleBinding", "observability-kueue-token-read-collector")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "collector", "namespace": "gmp-system"}]
    # Scraping waits for the chart: its ClusterRole and its pods.
    assert dev.depends_on(dev.get(PM, "observability-kueue"), dev.get(CHART, "kueue-chart"))


def test_kueue_selector_and_port_match_the_pinned_chart() -> None:
    """The pinned chart's metrics Service targets 8443 and its manager serves metrics there."""
    values = yaml.safe_load((conformance.require_charts_dir() / "kueue-v0.17.4" / "values.yaml").read_text())
    (port,) = values["metricsService"]["ports"]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["metrics"]["bindAddress"] == f":{port['targetPort']}"
    assert port["name"] == "https"


def test_the_program_scrapes_the_epp_and_kueue_exports_the_quota_metrics(dev: Run) -> None:
    assert scrape_hooks(dev) == (True, False)  # the router chart's own scrape objects stay off
    router = declared(dev, CHART, "serving-router")
    pm = declared(dev, PM, "observability-epp")
    assert pm["metadata"]["name"] == f"{router['name']}-epp"
    assert pm["spec"]["endpoints"][0]["authorization"]["credentials"]["secret"]["name"] == "epp-metrics-scraper-token"
    # The EPP queries' job is that PodMonitoring's name.
    epp_queries = [q for q in all_queries(graph_queries.emitted(dev)) if "inference_" in q]
    assert epp_queries and all(f'job="{router["name"]}-epp"' in q for q in epp_queries)


def test_scrape_objects_validate_against_the_pinned_gmp_crds(dev: Run) -> None:
    registry = conformance.require_registry()
    assert ("monitoring.googleapis.com/v1", "PodMonitoring") in registry
    assert "gmp-v0.17.2" in registry.source("monitoring.googleapis.com/v1", "PodMonitoring").name
    objects = [normalize(r.plain()) for r in dev.of_type(PM)]
    assert len(objects) == 5  # Kueue, the endpoint picker, the prefill and decode leaders, KEDA's operator
    assert all(conformance.validate(obj, registry) == [] for obj in objects)
    broken = copy.deepcopy(objects[0])
    broken["spec"]["endpoints"][0]["intervall"] = "30s"
    del broken["spec"]["endpoints"][0]["interval"]
    errors = conformance.validate(broken, registry)
    assert any("intervall" in e for e in errors) and any("interval" in e and "required" in e for e in errors)
