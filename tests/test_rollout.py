"""Whether a change rolls to a new LWS: the revision in its name changes with every field Kueue refuses to change in
place (or that would leave Slices behind) and nothing else; the new set is awaited once, by its leaders-ready patch."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.model.serving.rollout import pod_spec_shape, revision
from tests.graph_queries import ROLES, lws, templates
from tests.harness import LWS, Run, ok, preview
from tests.rollout_fixtures import PATCH, PRIORITY_LABEL, awaited, name, ready_patch, replacement_steps, waits_for
from tests.stack_config import P

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
        # A new image changes the pods but not their shape: the LWS keeps its name and rolls its groups in place.
        assert kueue_refuses_in_place(lws(dev, role), lws(fixed, role)) == []
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


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_the_longest_configured_name_plus_its_revision_fits_kueues_39(role: str) -> None:
    # Kueue v0.17.4 site/content/en/docs/tasks/run/leaderworkerset.md, "Long LeaderWorkerSet names": the
    # pod-group-name label (63 characters) is the LWS name plus a group suffix, so "the effective LWS name
    # limit is 39 characters" (51 only with the alpha WorkloadIdentifierAnnotations gate).
    configured = f"x{role}".ljust(33, "y")
    got = name(ok({f"{P}:serving": {role: {"name": configured}}}), role)
    assert re.fullmatch(re.escape(configured) + r"-[0-9a-f]{5}", got) and len(got) == 39


NAMES_SCRIPT = """
import json
from components.cli.plan import settings_input
from components.model.config.settings import load
from components.graph_args import model_server_args, serving_role_args
from components.vllm_leaderworkersets import lws_object_name
from tests.harness import stack_file_config

settings = load(*settings_input(stack_file_config()))
model = model_server_args(settings)
role_args = {r: serving_role_args(settings, r, {}, create_first=True, wait_for=0) for r in ("prefill", "decode")}
print(json.dumps({role: lws_object_name(model, role, role_args[role]) for role in ("prefill", "decode")}))
"""


def test_the_lws_names_do_not_depend_on_the_interpreters_hash_seed(dev: Run) -> None:
    # A name that changed between two `pulumi up` runs of one configuration would replace both roles every time.
    # str hashes, set and dict orders vary with PYTHONHASHSEED (https://docs.python.org/3/using/cmdline.html
    # #envvar-PYTHONHASHSEED); the revision must not.
    registered = {role: name(dev, role) for role in ROLES}
    root = Path(__file__).resolve().parent.parent
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        out = subprocess.run(
            [sys.executable, "-c", NAMES_SCRIPT], cwd=root, env=env, capture_output=True, text=True, check=True
        )
        assert json.loads(out.stdout) == registered, f"PYTHONHASHSEED={seed}"


# Kueue v0.17.4 pkg/util/pod/pod.go, transcribed: SpecShape's keys, and ContainersShape's per container
# (resources.requests and ports). Its LWS webhook's ValidateUpdate refuses a change of any of them in place
# (pkg/controller/jobframework/validation.go ValidateImmutablePodGroupPodSpec), nothing else of the pod spec.
KUEUE_SPEC_SHAPE = {
    "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 1}]}],
    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 2}]}],
    "nodeSelector": {"k": "v"},
    "affinity": {"nodeAffinity": {}},
    "tolerations": [{"key": "t", "operator": "Exists"}],
    "runtimeClassName": "r",
    "priority": 1,
    "topologySpreadConstraints": [{"maxSkew": 1}],
    "overhead": {"cpu": "1"},
    "resourceClaims": [{"name": "x"}],
}
OUTSIDE_THE_SHAPE = {
    "serviceAccountName": "other",
    "terminationGracePeriodSeconds": 7,
    "volumes": [{"name": "v", "emptyDir": {}}],
    "priorityClassName": "p",
    "hostname": "h",
}
CONTAINER_OUTSIDE_THE_SHAPE = {
    "image": "other:1",
    "command": ["x"],
    "env": [{"name": "E", "value": "1"}],
    "readinessProbe": {"httpGet": {"path": "/", "port": 1}},
    "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
}


def _revision(spec: dict[str, Any]) -> str:
    return revision(leader_spec=spec, worker_spec=spec, size=2, replicas=4, queue="lq", priority="p")


@pytest.mark.parametrize("field", sorted(KUEUE_SPEC_SHAPE))
def test_every_field_kueue_refuses_to_change_in_place_renames_the_lws(field: str) -> None:
    base = {k: v for k, v in KUEUE_SPEC_SHAPE.items() if k != field}
    assert _revision(base) != _revision({**base, field: KUEUE_SPEC_SHAPE[field]})
    if field.endswith("ontainers"):  # within a container: its requests and its ports
        (c,) = KUEUE_SPEC_SHAPE[field]
        for changed in ({**c, "resources": {"requests": {"cpu": "2"}}}, {**c, "ports": [{"containerPort": 9}]}):
            assert _revision(KUEUE_SPEC_SHAPE) != _revision({**KUEUE_SPEC_SHAPE, field: [changed]})


def test_what_kueue_lets_change_in_place_keeps_the_name() -> None:
    rev = _revision(KUEUE_SPEC_SHAPE)
    for key, value in OUTSIDE_THE_SHAPE.items():
        assert _revision({**KUEUE_SPEC_SHAPE, key: value}) == rev, key
    for key, value in CONTAINER_OUTSIDE_THE_SHAPE.items():
        (c,) = KUEUE_SPEC_SHAPE["containers"]
        assert _revision({**KUEUE_SPEC_SHAPE, "containers": [{**c, key: value}]}) == rev, key
