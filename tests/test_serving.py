"""SPEC section 9: the P/D serving stack, its secrets, its derivations and its place in the graph."""

from __future__ import annotations

import json
import re
import shlex

import pytest
import yaml

from components import serving
from components.cli.plan import settings_input
from components.model.config.settings import load
from tests.harness import (
    CHART,
    CLUSTER,
    JOBSET,
    LWS,
    PROJECT_NUMBER,
    ROLES,
    P,
    Run,
    assert_rejected,
    contains_secret,
    is_secret,
    kueue_objects,
    label_selector_matches,
    leader,
    lws,
    normalize,
    ok,
    stack_file_config,
    templates,
    tpu_pools,
    vllm_leader,
)

SECRET = "kubernetes:core/v1:Secret"
IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
TOKEN = "hf_serving_test_token_1234"


@pytest.fixture(scope="module")
def with_token() -> Run:
    return ok(secrets={f"{P}:hfToken": TOKEN})


def with_serving(settings: dict) -> Run:
    """The dev stack with `settings` merged into `serving`, which must succeed."""
    return ok({f"{P}:serving": settings})


def worker(obj: dict) -> dict:
    return templates(obj)["worker"]["spec"]


def vllm_args(obj: dict) -> list[str]:
    serve = next(line for line in vllm_leader(obj)["command"][2].splitlines() if line.startswith("exec vllm serve"))
    return shlex.split(serve)[3:]


def flag(args: list[str], name: str) -> str:
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return args[i + 1]
    raise AssertionError(f"{name} not in {args}")


def flag_port(obj: dict) -> int:
    return int(flag(vllm_args(obj), "--port"))


def router(run: Run) -> dict:
    return normalize(run.get(CHART, "serving-router").plain())


def router_values(run: Run) -> dict:
    return router(run)["values"]


def sidecar_of(run: Run) -> dict:
    (sidecar,) = leader(lws(run, "decode"))["initContainers"]
    return sidecar


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container["env"]}


# Decode's routing sidecar in llm-d's TPU7x recipe, llm-d/llm-d@f518910e175c01352a176b5363cb0ce9abb1c95c
# guides/pd-disaggregation/modelserver/tpu/v7/vllm-dynamic-slice/decode.yaml (initContainers[routing-proxy];
# its image is the kustomize placeholder REPLACE_ROUTING_SIDECAR_IMAGE).
UPSTREAM_SIDECAR = {
    "name": "routing-proxy",
    "imagePullPolicy": "Always",
    "args": ["--port=8000", "--kv-connector=nixlv2", "--zap-log-level=1", "--secure-proxy=false"],
    "ports": [{"name": "sidecar", "containerPort": 8000, "protocol": "TCP"}],
    "resources": {},
    "restartPolicy": "Always",
    "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
}
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


# A role's slice -> its groups, hosts per group (4 chips per VM), tensor parallelism (2 TensorCores per chip).
SHAPES = {
    "dev prefill": ({}, "prefill", "2x2x2", 4, 2, "16"),
    "dev decode": ({}, "decode", "2x2x2", 4, 2, "16"),
    "bigger decode": ({"decode": {"topology": "2x2x4", "replicas": 2}}, "decode", "2x2x4", 2, 4, "32"),
    "single-host prefill": ({"prefill": {"topology": "2x2x1"}}, "prefill", "2x2x1", 4, 1, "8"),
}


@pytest.mark.parametrize(("settings", "role", "topology", "replicas", "size", "tp"), SHAPES.values(), ids=SHAPES.keys())
def test_group_size_tp_and_tpu_requests_derive_from_the_slice(
    settings: dict, role: str, topology: str, replicas: int, size: int, tp: str
) -> None:
    obj = lws(with_serving(settings), role)
    assert (obj["spec"]["replicas"], obj["spec"]["leaderWorkerTemplate"]["size"]) == (replicas, size)
    assert flag(vllm_args(obj), "--tensor-parallel-size") == tp
    for template in templates(obj).values():
        for kind in ("requests", "limits"):
            resources = template["spec"]["containers"][0]["resources"][kind]
            assert resources == {"google.com/tpu": "4", "cpu": "220", "memory": "850Gi"}
        assert template["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"] == topology


def test_prefill_and_decode_differ_only_by_role(dev: Run) -> None:
    prefill, decode = lws(dev, "prefill"), lws(dev, "decode")
    p_args, d_args = vllm_args(prefill), vllm_args(decode)
    assert json.loads(flag(p_args, "--kv-transfer-config"))["kv_role"] == "kv_producer"
    assert json.loads(flag(d_args, "--kv-transfer-config"))["kv_role"] == "kv_consumer"
    assert (flag(p_args, "--port"), flag(d_args, "--port")) == ("8000", "8200")
    assert [p["containerPort"] for p in vllm_leader(prefill)["ports"]] == [8000, 9100, 9600]
    assert [p["containerPort"] for p in vllm_leader(decode)["ports"]] == [8200, 9100, 9600]
    assert "initContainers" not in leader(prefill)
    assert sidecar_of(dev) == {**UPSTREAM_SIDECAR, "image": "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0"}
    # Everything else is the same builder's output: swap the role-specific parts and compare.
    same = [a for a in p_args if not a.startswith(("--port=", '{"kv_connector'))]
    assert same == [a for a in d_args if not a.startswith(("--port=", '{"kv_connector'))]
    assert worker(prefill) == worker(decode)
    assert prefill["metadata"]["labels"]["llm-d.ai/role"] == "prefill"
    assert decode["metadata"]["labels"]["llm-d.ai/role"] == "decode"


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
        ("v0.11.0", "v0.11.0", "llm-d.ai/v1"),
        ("0.11.0", "v0.11.0", "llm-d.ai/v1"),  # Helm matches the chart's tag v0.11.0 as semver; image tags are literal
        ("v0", "main", "llm-d.ai/v1"),  # main's floating chart, whose images are tagged main
    ],
)
def test_sidecar_image_and_epp_config_api_follow_the_router_release(version: str, tag: str, api: str) -> None:
    run = with_serving({"router": {"version": version, "peakPrefillThroughput": 20000}})
    assert sidecar_of(run)["image"] == f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:{tag}"
    r = router(run)
    assert r["version"] == version
    config = yaml.safe_load(r["values"]["router"]["epp"]["pluginsCustomConfig"]["pd-config.yaml"])
    assert config["apiVersion"] == api
    plugins = {p["type"]: p.get("parameters") for p in config["plugins"]}
    assert plugins["prefix-cache-affinity-filter"] == {"peakPrefillThroughput": 20000}


def test_sidecar_image_can_come_from_a_mirror() -> None:
    mirror = f"us-docker.pkg.dev/p/mirror/llm-d-router-disagg-sidecar:v0.10.0@sha256:{'0' * 64}"
    assert sidecar_of(with_serving({"routingSidecar": {"image": mirror}})) == {**UPSTREAM_SIDECAR, "image": mirror}


SIDECAR = "ghcr.io/llm-d/llm-d-router-disagg-sidecar"
# Each refused before any resource, the error naming the key, the value and what is allowed.
BAD = {
    "router before v0.10.0": (
        {"router": {"version": "v0.9.0"}},
        ["serving.router.version = 'v0.9.0'", "v0.10.0 or later", "8001"],
    ),
    "retired sidecar": (
        {"routingSidecar": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0"}},
        ["serving.routingSidecar.image = 'ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0'", "8001 instead of 8200"],
    ),
    "v0.9.0 sidecar": (
        {"routingSidecar": {"image": f"{SIDECAR}:v0.9.0"}},
        ["serving.routingSidecar.image", "8001 instead of 8200"],
    ),
    "no tag": ({"routingSidecar": {"image": SIDECAR}}, ["serving.routingSidecar.image", "a pinned image reference"]),
    "floating tag": (
        {"routingSidecar": {"image": f"{SIDECAR}:main"}},
        ["serving.routingSidecar.image", "no 'latest' or 'main'"],
    ),
    "router proxy keys are gone": (
        {"router": {"proxyResources": {"requests": {"cpu": "4"}}}},
        ["serving.router.proxyResources", "unknown key", "eppResources"],
    ),
    "tensor parallel inconsistent with the slice": (
        {"decode": {"tensorParallelSize": 8}},
        ["serving.decode.tensorParallelSize = 8", "16", "8 chips x 2 TensorCores"],
    ),
    "LWS name over llm-d's 39 characters with its revision": (
        {"prefill": {"name": "kueue-vllm-prefill-model-streamer-x"}},
        ["serving.prefill.name", "kueue-vllm-prefill-model-streamer-x", "at most 33", "bounds LWS names to 39"],
    ),
    "model label over 63 characters": ({"model": "org/" + "m" * 64}, ["serving.model", "label value"]),
    "guide too long for a release name": ({"guide": "g" * 54}, ["serving.guide", "at most 53"]),
    "serving topology fits no partition": ({"prefill": {"topology": "1x1x1"}}, ["serving.prefill.topology", "1x1x1"]),
}


@pytest.mark.parametrize(("settings", "fragments"), BAD.values(), ids=BAD.keys())
def test_bad_serving_config_fails_before_any_resource(settings: dict, fragments: list[str]) -> None:
    assert_rejected({f"{P}:serving": settings}, fragments)


def test_explicit_consistent_tensor_parallel_size_is_accepted() -> None:
    with_serving({"decode": {"tensorParallelSize": 16}})


def test_vllm_flags_come_from_settings() -> None:
    run = with_serving(
        {
            **{"maxModelLen": 4096, "maxNumBatchedTokens": 2048, "maxNumSeqs": 64, "kvCacheDtype": "auto"},
            **{"enableExpertParallel": False, "servedModelName": "qwen", "weightsBucket": "my-weights"},
        }
    )
    args = vllm_args(lws(run, "prefill"))
    expected = {
        **{"--max-model-len": "4096", "--max-num-batched-tokens": "2048", "--max-num-seqs": "64"},
        **{"--kv-cache-dtype": "auto", "--served-model-name": "qwen"},
    }
    assert {name: flag(args, name) for name in expected} == expected
    assert flag(args, "--model").startswith("gs://my-weights/models--Qwen--")
    assert "--enable-expert-parallel" not in args
    assert run.outputs["servedModelName"] == "qwen"


def test_queue_labels_and_exclusive_topology(dev: Run) -> None:
    obj = lws(dev, "decode")
    annotations = dict(obj["metadata"]["annotations"])
    # the LWS itself is never awaited: its leaders-ready patch is, once (tests/test_rollout.py)
    assert annotations.pop("pulumi.com/skipAwait") == "true"
    assert annotations == {"leaderworkerset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-tpu-slice"}
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high-priority-3000"


def serving_secrets(run: Run) -> list:
    """Secrets of the serving layer (observability adds a scrape token Secret of its own)."""
    return [r for r in run.of_type(SECRET) if r.name.startswith("serving-")]


def test_hf_token_is_a_secret_end_to_end(with_token: Run) -> None:
    (secret,) = serving_secrets(with_token)
    assert secret.inputs["metadata"]["name"] == "llm-d-hf-token"
    data = secret.inputs["stringData"]
    assert is_secret(data) or is_secret(data["HF_TOKEN"])
    assert normalize(secret.plain("stringData")) == {"HF_TOKEN": TOKEN}
    for reg in with_token.registrations:
        if TOKEN in json.dumps(reg.inputs, default=str):
            assert contains_secret(reg.inputs), f"{reg.type} {reg.name} has the token in plain text"
    assert not any(TOKEN in message for _, message in with_token.logs)
    assert not any(TOKEN in json.dumps(v, default=str) for v in with_token.outputs.values())
    ref = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "llm-d-hf-token", "key": "HF_TOKEN"}}}
    for role in ROLES:
        for pod in (leader(lws(with_token, role)), worker(lws(with_token, role))):
            assert [e for e in pod["containers"][0]["env"] if e["name"] == "HF_TOKEN"] == [ref]
        assert secret.urn in with_token.get(LWS, f"serving-{role}").property_dependencies["spec"]


@pytest.mark.parametrize("token", [None, ""], ids=["absent", "empty"])
def test_no_token_means_no_secret_and_no_env(token: str | None) -> None:
    run = ok(secrets={f"{P}:hfToken": token} if token is not None else {})
    assert serving_secrets(run) == []
    for role in ROLES:
        for pod in (leader(lws(run, role)), worker(lws(run, role))):
            assert "HF_TOKEN" not in env_of(pod["containers"][0])


def test_gcs_fuse_identity_and_bucket_iam(dev: Run) -> None:
    ksa = dev.get("kubernetes:core/v1:ServiceAccount", "serving-gcs-fuse-ksa")
    assert ksa.inputs["metadata"] == {"name": "gcs-fuse-ksa", "namespace": "llm-d-pd-disaggregation"}
    principal = (
        f"principal://iam.googleapis.com/projects/{PROJECT_NUMBER}/locations/global/workloadIdentityPools/"
        "my-tpu-project.svc.id.goog/subject/ns/llm-d-pd-disaggregation/sa/gcs-fuse-ksa"
    )
    # Four grants, all to the pods' account: read on the weights, write on the stack's own XLA cache only (which
    # two roles on which bucket: tests/test_least_privilege.py).
    assert [r.inputs["member"] for r in dev.of_type(IAM)] == [principal] * 4
    lookups = [c for c in dev.mocks.calls if c.token == "gcp:organizations/getProject:getProject"]
    assert [c.args.get("projectId") for c in lookups] == ["my-tpu-project"]
    for member in dev.of_type(IAM):
        assert ksa.urn in member.property_dependencies["member"]
    for role in ROLES:
        obj = lws(dev, role)
        assert leader(obj)["serviceAccountName"] == worker(obj)["serviceAccountName"] == "gcs-fuse-ksa"


def test_streamed_weights_declare_no_fuse_mount(dev: Run) -> None:
    for role in ROLES:
        obj = lws(dev, role)
        assert flag(vllm_args(obj), "--model").startswith("gs://gemma3-weights/")
        assert flag(vllm_args(obj), "--load-format") == "runai_streamer"
        for template in templates(obj).values():
            assert [v for v in template["spec"]["volumes"] if "csi" in v] == []
            assert "/data" not in [m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]]
            assert "gke-gcsfuse/volumes" not in template["metadata"]["annotations"]


def test_mounted_weights_declare_the_fuse_mount_and_read_from_it() -> None:
    run = with_serving({"weightsVia": "mount", "weightsBucket": "my-weights"})
    for role in ROLES:
        obj = lws(run, role)
        args = vllm_args(obj)
        model = flag(args, "--model")
        assert model.startswith("/data/models--Qwen--") and "--load-format" not in " ".join(args)
        for template in templates(obj).values():
            (fuse,) = [v for v in template["spec"]["volumes"] if "csi" in v]
            assert fuse["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
            assert fuse["csi"]["volumeAttributes"]["bucketName"] == "my-weights"
            mounts = {m["name"]: m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]}
            assert mounts[fuse["name"]] == "/data" and model.startswith(mounts[fuse["name"]] + "/")
            assert template["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"


# The values keys of llm-d-router-gateway v0.10.0 (keys only; None = a leaf or a free-form map the templates
# read whole), from llm-d/llm-d-router@71f4f0999f95b96c49a9d0c4afbd18dfdb943c26 (tag v0.10.0):
# config/charts/llm-d-router-gateway/values.yaml, and under `router` (the routerlib subchart's alias)
# config/charts/routerlib/values.yaml. Two keys the templates read that values.yaml only shows commented:
# router.epp.flags (routerlib templates/_deployment.yaml, `$eppFlags`) and router.modelServers.matchLabels
# (the gateway chart nulls router.modelServers, so its children are all user-supplied; templates/gke.yaml and
# routerlib templates/_inferencepool.yaml read type, protocol, targetPorts and matchLabels).
ROUTER_CHART_KEYS: dict = {
    "provider": dict.fromkeys(["name", "istio", "gke"]),
    "httpRoute": dict.fromkeys(["create", "inferenceGatewayName", "inferenceGatewayNamespace", "requestTimeout"]),
    "router": {
        **dict.fromkeys(["extraServicePorts", "clusterDomain", "tokenizer", "inferenceObjectives"]),
        "epp": {
            **dict.fromkeys(["replicas", "image", "extProcPort", "parsers", "metricsDataSource", "env", "flags"]),
            **dict.fromkeys(["pluginsConfigFile", "pluginsCustomConfig", "extraContainerPorts", "resources"]),
            **dict.fromkeys(["affinity", "tolerations", "podAnnotations"]),
        },
        "proxy": {"enabled": None},
        "monitoring": dict.fromkeys(["interval", "provider", "prometheus"]),
        "tracing": dict.fromkeys(["enabled", "otelExporterEndpoint", "sampling"]),
        "inferencePool": dict.fromkeys(["create", "failureMode"]),
        "modelServers": dict.fromkeys(["type", "protocol", "targetPorts", "matchLabels"]),
        "latencyPredictor": None,
    },
}


def unknown_chart_keys(values: dict, keys: dict | None, path: str = "") -> list[str]:
    if keys is None:
        return []
    out = []
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in keys:
            out.append(where)
        elif isinstance(value, dict):
            out += unknown_chart_keys(value, keys[key], where)
    return out


def test_the_gateway_takes_routes_from_its_own_namespace_only(dev: Run) -> None:
    """With `from: All` anyone allowed to create an HTTPRoute in any namespace could attach a path to the model's
    load balancer; `Same` admits "Only Routes in the same namespace" (Gateway API v1.4.1 gateways CRD,
    `allowedRoutes.namespaces.from`). The router chart's HTTPRoute is released in the chart's namespace and names
    the Gateway without a namespace (llm-d-router v0.10.0 llm-d-router-gateway/templates/httproute.yaml:
    `.Release.Namespace`, `inferenceGatewayNamespace` unset), so it must be the Gateway's namespace to attach."""
    gw = dev.get(GATEWAY, "serving-gateway")
    (listener,) = normalize(gw.inputs["spec"])["listeners"]
    assert listener["allowedRoutes"] == {"namespaces": {"from": "Same"}}
    assert router(dev)["namespace"] == gw.inputs["metadata"]["namespace"]
    assert "inferenceGatewayNamespace" not in router_values(dev).get("httpRoute", {})


def test_gateway_and_router(dev: Run) -> None:
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


def test_router_values_are_keys_of_the_pinned_chart(dev: Run) -> None:
    assert unknown_chart_keys(router_values(dev), ROUTER_CHART_KEYS) == []
    # and the check can fail
    bad = {"router": {"epp": {"replicaz": 1}}, "proxyy": {}}
    assert unknown_chart_keys(bad, ROUTER_CHART_KEYS) == ["router.epp.replicaz", "proxyy"]


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


def group_pods(obj: dict) -> list[tuple[str, dict[str, str]]]:
    """(template, labels) of every pod of one LWS group, as LWS v0.8.0 labels them: the template's labels plus
    leaderworkerset.sigs.k8s.io/worker-index (0 for the leader, 1..size-1 for the workers; api/leaderworkerset/v1
    WorkerIndexLabelKey), plus the LWS name."""
    size, parts = obj["spec"]["leaderWorkerTemplate"]["size"], templates(obj)
    name = {"leaderworkerset.sigs.k8s.io/name": obj["metadata"]["name"]}
    return [
        (part, {**parts[part]["metadata"]["labels"], **name, "leaderworkerset.sigs.k8s.io/worker-index": str(index)})
        for index in range(size)
        for part in ["leader" if index == 0 else "worker"]
    ]


@pytest.mark.parametrize("topology", ["2x2x2", "2x2x4"])
def test_the_pool_selects_every_leader_and_no_worker(topology: str) -> None:
    run = with_serving({"prefill": {"topology": topology}, "decode": {"topology": topology}})
    # The chart copies router.modelServers.matchLabels into the InferencePool's spec.selector.matchLabels
    # (routerlib templates/_inferencepool.yaml@v0.10.0).
    selector = {"matchLabels": router_values(run)["router"]["modelServers"]["matchLabels"]}
    for role in ROLES:
        pods = group_pods(lws(run, role))
        assert len(pods) > 1  # a multi-host group: workers exist to be excluded
        for part, labels in pods:
            assert label_selector_matches(selector, labels) == (part == "leader"), (role, part, labels)
            # the guide label alone (the reference's selector) would have taken the workers too
            assert label_selector_matches({"matchLabels": {"llm-d.ai/guide": "pd-disaggregation"}}, labels)
        # the endpoint picker's role filters read llm-d.ai/role from the selected pods
        assert pods[0][1]["llm-d.ai/role"] == role


def test_selector_evaluation_can_fail() -> None:
    assert not label_selector_matches({"matchLabels": {"a": "1"}}, {"a": "2"})
    assert not label_selector_matches({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {})
    assert label_selector_matches({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {"a": "1"})


def test_leader_selector_and_metrics_port_are_public(dev: Run) -> None:
    guide = load(*settings_input(stack_file_config())).serving.guide
    assert serving.leader_selector(guide) == router_values(dev)["router"]["modelServers"]["matchLabels"]
    for role in ROLES:
        ports = [p["containerPort"] for p in vllm_leader(lws(dev, role))["ports"]]
        assert [p for p in ports if p == serving.metrics_port(role)] == [flag_port(lws(dev, role))]


def test_serving_graph_order(dev: Run) -> None:
    lws_chart = dev.get(CHART, "lws-chart")
    for role in ROLES:
        reg = dev.get(LWS, f"serving-{role}")
        assert dev.depends_on(reg, lws_chart)
        for dep in [*kueue_objects(dev), *tpu_pools(dev), *dev.of_type(IAM)]:
            assert dev.depends_on(reg, dep), f"{reg.name} does not wait for {dep.name}"
    # Through the provider, all of it is deleted while the cluster still exists (no leaked load balancer).
    cluster = dev.get(CLUSTER, "cluster-gke")
    for type_, name in ((GATEWAY, "serving-gateway"), (CHART, "serving-router"), (LWS, "serving-prefill")):
        assert dev.depends_on(dev.get(type_, name), cluster)


def test_stack_outputs(dev: Run) -> None:
    out = dev.outputs
    assert out["gatewayName"] == "llm-d-inference-gateway"
    assert out["gatewayNamespace"] == "llm-d-pd-disaggregation"
    assert out["servedModelName"] == "Qwen/Qwen3.5-397B-A17B-FP8"
    verify = "python -m components verify --gateway-name llm-d-inference-gateway --namespace llm-d-pd-disaggregation"
    verify += " --model Qwen/Qwen3.5-397B-A17B-FP8 --pool pd-disaggregation --leaders 8 --timeout 14400"
    assert shlex.split(out["verifyCommand"]) == [
        *shlex.split(verify),
        "--credentials-command",
        out["credentialsCommand"],
    ]
    # the context kubectl and verify use: this stack's cluster, region and project, through the endpoint it opens
    project = dev.get(CLUSTER, "cluster-gke").inputs["project"]
    credentials = "gcloud container clusters get-credentials qwen-serving-cluster --location us-central1 --project"
    assert shlex.split(out["credentialsCommand"]) == [*shlex.split(credentials), project, "--dns-endpoint"]
    # the pool is the router release's (named after the guide); one leader per replica of each role
    assert out["inferencePool"] == router(dev)["name"]
    assert out["servingLeaders"] == sum(lws(dev, r)["spec"]["replicas"] for r in ROLES)


def test_serving_can_be_switched_off() -> None:
    run = with_serving({"enabled": False})
    assert run.of_type(LWS) == [] and run.of_type(IAM) == []
    assert not [r for r in run.of_type(CHART) if r.name == "serving-router"]
    assert "gatewayName" not in run.outputs and "verifyCommand" not in run.outputs


@pytest.mark.parametrize("budget", [14400, 3600, 7201])
def test_leaders_are_probed_with_the_startup_budget(budget: int) -> None:
    run = with_serving({"startupTimeoutSeconds": budget})
    for role in ROLES:
        obj = lws(run, role)
        container, port = vllm_leader(obj), flag_port(obj)
        # every probe asks vLLM itself (not decode's sidecar), on the port vLLM serves
        assert container["readinessProbe"]["httpGet"] == {"path": "/v1/models", "port": port}
        assert container["startupProbe"]["httpGet"] == {"path": "/v1/models", "port": port}
        assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": port}
        assert port in [p["containerPort"] for p in container["ports"]]
        startup = container["startupProbe"]
        allowed = startup["initialDelaySeconds"] + startup["periodSeconds"] * startup["failureThreshold"]
        assert budget <= allowed < budget + startup["periodSeconds"]
        # workers run no HTTP server: no probes, and they are not endpoints of the pool anyway
        assert not {"readinessProbe", "livenessProbe", "startupProbe"} & set(worker(obj)["containers"][0])
    assert f" --timeout {budget} " in run.outputs["verifyCommand"]


def test_startup_budget_covers_the_pods_own_waits() -> None:
    """The setting's floor is the sum of the waits manifests/vllm-pod.yaml allows itself."""
    from components.model.config.serving_settings import POD_STARTUP_WAITS_SECONDS

    shared = yaml.safe_load(serving.VLLM_POD.read_text())
    ray = int(re.search(r"--ray_init_timeout=(\d+)", shared["leaderScript"])[1])
    engine = int(shared["env"]["VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT"])
    assert ray + engine == POD_STARTUP_WAITS_SECONDS
    assert_rejected(
        {f"{P}:serving": {"startupTimeoutSeconds": ray + engine - 1}},
        ["serving.startupTimeoutSeconds", str(ray + engine - 1), f"at least {ray + engine} seconds"],
    )


def test_pod_ip_reaches_the_kv_transfer_config_and_keep_alive_outlives_the_sidecar(dev: Run) -> None:
    keep_alives: set[str] = set()
    pod_ip = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    for role in ROLES:
        obj = lws(dev, role)
        for container in (vllm_leader(obj), worker(obj)["containers"][0]):
            assert env_of(container)["POD_IP"] == pod_ip
        # Kubernetes expands $(POD_IP) from the container's env in command strings
        assert json.loads(flag(vllm_args(obj), "--kv-transfer-config"))["kv_ip"] == "$(POD_IP)"
        # Both vLLM servers sit behind the decode sidecar's pooled connections (to prefill, and to decode's own
        # vLLM on localhost), which it keeps idle for 90 s (llm-d-router v0.10.0 pkg/sidecar/proxy/proxy.go
        # IdleConnTimeout): the server's keep-alive must outlive that, or reused connections get reset.
        keep_alive = env_of(vllm_leader(obj))["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"]["value"]
        assert int(keep_alive) > 90 == serving.SIDECAR_IDLE_CONN_TIMEOUT_S
        keep_alives.add(keep_alive)
        # only the leader runs the API server
        assert "VLLM_HTTP_TIMEOUT_KEEP_ALIVE" not in env_of(worker(obj)["containers"][0])
    assert len(keep_alives) == 1, keep_alives


@pytest.mark.parametrize(
    ("prefill", "decode", "decode_state"),
    [("2x2x2", "2x2x2", "2x2x2"), ("2x2x1", "2x4x4", "2x4x4"), ("2x2x4", "4x4x8", "4x4x4")],
    ids=["dev", "other sub-slices", "super-slice decode"],
)
def test_serving_pods_avoid_unhealthy_partitions(prefill: str, decode: str, decode_state: str) -> None:
    """A sub-slice needs its own partition healthy; a super-slice, each cube-sized partition it stitches."""
    run = ok(
        {
            f"{P}:tpu": {"cubes": 4},
            f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
            f"{P}:serving": {"prefill": {"topology": prefill}, "decode": {"topology": decode, "replicas": 1}},
        }
    )
    for role, state in (("prefill", prefill), ("decode", decode_state)):
        for template in templates(lws(run, role)).values():
            assert template["spec"]["nodeSelector"] == {
                "cloud.google.com/gke-tpu-accelerator": "tpu7x",
                f"cloud.google.com/gke-tpu-partition-{state}-state": "HEALTHY",
            }
            # a partition shape GKE labels nodes with (a level of the Kueue Topology, from the same cube)
            assert f"cloud.google.com/gke-tpu-partition-{state}-id" in run.outputs["kueueTopologyLevels"]


def test_demo_jobsets_avoid_unhealthy_partitions() -> None:
    run = ok(
        {
            f"{P}:tpu": {"cubes": 4},
            f"{P}:demos": {"subslicing": {"topology": "2x2x4"}, "superslicing": {"enabled": True, "topology": "4x8x8"}},
        }
    )
    for name, state in (("subslicing", "2x2x4"), ("superslicing", "4x4x4")):  # a super-slice: per cube
        jobset = normalize(run.get(JOBSET, f"{name}-jobset").plain())
        pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        assert pod["spec"]["nodeSelector"][f"cloud.google.com/gke-tpu-partition-{state}-state"] == "HEALTHY"
        assert f"cloud.google.com/gke-tpu-partition-{state}-id" in run.outputs["kueueTopologyLevels"]


def test_the_system_pool_fit_counts_the_picker_and_no_proxy() -> None:
    pods = load(*settings_input(stack_file_config())).system_pool_pods()
    assert "serving.router.eppResources" in pods
    assert not [key for key in pods if "proxy" in key.lower()]
    # 6000m of controllers (0.5 + 0.5 + 1 + 4 CPU) fit one n2-standard-8 once the 4-CPU proxy is not counted
    ok({f"{P}:cluster": {"systemMachineType": "n2-standard-8"}})
