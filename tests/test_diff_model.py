"""The change preview's model agrees with its sources: the installed SDK's property names, the pinned CRDs'
CEL transition rules (found, cited at the right line, and evaluated), and every type the program registers.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.model.diff import engine, facts, gcp, kubernetes, paths, readback
from tests import cel_rules, provider_schema, upstream
from tests.harness import STACKS, Run, run_program

SDK = Path(__import__("pulumi_gcp").__file__).parent
# Types the model knows that no stack registers (every registered one is checked below; the charts' own kinds,
# a PodDisruptionBudget among them, by tests/test_chart_diff.py).
COMING = ["kubernetes:disaggregatedset.x-k8s.io/v1:DisaggregatedSet", "pulumi-python:dynamic:Resource"]


@cache
def stack_run(stack: str) -> Run:
    run = run_program(stack=stack)
    assert run.error is None, run.error
    return run


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


# ------------------------------------------------------------------------------------------- Google Cloud


@cache
def sdk_names(module: str) -> frozenset[str]:
    """Every wire name (camelCase) the installed pulumi-gcp SDK knows in a module."""
    names: set[str] = set()
    for f in (SDK / module).glob("*.py"):
        text = f.read_text()
        names |= set(re.findall(r'pulumi\.getter\(name="([A-Za-z0-9]+)"\)', text))
        names |= set(re.findall(r"@pulumi\.getter\n    def ([a-z0-9]+)\(", text))
    return frozenset(names)


@pytest.mark.parametrize("type_", sorted(gcp.FORCE_NEW))
def test_every_force_new_path_names_properties_of_the_installed_sdk(type_: str) -> None:
    module = type_.split(":")[1].split("/")[0]
    names = sdk_names(module)
    for fact in gcp.FORCE_NEW[type_]:
        unknown = [seg for seg in fact.parsed if seg not in names]
        assert unknown == [], f"{type_} {fact.path}: {unknown} not in pulumi_gcp/{module}"
        assert re.fullmatch(rf"{re.escape(gcp.TPGB)}\S+\.go:\d+", fact.source)


@cache
def provider() -> provider_schema.Reader:
    return provider_schema.reader(upstream.require(provider_schema.BASE) / provider_schema.BASE)


def test_the_reader_reads_every_pinned_provider_file_and_names_what_it_cannot() -> None:
    r = provider()
    pinned = {f.path.removeprefix(provider_schema.BASE + "/") for f in upstream.under(provider_schema.BASE)}
    files = {f.rel for p in r.packages.values() for f in p.files}
    assert files == pinned and len(files) == 18
    declared = {rel: r.file_attributes(rel) for rel in sorted(files)}
    assert all(any(declared[rel].values()) for rel in files), "a file whose schemas the reader did not find"
    assert {provider_schema.unread(p) for p in r.problems} == set(provider_schema.UNREAD)
    assert set(provider_schema.ROOTS) == set(gcp.FORCE_NEW)


# What the provider's source says at the line a fact that is no schema flag cites, by the fact's condition.
CUSTOMIZE_DIFF = {
    facts.SHRINK: 'customdiff.ForceNewIfChange("{}", IsShrinkageIpCidr)',
    facts.DISABLED: 'customdiff.ForceNewIfChange("{}", isBeenEnabled)',
    facts.GROW: "/expandIpCidrRange",  # the update call the API refuses for a proxy-only subnet
}


@pytest.mark.parametrize("type_", sorted(gcp.FORCE_NEW))
def test_every_force_new_fact_is_the_provider_sources(type_: str) -> None:
    """The attribute is there, ForceNew, at the cited line, a block when the fact is; a CustomizeDiff fact's
    attribute (SHRINK, DISABLED) and an API refusal's are there and not ForceNew."""
    attrs = provider_schema.type_attributes(provider(), type_)
    for fact in gcp.FACTS[type_]:
        attr = attrs.get(fact.path)
        assert attr is not None, f"{type_} {fact.path}: not in the provider's schema"
        if fact.effect == facts.REPLACE and fact.when in (facts.ALWAYS, facts.PRESENCE):
            assert attr.force_new, f"{type_} {fact.path}: not ForceNew in {attr.file}:{attr.start}"
            assert fact.source == f"{gcp.TPGB}{attr.file}:{attr.line}", (type_, fact.path)
            assert attr.block == (fact.when == facts.PRESENCE), (type_, fact.path)
        else:
            assert not attr.force_new, (type_, fact.path)
            assert fact.guard == "" or fact.guard in attrs, (type_, fact.guard)
            # the cited line is the CustomizeDiff (or the API call) that makes the fact
            file, line = fact.source.removeprefix(gcp.TPGB).split()[0].rsplit(":", 1)
            text = (upstream.root() / provider_schema.BASE / file).read_text().splitlines()[int(line) - 1]
            assert CUSTOMIZE_DIFF[fact.when].format(attr.path) in text, (type_, fact.source, text)


@pytest.mark.parametrize("type_", sorted(gcp.FORCE_NEW))
def test_every_force_new_attribute_of_the_sources_is_a_fact_or_excluded(type_: str) -> None:
    attrs = provider_schema.type_attributes(provider(), type_)
    paths_ = {f.path for f in gcp.FORCE_NEW[type_]}
    missing = [
        p for p, a in attrs.items() if a.force_new and p not in paths_ and not provider_schema.excluded(type_, p)
    ]
    assert missing == [], f"{type_}: {missing}: `python -m tests.provider_schema --write`"
    for pattern in provider_schema.EXCLUDED.get(type_, {}):
        assert any(a.force_new and provider_schema.excluded(type_, p) for p, a in attrs.items()), pattern


def test_the_generated_table_is_the_sources() -> None:
    """Byte for byte what `python -m tests.provider_schema --write` writes, so a human never types a line."""
    assert provider_schema.TABLE.read_text() == provider_schema.table(provider()), (
        "run `python -m tests.provider_schema --write`"
    )


@pytest.mark.parametrize("type_", sorted(gcp.API_REFUSALS))
def test_every_api_refusal_names_properties_of_the_installed_sdk_and_the_provider_line(type_: str) -> None:
    """The refused update's path and its guard are SDK properties; the source cites the provider's call."""
    module = type_.split(":")[1].split("/")[0]
    names = sdk_names(module)
    for fact in gcp.API_REFUSALS[type_]:
        assert fact.effect == facts.REJECT and fact in gcp.FACTS[type_]
        for path in (fact.path, fact.guard):
            assert [seg for seg in paths.parse(path) if seg not in names] == [], (type_, path)
        assert re.match(rf"{re.escape(gcp.TPGB)}\S+\.go:\d+ ", fact.source)


def test_the_pinned_sdk_is_the_one_the_facts_are_for() -> None:
    plugin = json.loads((SDK / "pulumi-plugin.json").read_text())
    assert plugin["version"] == "10.2.0"
    # The 8.x provider removed these resources (version_8_upgrade.html.markdown L137-147); 10.x does not have them.
    assert not (SDK / "beyondcorp" / "app_connection.py").exists()


# ------------------------------------------------------------------------------------------- CRDs and CEL


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
def transition_rules() -> dict[str, list[tuple[str, cel_rules.Rule]]]:
    """Type token -> (file, rule) for every transition rule of a served version of a pinned CRD."""
    out: dict[str, list[tuple[str, cel_rules.Rule]]] = {}
    for file, doc in crd_documents():
        group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
        for version in doc["spec"]["versions"]:
            token = f"kubernetes:{group}/{version['name']}:{kind}"
            rules = cel_rules.rules(version["schema"]["openAPIV3Schema"])
            out[token] = [(file, r) for r in rules if r.transition]
    return out


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


@cache
def crd_schema(token: str) -> dict[str, Any]:
    for _, doc in crd_documents():
        for version in doc["spec"]["versions"]:
            if f"kubernetes:{doc['spec']['group']}/{version['name']}:{doc['spec']['names']['kind']}" == token:
                return version["schema"]["openAPIV3Schema"]
    raise KeyError(token)


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


# ------------------------------------------------------------------------------------------- read-back


def test_every_read_back_rule_cites_its_source_and_names_a_modelled_type() -> None:
    for rule in readback.RULES:
        assert rule.source and rule.fact, rule
        assert rule.type == "kubernetes:*" or engine.facts_of(rule.type) is not None, rule.type


def test_the_dashboard_suppression_is_the_providers() -> None:
    """removeComputedKeys drops what the API added, not what it dropped: a default value sent is a diff."""
    equal = readback.SUPPRESSORS[(readback.DASHBOARD, "dashboardJson")]
    config = json.dumps({"displayName": "d", "tiles": [{"xPos": 0, "width": 6}]})
    assert not equal(json.dumps({"displayName": "d", "tiles": [{"width": 6}], "etag": "e"}), config)
    assert equal(json.dumps({"displayName": "d", "tiles": [{"xPos": 0, "width": 6}], "etag": "e"}), config)
    stored = {"type": readback.DASHBOARD, "name": "x", "inputs": {"dashboardJson": config}}
    (after,) = readback.read_back([stored])
    assert "xPos" not in after["inputs"]["dashboardJson"] and '"etag"' in after["inputs"]["dashboardJson"]


def test_the_read_back_model_catches_what_a_pool_must_declare() -> None:
    """What the TPU pools declare is exactly what GKE stores: sending a placement type, or not ignoring the SMT
    block GKE reports, is a change on every second run (a replacement, for the ForceNew SMT block)."""
    pool = next(r for r in stack_run("dev").registrations if r.name == "capacity-tpu7-pool-1")
    policy = next(r for r in stack_run("dev").registrations if r.type == readback.POLICY)
    from components.cli.snapshot import records

    base = records([policy, pool])
    assert {c.action for c in engine.diff(readback.read_back(base), base, readback.SUPPRESSORS).changes} == {"same"}
    typed = copy.deepcopy(base)
    typed[1]["inputs"]["placementPolicy"]["type"] = "COMPACT"
    (_, change) = engine.diff(readback.read_back(typed), typed, readback.SUPPRESSORS).changes
    assert change.action == engine.UPDATE and change.properties == ["placementPolicy.type"]
    unignored = copy.deepcopy(base)
    unignored[1]["options"]["ignoreChanges"] = []
    (_, change) = engine.diff(readback.read_back(unignored), unignored, readback.SUPPRESSORS).changes
    assert change.action == engine.REPLACE and change.delete_first
    assert "nodeConfig.advancedMachineFeatures: ForceNew block" in change.reason


def test_every_kubernetes_fact_cites_a_pinned_file_and_line() -> None:
    k = kubernetes
    pinned = (f"{k.PK}:", f"{k.CRDS}/", f"{k.KUEUE} ", f"{k.LWS_WEBHOOK}:", f"{k.JOBSET_WEBHOOK}:")
    for type_, facts_ in kubernetes.FACTS.items():
        for fact in (*kubernetes.METADATA, *facts_):
            assert fact.source.startswith(pinned) and re.search(r":\d+$", fact.source), (type_, fact)
            paths.parse(fact.path)  # a well-formed path
            if fact.guard:
                paths.parse(fact.guard)


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


def test_a_change_inside_a_node_config_replaces_the_cluster_or_pool_as_the_provider_does() -> None:
    """node_config.go's inner ForceNew fields apply to the cluster's node_config too (it is schemaNodeConfig(),
    resource_container_cluster.go:1848), and the pool's whole block is ForceNew (node_config.go:284)."""
    from components.cli.snapshot import records

    run = stack_run("dev")
    (cluster,) = copy.deepcopy(records([run.get("gcp:container/cluster:Cluster", "cluster-gke")]))
    cluster["options"]["ignoreChanges"] = ["initialNodeCount"]
    moved = copy.deepcopy(cluster)
    moved["inputs"]["nodeConfig"]["serviceAccount"] = "other@my-tpu-project.iam.gserviceaccount.com"
    (change,) = engine.diff([cluster], [moved]).changes
    assert change.action == engine.REPLACE and "nodeConfig.serviceAccount: ForceNew" in change.reason
    assert "services/container/node_config.go:647" in change.reason
    (pool,) = records([run.get("gcp:container/nodePool:NodePool", "cluster-system")])  # no ignoreChanges
    bare = copy.deepcopy(pool)
    bare["inputs"].pop("nodeConfig")
    (change,) = engine.diff([pool], [bare]).changes
    assert change.action == engine.REPLACE and "nodeConfig: ForceNew block" in change.reason


def test_an_unknown_inside_a_force_new_block_replaces_only_through_a_force_new_field() -> None:
    """SDKv2 compares a ForceNew block's item count: an unknown label inside the pool's nodeConfig updates it, an
    unknown service account (ForceNew itself, node_config.go:647) replaces it."""
    from tests.test_diff import record, urn

    account, pool = "gcp:serviceaccount/account:Account", "gcp:container/nodePool:NodePool"
    deps = {"nodeConfig": [urn("sa", account)]}

    def diff(node_config: dict[str, Any]) -> engine.Change:
        inputs = {"cluster": "c", "nodeConfig": node_config}
        old = [record("sa", account, {"accountId": "a"}), record("p", pool, inputs, property_dependencies=deps)]
        new = [record("sa", account, {"accountId": "b"}), record("p", pool, inputs, property_dependencies=deps)]
        return next(c for c in engine.diff(old, new).changes if c.name == "p")

    assert diff({"labels": {"owner": "<sa.id>"}}).action == engine.UPDATE
    change = diff({"serviceAccount": "<sa.id>"})
    assert change.action == engine.REPLACE and "nodeConfig.serviceAccount: unknown, ForceNew" in change.reason


def test_the_temporary_default_pool_runs_as_the_node_account_and_never_replaces_the_cluster() -> None:
    """The cluster's node_config is the default pool's, which GKE creates and the provider deletes right after
    (resource_container_cluster.go lines 3336-3338, 3515-3535): it must name the dedicated node account (the
    Compute Engine default one is disabled or deleted under common organisation policies). The block is
    ForceNew and GKE returns none once that pool is gone (k8s-config-connector#8651): ignored, the second run
    is a no-op; not ignored, it would replace the cluster."""
    run = stack_run("dev")
    cluster = run.get("gcp:container/cluster:Cluster", "cluster-gke")
    account = run.get("gcp:serviceaccount/account:Account", "identity-nodes")
    assert cluster.inputs["nodeConfig"] == {
        "serviceAccount": f"{account.inputs['accountId']}@my-tpu-project.iam.gserviceaccount.com",
        "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
    }
    assert cluster.inputs["removeDefaultNodePool"] is True
    from components.cli.snapshot import records

    base = records([cluster])
    assert {c.action for c in engine.diff(readback.read_back(base), base, readback.SUPPRESSORS).changes} == {"same"}
    unignored = copy.deepcopy(base)
    unignored[0]["options"]["ignoreChanges"] = ["initialNodeCount"]
    (change,) = engine.diff(readback.read_back(unignored), unignored, readback.SUPPRESSORS).changes
    assert change.action == engine.REPLACE and "nodeConfig: ForceNew block" in change.reason
    # A stack created before the block existed: its state has none, and the ignored block changes nothing.
    before = copy.deepcopy(base)
    before[0]["inputs"].pop("nodeConfig")
    assert {c.action for c in engine.diff(before, base, readback.SUPPRESSORS).changes} == {"same"}
