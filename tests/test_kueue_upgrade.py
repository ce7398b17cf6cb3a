"""The Kueue part of the add-on upgrade: `addons.kueue.version` 0.17.4 -> 0.19.2 (the previous tested set's to the
newest's, components/model/addons/tested_sets.py), from the rendered charts.

What the preview shows (every object of the chart updated in place: CRDs, webhooks, RBAC, the Deployment; nothing
replaced, created or deleted) and which chart defaults the program's manager configuration keeps across the move.
That the program's objects pass each set's own CRDs is tests/test_tested_sets.py's.
"""

from __future__ import annotations

import pytest
import yaml

from components.cli import charts, diff
from components.cli.render import redact
from tests import upstream
from tests.harness import Run, ok
from tests.preview import changed_objects
from tests.stack_config import P

OLD, NEW = "0.17.4", "0.19.2"


def kueue_rendered(run: Run) -> charts.Rendered:
    """The objects of the run's Kueue chart, rendered from the pinned chart sources."""
    return charts.render_release(
        next(r for r in charts.releases(run.registrations, redact) if r.resource == "kueue-chart")
    )


@pytest.fixture(scope="module")
def upgraded() -> dict[tuple[str, str], diff.engine.Change]:
    """(kind, name) -> change: two kinds of a chart may share a name (the manager's Deployment and account)."""
    changed, notes = changed_objects(f"addons.kueue.version={NEW}", sets=(f"addons.kueue.version={OLD}",))
    assert notes == ""
    return {(c.type.rsplit(":", 1)[-1], c.name): c for c in changed}


def test_every_kueue_object_updates_in_place_and_nothing_else_moves(
    upgraded: dict[tuple[str, str], diff.engine.Change],
) -> None:
    assert {c.action for c in upgraded.values()} == {"update"}
    assert all(name == "kueue-chart" or name.startswith("kueue-chart:") for _, name in upgraded)
    kinds = {kind for kind, _ in upgraded}
    assert {"CustomResourceDefinition", "MutatingWebhookConfiguration", "ClusterRole", "Deployment"} <= kinds
    image = upgraded["Deployment", "kueue-chart:kueue-system/kueue-controller-manager"]
    assert "spec.template.spec.containers[0].image" in image.properties
    # 0.19.2 adds fields to the Workload CRD (spec.podSets[].template.spec.workloadRef, schedulingGroup).
    workloads = upgraded["CustomResourceDefinition", "kueue-chart:workloads.kueue.x-k8s.io"].properties
    assert any(p.endswith("properties.workloadRef") for p in workloads)


def test_the_upgrade_scopes_two_webhooks_0_17_4_left_cluster_wide(
    upgraded: dict[tuple[str, str], diff.engine.Change],
) -> None:
    """0.17.4's chart gives the SparkApplication and TrainJob webhooks no namespace selector (harmless here: no such
    CRDs are installed, so nothing matches them); 0.19.2 gives them the managed-jobs selector like the others."""
    hooks = upgraded[
        "MutatingWebhookConfiguration", "kueue-chart:kueue-system/kueue-mutating-webhook-configuration"
    ].properties
    assert [p for p in hooks if p.startswith("webhooks")] == [
        "webhooks[15].namespaceSelector",
        "webhooks[18].namespaceSelector",
    ]
    previous = ok({f"{P}:addons": {"kueue": {"version": OLD}}})
    (old,) = [o for o in kueue_rendered(previous).objects if o["kind"] == "MutatingWebhookConfiguration"]
    assert {old["webhooks"][i]["name"] for i in (15, 18)} == {"msparkapplication.kb.io", "mtrainjob.kb.io"}
    assert all("namespaceSelector" not in old["webhooks"][i] for i in (15, 18))


def test_the_manager_configuration_keys_the_upgrade_changes() -> None:
    """The chart defaults the program's manifest (0.17.4's) would keep: what moving the default has to decide."""
    base = upstream.path("charts")

    def config(tag: str) -> dict:
        values = yaml.safe_load((base / f"kueue-{tag}/values.yaml").read_text())
        return yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])

    old, new = config("v0.17.4"), config("v0.19.2")
    changed = sorted(
        f"{section}.{key}"
        for section in ("controller", "clientConnection")
        for key in set(old[section]) | set(new[section])
        if old[section].get(key) != new[section].get(key)
    )
    assert changed == ["clientConnection.burst", "clientConnection.qps", "controller.groupKindConcurrency"]
    assert (old["clientConnection"], new["clientConnection"]) == ({"qps": 50, "burst": 100}, {"qps": 300, "burst": 500})
