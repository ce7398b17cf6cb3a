"""The CEL evaluator of tests/cel_rules.py: apiserver semantics on create, and it rejects what the apiserver does."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import cel_rules, conformance
from tests.cel_rules import Rule, evaluate, rejections
from tests.harness import Run, normalize


def _schema(rules: list[str], **props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props or {"x": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": r, "message": f"rule {i}"} for i, r in enumerate(rules)],
    }


def _statuses(obj: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    return [o.status for o in evaluate(obj, schema)]


# --------------------------------------------------------------------------------------------- semantics


def test_pass_fail_and_evaluation_error() -> None:
    schema = _schema(["self.x == 'a'", "self.x == 'b'", "self.y == 'a'"], x={"type": "string"}, y={"type": "string"})
    outcomes = evaluate({"x": "a"}, schema)
    assert [o.status for o in outcomes] == ["passed", "failed", "error"]
    # A failed rule and an evaluation error both reject the object (a field read without has() is an error).
    assert rejections(outcomes) == ["$: failed: rule 1", f"$: error: rule 2 ({outcomes[2].detail})"]
    assert "no such member" in outcomes[2].detail


def test_defaults_are_applied_before_the_rules() -> None:
    schema = _schema(["self.mode == 'Auto'"], mode={"type": "string", "default": "Auto"})
    assert _statuses({}, schema) == ["passed"]
    assert _statuses({"mode": "Manual"}, schema) == ["failed"]
    nested = {"type": "object", "properties": {"spec": schema}}
    assert _statuses({"spec": {}}, nested) == ["passed"]


def test_transition_rules_are_skipped_on_create() -> None:
    schema = _schema(["self == oldSelf", "!has(oldSelf.x) || self.x == oldSelf.x", "has(self.x)"])
    assert [(o.rule.rule, o.status) for o in evaluate({"x": "a"}, schema)] == [("has(self.x)", "passed")]


def test_an_unknown_function_is_unevaluated_not_passed() -> None:
    schema = _schema(["quantity(self.x).isGreaterThan(quantity('1'))", "self.x.lowerAscii() == 'a'"])
    outcomes = evaluate({"x": "1"}, schema)
    assert [o.status for o in outcomes] == ["unevaluated", "unevaluated"]
    assert "isGreaterThan, quantity" in outcomes[0].detail and rejections(outcomes) == []
    # A string literal that looks like a call is not a call.
    assert Rule("$", "self.x != 'quantity(1)'", "").unsupported == []


def test_rules_run_per_item_and_per_map_value_and_only_where_present() -> None:
    item = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.n > 0"}],
    }
    schema = {
        "type": "object",
        "properties": {
            "list": {"type": "array", "items": item},
            "map": {"type": "object", "additionalProperties": item},
            "absent": item,
        },
    }
    outcomes = evaluate({"list": [{"n": 1}, {"n": 0}], "map": {"k": {"n": -1}}}, schema)
    assert [(o.path, o.status) for o in outcomes] == [
        ("$.list[0]", "passed"),
        ("$.list[1]", "failed"),
        ("$.map['k']", "failed"),
    ]


def test_values_are_typed_by_their_schema() -> None:
    schema = _schema(
        [
            "self.timeout <= self.interval",
            "self.at < timestamp('2030-01-01T00:00:00Z')",
            "self.ratio == 1.0",
            "self.blob == b'hi'",
            "self.port == 80 && self.name == 'http'",
        ],
        timeout={"type": "string", "format": "duration"},
        interval={"type": "string", "format": "duration"},
        at={"type": "string", "format": "date-time"},
        ratio={"type": "number"},
        blob={"type": "string", "format": "byte"},
        port={"x-kubernetes-int-or-string": True},
        name={"x-kubernetes-int-or-string": True},
    )
    good = {"timeout": "10s", "interval": "1m", "at": "2026-01-01T00:00:00Z", "ratio": 1, "blob": "aGk=", "port": 80}
    assert _statuses({**good, "name": "http"}, schema) == ["passed"] * 5
    assert _statuses({**good, "timeout": "2m", "name": "http"}, schema)[0] == "failed"  # 2m > 1m, not "2m" > "1m"
    assert _statuses({**good, "timeout": "1500ms", "interval": "2s", "name": "http"}, schema)[0] == "passed"
    # A value celpy cannot type is this evaluator's limit, reported, never a pass.
    assert _statuses({**good, "timeout": "soon", "name": "http"}, schema)[0] == "unevaluated"


def test_property_names_are_escaped_as_kubernetes_does() -> None:
    props = {"namespace": {"type": "string"}, "a-b": {"type": "string"}, "x.y/z": {"type": "string"}}
    schema = _schema(
        [
            "self.__namespace__ == 'n'",
            "self.namespace == 'n'",
            "self.a__dash__b == 'c'",
            "self.x__dot__y__slash__z == 'd'",
        ],
        **props,
    )
    assert _statuses({"namespace": "n", "a-b": "c", "x.y/z": "d"}, schema) == ["passed"] * 4
    assert cel_rules.escape("a__b") == ["a__underscores__b"] and cel_rules.escape("a b") == []
    # Map keys (additionalProperties) are data, not field names: never escaped.
    labels = _schema(["'a-b' in self.labels"], labels={"type": "object", "additionalProperties": {"type": "string"}})
    assert _statuses({"labels": {"a-b": "1"}}, labels) == ["passed"]


def test_root_rules_see_only_the_name_of_the_metadata() -> None:
    schema = _schema(["self.metadata.name == 'n' && !has(self.metadata.labels)"], metadata={"type": "object"})
    assert _statuses({"metadata": {"name": "n", "labels": {"a": "b"}}}, schema) == ["passed"]


def test_fields_the_schema_does_not_declare_are_pruned() -> None:
    assert _statuses({"x": "a", "extra": 1}, _schema(["!has(self.extra)"])) == ["passed"]


# --------------------------------------------------------------------------------------------- Kubernetes library


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("'a/b/c'.split('/') == ['a', 'b', 'c']", True),
        ("'a/b/c'.split('/', 2) == ['a', 'b/c']", True),
        ("'a/b'.split('/', 0) == []", True),
        ("'abc'.split('') == ['a', 'b', 'c']", True),
        ("'example.com/key'.split('/')[0].size() < 253", True),
    ],
)
def test_split(expr: str, expected: bool) -> None:
    assert _statuses({"x": ""}, _schema([expr])) == ["passed" if expected else "failed"]


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://example.com/token", True),
        ("http://user:pw@proxy.example.com:3128", True),
        ("http://[::1]:8080/path", True),
        ("/just/a/path", True),
        ("mailto:someone", True),
        ("relative/path", False),  # "invalid URI for request"
        (":no-scheme", False),  # "missing protocol scheme"
        ("http://host:port/", False),  # invalid port
        ("http://[::1/", False),  # missing ']'
        ("http://exa mple.com/", False),  # invalid host character
        ("https://example.com/%zz", False),  # invalid escape
        ("https://example.com/\n", False),  # control character
        ("", False),
    ],
)
def test_is_url_follows_go_parse_request_uri(url: str, ok: bool) -> None:
    assert cel_rules.parse_request_uri_ok(url) is ok


# --------------------------------------------------------------------------------------------- the pinned CRDs


@pytest.fixture(scope="module")
def registry() -> conformance.SchemaRegistry:
    return conformance.require_registry()


def test_every_rule_of_the_pinned_crds_compiles_or_is_reported(registry: conformance.SchemaRegistry) -> None:
    """cel-python reads every non-transition rule of every pinned CRD, and none calls a function we lack."""
    unsupported, uncompiled, total = {}, {}, 0
    for gvk in registry.kinds():
        for rule in cel_rules.rules(registry.schema(*gvk)):
            if rule.transition:
                continue
            total += 1
            if rule.unsupported:
                unsupported[rule.rule] = rule.unsupported
                continue
            try:
                cel_rules.program(rule.rule)
            except Exception as err:
                uncompiled[rule.rule] = str(err)
    assert (unsupported, uncompiled) == ({}, {})
    assert total > 200  # not vacuous: Gateway API alone has more than a hundred


def _program_object(run: Run, kind: str) -> dict[str, Any]:
    for reg in run.registrations:
        if reg.custom and reg.type.startswith("kubernetes:") and (reg.inputs or {}).get("kind") == kind:
            return copy.deepcopy(normalize(reg.plain()))
    raise AssertionError(f"the dev stack declares no {kind}")


def _cel(registry: conformance.SchemaRegistry, obj: dict[str, Any]) -> list[str]:
    return rejections(evaluate(obj, registry.schema(obj["apiVersion"], obj["kind"])))


def test_a_topology_whose_hostname_level_is_not_last_is_rejected(
    registry: conformance.SchemaRegistry, dev: Run
) -> None:
    topology = _program_object(dev, "Topology")
    assert _cel(registry, topology) == []
    levels = topology["spec"]["levels"]
    assert levels[-1] == {"nodeLabel": "kubernetes.io/hostname"}
    levels.insert(0, levels.pop())
    assert conformance.validate(topology, registry) == []  # the schema alone allows it
    (rejection,) = _cel(registry, topology)
    assert rejection.startswith("$.spec.levels: failed: the kubernetes.io/hostname label can only be used at the")


def test_a_cluster_queue_whose_flavor_does_not_cover_its_resources_is_rejected(
    registry: conformance.SchemaRegistry, dev: Run
) -> None:
    queue = _program_object(dev, "ClusterQueue")
    assert _cel(registry, queue) == []
    queue["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")
    assert conformance.validate(queue, registry) == []
    (rejection,) = _cel(registry, queue)
    assert rejection.startswith("$.spec.resourceGroups[0]: failed: flavors must have the same number of resources")


def test_a_gateway_with_duplicate_listener_names_is_rejected(registry: conformance.SchemaRegistry, dev: Run) -> None:
    gateway = _program_object(dev, "Gateway")
    assert _cel(registry, gateway) == []
    listener = copy.deepcopy(gateway["spec"]["listeners"][0])
    gateway["spec"]["listeners"].append({**listener, "port": listener["port"] + 1})
    assert "$.spec.listeners: failed: Listener name must be unique within the Gateway" in _cel(registry, gateway)
