"""What each API stores where it differs from what the program sent, one rule per fact, each cited.

`--second-run` diffs the program's inputs against `read_back(first run)`: the state a `pulumi refresh`
(or the provider's read before every diff) would hold after the first `pulumi up`. A correct program shows
no change. Rules that change nothing are listed too (`apply` None): they record why a difference that
looks likely does not exist, so a reviewer does not have to look it up again.

Suppressors model the provider's own diff suppression: for a (type, property), whether the stored and the
new value count as equal.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from components.model.addons.keda import SCALED_FIELD
from components.model.diff.facts import PULUMI_KUBERNETES
from components.model.diff.gcp import TPGB
from components.model.keys import BURST_SLOT_LABEL, LWS_API

Record = dict[str, Any]
POOL = "gcp:container/nodePool:NodePool"
POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
PK = PULUMI_KUBERNETES


@dataclass(frozen=True)
class Rule:
    type: str  # a Pulumi type token, or "kubernetes:*" for every Kubernetes kind
    property: str
    fact: str
    source: str
    apply: Callable[[Record, list[Record]], None] | None = None  # mutates one record's inputs in place
    # The program cannot declare what the API stores and a difference replaces: it ignores the property
    # (`ignore_changes`, read by components/tpu_node_pools.py and cluster.py from `ignored`). The bridge drops
    # ignored paths from the provider's diff (pulumi-terraform-bridge pkg/tfshim/sdk-v2/instance_diff.go
    # processIgnoreChanges).
    ignored: bool = False


def _policy_topology(records: list[Record], policy_name: Any) -> Any:
    for rec in records:
        if rec["type"] == POLICY and rec["inputs"].get("name") == policy_name:
            return (rec["inputs"].get("workloadPolicy") or {}).get("acceleratorTopology")
    return None


def _tpu_placement(rec: Record, records: list[Record]) -> None:
    inputs = rec["inputs"]
    placement = inputs.get("placementPolicy")
    machine = str((inputs.get("nodeConfig") or {}).get("machineType", ""))
    if not isinstance(placement, dict) or not machine.startswith("tpu7x") or "policyName" not in placement:
        return
    topology = _policy_topology(records, placement["policyName"])
    if topology is None:
        return
    # flattenNodePool reads all three back; the type GKE does not store reads as "".
    inputs["placementPolicy"] = {"type": "", "policyName": placement["policyName"], "tpuTopology": topology}


def _cluster_node_config(rec: Record, records: list[Record]) -> None:
    rec["inputs"].pop("nodeConfig", None)


def _tpu_smt(rec: Record, records: list[Record]) -> None:
    node_config = rec["inputs"].get("nodeConfig")
    if isinstance(node_config, dict) and str(node_config.get("machineType", "")).startswith("tpu7x"):
        node_config["advancedMachineFeatures"] = {"threadsPerCore": 1}


# Map fields of the dashboard messages (googleapis google/monitoring/dashboard/v1/dashboard.proto: `labels`):
# proto3 JSON writes every map entry, an empty value too.
_MAPS = frozenset({"labels"})


def _is_default(value: Any) -> bool:
    """A proto3 default: 0, "", false, an empty list or map, or an enum's zero value (`*_UNSPECIFIED` by the style
    guide, https://protobuf.dev/programming-guides/style/#enums)."""
    if isinstance(value, str) and value.endswith("_UNSPECIFIED"):
        return True
    return value is None or (not isinstance(value, bool) and value in (0, "", [], {})) or value is False


def _proto3_json(value: Any) -> Any:
    """proto3's JSON mapping omits fields that hold their default; map entries are data and stay."""
    if isinstance(value, dict):
        out = {k: v if k in _MAPS else _proto3_json(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if (k in _MAPS and v) or not _is_default(v)}
    if isinstance(value, list):
        return [_proto3_json(v) for v in value]
    return value


def _slot_turned_on(rec: Record, records: list[Record]) -> None:
    """A burst slot as KEDA leaves it while its load lasts: one group."""
    inputs = rec["inputs"]
    if BURST_SLOT_LABEL in ((inputs.get("metadata") or {}).get("labels") or {}):
        inputs.setdefault("spec", {})["replicas"] = 1


def _dashboard(rec: Record, records: list[Record]) -> None:
    text = rec["inputs"].get("dashboardJson")
    if not isinstance(text, str):
        return
    try:
        sent = json.loads(text)
    except ValueError:
        return
    stored = _proto3_json(sent)
    # Output-only fields the API adds (projects.dashboards: `name`, `etag`).
    stored.update(name=f"projects/<number>/dashboards/{rec['name']}", etag="<etag>")
    rec["inputs"]["dashboardJson"] = json.dumps(stored, sort_keys=True)


RULES: tuple[Rule, ...] = (
    Rule(
        POOL,
        "placementPolicy",
        "a tpu7x pool placed by a workload policy is stored with `policyName` and `tpuTopology` (the policy's "
        'acceleratorTopology), without `type`, which reads back as ""; `type` is Required and `tpu_topology` '
        "Optional, not Computed, so a config that sends another type or no `tpuTopology` differs",
        "vllm-project/ci-infra#547 (against a live cluster); "
        f"{TPGB}services/container/resource_container_node_pool.go:386-405,1609-1614",
        _tpu_placement,
    ),
    Rule(
        POOL,
        "nodeConfig.advancedMachineFeatures",
        "GKE turns SMT off on TPU hosts and reports `threads_per_core` back; the block is Optional, ForceNew and "
        "not Computed, so a pool that does not declare or ignore it would be replaced on the second run",
        "vllm-project/ci-infra terraform/gcp_old/tpu-inference/k8s/workers.tf (`ignore_changes`); "
        f"{TPGB}services/container/node_config.go:1312",
        _tpu_smt,
        ignored=True,
    ),
    Rule(
        DASHBOARD,
        "dashboardJson",
        "the Monitoring API returns the dashboard without default-valued fields (proto3 JSON) and adds `name` "
        "and `etag`; the provider suppresses only keys the API returns and the config lacks",
        "https://protobuf.dev/programming-guides/json/; hashicorp/terraform-provider-google#16173; "
        f"{TPGB}services/monitoring/resource_monitoring_dashboard.go:37-73",
        _dashboard,
    ),
    Rule(
        "gcp:container/cluster:Cluster",
        "nodeConfig",
        "the cluster's node_config is the default pool's; once `remove_default_node_pool` has deleted that pool "
        "GKE returns none, and the block is ForceNew (Optional+Computed), so a cluster that declares it and does "
        "not ignore it would be replaced on the second run",
        'GoogleCloudPlatform/k8s-config-connector#8651 ("Once the default pool is deleted in GCP, nodeConfig also '
        f'removed from the live state"); {TPGB}services/container/resource_container_cluster.go:3515-3535,3887; '
        f"{TPGB}services/container/node_config.go:279-285",
        _cluster_node_config,
        ignored=True,
    ),
    Rule(
        "gcp:container/cluster:Cluster",
        "minMasterVersion",
        "never read back from the API (GKE's own upgrades of the control plane show no diff)",
        f"{TPGB}services/container/resource_container_cluster.go:1799 (no d.Set of min_master_version)",
    ),
    Rule(
        f"kubernetes:{LWS_API}:LeaderWorkerSet",
        SCALED_FIELD,
        "a burst slot's set (the `burst-slot` label) is scaled between 0 and 1 by KEDA's operator through /scale, "
        "which writes spec.replicas: read back at 1 while its load lasts (the program declares 0 and ignores the "
        "field, components/burst_slots.py); a floor's is the program's alone",
        "kedacore/keda@68a5b502 pkg/scaling/executor/scale_scaledobjects.go:63-73; kubernetes/apiextensions-apiserver"
        "@1aa2717a pkg/registry/customresource/etcd.go:312-366",
        _slot_turned_on,
    ),
    Rule(
        "kubernetes:*",
        "*",
        "the provider diffs the live object pruned to the shape of the previous inputs against the new inputs: "
        "fields the API server defaults and the program does not set never show",
        f"{PK}/provider/provider.go:1494,2966-2972",
    ),
    Rule(
        "kubernetes:core/v1:Secret",
        "stringData",
        "stored as base64 `data`; the provider normalizes the inputs the same way before it diffs",
        f"{PK}/clients/unstructured.go:116-151",
    ),
)

# Read-backs the program avoids by what it sends (no rule: the second run shows no change because of them).
# RouterNat logConfig (components/network.py sends it always): Optional and not Computed
# (TPGB services/compute/resource_compute_router_nat.go:407-427), read back as the API returns it (L1644-1658);
# the API can answer `{enable: false, filter: ALL}` for a NAT sent without one, a change on every run (the
# `log_config { enable = false -> null }` diff of metro-digital/terraform-google-cf-projectcfg#12).
# Subnetwork logConfig (components/network.py, FlowLogSettings.log_config sends all four fields): Optional, not
# Computed, each field with a schema default (TPGB services/compute/resource_compute_subnetwork.go:649,658,669,679),
# read back as the API returns them (flattenComputeSubnetworkLogConfig L2064-2092: `metadata_fields` cleared unless
# CUSTOM_METADATA, no block when disabled), so what is sent is what is read. The API holds flowSampling as a
# float: 1.0 and 0.5 read back exactly; a fraction float32 cannot hold is not modelled.
# Cluster nodeConfig (the rule above): gone from GKE's answer also in GoogleCloudPlatform/cloud-foundation-fabric#1275.
# Bucket (components/serving.py xla_cache_bucket): `location` is stored in capitals (the provider's StateFunc
# upper-cases it), so the program sends it so; expandBucketSoftDeletePolicy force-sends a retention of 0
# (TPGB services/storage/resource_storage_bucket.go). BucketIAMMember `bucket`: the state holds `b/<bucket>`, a
# diff-suppress compares names only (TPGB services/storage/iam_storage_bucket.go StorageBucketIamSchema).
# NodePool reservationAffinity.values (components/tpu_node_pools.py reservation_path): sent as given and read back
# unchanged (TPGB services/container/node_config.go expandNodeConfig / flattenGKEReservationAffinity).


def ignored(type_: str) -> list[str]:
    """The properties of a type the program must ignore: their stored value differs and would replace it."""
    return [r.property for r in RULES if r.type == type_ and r.ignored]


def read_back(records: list[Record]) -> list[Record]:
    """A copy of a run's records as the APIs would store them."""
    out = copy.deepcopy(records)
    for rule in RULES:
        if rule.apply is None:
            continue
        for rec in out:
            if rec["type"] == rule.type:
                rule.apply(rec, out)
    return out


def _remove_computed_keys(old: Any, new: Any) -> Any:
    """resource_monitoring_dashboard.go L37-59: drop every key of the stored JSON that the config lacks."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return old
    out = {}
    for key, value in old.items():
        if new.get(key) is None:
            continue
        if isinstance(value, dict):
            out[key] = _remove_computed_keys(value, new[key])
        elif isinstance(value, list) and isinstance(new[key], list):
            out[key] = [
                _remove_computed_keys(item, new[key][i]) if isinstance(item, dict) and i < len(new[key]) else item
                for i, item in enumerate(value)
            ]
        else:
            out[key] = value
    return out


def _dashboard_equal(old: Any, new: Any) -> bool:
    """monitoringDashboardDiffSuppress (L61-73): equal once the stored JSON lost the keys the config lacks."""
    try:
        before, after = json.loads(old), json.loads(new)
    except (TypeError, ValueError):
        return False
    return _remove_computed_keys(before, after) == after


# (type, top-level property) -> whether the stored value and the new one count as equal.
SUPPRESSORS: dict[tuple[str, str], Callable[[Any, Any], bool]] = {(DASHBOARD, "dashboardJson"): _dashboard_equal}
