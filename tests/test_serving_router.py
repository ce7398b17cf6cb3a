"""The serving stack's front: the GKE Gateway, the llm-d router chart's values and endpoint picker config, and
decode's routing sidecar, each against the pinned router release."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from components.cli import charts
from components.cli.render import redact
from tests import planner_fixtures, upstream
from tests.graph_queries import leader, lws
from tests.harness import CHART, Run, assert_rejected, normalize, ok
from tests.serving_fixtures import (
    GATEWAY,
    SIDECAR,
    UPSTREAM_SIDECAR,
    flag,
    flag_port,
    router,
    router_values,
    sidecar_of,
    with_serving,
)
from tests.stack_config import P

# Every flag llm-d-router v0.10.0's sidecar parses (llm-d/llm-d-router@71f4f0999f95b96c49a9d0c4afbd18dfdb943c26
# pkg/sidecar/proxy/options.go AddFlags, plus controller-runtime v0.23's zap flags it binds); pflag exits on any
# other. Not among them: --connector (removed in v0.10.0) and --secure-serving (the EPP's flag).
SIDECAR_FLAGS_V0_10_0 = {
    *("cert-path", "configuration", "configuration-file", "data-parallel-size", "decode-chunk-size"),
    *("ec-connector", "enable-p2p-pull", "enable-prefiller-sampling", "enable-ssrf-protection", "enable-tls"),
    *("inference-pool", "kv-connector", "max-idle-conns-per-host", "metrics-port", "model-server-port"),
    *("mooncake-bootstrap-port", "p2p-connector-port", "pool-group", "port", "prefill-max-retries"),
    *("prefill-retry-backoff", "secure-proxy", "tls-insecure-skip-verify", "tracing", "vllm-port"),
    *(f"moriio-{f}" for f in ("decode-handshake-port", "decode-hosts", "decode-notify-port", "dp-size")),
    *(f"moriio-{f}" for f in ("dp-size-local", "local-pod-ip", "parallel-decode-wait-timeout")),
    *(f"moriio-{f}" for f in ("parallel-dispatch", "prefill-handshake-port", "prefill-notify-port")),
    *(f"moriio-{f}" for f in ("remote-hosts", "tp-size", "write-mode")),
    *(f"zap-{f}" for f in ("devel", "encoder", "log-level", "stacktrace-level", "time-encoding")),
}
# ... and where it forwards without --model-server-port/--vllm-port (same file, defaultVLLMPort).
SIDECAR_DEFAULT_MODEL_SERVER_PORT_V0_10_0 = 8200


def test_decode_sidecar_takes_only_flags_of_the_pinned_router_release(dev: Run) -> None:
    decode, sidecar = lws(dev, "decode"), sidecar_of(dev)
    flags = [arg.removeprefix("--").split("=", 1)[0] for arg in sidecar["args"]]
    assert set(flags) <= SIDECAR_FLAGS_V0_10_0, set(flags) - SIDECAR_FLAGS_V0_10_0
    # No model-server port flag, so decode's vLLM must listen where the sidecar forwards by default.
    assert not {"model-server-port", "vllm-port"} & set(flags)
    assert flag_port(decode) == SIDECAR_DEFAULT_MODEL_SERVER_PORT_V0_10_0
    # The sidecar listens on the port the pool targets; port names stay unique within the pod.
    (target,) = router_values(dev)["router"]["modelServers"]["targetPorts"]
    assert int(flag(sidecar["args"], "--port")) == target["number"] == sidecar["ports"][0]["containerPort"]
    names = [p["name"] for c in (*leader(decode)["initContainers"], *leader(decode)["containers"]) for p in c["ports"]]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize(
    ("version", "tag", "api"),
    [
        ("v0.10.0", "v0.10.0", "llm-d.ai/v1alpha1"),
        ("v0.10.0-rc.1", "v0.10.0-rc.1", "llm-d.ai/v1alpha1"),
        # A pre-release is before its release: v1alpha1, which main still loads (converted), not v1.
        ("v0.11.0-rc.1", "v0.11.0-rc.1", "llm-d.ai/v1alpha1"),
        ("v0.11.0", "v0.11.0", "llm-d.ai/v1"),
        ("0.11.0", "v0.11.0", "llm-d.ai/v1"),  # Helm matches the chart's tag v0.11.0 as semver; image tags are literal
        ("v0", "main", "llm-d.ai/v1"),  # main's floating chart, whose images are tagged main
    ],
)
def test_sidecar_image_and_epp_config_api_follow_the_router_release(version: str, tag: str, api: str) -> None:
    run = with_serving({"router": {"version": version, "peakPrefillThroughput": 20000}})
    assert sidecar_of(run)["image"] == f"{SIDECAR}:{tag}"
    r = router(run)
    assert r["version"] == version
    config = yaml.safe_load(r["values"]["router"]["epp"]["pluginsCustomConfig"]["pd-config.yaml"])
    assert config["apiVersion"] == api
    plugins = {p["type"]: p.get("parameters") for p in config["plugins"]}
    assert plugins["prefix-cache-affinity-filter"] == {"peakPrefillThroughput": 20000}


def test_sidecar_image_can_come_from_a_mirror() -> None:
    mirror = f"us-docker.pkg.dev/p/mirror/llm-d-router-disagg-sidecar:v0.10.0@sha256:{'0' * 64}"
    ours = sidecar_of(with_serving({"routingSidecar": {"image": mirror}}))
    # The recipe's sidecar, with the image and what the program adds to it (the next test).
    added = ("readinessProbe", "resources", "imagePullPolicy")
    assert {k: v for k, v in ours.items() if k not in added} == {
        **{k: v for k, v in UPSTREAM_SIDECAR.items() if k not in added},
        "image": mirror,
        # and no capabilities (tests/test_pod_security.py)
        "securityContext": {**UPSTREAM_SIDECAR["securityContext"], "capabilities": {"drop": ["ALL"]}},
    }


def test_decode_sidecar_is_ready_on_the_pools_port_sized_and_restarts_without_the_registry(dev: Run) -> None:
    """Ready when it answers on the port the InferencePool targets (its own /health, which the Gateway's health
    check asks too); requests and limits from serving.routingSidecar.resources; `IfNotPresent` on a reference the
    registry cannot move, so a restart needs no registry, and `Always` only on the floating `main` of the `v0` chart."""
    sidecar = sidecar_of(dev)
    (target,) = router_values(dev)["router"]["modelServers"]["targetPorts"]
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/health", "port": target["number"]}
    assert sidecar["resources"] == {
        "requests": {"cpu": "1", "memory": "256Mi"},
        "limits": {"cpu": "2", "memory": "1Gi"},
    }
    assert (sidecar["image"], sidecar["imagePullPolicy"]) == (f"{SIDECAR}:v0.10.0", "IfNotPresent")
    sized = {"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}
    assert sidecar_of(with_serving({"routingSidecar": {"resources": sized}}))["resources"] == sized
    floating = sidecar_of(with_serving({"router": {"version": "v0"}}))
    assert (floating["image"], floating["imagePullPolicy"]) == (f"{SIDECAR}:main", "Always")
    pinned = f"{SIDECAR}:main@sha256:{'1' * 64}"
    by_digest = sidecar_of(with_serving({"router": {"version": "v0"}, "routingSidecar": {"image": pinned}}))
    assert (by_digest["image"], by_digest["imagePullPolicy"]) == (pinned, "IfNotPresent")


def test_decodes_tpu_vm_fit_counts_its_sidecar() -> None:
    """A native sidecar's requests add to the pod's: decode's vLLM gets one TPU VM less the sidecar's requests."""
    edge = {"resources": {"cpu": "223370m"}}
    ok({f"{P}:serving": {"prefill": edge}})
    assert_rejected(
        {f"{P}:serving": {"decode": edge}},
        [
            "serving.decode.resources.cpu = '223370m'",
            "at most 222.37 CPUs",
            "less the routing sidecar's requests (serving.routingSidecar.resources.requests)",
        ],
    )


def test_gateway_and_router(dev: Run) -> None:
    """The listener admits "Only Routes in the same namespace" (Gateway API v1.4.1 gateways CRD,
    `allowedRoutes.namespaces.from`; with `All` anyone allowed to create an HTTPRoute anywhere could attach a path to
    the model's load balancer). The chart's HTTPRoute is released in the chart's namespace and names the Gateway
    without a namespace (llm-d-router v0.10.0 llm-d-router-gateway/templates/httproute.yaml: `.Release.Namespace`,
    `inferenceGatewayNamespace` unset), so the release must be in the Gateway's namespace to attach."""
    gw = dev.get(GATEWAY, "serving-gateway")
    assert gw.inputs["metadata"] == {"name": "llm-d-inference-gateway", "namespace": "llm-d-pd-disaggregation"}
    listener = {"name": "default", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "Same"}}}
    assert normalize(gw.inputs["spec"]) == {"gatewayClassName": "gke-l7-rilb", "listeners": [listener]}
    assert dev.depends_on(gw, dev.get("gcp:compute/subnetwork:Subnetwork", "network-proxy"))
    chart = dev.get(CHART, "serving-router")
    r = normalize(chart.plain())
    # llm-d's published gateway-mode chart (guides/env.sh ROUTER_GATEWAY_CHART), at a release tag, not `v0`.
    assert (r["name"], r["chart"], r["namespace"]) == (
        "pd-disaggregation",
        "oci://ghcr.io/llm-d/charts/llm-d-router-gateway",
        "llm-d-pd-disaggregation",
    )
    assert re.fullmatch(r"v\d+\.\d+\.\d+", r["version"]), r["version"]
    values = r["values"]
    assert values["provider"] == {"name": "gke"}
    assert values["httpRoute"] == {"create": True, "inferenceGatewayName": "llm-d-inference-gateway"}
    assert values["router"]["modelServers"]["targetPorts"] == [{"number": 8000}]
    assert gw.urn in chart.property_dependencies["values"]
    assert dev.depends_on(chart, dev.get("kubernetes:yaml/v2:ConfigGroup", "inference-extension-crds"))


def test_router_sets_nothing_that_gateway_mode_ignores(dev: Run) -> None:
    values = router_values(dev)
    # No proxy (rendered only with router.proxy.enabled; the GKE Gateway proxies), no port 80 -> 8081 on the
    # EPP Service (the proxy's listener), no HTTPRoute timeout (applied only when provider.name != gke).
    assert "proxy" not in values["router"] and "extraServicePorts" not in values["router"]
    assert "requestTimeout" not in values["httpRoute"]


def test_epp_config_is_the_current_pd_schema(dev: Run) -> None:
    values = router_values(dev)["router"]["epp"]
    assert values["pluginsConfigFile"] in values["pluginsCustomConfig"]
    config = yaml.safe_load(values["pluginsCustomConfig"][values["pluginsConfigFile"]])
    # v0.10.0 parses llm-d.ai/v1alpha1 only; the deprecated alias group is gone
    assert config["apiVersion"] == "llm-d.ai/v1alpha1" and config["kind"] == "EndpointPickerConfig"
    plugins = {p["type"]: p.get("parameters") for p in config["plugins"]}
    assert plugins["disagg-profile-handler"] == {"deciders": {"prefill": "always-disagg-pd-decider"}}
    assert "always-disagg-pd-decider" in plugins
    # deprecated in llm-d-router v0.10.0: the flat decider alias and the headers handler
    assert "deciderPluginName" not in json.dumps(config) and "disagg-headers-handler" not in plugins
    assert plugins["prefix-cache-affinity-filter"] == {"peakPrefillThroughput": 33821}
    assert [p["name"] for p in config["schedulingProfiles"]] == ["prefill", "decode"]
    for profile in config["schedulingProfiles"]:
        refs = [p["pluginRef"] for p in profile["plugins"]]
        assert set(refs) <= set(plugins) and refs[0] == f"{profile['name']}-filter"


def test_a_partial_epp_resources_block_is_checked_and_counted_with_the_charts_other_amounts() -> None:
    """Helm merges serving.router.eppResources over the router chart's own amounts (requests cpu 8, memory 8Gi,
    limits memory 16Gi): a request above the limit it keeps is refused, and the system-pool fit counts what the
    picker's container really asks for, as the pinned chart renders it."""
    too_big = {f"{P}:serving": {"router": {"eppResources": {"requests": {"memory": "32Gi"}}}}}
    key = "serving.router.eppResources.requests.memory"
    assert_rejected(too_big, [key, "at most limits.memory (16Gi, the chart's default", "set limits.memory too"])
    # The chart's own cpu 8 is more than one of dev's n2-standard-8 nodes leaves (refused at preview): a bigger one.
    bigger = {"systemMachineType": "n2-standard-16"}
    enough = {"requests": {"memory": "32Gi"}, "limits": {"memory": "32Gi"}}
    ok({f"{P}:serving": {"router": {"eppResources": enough}}, f"{P}:cluster": bigger})

    partial = {"router": {"eppResources": {"requests": {"memory": "4Gi"}}}}
    counted = planner_fixtures.settings({"serving": partial}).system_pool_pods()["serving.router.eppResources"]
    assert counted.manifest() == {"requests": {"cpu": "8", "memory": "4Gi"}, "limits": {"memory": "16Gi"}}
    upstream.require("charts")
    release = next(
        r
        for r in charts.releases(ok({f"{P}:serving": partial, f"{P}:cluster": bigger}).registrations, redact)
        if r.resource == "serving-router"
    )
    (deploy,) = [o for o in charts.render_release(release).objects if o["kind"] == "Deployment"]
    (epp,) = deploy["spec"]["template"]["spec"]["containers"]
    assert {
        kind: {k: str(v) for k, v in amounts.items()} for kind, amounts in epp["resources"].items()
    } == counted.manifest()
