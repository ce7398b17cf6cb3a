"""What the slice controller offers for degraded and failed Slices, and how the program turns it on.

From its source (AI-Hypercomputer/xpk `slice/` at 250d4b3c):

* `--feature-gates` (cmd/main.go:106-116) with two alpha gates, both off by default
  (internal/features/features.go:28-50):
  - `FailOnUntoleratedDegradedSlice`: an ACTIVE_DEGRADED Slice under a pod set that asked for healthy slices
    only (node selector `cloud.google.com/gke-tpu-partition-4x4x4-state: HEALTHY`, or an affinity without
    DEGRADED) counts as failed: the admission check goes to Retry and Kueue evicts and requeues the workload
    (internal/controller/workload_controller.go:804-823, 951-957). Pod sets that tolerate DEGRADED run on.
  - `UseRetryMechanismForSliceCreation`: each Slice is annotated `slice.gke.io/retry-on-failure` so GKE
    retries its creation (partition conflicts included) instead of failing it; one that stays unformed past
    `--activation-timeout` (3m) is stale, and the workload is evicted with reason FormationTimeout
    (workload_controller.go:604-607, 847-857; internal/core/slice.go:74-91).
* Without any gate a FAILED Slice already sets the check to Retry after `--retry-delay-on-slice-failure`
  (10s) and Kueue requeues the workload (workload_controller.go:843-846): retry on failure needs no setting.
* `--default-slice-health-node-affinity` (HEALTHY_AND_DEGRADED, config/manager/manager.yaml:67): which
  partition states a workload's pods may land on when they say nothing.

The manifest this program applies is a pinned build (`addons.sliceController.manifestUrl`) whose source
revision it does not name, and a binary that does not know a gate exits at start (cmd/main.go:112-115,
"Unable to set flag gates"), which would stop every TPU admission. So the gates are opt-in:
`addons.sliceController.featureGates` lists the ones to turn on, for a manifest built from a revision that has
them. Kueue v0.17.4 needs no setting: it evicts on a Retry check and requeues after the check's
`requeueAfterSeconds` (pkg/controller/core/workload_controller.go:742-770).

Its webhooks (config/webhook/manifests.yaml:1-82, named by config/default/kustomization.yaml:2-15):
one MutatingWebhookConfiguration, `slice-controller-mutating-webhook-configuration` (internal/util/cert/cert.go:33,
whose rotator writes each webhook's caBundle), with four webhooks on CREATE, `failurePolicy: Fail` and no namespace
or object selector: `mjob.kb.io` (batch/v1 jobs), `mjobset.kb.io` (JobSets), `mleaderworkerset.kb.io`
(LeaderWorkerSets), `mstatefulset.slice-controller.kb.io` (apps/v1 statefulsets), served by one replica
(config/manager/manager.yaml:24). Unscoped, a Job, JobSet, LeaderWorkerSet or StatefulSet could not be created in
any namespace while that pod is not serving (a node drain, a rollout, the first minutes of `up`; the weights
download Job runs then, in a namespace of its own). They act on nothing outside the queued namespaces: the Job,
JobSet and LWS webhooks return at once without Kueue's queue-name label (internal/webhooks/job_webhook.go:52-55,
jobset_webhook.go:54-57, leaderworkerset_webhook.go:58-61), and the StatefulSet one on anything but a TPU7x
template with the slice topology annotation (statefulset_webhook.go:41-47), which only the LeaderWorkerSets'
own StatefulSets carry, created by LWS in their set's namespace. Queued workloads exist only where a LocalQueue
is, the namespace Kueue manages (components/model/addons/kueue_config.py `queued_namespaces`). So every webhook of the
manifest is scoped to those namespaces (`with_namespace_scope`), an existing selector kept and narrowed.
The pinned manifest's name says build `v0.8.0-200` (200 commits after xpk's v0.8.0 tag, as its image tags count;
this tree is v0.8.0-196 by `git describe`) and it cannot be read offline: the transform scopes whatever webhook
configurations it has, so none is left out if they differ from this tree's.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

RETRY_CREATION_GATE = "UseRetryMechanismForSliceCreation"  # under it, health reads a creation failure as a retry
FEATURE_GATES = ("FailOnUntoleratedDegradedSlice", RETRY_CREATION_GATE)
DEPLOYMENT = ("slice-controller-system", "slice-controller-controller-manager")  # its namespace and name
CONTAINER = "manager"  # config/manager/manager.yaml
FLAG = "--feature-gates="


def with_feature_gates(deployment: dict[str, Any], gates: Sequence[str]) -> dict[str, Any] | None:
    """The controller's Deployment with `--feature-gates` set on its manager container (replacing one it has);
    None when the object is not that Deployment or has no such container."""
    meta = deployment.get("metadata") or {}
    if (meta.get("namespace"), meta.get("name")) != DEPLOYMENT or not gates:
        return None
    out = copy.deepcopy(deployment)
    containers = (((out.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    manager = next((c for c in containers if c.get("name") == CONTAINER), None)
    if manager is None:
        return None
    args = [a for a in manager.get("args") or [] if not str(a).startswith(FLAG)]
    manager["args"] = [*args, FLAG + ",".join(f"{g}=true" for g in gates)]
    return out


WEBHOOK_CONFIGURATIONS = frozenset(
    f"kubernetes:admissionregistration.k8s.io/v1:{kind}"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
)


def with_namespace_scope(configuration: dict[str, Any], requirement: dict[str, Any]) -> dict[str, Any]:
    """The webhook configuration with `requirement` (a label-selector requirement on the namespace) added to every
    webhook's namespaceSelector beside what it has, once: requirements are ANDed, so an existing selector only
    narrows the scope further. The input is not changed."""
    out = copy.deepcopy(configuration)
    for webhook in out.get("webhooks") or []:
        selector = webhook.get("namespaceSelector") or {}
        expressions = list(selector.get("matchExpressions") or [])
        if requirement not in expressions:
            expressions.append(copy.deepcopy(requirement))
        webhook["namespaceSelector"] = {**selector, "matchExpressions": expressions}
    return out
