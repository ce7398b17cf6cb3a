"""Kueue's chart values: its manager configuration (pure data).

Why each setting, from Kueue v0.17.4 (kubernetes-sigs/kueue at tag v0.17.4):

* `managedJobsNamespaceSelector`: by default Kueue manages every namespace but kube-system and its own
  (`apis/config/v1beta2/defaults.go` L111-119), and the chart gives every job, pod, deployment and statefulset
  webhook that selector, or the same default (`charts/kueue/templates/webhook/manifests.yaml`: mpod.kb.io
  L265-281, mdeployment.kb.io L84-100, and the other job kinds `{{- if (hasKey $managerConfig
  "managedJobsNamespaceSelector") }}`). Those webhooks fail closed, so while no Kueue pod serves, no pod could
  be created anywhere else (the LWS, JobSet, slice-controller, monitoring, router namespaces). Restricted to
  the namespace that runs the queued workloads (the demos' JobSets and serving's LeaderWorkerSets both live in
  `kueue.namespace`), an outage of Kueue blocks pod creation there only.
* Integrations: the chart makes the pod, deployment and statefulset webhooks fail closed only for listed
  integrations (`failurePolicy: Fail` under `{{- if has "pod" $integrationsConfig.frameworks }}`, else
  Ignore). Kept: JobSet, LeaderWorkerSet and `pod`, which LeaderWorkerSet enables implicitly
  (`pkg/controller/jobs/leaderworkerset/leaderworkerset_controller.go` ImplicitlyEnabledFrameworkNames) and
  which must stay listed so that an LWS pod is never created unmanaged while Kueue is down.
* Leader election stays on (`leaderElection.leaderElect: true`, the default configuration's; `cmd/kueue/main.go`
  setupRoleTracker: one leader, followers serve the webhooks), so the replicas, budget and spread of
  components/model/addons/controllers.py keep a webhook endpoint through a node drain.
* `waitForPodsReady`, set explicitly on every version. Kueue 0.17 runs it only when the configuration has the block
  (v0.17.4 `pkg/util/waitforpodsready/waitforpodsready.go:22`, `cfg != nil`); 0.19 turns it on by default with a
  30-minute timeout and the same recovery timeout (v0.19.2 `CHANGELOG/CHANGELOG-0.19.md:215`;
  `apis/config/v1beta2/defaults.go:48`, `:99-117`; off only behind the alpha, temporary `DisableWaitForPodsReady`
  gate, `CHANGELOG-0.19.md:281-283`). The timeout runs from a Workload's `Admitted` condition (on TPU: once its
  Slices are ready) to `PodsReady`, i.e. every pod of the group Ready, the leader only once the model answers; the
  recovery timeout from a running Workload's `PodsReady=False`; past either, Kueue evicts the Workload and requeues
  it (`pkg/controller/core/workload_controller.go:1657-1681` at v0.19.2, `:1313-1337` at v0.17.4). A serving group
  may load the model for up to `serving.startupTimeoutSeconds` (4 hours by default), and a group whose pod
  restarts is re-created by LWS and loads again: 30 minutes would evict and requeue it forever. Both timeouts are
  the serving groups' ready budget (`rollout_timeout_seconds`, components/model/serving/rollout.py), so Kueue
  gives up on a group only after its startup probe has; `blockAdmission: false` (one loading group must not
  hold every other admission for hours); requeuing with the defaults made explicit: from the eviction time,
  backoff 60 s doubling to 3600 s, and no `backoffLimitCount`, which would deactivate a serving group for good
  after that many evictions (`apis/config/v1beta2/configuration_types.go:402-439`, `workload_controller.go:1282-1284`
  at v0.19.2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from components.model.config.settings import Settings
from components.model.keys import NAMESPACE_LABEL
from components.model.serving.rollout import rollout_timeout_seconds

KUEUE_CONFIG = Path(__file__).resolve().parent.parent.parent.parent / "manifests" / "kueue-manager-config.yaml"
KUEUE_CONFIG_VERSION = "0.17.4"  # the chart version whose default configuration KUEUE_CONFIG starts from
INTEGRATIONS = ("jobset.x-k8s.io/jobset", "leaderworkerset.x-k8s.io/leaderworkerset", "pod")


def queued_namespaces(settings: Settings) -> list[str]:
    """Where workloads go through Kueue: the demos' JobSets and serving's LeaderWorkerSets share one namespace."""
    return [settings.kueue.namespace]


def namespaces_requirement(namespaces: list[str]) -> dict[str, Any]:
    """The label-selector requirement on a namespace that matches exactly these namespaces."""
    return {"key": NAMESPACE_LABEL, "operator": "In", "values": list(namespaces)}


def queued_namespaces_requirement(settings: Settings) -> dict[str, Any]:
    """The requirement that matches exactly the queued namespaces: Kueue's managed namespaces, and the scope of the
    slice controller's webhooks (components/model/addons/slice_controller.py)."""
    return namespaces_requirement(queued_namespaces(settings))


def manager_config(settings: Settings) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(KUEUE_CONFIG.read_text())
    config["managedJobsNamespaceSelector"] = {"matchExpressions": [queued_namespaces_requirement(settings)]}
    # Both timeouts are the serving groups' ready budget; the other keys are KUEUE_CONFIG's (the docstring says why).
    budget = f"{rollout_timeout_seconds(settings.serving.startup_timeout_seconds)}s"
    config["waitForPodsReady"] = {"timeout": budget, "recoveryTimeout": budget, **config["waitForPodsReady"]}
    if settings.observability.scrapes:
        # the quota series of the dashboard and alert (kueue_cluster_queue_nominal_quota, ..._resource_usage)
        config["metrics"]["enableClusterQueueResources"] = True
    return config


def kueue_chart_values(settings: Settings) -> dict[str, Any]:
    """Kueue's values besides its replicas, budget and spread (components/model/addons/controllers.py)."""
    return {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(settings), sort_keys=False)}}
