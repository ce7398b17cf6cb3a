"""The slice controller's webhooks, scoped by the program to the namespaces its queued workloads run in, and the
feature gates it turns on in the controller's manager.

The manifest is a URL the provider fetches at `up`, so nothing offline renders it: the tests run the program's
transforms (components/addons.py) on objects shaped exactly as the controller's source builds them, AI-Hypercomputer/xpk
`slice/` at 250d4b3c: config/webhook/manifests.yaml:1-82 (the four webhooks), named and namespaced by
config/default/kustomization.yaml:2-15 (namespace `slice-controller-system`, prefix `slice-controller-`, the
`control-plane` label) and webhook/kustomizeconfig.yaml:3-22 (the service's name and namespace), the form the
release manifest of that tree has (slice/manifests.yaml:646-673 for its JobSet webhook); the Deployment as
config/manager/manager.yaml renders it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockMonitor

from components import addons
from components.model.addons import slice_controller as sc
from components.model.addons.slice_controller import WEBHOOK_CONFIGURATIONS, with_namespace_scope
from components.model.keys import NAMESPACE_LABEL
from tests.graph_queries import label_selector_matches as selects
from tests.harness import JOBSET, LWS, PROJECT, Run, assert_rejected, ok
from tests.stack_config import CODELAB_MIX

MUTATING = "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration"
VALIDATING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
CONFIG_FILE = ("kubernetes:yaml/v2:ConfigFile", "slice-controller-manifest")
# config/webhook/manifests.yaml at 250d4b3c (lines 7-25, 26-44, 45-63, 64-82): name, path, group, version, resource.
SOURCE_WEBHOOKS = (
    ("mjob.kb.io", "/mutate-batch-v1-job", "batch", "v1", "jobs"),
    ("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset", "jobset.x-k8s.io", "v1alpha2", "jobsets"),
    ("mleaderworkerset.kb.io", "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset", "leaderworkerset.x-k8s.io",
     "v1", "leaderworkersets"),
    ("mstatefulset.slice-controller.kb.io", "/mutate-apps-v1-statefulset", "apps", "v1", "statefulsets"),
)  # fmt: skip


def source_configuration(kind: str = "MutatingWebhookConfiguration") -> dict[str, Any]:
    """The controller's webhook configuration as its kustomization renders it (module docstring)."""
    service = {"name": "slice-controller-webhook-service", "namespace": "slice-controller-system"}
    webhooks = [
        {
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {**service, "path": path}},
            "failurePolicy": "Fail",
            "name": name,
            "rules": [
                {"apiGroups": [group], "apiVersions": [version], "operations": ["CREATE"], "resources": [plural]}
            ],
            "sideEffects": "None",
        }
        for name, path, group, version, plural in SOURCE_WEBHOOKS
    ]
    name = "slice-controller-" + kind.removesuffix("WebhookConfiguration").lower() + "-webhook-configuration"
    metadata = {"labels": {"control-plane": "controller-manager"}, "name": name}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": metadata, "webhooks": webhooks}


# config/manager/manager.yaml:20-23, :29-31 with the kustomization's label on selectors (kustomization.yaml:12-15).
POD_LABELS = {"control-plane": "controller-manager", "app.kubernetes.io/name": "slice-controller"}


def controller_deployment(args: list[str]) -> dict[str, Any]:
    """The controller's Deployment (config/manager/manager.yaml:10-31, :60-70; namespace from the kustomization)."""
    container = {"name": "manager", "command": ["/manager"], "args": args}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "slice-controller-controller-manager", "namespace": "slice-controller-system"},
        "spec": {
            "selector": {"matchLabels": dict(POD_LABELS)},
            "replicas": 1,
            "template": {"metadata": {"labels": dict(POD_LABELS)}, "spec": {"containers": [container]}},
        },
    }


def apply(transforms: list[pulumi.ResourceTransform], type_: str, props: dict[str, Any]) -> dict[str, Any]:
    """The props the engine registers after each transform in turn (None from one = unchanged)."""
    opts = pulumi.ResourceOptions()
    for transform in transforms:
        result = transform(pulumi.ResourceTransformArgs(True, type_, "child", props, opts))
        if result is not None:
            assert result.opts is opts
            props = result.props
    return props


def in_namespace(namespace: str) -> dict[str, str]:
    return {NAMESPACE_LABEL: namespace}  # the labels the API server sets on every namespace


@dataclass
class Captured:
    """The transforms the program hands the slice controller's ConfigFile, and how many its registration carries."""

    transforms: list[pulumi.ResourceTransform] = field(default_factory=list)
    registered: int | None = None

    def program(self, overrides: dict[str, Any] | None = None) -> Run:
        run = ok(overrides)
        assert self.registered == len(self.transforms) >= 1  # the engine gets them as callbacks
        return run


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Captured]:
    captured = Captured()
    original_builder = addons.slice_controller_transforms
    original_register = MockMonitor.RegisterResource

    def builder(*args: Any) -> list[pulumi.ResourceTransform]:
        captured.transforms = original_builder(*args)
        return captured.transforms

    def register(monitor: MockMonitor, request: Any) -> Any:
        if (request.type, request.name) == CONFIG_FILE:
            captured.registered = len(request.transforms)
        return original_register(monitor, request)

    monkeypatch.setattr(addons, "slice_controller_transforms", builder)
    monkeypatch.setattr(MockMonitor, "RegisterResource", register)
    yield captured


def test_every_webhook_of_the_manifest_is_scoped_to_the_queued_namespace(capture: Captured) -> None:
    run = capture.program()
    namespace = run.get("kubernetes:core/v1:Namespace", "queues-namespace").plain()["metadata"]["name"]
    source = source_configuration()
    out = apply(capture.transforms, MUTATING, copy.deepcopy(source))
    assert [w["namespaceSelector"] for w in out["webhooks"]] == [
        {"matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "In", "values": [namespace]}]}
    ] * len(SOURCE_WEBHOOKS)
    # Nothing else changes: names, rules, failure policy, the service its rotator writes the caBundle for.
    for webhook in out["webhooks"]:
        webhook.pop("namespaceSelector")
    assert out == source
    # A ValidatingWebhookConfiguration (none at 250d4b3c) would be scoped alike.
    validating = apply(capture.transforms, VALIDATING, source_configuration("ValidatingWebhookConfiguration"))
    assert all(selects(w["namespaceSelector"], in_namespace(namespace)) for w in validating["webhooks"])
    assert {MUTATING, VALIDATING} == WEBHOOK_CONFIGURATIONS


def test_the_scope_follows_the_kueue_namespace(capture: Captured) -> None:
    capture.program({f"{PROJECT}:kueue": {"namespace": "tpu-jobs"}})
    out = apply(capture.transforms, MUTATING, source_configuration())
    assert {tuple(w["namespaceSelector"]["matchExpressions"][0]["values"]) for w in out["webhooks"]} == {("tpu-jobs",)}


def test_an_existing_selector_is_kept_and_narrowed_not_replaced() -> None:
    requirement = {"key": NAMESPACE_LABEL, "operator": "In", "values": ["jobs"]}
    source = source_configuration()
    existing = {
        "matchLabels": {"team": "tpu"},
        "matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "NotIn", "values": ["kube-system"]}],
    }
    source["webhooks"][0]["namespaceSelector"] = copy.deepcopy(existing)
    source["webhooks"][1]["namespaceSelector"] = {}
    before = copy.deepcopy(source)
    out = with_namespace_scope(source, requirement)
    assert source == before  # pure
    assert out["webhooks"][0]["namespaceSelector"] == {
        "matchLabels": {"team": "tpu"},
        "matchExpressions": [*existing["matchExpressions"], requirement],
    }
    assert out["webhooks"][1]["namespaceSelector"] == {"matchExpressions": [requirement]}
    # Narrowed: the webhook keeps its own conditions and gains the namespace.
    selector = out["webhooks"][0]["namespaceSelector"]
    assert selects(selector, {**in_namespace("jobs"), "team": "tpu"})
    assert not selects(selector, in_namespace("jobs"))  # its own matchLabels still apply
    assert not selects(selector, {**in_namespace("other"), "team": "tpu"})
    # A second registration (every `up` re-renders the manifest) adds nothing.
    assert with_namespace_scope(out, requirement) == out


def test_other_objects_of_the_manifest_pass_unchanged(capture: Captured) -> None:
    capture.program()
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "slice-controller-webhook-service"}}
    assert apply(capture.transforms, "kubernetes:core/v1:Service", copy.deepcopy(service)) == service
    other = controller_deployment(["--leader-elect"])
    other["metadata"]["name"] = "other"
    assert apply(capture.transforms, DEPLOYMENT, copy.deepcopy(other)) == other


# ---------------------------------------------------------------------------------------------
# Two replicas (components/model/addons/slice_controller.py: leader election, its cert rotator in every replica)

PDB = "kubernetes:policy/v1:PodDisruptionBudget"


def test_two_replicas_spread_over_nodes_under_a_disruption_budget(capture: Captured) -> None:
    """While the one pod of the manifest is rescheduled its fail-closed webhooks refuse every queued workload: two
    replicas on different nodes, one of them kept through a drain."""
    run = capture.program()
    source = controller_deployment(["--leader-elect", "--health-probe-bind-address=:8081"])
    out = apply(capture.transforms, DEPLOYMENT, copy.deepcopy(source))
    assert out["spec"]["replicas"] == 2
    pod = out["spec"]["template"]
    (spread,) = pod["spec"]["topologySpreadConstraints"]
    assert (spread["topologyKey"], spread["maxSkew"]) == ("kubernetes.io/hostname", 1)
    assert selects(spread["labelSelector"], pod["metadata"]["labels"])
    assert pod["spec"]["containers"][0]["args"] == source["spec"]["template"]["spec"]["containers"][0]["args"]
    budget = run.get(PDB, "slice-controller-pdb")
    pdb = budget.plain()
    assert pdb["metadata"]["namespace"] == source["metadata"]["namespace"]
    assert pdb["spec"]["minAvailable"] == 1 and selects(pdb["spec"]["selector"], pod["metadata"]["labels"])
    # The manifest creates the namespace: the budget comes after it, and is deleted before it.
    manifest = run.get(*CONFIG_FILE)
    assert manifest.urn in budget.dependencies


def test_one_replica_runs_as_the_manifest_does_without_a_budget(capture: Captured) -> None:
    run = capture.program({f"{PROJECT}:addons": {"sliceController": {"replicas": 1}}})
    source = controller_deployment(["--leader-elect"])
    assert apply(capture.transforms, DEPLOYMENT, copy.deepcopy(source)) == source
    assert [b.name for b in run.of_type(PDB) if b.name.startswith("slice-controller")] == []
    assert_rejected(
        {f"{PROJECT}:addons": {"sliceController": {"replicas": 0}}},
        [f"{PROJECT}:addons.sliceController.replicas = 0", "greater than or equal to 1"],
    )


@pytest.mark.parametrize("args", [[], ["--leader-elect=false"]])
def test_two_replicas_run_with_leader_election_on(args: list[str]) -> None:
    """Without it both replicas would reconcile every Workload and create its Slices twice."""
    out = sc.controller_deployment(controller_deployment(args), [], 2)
    assert out is not None and out["spec"]["template"]["spec"]["containers"][0]["args"] == ["--leader-elect"]


def test_a_deployment_the_budget_would_not_select_is_refused() -> None:
    source = controller_deployment(["--leader-elect"])
    source["spec"]["selector"]["matchLabels"] = {"control-plane": "controller-manager"}
    with pytest.raises(ValueError, match=re.escape("selects {'control-plane': 'controller-manager'}")):
        sc.controller_deployment(source, [], 2)
    assert sc.controller_deployment(source, [], 1) is not None  # one replica: no budget, no spread to select


def test_a_selector_with_more_labels_than_the_budgets_is_taken() -> None:
    source = controller_deployment(["--leader-elect"])
    source["spec"]["selector"]["matchLabels"] = {**sc.SELECTOR, "app.kubernetes.io/version": "v0.8.0"}
    assert sc.controller_deployment(source, [], 2) is not None


def test_the_serving_and_demo_workloads_are_inside_the_scope_and_the_rest_outside(capture: Captured) -> None:
    """The webhooks must still see every object they act on (the program's queued JobSets and LeaderWorkerSets,
    and the StatefulSets LWS creates in each set's namespace), and nothing else needs them."""
    run = capture.program({**CODELAB_MIX, f"{PROJECT}:serving": {"weightsDownload": {"enabled": True}}})
    webhooks = apply(capture.transforms, MUTATING, source_configuration())["webhooks"]
    (selector,) = {str(w["namespaceSelector"]): w["namespaceSelector"] for w in webhooks}.values()
    workloads = run.of_type(JOBSET) + run.of_type(LWS)
    kinds = sorted(r.type.rsplit(":", 1)[-1] for r in workloads)
    assert kinds == ["JobSet"] * 2 + ["LeaderWorkerSet"] * 6  # both demos, prefill and decode and their burst slots
    for r in workloads:
        meta = r.plain()["metadata"]
        assert meta["labels"].get("kueue.x-k8s.io/queue-name"), r.name  # what the webhooks act on
        assert selects(selector, in_namespace(meta["namespace"])), r.name
    # Outside: every other namespace the program makes, the weights download Job's among them.
    namespaces = run.of_type("kubernetes:core/v1:Namespace")
    others = [r.plain()["metadata"]["name"] for r in namespaces if r.name != "queues-namespace"]
    assert "model-weights" in others and len(others) >= 4
    assert not any(selects(selector, in_namespace(ns)) for ns in [*others, "default", "kube-system"])
    job = run.get("kubernetes:batch/v1:Job", "serving-weights-job").plain()
    assert not selects(selector, in_namespace(job["metadata"]["namespace"]))


# ---------------------------------------------------------------------------------------------
# The feature gates (components/model/addons/slice_controller.py)


def test_the_gates_go_onto_the_controllers_manager_container_only() -> None:
    base = ["--leader-elect", "--feature-gates=Old=true", "--default-slice-health-node-affinity=HEALTHY_AND_DEGRADED"]
    out = sc.controller_deployment(controller_deployment(base), list(sc.FEATURE_GATES), 1)
    assert out is not None
    (container,) = out["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "--leader-elect",
        "--default-slice-health-node-affinity=HEALTHY_AND_DEGRADED",
        "--feature-gates=FailOnUntoleratedDegradedSlice=true,UseRetryMechanismForSliceCreation=true",
    ]
    other = controller_deployment(base)
    other["metadata"]["name"] = "kueue-controller-manager"
    assert sc.controller_deployment(other, ["FailOnUntoleratedDegradedSlice"], 1) is None
    assert sc.controller_deployment(controller_deployment(base), [], 1) == controller_deployment(base)


def test_only_the_gates_the_controller_has_are_accepted() -> None:
    assert_rejected(
        {"gke-tpu-slicing:addons": {"sliceController": {"featureGates": ["FailOnDegraded"]}}},
        ["gke-tpu-slicing:addons.sliceController.featureGates", "FailOnUntoleratedDegradedSlice"],
    )


def test_the_gates_transform_changes_the_controllers_deployment_beside_the_scope(capture: Captured) -> None:
    capture.program({f"{PROJECT}:addons": {"sliceController": {"featureGates": ["UseRetryMechanismForSliceCreation"]}}})
    assert len(capture.transforms) == 2
    out = apply(capture.transforms, DEPLOYMENT, controller_deployment(["--leader-elect"]))
    (container,) = out["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["--leader-elect", "--feature-gates=UseRetryMechanismForSliceCreation=true"]
    assert "namespaceSelector" in apply(capture.transforms, MUTATING, source_configuration())["webhooks"][0]
    # Nothing else of the manifest changes, the controller's own Service included.
    service = {"metadata": controller_deployment([])["metadata"]}
    assert apply(capture.transforms, "kubernetes:core/v1:Service", copy.deepcopy(service)) == service
