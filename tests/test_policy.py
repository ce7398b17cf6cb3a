"""The policy pack (policy/): every rule on good and bad resources, and the pack as the Pulumi CLI runs it.

Resources are the real ones the program registers under the mock runtime (tests/harness.py), handed
to the rules the way pulumi_policy's analyzer hands them over: camelCase inputs through its
unknown-checking proxy, the provider reference, the resource options. Each rule also gets one
mutation of a real resource that must violate it. `TestPackOverGrpc` starts `policy/__main__.py`
as the CLI does and calls its Analyze endpoint, so the pack's wiring (enforcement levels, config,
stack name) is tested too.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import EnforcementLevel, PolicyProviderResource

from components.serving import HF_SECRET
from policy import rules
from tests.fakes import struct
from tests.harness import UNKNOWN, Registration, Run, ok, unwrap
from tests.policy_pack import args_for, policy, provider_of, violations
from tests.stack_config import ROOT, STACKS

HF_TOKEN = {"gke-tpu-slicing:hfToken": "hf_policy_test_token"}
POLICY_DIR = ROOT / "policy"
# The rules that apply to protected stacks only, each configured with its own `protectedStacks`.
STACK_POLICIES = ("protected-stack-cluster-deletion-protection", "protected-stack-pulumi-protect")


@pytest.fixture(scope="module")
def dev() -> Run:
    return ok()


@pytest.fixture(scope="module")
def with_token() -> Run:
    """The dev stack with an HF token: the only run that declares the HF token Secret."""
    return ok(secrets=HF_TOKEN)


def all_violations(run: Run, stack: str = "dev", **changes: Any) -> list[str]:
    return [
        f"{p.name}: {reg.type}::{reg.name}: {message}"
        for reg in run.registrations
        for p in rules.POLICIES
        for message in violations(p, args_for(reg, **changes), stack)
    ]


def mutated(source: Registration | dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """A registration's inputs (or these inputs) after `edit`."""
    out = copy.deepcopy(source.inputs if isinstance(source, Registration) else source)
    edit(out)
    return out


def tpu_pools(run: Run) -> list[Registration]:
    return [
        r for r in run.of_type(rules.NODE_POOL) if str(r.plain("nodeConfig").get("machineType", "")).startswith("tpu")
    ]


# The pack itself


def test_every_rule_is_mandatory_and_uniquely_named() -> None:
    names = [p.name for p in rules.POLICIES]
    assert len(names) == len(set(names)) == 9
    assert {p.enforcement_level for p in rules.POLICIES} == {EnforcementLevel.MANDATORY}


def test_every_rule_is_in_the_readme_table() -> None:
    section = (ROOT / "docs" / "policy.md").read_text()
    rows = {line.split("`")[1]: line for line in section.splitlines() if line.startswith("| `")}
    assert set(rows) == {p.name for p in rules.POLICIES}
    # A rule's settings are how a stack that differs on purpose passes it: its row names each one.
    settings = {(r.name, key) for r in rules.POLICIES if r.config_schema for key in r.config_schema.properties}
    assert sorted(s for s in settings if f"`{s[1]}`" not in rows[s[0]]) == []


def test_policy_requirements_pin_the_repository_versions() -> None:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line:
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version.strip()
    policy_pins = [line for line in (POLICY_DIR / "requirements.txt").read_text().splitlines() if "==" in line]
    assert {p.split("==")[0] for p in policy_pins} == {"pulumi", "pulumi-policy"}
    for line in policy_pins:
        name, version = line.split("==")
        assert pins[name] == version, f"policy/requirements.txt pins {line}, constraints.txt {name}=={pins[name]}"


# The real program passes every rule


@pytest.mark.parametrize(
    ("stack", "kwargs", "changes"),
    [
        *((stack, {"stack": stack}, {}) for stack in STACKS),
        ("dev", {"secrets": HF_TOKEN}, {}),  # the only run that declares the HF token Secret
        ("prod", {"overrides": {"gke-tpu-slicing:cluster": {"deletionProtection": True}}}, {"protect": True}),
    ],
    ids=[*STACKS, "dev-with-hf-token", "protected-with-deletion-protection-and-protect"],
)
def test_the_program_passes_every_rule_under_the_stacks_name(
    stack: str, kwargs: dict[str, Any], changes: dict[str, Any]
) -> None:
    assert all_violations(ok(**kwargs), stack=stack, **changes) == []


def test_the_rules_see_every_resource_they_are_about(dev: Run, with_token: Run) -> None:
    """Guards against a rule that passes because it never matches (wrong type token or property name)."""
    assert len(dev.of_type(rules.NETWORK)) == 1
    assert len(tpu_pools(dev)) == 2  # the dev stack's cubes
    assert len(dev.of_type(rules.CLUSTER)) == 1
    assert any(r.type.startswith("kubernetes:") for r in dev.registrations)
    # The HF token run declares the one Secret of serving, which the secret rules are about.
    assert [s.name for s in with_token.of_type(rules.K8S_SECRET) if s.name.startswith("serving-")] == [
        "serving-hf-token"
    ]
    secret = with_token.get(rules.K8S_SECRET, "serving-hf-token")
    assert unwrap(secret.inputs["metadata"])["name"] == rules.HF_SECRET == HF_SECRET


# One mutation of a real resource per rule


def _literal_token(inputs: dict[str, Any]) -> None:
    env = inputs["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["env"]
    entry = next(e for e in env if e["name"] == rules.HF_ENV)
    assert "valueFrom" in entry  # the program reads it from the Secret
    entry.pop("valueFrom")
    entry["value"] = "hf_literal"


def _reservation(kind: str) -> Callable[[dict[str, Any]], None]:
    return lambda i: i["nodeConfig"]["reservationAffinity"].update(consumeReservationType=kind)


NETWORK = ("tpu-network-mtu", lambda run: run.get(rules.NETWORK, "network-main"))
RESERVATION = ("tpu-node-pool-specific-reservation", lambda run: tpu_pools(run)[0])
WORKLOAD_POLICY = ("tpu-node-pool-workload-policy", lambda run: tpu_pools(run)[0])
NODE_ACCOUNT = ("node-pool-not-default-service-account", lambda run: run.get(rules.CLUSTER, "cluster-gke"))
SECRET_REF = (
    "hf-token-from-secret-ref",
    lambda run: run.get("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "serving-decode"),
)


@pytest.mark.parametrize(
    ("rule", "pick", "edit"),
    [
        pytest.param(*NETWORK, lambda i: i.update(mtu=1460), id="mtu-1460"),
        pytest.param(*NETWORK, lambda i: i.pop("mtu"), id="no-mtu"),
        pytest.param(*RESERVATION, _reservation("ANY_RESERVATION"), id="any-reservation"),
        pytest.param(*RESERVATION, _reservation("NO_RESERVATION"), id="no-reservation"),
        pytest.param(*RESERVATION, lambda i: i["nodeConfig"].pop("reservationAffinity"), id="no-affinity"),
        pytest.param(*RESERVATION, lambda i: i["nodeConfig"]["reservationAffinity"].update(values=[]), id="unnamed"),
        pytest.param(*WORKLOAD_POLICY, lambda i: i.pop("placementPolicy"), id="no-placement-policy"),
        pytest.param(*WORKLOAD_POLICY, lambda i: i["placementPolicy"].pop("policyName"), id="no-policy-name"),
        # GKE creates the default pool before the provider removes it (resource_container_cluster.go lines
        # 3515-3535): without a nodeConfig its nodes run as the Compute Engine default account for that while,
        # or fail where the account is disabled.
        pytest.param(*NODE_ACCOUNT, lambda i: i.pop("nodeConfig"), id="removed-default-pool-bare"),
        pytest.param(
            *NODE_ACCOUNT,
            lambda i: i.update(nodePools=[{"name": "extra", "nodeConfig": {"machineType": "e2"}}]),
            id="inline-node-pool",
        ),
        pytest.param(*SECRET_REF, _literal_token, id="literal-hf-token"),
    ],
)
def test_one_mutation_of_a_real_resource_violates_the_rule(
    with_token: Run, rule: str, pick: Callable[[Run], Registration], edit: Callable[[dict[str, Any]], None]
) -> None:
    reg = pick(with_token)
    assert violations(policy(rule), args_for(reg)) == []
    assert violations(policy(rule), args_for(reg, mutated(reg, edit))) != []


def test_reservation_rules_ignore_non_tpu_pools(dev: Run) -> None:
    system = dev.get(rules.NODE_POOL, "cluster-system")
    assert "reservationAffinity" not in system.plain("nodeConfig")
    for name in ("tpu-node-pool-specific-reservation", "tpu-node-pool-workload-policy"):
        assert violations(policy(name), args_for(system)) == []


@pytest.mark.parametrize(
    "account",
    [None, "default", "123456789012-compute@developer.gserviceaccount.com"],
    ids=["unset", "default", "compute-default"],
)
@pytest.mark.parametrize("which", ["system-pool", "tpu-pool", "kept-default-pool"])
def test_default_compute_service_account_violates(dev: Run, account: str | None, which: str) -> None:
    cluster = dev.get(rules.CLUSTER, "cluster-gke")
    # A cluster that keeps its default pool: that pool runs as the cluster's nodeConfig says.
    kept = mutated(
        cluster,
        lambda i: i.update(
            removeDefaultNodePool=False,
            nodeConfig={"machineType": "n2-standard-32", "serviceAccount": "nodes@p.iam.gserviceaccount.com"},
        ),
    )
    reg, inputs = {
        "system-pool": (dev.get(rules.NODE_POOL, "cluster-system"), None),
        "tpu-pool": (tpu_pools(dev)[0], None),
        "kept-default-pool": (cluster, kept),
    }[which]

    def edit(inputs: dict[str, Any]) -> None:
        inputs["nodeConfig"].pop("serviceAccount")
        if account is not None:
            inputs["nodeConfig"]["serviceAccount"] = account

    p = policy("node-pool-not-default-service-account")
    assert violations(p, args_for(reg, inputs)) == []
    assert violations(p, args_for(reg, mutated(reg if inputs is None else inputs, edit))) != []


def test_cluster_of_a_protected_stack_without_deletion_protection_violates(dev: Run) -> None:
    cluster = dev.get(rules.CLUSTER, "cluster-gke")
    assert cluster.inputs["deletionProtection"] is False  # the dev stack turns it off
    p = policy("protected-stack-cluster-deletion-protection")
    assert violations(p, args_for(cluster), stack="dev") == []
    for stack in rules.PROTECTED_STACKS:
        assert violations(p, args_for(cluster), stack=stack) != []
    unset = mutated(cluster, lambda i: i.pop("deletionProtection"))
    assert violations(p, args_for(cluster, unset), stack="prod") != []
    protected = mutated(cluster, lambda i: i.update(deletionProtection=True))
    assert violations(p, args_for(cluster, protected), stack="prod") == []


@pytest.mark.parametrize("which", ["cluster-gke", "cluster-system", "capacity-tpu7-pool-1", "capacity-policy"])
def test_unprotected_capacity_of_a_protected_stack_violates(dev: Run, which: str) -> None:
    reg = next(r for r in dev.registrations if r.name == which)
    p = policy("protected-stack-pulumi-protect")
    assert reg.protect is False  # the dev stack protects nothing
    assert violations(p, args_for(reg), stack="dev") == []
    assert violations(p, args_for(reg), stack="prod") != []
    assert violations(p, args_for(reg, protect=True), stack="prod") == []


def test_protected_stacks_come_from_the_policy_config(dev: Run) -> None:
    cluster = dev.get(rules.CLUSTER, "cluster-gke")
    p = policy("protected-stack-cluster-deletion-protection")
    config = {"protectedStacks": ["dev"]}
    assert violations(p, args_for(cluster, config=config), stack="dev") != []
    assert violations(p, args_for(cluster, config=config), stack="prod") == []


def test_hf_token_secret_without_secret_outputs_violates(with_token: Run) -> None:
    secret = with_token.get(rules.K8S_SECRET, "serving-hf-token")
    # The program's Secret: the value is a Pulumi secret and the typed resource marks both fields.
    assert set(rules.SECRET_FIELDS) <= set(secret.options["additionalSecretOutputs"])
    assert unwrap(secret.inputs["stringData"]) == {"HF_TOKEN": HF_TOKEN["gke-tpu-slicing:hfToken"]}
    p = policy("hf-token-secret-encrypted")
    assert violations(p, args_for(secret)) == []
    # The same Secret declared as a generic object (no secret outputs) is rejected.
    found = violations(p, args_for(secret, additional_secret_outputs=[]))
    assert found != []
    assert not any(HF_TOKEN["gke-tpu-slicing:hfToken"] in m for m in found)  # never echoes the token


@pytest.mark.parametrize("provider", ["none", "default", "default_4_34_2"])
def test_kubernetes_resource_without_the_explicit_provider_violates(dev: Run, provider: str) -> None:
    p = policy("kubernetes-explicit-provider")
    k8s = [r for r in dev.registrations if r.type.startswith("kubernetes:")]
    assert k8s
    for reg in k8s:
        assert violations(p, args_for(reg)) == []
        urn = f"urn:pulumi:dev::gke-tpu-slicing::pulumi:providers:kubernetes::{provider}"
        other = None if provider == "none" else PolicyProviderResource(rules.K8S_PROVIDER, {}, urn, provider)
        assert violations(p, args_for(reg, provider=other)) != [], reg.name


def test_non_kubernetes_resources_need_no_kubernetes_provider(dev: Run) -> None:
    network = dev.get(rules.NETWORK, "network-main")
    assert violations(policy("kubernetes-explicit-provider"), args_for(network, provider=None)) == []


# The pack as the Pulumi CLI runs it: `python policy/`, then gRPC calls from the engine


def analyze_request(reg: Registration, inputs: dict[str, Any] | None = None) -> analyzer_pb2.AnalyzeRequest:
    """The request the engine sends for one resource (secrets as signature objects, provider and options)."""
    request = analyzer_pb2.AnalyzeRequest(
        type=reg.type,
        name=reg.name,
        urn=reg.urn,
        properties=struct(copy.deepcopy(reg.inputs if inputs is None else inputs)),
        options=analyzer_pb2.AnalyzerResourceOptions(
            parent=reg.parent,
            protect=reg.protect,
            additionalSecretOutputs=reg.options.get("additionalSecretOutputs", []),
        ),
    )
    provider = provider_of(reg)
    if provider is not None:
        request.provider.CopyFrom(
            analyzer_pb2.AnalyzerProviderResource(type=provider.resource_type, urn=provider.urn, name=provider.name)
        )
    return request


class Pack:
    def __init__(self, stack: str) -> None:
        env = {**os.environ, "PULUMI_PROJECT": "gke-tpu-slicing", "PULUMI_STACK": stack, "PULUMI_DRY_RUN": "true"}
        self.process = subprocess.Popen(
            [sys.executable, str(POLICY_DIR)], cwd=POLICY_DIR, env=env, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        port = int(self.process.stdout.readline())
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = analyzer_pb2_grpc.AnalyzerStub(self.channel)

    def analyze(self, request: analyzer_pb2.AnalyzeRequest) -> list[analyzer_pb2.AnalyzeDiagnostic]:
        return list(self.stub.Analyze(request, timeout=30).diagnostics)

    def close(self) -> None:
        self.channel.close()
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def prod_pack() -> Iterator[Pack]:
    pack = Pack("prod")
    yield pack
    pack.close()


class TestPackOverGrpc:
    def test_pack_declares_every_rule_mandatory(self, prod_pack: Pack) -> None:
        info = prod_pack.stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
        assert info.name == rules.PACK_NAME
        assert {p.name: p.enforcementLevel for p in info.policies} == {
            p.name: analyzer_pb2.MANDATORY for p in rules.POLICIES
        }

    def test_real_resources_pass_and_mutations_fail(self, prod_pack: Pack, with_token: Run) -> None:
        # Stack "prod" is protected: the dev stack's cluster (deletion protection off) and its unprotected
        # cluster, pools and workload policy are the only violations.
        found = {
            (d.policyName, r.name) for r in with_token.registrations for d in prod_pack.analyze(analyze_request(r))
        }
        unprotected = [
            r for r in with_token.registrations if r.type in (rules.CLUSTER, rules.NODE_POOL, rules.RESOURCE_POLICY)
        ]
        assert len(unprotected) == 5  # cluster, system pool, 2 TPU pools, workload policy
        assert found == {("protected-stack-cluster-deletion-protection", "cluster-gke")} | {
            ("protected-stack-pulumi-protect", r.name) for r in unprotected
        }
        assert all(
            d.enforcementLevel == analyzer_pb2.MANDATORY
            for d in prod_pack.analyze(analyze_request(with_token.get(rules.CLUSTER, "cluster-gke")))
        )
        network = with_token.get(rules.NETWORK, "network-main")
        bad = prod_pack.analyze(analyze_request(network, mutated(network, lambda i: i.update(mtu=1500))))
        assert [d.policyName for d in bad] == ["tpu-network-mtu"]

    def test_secret_inputs_arrive_as_the_engine_sends_them(self, prod_pack: Pack, with_token: Run) -> None:
        """The engine keeps secrets as signature objects; the pack must still read the Secret's name."""
        secret = with_token.get(rules.K8S_SECRET, "serving-hf-token")
        request = analyze_request(secret)
        request.options.ClearField("additionalSecretOutputs")
        assert [d.policyName for d in prod_pack.analyze(request)] == ["hf-token-secret-encrypted"]

    def test_a_value_unknown_during_preview_is_advisory_not_a_violation(self, prod_pack: Pack, with_token: Run) -> None:
        """A new service account's email is unknown in the first preview: the rule runs at `up` instead."""
        pool = tpu_pools(with_token)[0]
        unknown = mutated(pool, lambda i: i["nodeConfig"].update(serviceAccount=UNKNOWN))
        rule = "node-pool-not-default-service-account"
        found = [d for d in prod_pack.analyze(analyze_request(pool, unknown)) if d.policyName == rule]
        assert [d.enforcementLevel for d in found] == [analyzer_pb2.ADVISORY]
        assert "during preview" in found[0].message

    def test_policy_config_changes_the_protected_stacks(self, with_token: Run) -> None:
        pack = Pack("prod")
        try:
            config = analyzer_pb2.PolicyConfig(
                enforcementLevel=analyzer_pb2.MANDATORY, properties=struct({"protectedStacks": ["staging"]})
            )
            cluster = analyze_request(with_token.get(rules.CLUSTER, "cluster-gke"))
            assert {d.policyName for d in pack.analyze(cluster)} == set(STACK_POLICIES)
            pack.stub.Configure(
                analyzer_pb2.ConfigureAnalyzerRequest(policyConfig=dict.fromkeys(STACK_POLICIES, config)), timeout=30
            )
            assert pack.analyze(cluster) == []
        finally:
            pack.close()
