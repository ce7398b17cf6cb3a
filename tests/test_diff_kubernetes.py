"""The change preview's Kubernetes facts (components/model/diff/kubernetes.py): the pinned CRDs' CEL
transition rules found, cited at the right line, and evaluated."""

from __future__ import annotations

import copy
import re
from functools import cache
from typing import Any

import yaml

from components.model.diff import facts, kubernetes, paths
from tests import cel_rules, upstream
from tests.harness import stack_run


@cache
def crd_documents() -> list[tuple[str, dict[str, Any]]]:
    base = upstream.require("schemas/crds", "schemas/monitoring", "upstream-next")
    files = [
        *sorted((base / "schemas/crds").glob("*.yaml")),
        *sorted((base / "schemas/monitoring").glob("*.yaml")),
        *sorted((base / "upstream-next").rglob("crds/*.yaml")),
    ]
    listed = {f.path for f in upstream.load()}
    return [
        (p.relative_to(base).as_posix(), doc)
        for p in files
        if p.relative_to(base).as_posix() in listed
        for doc in yaml.load_all(p.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if doc
    ]


@cache
def crd_versions() -> dict[str, tuple[str, dict[str, Any]]]:
    """Type token -> (file, openAPIV3Schema) of every version of a pinned CRD."""
    return {
        f"kubernetes:{doc['spec']['group']}/{version['name']}:{doc['spec']['names']['kind']}": (
            file,
            version["schema"]["openAPIV3Schema"],
        )
        for file, doc in crd_documents()
        for version in doc["spec"]["versions"]
    }


def transition_rules() -> dict[str, list[tuple[str, cel_rules.Rule]]]:
    return {t: [(f, r) for r in cel_rules.rules(schema) if r.transition] for t, (f, schema) in crd_versions().items()}


def crd_schema(token: str) -> dict[str, Any]:
    return crd_versions()[token][1]


def _mutate(value: Any) -> Any:
    if isinstance(value, str):
        return value + "-changed"
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 else [*value, copy.deepcopy(value[0])] if value else ["x"]
    if isinstance(value, dict):
        return {**value, "example.com/changed": "true"}
    if isinstance(value, bool):
        return not value
    return value + 1


def test_every_transition_rule_of_a_modelled_kind_is_a_fact_at_its_line() -> None:
    base = upstream.root()
    found = transition_rules()
    assert "kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet" in found  # read from upstream-next
    assert "kubernetes:monitoring.googleapis.com/v1:PodMonitoring" in found
    for token, rules in found.items():
        model = kubernetes.FACTS.get(token)
        if model is None:
            continue  # a version or kind the program does not apply (e.g. Kueue's v1beta1)
        cel = [f for f in model if f.rule.startswith("CEL: ")]
        assert sorted(f.rule.removeprefix("CEL: ") for f in cel) == sorted(r.message for _, r in rules), token
        for fact in cel:
            file, line = fact.source.removeprefix("../shared/").rsplit(":", 1)
            text = (base / file).read_text().splitlines()
            assert text[int(line) - 1].strip().startswith("rule:"), fact.source
            assert fact.rule.removeprefix("CEL: ") in text[int(line) - 2], fact.source


def test_the_cel_facts_decide_as_the_apiserver_evaluates_the_rules() -> None:
    """For each CEL fact on an object the program applies: changing the field is rejected by the rule exactly
    when the model says so, and the unchanged object passes."""
    checked = 0
    for reg in stack_run("dev").registrations:
        cel = [f for f in kubernetes.FACTS.get(reg.type, ()) if f.rule.startswith("CEL: ")]
        if not cel:
            continue
        schema, old = crd_schema(reg.type), reg.plain()
        assert cel_rules.rejections(cel_rules.evaluate_update(old, old, schema)) == [], reg.name
        for fact in cel:
            for at, value in paths.values(old, fact.parsed):
                new = copy.deepcopy(old)
                paths.assign(new, at, _mutate(value))
                verdict = cel_rules.rejections(cel_rules.evaluate_update(old, new, schema))
                assert bool(verdict) == facts.triggered(fact, old, new), (reg.name, fact.path, verdict)
                assert verdict, (reg.name, fact.path)
                checked += 1
    assert checked >= 4  # Topology levels, LocalQueue clusterQueue, AdmissionCheck controllerName, flavor labels


def test_a_flavor_without_a_topology_may_change_its_labels() -> None:
    """`!has(oldSelf.topologyName) || ...`: the guard of the ResourceFlavor facts, evaluated both ways."""
    schema = crd_schema("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")
    old = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    old["spec"] = {"nodeLabels": {"a": "1"}}
    new = copy.deepcopy(old)
    new["spec"]["nodeLabels"] = {"a": "2"}
    labels = next(
        f for f in kubernetes.FACTS["kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"] if "nodeLabels" in f.path
    )
    assert not cel_rules.rejections(cel_rules.evaluate_update(old, new, schema))
    assert not facts.triggered(labels, old, new)
    old["spec"]["topologyName"] = new["spec"]["topologyName"] = "t"
    assert cel_rules.rejections(cel_rules.evaluate_update(old, new, schema))
    assert facts.triggered(labels, old, new)


def test_every_kubernetes_fact_cites_a_pinned_file_and_line() -> None:
    k = kubernetes
    pinned = (f"{k.PK}:", f"{k.CRDS}/", f"{k.KUEUE} ", f"{k.KUEUE_NEXT} ", f"{k.LWS_WEBHOOK}:", f"{k.JOBSET_WEBHOOK}:")
    for type_, facts_ in kubernetes.FACTS.items():
        for fact in (*kubernetes.METADATA, *facts_):
            assert fact.source.startswith(pinned) and re.search(r":\d+$", fact.source), (type_, fact)
            paths.parse(fact.path)  # a well-formed path
            if fact.guard:
                paths.parse(fact.guard)
