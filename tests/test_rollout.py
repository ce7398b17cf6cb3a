"""A change Kueue would refuse in place, or one that would leave Slices behind, rolls to a new LWS awaited once by
its leaders-ready patch; any other change rolls in place (the upstream rules: components/model/serving/rollout.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components.model.serving.rollout import pod_spec_shape
from tests.harness import LWS, ROLES, P, Run, lws, ok, preview, templates
from tests.rollout_fixtures import PATCH, PRIORITY_LABEL, awaited, name, ready_patch, replacement_steps, waits_for

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def kueue_refuses_in_place(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What Kueue's LWS webhook rejects when `old` (running, queued) is updated to `new` under the same name."""
    out = [
        f"{part}: pod shape"
        for part in ("leader", "worker")
        if pod_spec_shape(templates(old)[part]["spec"]) != pod_spec_shape(templates(new)[part]["spec"])
    ]
    if old["metadata"]["labels"][QUEUE_LABEL] != new["metadata"]["labels"][QUEUE_LABEL]:
        out.append("queue-name label")
    return out


SHAPE = ["leader: pod shape", "worker: pod shape"]
# A change of one role: what Kueue would refuse of it in place, and how many ready groups the new set is awaited for
# before the old set goes, at the end of the update. Dev has room for all the new groups beside the old ones
# (lower-priority demos yield), so the role never has fewer ready leaders than it had.
ROLLS = {
    "resources": ({"prefill": {"resources": {"cpu": "200", "memory": "800Gi"}}}, SHAPE, 4),
    # The HEALTHY-partition selector key follows the shape.
    "topology": ({"decode": {"topology": "2x2x1"}}, SHAPE, 4),
    # Kueue's defaulting copies the priority label into both pod templates, which would restart every group in
    # place; the program rolls it like a shape change instead.
    "priority": ({"prefill": {"priority": "medium-priority-2000"}}, [], 4),
    # In place, Kueue would delete the removed groups' Workloads while the slice controller keeps their Slices
    # until every pod of the LWS has finished: the survivors never do. A new, smaller LWS and the deletion of the
    # whole old one leave no pod of the old LWS (pods carry their own LWS's name label, which the slice controller
    # matches), so every one of its Slices is deleted.
    "scale-down": ({"decode": {"replicas": 2}}, [], 2),
    "scale-up": ({"prefill": {"replicas": 5}}, [], 5),
}


@pytest.mark.parametrize(("change", "refused", "wait_for"), ROLLS.values(), ids=ROLLS.keys())
def test_a_change_kueue_refuses_in_place_or_that_leaves_slices_behind_rolls_to_a_new_lws(
    dev: Run, change: dict[str, Any], refused: list[str], wait_for: int
) -> None:
    ((role, settings),) = change.items()
    after = ok({f"{P}:serving": change})
    assert kueue_refuses_in_place(lws(dev, role), lws(after, role)) == refused
    new = lws(after, role)
    assert new["spec"]["replicas"] == settings.get("replicas", 4)
    assert new["metadata"]["labels"][PRIORITY_LABEL] == settings.get("priority", "high-priority-3000")
    assert name(dev, role) != name(after, role)
    assert replacement_steps(dev, after, role) == [
        f"create {name(after, role)} and wait for jsonpath={{$[?@.readyReplicas>{wait_for - 1}]}}",
        "... every other create and update of the deployment",
        f"delete {name(dev, role)}",
    ]
    assert waits_for(after, role, new["spec"]["replicas"]) == wait_for
    # The other role is not touched.
    assert replacement_steps(dev, after, next(r for r in ROLES if r != role)) == []


def test_changes_kueue_allows_in_place_keep_the_name(dev: Run) -> None:
    # A new image changes the pods but not their shape: the LWS rolls its groups in place (LWS rolling update).
    newer = ok({f"{P}:serving": {"image": "docker.io/vllm/vllm-tpu:nightly-20260601-aaaaaaa-bbbbbbb"}})
    for role in ROLES:
        assert kueue_refuses_in_place(lws(dev, role), lws(newer, role)) == []
        assert replacement_steps(dev, newer, role) == [f"update {name(dev, role)}"]


def test_a_new_local_queue_is_a_new_lws(dev: Run) -> None:
    other = ok({f"{P}:kueue": {"localQueue": "serving-lq"}})
    for role in ROLES:
        assert "queue-name label" in kueue_refuses_in_place(lws(dev, role), lws(other, role))
        assert name(dev, role) != name(other, role)


def awaited_after(inputs: dict[str, Any], live: dict[str, Any]) -> str | None:
    """What pulumi-kubernetes awaits after applying `inputs` (a create or an update in place) on `live`: the waitFor
    of the live object, unless the inputs say skipAwait (pulumi/pulumi-kubernetes@94977969d
    provider/pkg/metadata/overrides.go:108-112, called from provider/pkg/await/await.go:321 and :504)."""
    if (inputs["metadata"].get("annotations") or {}).get("pulumi.com/skipAwait") == "true":
        return None
    return (live["metadata"].get("annotations") or {}).get("pulumi.com/waitFor")


def test_an_in_place_update_of_a_serving_set_awaits_nothing(dev: Run) -> None:
    """An image fix during an incident, with a group down, must not wait for every group again: pulumi-kubernetes
    awaits the live object's waitFor after an update too (await.go:504), so with the wait on the LWS an `up` blocked
    for the startup budget + 30 min and failed. The wait is on the new set's leaders-ready patch, applied once;
    the set's own inputs skip the await, and the patch does not change."""
    fixed = ok({f"{P}:serving": {"image": "docker.io/vllm/vllm-tpu:fixed"}})
    result = {c.name: c for c in preview(dev, fixed).changes}
    for role in ROLES:
        assert replacement_steps(dev, fixed, role) == [f"update {name(dev, role)}"]
        assert awaited_after(lws(fixed, role), awaited(dev, role)) is None
        assert ready_patch(fixed, role) == ready_patch(dev, role)
        update = result[f"serving-{role}"]
        assert (update.action, update.reason.split(":", 1)[0]) == ("update", "not awaited")
        patches = [c for n, c in result.items() if n.startswith(f"serving-{role}-ready-")]
        assert [c.action for c in patches] == ["same"]


def test_a_new_set_is_awaited_once_by_its_own_patch(dev: Run) -> None:
    """The creation keeps the rollout's guarantee: the new set's patch awaits its ready groups (the patch's own
    inputs have no skipAwait; its annotations land on the live set), and it is a new resource per revision, so it
    is created with each new set and never updated into a new wait (its annotations are ignored after the create)."""
    bigger = ok({f"{P}:serving": {"prefill": {"replicas": 5}}})
    patch = ready_patch(bigger, "prefill")
    assert awaited_after(patch, awaited(bigger, "prefill")) == "jsonpath={$[?@.readyReplicas>4]}"
    regs = {r.name: r for r in bigger.of_type(PATCH)}
    (created,) = [n for n in regs if n.startswith("serving-prefill-ready-")]
    assert created.endswith(name(bigger, "prefill").rsplit("-", 1)[1])
    assert regs[created].options["ignoreChanges"] == ["metadata.annotations"]
    assert bigger.depends_on(regs[created], bigger.get(LWS, "serving-prefill"))
    result = {c.name: c for c in preview(dev, bigger).changes}
    assert result[created].action == "create"
    (old,) = [n for n in result if n.startswith("serving-prefill-ready-") and n != created]
    assert result[old].action == "delete"
