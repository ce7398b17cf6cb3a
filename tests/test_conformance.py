"""Conformance: every Kubernetes object the program declares validates strictly against its pinned schema.

Objects are collected from mock runs of the real program (the dev stack with and without an HF
token, and with the demos and serving switched off): custom resources against the upstream CRDs,
built-in kinds against Kubernetes 1.36. Values given to charts are checked against the pinned
charts' values.yaml; manifests fetched by URL must be pinned.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cli import charts
from components.cli.render import redact
from tests import conformance, upstream
from tests.harness import Registration, Run, normalize, ok, run_program
from tests.stack_config import FIXED_SERVING, P, merge


def kubernetes_objects(run: Run) -> list[tuple[Registration, dict[str, Any]]]:
    """Every object the program sends to the API server as is (not the remote components)."""
    return [(r, normalize(r.plain())) for r in run.registrations if r.custom and r.type.startswith("kubernetes:")]


RUNS = {
    "dev": ({}, {}),
    "dev+hfToken": ({}, {f"{P}:hfToken": "hf_conformance"}),
    # The download Job, its namespace, account and token Secret.
    "dev+weightsDownload": (
        {f"{P}:serving": {"weightsDownload": {"enabled": True}}},
        {f"{P}:hfToken": "hf_conformance"},
    ),
    "capacity only": (
        {
            f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
            f"{P}:serving": {"enabled": False},
        },
        {},
    ),
    # Serving fills the one cube: its LWS roll delete-first and wait for the groups of the new set.
    "serving fills the reservation": (
        merge(
            FIXED_SERVING,
            {
                f"{P}:tpu": {"cubes": 1},
                f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
                f"{P}:serving": {"terminationGracePeriodSeconds": 600},
            },
        ),
        {},
    ),
    # Slots of other shapes than dev's, one role's larger than a cube's eighth.
    "other shapes": (
        {
            f"{P}:tpu": {"cubes": 4, "cubeTopology": "4x4x4"},
            f"{P}:demos": {"subslicing": {"topology": "2x2x4", "replicas": 3}, "superslicing": {"topology": "4x8x8"}},
            f"{P}:serving": {
                "prefill": {"topology": "2x2x1", "replicas": 2, "autoscaling": {"maxGroups": 4}},
                "decode": {"topology": "2x4x4", "replicas": 1, "autoscaling": {"maxGroups": 2}},
            },
        },
        {},
    ),
}


@pytest.fixture(scope="module", params=list(RUNS), ids=list(RUNS))
def run(request: pytest.FixtureRequest) -> Run:
    overrides, secrets = RUNS[request.param]
    return ok(overrides, secrets=secrets)


# Rules of the pinned CRDs this evaluator cannot run, by rule text -> why that is acceptable. Empty: every rule
# the program's objects reach is evaluated. A new one fails the test below until it is listed here with a reason.
UNEVALUATED: dict[str, str] = {}


def with_chart_crds(run: Run, directory: Path) -> conformance.SchemaRegistry:
    """The pinned CRDs and those the run's charts install (KEDA's, as Helm's engine renders its chart)."""
    base = upstream.require("charts", *conformance.CRD_DIRS)  # before rendering: skips, or fails in CI, when missing
    crds = [
        o
        for release in charts.releases(run.registrations, redact)
        if release.resource == "keda-chart"
        for o in charts.render_release(release).objects
        if o["kind"] == "CustomResourceDefinition"
    ]
    (directory / "charts.yaml").write_text(yaml.safe_dump_all(crds))
    return conformance.SchemaRegistry(*conformance.crd_dirs(base), directory)


def test_every_kubernetes_object_validates_strictly_and_passes_the_crd_cel_rules(run: Run, tmp_path: Path) -> None:
    """Strictly against its schema; a custom object also through its CRD's x-kubernetes-validations, which
    kube-apiserver evaluates on create."""
    objects = kubernetes_objects(run)
    named = [(f"{obj['apiVersion']}/{obj['kind']} {reg.name}", obj) for reg, obj in objects]
    failures, rejected, unevaluated, passed = conformance.check(named, with_chart_crds(run, tmp_path))
    assert (failures, rejected) == ({}, {})
    assert sorted(unevaluated) == sorted(UNEVALUATED), f"rules not evaluated: {unevaluated}"
    # Not vacuous: every kind the program declares was among them, and the kinds whose CRDs carry rules had them.
    kinds = {(obj["apiVersion"], obj["kind"]) for _, obj in objects}
    assert ("v1", "Namespace") in kinds and ("kueue.x-k8s.io/v1beta2", "Topology") in kinds
    assert {"Topology", "ClusterQueue", "ResourceFlavor"} <= passed
    if ("keda.sh/v1alpha1", "ScaledObject") in kinds:  # the burst slots' (its CRD's one rule ran and held)
        assert "ScaledObject" in passed


def test_the_dev_stack_declares_every_expected_kind() -> None:
    run = run_program(secrets={f"{P}:hfToken": "hf_conformance"})
    kinds = sorted({f"{obj['apiVersion']}/{obj['kind']}" for _, obj in kubernetes_objects(run)})
    assert kinds == [
        "gateway.networking.k8s.io/v1/Gateway",
        "jobset.x-k8s.io/v1alpha2/JobSet",
        "keda.sh/v1alpha1/ScaledObject",
        "keda.sh/v1alpha1/TriggerAuthentication",
        "kueue.x-k8s.io/v1beta2/AdmissionCheck",
        "kueue.x-k8s.io/v1beta2/ClusterQueue",
        "kueue.x-k8s.io/v1beta2/LocalQueue",
        "kueue.x-k8s.io/v1beta2/ResourceFlavor",
        "kueue.x-k8s.io/v1beta2/Topology",
        "kueue.x-k8s.io/v1beta2/WorkloadPriorityClass",
        "leaderworkerset.x-k8s.io/v1/LeaderWorkerSet",
        "monitoring.googleapis.com/v1/PodMonitoring",
        "networking.k8s.io/v1/NetworkPolicy",
        "policy/v1/PodDisruptionBudget",
        "rbac.authorization.k8s.io/v1/ClusterRole",
        "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
        "rbac.authorization.k8s.io/v1/Role",
        "rbac.authorization.k8s.io/v1/RoleBinding",
        "v1/Namespace",
        "v1/Secret",
        "v1/ServiceAccount",
    ]


def test_a_broken_object_would_be_caught(dev: Run) -> None:
    """The check above can fail: the same validator rejects a typo in a real program object."""
    registry = conformance.require_registry()
    lws = next(obj for _, obj in kubernetes_objects(dev) if obj["kind"] == "LeaderWorkerSet")
    lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    assert any("imagePullPolicyy" in e for e in conformance.validate(lws, registry))


def chart_defaults(charts: Path, chart_url: str, version: str) -> dict[str, Any]:
    name = chart_url.rstrip("/").rsplit("/", 1)[-1]
    for chart_yaml in charts.glob("*/Chart.yaml"):
        meta = yaml.safe_load(chart_yaml.read_text())
        versions = {str(meta.get("version", "")), str(meta.get("appVersion", "")).removeprefix("v")}
        if meta.get("name") == name and version in versions:
            return yaml.safe_load((chart_yaml.parent / "values.yaml").read_text()) or {}
    raise AssertionError(f"no pinned values.yaml for {name} {version} under {charts}")


def unknown_keys(values: Any, defaults: Any, path: str = "") -> list[str]:
    """Keys set in `values` that the chart's values.yaml does not have (free-form maps excepted)."""
    if not isinstance(values, dict):
        return []
    if not isinstance(defaults, dict):
        return [path or "."]
    if not defaults:  # `{}` in values.yaml: a free-form map (nodeSelector, podAnnotations, ...)
        return []
    out = []
    for key, value in values.items():
        sub = f"{path}.{key}" if path else key
        if key not in defaults:
            out.append(sub)
        else:
            out += unknown_keys(value, defaults[key], sub)
    return out


def test_chart_values_are_keys_of_the_pinned_charts(dev: Run) -> None:
    charts = upstream.require("charts") / "charts"
    checked = 0
    for reg in dev.of_type("kubernetes:helm.sh/v4:Chart"):
        if "oci://registry.k8s.io/" not in reg.inputs["chart"]:
            continue  # the llm-d router chart: every value read by its source, tests/test_charts.py (no values file)
        defaults = chart_defaults(charts, reg.inputs["chart"], reg.inputs["version"])
        assert unknown_keys(normalize(reg.plain("values")), defaults) == [], reg.name
        checked += 1
    assert checked == 3


def test_unknown_chart_keys_would_be_caught() -> None:
    charts = upstream.require("charts") / "charts"
    defaults = chart_defaults(charts, "oci://registry.k8s.io/kueue/charts/kueue", "0.17.4")
    assert unknown_keys({"controllerManager": {"manager": {"resourcez": {}}}}, defaults) == [
        "controllerManager.manager.resourcez"
    ]
    assert unknown_keys({"controllerManager": {"nodeSelector": {"any": "label"}}}, defaults) == []


def test_manifests_fetched_by_url_are_pinned(dev: Run) -> None:
    config_file = dev.get("kubernetes:yaml/v2:ConfigFile", "slice-controller-manifest").inputs["file"]
    assert re.search(r"/raw/[0-9a-f]{40}/kueue-slice-controller-v0\.8\.0-200\.yaml$", config_file)
    # The inference extension's CRDs are vendored: no URL, the objects themselves (tests/test_vendored.py).
    assert set(dev.get("kubernetes:yaml/v2:ConfigGroup", "inference-extension-crds").inputs) == {"objs"}
