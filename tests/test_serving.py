"""SPEC section 9: the P/D serving stack, its secrets, its derivations and its place in the graph."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from tests.harness import PROJECT_NUMBER, Run, assert_rejected, contains_secret, is_secret, normalize, run_program

P = "gke-tpu-slicing"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
SECRET = "kubernetes:core/v1:Secret"
TOKEN = "hf_serving_test_token_1234"


@pytest.fixture(scope="module")
def with_token() -> Run:
    run = run_program(secrets={f"{P}:hfToken": TOKEN})
    assert run.error is None, run.error
    return run


@pytest.fixture(scope="module")
def without_token() -> Run:
    run = run_program()
    assert run.error is None, run.error
    return run


def lws(run: Run, role: str) -> dict:
    return normalize(run.get(LWS, f"serving-{role}").plain())


def leader(obj: dict) -> dict:
    return obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]


def worker(obj: dict) -> dict:
    return obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]


def vllm_args(obj: dict) -> list[str]:
    script = leader(obj)["containers"][0]["command"][2]
    serve = next(line for line in script.splitlines() if line.startswith("vllm serve"))
    return shlex.split(serve)[2:]


def flag(args: list[str], name: str) -> str:
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return args[i + 1]
    raise AssertionError(f"{name} not in {args}")


def test_group_size_tp_and_tpu_requests_derive_from_the_slice(without_token: Run) -> None:
    for role in ("prefill", "decode"):
        obj = lws(without_token, role)
        lwt = obj["spec"]["leaderWorkerTemplate"]
        assert obj["spec"]["replicas"] == 4
        assert lwt["size"] == 2  # 2x2x2 = 8 chips / 4 per VM
        assert flag(vllm_args(obj), "--tensor-parallel-size") == "16"  # 8 chips x 2 TensorCores
        for pod in (leader(obj), worker(obj)):
            for kind in ("requests", "limits"):
                assert pod["containers"][0]["resources"][kind] == {
                    "google.com/tpu": "4",
                    "cpu": "220",
                    "memory": "850Gi",
                }
        for template in ("leaderTemplate", "workerTemplate"):
            assert lwt[template]["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"] == "2x2x2"


def test_other_slice_shapes_re_derive() -> None:
    run = run_program(
        {f"{P}:serving": {"decode": {"topology": "2x2x4", "replicas": 2}, "prefill": {"topology": "2x2x1"}}}
    )
    assert run.error is None, run.error
    decode, prefill = lws(run, "decode"), lws(run, "prefill")
    assert (decode["spec"]["replicas"], decode["spec"]["leaderWorkerTemplate"]["size"]) == (2, 4)
    assert flag(vllm_args(decode), "--tensor-parallel-size") == "32"
    assert prefill["spec"]["leaderWorkerTemplate"]["size"] == 1
    assert flag(vllm_args(prefill), "--tensor-parallel-size") == "8"


def test_prefill_and_decode_differ_only_by_role(without_token: Run) -> None:
    prefill, decode = lws(without_token, "prefill"), lws(without_token, "decode")
    p_args, d_args = vllm_args(prefill), vllm_args(decode)
    assert json.loads(flag(p_args, "--kv-transfer-config"))["kv_role"] == "kv_producer"
    assert json.loads(flag(d_args, "--kv-transfer-config"))["kv_role"] == "kv_consumer"
    assert (flag(p_args, "--port"), flag(d_args, "--port")) == ("8000", "8200")
    assert [p["containerPort"] for p in leader(prefill)["containers"][0]["ports"]] == [8000, 9100, 9600]
    assert [p["containerPort"] for p in leader(decode)["containers"][0]["ports"]] == [8200, 9100, 9600]
    assert "initContainers" not in leader(prefill)
    (sidecar,) = leader(decode)["initContainers"]
    assert sidecar["image"] == "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0"
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["args"][:3] == ["--port=8000", "--vllm-port=8200", "--connector=nixlv2"]
    # Everything else is the same builder's output: swap the role-specific parts and compare.
    same = [a for a in p_args if not a.startswith(("--port=", '{"kv_connector'))]
    assert same == [a for a in d_args if not a.startswith(("--port=", '{"kv_connector'))]
    assert worker(prefill) == worker(decode)
    assert prefill["metadata"]["labels"]["llm-d.ai/role"] == "prefill"
    assert decode["metadata"]["labels"]["llm-d.ai/role"] == "decode"


def test_vllm_flags_come_from_settings() -> None:
    run = run_program(
        {
            f"{P}:serving": {
                "maxModelLen": 4096,
                "maxNumBatchedTokens": 2048,
                "maxNumSeqs": 64,
                "kvCacheDtype": "auto",
                "enableExpertParallel": False,
                "servedModelName": "qwen",
                "weightsBucket": "my-weights",
            }
        }
    )
    assert run.error is None, run.error
    args = vllm_args(lws(run, "prefill"))
    assert flag(args, "--max-model-len") == "4096"
    assert flag(args, "--max-num-batched-tokens") == "2048"
    assert flag(args, "--max-num-seqs") == "64"
    assert flag(args, "--kv-cache-dtype") == "auto"
    assert flag(args, "--served-model-name") == "qwen"
    assert flag(args, "--model").startswith("gs://my-weights/models--Qwen--")
    assert "--enable-expert-parallel" not in args
    assert run.outputs["servedModelName"] == "qwen"


def test_queue_labels_and_exclusive_topology(without_token: Run) -> None:
    obj = lws(without_token, "decode")
    assert obj["metadata"]["annotations"] == {
        "leaderworkerset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-tpu-slice"
    }
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high-priority-3000"


def test_hf_token_is_a_secret_end_to_end(with_token: Run) -> None:
    (secret,) = with_token.of_type(SECRET)
    assert secret.inputs["metadata"]["name"] == "llm-d-hf-token"
    data = secret.inputs["stringData"]
    assert is_secret(data) or is_secret(data["HF_TOKEN"])
    assert normalize(secret.plain("stringData")) == {"HF_TOKEN": TOKEN}
    for reg in with_token.registrations:
        if TOKEN in json.dumps(reg.inputs, default=str):
            assert contains_secret(reg.inputs), f"{reg.type} {reg.name} has the token in plain text"
    assert not any(TOKEN in message for _, message in with_token.logs)
    assert not any(TOKEN in json.dumps(v, default=str) for v in with_token.outputs.values())
    for role in ("prefill", "decode"):
        obj = lws(with_token, role)
        for pod in (leader(obj), worker(obj)):
            (hf,) = [e for e in pod["containers"][0]["env"] if e["name"] == "HF_TOKEN"]
            assert hf == {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "llm-d-hf-token", "key": "HF_TOKEN"}},
            }
        assert secret.urn in with_token.get(LWS, f"serving-{role}").property_dependencies["spec"]


@pytest.mark.parametrize("token", [None, ""], ids=["absent", "empty"])
def test_no_token_means_no_secret_and_no_env(token: str | None) -> None:
    run = run_program(secrets={f"{P}:hfToken": token} if token is not None else {})
    assert run.error is None, run.error
    assert run.of_type(SECRET) == []
    for role in ("prefill", "decode"):
        for pod in (leader(lws(run, role)), worker(lws(run, role))):
            assert "HF_TOKEN" not in [e["name"] for e in pod["containers"][0]["env"]]


def test_gcs_fuse_identity_and_bucket_iam(without_token: Run) -> None:
    ksa = without_token.get("kubernetes:core/v1:ServiceAccount", "serving-gcs-fuse-ksa")
    assert ksa.inputs["metadata"] == {"name": "gcs-fuse-ksa", "namespace": "llm-d-pd-disaggregation"}
    members = sorted(
        (r.inputs["role"], r.inputs["bucket"], r.inputs["member"])
        for r in without_token.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    )
    principal = (
        f"principal://iam.googleapis.com/projects/{PROJECT_NUMBER}/locations/global/workloadIdentityPools/"
        "my-tpu-project.svc.id.goog/subject/ns/llm-d-pd-disaggregation/sa/gcs-fuse-ksa"
    )
    assert members == [
        ("roles/storage.bucketViewer", "gemma3-weights", principal),
        ("roles/storage.objectUser", "gemma3-weights", principal),
    ]
    lookups = [c for c in without_token.mocks.calls if c.token == "gcp:organizations/getProject:getProject"]
    assert [c.args.get("projectId") for c in lookups] == ["my-tpu-project"]
    for member in without_token.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        assert ksa.urn in member.property_dependencies["member"]
    for role in ("prefill", "decode"):
        obj = lws(without_token, role)
        assert leader(obj)["serviceAccountName"] == worker(obj)["serviceAccountName"] == "gcs-fuse-ksa"
        volume = leader(obj)["volumes"][1]["csi"]
        assert volume["driver"] == "gcsfuse.csi.storage.gke.io"
        assert volume["volumeAttributes"]["bucketName"] == "gemma3-weights"


def test_gateway_and_router(without_token: Run) -> None:
    gw = without_token.get("kubernetes:gateway.networking.k8s.io/v1:Gateway", "serving-gateway")
    assert gw.inputs["metadata"] == {"name": "llm-d-inference-gateway", "namespace": "llm-d-pd-disaggregation"}
    assert normalize(gw.inputs["spec"]) == {
        "gatewayClassName": "gke-l7-rilb",
        "listeners": [
            {"name": "default", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}
        ],
    }
    proxy_subnet = without_token.get("gcp:compute/subnetwork:Subnetwork", "network-proxy")
    assert without_token.depends_on(gw, proxy_subnet)

    router = without_token.get("kubernetes:helm.sh/v4:Chart", "serving-router")
    r = normalize(router.plain())
    assert (r["name"], r["chart"], r["version"], r["namespace"]) == (
        "pd-disaggregation",
        "oci://ghcr.io/llm-d/charts/llm-d-router-gateway-dev",
        "v0",
        "llm-d-pd-disaggregation",
    )
    values = r["values"]
    assert values["provider"] == {"name": "gke"}
    assert values["httpRoute"] == {
        "create": True,
        "inferenceGatewayName": "llm-d-inference-gateway",
        "requestTimeout": "0s",
    }
    assert values["router"]["modelServers"]["matchLabels"] == {"llm-d.ai/guide": "pd-disaggregation"}
    config = yaml.safe_load(values["router"]["epp"]["pluginsCustomConfig"]["pd-config.yaml"])
    assert [p["name"] for p in config["schedulingProfiles"]] == ["prefill", "decode"]
    assert values["router"]["epp"]["pluginsConfigFile"] == "pd-config.yaml"
    assert gw.urn in router.property_dependencies["values"]
    assert without_token.depends_on(
        router, without_token.get("kubernetes:yaml/v2:ConfigGroup", "inference-extension-crds")
    )


def test_model_servers_carry_the_label_the_router_selects(without_token: Run) -> None:
    router = normalize(without_token.get("kubernetes:helm.sh/v4:Chart", "serving-router").plain())
    selector = router["values"]["router"]["modelServers"]["matchLabels"]
    for role in ("prefill", "decode"):
        obj = lws(without_token, role)
        for template in ("leaderTemplate", "workerTemplate"):
            labels = obj["spec"]["leaderWorkerTemplate"][template]["metadata"]["labels"]
            assert selector.items() <= labels.items()


def test_serving_graph_order(without_token: Run) -> None:
    run = without_token
    lws_chart = run.get("kubernetes:helm.sh/v4:Chart", "lws-chart")
    cluster = run.get("gcp:container/cluster:Cluster", "cluster-gke")
    kueue_objects = [r for r in run.registrations if r.type.startswith("kubernetes:kueue.x-k8s.io")]
    pools = [r for r in run.of_type("gcp:container/nodePool:NodePool") if r.name != "cluster-system"]
    for role in ("prefill", "decode"):
        reg = run.get(LWS, f"serving-{role}")
        assert run.depends_on(reg, lws_chart)
        for dep in [*kueue_objects, *pools, *run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")]:
            assert run.depends_on(reg, dep), f"{reg.name} does not wait for {dep.name}"
    # Through the provider, all of it is deleted while the cluster still exists (no leaked load balancer).
    for name, type_ in (
        ("serving-gateway", "kubernetes:gateway.networking.k8s.io/v1:Gateway"),
        ("serving-router", "kubernetes:helm.sh/v4:Chart"),
        ("serving-prefill", LWS),
    ):
        assert run.depends_on(run.get(type_, name), cluster)


def test_stack_outputs(without_token: Run) -> None:
    out = without_token.outputs
    assert out["gatewayName"] == "llm-d-inference-gateway"
    assert out["gatewayNamespace"] == "llm-d-pd-disaggregation"
    assert out["servedModelName"] == "Qwen/Qwen3.5-397B-A17B-FP8"
    assert shlex.split(out["verifyCommand"]) == [
        "python",
        "-m",
        "components",
        "verify",
        "--gateway-name",
        "llm-d-inference-gateway",
        "--namespace",
        "llm-d-pd-disaggregation",
        "--model",
        "Qwen/Qwen3.5-397B-A17B-FP8",
    ]


def test_serving_can_be_switched_off() -> None:
    run = run_program({f"{P}:serving": {"enabled": False}})
    assert run.error is None, run.error
    assert run.of_type(LWS) == [] and run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember") == []
    assert not [r for r in run.registrations if r.type == "kubernetes:helm.sh/v4:Chart" and r.name == "serving-router"]
    assert "gatewayName" not in run.outputs and "verifyCommand" not in run.outputs


BAD = [
    (
        "tensor parallel inconsistent with the slice",
        {f"{P}:serving": {"decode": {"tensorParallelSize": 8}}},
        ["serving.decode.tensorParallelSize = 8", "16", "8 chips x 2 TensorCores"],
    ),
    (
        "LWS name over llm-d's 39 characters",
        {f"{P}:serving": {"prefill": {"name": "kueue-vllm-prefill-model-streamer-extras"}}},
        ["serving.prefill.name", "kueue-vllm-prefill-model-streamer-extras", "at most 39"],
    ),
    (
        "model label over 63 characters",
        {f"{P}:serving": {"model": "org/" + "m" * 64}},
        ["serving.model", "label value"],
    ),
    ("guide too long for a release name", {f"{P}:serving": {"guide": "g" * 54}}, ["serving.guide", "at most 53"]),
    (
        "serving topology fits no partition",
        {f"{P}:serving": {"prefill": {"topology": "1x1x1"}}},
        ["serving.prefill.topology", "1x1x1"],
    ),
]


@pytest.mark.parametrize(("case", "overrides", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_serving_config_fails_before_any_resource(case: str, overrides: dict, expected: list[str]) -> None:
    assert_rejected(overrides, expected)


def test_explicit_consistent_tensor_parallel_size_is_accepted() -> None:
    run = run_program({f"{P}:serving": {"decode": {"tensorParallelSize": 16}}})
    assert run.error is None, run.error
