"""The demo JobSets (components/demo_jobsets.py): what they wait for, switching them off, replacement."""

from __future__ import annotations

from typing import Any

import pytest

from components.model.diff import engine
from tests.graph_queries import kueue_objects, tpu_pools
from tests.harness import CHART, JOBSET, Run, ok, preview
from tests.stack_config import CODELAB_MIX, P, merge


def test_jobsets_wait_for_jobset_kueue_objects_and_pools(dev: Run) -> None:
    jobset_chart = dev.get(CHART, "jobset-chart")
    for js in dev.of_type(JOBSET):
        assert dev.depends_on(js, jobset_chart)
        for obj in kueue_objects(dev):
            assert dev.depends_on(js, obj), f"{js.name} does not wait for {obj.name}"
        for pool in tpu_pools(dev):
            assert dev.depends_on(js, pool)


def test_demos_can_be_switched_off() -> None:
    run = ok({f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}})
    assert run.of_type(JOBSET) == []
    assert run.outputs["demoJobSets"] == {}


@pytest.mark.parametrize(
    ("demo", "override"),
    [
        ("subslicing", {"replicas": 4}),  # the spec: JobSet's webhook refuses it while the JobSet runs
        # a label only (medium: at the floors' priority, dev's burst slots would find no room, tests/test_burst.py)
        ("subslicing", {"priority": "medium-priority-2000"}),
        ("superslicing", {"priority": "low-priority-1000"}),
    ],
    ids=["replicas", "subslicing-priority", "superslicing-priority"],
)
def test_every_jobset_change_replaces_it_delete_first(codelab: Run, demo: str, override: dict[str, Any]) -> None:
    """No change of a running demo JobSet can be applied in place: JobSet's webhook refuses any change of
    spec.replicatedJobs unless the JobSet is suspended (kubernetes-sigs/jobset v0.11.1
    pkg/webhooks/jobset_webhook.go:336-350); on admission Kueue merges the slice controller's and the flavor's node
    labels into the pod template's nodeSelector (kueue v0.17.4 pkg/controller/jobs/jobset/jobset_controller.go:148,
    pkg/podset/podset.go:161-174), an atomic map in the JobSet CRD, so Pulumi's next apply of the template
    conflicts with Kueue's; and Kueue refuses a new queue name on a running job (jobframework/validation.go:151).
    A priority change, a label alone, was an in-place update; now it is a replacement like the rest, deleted first
    (the JobSet's name is fixed), and only that JobSet moves."""
    changed = ok(merge(CODELAB_MIX, {f"{P}:demos": {demo: override}}))
    result = preview(codelab, changed).by_name()
    jobset = result[f"{demo}-jobset"]
    assert (jobset.action, jobset.delete_first) == (engine.REPLACE, True), jobset
    others = [c.name for c in result.values() if c.type == JOBSET and c.action != engine.SAME and c is not jobset]
    assert others == []
