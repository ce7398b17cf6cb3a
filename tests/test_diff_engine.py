"""The change preview's engine (components/model/diff/engine.py): every registered type is modelled, and the
dynamic providers' facts are what those providers decide."""

from __future__ import annotations

import pytest

from components.model.diff import engine, facts
from tests.harness import stack_run
from tests.stack_config import STACKS

# Types the model knows that no stack registers (every registered one is checked below; the charts' own kinds,
# a PodDisruptionBudget among them, by tests/test_chart_diff.py).
COMING = ["kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet", "pulumi-python:dynamic:Resource"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_type_the_program_registers_is_in_the_model(stack: str) -> None:
    types = {r.type for r in stack_run(stack).registrations if engine.is_modelled({"type": r.type, "custom": r.custom})}
    missing = sorted(t for t in types if engine.facts_of(t) is None)
    assert missing == [], f"add the replace-on-change and immutability facts of {missing} to components/model/diff/"


@pytest.mark.parametrize("type_", COMING)
def test_types_no_stack_registers_yet_are_in_the_model(type_: str) -> None:
    assert engine.facts_of(type_) is not None


def test_an_unknown_type_is_reported_as_not_modelled() -> None:
    assert engine.facts_of("gcp:sql/databaseInstance:DatabaseInstance") is None
    old = {"urn": "u", "type": "gcp:sql/databaseInstance:DatabaseInstance", "name": "db", "custom": True}
    result = engine.diff([{**old, "inputs": {"tier": "a"}}], [{**old, "inputs": {"tier": "b"}}])
    assert result.changes[0].action == engine.UPDATE and "not in the model" in result.changes[0].reason


def test_the_dynamic_facts_are_what_the_programs_providers_decide() -> None:
    """The providers' `diff` decides what the model says (the gate's provider reads its replace keys from it)."""
    from components.kueue_guard import ImmutableFieldsProvider
    from components.teardown import SliceGateProvider

    gate = {"pool": "p", "cluster": "c", "kubeconfig": "k", "timeoutSeconds": 60, "__provider": "x"}
    gate_facts = engine.facts_of("pulumi-python:dynamic/teardown:SliceGate")
    assert gate_facts is not None
    for key, value in (("pool", "q"), ("cluster", "d"), ("kubeconfig", "k2"), ("__provider", "y")):
        changed = {**gate, key: value}
        result = SliceGateProvider().diff("id", gate, changed)
        model = [f.path for f in gate_facts if facts.triggered(f, gate, changed)]
        assert (result.replaces or []) == model, key
        assert result.delete_before_replace is True
    assert "pulumi-python:dynamic/teardown:SliceGate" in engine.DYNAMIC_DELETE_FIRST
    guard = {"fields": {"a": {"keys": "k", "value": 1}}, "queuedWorkloads": 1, "__provider": "x"}
    result = ImmutableFieldsProvider().diff("id", guard, {**guard, "__provider": "y"})
    assert result.changes is False and not result.replaces
    assert engine.facts_of("pulumi-python:dynamic/queues:ImmutableFields") == ()
    from components.teardown import PoolReplacementsProvider

    record = {"pools": {"p": "id"}, "cluster": "c", "workloads": [], "__provider": "x"}
    result = PoolReplacementsProvider().diff("id", record, {**record, "__provider": "y"})
    assert result.changes is False and not result.replaces
    assert PoolReplacementsProvider().diff("id", record, {**record, "pools": {"p": "id2"}}).replaces == []
    assert engine.facts_of("pulumi-python:dynamic/teardown:PoolReplacements") == ()
