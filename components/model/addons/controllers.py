"""How each add-on controller keeps a webhook endpoint through a node drain: replicas, a PodDisruptionBudget and a
spread over the system nodes, through each chart's own values where it has them (pure data).

Every controller here serves fail-closed webhooks (Kueue's on pods and jobs in the queued namespace, JobSet's on
JobSets and their pods, LWS's on LeaderWorkerSets and their pods): while no replica serves, the API server refuses
what they cover, so a single pod being rescheduled (system-pool upgrade, repair, drain) stops every queued workload
from restarting. Each runs with leader election on by default, so extra replicas are followers that serve the
webhooks: Kueue (`leaderElection.leaderElect: true` in its configuration, cmd/kueue/main.go), JobSet
(charts/jobset/values.yaml `controller.leaderElection.enable: true` at v0.11.1 and v0.12.0), LWS (the chart's
manager ConfigMap, `leaderElection.leaderElect: true`, templates/manager/configmap.yaml at v0.8.0 and v0.10.0).
Their webhook certificates are made by open-policy-agent/cert-controller v0.16.0 in every replica
(`RequireLeaderElection` unset: jobset pkg/util/cert/cert.go:50-74 at v0.12.0, lws pkg/cert/cert.go:40-49 at
v0.8.0 and v0.10.0); the rotator writes the shared Secret only when the certificate there is missing or invalid
(cert-controller v0.16.0 pkg/rotator/rotator.go:280-330), so a second replica serves the first one's certificate.

The budget is `minAvailable: 1`, and only with two or more replicas (one replica under it would block every drain).
The spread is soft (`ScheduleAnyway`, or a preferred anti-affinity where the chart has no spread value): with one
system node both replicas still run. Each selector is the chart's pod selector for the release the program
installs (the release is named after the add-on); tests/test_charts.py checks it against the rendered Deployment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.model.keys import APP_INSTANCE_LABEL, APP_NAME_LABEL, HOSTNAME_LABEL

APP_COMPONENT_LABEL = "app.kubernetes.io/component"
CONTROL_PLANE_LABEL = "control-plane"
MIN_AVAILABLE = 1


@dataclass(frozen=True)
class ControllerChart:
    """Where one add-on's chart takes the replicas, its PodDisruptionBudget and a spread, and its pods' selector."""

    replicas: tuple[str, ...]  # values path of the replica count
    budget: tuple[str, ...] | None  # values path of the chart's own PodDisruptionBudget block; None: the program's
    spread: tuple[str, ...]  # values path of the spread
    spread_kind: str  # "topologySpreadConstraints" (the chart has that value) or "affinity" (only affinity)
    selector: dict[str, str]  # the chart's pod selector labels for release <add-on>
    source: str


CONTROLLERS: dict[str, ControllerChart] = {
    "kueue": ControllerChart(
        replicas=("controllerManager", "replicas"),
        budget=("controllerManager", "podDisruptionBudget"),
        spread=("controllerManager", "topologySpreadConstraints"),
        spread_kind="topologySpreadConstraints",
        selector={APP_NAME_LABEL: "kueue", APP_INSTANCE_LABEL: "kueue", CONTROL_PLANE_LABEL: "controller-manager"},
        source="kubernetes-sigs/kueue charts/kueue values.yaml controllerManager.*, "
        "templates/manager/manager-pdb.yaml, templates/_helpers.tpl kueue.selectorLabels (v0.17.4, v0.19.2)",
    ),
    "jobset": ControllerChart(
        replicas=("controller", "replicas"),
        budget=("controller", "podDisruptionBudget"),
        spread=("controller", "affinity"),
        spread_kind="affinity",
        selector={APP_NAME_LABEL: "jobset", APP_INSTANCE_LABEL: "jobset", APP_COMPONENT_LABEL: "controller"},
        source="kubernetes-sigs/jobset charts/jobset values.yaml controller.{replicas,podDisruptionBudget,affinity}, "
        "templates/controller/pod_disruption_budget.yaml, templates/controller/_helpers.tpl "
        "jobset.controller.selectorLabels (v0.11.1, v0.12.0; no topologySpreadConstraints value)",
    ),
    "lws": ControllerChart(
        replicas=("replicaCount",),
        budget=None,
        spread=("affinity",),
        spread_kind="affinity",
        selector={CONTROL_PLANE_LABEL: "controller-manager", APP_NAME_LABEL: "lws", APP_INSTANCE_LABEL: "lws"},
        source="kubernetes-sigs/lws charts/lws values.yaml replicaCount, affinity; templates/manager/deployment.yaml "
        "selector (v0.8.0, v0.10.0; no PodDisruptionBudget template, no topologySpreadConstraints value)",
    ),
}


def nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} from ("a", "b")."""
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return out


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra` over it, maps merged key by key (as Helm coalesces values)."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def spread(selector: Mapping[str, str], kind: str) -> Any:
    """The soft spread over nodes of the pods `selector` picks, as `kind` ("topologySpreadConstraints" or
    "affinity") takes it."""
    label_selector = {"matchLabels": dict(selector)}
    if kind == "topologySpreadConstraints":
        return [
            {
                "maxSkew": 1,
                "topologyKey": HOSTNAME_LABEL,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": label_selector,
            }
        ]
    term = {"topologyKey": HOSTNAME_LABEL, "labelSelector": label_selector}
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
        }
    }


def ha_values(addon: str, replicas: int) -> dict[str, Any]:
    """The chart values for `replicas` replicas: the count, the chart's budget (on only with two or more) and the
    spread (only with two or more)."""
    c = CONTROLLERS[addon]
    values = nested(c.replicas, replicas)
    if c.budget is not None:
        values = deep_merge(values, nested(c.budget, {"enabled": replicas >= 2, "minAvailable": MIN_AVAILABLE}))
    if replicas >= 2:
        values = deep_merge(values, nested(c.spread, spread(c.selector, c.spread_kind)))
    return values


def budget_spec(selector: Mapping[str, str]) -> dict[str, Any]:
    """The spec of a PodDisruptionBudget that keeps one of the pods `selector` picks through a drain."""
    return {"minAvailable": MIN_AVAILABLE, "selector": {"matchLabels": dict(selector)}}


def disruption_budget(addon: str, replicas: int) -> dict[str, Any] | None:
    """The spec of the PodDisruptionBudget the program declares for a chart that has none, or None: the chart has
    its own, or one replica, which a budget of one would make undrainable."""
    c = CONTROLLERS[addon]
    return budget_spec(c.selector) if c.budget is None and replicas >= 2 else None
