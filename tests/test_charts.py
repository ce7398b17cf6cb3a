"""The objects inside the add-on and router charts, rendered offline with Helm's engine (components/cli/charts.py).

Rendered once per session from the dev stack's real values: the release-script edits, the objects against the
pinned CRDs and Kubernetes schemas and their CEL rules, the values the chart never reads, what the two Helm SDKs
could render differently, and the facts reviewers could only suspect before (the router's metrics-reader token,
the slice controller's and Kueue's webhooks).
"""

from __future__ import annotations

import collections
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from components.cli import charts
from components.cli.render import redact
from components.model.addons.chart_release import EDITS, published
from tests import conformance, planner_fixtures, schema_checks, upstream
from tests.harness import normalize, ok, run_program
from tests.stack_config import P

SOURCES = "charts"


def objects_of(rendered: dict[str, charts.Rendered], resource: str, kind: str) -> list[dict[str, Any]]:
    return [o for o in rendered[resource].objects if o["kind"] == kind]


# ------------------------------------------------------------------------------------- release-script edits


def test_published_sets_the_release_images_and_versions_and_leaves_its_inputs_alone() -> None:
    values = {"controllerManager": {"manager": {"image": {"repository": "staging/kueue", "tag": "release-0.17"}}}}
    meta = {"name": "kueue", "version": "0.17.4", "appVersion": "v0.17.4"}
    out_values, out_meta = published("kueue", "v0.17.4", values, meta)
    assert out_values["controllerManager"]["manager"]["image"] == {
        "repository": "registry.k8s.io/kueue/kueue",
        "tag": "v0.17.4",
        "pullPolicy": "IfNotPresent",
    }
    assert out_values["kueueViz"]["backend"]["image"]["tag"] == "v0.17.4"
    assert (out_meta["version"], out_meta["appVersion"]) == ("0.17.4", "v0.17.4")
    assert values["controllerManager"]["manager"]["image"]["tag"] == "release-0.17"  # pure
    # LWS and the router keep the tag's `v` in the chart version (their scripts package `--version ${tag}`).
    assert published("lws", "v0.8.0", {}, {"version": "0.1.0"})[1]["version"] == "v0.8.0"
    assert published("jobset", "v0.11.1", {}, {})[1]["version"] == "0.11.1"
    with pytest.raises(KeyError, match="no release edits recorded for chart 'nope'"):
        published("nope", "v1.0.0", {}, {})
    with pytest.raises(ValueError, match="a release tag"):
        published("kueue", "0.17.4", {}, {})


def test_every_chart_the_program_installs_has_its_sources_and_edits(releases: list[charts.Release]) -> None:
    assert sorted(r.chart for r in releases) == sorted(charts.SOURCES)
    assert {kind for kind, _ in charts.SOURCES.values()} == set(EDITS)


def test_the_rendered_images_are_the_released_ones(rendered: dict[str, charts.Rendered]) -> None:
    def images(resource: str) -> dict[str, tuple[str, str]]:
        out = {}
        for deploy in objects_of(rendered, resource, "Deployment"):
            for c in deploy["spec"]["template"]["spec"]["containers"]:
                out[c["name"]] = (c["image"], c.get("imagePullPolicy"))
        return out

    assert images("kueue-chart")["manager"] == ("registry.k8s.io/kueue/kueue:v0.19.2", "IfNotPresent")
    assert images("jobset-chart")["controller"] == ("registry.k8s.io/jobset/jobset:v0.12.0", "IfNotPresent")
    assert images("lws-chart")["manager"] == ("registry.k8s.io/lws/lws:v0.10.0", "IfNotPresent")
    keda = {"keda-operator": "keda", "keda-admission-webhooks": "keda-admission-webhooks"}
    assert images("keda-chart") == {c: (f"ghcr.io/kedacore/{i}:2.20.2", "IfNotPresent") for c, i in keda.items()}
    router = images("serving-router")
    assert router == {"epp": ("ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0", "IfNotPresent")}
    # The latency-predictor images are the one release edit not applied (their tag is not in the git tag): none runs.
    assert not any("latency" in image for image, _ in router.values())


# --------------------------------------------------------------------------------------- the two Helm SDKs


def test_no_template_reads_what_helm_v3_20_and_v4_render_differently() -> None:
    """Capabilities and `lookup` are where the engines differ offline; only templates behind values left off ask."""
    base = upstream.path(SOURCES)
    uses = collections.defaultdict(list)
    for path in sorted(base.rglob("templates/**/*")):
        if path.is_file():
            for action in re.findall(r"\{\{.*?\}\}", path.read_text(), re.S):
                if re.search(r"\.Capabilities|\blookup\b", action):
                    uses[path.relative_to(base).as_posix()].append(action)
    monitors = {"jobset-v0.11.1": "service_monitor.yaml", "jobset-v0.12.0": "monitor.yaml"}
    assert sorted(uses) == sorted(
        [
            *(f"{chart}/templates/prometheus/{name}" for chart, name in monitors.items()),
            "keda-v2.20.2/templates/NOTES.txt",  # the install notes' version warning: text, never an object
            "kueue-v0.19.2/templates/map/manifests.yaml",
        ]
    )
    # Kueue 0.19.2: the MutatingAdmissionPolicy only with its value on (off by default, and the program leaves it).
    assert all(
        a.startswith("{{- if and .Values.enableMutatingAdmissionPolicy")
        for a in uses["kueue-v0.19.2/templates/map/manifests.yaml"]
    )
    values = (base / "kueue-v0.19.2" / "values.yaml").read_text()
    assert re.search(r"^enableMutatingAdmissionPolicy: false$", values, re.M)
    # JobSet: a ServiceMonitor (or a failure without monitoring.coreos.com) only under `prometheus.enable`, off.
    for chart, name in monitors.items():
        text = (base / chart / "templates/prometheus" / name).read_text()
        assert text.index("{{- if .Values.prometheus.enable }}") < text.index(".Capabilities"), chart
        assert re.search(r"^prometheus:\n  # .*\n  enable: false$", (base / chart / "values.yaml").read_text(), re.M), (
            chart
        )


# ------------------------------------------------------------------------------------------- conformance


def test_every_chart_object_validates_strictly_and_passes_the_cel_rules(rendered: dict[str, charts.Rendered]) -> None:
    registry = conformance.require_registry()
    named, unknown = [], set()
    for resource, out in rendered.items():
        for obj in out.objects:
            key = (obj["apiVersion"], obj["kind"])
            if key in registry or schema_checks.builtin_schema(*key) is not None:
                named.append((f"{resource} {obj['kind']}/{obj['metadata'].get('name')}", obj))
            else:
                unknown.add(key)  # a custom kind whose CRD is not pinned
    failures, rejected, _, _ = conformance.check(named, registry)
    assert (failures, rejected) == ({}, {})
    # GKE's own policies (networking.gke.io) have no public CRD to pin; every other kind is checked.
    assert unknown == {("networking.gke.io/v1", "HealthCheckPolicy"), ("networking.gke.io/v1", "GCPBackendPolicy")}
    assert len(named) > 100


# ------------------------------------------------------------------------------------------------ values


def test_no_value_the_program_sets_is_ignored_by_its_chart(releases: list[charts.Release]) -> None:
    upstream.require(SOURCES)
    assert {r.resource: charts.ignored_values(r) for r in releases} == {r.resource: [] for r in releases}


def test_a_value_the_chart_never_reads_is_named(releases: list[charts.Release]) -> None:
    upstream.require(SOURCES)
    kueue = next(r for r in releases if r.resource == "kueue-chart")
    values = charts._with(kueue.values, ("controllerManager",), {**kueue.values["controllerManager"], "replicaz": 3})
    broken = charts.Release(**{**kueue.__dict__, "values": values})
    assert charts.ignored_values(broken) == ["controllerManager.replicaz"]


CONTAINERS = {  # each add-on's chart and the containers its `controllerResources` sets
    "jobset": ("jobset-chart", ("controller",)),
    "kueue": ("kueue-chart", ("manager",)),
    "lws": ("lws-chart", ("manager",)),
    "keda": ("keda-chart", ("keda-operator", "keda-admission-webhooks")),
}


@pytest.mark.parametrize(
    "addons",
    [
        {"keda": {"enabled": True}},
        {
            "jobset": {"controllerResources": {"requests": {"cpu": "1"}}},
            "kueue": {"controllerResources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}},
            "lws": {"controllerResources": {"limits": {"memory": "2Gi"}}},
            "keda": {"enabled": True, "controllerResources": {"requests": {"memory": "200Mi"}}},
        },
    ],
    ids=["defaults", "partial-blocks"],
)
def test_each_controller_renders_the_resources_the_fit_check_counts(addons: dict[str, Any]) -> None:
    """Helm merges a partial `controllerResources` over the chart's own amounts (components/model/addons/
    chart_resources.py): the system-pool fit counts what each chart's Deployment really asks for."""
    upstream.require(SOURCES)
    counted = planner_fixtures.settings({"addons": addons}).system_pool_pods()
    run = ok({f"{P}:addons": addons})
    for addon, (resource, names) in CONTAINERS.items():
        release = next(r for r in charts.releases(run.registrations, redact) if r.resource == resource)
        deployments = [o for o in charts.render_release(release).objects if o["kind"] == "Deployment"]
        containers = {c["name"]: c for d in deployments for c in d["spec"]["template"]["spec"]["containers"]}
        assert len(deployments) == len(names), addon
        for name, resources in ((n, containers[n]["resources"]) for n in names):
            got = {kind: {k: str(v) for k, v in amounts.items()} for kind, amounts in resources.items()}
            assert got == counted[f"addons.{addon}.controllerResources"].manifest(), (addon, name)


def test_helm_hooks_are_left_out_as_the_provider_leaves_them(
    releases: list[charts.Release], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No pinned chart has a hook; one that did must not read as an object the program applies (the provider renders
    with DisableHooks and registers the release manifest alone). Helm's engine stands in for a chart with one."""
    upstream.require(SOURCES)
    meta = "metadata:\n  name: migrate\n  annotations:\n    helm.sh/hook: pre-upgrade\n"
    hook = f"apiVersion: batch/v1\nkind: Job\n{meta}"
    kept = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n"

    class Chart:
        crds: list[dict[str, str]] = []

        def __enter__(self) -> Chart:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def render(self, values: dict[str, Any], **options: Any) -> dict[str, str]:
            return {"c/templates/jobs.yaml": f"{hook}---\n{kept}", "c/templates/NOTES.txt": "notes"}

    monkeypatch.setattr(charts, "helm", lambda: SimpleNamespace(Chart=SimpleNamespace(load_archive=lambda _: Chart())))
    monkeypatch.setattr(charts, "_CACHE", {})
    rendered = charts.render_release(releases[0])
    assert [o["metadata"]["name"] for o in rendered.objects] == ["kept"]


def test_missing_sources_name_the_fetch_command(releases: list[charts.Release], tmp_path: Path) -> None:
    fetch = r"are missing or altered in .*: run `python -m tests.upstream fetch`"
    with pytest.raises(charts.ChartUnavailable, match=fetch):
        charts.render_release(releases[0], root=tmp_path)
    other = charts.Release(**{**releases[0].__dict__, "version": "9.9.9"})
    with pytest.raises(charts.ChartUnavailable, match="has no pinned sources"):
        charts.source_dir(other, tmp_path)


# ------------------------------------------------------------------ what reviewers could only suspect


def test_the_epp_token_secret_waits_for_its_account_and_the_chart_makes_neither(
    rendered: dict[str, charts.Rendered],
) -> None:
    """The chart's `_gke.yaml` created its token Secret beside its ServiceAccount, in parallel (no ordering among a
    chart's objects without `config.kubernetes.io/depends-on`), and the token controller deletes a token Secret
    whose account does not exist yet. The program declares them itself: the Secret after the account."""
    router = rendered["serving-router"].objects
    assert [o for o in router if o["kind"] in ("Secret", "ServiceAccount") and "metrics" in o["metadata"]["name"]] == []
    assert [o for o in router if o["kind"] == "PodMonitoring"] == []
    run = run_program()
    sa = run.get("kubernetes:core/v1:ServiceAccount", "observability-epp-scraper")
    token = run.get("kubernetes:core/v1:Secret", "observability-epp-scraper-token")
    assert sa.urn in token.dependencies
    assert token.plain()["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "epp-metrics-scraper"}


def test_the_epp_scrape_selects_the_rendered_epp_pods(rendered: dict[str, charts.Rendered]) -> None:
    run = run_program()
    pm = run.get("kubernetes:monitoring.googleapis.com/v1:PodMonitoring", "observability-epp").plain()
    (deploy,) = [o for o in rendered["serving-router"].objects if o["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    ports = {p["name"]: p for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    assert pm["spec"]["endpoints"][0]["port"] in ports
    # Auth stays on (the chart's default): the picker wants the bearer token the PodMonitoring sends.
    assert "--metrics-endpoint-auth=false" not in str(pod)


def test_the_router_waits_for_kueues_webhooks(rendered: dict[str, charts.Rendered]) -> None:
    """The picker's pods run in the Kueue-managed namespace, where Kueue's pod webhook fails closed."""
    kueue = rendered["kueue-chart"].objects
    (mutating,) = [o for o in kueue if o["kind"] == "MutatingWebhookConfiguration"]
    pod_hook = next(w for w in mutating["webhooks"] if w["name"].startswith("mpod."))
    assert pod_hook["failurePolicy"] == "Fail"
    workload_namespace = rendered["serving-router"].release.namespace
    assert pod_hook["namespaceSelector"]["matchExpressions"][0]["values"] == [workload_namespace]
    run = run_program()
    router = run.get("kubernetes:helm.sh/v4:Chart", "serving-router")
    assert run.get("kubernetes:helm.sh/v4:Chart", "kueue-chart").urn in router.dependencies


@pytest.mark.parametrize("addon", ["jobset", "kueue", "lws"])
def test_each_controllers_spread_and_budget_select_its_rendered_pods(
    addon: str, rendered: dict[str, charts.Rendered]
) -> None:
    """The spread's and the budget's selectors (components/model/addons/controllers.py, written for the release the
    program installs) are the rendered Deployment's: a renamed release or chart label would spread and protect
    nothing. One budget of minAvailable 1 per controller, the chart's or the program's, below its replicas."""
    (deploy,) = objects_of(rendered, f"{addon}-chart", "Deployment")
    selector, pod = deploy["spec"]["selector"]["matchLabels"], deploy["spec"]["template"]
    assert deploy["spec"]["replicas"] == 2
    spec = pod["spec"]
    if "topologySpreadConstraints" in spec:
        (term,) = spec["topologySpreadConstraints"]
        assert term["whenUnsatisfiable"] == "ScheduleAnyway"
    else:
        (preferred,) = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        term = preferred["podAffinityTerm"]
    assert (term["topologyKey"], term["labelSelector"]["matchLabels"]) == ("kubernetes.io/hostname", selector)
    run = run_program()
    own = [normalize(b.plain()) for b in run.of_type("kubernetes:policy/v1:PodDisruptionBudget")]
    budgets = objects_of(rendered, f"{addon}-chart", "PodDisruptionBudget") + [
        b for b in own if b["metadata"]["namespace"] == deploy["metadata"]["namespace"]
    ]
    (budget,) = budgets
    assert budget["spec"]["minAvailable"] == 1 < deploy["spec"]["replicas"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()


def test_the_picker_keeps_the_right_to_check_scrape_tokens(
    releases: list[charts.Release], rendered: dict[str, charts.Rendered]
) -> None:
    """The chart grants the picker TokenReview and SubjectAccessReview only with its monitoring block, which stays off:
    the program's ClusterRole has the chart's rules and binds them to the account the rendered Deployment runs as."""
    router = next(r for r in releases if r.resource == "serving-router")
    values = charts._with(router.values, ("router", "monitoring"), {"prometheus": {"enabled": True}})
    with_monitoring = charts.render_release(charts.Release(**{**router.__dict__, "values": values}))
    chart_role = next(
        o for o in with_monitoring.objects if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-epp")
    )
    assert not any(o["kind"] == "ClusterRole" for o in rendered["serving-router"].objects)
    run = run_program()
    role = run.get("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "observability-epp-auth").plain()
    assert role["rules"] == chart_role["rules"]
    binding = run.get("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "observability-epp-auth").plain()
    (deploy,) = [o for o in rendered["serving-router"].objects if o["kind"] == "Deployment"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": deploy["spec"]["template"]["spec"]["serviceAccountName"],
            "namespace": router.namespace,
        }
    ]


SEPARATOR_CASES = [
    "a: 1\n---\nb: 2\n",
    "---\na: 1\n---   \n\n---\nb: 2",  # a separator at the start, an empty document, blanks after `---`
    "a: |+\n  kept\n\n  \n---\nb: 2\n",  # blank lines a kept block scalar would take: Helm's split strips them
    "a: 1  \t\n   \n---apiVersion: v1\n",  # `---` glued to the next object, as the router chart's routerlib emits
    "  ---\na: 1\n",  # an indented `---` is no separator
    "a: 1\n---\n---\nb: 2\n",  # a `---` right after a separator's own blanks
]


def test_the_linear_split_is_helms(rendered: dict[str, charts.Rendered]) -> None:
    """`split_manifest` splits exactly where Helm's pattern does, into the same parts, on every rendered template
    of every chart and on the cases that tell the two patterns' whitespace apart."""
    texts = [text for r in rendered.values() for text in r.templates.values()] + SEPARATOR_CASES
    assert len(texts) > 100
    for text in texts:
        assert charts.split_manifest(text) == charts.HELM_SEPARATOR.split(text), text[:200]
