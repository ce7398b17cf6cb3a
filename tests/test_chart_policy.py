"""The policy pack on the objects inside the charts (rendered offline, tests/conftest.py `rendered`): each passes
every rule, and the Kubernetes rules see inside the charts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.cli import charts
from components.cli.chart_diff import CHART, child_name, type_token
from components.cli.mockrun import Registration
from policy import rules
from tests.harness import Run, ok
from tests.policy_pack import args_for, policy, violations
from tests.stack_config import OPT_IN_ADDONS

# ------------------------------------------------------------------------------------------- the policy pack

# The chart objects a policy rule may pass over, each with its reason: (rule, chart child's Pulumi name) -> why.
# Empty: every rendered object passes every rule. A new violation fails below until it is fixed (through the
# values the program sets, or a transform) or recorded here, narrowly, with its reason; an entry that no longer
# matches a violation fails too.
POLICY_EXEMPTIONS: dict[tuple[str, str], str] = {}


def chart_children(run: Run, rendered: dict[str, charts.Rendered]) -> list[Registration]:
    """Each rendered object as the engine registers it and hands it to the pack: a child of its Chart, named and
    typed as pulumi-kubernetes names it (components/cli/chart_diff.py), through the Chart's provider (children
    inherit it), with no additional secret outputs: the provider registers a chart's Secret untyped, its data
    wrapped as secret values but without the typed resource's option (pulumi/pulumi-kubernetes@94977969
    provider/pkg/provider/yaml/v2/yaml.go:390-396, sdk/go/kubernetes/yaml/v2/kinds.go:729-735)."""
    out = []
    for resource, result in rendered.items():
        chart = run.get(CHART, resource)
        head = chart.urn.rpartition("::")[0]
        for obj in result.objects:
            type_, name = type_token(obj["apiVersion"], obj["kind"]), child_name(resource, obj)
            # type, name, URN, custom, remote, parent, provider, dependencies, property dependencies, inputs
            out.append(
                Registration(
                    type_, name, f"{head}${type_}::{name}", True, False, chart.urn, chart.provider, [], {}, obj
                )
            )
    return out


@pytest.fixture(scope="module")
def children(rendered: dict[str, charts.Rendered]) -> list[Registration]:
    return chart_children(ok(OPT_IN_ADDONS), rendered)  # the run the charts were rendered from


def pack_violations(children: list[Registration], stack: str) -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for child in children:
        for rule in rules.POLICIES:
            messages = violations(rule, args_for(child), stack)
            if messages:
                found[(rule.name, child.name)] = messages
    return found


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_chart_object_passes_every_policy_rule(children: list[Registration], stack: str) -> None:
    """The pack analyzes a chart's children like any resource (`pulumi preview` fails on a mandatory violation)."""
    found = pack_violations(children, stack)
    assert {k: v for k, v in found.items() if k not in POLICY_EXEMPTIONS} == {}
    assert sorted(set(POLICY_EXEMPTIONS) - set(found)) == []  # every exemption still needed
    assert len(children) > 100 and {c.type for c in children} >= {"kubernetes:core/v1:Secret"}


def test_the_kubernetes_rules_see_inside_the_charts(children: list[Registration]) -> None:
    """Guards against a pass by never matching: each rule about Kubernetes objects fires on a chart object changed
    to break it (the other rules are about Google Cloud types and return on any Kubernetes one)."""

    def broken(rule: str, child: Registration, edit: Any = None, **changes: Any) -> list[str]:
        inputs = copy.deepcopy(child.inputs)
        if edit:
            edit(inputs)
        return violations(policy(rule), args_for(child, inputs, **changes))

    # Every child through a default provider instead of the cluster's.
    assert all(broken("kubernetes-explicit-provider", c, provider=None) for c in children)
    # The picker's Deployment with the token as a literal env value.
    (epp,) = [c for c in children if c.type == "kubernetes:apps/v1:Deployment" and c.name.startswith("serving-router")]

    def literal_token(inputs: dict[str, Any]) -> None:
        container = inputs["spec"]["template"]["spec"]["containers"][0]
        container.setdefault("env", []).append({"name": rules.HF_ENV, "value": "hf_literal"})

    assert broken("hf-token-from-secret-ref", epp, literal_token) != []
    # A chart's Secret under the token Secret's name: a chart child has no typed Secret's secret outputs.
    secret = next(c for c in children if c.type == rules.K8S_SECRET)
    assert broken("hf-token-secret-encrypted", secret, lambda i: i["metadata"].update(name=rules.HF_SECRET)) != []
