"""The change preview inside the charts (components/cli/chart_diff.py): each object by its own kind's rules."""

from __future__ import annotations

import collections
import io
import json

import pytest

from components.cli import chart_diff, charts, diff
from components.cli.render import redact
from components.model.diff import engine
from tests import upstream
from tests.harness import ok
from tests.preview import changed_objects, run
from tests.stack_config import set_arguments


def preview(*changes: str) -> tuple[dict[str, engine.Change], str]:
    changed, notes = changed_objects(*changes)
    # By name: none of the objects these tests look at shares its name with another kind's.
    return {c.name: c for c in changed}, notes


def test_type_tokens_and_child_names_follow_the_provider() -> None:
    assert chart_diff.type_token("v1", "ConfigMap") == "kubernetes:core/v1:ConfigMap"
    assert chart_diff.type_token("apps/v1", "Deployment") == "kubernetes:apps/v1:Deployment"
    obj = {"metadata": {"name": "cm", "namespace": "ns"}}
    assert chart_diff.child_name("router", obj) == "router:ns/cm"
    assert chart_diff.child_name("router", {"metadata": {"name": "role"}}) == "router:role"


def test_the_pickers_config_change_replaces_its_configmap() -> None:
    """The audit's first case: the chart's ConfigMap is replaced (delete first: same name) when its data changes."""
    changes, notes = preview("serving.router.peakPrefillThroughput=20000")
    assert notes == ""
    cm = changes["serving-router:llm-d-pd-disaggregation/pd-disaggregation-epp"]
    assert (cm.action, cm.delete_first, cm.properties) == ("replace", True, ['data["pd-config.yaml"]'])
    assert changes["serving-router"].action == "update"
    assert "compared one by one" in changes["serving-router"].reason
    # Beside it, what divides the backlog by the throughput: the prefill burst slots' queries and the dashboard.
    assert sorted(changes) == [
        "burst-prefill-1-scaler",
        "burst-prefill-2-scaler",
        "observability-dashboard",
        "serving-router",
        "serving-router:llm-d-pd-disaggregation/pd-disaggregation-epp",
    ]


def test_the_scrape_interval_no_longer_changes_a_chart_object() -> None:
    """The audit's second case: the router chart's own PodMonitoring followed the interval; now the program's does."""
    changes, _ = preview("observability.scrapeInterval=60s")
    assert not any(name.startswith("serving-router") for name in changes)
    assert changes["observability-epp"].properties == ["spec.endpoints[0].interval"]


def test_a_replica_change_updates_the_kueue_deployment_in_place() -> None:
    changes, _ = preview("addons.kueue.replicas=3")
    dep = changes["kueue-chart:kueue-system/kueue-controller-manager"]
    assert (dep.action, dep.properties) == ("update", ["spec.replicas"])


def test_without_the_sources_the_preview_says_what_to_run(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """No chart renders at all (a clone without the sources): a chart whose inputs change is `unknown`, the command
    names what to run and exits 3; an unchanged chart is not in question."""
    monkeypatch.setattr(chart_diff.charts, "upstream_root", lambda: tmp_path)
    # and nothing in the cache the offline commands fetch into, and no network to fetch with (tests/conftest.py)
    monkeypatch.delenv(chart_diff.charts.upstream_files.ROOT_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out, err = io.StringIO(), io.StringIO()
    code = diff.main(
        ["--stack", "dev", *set_arguments("dev"), "--change", "addons.kueue.replicas=3", "--json"], out, err
    )
    assert code == 3
    assert "note: objects inside the chart not compared (the chart is shown as unknown): kueue-chart:" in err.getvalue()
    assert "python -m tests.upstream fetch" in err.getvalue() and "the preview is incomplete" in err.getvalue()
    changes = {c["name"]: c for c in json.loads(out.getvalue())["changes"] if c["action"] != "same"}
    assert list(changes) == ["kueue-chart"] and changes["kueue-chart"]["action"] == "unknown"
    assert changes["kueue-chart"]["reason"].startswith("update; its objects could not be rendered here: kueue-chart:")
    # Nothing about the charts the change leaves alone.
    assert "jobset-chart" not in err.getvalue() and "lws-chart" not in err.getvalue()


def test_every_kind_inside_the_charts_is_in_the_model() -> None:
    """As for the program's own types (tests/test_diff_engine.py): no chart object is decided as an unknown type."""
    upstream.require("charts")
    types = {
        chart_diff.type_token(o["apiVersion"], o["kind"])
        for r in charts.releases(ok().registrations, redact)
        for o in charts.render_release(r).objects
    }
    assert sorted(t for t in types if engine.facts_of(t) is None) == []
    assert "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition" in types


@pytest.mark.parametrize(
    ("addon", "version"), [("jobset", "0.11.0"), ("kueue", "0.17.5"), ("lws", "0.9.0")], ids=["jobset", "kueue", "lws"]
)
def test_a_version_without_sources_shows_every_old_object_unknown_and_exits_3(addon: str, version: str) -> None:
    """Issue: such a version lost the chart's objects from both sides, so the preview said `1 update, 188 same` and
    exited 0. Every object the running version has is listed as unknown, none counted as same, and the exit is 3."""
    upstream.require("charts")
    chart = f"{addon}-chart"
    code, out, err = run("dev", "--change", f"addons.{addon}.version={version}", "--json")
    assert code == 3 and "the preview is incomplete" in err
    assert f"{chart}: chart oci://registry.k8s.io/{addon}/charts/{addon} {version} has no pinned sources" in err
    result = json.loads(out)
    mine = {(c["name"], c["type"]): c["action"] for c in result["changes"] if c["name"].startswith(f"{chart}:")}
    old = charts.render_release(next(r for r in charts.releases(ok().registrations, redact) if r.resource == chart))
    assert mine == {
        (chart_diff.child_name(chart, o), chart_diff.type_token(o["apiVersion"], o["kind"])): "unknown"
        for o in old.objects
    }
    assert result["totals"]["unknown"] == len(old.objects) > 5
    assert {c["action"] for c in result["changes"] if c["name"] == chart} == {"update"}


def test_jobset_0_12_shows_its_renamed_and_split_rbac_object_by_object() -> None:
    """The true answer for `addons.jobset.version=0.12.0` (its chart renames and splits its RBAC objects): 10 objects
    created, 2 deleted, 11 updated (the issue's 10, with one replica, and the chart's PodDisruptionBudget the program
    now turns on), besides the chart's own update; nothing unknown."""
    changed, notes = changed_objects("addons.jobset.version=0.12.0", sets=("addons.jobset.version=0.11.1",))
    assert notes == ""
    changes = {(c.name, c.type.rsplit(":", 1)[-1]): c.action for c in changed}
    actions = collections.Counter(a for (n, _), a in changes.items() if n.startswith("jobset-chart:"))
    assert actions == {"update": 11, "create": 10, "delete": 2}
    assert changes["jobset-chart:jobset-system/jobset-controller-pdb", "PodDisruptionBudget"] == "update"
    controller = "jobset-chart:jobset-system/jobset-controller"
    assert sorted(k for k, a in changes.items() if a == "delete") == [(controller, "Role"), (controller, "RoleBinding")]
    assert ("jobset-chart:jobset-system/jobset-leader-election-role", "Role") in changes
    assert changes["jobset-chart", "Chart"] == "update"


def test_moving_kueues_namespace_is_refused_for_the_webhook_configurations_it_keeps() -> None:
    """The chart puts its release namespace on its two cluster-scoped webhook configurations: their child names
    change while the object stays the one the cluster holds, so creating them under the new names fails (the
    provider creates client-side); the namespaced objects move with the namespace and are created and deleted."""
    changes, _ = preview("addons.kueue.namespace=kueue-sys")
    webhooks = {n: c for n, c in changes.items() if "WebhookConfiguration" in c.type}
    created = {n.split(":", 1)[1] for n, c in webhooks.items() if c.action == "rejected"}
    assert created == {
        "kueue-sys/kueue-validating-webhook-configuration",
        "kueue-sys/kueue-mutating-webhook-configuration",
    }
    assert all("AlreadyExists" in c.reason for c in webhooks.values() if c.action == "rejected")
    assert {c.action for n, c in webhooks.items() if n.split(":", 1)[1].startswith("kueue-system/")} == {"delete"}
    deployments = {c.action for n, c in changes.items() if n.endswith("/kueue-controller-manager")}
    assert deployments == {"create", "delete"}
