"""The dependents a delete-first replacement deletes before the resource itself, as Pulumi's engine finds them.

pulumi/pulumi@1b5949891b3c pkg/resource/deploy/step_generator.go:
* L2047-2075: a delete-first replacement calls `calculateDependentReplacements` on the old resource;
* L3268-3414 (`calculateDependentReplacements`): it walks every resource of the last snapshot registered
  after it, in order, and takes each custom resource that would be replaced by the replacement: its provider
  is in the set (L3301-3316), or an input whose property dependencies name one of the set becomes wholly
  unknown (L3324-3335, the whole top-level input) and the provider's Diff with those inputs, then
  `replaceOnChanges`, says replace (L3368-3381); resources already registered are skipped (L3394-3402);
* L2080-2130: those are deleted first, in reverse order (a protected one stops the update, L2110-2121), and
  re-created when the program registers them again (L1482-1505: "recreating", a replacement whatever their
  own diff says).

What the provider's Diff says with a wholly unknown top-level input, per provider:
* Google Cloud (the Terraform bridge, SDKv2): an unknown attribute or block requires a new resource only when
  it is ForceNew itself (terraform-plugin-sdk schema.go diffList/diffString: `RequiresNew: schema.ForceNew` on
  the computed value; the inner fields are not diffed), so only a fact on the top-level path counts;
* Kubernetes (pulumi/pulumi-kubernetes@94977969d provider/pkg/provider/provider.go): the unknown reaches Diff
  as a `resource.Computed` struct (L1481, L3069-3071: MapRepl keeps it, pulumi/pulumi@1b5949891b3c
  sdk/go/common/resource/properties.go:629), which encoding/json writes as an object (no MarshalJSON;
  properties.go:77-85), so the merge patch (L1540, L2863) nulls every old field under it
  (evanphx/json-patch@84a4bb1 merge.go:381-386); each null is a DELETE (L3306), a replace where a force-new
  path matches it (L3344-3353; openapi/match.go:29-45), so an object whose `metadata` depends on the resource
  is replaced (metadata.name, L1560 and diff.go:207) whatever its `replaceOnChanges`, and the detailed diff
  names the top-level input's old fields (for `replaceOnChanges`). The comment at L3298 ("computed values
  are rendered as null") and diff_test.go:288-325 give the same diff only where the old value was no object;
* the Kubernetes provider (DiffConfig, provider.go L505-511 and L490): an unknown kubeconfig, context, cluster
  or clusterIdentifier replaces it;
* the program's dynamic providers: their `diff` compares the unknown with the old value (the facts' paths).
"""

from __future__ import annotations

from typing import Any

from components.model.diff import facts as F
from components.model.diff import paths
from components.model.diff.families import K8S_PROVIDER

Record = dict[str, Any]
PULUMI = "pulumi/pulumi@1b5949891b3c pkg/resource/deploy/step_generator.go"
DEPENDENTS = f"{PULUMI}:3268 calculateDependentReplacements"
PROTECTED_DEPENDENT = f"{PULUMI}:2110-2121"
PK = f"{F.PULUMI_KUBERNETES}/provider/provider.go"
_PROVIDER_UNKNOWN = {
    "kubeconfig": f"{PK}:507",
    "context": f"{PK}:507",
    "cluster": f"{PK}:507",
    "clusterIdentifier": f"{PK}:490",
}


def provider_urn(ref: str) -> str:
    """A provider reference is `<urn>::<id>`."""
    return ref.rsplit("::", 1)[0] if ref.count("::") > 3 else ref


def _detailed(record: Record, key: str) -> list[paths.Path]:
    """The paths the provider's detailed diff names when `key` is wholly unknown: for a Kubernetes object whose old
    value there is an object, its fields (each nulled by the merge patch), not the key itself."""
    value = (record.get("inputs") or {}).get(key)
    if record["type"].startswith("kubernetes:") and isinstance(value, dict):
        return [(key, child) for child in value]
    return [(key,)]


def unknown_replaces(record: Record, keys: list[str], model: tuple[F.Fact, ...]) -> list[str]:
    """Why `record` (old inputs) is replaced when its top-level inputs `keys` are unknown: empty when it is not."""
    type_ = record["type"]
    inputs = record.get("inputs") or {}
    reasons: list[str] = []
    if type_ == K8S_PROVIDER:
        reasons += [
            f"{k}: unknown, the provider is replaced ({_PROVIDER_UNKNOWN[k]})" for k in keys if k in _PROVIDER_UNKNOWN
        ]
    for fact in model:
        if fact.effect != F.REPLACE or fact.parsed[0] not in keys:
            continue
        # Kubernetes: a field that had a value is removed by the patch; Terraform: the unknown attribute itself.
        if paths.values(inputs, fact.parsed) if type_.startswith("kubernetes:") else len(fact.parsed) == 1:
            reasons.append(f"{fact.path}: unknown, {fact.rule} ({fact.source})")
    for text in (record.get("options") or {}).get("replaceOnChanges") or []:
        target = paths.parse(text) if text != "*" else ()
        if any(paths.covers(target, d) for k in keys for d in _detailed(record, k)):
            reasons.append(f"{text}: unknown, replaceOnChanges ({F.REPLACE_ON_CHANGES})")
    return reasons


def dependents(root: Record, old: list[Record], registered: set[str], model_of: Any) -> list[tuple[Record, str]]:
    """The old resources a delete-first replacement of `root` deletes first, in the order Pulumi finds them,
    each with why; `registered` are the old URNs the new run has already registered (never dependents)."""
    urns = [r["urn"] for r in old]
    if root["urn"] not in urns:
        return []
    replace_set = {root["urn"]}
    out: list[tuple[Record, str]] = []
    for rec in old[urns.index(root["urn"]) + 1 :]:
        if rec["urn"] in registered or not rec.get("custom"):
            continue
        provider = provider_urn(rec.get("provider") or "")
        if provider and provider in replace_set:
            why = "its provider is replaced with it"
        else:
            deps = rec.get("property_dependencies") or {}
            keys = sorted(k for k, on in deps.items() if replace_set & set(on))
            if not keys:
                continue
            reasons = unknown_replaces(rec, keys, model_of(rec["type"]) or ())
            if not reasons:
                continue
            why = "; ".join(reasons)
        replace_set.add(rec["urn"])
        out.append((rec, f"deleted before {root['name']}, which is replaced delete-first ({DEPENDENTS}): {why}"))
    return out
