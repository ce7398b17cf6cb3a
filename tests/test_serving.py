"""SPEC section 9's serving stack as a whole: the settings it refuses, its Hugging Face token and pod identity, the
pool's selection of leaders, its place in the graph and its stack outputs."""

from __future__ import annotations

import json
import shlex

import pytest

from components.cli.plan import settings_input
from components.model.config.settings import load
from tests.graph_queries import ROLES, kueue_objects, label_selector_matches, leader, lws, templates, tpu_pools
from tests.harness import (
    CHART,
    CLUSTER,
    LWS,
    PROJECT_NUMBER,
    Run,
    assert_rejected,
    contains_secret,
    is_secret,
    normalize,
    ok,
)
from tests.serving_fixtures import GATEWAY, SIDECAR, env_of, router, router_values, with_serving, worker
from tests.stack_config import P, stack_file_config

SECRET = "kubernetes:core/v1:Secret"
IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
TOKEN = "hf_serving_test_token_1234"


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
    # The router chart's HTTPRoute names the Gateway truncated to 63 (llm-d-router-gateway templates/_helpers.tpl).
    "Gateway name over 63": ({"gateway": {"name": "g" * 64}}, ["serving.gateway.name", "at most 63"]),
    "serving topology fits no partition": ({"prefill": {"topology": "1x1x1"}}, ["serving.prefill.topology", "1x1x1"]),
}


@pytest.mark.parametrize(("settings", "fragments"), BAD.values(), ids=BAD.keys())
def test_bad_serving_config_fails_before_any_resource(settings: dict, fragments: list[str]) -> None:
    assert_rejected({f"{P}:serving": settings}, fragments)


def test_explicit_consistent_tensor_parallel_size_is_accepted() -> None:
    with_serving({"decode": {"tensorParallelSize": 16}})


def serving_secrets(run: Run) -> list:
    """Secrets of the serving layer (observability adds a scrape token Secret of its own)."""
    return [r for r in run.of_type(SECRET) if r.name.startswith("serving-")]


def test_hf_token_is_a_secret_end_to_end() -> None:
    run = ok(secrets={f"{P}:hfToken": TOKEN})
    (secret,) = serving_secrets(run)
    assert secret.inputs["metadata"]["name"] == "llm-d-hf-token"
    data = secret.inputs["stringData"]
    assert is_secret(data) or is_secret(data["HF_TOKEN"])
    assert normalize(secret.plain("stringData")) == {"HF_TOKEN": TOKEN}
    for reg in run.registrations:
        if TOKEN in json.dumps(reg.inputs, default=str):
            assert contains_secret(reg.inputs), f"{reg.type} {reg.name} has the token in plain text"
    assert not any(TOKEN in message for _, message in run.logs)
    assert not any(TOKEN in json.dumps(v, default=str) for v in run.outputs.values())
    ref = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "llm-d-hf-token", "key": "HF_TOKEN"}}}
    for role in ROLES:
        for pod in (leader(lws(run, role)), worker(lws(run, role))):
            assert [e for e in pod["containers"][0]["env"] if e["name"] == "HF_TOKEN"] == [ref]
        assert secret.urn in run.get(LWS, f"serving-{role}").property_dependencies["spec"]


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
    assert [c.args.get("projectId") for c in lookups] == ["my-tpu-project"] * 2  # serving's and KEDA's operator's
    for member in dev.of_type(IAM):
        assert ksa.urn in member.property_dependencies["member"]
    for role in ROLES:
        obj = lws(dev, role)
        assert leader(obj)["serviceAccountName"] == worker(obj)["serviceAccountName"] == "gcs-fuse-ksa"


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


def test_the_system_pool_fit_counts_the_picker_and_no_proxy() -> None:
    pods = load(*settings_input(stack_file_config())).system_pool_pods()
    assert "serving.router.eppResources" in pods
    assert not [key for key in pods if "proxy" in key.lower()]
    # 6500m of controllers (Kueue's 2 x 0.5, JobSet's and LWS's one replica each, 0.5 + 1, the picker's 4 CPU) fit
    # one n2-standard-8 once the 4-CPU proxy is not counted
    one = {"replicas": 1}
    ok({f"{P}:cluster": {"systemMachineType": "n2-standard-8"}, f"{P}:addons": {"jobset": one, "lws": one}})
