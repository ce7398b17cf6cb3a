"""Values of llm-d's gateway-mode router chart for the P/D stack: the endpoint picker and its InferencePool."""

from typing import Any, TypedDict

import pulumi
import yaml

from components.model.config.checks import version_order
from components.model.config.serving_settings import router_release
from components.vllm_containers import ROUTER_PORT
from components.vllm_leaderworkersets import leader_selector

EPP_CONFIG_FILE = "pd-config.yaml"
EPP_CONFIG_V1 = "llm-d.ai/v1"
EPP_CONFIG_V1ALPHA1 = "llm-d.ai/v1alpha1"


class RouterArgs(TypedDict):
    chart: str
    """llm-d's router chart (EPP, InferencePool, HTTPRoute)."""
    version: str
    """The router chart's release."""
    epp_resources: dict[str, dict[str, str]]
    """The endpoint picker's requests and limits."""
    peak_prefill_throughput: float
    """The P/D decider's prefill throughput estimate (tokens/s of one prefill server)."""


def epp_config_api(chart_version: str) -> str:
    """The EndpointPickerConfig apiVersion the pinned router parses.

    llm-d-router v0.10.0 knows only `llm-d.ai/v1alpha1` (apix/config/v1alpha1@71f4f099); `llm-d.ai/v1`
    arrived on main after it (pkg/epp/config/loader/conversion_test.go@10bbcb7e), where v1alpha1 still
    loads, converted, with a deprecation notice. `v0` is main's floating tag, so it gets v1 like later releases.
    """
    release = router_release(chart_version)
    if release is None:
        return EPP_CONFIG_V1
    return EPP_CONFIG_V1ALPHA1 if release < version_order("v0.11.0") else EPP_CONFIG_V1


def epp_config(router: RouterArgs) -> dict[str, Any]:
    """llm-d's pd-disaggregation scheduling (guides/pd-disaggregation/router/pd-disaggregation.values.yaml@83bb7c18).

    Decode first, then the always-disagg decider sends every request through a prefill pod; the profile
    handler also sets the prefill header for the decode sidecar (what the deprecated
    disagg-headers-handler did). Prefill keeps prefixes on cache-warm pods and picks by queued tokens;
    decode picks the least busy pod.
    """

    def refs(*plugins: str) -> list[dict[str, str]]:
        """A profile's plugins, then the picker every profile ends with."""
        return [{"pluginRef": p} for p in (*plugins, "max-score-picker")]

    return {
        "apiVersion": epp_config_api(router["version"]),
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "always-disagg-pd-decider"},
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "always-disagg-pd-decider"}}},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "approx-prefix-cache-producer", "parameters": {"maxPrefixTokensToMatch": 131072}},
            {"type": "inflight-load-producer"},
            {
                "type": "prefix-cache-affinity-filter",
                "parameters": {"peakPrefillThroughput": router["peak_prefill_throughput"]},
            },
            {"type": "token-load-scorer"},
            {"type": "active-request-scorer"},
            {"type": "max-score-picker"},
        ],
        "schedulingProfiles": [
            {"name": "prefill", "plugins": refs("prefill-filter", "prefix-cache-affinity-filter", "token-load-scorer")},
            {"name": "decode", "plugins": refs("decode-filter", "active-request-scorer")},
        ],
    }


def router_values(router: RouterArgs, guide: str, gateway_name: pulumi.Input[str]) -> dict[str, Any]:
    """Values of the llm-d-router-gateway chart: llm-d's base router values and the pd-disaggregation guide's.

    Left out on purpose: the proxy settings and the 80->8081 service port (gateway mode runs no proxy: the
    chart renders one only with router.proxy.enabled, off by default; the GKE Gateway is the proxy), the
    HTTPRoute request timeout (the chart applies it only when provider.name is not gke), and tracing
    (equal to the chart's defaults, and off). Sources: llm-d/llm-d-router@71f4f099 (v0.10.0)
    config/charts/routerlib/{values.yaml,templates/_deployment.yaml,templates/_service.yaml},
    config/charts/llm-d-router-gateway/templates/httproute.yaml.
    """
    return {
        "provider": {"name": "gke"},
        "httpRoute": {"create": True, "inferenceGatewayName": gateway_name},
        "router": {
            "epp": {
                # One picker: the in-flight load accounting the scorers read is local to each EPP process.
                "replicas": 1,
                "flags": {"v": 2},
                "pluginsConfigFile": EPP_CONFIG_FILE,
                "pluginsCustomConfig": {EPP_CONFIG_FILE: yaml.safe_dump(epp_config(router), sort_keys=False)},
                "resources": router["epp_resources"],
            },
            # FailOpen sends requests to any pool endpoint while the picker is down: safe only because the
            # pool holds nothing but ready leaders.
            "inferencePool": {"failureMode": "FailOpen"},
            "modelServers": {
                "protocol": "http",
                "targetPorts": [{"number": ROUTER_PORT}],
                "matchLabels": leader_selector(guide),
            },
            # No `monitoring`: the chart creates its metrics token Secret in parallel with its account, which the
            # token controller can delete; the program declares the EPP's scrape objects itself, in order
            # (components/observability.py `_scrape_router` says why).
        },
    }
