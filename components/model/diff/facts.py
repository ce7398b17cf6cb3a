"""One fact: a property whose change replaces the resource, or that the API refuses to change.

A fact is data with its source (upstream file and line at a pinned version, or a documentation URL).
`triggered` decides whether a fact applies to one old/new pair of inputs; the engine (engine.py)
turns the facts that apply into an action.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from components.model.diff import paths

REPLACE = "replace"
REJECT = "reject"

# When a fact applies, besides "the value at the path differs":
ALWAYS = "always"
PRESENCE = "presence"  # a block or list item appears or disappears (SDKv2: ForceNew on a block is its count)
DISABLED = "disabled"  # a bool goes from true to false (customdiff.ForceNewIfChange(..., isBeenEnabled))
SHRINK = "shrink"  # a CIDR range that no longer holds the old one (IsShrinkageIpCidr)
GROW = "grow"  # a CIDR range that holds the old one and more (an expansion: expandIpCidrRange)
REMOVED = "removed"  # a value that was set is unset
ADDED = "added"  # a value that was unset is set
# A guard restricts a fact to objects that have a value at `guard`: on the old side (a CEL rule that starts
# `!has(oldSelf.x) || ...`) or on the new side (a webhook that only checks queued objects).
OLD = "old"
NEW = "new"


@dataclass(frozen=True)
class Fact:
    path: str
    effect: str  # REPLACE or REJECT
    source: str
    rule: str = ""  # what the upstream says, short: "ForceNew", "field is immutable"
    when: str = ALWAYS
    guard: str = ""
    guard_on: str = NEW
    guard_values: tuple[str, ...] = ()  # when set, the value at `guard` must be one of these

    @property
    def parsed(self) -> paths.Path:
        return _parse(self.path)


_cache: dict[str, paths.Path] = {}


def _parse(text: str) -> paths.Path:
    if text not in _cache:
        _cache[text] = paths.parse(text)
    return _cache[text]


def _contains(old: Any, new: Any) -> bool:
    try:
        before, after = ipaddress.ip_network(str(old), strict=False), ipaddress.ip_network(str(new), strict=False)
    except ValueError:
        return False
    return before.version == after.version and before.subnet_of(after)  # type: ignore[arg-type]


def triggered(fact: Fact, old: Any, new: Any) -> bool:
    """Whether `fact` applies when the inputs go from `old` to `new`."""
    path = fact.parsed
    if fact.guard:
        guarded = [v for _, v in paths.values(old if fact.guard_on == OLD else new, _parse(fact.guard))]
        if not guarded or (fact.guard_values and not set(map(str, guarded)) & set(fact.guard_values)):
            return False
    before = [v for _, v in paths.values(old, path)]
    after = [v for _, v in paths.values(new, path)]
    if fact.when == PRESENCE:
        return len(before) != len(after)
    if before == after:
        return False
    if fact.when == DISABLED:
        return before == [True] and after != [True]
    if fact.when == SHRINK:
        return not (len(before) == len(after) == 1 and _contains(before[0], after[0]))
    if fact.when == GROW:
        return len(before) == len(after) == 1 and _contains(before[0], after[0])
    if fact.when == REMOVED:
        return bool(before) and not after
    if fact.when == ADDED:
        return not before and bool(after)
    return True


# The pulumi-kubernetes source every Kubernetes fact cites: the newest available offline (the program pins 4.34.2).
PULUMI_KUBERNETES = "pulumi/pulumi-kubernetes@94977969d provider/pkg"

# ------------------------------------------------------------------------------------ Pulumi resource options
# https://www.pulumi.com/docs/iac/concepts/options/ (each option's page, below). The mock runner records them
# from the RegisterResource request (components/cli/mockrun.py), so they are read from the program, not restated.
PULUMI_DOCS = "https://www.pulumi.com/docs/iac/concepts/options"
REPLACE_ON_CHANGES = f"{PULUMI_DOCS}/replaceonchanges/: a change of these properties replaces the resource"
# deleteBeforeReplace (https://www.pulumi.com/docs/iac/concepts/options/deletebeforereplace/) is read from the
# registration and reported as a replacement's `deleteFirst`. customTimeouts are recorded and never diffed, as by the
# engine (components/vllm_leaderworkersets.py delete_timeouts).
IGNORE_CHANGES = f"{PULUMI_DOCS}/ignorechanges/: changes of these properties are not diffed (the old value is kept)"
ALIASES = f"{PULUMI_DOCS}/aliases/: the resource was known under these earlier URNs (no delete and create)"
PROTECT = f"{PULUMI_DOCS}/protect/: the engine refuses to delete a protected resource, and so to replace it"
# ...a replacement only when both the old and the new state are protected (pulumi/pulumi#8873, CHANGELOG 3.22.0:
# "allow a resource to be replaced if either its old or new state (or both) is not protected").
PROTECT_REPLACE = "pulumi/pulumi#8873"
# A resource whose provider is replaced is replaced too (https://www.pulumi.com/docs/iac/concepts/resources/providers/).
PROVIDER_REPLACED = (
    "https://www.pulumi.com/docs/iac/concepts/resources/providers/: a replaced provider replaces its resources"
)
# A replaced resource's outputs are unknown until it exists again, so a dependent whose input referenced it
# sees an unknown value, and an unknown value of a replace-on-change property replaces it as well.
DEPENDENT_UNKNOWN = (
    "https://www.pulumi.com/docs/iac/concepts/inputs-outputs/: outputs of a replaced resource are unknown in a preview"
)
