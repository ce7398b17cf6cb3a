"""What serving runs now, read back from the stack's own previous outputs (components/preflight.py
read_deployed_serving): a smaller role is planned beside the bigger set that runs; a failed read only warns."""

from __future__ import annotations

from typing import Any

import pytest

from components.cli.mocks import InvokeError
from tests.harness import LWS, Mocks, P, Run, lws, ok, templates, warnings_of
from tests.rollout_fixtures import FULL, NO_DEMOS, PRIORITY_LABEL, name, replacement_steps, waits_for


def test_every_update_exports_the_shape_each_lws_gets_and_reads_its_own_stack_back(dev: Run) -> None:
    # Nothing read on a stack's first update: the mocks answer no outputs, and the plan is the configured one.
    assert dev.mocks.stack_references == ["dev"]  # a diy backend's name for the stack itself
    shape = dev.outputs["servingShape"]
    assert sorted(shape) == ["serving.decode", "serving.prefill"]
    for key, entry in shape.items():
        obj = lws(dev, key.split(".", 1)[1])
        leader = templates(obj)["leader"]
        # What the next run plans the old set with is what the object runs: its groups, slice shape and priority.
        assert entry["replicas"] == obj["spec"]["replicas"]
        assert entry["topology"] == leader["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"]
        assert entry["priority"] == obj["metadata"]["labels"][PRIORITY_LABEL]
    assert not any(r["deployed"] for r in dev.outputs["capacityPlan"]["rollouts"])


def test_pulumi_cloud_needs_the_fully_qualified_name_of_the_stack() -> None:
    # pulumi/pulumi pkg/backend/httpstate/backend.go: "a stack reference's name should be of the form
    # '<organization>/<project>/<stack>'"; a diy backend's is 'organization' and takes the bare name.
    assert ok(organization="acme").mocks.stack_references == ["acme/gke-tpu-slicing/dev"]


def _deployed(run: Run) -> Mocks:
    """Mocks whose read of the stack itself answers the outputs `run` exported: the next update of that stack."""
    return Mocks(previous_outputs={"servingShape": run.outputs["servingShape"]})


@pytest.mark.parametrize(
    "smaller", [{"replicas": 2}, {"topology": "2x2x1"}], ids=["fewer replicas", "smaller topology"]
)
def test_a_smaller_role_is_planned_beside_the_bigger_set_that_runs(smaller: dict[str, Any]) -> None:
    # One cube, serving only: 4 + 4 groups of 2x2x2 fill it. Shrunk, decode's new set needs room the running
    # (bigger) set still holds: nothing fits beside it, so the old set must go first.
    full = ok(FULL)
    change = {**FULL, f"{P}:serving": {"decode": smaller}}
    blind = ok(change)  # no previous outputs: the running set counted with the new settings
    assert blind.outputs["capacityPlan"]["rollouts"][1]["createFirst"] is True  # the gap this closes
    run = ok(change, mocks=_deployed(full))
    (decode,) = [r for r in run.outputs["capacityPlan"]["rollouts"] if r["key"] == "serving.decode"]
    assert (decode["createFirst"], decode["surge"]) == (False, 0), decode
    assert decode["deployed"] == f"4 x 2x2x2 ({lws(full, 'decode')['metadata']['labels'][PRIORITY_LABEL]})"
    assert replacement_steps(full, run, "decode")[0] == f"delete {name(full, 'decode')}"
    # Once the old set is gone, the new one gets the whole room: `up` waits for all its groups.
    replicas = lws(run, "decode")["spec"]["replicas"]
    assert waits_for(run, "decode", replicas) == replicas
    assert any("serving.decode (" in m and "cannot keep it serving" in m for m in warnings_of(run))
    assert name(run, "decode") != name(full, "decode")
    # Prefill is unchanged: the previous shape equals the configured one and changes nothing of its plan.
    assert lws(run, "prefill") == lws(blind, "prefill")


def test_a_smaller_role_waits_for_the_groups_that_fit_beside_the_running_set() -> None:
    # Two cubes (16 partitions), serving only, 6 + 6 groups: 4 free. Decode to 5 replicas: counted with the new
    # settings, 5 would fit (the wait for 5 runs out); beside the 6 that run, 4 do.
    six = {**NO_DEMOS, f"{P}:serving": {"prefill": {"replicas": 6}, "decode": {"replicas": 6}}}
    running = ok(six)
    five = {**NO_DEMOS, f"{P}:serving": {"prefill": {"replicas": 6}, "decode": {"replicas": 5}}}
    blind, run = ok(five), ok(five, mocks=_deployed(running))
    assert (waits_for(blind, "decode", 5), waits_for(run, "decode", 5)) == (5, 4)
    assert run.get(LWS, "serving-decode").options["deleteBeforeReplace"] is False
    assert replacement_steps(running, run, "decode")[-1] == f"delete {name(running, 'decode')}"


def test_the_preview_reads_the_same_previous_outputs_and_prints_the_deployed_shape() -> None:
    full = ok(FULL)
    shown = ok({**FULL, f"{P}:serving": {"decode": {"replicas": 2}}}, preview=True, mocks=_deployed(full))
    table = next(m for lvl, m in shown.logs if lvl == "info" and "ROLLOUT  serving.decode" in m)
    line = next(x for x in table.splitlines() if x.startswith("ROLLOUT  serving.decode"))
    assert line.startswith("ROLLOUT  serving.decode: from the deployed 4 x 2x2x2 (") and "0/2 new groups fit" in line
    assert shown.get(LWS, "serving-decode").options["deleteBeforeReplace"] is True


def test_an_unreadable_previous_shape_is_a_warning_and_the_configured_shape_is_used(dev: Run) -> None:
    bad = Mocks(previous_outputs={"servingShape": {"serving.decode": {"replicas": "four"}}})
    run = ok(mocks=bad)
    assert any("servingShape output for serving.decode cannot be read" in m for m in warnings_of(run))
    assert run.outputs["capacityPlan"]["rollouts"] == dev.outputs["capacityPlan"]["rollouts"]


class _RefusingBackend(Mocks):
    """A backend that refuses the stack's read of its own outputs (e.g. the engine's builtin provider erring)."""

    def call(self, args: Any) -> tuple[dict[str, Any], list[Any]]:
        if args.token == "pulumi:pulumi:readStackOutputs":  # as the engine answers a failed invoke: a gRPC error
            raise InvokeError(args.token, "failed to read stack outputs: permission denied")
        return super().call(args)


def test_a_refused_read_of_the_previous_outputs_is_a_warning_and_plans_from_the_settings(dev: Run) -> None:
    run = ok(mocks=_RefusingBackend())
    (warning,) = [m for m in warnings_of(run) if "could not read the servingShape output" in m]
    assert "permission denied" in warning and "settings alone" in warning
    assert run.outputs["capacityPlan"]["rollouts"] == dev.outputs["capacityPlan"]["rollouts"]
