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

Two replicas (`addons.sliceController.replicas`), as the program runs Kueue: the manifest runs one
(config/manager/manager.yaml:24), so while that pod is rescheduled no queued Job, JobSet or LeaderWorkerSet can be
created. Its source allows two:
* the manager runs with `--leader-elect` (manager.yaml:64; cmd/main.go:90, :225-226 `LeaderElection`), so one
  replica reconciles Workloads and Slices while every replica serves the webhooks (controller-runtime v0.23.3,
  slice/go.mod:16: the webhook server needs no leader election, sigs.k8s.io/controller-runtime@f9589b9f
  pkg/webhook/server.go:163-167);
* the cert rotator (open-policy-agent/cert-controller v0.16.0, slice/go.mod:10; internal/util/cert/cert.go:45-56)
  leaves `RequireLeaderElection` false, so it runs in every replica (cert-controller@4e31b078 pkg/rotator/
  rotator.go:275-277) and each one's readiness waits for its own certificates (cmd/main.go:315-336); the replicas
  share one Secret (cert.go:30, mounted by config/default/manager_webhook_patch.yaml:15-23), written with an
  update that carries its resourceVersion (rotator.go:489-491), so a replica that loses the race re-reads the
  Secret the other wrote and finds it valid (rotator.go:325-370, retried with backoff);
* every replica writes the same CA into the webhook configuration's caBundle (its ReconcileWH, rotator.go:760-870).
So the transform sets the Deployment's replicas, keeps `--leader-elect` on (added where a build lacks it), and
spreads the pods over nodes; a PodDisruptionBudget of minAvailable 1 keeps one through a drain (components/addons.py).
Both select the pods by the Deployment's own selector, SELECTOR (manager.yaml:20-23 with the kustomization's
`control-plane` label, config/default/kustomization.yaml:12-15); a manifest whose Deployment selects otherwise is
refused as its objects are registered, since the budget would guard nothing.

The change preview cannot fetch the manifest, so `program_objects` gives what the transforms write into it, each
transform applied to the object reduced to its identity: the component registers them as its inputs, and
`python -m components diff` compares them as those objects (components/cli/manifest_objects.py).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from components.model.addons.controllers import spread
from components.model.keys import APP_NAME_LABEL

RETRY_CREATION_GATE = "UseRetryMechanismForSliceCreation"  # under it, health reads a creation failure as a retry
FEATURE_GATES = ("FailOnUntoleratedDegradedSlice", RETRY_CREATION_GATE)
DEPLOYMENT = ("slice-controller-system", "slice-controller-controller-manager")  # its namespace and name
CONTAINER = "manager"  # config/manager/manager.yaml
FLAG = "--feature-gates="
LEADER_ELECT = "--leader-elect"  # cmd/main.go:90
SELECTOR = {"control-plane": "controller-manager", APP_NAME_LABEL: "slice-controller"}  # the Deployment's (above)
# The one webhook configuration its cert rotator keeps (internal/util/cert/cert.go:33, :53).
MUTATING_CONFIGURATION = "slice-controller-mutating-webhook-configuration"
# Each manager pod's requests, which the manifest fixes (config/manager/manager.yaml:90-96, limits the same): the
# system pool's fit counts them once per replica (components/model/config/cross_checks.py `system_pool_room`).
MANAGER_REQUESTS = ("2", "4Gi")


def controller_deployment(deployment: dict[str, Any], gates: Sequence[str], replicas: int) -> dict[str, Any] | None:
    """The controller's Deployment as the program runs it: `replicas` pods (from two on, leader election kept on and
    the pods spread over nodes), the opt-in `gates` on its manager container (replacing a `--feature-gates` it has).
    None when the object is not that Deployment; ValueError when it is not the Deployment the budget guards."""
    meta = deployment.get("metadata") or {}
    if (meta.get("namespace"), meta.get("name")) != DEPLOYMENT:
        return None
    out = copy.deepcopy(deployment)
    spec = out.setdefault("spec", {})
    selected = (spec.get("selector") or {}).get("matchLabels")
    pod = (spec.get("template") or {}).get("spec") or {}
    manager = next((c for c in pod.get("containers") or [] if c.get("name") == CONTAINER), None)
    # The budget and the spread select SELECTOR: the pods carry it when the Deployment's selector holds it (pods
    # carry their Deployment's selector); with one replica neither exists, and only the manager container matters.
    guarded = replicas < 2 or SELECTOR.items() <= (selected or {}).items()
    if not guarded or manager is None:
        raise ValueError(
            f"the slice controller's manifest: Deployment {DEPLOYMENT[0]}/{DEPLOYMENT[1]} selects {selected} and "
            f"has {'a' if manager else 'no'} {CONTAINER!r} container; this program expects the selector {SELECTOR} "
            f"(its PodDisruptionBudget's) and a {CONTAINER!r} container (addons.sliceController.manifestUrl)"
        )
    args = [str(a) for a in manager.get("args") or [] if not (gates and str(a).startswith(FLAG))]
    if replicas >= 2 and LEADER_ELECT not in args:  # two replicas without it would both reconcile
        args = [a for a in args if not a.startswith(LEADER_ELECT + "=")] + [LEADER_ELECT]
    manager["args"] = [*args, FLAG + ",".join(f"{g}=true" for g in gates)] if gates else args
    spec["replicas"] = replicas
    if replicas >= 2:
        pod["topologySpreadConstraints"] = spread(SELECTOR, "topologySpreadConstraints")
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


def program_objects(requirement: dict[str, Any], gates: Sequence[str], replicas: int) -> list[dict[str, Any]]:
    """What the program writes into the manifest's objects, for the change preview: each transform applied to the
    object reduced to what identifies it (kind, name, the Deployment's selector and container), since the rest of
    the manifest is fetched at `up`. A webhook named `*` stands for every webhook of the configuration."""
    webhooks = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": MUTATING_CONFIGURATION},
        "webhooks": [{"name": "*"}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT[1], "namespace": DEPLOYMENT[0]},
        "spec": {
            "selector": {"matchLabels": dict(SELECTOR)},
            "template": {"spec": {"containers": [{"name": CONTAINER}]}},
        },
    }
    controller = controller_deployment(deployment, gates, replicas)
    assert controller is not None
    return [with_namespace_scope(webhooks, requirement), controller]
