"""Elastic serving's model: per role, a floor (the role's LeaderWorkerSet, `replicas` groups, never autoscaled) and
above it burst slots, each a LeaderWorkerSet of at most one group that KEDA scales between 0 and 1. Pure: names,
the burst priority, the pacing numbers; the PromQL is components/model/observability/burst_signals.py, the
capacity plan components/model/tpu/elastic.py.

Why one LeaderWorkerSet per slot, from the sources:

* A LeaderWorkerSet scales through its `/scale` subresource on `spec.replicas`, and a scale-down deletes whole
  groups, the highest indexes first: the leader StatefulSet takes `spec.replicas` and each group's workers are owned
  by its leader pod (kubernetes-sigs/lws@fc19b9ae v0.8.0 api/leaderworkerset/v1/leaderworkerset_types.go:112-122,
  :397; pkg/controllers/leaderworkerset_controller.go:262, :763; pkg/controllers/pod_controller.go:333; the same
  marker at v0.10.0 2161f38f leaderworkerset_types.go:418). `replicas: 0` is valid (pkg/webhooks/
  leaderworkerset_webhook.go:138-139; the v0.10.0 CRD's minimum is 0: tests/test_burst.py reads both CRDs).
* Kueue makes one Workload per group index, named from the LWS's UID, name and index, creates the missing ones when
  `replicas` grows and deletes those past it (kubernetes-sigs/kueue@21235e3c v0.17.4
  pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler.go:251-281, leaderworkerset_webhook.go:207-210;
  the same at v0.19.2 8eab6877 leaderworkerset_reconciler.go:263-292, which also accepts any replicas from 0 to
  1,000,000, leaderworkerset_controller.go:86-94). Each new Workload waits for quota like any other; the pod shape of
  a queued LWS may not change (components/model/serving/rollout.py).
* The slice controller frees a removed or evicted group's Slices only once every pod labelled with the LWS's name has
  terminated (phase Failed or Succeeded), whichever group it belongs to (AI-Hypercomputer/xpk@250d4b3c, branch
  slice-main, slice/internal/controller/workload_controller.go:123-143 finalizes a deleted or evicted Workload through
  `cleanupSlices` :255-287, which waits for `ownerPodsFinished` :387-427, listing pods by
  `leaderworkerset.sigs.k8s.io/name` :375-384; slice/internal/util/pod/pod.go:19-21). In a multi-group set the other
  groups never finish, so an autoscaler scaling one down leaks the removed group's Slices: no autoscaler may target
  the floor. A slot's set has one group, so scaling it to 0 stops every pod of the set and frees its Slices once its
  pods are gone.

Two consequences the pacing below designs around (same sources):

* A slot turned on again before its previous group's Workload was finalized would deadlock: Kueue reuses the
  Workload's name for the new group 0 (reconciler.go:270-276 finds the Workload being deleted and keeps it), the new
  pod waits gated for it, and the finalization waits for that pod to terminate. So a slot may turn on again only
  once its last leader has been gone for `Pacing.rearm_seconds`.
* A slot preempted by a higher priority (a requeued floor group, a rollout's new floor) is evicted: Kueue deletes its
  pods (kueue v0.17.4 pkg/controller/jobs/pod/pod_controller.go:492-552), the leader StatefulSet recreates pod 0,
  gated, and that pending pod keeps the evicted Workload's Slices until the slot goes to 0 (its query stops asking
  for it, then KEDA's cooldown). The preemptor meanwhile finds its partitions used and is evicted for a Slice
  configuration failure until they are free (workload_controller.go:624-633, 658-692). The capacity plan therefore
  keeps every floor and every slot room of its own (components/model/tpu/elastic.py), and warns when a rollout's new
  floor would take a slot's.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from components.model.config.checks import LWS_REVISION_LEN

if TYPE_CHECKING:
    from components.model.config.settings import Settings

# The WorkloadPriorityClass of every burst slot is named after its value: `burst-priority-<value>`.
BURST_PRIORITY_PREFIX = "burst-priority"
# A Slice not ACTIVE this long after its creation is stale and retried (AI-Hypercomputer/xpk@250d4b3c
# slice/cmd/main.go:87 `--activation-timeout` 3m): the bound of a Slice's formation.
SLICE_ACTIVATION_TIMEOUT_S = 180
# After a slot's last pod is gone: the slice controller's cleanup (it re-checks every 5 s,
# slice/internal/controller/workload_controller.go:72 `cleanupRetryAfter`) and GKE deleting the Slices. GKE documents
# no figure for the deletion: an estimate, like the LeaderWorkerSet's delete margin.
SLICE_RELEASE_S = 120
# KEDA evaluates a scaler every `pollingInterval` seconds when it owns activation (minReplicaCount 0): its default
# is 30 (kedacore/keda v2.20.2 apis/keda/v1alpha1/withtriggers_types.go:51, :107); a poll between two scrapes reads
# the same samples, so the program polls once per scrape interval, and at least every 30 s.
KEDA_DEFAULT_POLLING_S = 30


class BurstPriorityError(ValueError):
    """kueue.priorities leaves no value between the floors and what runs below them."""


@dataclass(frozen=True)
class BurstPriority:
    """The WorkloadPriorityClass of the burst slots: below every floor, above everything else that runs below them."""

    name: str
    value: int


def burst_priority(priorities: Mapping[str, int], floor_classes: Iterable[str]) -> BurstPriority:
    """The burst slots' priority, derived: halfway between the lowest floor's priority and the highest configured
    priority below it, rounded down, so a slot preempts every workload below the floors and none at or above them.

    Kueue's ClusterQueue preempts strictly lower priorities only (`withinClusterQueue: LowerPriority`,
    components/kueue_objects.py), so a value strictly between the two is exactly that. Raises BurstPriorityError when
    no integer lies between them.
    """
    floor = min(priorities[c] for c in floor_classes)
    below = [v for v in priorities.values() if v < floor]
    batch = max(below) if below else None
    if batch is None:
        value = floor - 1
    elif floor - batch < 2:
        raise BurstPriorityError(
            f"no integer lies between the serving floors' priority ({floor}) and the next one below it ({batch}): "
            "the burst slots need a value strictly between them, to preempt what runs below the floors and never a "
            "floor; leave a gap of at least 2"
        )
    else:
        value = batch + (floor - batch) // 2
    if value < -(2**31):
        raise BurstPriorityError(f"no int32 priority below the floors' {floor}")
    name = f"{BURST_PRIORITY_PREFIX}-{value}"
    if priorities.get(name, value) != value:
        raise BurstPriorityError(
            f"{name} is the burst slots' derived WorkloadPriorityClass (value {value}), but kueue.priorities gives "
            f"that name the value {priorities[name]}: rename that class"
        )
    return BurstPriority(name, value)


def slot_revision(floor_revision: str, slot: int, priority: str) -> str:
    """Slot `slot`'s revision: LWS_REVISION_LEN hex digits of the floor's revision, the slot and its priority class.

    A slot rolls with its floor (a new floor revision is a new name for every slot), and the slot's number is in
    the hash rather than beside it: the configured name leaves room for exactly one revision (kueue's 39-character
    bound, components/model/config/checks.py LWS_NAME_MAX), which the default names use to the last character.
    """
    text = f"{floor_revision}/slot-{slot}/{priority}"
    return hashlib.sha256(text.encode()).hexdigest()[:LWS_REVISION_LEN]


def slot_names(name: str, floor_revision: str, slots: int, priority: str) -> list[str]:
    """The LeaderWorkerSet names of slots 1..`slots`: `<name>-<slot revision>`, all distinct from the floor's
    `<name>-<floor revision>` and from one another (a revision that collides is hashed again with a salt)."""
    taken = {floor_revision}
    out = []
    for slot in range(1, slots + 1):
        rev, salt = slot_revision(floor_revision, slot, priority), 0
        while rev in taken:
            salt += 1
            rev = slot_revision(f"{floor_revision}#{salt}", slot, priority)
        taken.add(rev)
        out.append(f"{name}-{rev}")
    return out


@dataclass(frozen=True)
class Pacing:
    """The timing of one role's burst slots, every number derived from the settings that hold its parts."""

    scrape_seconds: int  # observability.scrapeInterval, rounded up
    polling_seconds: int  # KEDA's pollingInterval: once per scrape interval
    fresh_seconds: int  # a leader without a sample this long is gone (Managed Prometheus keeps no staleness)
    chain_hold_seconds: int  # slot k may turn on once slot k-1's leader has run this long
    slot_start_seconds: int  # a slot from admission to a ready leader: Slice formation, then the model load
    cooldown_seconds: int  # KEDA's cooldownPeriod: the termination grace period plus slot_start_seconds
    rearm_seconds: int  # a slot turns on again only once its last leader has been gone this long
    loading_window_seconds: int  # a leader reading 0 that has not served within this window loads (else: drains)


def pacing(settings: Settings) -> Pacing:
    """The pacing of the burst slots of a stack."""
    scrape = math.ceil(settings.observability.scrape_interval_seconds)
    polling = min(scrape, KEDA_DEFAULT_POLLING_S)
    fresh = 2 * scrape  # one scrape may fail or land late; two missed are a gone target
    serving = settings.serving
    start = SLICE_ACTIVATION_TIMEOUT_S + serving.model_load_seconds
    drain = serving.termination_grace_period_seconds + fresh
    return Pacing(
        scrape_seconds=scrape,
        polling_seconds=polling,
        fresh_seconds=fresh,
        # Two scrapes of the new leader (one may be late or lost), one poll to read them.
        chain_hold_seconds=2 * scrape + polling,
        slot_start_seconds=start,
        # An idle slot is kept as long as a new one would take to stop and come back (grace, formation, load).
        cooldown_seconds=serving.termination_grace_period_seconds + start,
        # A draining leader (it served, then SIGTERM) reads 0 for at most the grace period: the window that tells
        # it from a loading one. A slot's leader is always `<set>-0`, so a slot turned on again writes its earlier
        # run's `up` series: the rearm outlasts the window, so the earlier run's samples have left it by then.
        rearm_seconds=max(fresh + SLICE_RELEASE_S, drain),
        loading_window_seconds=drain,
    )
