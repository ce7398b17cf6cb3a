"""The prefill and decode LeaderWorkerSets' pods: group size, tensor parallelism and TPU requests from the slice, the
vLLM flags, probes and environment, where the weights are read from, and the partitions the pods avoid."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from components.vllm_containers import SIDECAR_IDLE_CONN_TIMEOUT_S
from components.vllm_leaderworkersets import VLLM_POD
from tests.graph_queries import ROLES, leader, lws, templates, vllm_leader
from tests.harness import JOBSET, Run, assert_rejected, normalize, ok
from tests.rollout_fixtures import NO_DEMOS
from tests.serving_fixtures import env_of, flag, flag_port, vllm_args, with_serving, worker
from tests.stack_config import P

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
    # Everything else is the same builder's output: swap the role-specific parts and compare.
    same = [a for a in p_args if not a.startswith(("--port=", '{"kv_connector'))]
    assert same == [a for a in d_args if not a.startswith(("--port=", '{"kv_connector'))]
    assert worker(prefill) == worker(decode)
    assert prefill["metadata"]["labels"]["llm-d.ai/role"] == "prefill"
    assert decode["metadata"]["labels"]["llm-d.ai/role"] == "decode"


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

    shared = yaml.safe_load(VLLM_POD.read_text())
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
        assert int(keep_alive) > 90 == SIDECAR_IDLE_CONN_TIMEOUT_S
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
    run = with_serving(
        {"prefill": {"topology": prefill}, "decode": {"topology": decode, "replicas": 1}},
        {f"{P}:tpu": {"cubes": 4}, **NO_DEMOS},
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


def test_every_dynamic_slice_pod_template_skips_gkes_static_topology_check(codelab: Run) -> None:
    templates_seen = 0
    for role in ROLES:
        for template in templates(lws(codelab, role)).values():
            assert template["metadata"]["annotations"]["cloud.google.com/skip-tpu-webhook-check"] == "true"
            templates_seen += 1
    for reg in codelab.of_type(JOBSET):
        for job in normalize(reg.plain())["spec"]["replicatedJobs"]:
            annotations = job["template"]["spec"]["template"]["metadata"]["annotations"]
            assert annotations["cloud.google.com/skip-tpu-webhook-check"] == "true"
            templates_seen += 1
    assert templates_seen == 6  # 2 LWS x (leader, worker) + 2 demo JobSets
