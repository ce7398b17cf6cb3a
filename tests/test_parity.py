"""Semantic parity with the reference manifests (../shared/reference/codelab), field by field.

Every difference must be one of the deliberate improvements listed in IMPROVEMENTS (and in docs/codelab.md,
"Deliberate differences from the reference"); a difference that is not listed fails, and so does a listed one
that disappears.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.model.config.images import PYTHON
from components.model.keys import BURST_SLOT_LABEL
from components.vllm_containers import weights_check
from tests import upstream
from tests.harness import Run, normalize, ok
from tests.stack_config import CODELAB_MIX, P

NAMESPACE = "llm-d-pd-disaggregation"
BUCKET = "gemma3-weights"

# path -> (ours, reference, why). Paths are "<kind>/<name>:<dotted path>"; list items that all carry a
# `name` are addressed by it (`env[POD_IP]`). Instead of a value, `ours` may be a predicate f(ours, reference)
# and `reference` a predicate f(reference).
Expected = Any | Callable[[Any], bool]
PINNED = "an exact tag with its digest (demos.image) instead of the floating python:3.12, pulled once per node"
LEAST_PRIVILEGE = (
    "no privilege escalation, no capabilities, the runtime's seccomp profile (docs/serving.md, Pod security)"
)
POD_CONTEXT = {"seccompProfile": {"type": "RuntimeDefault"}}
ROOT_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
SKIP_WEBHOOK = "dynamic-slice pods carry no static topology selector, which GKE's TPU webhook would require (llm-d)"


def added(ours: Expected, why: str) -> tuple[Expected, Any, str]:
    """A field the reference lacks."""
    return ours, "<absent>", why


IMPROVEMENTS: dict[str, tuple[Expected, Any, str]] = {
    "ClusterQueue/cq:spec.resourceGroups[0].flavors[slice-rf].resources[google.com/tpu].nominalQuota": (
        "128",
        "999999",
        "TPU quota = chips the node pools provide (2 x 64), so Kueue's quota preemption matches the hardware",
    ),
    "ClusterQueue/cq:metadata.annotations": added(
        {"gke-tpu-slicing/resource-flavor": "slice-rf"},
        "names the ResourceFlavor by Output, so a delete-first replacement of the flavor replaces the ClusterQueue "
        "first, the order Kueue's in-use finalizer allows (components/kueue_objects.py)",
    ),
    **{
        f"WorkloadPriorityClass/{name}:apiVersion": (
            "kueue.x-k8s.io/v1beta2",
            "kueue.x-k8s.io/v1beta1",
            "Kueue v0.17 serves v1beta1 deprecated; v1beta2 is its storage version",
        )
        for name in ("low-priority-1000", "medium-priority-2000", "high-priority-3000")
    },
    **{
        f"JobSet/{name}:spec.replicatedJobs[job-jax].template.spec.template.spec.nodeSelector."
        f"cloud.google.com/gke-tpu-partition-{shape}-state": added(
            "HEALTHY", "only healthy partitions: the slice's own (sub-slice) or each cube's (super-slice)"
        )
        for name, shape in (("kueue-jobset-simple-subslicing", "2x2x2"), ("kueue-jobset-simple-superslicing", "4x4x4"))
    },
    **{
        f"JobSet/{name}:spec.replicatedJobs[job-jax].template.spec.template.metadata.annotations."
        "cloud.google.com/skip-tpu-webhook-check": added("true", SKIP_WEBHOOK)
        for name in ("kueue-jobset-simple-subslicing", "kueue-jobset-simple-superslicing")
    },
    **{
        f"JobSet/{name}:spec.replicatedJobs[job-jax].template.spec.template.spec.containers[simple-container].{k}": v
        for name in ("kueue-jobset-simple-subslicing", "kueue-jobset-simple-superslicing")
        for k, v in {
            "image": (PYTHON.reference, "python:3.12", PINNED),
            "imagePullPolicy": added("IfNotPresent", PINNED),
            "securityContext": added(ROOT_CONTEXT, LEAST_PRIVILEGE),
        }.items()
    },
    **{
        f"JobSet/{name}:spec.replicatedJobs[job-jax].template.spec.template.spec.securityContext": added(
            POD_CONTEXT, LEAST_PRIVILEGE
        )
        for name in ("kueue-jobset-simple-subslicing", "kueue-jobset-simple-superslicing")
    },
}

# A serving LWS is named <configured name>-<revision of its pod shape> (components/model/serving/rollout.py).
REVISION = re.compile(r"-[0-9a-f]{5}$")


def _serving_improvements() -> dict[str, tuple[Expected, Any, str]]:
    out: dict[str, tuple[Expected, Any, str]] = {}
    fuse = "gcs-fuse-csi-ephemeral"
    why_fuse = "weights stream from gs://: the FUSE volume is declared only with serving.weightsVia=mount"
    for role, kv_role, port in (("prefill", "kv_producer", 8000), ("decode", "kv_consumer", 8200)):
        base = f"kueue-vllm-{role}-model-streamer"
        meta = f"LeaderWorkerSet/{base}:metadata"
        out[f"{meta}.name"] = (
            lambda ours, ref: REVISION.search(ours) is not None and REVISION.sub("", ours) == ref,
            base,
            "the name carries the revision of the pod shape, so a change Kueue refuses in place rolls to a new LWS",
        )
        out[f"{meta}.annotations.pulumi.com/skipAwait"] = added(
            "true",
            "Pulumi awaits the new LWS's groups once, through a patch of its own, not on every update of the set",
        )
        lws = f"LeaderWorkerSet/{base}:spec.leaderWorkerTemplate"
        for template, container in (("leaderTemplate", "vllm-leader"), ("workerTemplate", "vllm-worker")):
            pod = f"{lws}.{template}"
            c = f"{pod}.spec.containers[{container}]"
            out[f"{pod}.metadata.annotations.cloud.google.com/skip-tpu-webhook-check"] = added("true", SKIP_WEBHOOK)
            out[f"{pod}.spec.securityContext"] = added(POD_CONTEXT, LEAST_PRIVILEGE)
            out[f"{c}.securityContext"] = added(ROOT_CONTEXT, LEAST_PRIVILEGE)
            out[f"{pod}.spec.terminationGracePeriodSeconds"] = added(
                360, "a stopping pod may finish requests up to the Gateway's 300 s timeout (workers serve the leader)"
            )
            out[f"{pod}.metadata.annotations.gke-gcsfuse/volumes"] = ("<absent>", "true", why_fuse)
            out[f"{pod}.spec.volumes[{fuse}]"] = (
                "<absent>",
                lambda ref: ref["csi"]["driver"] == "gcsfuse.csi.storage.gke.io",
                why_fuse,
            )
            out[f"{c}.volumeMounts[{fuse}]"] = ("<absent>", {"name": fuse, "mountPath": "/data"}, why_fuse)
            out[f"{pod}.spec.nodeSelector.cloud.google.com/gke-tpu-partition-2x2x2-state"] = added(
                "HEALTHY", "only healthy partitions (the reference has it commented out)"
            )
            out[f"{c}.env[VLLM_XLA_CACHE_PATH].value"] = (
                lambda ours, ref: re.fullmatch(r"gs://xla-cache-[0-9a-f]{20}/xla_cache", ours) is not None,
                "gs://gemma3-weights/xla_cache",
                "the XLA cache goes to the stack's own bucket, the one the pods may write; the weights are read-only",
            )
            out[f"{c}.env[POD_IP]"] = added(
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                "the pod IP for the KV transfer config, as llm-d's TPU7x recipe",
            )
        leader = f"{lws}.leaderTemplate.spec.containers[vllm-leader]"
        for probe, path in (
            ("startupProbe", "/v1/models"),
            ("readinessProbe", "/v1/models"),
            ("livenessProbe", "/health"),
        ):
            out[f"{leader}.{probe}"] = added(
                lambda ours, ref, path=path, port=port: ours["httpGet"] == {"path": path, "port": port},
                "leaders join the pool only once vLLM serves the model (llm-d's probes)",
            )
        kv = f'"kv_role":"{kv_role}"}}'
        out[f"{leader}.command[2]"] = (
            lambda ours, ref, kv=kv: (
                ours
                == weights_check()
                + ref.replace(kv, kv[:-1] + ',"kv_ip":"$(POD_IP)"}').replace("\nvllm serve ", "\nexec vllm serve ")
            ),
            lambda ref, kv=kv: kv in ref and "\nvllm serve " in ref,
            "kv_ip = $(POD_IP) in the KV transfer config, as llm-d's TPU7x recipe; `exec` so vLLM gets SIGTERM; "
            "first the weights check (the snapshot is in the bucket, or one line naming it and exit 1)",
        )
        for name in ("WEIGHTS_BUCKET", "WEIGHTS_PREFIX"):
            out[f"{leader}.env[{name}]"] = added(
                lambda ours, ref, name=name: ours["name"] == name and bool(ours["value"]),
                "where the leader's weights check lists the snapshot (serving.weightsBucket, serving.modelPath)",
            )
        worker = f"{lws}.workerTemplate.spec.containers[vllm-worker]"
        out[f"{worker}.command[2]"] = (
            lambda ours, ref: (
                ours.startswith(ref.split("\n", 1)[0] + "\ntrap 'ray stop; exit 0' TERM\n")
                and ours.endswith(ref.split("\n", 1)[1].rstrip("\n") + " &\nwait $!\n")
            ),
            lambda ref: "multi-node-serving.sh worker" in ref,
            "the worker's shell (PID 1) traps SIGTERM and stops Ray, so the pod stops without the whole grace period",
        )
        if role == "decode":
            # The router's release of the sidecar (llm-d-router v0.10.0, which renamed the image in v0.9.0),
            # run as llm-d's TPU7x dynamic-slice recipe runs it (llm-d/llm-d@f518910e decode.yaml).
            sidecar = f"{lws}.leaderTemplate.spec.initContainers[routing-proxy]"
            why = "the sidecar of the pinned llm-d-router v0.10.0, with llm-d's TPU7x recipe's flags and port"
            out[f"{sidecar}.image"] = (
                "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
                "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0",
                why,
            )
            out[f"{sidecar}.args"] = (
                # v0.10.0 removed --connector and forwards to 8200 by default
                ["--port=8000", "--kv-connector=nixlv2", "--zap-log-level=1", "--secure-proxy=false"],
                ["--port=8000", "--vllm-port=8200", "--connector=nixlv2", "--zap-log-level=1", "--secure-proxy=false"],
                why,
            )
            out[f"{sidecar}.ports[sidecar]"] = added({"containerPort": 8000, "name": "sidecar", "protocol": "TCP"}, why)
            out[f"{sidecar}.ports[modelserver]"] = (
                "<absent>",
                {"containerPort": 8000, "name": "modelserver", "protocol": "TCP"},
                why,
            )
            probed = "the sidecar is Ready when it answers on the pool's port, sized, and restarts without the registry"
            out[f"{sidecar}.imagePullPolicy"] = ("IfNotPresent", "Always", probed)
            out[f"{sidecar}.readinessProbe"] = added(
                {
                    "httpGet": {"path": "/health", "port": 8000},
                    "periodSeconds": 5,
                    "timeoutSeconds": 2,
                    "failureThreshold": 3,
                },
                probed,
            )
            out[f"{sidecar}.resources.requests"] = added({"cpu": "1", "memory": "256Mi"}, probed)
            out[f"{sidecar}.resources.limits"] = added({"cpu": "2", "memory": "1Gi"}, probed)
            out[f"{sidecar}.securityContext.capabilities"] = added({"drop": ["ALL"]}, LEAST_PRIVILEGE)
        out[f"{leader}.env[VLLM_HTTP_TIMEOUT_KEEP_ALIVE]"] = added(
            {"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": "120"},
            "vLLM's 5 s keep-alive is shorter than the decode sidecar's 90 s idle timeout (llm-d sets 120 s)",
        )
    return out


IMPROVEMENTS.update(_serving_improvements())


def reference_dir() -> Path:
    return upstream.path("reference/codelab")


def load_reference(name: str) -> list[dict[str, Any]]:
    text = (reference_dir() / name).read_text()
    text = text.replace("${NAMESPACE}", NAMESPACE).replace("MODEL_WEIGHT_BUCKET", BUCKET)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _named(items: Any) -> bool:
    return isinstance(items, list) and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)


def diff(ours: Any, ref: Any, path: str = "") -> dict[str, tuple[Any, Any]]:
    if _named(ours) and _named(ref) and (ours or ref):
        # Named items (env, volumes, containers, ...) compare by name, so one added item is one difference.
        mine, theirs = {i["name"]: i for i in ours}, {i["name"]: i for i in ref}
        out: dict[str, tuple[Any, Any]] = {}
        for name in sorted(set(mine) | set(theirs)):
            out.update(diff(mine.get(name, "<absent>"), theirs.get(name, "<absent>"), f"{path}[{name}]"))
        if [i["name"] for i in ours if i["name"] in theirs] != [i["name"] for i in ref if i["name"] in mine]:
            out[f"{path}<order>"] = ([i["name"] for i in ours], [i["name"] for i in ref])
        return out
    if isinstance(ours, dict) and isinstance(ref, dict):
        out: dict[str, tuple[Any, Any]] = {}
        for key in sorted(set(ours) | set(ref)):
            sub = f"{path}.{key}" if path else key
            out.update(diff(ours.get(key, "<absent>"), ref.get(key, "<absent>"), sub))
        return out
    if isinstance(ours, list) and isinstance(ref, list) and len(ours) == len(ref):
        out = {}
        for i, (a, b) in enumerate(zip(ours, ref, strict=True)):
            out.update(diff(a, b, f"{path}[{i}]"))
        return out
    return {} if ours == ref else {path: (ours, ref)}


@pytest.fixture(scope="module")
def dev_with_token() -> Run:
    # The reference always mounts HF_TOKEN; with a token configured the program does too.
    # The codelab's whole mix: its manifests include the super-slicing JobSet, which dev runs as a step of its own.
    return ok(CODELAB_MIX, secrets={f"{P}:hfToken": "hf_parity_token"})


def ours_by_kind_and_name(run: Run) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for reg in run.registrations:
        if (
            reg.custom
            and reg.type.startswith("kubernetes:")
            and "kind" in reg.inputs
            and not reg.type.endswith("Patch")
        ):
            obj = normalize(reg.plain())
            name = obj["metadata"]["name"]
            if BURST_SLOT_LABEL in obj["metadata"].get("labels", {}):
                continue  # a burst slot: the codelab serves with fixed groups (its floor is compared)
            out[(obj["kind"], REVISION.sub("", name) if obj["kind"] == "LeaderWorkerSet" else name)] = obj
    return out


@pytest.mark.parametrize(
    "reference",
    [
        "kueue-resources.yaml.template",
        "workload-priority-class.yaml",
        "kueue-jobset-simple-subslicing.yaml",
        "kueue-jobset-simple-superslicing.yaml",
        "kueue-lws-prefill-model-streamer.yaml",
        "kueue-lws-decode-model-streamer.yaml",
    ],
)
def test_matches_reference_except_documented_improvements(dev_with_token: Run, reference: str) -> None:
    ours = ours_by_kind_and_name(dev_with_token)
    docs = load_reference(reference)
    assert docs
    for ref in docs:
        key = (ref["kind"], ref["metadata"]["name"])
        assert key in ours, f"the program declares no {key}"
        found = {f"{key[0]}/{key[1]}:{p}": v for p, v in diff(ours[key], ref).items()}
        expected = {p: (o, r) for p, (o, r, _) in IMPROVEMENTS.items() if p.startswith(f"{key[0]}/{key[1]}:")}
        assert sorted(found) == sorted(expected), f"{reference}: undocumented (or vanished) differences"
        for path, (mine, theirs) in found.items():
            want_ours, want_ref = expected[path]
            assert want_ref(theirs) if callable(want_ref) else theirs == want_ref, f"{path}: reference {theirs!r}"
            assert want_ours(mine, theirs) if callable(want_ours) else mine == want_ours, f"{path}: ours {mine!r}"


def test_reference_has_no_object_the_program_lacks(dev_with_token: Run) -> None:
    ours = ours_by_kind_and_name(dev_with_token)
    for ref_file in sorted(reference_dir().iterdir()):
        for ref in load_reference(ref_file.name):
            assert (ref["kind"], ref["metadata"]["name"]) in ours, ref_file.name
