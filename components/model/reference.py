"""The configuration reference: every key of the settings model, its rule and where the rule comes from.

`keys()` walks the pydantic model tree, so a key added to a model appears here (and in
docs/configuration.md, and in the per-key tests) without anything else to do, except recording its rule in
RULES (the Google Cloud keys' in reference_gcp.py, the Kubernetes keys' in reference_k8s.py and
reference_serving.py, observability and hfToken here; the sources they cite in reference_sources.py): the
allowed values in words, their source (documentation URL or upstream code), the row of the change table that
says what changing it does, one value the rule refuses and one legal edge value. A key without a rule is
listed as such, and tests/test_configuration_reference.py fails naming it.

Pure model code: no Pulumi. `python -m components reference --write` regenerates docs/configuration.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from components.model.checks import PROJECT
from components.model.reference_gcp import GCP_RULES
from components.model.reference_k8s import K8S_RULES
from components.model.reference_sources import CHANGES, CHANNELS_API, PROM_DURATION, PULUMI_SECRETS, THIS_PROGRAM, Rule
from components.model.settings import SECRET_PATHS, Settings, _is_secret


def _expand(pattern: str) -> list[str]:
    """`a.{b,c}.d` -> [a.b.d, a.c.d] (one level of alternatives, possibly several groups)."""
    m = re.search(r"\{([^}]*)\}", pattern)
    if not m:
        return [pattern]
    return [p for alt in m.group(1).split(",") for p in _expand(pattern[: m.start()] + alt + pattern[m.end() :])]


_TOKEN = "hf_" + "x" * 34  # the shape of a Hugging Face token (never a real one)

RULES: dict[str, Rule] = {
    **GCP_RULES,
    **K8S_RULES,
    "observability.{enabled,scraping,dashboard,alerts}": Rule(
        "true or false", THIS_PROGRAM, "observability", "maybe", False
    ),
    "observability.scrapeInterval": Rule(
        "a positive Prometheus duration: whole numbers of w, d, h, m, s, ms, largest unit first (30s, 1m30s, "
        "1500ms); no y, which the CRD's duration format does not know",
        PROM_DURATION,
        "observability",
        "1.5m",
        "1m30s",
    ),
    "observability.{pendingWorkloadMinutes,noReadyLeaderMinutes,quotaFullMinutes}": Rule(
        "an integer from 1 to 1440", THIS_PROGRAM, "observability", 1441, 1440
    ),
    "observability.notificationChannels": Rule(
        "a list of distinct notification channel names, projects/<project ID or number>/notificationChannels/<id>; "
        "at least one while alerts are on, unless observability.notifyNobody",
        CHANNELS_API,
        "alerts",
        ["projects/p/notificationChannels/1"],
        ["projects/123/notificationChannels/1", "projects/my-tpu-project/notificationChannels/2"],
        {"observability": {"notifyNobody": False}},
    ),
    "observability.notifyNobody": Rule(
        "true or false; true only while observability.notificationChannels is empty",
        THIS_PROGRAM,
        "alerts",
        True,
        False,
        {"observability": {"notificationChannels": ["projects/123/notificationChannels/1"]}},
    ),
    "hfToken": Rule(
        "a Pulumi secret (`pulumi config set --secret hfToken <token>`): plain text is refused; unset or empty "
        "= weights preloaded, no Secret",
        PULUMI_SECRETS,
        "secret",
        _TOKEN,
        "",
    ),
}


# What each key sets, in a user's words (optional: a key without it still gets its row).
WHAT: dict[str, str] = {
    "project": "the project of every Google Cloud resource, the workload pool `<project>.svc.id.goog`",
    "zone": "the TPU pools' node location; the region (cluster, subnets, policy) is the zone minus its last part",
    "network.prefix": "names `<prefix>-main`, `-tpu`, `-proxy`, `-allow-internal`, `-allow-proxy`, `-router`, `-nat`",
    "network.mtu": "the VPC's MTU (the largest GCE allows, as the codelab sets it)",
    "network.tpuSubnetCidr": "primary range of the TPU and node subnet",
    "network.proxySubnetCidr": "the proxy-only subnet the regional internal Gateway needs",
    "cluster.name": "the GKE cluster's name; the node service account is `<name[:24]>-nodes`",
    "cluster.version": "the control plane's `min_master_version`",
    "cluster.releaseChannel": "the cluster's release channel",
    "cluster.systemMachineType": "machine type of the `system` pool (controllers, router)",
    "cluster.systemNodeCount": "`system` nodes per zone of the regional cluster",
    "cluster.deletionProtection": "GKE's deletion protection on the cluster",
    "cluster.protect": "Pulumi `protect` on the cluster, system pool, TPU pools and workload policy",
    "cluster.dailyMaintenanceStart": "start (HH:MM GMT) of the daily maintenance window, sent when set and beside an "
    "exclusion (which needs one); unset with no exclusion, GKE maintains at any time",
    "cluster.maintenanceExclusion.name": "the exclusion's name",
    "cluster.maintenanceExclusion.start": "when the exclusion starts",
    "cluster.maintenanceExclusion.end": "when the exclusion ends",
    "cluster.maintenanceExclusion.scope": "which upgrades the exclusion holds back",
    "cluster.maintenanceExclusion.endTimeBehavior": "an exclusion that lasts until the minor version's end of support",
    "cluster.privateNodes": "nodes with internal addresses only (Cloud Router and Cloud NAT for their egress)",
    "cluster.controlPlane.privateEndpoint": "the control plane's IP endpoint without an external address",
    "cluster.controlPlane.dnsEndpoint": (
        "GKE's DNS-based endpoint takes user traffic (IAM-checked, from any network) and `pulumi up` connects "
        "through it"
    ),
    "cluster.controlPlane.authorizedNetworks": "the ranges that may reach the control plane's IP endpoint",
    "cluster.controlPlane.unrestrictedPublicEndpoint": "the opt-in to a public endpoint any address may reach",
    "tpu.machineType": "the TPU VM type (the TPU facts table, `components/model/geometry.py`)",
    "tpu.cubeTopology": "one node pool's ICI block and the workload policy's accelerator topology",
    "tpu.cubes": "TPU node pools `<poolPrefix>-1..N`, the ClusterQueue's TPU quota, the super-slice ceiling",
    "tpu.workloadPolicyName": "name of the `HIGH_THROUGHPUT` workload policy",
    "tpu.acceleratorTopologyMode": "how the workload policy connects the chips",
    "tpu.poolPrefix": "TPU node pool names",
    "tpu.reservation.name": "the reservation the pools consume",
    "tpu.reservation.project": "the project owning the reservation (shared reservations)",
    "tpu.reservation.block": "the reservation block the pools consume",
    "tpu.reservation.consumeType": "the pools' reservation affinity",
    "tpu.subBlocks": "pins cube i to sub-block subBlocks[i] of the block (unset: the program picks healthy free ones)",
    "addons.{jobset,kueue,lws}.chart": "the add-on's OCI Helm chart",
    "addons.{jobset,kueue,lws}.version": "the chart's pinned version",
    "addons.{jobset,kueue,lws}.namespace": "the controller's namespace",
    "addons.{jobset,kueue,lws}.controllerResources.{requests,limits}.{cpu,memory}": (
        "the controller's resources (default: the pinned chart's own)"
    ),
    "addons.sliceController.manifestUrl": "the slice controller's manifest",
    "addons.kueue.replicas": "Kueue controller replicas (two or more run under the chart's PodDisruptionBudget)",
    "addons.sliceController.drainTimeoutSeconds": "how long deleting or replacing a TPU pool waits for its Slices",
    "addons.sliceController.featureGates": (
        "the slice controller's feature gates to turn on (evict on an untolerated degraded Slice, retry Slice creation)"
    ),
    "addons.inferenceExtension.version": "the Gateway API Inference Extension CRDs' tag",
    "kueue.namespace": "the workload namespace (LocalQueue, JobSets, serving)",
    "kueue.{topologyName,flavorName,admissionCheckName,clusterQueue,localQueue}": "a Kueue object's name",
    "kueue.priorities": "the WorkloadPriorityClasses",
    "kueue.tpuQuota": "the ClusterQueue's `google.com/tpu` nominal quota",
    "kueue.{cpuQuota,memoryQuota}": "the ClusterQueue's CPU or memory quota",
    "demos.{subslicing,superslicing}.enabled": "whether that demo JobSet exists",
    "demos.{subslicing,superslicing}.name": "the demo JobSet's name",
    "demos.{subslicing,superslicing}.topology": "the demo's slice shape",
    "demos.subslicing.replicas": "how many sub-slices the demo asks for",
    "demos.{subslicing,superslicing}.priority": "the demo's Kueue priority class",
    "serving.enabled": "the whole serving layer (HF Secret, KSA, bucket IAM, Gateway, router, LWS)",
    "serving.guide": "the router's Helm release and the `llm-d.ai/guide` label the router selects pods by",
    "serving.model": "the model; its last segment labels every pod `llm-d.ai/model`",
    "serving.servedModelName": "vLLM `--served-model-name`, what clients send",
    "serving.weightsBucket": "the bucket holding the model weights, which the pods only read",
    "serving.xlaCacheBucket": "the bucket this stack creates for vLLM's XLA compilation cache",
    "serving.terminationGracePeriodSeconds": "how long a stopping vLLM pod may finish its requests",
    "serving.gateway.exposeToInternet": "the opt-in an external Gateway class needs",
    "observability.notifyNobody": "the explicit opt-out of alert notifications",
    "serving.modelPath": "the weights' path inside the bucket (`--model=gs://<bucket>/<path>`)",
    "serving.weightsDownload.enabled": "a Job that fills the weights bucket from Hugging Face before serving starts",
    "serving.weightsDownload.image": "the download Job's image (python3; the program uses the standard library only)",
    "serving.image": "the vLLM TPU image of prefill and decode",
    "serving.{maxModelLen,maxNumBatchedTokens,maxNumSeqs}": "the vLLM flag of the same name",
    "serving.kvCacheDtype": "vLLM `--kv-cache-dtype`",
    "serving.enableExpertParallel": "vLLM `--enable-expert-parallel`",
    "serving.weightsVia": "`stream`: vLLM streams from `gs://`; `mount`: reads the GCS FUSE volume at `/data`",
    "serving.startupTimeoutSeconds": "the leaders' startup-probe budget for loading the model",
    "serving.{prefill,decode}.name": "the LeaderWorkerSet's name",
    "serving.{prefill,decode}.replicas": "LWS groups, one slice each",
    "serving.{prefill,decode}.topology": "each group's slice; the group size (its VMs) is derived",
    "serving.{prefill,decode}.priority": "the groups' Kueue priority class",
    "serving.{prefill,decode}.tensorParallelSize": "set only to assert the derived `--tensor-parallel-size`",
    "serving.{prefill,decode}.resources.{cpu,memory}": "per-pod CPU or memory (requests = limits)",
    "serving.gateway.name": "the Gateway's name",
    "serving.gateway.className": "the Gateway's GKE class (default: regional internal)",
    "serving.router.chart": "llm-d's router chart (EPP, InferencePool, HTTPRoute)",
    "serving.router.version": "the router chart's release",
    "serving.router.eppResources.{requests,limits}.{cpu,memory}": "the endpoint picker's resources",
    "serving.router.peakPrefillThroughput": "the P/D decider's prefill throughput estimate (re-measure per hardware)",
    "serving.routingSidecar.image": "the decode pods' routing sidecar (unset: the router's own release)",
    "observability.enabled": "every scrape object, the dashboard and the alerts",
    "observability.scraping": "the PodMonitorings (and Kueue's resource metrics)",
    "observability.dashboard": "the Cloud Monitoring dashboard",
    "observability.alerts": "the alert policies",
    "observability.scrapeInterval": "how often Managed Prometheus scrapes vLLM and Kueue",
    "observability.{pendingWorkloadMinutes,noReadyLeaderMinutes,quotaFullMinutes}": (
        "how long the condition holds before that alert fires"
    ),
    "observability.notificationChannels": "the channels the alerts notify (none: incidents in the console only)",
    "hfToken": (
        "the Hugging Face token (a Secret and `HF_TOKEN` of the serving pods and the download Job); unset or empty "
        "for a public model or preloaded weights"
    ),
}


@dataclass(frozen=True)
class Key:
    """One leaf key of the settings model."""

    path: str
    type: str
    default: str
    secret: bool
    description: str


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        parts = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" (optional)" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", _dt.datetime: "RFC 3339 time"}
    if isinstance(annotation, type) and issubclass(annotation, SecretStr):
        return "secret string"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The section model a field holds (itself or optional); a list or map of models is one key."""
    if typing.get_origin(annotation) in (list, dict, tuple, set):
        return []
    args = typing.get_args(annotation) or (annotation,)
    return [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]


def _show_default(value: Any) -> str:
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        return "unset"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`" if value != "" else '`""`'


def _walk(model: type[BaseModel], prefix: str, defaults: BaseModel | None, optional: str) -> list[Key]:
    out: list[Key] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{info.alias or name}"
        subs = _models(info.annotation)
        if defaults is not None:
            default = getattr(defaults, name)
        elif info.default_factory is not None:
            default = info.get_default(call_default_factory=True, validated_data={})
        else:
            default = info.default
        if subs:
            sub_defaults = default if isinstance(default, BaseModel) else None
            note = optional or (f"unset: {path} is optional" if default is None else "")
            out += _walk(subs[0], f"{path}.", sub_defaults, note)
            continue
        shown = _show_default(default)
        if optional and shown == "required":
            shown = f"required when `{prefix.rstrip('.')}` is set"
        out.append(
            Key(
                path=path,
                type=_type_name(info.annotation),
                default=shown,
                secret=_is_secret(info.annotation),
                description=info.description or "",
            )
        )
    return out


def keys() -> list[Key]:
    """Every leaf key of the settings model, in model order."""
    return _walk(Settings, "", None, "")


def _expanded(table: dict[str, Any], name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pattern, value in table.items():
        for path in _expand(pattern):
            if path in out:
                raise ValueError(f"{path} has two entries in components/model/reference.py {name}")
            out[path] = value
    return out


def expanded_rules() -> dict[str, Rule]:
    """RULES with their `{a,b}` patterns expanded to one entry per key."""
    return _expanded(RULES, "RULES")


def expanded_what() -> dict[str, str]:
    return _expanded(WHAT, "WHAT")


def config_key(path: str) -> str:
    return "gcp:project" if path == "project" else f"{PROJECT}:{path}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str) and len(value) > 8 and len(set(value)) == 1:
        return f"`{value[0]}` x {len(value)}"
    if len(text) > 40:
        text = text[:37] + "..."
    return f"`{_cell(text)}`" if text != "" else '`""`'


def _source(text: str) -> str:
    """URLs as links, the rest (upstream code paths) as written."""
    return re.sub(r"(https?://[^\s;,)]+)", r"<\1>", _cell(text))


BEGIN = "<!-- BEGIN: generated from the settings model by `python -m components reference --write` -->"
END = "<!-- END: generated -->"


def markdown() -> str:
    """The generated part of docs/configuration.md: one row per key, then the secret keys."""
    rules, what = expanded_rules(), expanded_what()
    rows = [
        "| key | what it sets | type | default | allowed values | source of the rule | refused / accepted "
        "| changing it |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in keys():
        rule = rules.get(key.path)
        head = f"| `{key.path}` | {_cell(what.get(key.path, ''))} | {_cell(key.type)} | {_cell(key.default)} |"
        if rule is None:
            rows.append(f"{head} **no rule recorded** | | | |")
            continue
        shown_refused = "a token in plain text" if key.secret else _value(rule.refused)
        rows.append(
            f"{head} {_cell(rule.allowed)} | {_source(rule.source)} | {shown_refused} / {_value(rule.accepted)} | "
            f"[{rule.change}]({CHANGES}#{rule.change}) |"
        )
    secret = ", ".join(f"`{p}`" for p in sorted(SECRET_PATHS))
    return (
        "\n".join(rows)
        + f"\n\nSecret keys (typed as secrets in the model, so any new one is treated alike): {secret}.\n"
    )


def page(current: str) -> str:
    """docs/configuration.md with its generated block (between BEGIN and END) made current; the prose around
    it is written by hand and kept as it is."""
    block = f"{BEGIN}\n\n{markdown()}\n{END}"
    if BEGIN in current and END in current:
        before, rest = current.split(BEGIN, 1)
        return before + block + rest.split(END, 1)[1]
    raise ValueError(f"docs/configuration.md has no {BEGIN!r} ... {END!r} block to generate into")
