"""The health of each cube, as pure data: its sub-block, its nodes' partitions, its Slices, the workloads it
stops, and the one change that would help. `python -m components health` feeds it (components/cli/health.py).

What each read says, from the sources this program pins:

* The sub-block: components/model/tpu/reservation.py (status, health, maintenance; what keeps a cube off one).
* The partitions: GKE labels every TPU7x node with `cloud.google.com/gke-tpu-partition-<shape>-state`,
  HEALTHY or DEGRADED (xpk slice/internal/core/constants.go@250d4b3c TPUSliceHealthNodeSelector*; its kind
  test clusters, slice/hack/kind-cluster-subslice.yaml, carry one per shape). A value other than HEALTHY is
  counted as degraded: the controller itself only ever treats HEALTHY as healthy (workload_controller.go
  podSetRequestedOnlyHealthySlices).
* The Slices: the Ready condition's reason is GKE's health of the slice (core/constants.go MMIGHealthStatus*:
  ACTIVATING, ACTIVE, ACTIVE_DEGRADED, DEACTIVATING, FAILED, INCOMPLETE, UNKNOWN) or `SliceCreationFailed`;
  the controller calls FAILED an error, and SliceCreationFailed unless the UseRetryMechanismForSliceCreation
  gate is on (core/slice.go:85-91 isError; the stack's `addons.sliceController.featureGates`).
* The workloads: when a Slice fails (or an untolerated degraded one, with the FailOnUntoleratedDegradedSlice
  gate), the slice controller sets its admission check to Retry and the Workload condition `TPUSliceFailure`
  (reason RuntimeFailure, FormationTimeout, Deletion or ConfigurationFailure; workload_controller.go
  updateWorkloadStatus, core/constants.go WorkloadSlice*); Kueue then evicts the Workload with reason
  `AdmissionCheck` and requeues it (kueue v0.17.4 pkg/controller/core/workload_controller.go:767), or, for
  a Rejected check, deactivates it (:754): at once `spec.active` false (:385), an eviction with reason
  `DeactivatedDueToAdmissionCheck` (:458-483, pkg/workload/workload.go:1878 ReasonWithCause) and the check reset
  to Pending (pkg/workload/admissionchecks.go:89), so that settled state counts as rejected too.
* A Workload admitted whose check is still Pending waits for its Slices to form: shown, not a failure.

Nothing here moves anything: an action is a `tpu.subBlocks` value for a person to review (the health
workflow puts it in a pull request), with what the change preview says that change does.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.model.addons.slice_controller import RETRY_CREATION_GATE
from components.model.config.checks import PROJECT
from components.model.keys import partition_state_label
from components.model.observability.monitoring import EVICTED_BY_CHECK  # the eviction reason the alert counts too
from components.model.records import align, record
from components.model.tpu.reservation import SubBlock

PARTITION_STATE_RE = re.compile("^" + re.escape(partition_state_label("S")).replace("S", r"(\d+x\d+x\d+)", 1) + "$")
PARTITION_HEALTHY = "HEALTHY"  # xpk core/constants.go TPUSliceHealthNodeSelectorHealthy
SLICE_OK = frozenset({"ACTIVE"})
# core/slice.go:85-91 isError: FAILED always, SliceCreationFailed unless the retry gate retries it.
SLICE_FAILED = frozenset({"FAILED", "SliceCreationFailed"})


def slice_failed_states(gates: Iterable[str]) -> frozenset[str]:
    """The Ready reasons the slice controller counts as failed, with these of its feature gates on."""
    return SLICE_FAILED - {"SliceCreationFailed"} if RETRY_CREATION_GATE in gates else SLICE_FAILED


SLICE_DEGRADED = frozenset({"ACTIVE_DEGRADED"})
SLICE_FAILURE_CONDITION = "TPUSliceFailure"  # core/constants.go WorkloadSliceFailureConditionType
CHECK_RETRY, CHECK_REJECTED, CHECK_PENDING = "Retry", "Rejected", "Pending"  # admissioncheck_types.go:30-40
# What Kueue's eviction of a deactivated Workload says when a Rejected check deactivated it (module docstring).
DEACTIVATED_BY_CHECK = f"DeactivatedDueTo{EVICTED_BY_CHECK}"

OK, WATCH, ACTION = "ok", "watch", "action"
NO_ACTION, MOVE, OTHER = "none", "move", "other"
MOVE_AFTER_DRAINING, MOVE_AFTER_UNPROTECTING = "move after draining", "move after unprotecting"
SUB_BLOCKS_KEY = f"{PROJECT}:tpu.subBlocks"


def _true(conditions: Iterable[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)


@dataclass(frozen=True)
class WorkloadState:
    """One Kueue Workload that a slice failure touched (evicted, retrying, rejected) or that waits on a Slice."""

    name: str  # namespace/name
    state: str  # evicted, retrying, rejected (or deactivated for it), pending (its Slices being created)
    reason: str  # TPUSliceFailure reason or the admission check's message
    slices: tuple[str, ...] = ()  # Slice names its failure message names

    def describe(self) -> str:
        return f"{self.name} ({self.state}{': ' + self.reason if self.reason else ''})"

    def as_dict(self) -> dict[str, Any]:
        return record(self, "name", "state", "reason")


def workload_states(workloads: Iterable[Mapping[str, Any]], check: str) -> list[WorkloadState]:
    """The Workloads that a slice failure evicted or holds: `check` is the slice admission check's name."""
    out = []
    for wl in workloads:
        meta = wl.get("metadata") or {}
        status = wl.get("status") or {}
        conditions = status.get("conditions") or []
        name = f"{meta.get('namespace', '?')}/{meta.get('name', '?')}"
        ac = next((a for a in status.get("admissionChecks") or [] if a.get("name") == check), None)
        failure = _true(conditions, SLICE_FAILURE_CONDITION)
        evicted = _true(conditions, "Evicted")
        message = str((failure or {}).get("message") or (ac or {}).get("message") or "")
        # The Slices the controller's message names: "...Errors: <slice>: <message>; ..." (buildAdmissionCheckMessage).
        errors = message.split("Errors:", 1)[1] if "Errors:" in message else ""
        named = tuple(sorted(set(re.findall(r"([a-z0-9][-a-z0-9.]*[a-z0-9]): ", errors))))
        inactive = (wl.get("spec") or {}).get("active") is False
        if ac is not None and ac.get("state") == CHECK_REJECTED:
            out.append(WorkloadState(name, "rejected", str(ac.get("message") or ""), named))
        elif inactive and (evicted or {}).get("reason") == DEACTIVATED_BY_CHECK:
            out.append(WorkloadState(name, "rejected", DEACTIVATED_BY_CHECK, named))
        elif (evicted is not None and evicted.get("reason") == EVICTED_BY_CHECK) or failure is not None:
            reason = str((failure or {}).get("reason") or (evicted or {}).get("reason") or "")
            state = "evicted" if evicted is not None else "retrying"
            out.append(WorkloadState(name, state, reason, named))
        elif ac is not None and ac.get("state") == CHECK_RETRY:
            out.append(WorkloadState(name, "retrying", str(ac.get("message") or ""), named))
        elif ac is not None and ac.get("state") == CHECK_PENDING and _true(conditions, "QuotaReserved") and not evicted:
            out.append(WorkloadState(name, "pending", str(ac.get("message") or ""), named))
    return sorted(out, key=lambda w: w.name)


def partition_summary(nodes: Sequence[Mapping[str, str]]) -> tuple[str, int]:
    """(the nodes' partition states in a few words, how many nodes have a partition not HEALTHY)."""
    if not nodes:
        return "no nodes", 0
    bad: dict[str, int] = {}
    degraded_nodes = 0
    for labels in nodes:
        node_bad = False
        for key, value in labels.items():
            m = PARTITION_STATE_RE.match(key)
            if m and value != PARTITION_HEALTHY:
                shape = f"{m.group(1)} {value}"
                bad[shape] = bad.get(shape, 0) + 1
                node_bad = True
        degraded_nodes += node_bad
    if not bad:
        return f"{len(nodes)} nodes HEALTHY", 0
    parts = ", ".join(f"{k} on {n}" for k, n in sorted(bad.items()))
    return f"{parts} of {len(nodes)} nodes", degraded_nodes


@dataclass
class CubeHealth:
    cube: int
    pool: str
    sub_block: str | None
    sub_block_state: SubBlock | None
    sub_block_problems: tuple[str, ...]
    partitions: str
    degraded_nodes: int
    slices: list[tuple[str, str, str]]  # (name, state, owner)
    workloads: list[WorkloadState]
    status: str = OK
    action: str = "none"
    move_to: str | None = None  # the spare this cube moves to in the proposal

    @property
    def health(self) -> str:
        sb = self.sub_block_state
        if sb is None:
            return "not read"
        words = [w for w in (sb.status, sb.health) if w and w not in ("READY",)]
        if sb.maintenance_ongoing:
            words.append(f"maintenance ongoing ({sb.maintenance_ongoing})")
        elif sb.maintenance_pending:
            words.append(f"maintenance pending ({sb.maintenance_pending})")
        return ", ".join(words) or "?"

    def as_dict(self) -> dict[str, Any]:
        state = ("cube", "pool", "sub_block", "health", "sub_block_state", "sub_block_problems", "partitions")
        out = record(self, *state, "degraded_nodes", "slices", "workloads", "status", "action", "move_to")
        out["slices"] = [{"name": n, "state": s, "owner": o} for n, s, o in self.slices]
        return out


@dataclass
class Report:
    cubes: list[CubeHealth]
    unplaced: list[WorkloadState]  # workloads a slice failure touched whose Slices are on no cube (gone)
    proposal: list[str] | None  # the tpu.subBlocks value that moves every cube with a spare, or None
    notes: list[str] = field(default_factory=list)
    source: str = ""
    preview: Any = None  # what the change preview says the proposal does (filled by the command)
    # The keys of the workloads to turn off before the move (components/teardown.py workload_keys, filled by the
    # command): the preview refuses a pool's replacement while they run (teardown.py pool_refusals).
    drain_first: list[str] = field(default_factory=list)
    # `cluster.protect` when it is on (staging, prod): Pulumi refuses to replace a protected pool.
    unprotect_first: list[str] = field(default_factory=list)
    stack_file: str = "the stack file"

    @property
    def action_needed(self) -> bool:
        return any(c.status == ACTION for c in self.cubes) or any(w.state == "rejected" for w in self.unplaced)

    @property
    def next_action(self) -> str:
        """What a person does next: none, move, move after draining (or unprotecting), or other (each cube's
        action says it)."""
        if not self.action_needed:
            return NO_ACTION
        if self.proposal is None:
            return OTHER
        if self.drain_first:
            return MOVE_AFTER_DRAINING
        return MOVE_AFTER_UNPROTECTING if self.unprotect_first else MOVE

    def steps(self) -> list[str]:
        """The deployments, in order, that carry the proposal out."""
        if self.proposal is None:
            return []
        move = f"set tpu.subBlocks: [{', '.join(self.proposal)}] (the health pull request does), then `pulumi up`"
        first = [*self.drain_first, *self.unprotect_first]
        if not first:
            return [f"{move}: the moved pools are replaced (no queued workload of the stack runs)"]
        off = ", ".join(f"{k}: false" for k in first)
        on = ", ".join(f"{k}: true" for k in first)
        cli = " && ".join(f"pulumi config set --path {k} false" for k in first)
        what = "the workloads" if self.drain_first else "protection"
        return [
            f"turn {what} off: {off} in {self.stack_file} (or `{cli}`), then `pulumi up`"
            + (
                "; a workload you submitted yourself with Slices on a moved pool must be gone too"
                if self.drain_first
                else ""
            ),
            f"{move}; its preview no longer refuses it",
            f"turn {'them' if self.drain_first else 'it'} on again: {on}, then `pulumi up`"
            + (" (serving loads the model again)" if "serving.enabled" in self.drain_first else ""),
        ]

    def _why_first(self) -> str:
        why = []
        if self.drain_first:
            why.append(
                f"the preview refuses to replace a TPU pool while the stack runs queued workloads "
                f"({', '.join(self.drain_first)}; Kueue may place them on any pool, and the pool's teardown gate "
                "would wait for their Slices)"
            )
        if self.unprotect_first:
            why.append("Pulumi refuses to replace a protected node pool (cluster.protect)")
        return "; ".join(why)

    def table(self) -> str:
        rows = [["CUBE", "SUB-BLOCK", "HEALTH", "PARTITIONS", "SLICES", "WORKLOADS AFFECTED", "ACTION"]]
        for c in self.cubes:
            cells = [c.partitions, _counts(s for _, s, _ in c.slices), _counts(w.state for w in c.workloads), c.action]
            rows.append([f"{c.cube} {c.pool}", c.sub_block or "-", c.health, *cells])
        if self.unplaced:
            affected = _counts(w.state for w in self.unplaced)
            rows.append(["-", "-", "-", "-", "-", affected, unplaced_action(self.unplaced)])
        return "\n".join(align(rows))

    def details(self) -> list[str]:
        """What each cube needs, in sentences, then the proposal."""
        lines = []
        for c in self.cubes:
            if c.status == OK:
                continue
            lines.append(f"cube {c.cube} ({c.pool}, sub-block {c.sub_block or '-'}): {c.action}")
            for problem in c.sub_block_problems:
                lines.append(f"  sub-block: {problem}")
            for name, state, owner in c.slices:
                if state not in SLICE_OK:
                    lines.append(f"  Slice {name}: {state}" + (f" (workload {owner})" if owner else ""))
            for w in c.workloads:
                lines.append(f"  workload {w.describe()}")
        for w in self.unplaced:
            lines.append(
                f"workload {w.describe()} ({'no Slice of it yet' if w.state == 'pending' else 'its Slices are gone'})"
            )
        if self.proposal is not None:
            lines.append(f"proposed change: {SUB_BLOCKS_KEY}: [{', '.join(self.proposal)}]")
            lines.append(
                "  after it is set: `pulumi preview` against the real block (the health workflow's pull request "
                "runs it); the preview below ran offline"
            )
            if self.drain_first or self.unprotect_first:
                lines.append(f"next step: {self.next_action}: {self._why_first()}, so deploy in three steps:")
            else:
                lines.append(f"next step: {MOVE}:")
            lines += [f"  {i}. {step}" for i, step in enumerate(self.steps(), 1)]
        lines += self.notes
        return lines

    def as_dict(self) -> dict[str, Any]:
        fields = ("source", "action_needed", "next_action", "drain_first", "unprotect_first", "steps", "cubes")
        return record(self, *fields, ("unplacedWorkloads", "unplaced")) | {
            "proposal": {"key": SUB_BLOCKS_KEY, "value": self.proposal} if self.proposal is not None else None,
            "notes": list(self.notes),
            "preview": self.preview,
        }


def _counts(states: Iterable[str]) -> str:
    """`2 ACTIVE, 1 FAILED`: how many of each state, in name order; "none" for none."""
    counts = collections.Counter(states)
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"


def unplaced_action(workloads: Sequence[WorkloadState]) -> str:
    if any(w.state == "rejected" for w in workloads):
        return "reactivate the rejected workloads once the cause is fixed (Kueue deactivated them)"
    if all(w.state == "pending" for w in workloads):
        return "watch: admitted, the slice controller is creating their Slices"
    return "watch: Kueue requeued them, the slice controller retries"
