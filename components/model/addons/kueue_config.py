"""Kueue's chart values: its manager configuration, replicas and PodDisruptionBudget (pure data).

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
* Two replicas with leader election (the chart's `controllerManager.replicas`; `leaderElection.leaderElect:
  true` is the default configuration's, `cmd/kueue/main.go` setupRoleTracker: one leader, followers serve
  the webhooks) and the chart's own PodDisruptionBudget (`controllerManager.podDisruptionBudget`,
  `templates/manager/manager-pdb.yaml`, minAvailable 1) so a node drain or upgrade keeps one webhook
  endpoint. The replicas spread over system nodes where there are several (`topologySpreadConstraints`,
  matching the chart's `kueue.selectorLabels`, `templates/_helpers.tpl`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from components.model.config.settings import Settings
from components.model.keys import APP_INSTANCE_LABEL, APP_NAME_LABEL, HOSTNAME_LABEL, NAMESPACE_LABEL

KUEUE_CONFIG = Path(__file__).resolve().parent.parent.parent.parent / "manifests" / "kueue-manager-config.yaml"
KUEUE_CONFIG_VERSION = "0.17.4"  # the chart version whose default configuration KUEUE_CONFIG starts from
INTEGRATIONS = ("jobset.x-k8s.io/jobset", "leaderworkerset.x-k8s.io/leaderworkerset", "pod")
# charts/kueue/templates/_helpers.tpl kueue.selectorLabels (release and chart name: "kueue").
SELECTOR_LABELS = {APP_NAME_LABEL: "kueue", APP_INSTANCE_LABEL: "kueue", "control-plane": "controller-manager"}


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
    if settings.observability.scrapes:
        # the quota series of the dashboard and alert (kueue_cluster_queue_nominal_quota, ..._resource_usage)
        config["metrics"]["enableClusterQueueResources"] = True
    return config


def kueue_chart_values(settings: Settings) -> dict[str, Any]:
    replicas = settings.addons.kueue.replicas
    manager: dict[str, Any] = {
        "replicas": replicas,
        # One replica under a PDB of minAvailable 1 would block every node drain: only with two or more.
        "podDisruptionBudget": {"enabled": replicas >= 2, "minAvailable": 1},
    }
    if replicas >= 2:
        manager["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": HOSTNAME_LABEL,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(SELECTOR_LABELS)},
            }
        ]
    return {
        "controllerManager": manager,
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(settings), sort_keys=False)},
    }
