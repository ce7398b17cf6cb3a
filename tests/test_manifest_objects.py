"""The change preview inside the slice controller's manifest, which the provider fetches at `up`: what the program
writes into its objects (the webhooks' scope, the Deployment's replicas and spread) compared as those objects
(components/cli/manifest_objects.py), and the PodDisruptionBudget beside it."""

from __future__ import annotations

import copy
from typing import Any

from components.cli import diff, manifest_objects
from components.component import PROGRAM_WRITES
from components.model.keys import NAMESPACE_LABEL
from tests import upstream
from tests.preview import NO_WORKLOADS_SETS, change, preview
from tests.stack_config import P, set_arguments

WEBHOOKS = "slice-controller-manifest:slice-controller-mutating-webhook-configuration"
CONTROLLER = "slice-controller-manifest:slice-controller-system/slice-controller-controller-manager"


def touched(result: dict[str, Any]) -> dict[str, str]:
    return {
        c["name"]: c["action"]
        for c in result["changes"]
        if c["name"].startswith("slice-controller-") and c["action"] != "same"
    }


def test_a_new_queued_namespace_updates_the_slice_controllers_webhooks_in_place() -> None:
    """The documented path: serving and the demos off, then `kueue.namespace` moves; the webhooks follow it."""
    upstream.require("charts")  # the move also reaches Kueue's chart, unknown without its sources
    code, result = preview("dev", *NO_WORKLOADS_SETS, "--change", "kueue.namespace=llm-serving")
    assert code == 0
    assert touched(result) == {WEBHOOKS: "update"}
    webhooks = change(result, WEBHOOKS)
    assert webhooks["properties"] == ["webhooks[0].namespaceSelector.matchExpressions[0].values[0]"]
    assert webhooks["reason"] == manifest_objects.WHY
    assert webhooks["type"] == "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration"


def test_the_controllers_replicas_update_its_deployment_and_its_budget() -> None:
    # A third replica's 2 vCPUs need more than dev's n2-standard-8 pool has with a zone down (the preview refuses it).
    bigger = ("--set", "cluster.systemMachineType=n2-standard-16")
    code, result = preview("dev", *bigger, "--change", "addons.sliceController.replicas=3")
    assert (code, touched(result)) == (0, {CONTROLLER: "update"})
    assert change(result, CONTROLLER)["properties"] == ["spec.replicas"]
    # One replica: no spread, no budget (it would block every drain); the pods roll.
    code, result = preview("dev", "--change", "addons.sliceController.replicas=1")
    assert (code, touched(result)) == (0, {CONTROLLER: "update", "slice-controller-pdb": "delete"})
    assert set(change(result, CONTROLLER)["properties"]) == {
        "spec.replicas",
        "spec.template.spec.topologySpreadConstraints",
        "spec.template.spec.containers[0].args",
    }


def test_a_run_that_does_not_record_them_leaves_them_out_on_both_sides() -> None:
    """A base revision from before the program recorded them: no object of the manifest reads as created."""
    args = diff._parser().parse_args(["--stack", "dev", *set_arguments("dev"), "--second-run"])
    config = diff.read_stack(diff.ROOT, "dev", args.set)
    new, _ = diff._in_process(config, "dev", set())
    old = copy.deepcopy(new)
    for record in old:
        if record["type"] == f"{P}:addons:SliceController":
            record["inputs"].pop(PROGRAM_WRITES)
            record["inputs"]["ignored"] = {"key": NAMESPACE_LABEL}  # any other input: still not modelled
    old_out, new_out, notes, _ = manifest_objects.expand_both(old, new)
    assert [r for r in (*old_out, *new_out) if r["name"] in (WEBHOOKS, CONTROLLER)] == []
    assert notes == [
        "slice-controller-manifest: the objects the program writes into this manifest are not compared: only one "
        "run records them (a base revision from before they were recorded)"
    ]
    # Both recorded: both sides have them, and a second run finds them the same.
    old_out, new_out, notes, _ = manifest_objects.expand_both(new, new)
    assert notes == [] and {WEBHOOKS, CONTROLLER} <= {r["name"] for r in new_out}
    assert all(c["action"] == "same" for c in preview("dev", "--second-run")[1]["changes"])
