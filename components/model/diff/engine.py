"""The change preview: two recorded program runs in, one action per resource out.

Each record is one RegisterResource request as plain data (components/cli/diff.py builds them from the
mock runner): urn, type, name, custom, parent, provider, protect, inputs, property_dependencies, options
(deleteBeforeReplace, ignoreChanges, replaceOnChanges), aliases. The engine follows what `pulumi preview`
does with them, in registration order (a resource is registered after everything its inputs depend on):

1. match old and new resources by URN, or by an alias of the new one (no delete and create);
2. drop `ignoreChanges` paths, apply the provider's diff suppression (read-back model), list changed paths;
3. replace when a replace-on-change fact applies (provider schema, `replaceOnChanges`), when the provider
   itself is replaced, or when an input depends on a replaced resource through a replace-on-change property
   or a `replaceOnChanges` path (the value is unknown in the preview, so it may change);
4. a delete-first replacement first deletes every dependent it would replace, which are then re-created:
   replaced delete-first whatever their own diff says (dependents.py, Pulumi's calculateDependentReplacements);
5. otherwise update, unless a rejection fact applies (a webhook, a CEL transition rule, an API refusal) or the
   program's own check refuses (given its inputs as the preview sees them: unknown where they reference a
   replaced resource);
6. a delete, or a delete-first replacement, says what the delete waits for where the model knows it (a teardown
   gate waits for its pool's Slices);
7. a replacement or deletion of a protected resource is rejected, and so is a create-first replacement of a
   Google Cloud resource whose fixed name stays (the create fails with 409 alreadyExists), and a create of a
   Kubernetes object the cluster still holds under the name of a resource the update deletes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from components.model.diff import dependents as D
from components.model.diff import facts as F
from components.model.diff import paths
from components.model.diff import unknowns as U
from components.model.diff.families import (
    DELETE_WAITS,
    DYNAMIC,
    DYNAMIC_DELETE_FIRST,
    DYNAMIC_OWN_DIFF,
    DYNAMIC_SOURCE,
    REMOTE,
    facts_of,
    is_modelled,
)
from components.model.diff.kubernetes import ALREADY_EXISTS, cluster_identity, update_await
from components.model.diff.unknowns import UNKNOWN
from components.model.records import record

CREATE, UPDATE, REPLACE, DELETE, REJECTED, SAME = "create", "update", "replace", "delete", "rejected", "same"
# Not compared: an object the preview could not render on both sides (a chart version without sources here), so
# what `up` does to it is not known. Never counted as `same`.
UNKNOWN_ACTION = "unknown"
ACTIONS = (CREATE, UPDATE, REPLACE, DELETE, REJECTED, UNKNOWN_ACTION, SAME)
Record = dict[str, Any]
Check = Callable[[dict[str, Any], dict[str, Any]], list[str]]
# What the preview and the CLI read from here besides `diff`.
__all__ = ["ACTIONS", "DYNAMIC_DELETE_FIRST", "UNKNOWN", "UNKNOWN_ACTION", "Change", "Result", "diff", "facts_of"]

GCP_FIXED_NAME = (
    "a create-first replacement under the same name fails with 409 alreadyExists "
    "(https://www.pulumi.com/docs/iac/concepts/options/deletebeforereplace/)"
)


@dataclass
class Change:
    name: str
    type: str
    action: str
    properties: list[str] = field(default_factory=list)
    reason: str = ""
    delete_first: bool = False
    urn: str = ""

    def as_dict(self) -> dict[str, Any]:
        return record(self, "name", "type", "action", "properties", "reason", "delete_first")


@dataclass
class Result:
    changes: list[Change]

    @property
    def totals(self) -> dict[str, int]:
        return {a: sum(1 for c in self.changes if c.action == a) for a in ACTIONS}

    @property
    def rejected(self) -> list[Change]:
        return [c for c in self.changes if c.action == REJECTED]

    @property
    def unknown(self) -> list[Change]:
        return [c for c in self.changes if c.action == UNKNOWN_ACTION]

    def by_name(self) -> dict[str, Change]:
        return {c.name: c for c in self.changes}

    def as_dict(self) -> dict[str, Any]:
        return {"changes": [c.as_dict() for c in self.changes], "totals": self.totals}


def _alias_urns(record: Record) -> list[str]:
    """The URNs an alias spec names: the same URN with another type, name and/or parent (the recorded runs' URNs
    qualify a type by its parent's own type alone, as Pulumi's MockMonitor.make_urn does)."""
    urn = record["urn"]
    head, _, name = urn.rpartition("::")
    prefix, _, chain = head.rpartition("::")
    out = []
    for alias in record.get("aliases") or []:
        if "urn" in alias:
            out.append(alias["urn"])
            continue
        spec = alias.get("spec") or {}
        parents, _, own = chain.rpartition("$")
        if spec.get("parentUrn"):
            parents = spec["parentUrn"].split("::")[2].split("$")[-1]
        new_type = spec.get("type") or own
        new_chain = f"{parents}${new_type}" if parents else new_type
        out.append(f"{prefix}::{new_chain}::{spec.get('name') or name}")
    return out


_provider_urn = D.provider_urn


def _ignore(old: Any, new: Any, ignored: list[str]) -> Any:
    out = copy.deepcopy(new)
    for text in ignored:
        path = paths.parse(text)
        paths.assign(out, path, paths.get(old, path))
    return out


def _k8s_named_same(old: Any, new: Any) -> bool:
    """provider.go L1647-1660: named (not auto-named) and the same name and namespace -> delete first."""
    meta_new, meta_old = (new or {}).get("metadata") or {}, (old or {}).get("metadata") or {}
    return (
        bool(meta_new.get("name"))
        and meta_new.get("name") == meta_old.get("name")
        and (meta_new.get("namespace") == meta_old.get("namespace"))
    )


def _secret_mutable(record: Record, providers: dict[str, Record]) -> bool:
    provider = providers.get(_provider_urn(record.get("provider") or ""))
    return bool(provider and str(provider["inputs"].get("enableSecretMutable", "")).lower() == "true")


def _decide(
    old: Record,
    new: Record,
    replaced: dict[str, Record],
    providers: dict[str, Record],
    suppress: dict[tuple[str, str], Callable[[Any, Any], bool]],
    checks: dict[str, Check],
) -> Change:
    type_ = new["type"]
    change = Change(new["name"], type_, SAME, urn=new["urn"])
    old_in = old.get("inputs") or {}
    options = new.get("options") or {}
    ignored = list(options.get("ignoreChanges") or [])
    new_in = _ignore(old_in, new.get("inputs") or {}, ignored)
    hidden = [
        p for p in ignored if paths.get(old_in, paths.parse(p)) != paths.get(new.get("inputs") or {}, paths.parse(p))
    ]
    if type_ in DYNAMIC_OWN_DIFF:
        new_in = _ignore(old_in, new_in, ["__provider"])
    for (stype, prop), equal in suppress.items():
        if stype == type_ and prop in old_in and prop in new_in and equal(old_in[prop], new_in[prop]):
            new_in[prop] = copy.deepcopy(old_in[prop])
    changed = [paths.show(p) for p in paths.changed(old_in, new_in)]
    # Inputs that reference a replaced resource are unknown in the preview.
    deps = new.get("property_dependencies") or {}
    unknown = sorted(prop for prop, urns in deps.items() if replaced.keys() & set(urns))
    references = {
        prop: set().union(*(U.references(replaced[u]) for u in deps[prop] if u in replaced)) for prop in unknown
    }
    changed += [f"{p} (unknown: depends on a replaced resource)" for p in unknown if p not in changed]
    unknown_paths = [
        leaf for prop in unknown for leaf in U.unknown_leaves(new_in.get(prop), references.get(prop, set()), (prop,))
    ]
    change.properties = changed
    known = facts_of(type_)
    model = () if known is None else known
    if type_ == "kubernetes:core/v1:Secret" and _secret_mutable(new, providers):
        model = tuple(f for f in model if f.path not in ("data", "stringData"))

    reasons: list[str] = []
    provider = _provider_urn(new.get("provider") or "")
    if provider and provider in replaced:
        reasons.append(f"its provider is replaced ({F.PROVIDER_REPLACED})")
    for fact in model:
        if fact.effect == F.REPLACE and F.triggered(fact, old_in, new_in):
            reasons.append(f"{fact.path}: {fact.rule} ({fact.source})")
    for prop in unknown:
        refs = references.get(prop, set())
        hits = [f for f in model if f.effect == F.REPLACE and f.parsed[:1] == (prop,) and U.unknown_at(f, new_in, refs)]
        if hits:
            reasons.append(f"{hits[0].path}: unknown, {hits[0].rule} ({hits[0].source}; {F.DEPENDENT_UNKNOWN})")
    for text in options.get("replaceOnChanges") or []:
        target = paths.without_indices(paths.parse(text) if text != "*" else ())
        if any(paths.covers(target, paths.without_indices(p)) for p in paths.changed(old_in, new_in)):
            reasons.append(f"{text}: replaceOnChanges ({F.REPLACE_ON_CHANGES})")
        elif any(paths.covers(target, paths.without_indices(p)) for p in unknown_paths):
            # step_generator.go applyReplaceOnChanges (L3170-3261): the provider's diff names the unknown path.
            reasons.append(f"{text}: unknown, replaceOnChanges ({F.REPLACE_ON_CHANGES}; {F.DEPENDENT_UNKNOWN})")

    if reasons:
        change.delete_first = (
            bool(options.get("deleteBeforeReplace"))
            or (type_.startswith("kubernetes:") and _k8s_named_same(old_in, new_in))
            or type_ in DYNAMIC_DELETE_FIRST
        )
        change.action, change.reason = REPLACE, "; ".join(reasons)
        if old.get("protect") and new.get("protect"):
            change.action = REJECTED
            change.reason = f"protected: its replacement is refused ({F.PROTECT}, {F.PROTECT_REPLACE}); {change.reason}"
        elif type_.startswith("gcp:") and not change.delete_first:
            fixed = [k for k in ("name", "accountId") if k in new_in and new_in.get(k) == old_in.get(k)]
            if fixed:
                change.action = REJECTED
                change.reason = f"{fixed[0]} stays: {GCP_FIXED_NAME}; {change.reason}"
        return change
    refused = checks[type_](old_in, U.as_previewed(new_in, unknown_paths)) if type_ in checks else []
    if not changed and not refused:
        if hidden:
            change.reason = f"ignored: {', '.join(hidden)} ({F.IGNORE_CHANGES})"
        return change
    rejections = [
        f"{fact.path}: {fact.rule} ({fact.source})"
        for fact in model
        if fact.effect == F.REJECT and F.triggered(fact, old_in, new_in)
    ] + refused
    if rejections:
        change.action, change.reason = REJECTED, "; ".join(rejections)
    else:
        change.action = UPDATE
        if known is None:
            change.reason = "type not in the model: assumed to update in place"
        elif type_ in REMOTE:
            change.reason = "the provider renders its children at run time: their own actions are not modelled"
        elif type_ == DYNAMIC:
            change.reason = DYNAMIC_SOURCE
        elif type_.startswith("kubernetes:"):
            change.reason = update_await(new_in)
    return change


def _clauses(reason: str) -> list[str]:
    """A reason's clauses: split at the "; " that join them, never inside a clause's parenthesised sources."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(reason):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and reason.startswith("; ", i):
            out.append(reason[start:i])
            start = i + 2
    return [c for c in [*out, reason[start:]] if c]


def _recreated(change: Change, old: Record, why: str) -> Change:
    """A dependent deleted first is re-created when the program registers it again: a delete-first replacement,
    whatever its own diff says (step_generator.go L1482-1505); protected, it stops the update (L2110-2121)."""
    own = change.reason if change.action == REPLACE else ""
    # Its own diff often names the same unknown input that made it a dependent: say each clause once (a clause
    # without its sources: `pool: unknown, the gate's provider replaces it`).
    own = "; ".join(c for c in _clauses(own) if f"{c.split(' (', 1)[0]} (" not in why)
    if old.get("protect"):
        action, reason = REJECTED, f"protected: {why} ({D.PROTECTED_DEPENDENT}, {F.PROTECT})"
    else:
        action, reason = REPLACE, why
    return Change(
        change.name, change.type, action, change.properties, f"{reason}; {own}" if own else reason, True, change.urn
    )


def diff(
    old: list[Record],
    new: list[Record],
    suppress: dict[tuple[str, str], Callable[[Any, Any], bool]] | None = None,
    checks: dict[str, Check] | None = None,
) -> Result:
    """The action for every resource of either run, by name (the runs register independent resources in any order).

    Decided in the new run's registration order, so a resource is decided after what its inputs depend on.
    """
    old = [r for r in old if is_modelled(r)]
    new = [r for r in new if is_modelled(r)]
    by_urn = {r["urn"]: r for r in old}
    providers = {r["urn"]: r for r in new if r["type"].startswith("pulumi:providers:")}
    matched: set[str] = set()
    replaced: dict[str, Record] = {}
    deleted_first: dict[str, str] = {}  # old URN -> why a delete-first replacement deletes it first
    changes: list[Change] = []
    for rec in new:
        before = by_urn.get(rec["urn"])
        if before is None:
            before = next((by_urn[u] for u in _alias_urns(rec) if u in by_urn and u not in matched), None)
        if before is None:
            changes.append(Change(rec["name"], rec["type"], CREATE, urn=rec["urn"]))
            continue
        matched.add(before["urn"])
        change = _decide(before, rec, replaced, providers, suppress or {}, checks or {})
        if before["urn"] in deleted_first:
            change = _recreated(change, before, deleted_first[before["urn"]])
        if before["urn"] != rec["urn"] and not change.reason:
            change.reason = f"the same resource under an alias ({F.ALIASES})"
        if change.action == REPLACE:
            replaced.update({rec["urn"]: before, before["urn"]: before})
            if change.delete_first:
                for dep, why in D.dependents(before, old, matched, facts_of):
                    deleted_first.setdefault(dep["urn"], why)
                    replaced.setdefault(dep["urn"], dep)
        changes.append(change)
    # A create of an object the update still holds under a deleted resource's name (kubernetes.ALREADY_EXISTS).
    deleted = {cluster_identity(r) for r in old if r["urn"] not in matched} - {None}
    new_by_urn = {r["urn"]: r for r in new}
    for change in changes:
        if change.action == CREATE and cluster_identity(new_by_urn[change.urn]) in deleted:
            change.action, change.reason = REJECTED, ALREADY_EXISTS
    for rec in old:
        if rec["urn"] not in matched:
            if rec.get("protect"):
                changes.append(
                    Change(rec["name"], rec["type"], REJECTED, reason=f"deletion of a protected resource ({F.PROTECT})")
                )
            else:
                why = deleted_first.get(rec["urn"], "")
                changes.append(
                    Change(rec["name"], rec["type"], DELETE, reason=_waits(why, rec["type"]), urn=rec["urn"])
                )
    for change in changes:
        if change.action == REPLACE and change.delete_first:
            change.reason = _waits(change.reason, change.type)
    return Result(sorted(changes, key=lambda c: (c.name, c.type)))


def _waits(reason: str, type_: str) -> str:
    """`reason`, and what the resource's delete waits for where the model knows it (families.DELETE_WAITS)."""
    waits = DELETE_WAITS.get(type_)
    return "; ".join(r for r in (reason, waits and f"its delete {waits}") if r)
