"""The vLLM model servers of the P/D stack: one LeaderWorkerSet per role, from one builder.

Prefill and decode differ only where a `Role` says so (KV role, vLLM port, the decode side's routing
sidecar; their containers: components/vllm_containers.py). Group size and the tensor-parallel size derive from the
slice topology (components/graph_args.py serving_role_args); the LWS's name carries the
revision of its pod shape (components/model/serving/rollout.py), so a change Kueue would refuse rolls to a new LWS.

Only leaders serve: they run vLLM's API server, the workers only Ray. `leader_selector` is the one
definition of "a pod that serves", used by the InferencePool; `leader_metrics_target`, a role's leaders and the
port their metrics are scraped on.
"""

import copy
from pathlib import Path
from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.model.config.images import pull_policy
from components.model.keys import (
    ENGINE_TYPE_LABEL,
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GUIDE_LABEL,
    LWS_API,
    MODEL_LABEL,
    ROLE_LABEL,
    SKIP_AWAIT_ANNOTATION,
    SKIP_TPU_WEBHOOK_CHECK,
    SLICE_TOPOLOGY_ANNOTATION,
    TIMEOUT_ANNOTATION,
    TPU_RESOURCE,
    TPU_SLICE_LABEL,
    WAIT_FOR_ANNOTATION,
    WORKER_INDEX_LABEL,
)
from components.model.pod_security import container_context, pod_context
from components.model.serving.rollout import ready_groups_condition, revision, rollout_timeout_seconds
from components.vllm_containers import (
    HF_SECRET,
    HF_SECRET_KEY,
    KV_TRANSFER_PORT,
    ROLES,
    SIDE_CHANNEL_PORT,
    VLLM_KEEP_ALIVE_S,
    WEIGHTS_MOUNT,
    ModelServerArgs,
    Role,
    env,
    probes,
    routing_sidecar,
    vllm_command,
)

# The leader's WORKER_INDEX_LABEL (sigs.k8s.io/lws api/leaderworkerset/v1 WorkerIndexLabelKey). The templates
# cannot carry the label: LWS sets it per pod.
LEADER_INDEX = "0"
# (LWS also labels every pod with its LWS's name, SetNameLabelKey; that name carries a revision,
# components/model/serving/rollout.py, so nothing that must find a role's pods across a rollout selects by it: the
# role label tells the roles apart.)
VLLM_POD = Path(__file__).resolve().parent.parent / "manifests" / "vllm-pod.yaml"
EXCLUSIVE_TOPOLOGY = {EXCLUSIVE_TOPOLOGY_ANNOTATION: TPU_SLICE_LABEL}


class ServingRoleArgs(TypedDict):
    name: str
    """The LWS's name before its revision."""
    replicas: int
    """LWS groups, one slice each."""
    priority: str
    """The groups' Kueue priority class."""
    topology: str
    """Each group's slice topology."""
    vms: int
    """The slice's TPU VMs: the group size, one pod per VM."""
    chips_per_pod: int
    """The TPU chips each pod requests (a whole VM's)."""
    tensor_parallel_size: int
    """vLLM `--tensor-parallel-size`: the slice's TensorCores."""
    node_selector: dict[str, str]
    """The pods' node selector: the accelerator and the healthy partitions of the slice's shape."""
    resources: dict[str, str]
    """Per-pod CPU and memory (requests = limits)."""
    queue_labels: dict[str, pulumi.Input[str]]
    """The labels that queue the LWS: the LocalQueue and the priority class, by Output."""
    create_first: bool
    """A replacement LWS is created before the old one is deleted (room for both, the capacity plan)."""
    wait_for: int
    """The new LWS's ready groups Pulumi waits for once (0: none)."""


def model_labels(model: ModelServerArgs, role: str) -> dict[str, str]:
    return {GUIDE_LABEL: model["guide"], MODEL_LABEL: model["model_label"], ROLE_LABEL: role, ENGINE_TYPE_LABEL: "vllm"}


def leader_selector(guide: str) -> dict[str, str]:
    """matchLabels that select the serving leaders of both roles and nothing else.

    The guide label alone also matches every worker (they share the model labels but run no API server);
    the LWS worker index narrows it to the leader of each group.
    """
    return {GUIDE_LABEL: guide, WORKER_INDEX_LABEL: LEADER_INDEX}


def leader_metrics_target(model: ModelServerArgs, role: str) -> tuple[dict[str, str], str]:
    """The labels selecting exactly the leaders of one role's LWS, and the named port vLLM serves /metrics on.

    vLLM serves /metrics on its API port (`vllm serve --port`); only the leader runs the API server.
    """
    selector = {**model_labels(model, role), WORKER_INDEX_LABEL: LEADER_INDEX}
    return selector, ROLES[role].vllm_port_name


def hf_token_secret(
    name: str, token: pulumi.Input[str] | None, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> k8s.core.v1.Secret | None:
    """The Secret `env` reads the Hugging Face `token` from (a Pulumi secret end to end), or None without one:
    the serving pods' and the download Job's, each in its own namespace."""
    if token is None:
        return None
    return k8s.core.v1.Secret(
        f"{name}-hf-token",
        metadata={"name": HF_SECRET, "namespace": namespace},
        string_data={HF_SECRET_KEY: token},
        opts=opts,
    )


def leader_worker_set(
    model: ModelServerArgs,
    role: Role,
    spec: ServingRoleArgs,
    *,
    namespace: pulumi.Input[str],
    service_account: pulumi.Input[str],
    hf_secret: pulumi.Input[str] | None,
) -> dict[str, Any]:
    """The LeaderWorkerSet of one role: `replicas` groups, each one slice of `topology`.

    Named `<serving.<role>.name>-<revision>` (components/model/serving/rollout.py). Pulumi never awaits it on a create
    or an update (`pulumi.com/skipAwait`); its ready groups are awaited once, by `leaders_ready` below.
    """
    shared = yaml.safe_load(VLLM_POD.read_text())
    labels = model_labels(model, role.name)
    # requests = limits: the whole VM's chips, and the CPU and memory of the role.
    amounts = {TPU_RESOURCE: str(spec["chips_per_pod"]), **spec["resources"]}
    resources = {"limits": dict(amounts), "requests": dict(amounts)}
    mount = model["weights_via"] == "mount"
    volumes, mounts = [shared["spec"]["volumes"]["shm"]], [shared["volumeMounts"]["shm"]]
    if mount:  # the FUSE volume exists only when vLLM reads the weights from it
        fuse = copy.deepcopy(shared["spec"]["volumes"]["weights"])
        fuse["csi"]["volumeAttributes"]["bucketName"] = model["weights_bucket"]
        volumes.append(fuse)
        mounts.append({**shared["volumeMounts"]["weights"], "mountPath": WEIGHTS_MOUNT})
    container_env = env(model["xla_cache_bucket"], shared["env"], hf_secret)
    transfer_ports = [
        {"containerPort": KV_TRANSFER_PORT, "name": "tpu-kv-transfer"},
        {"containerPort": SIDE_CHANNEL_PORT, "name": "tpu-pd-coord"},
    ]
    # GKE's TPU admission webhook otherwise requires the static topology selector dynamic slices do not carry
    # (llm-d/llm-d guides/pd-disaggregation/modelserver/tpu/v7-dynamic-slice/vllm/base/disaggregatedset.yaml).
    annotations = {SLICE_TOPOLOGY_ANNOTATION: spec["topology"], SKIP_TPU_WEBHOOK_CHECK: "true"}
    if mount:  # asks GKE to inject the FUSE sidecar
        annotations["gke-gcsfuse/volumes"] = "true"

    def pod(container: dict[str, Any], init: list[dict[str, Any]]) -> dict[str, Any]:
        common = copy.deepcopy(shared["spec"])
        pod_spec = {
            "serviceAccountName": service_account,
            # Leader and workers alike: the leader's vLLM needs its Ray workers until its last request is done.
            "terminationGracePeriodSeconds": model["termination_grace_period_seconds"],
            "nodeSelector": dict(spec["node_selector"]),
            "tolerations": common["tolerations"],
            "securityContext": pod_context(),
            **({"initContainers": init} if init else {}),
            "containers": [container],
            "volumes": copy.deepcopy(volumes),
        }
        return {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": pod_spec}

    leader_env = [
        *container_env,
        {"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": str(VLLM_KEEP_ALIVE_S)},
        # What the leader's weights check lists (weights_check), in either weightsVia.
        {"name": "WEIGHTS_BUCKET", "value": model["weights_bucket"]},
        {"name": "WEIGHTS_PREFIX", "value": model["model_path"]},
    ]

    def container(name: str, script: str, env_: list[dict[str, Any]], ports: list[Any], **extra: Any) -> dict[str, Any]:
        return {
            "name": name,
            "image": model["image"],
            "imagePullPolicy": pull_policy(model["image"]),
            "env": env_,
            "command": ["sh", "-c", script],
            "resources": copy.deepcopy(resources),
            "ports": ports,
            "volumeMounts": copy.deepcopy(mounts),
            # Root: the image's user, which owns every file vLLM writes (model/pod_security.py).
            "securityContext": container_context(),
            **extra,
        }

    vllm = vllm_command(model, role, spec["tensor_parallel_size"], shared["leaderScript"])
    leader_ports = [{"containerPort": role.vllm_port, "name": role.vllm_port_name}, *transfer_ports]
    leader = container("vllm-leader", vllm, leader_env, leader_ports, **probes(model, role))
    worker = container("vllm-worker", shared["workerScript"], container_env, copy.deepcopy(transfer_ports))
    leader_template = pod(leader, [routing_sidecar(model)] if role.routing_sidecar else [])
    worker_template = pod(worker, [])
    rev = revision(
        leader_spec=leader_template["spec"],
        worker_spec=worker_template["spec"],
        size=spec["vms"],
        replicas=spec["replicas"],
        queue=model["local_queue"],
        priority=spec["priority"],
    )
    # skipAwait: the leaders-ready patch's waitFor lands on this live object; without it every in-place update
    # would wait for the groups again (components/model/serving/rollout.py). Its delete is awaited (delete_timeouts).
    lws_annotations = {**EXCLUSIVE_TOPOLOGY, SKIP_AWAIT_ANNOTATION: "true"}
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": f"{spec['name']}-{rev}",
            "namespace": namespace,
            "annotations": lws_annotations,
            "labels": {**labels, **spec["queue_labels"]},
        },
        "spec": {
            "replicas": spec["replicas"],
            "leaderWorkerTemplate": {
                # One LWS group = one slice = one pod per TPU VM of the slice.
                "size": spec["vms"],
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": leader_template,
                "workerTemplate": worker_template,
            },
        },
    }


def leaders_ready(
    startup_timeout_seconds: int, lws_name: pulumi.Input[str], namespace: pulumi.Input[str], wait_for: int
) -> dict[str, Any]:
    """The patch of a role's new LWS that Pulumi awaits once, when it is created: until `wait_for` groups are ready.

    A `LeaderWorkerSetPatch` of the LWS with only the wait's annotations (its field manager owns nothing else).
    Declared per revision (its resource name carries the LWS's), so it is created with each new LWS and deleted
    with the old one, and never updated: an in-place change of the LWS (image, flags) re-awaits nothing.
    `wait_for` 0 (a delete-first rollout) awaits nothing, as before.
    """
    annotations: dict[str, str] = {}
    if wait_for > 0:
        annotations[WAIT_FOR_ANNOTATION] = ready_groups_condition(wait_for)
        annotations[TIMEOUT_ANNOTATION] = str(rollout_timeout_seconds(startup_timeout_seconds))
    return {"name": lws_name, "namespace": namespace, "annotations": annotations}


def lws_revision(model: ModelServerArgs, role: str, spec: ServingRoleArgs) -> str:
    """The revision part of the role's LWS name."""
    return lws_object_name(model, role, spec).removeprefix(f"{spec['name']}-")


def lws_object_name(model: ModelServerArgs, role: str, spec: ServingRoleArgs) -> str:
    """The name the role's LWS gets: `serving.<role>.name` plus its revision (which no Output influences)."""
    manifest = leader_worker_set(model, ROLES[role], spec, namespace="", service_account="", hf_secret=None)
    return manifest["metadata"]["name"]


# pulumi-kubernetes deletes the LWS in the foreground, so the LWS stays until its pods are gone (each may take its
# grace period), and waits for that (pulumi/pulumi-kubernetes@94977969d provider/pkg/await/await.go:964-1016) for the
# resource's customTimeouts.delete, else `pulumi.com/timeoutSeconds`, else 10 minutes (await.go:976-979,
# metadata/overrides.go:53-66); past it the delete fails and the LWS stays in the state (provider/pkg/provider/
# provider.go:2654-2656) while its pods go on stopping. The engine passes the timeout stored with the old state
# (pulumi/pulumi@1b5949891b pkg/resource/deploy/step.go:695) and diffs only the inputs (step_generator.go:2884-2971;
# a same step stores the new timeouts, pkg/backend/snapshot.go:294): a delete timeout is no change to preview.
PROVIDER_DELETE_WAIT_S = 600
# After the last pod has stopped: the garbage collector and the slice controller's Workload finalizer (released once
# the pods have terminated, docs/teardown.md), then the LWS itself. An estimate, not a measurement.
DELETE_MARGIN_S = 120


def delete_timeouts(termination_grace_period_seconds: int) -> pulumi.CustomTimeouts | None:
    """The LWS's delete wait when its pods may stop for longer than the provider's default window allows."""
    wait = termination_grace_period_seconds + DELETE_MARGIN_S
    return pulumi.CustomTimeouts(delete=f"{wait}s") if wait > PROVIDER_DELETE_WAIT_S else None
