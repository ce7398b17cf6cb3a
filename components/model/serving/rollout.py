"""Which serving changes must roll to a new LeaderWorkerSet, and under what name (pure, no Pulumi).

Kueue's webhook refuses to change a queued LWS's pod shape while it runs: `ValidateUpdate` compares the
`SpecShape` of the old and new leader and worker templates and rejects any difference, and the queue-name
label is immutable (kubernetes-sigs/kueue v0.17.4 pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook.go
L187-196, 266-274; pkg/controller/jobframework/validation.go `ValidateImmutablePodGroupPodSpec`;
pkg/util/pod/pod.go `SpecShape`, `ContainersShape`). Its defaulting copies the priority-class label into both
pod templates (same webhook, `podTemplateSpecDefault`), so a priority change would restart every group in
place. And a scale-down in place leaks Slices: the slice controller deletes a removed group's Slices only once
every pod labelled `leaderworkerset.sigs.k8s.io/name=<lws>` has finished, which the other groups never do
(AI-Hypercomputer/xpk slice/internal/controller/workload_controller.go@b75b6c17 `cleanupSlices`,
`ownerPodsFinished`); deleting the whole LWS ends that wait (the owner is gone).

So the LWS name carries a revision: a hash of exactly what Kueue compares (the pod shape of both templates),
the group size, the replica count, the queue and the priority. A change of any of them is a new name, which
Pulumi turns into a replacement (pulumi-kubernetes forces replacement on `.metadata.name`: provider/pkg/provider/
provider.go Diff, `forceNewFields = k.forceNewProperties(newInputs)`, which starts from diff.go
`metadataForceNewProperties` = .metadata.name, .metadata.namespace): the new LWS is created, and the old one
deleted at the end of the update (components/serving.py). Anything else (image, flags, env, probes) keeps the
name and rolls in place, which Kueue allows.

An in-place roll keeps LWS's default rollingUpdateConfiguration (maxUnavailable 1, maxSurge 0: sigs.k8s.io/lws
v0.8.0 pkg/webhooks/leaderworkerset_webhook.go `Default`), so a one-group role has no ready leader meanwhile. A
surge sized from the plan's headroom was weighed and refused, from the sources: (1) v0.8.0 hands maxUnavailable to
the leader StatefulSet unchanged (pkg/controllers/leaderworkerset_controller.go
`constructLeaderStatefulSetApplyConfiguration`), and Kubernetes refuses a StatefulSet maxUnavailable of 0
(pkg/apis/apps/validation `validateRollingUpdateStatefulSet`: "cannot be 0") once the MaxUnavailableStatefulSet gate
keeps the field, on by default from 1.35 (pkg/features/kube_features.go), below every GKE version here
(checks.MIN_SLICE_CONTROLLER_VERSION): the LWS would create no pods (kubernetes-sigs/lws#776, fixed by #781 and #778
in v0.9.0). (2) With maxUnavailable 1, v0.8.0 still takes one old group down as the surge groups start (Case 5 of
`rollingUpdateParameters`: the partition steps by maxUnavailable + maxSurge less the surge groups not yet created,
whatever their readiness), and at the start of an update it bursts to 2 x replicas - 1 groups when maxSurge >=
replicas (`wantReplicas`), so replicas 1 gets no surge at all. (3) Kueue v0.17.4 gives each surge group a Workload
of its own (pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler.go `filterWorkloads`, "ensures workloads
exist for all groups including surge replicas"), and removes it when the roll is done while the LWS runs on; the
slice controller then keeps that group's Slices until every pod of the LWS has finished (`ownerPodsFinished` above),
the scale-down leak on every roll. (Changing rolloutStrategy alone would not roll anything: LWS's revision covers
only leaderWorkerTemplate and networkConfig, pkg/utils/revision/revision_utils.go `getPatch`; and Kueue's webhook
does not look at it, `ValidateUpdate`.)

Not upstream's DisaggregatedSet (LWS v0.9+, llm-d's TPU7x dynamic-slice recipe): at sigs.k8s.io/lws v0.10.0
(2161f38ff333) its rollout scales the old revision's LWS down group by group (pkg/controllers/disaggregatedset/
lws_manager.go `Scale`), which is the Slice leak above at every step, and waits for the new revision to be
fully ready (ReadyReplicas == Replicas, executor.go) before the next one, so with room for one extra group it
stalls on a group Kueue admitted into room the leaked Slices still hold. Its revision hashes every role's
template (pkg/utils/disaggregatedset/utils.go `ComputeRevision`), so a prefill change rolls decode too; the
recipe asks for LWS v0.11.1+ (`groupIdentity`, absent from the v0.10.0 CRD); and Pulumi would not await it either.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from components.model.config.checks import LWS_REVISION_LEN

# What a new group needs before its model starts loading: Kueue admission, the Slice (the slice controller
# retries one that is not active within 3 minutes, xpk slice/cmd/main.go `--activation-timeout`), scheduling
# and the image pull. An estimate, not a measurement.
ROLLOUT_SCHEDULING_BUDGET_S = 1800


def rollout_timeout_seconds(startup_timeout_seconds: int) -> int:
    """How long a new serving group may take to be ready: the leaders' startup budget plus getting them scheduled.
    Pulumi waits that long for a new LWS's groups, and Kueue lets an admitted group take that long before it
    evicts it (components/model/addons/kueue_config.py `manager_config`)."""
    return startup_timeout_seconds + ROLLOUT_SCHEDULING_BUDGET_S


def _containers_shape(containers: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    # ContainersShape: per container, only its resource requests and its ports.
    return [
        {"resources": {"requests": (c.get("resources") or {}).get("requests")}, "ports": c.get("ports")}
        for c in containers or []
    ]


def pod_spec_shape(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue's `SpecShape` of a pod spec (v0.17.4 pkg/util/pod/pod.go): what its LWS webhook keeps immutable."""
    return {
        "initContainers": _containers_shape(spec.get("initContainers")),
        "containers": _containers_shape(spec.get("containers")),
        "nodeSelector": spec.get("nodeSelector"),
        "affinity": spec.get("affinity"),
        "tolerations": spec.get("tolerations"),
        "runtimeClassName": spec.get("runtimeClassName"),
        "priority": spec.get("priority"),
        "topologySpreadConstraints": spec.get("topologySpreadConstraints"),
        "overhead": spec.get("overhead"),
        "resourceClaims": spec.get("resourceClaims"),
    }


def revision(
    *,
    leader_spec: Mapping[str, Any],
    worker_spec: Mapping[str, Any],
    size: int,
    replicas: int,
    queue: str,
    priority: str,
) -> str:
    """The LWS's revision: LWS_REVISION_LEN hex digits of what must not change under a running LWS."""
    identity = {
        "leader": pod_spec_shape(leader_spec),
        "worker": pod_spec_shape(worker_spec),
        "size": size,
        "replicas": replicas,
        "queue": queue,
        "priority": priority,
    }
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:LWS_REVISION_LEN]


# pulumi-kubernetes awaits a custom resource only through its `pulumi.com/waitFor` annotation
# (provider/pkg/metadata/overrides.go `ReadyCondition`), a JSONPath evaluated with an RFC 9535 parser since
# v4.24.0 (CHANGELOG), for at most `pulumi.com/timeoutSeconds` (default 10 minutes, provider/pkg/await/await.go).
# Its parser splits the expression on a single "=" (provider/pkg/jsonpath/jsonpath.go `Parse`), so the
# comparison is written with ">" only. The filter runs over the object's top-level members; only `status` has
# `readyReplicas`: the LWS's count of groups whose leader is Ready and whose workers are ready, "updated or not"
# (sigs.k8s.io/lws v0.8.0 api/leaderworkerset/v1 `ReadyReplicas`, omitted while 0). The same annotation is awaited
# on an update in place (provider/pkg/await/await.go `Update` calls `ReadyCondition` too), hence the patch below.
# The JSONPath library compares the int64 of unstructured objects as numbers (github.com/theory/jsonpath v0.9.0,
# the provider's go.mod; spec/op.go `valCompType`). Sources: pulumi-kubernetes main after v4.32.0 (94977969d),
# the newest at hand.
# So that the wait holds on a creation only, it is not on the LWS. pulumi-kubernetes evaluates the waitFor of the *live*
# object after every create and every update (provider/pkg/await/await.go:321 Creation and :504 Update call
# metadata.ReadyCondition with the applied object; provider/pkg/metadata/overrides.go:112 reads the annotation from
# it), so an LWS carrying it re-awaits its groups on every in-place update: an image fix with one group down blocks
# `up` for the whole timeout, then fails. Instead each new LWS gets a LeaderWorkerSetPatch of its own
# (components/vllm_leaderworkersets.py `leaders_ready`): a Patch resource is applied server-side and awaited like any
# object (await.go:190 `kinds.IsPatchResource`, then :321), and it is declared under a resource name carrying the
# revision, so it is created with a new LWS and never updated. Its annotation lands on the live LWS, so the LWS's
# own inputs carry skipAwait, which ReadyCondition checks on the inputs first (overrides.go:108-110): the LWS's
# updates return at once; their delete is still awaited, skipAwait skipping the delete wait only for a few
# built-in kinds (overrides.go `allowsSkipAwaitWithDelete`). Deleting the patch relinquishes its annotations
# (await.go:958-961, ssa.Relinquish); Pulumi deletes it before its LWS, a dependent first. The rollout's guarantee
# stays: the old LWS is deleted at the end of the update, after the new patch's wait (pulumi/pulumi#9979).


def ready_groups_condition(groups: int) -> str:
    """The waitFor expression that holds once at least `groups` (>= 1) groups of the LWS are ready."""
    if groups < 1:
        raise ValueError("waits for at least one group")
    return f"jsonpath={{$[?@.readyReplicas>{groups - 1}]}}"
