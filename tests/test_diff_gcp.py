"""The change preview's Google Cloud facts (components/model/diff/gcp.py, gcp_force_new.py) against the
installed SDK and the pinned provider sources, and the API refusals that are no ForceNew."""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from components.cli.snapshot import records
from components.model.diff import engine, facts, gcp, paths, readback
from tests import provider_schema, upstream
from tests.harness import stack_run
from tests.preview import record, urn

SDK = Path(__import__("pulumi_gcp").__file__).parent


@cache
def sdk_names(type_: str) -> frozenset[str]:
    """Every wire name (camelCase) the installed pulumi-gcp SDK knows in a type's module."""
    names: set[str] = set()
    for f in (SDK / type_.split(":")[1].split("/")[0]).glob("*.py"):
        text = f.read_text()
        names |= set(re.findall(r'pulumi\.getter\(name="([A-Za-z0-9]+)"\)', text))
        names |= set(re.findall(r"@pulumi\.getter\n    def ([a-z0-9]+)\(", text))
    return frozenset(names)


@cache
def provider() -> provider_schema.Reader:
    return provider_schema.reader(upstream.require(provider_schema.BASE) / provider_schema.BASE)


# What the provider's source says at the line a fact that is no schema flag cites, by the fact's condition.
CUSTOMIZE_DIFF = {
    facts.SHRINK: 'customdiff.ForceNewIfChange("{}", IsShrinkageIpCidr)',
    facts.DISABLED: 'customdiff.ForceNewIfChange("{}", isBeenEnabled)',
    facts.GROW: "/expandIpCidrRange",  # the update call the API refuses for a proxy-only subnet
}


SUBNET = "gcp:compute/subnetwork:Subnetwork"


def subnet(cidr: str, purpose: str) -> dict[str, Any]:
    return record("s", SUBNET, {"name": "s", "ipCidrRange": cidr, "purpose": purpose, "region": "r"})


@pytest.mark.parametrize("type_", sorted(gcp.FORCE_NEW))
def test_every_force_new_path_names_properties_of_the_installed_sdk(type_: str) -> None:
    names = sdk_names(type_)
    for fact in gcp.FORCE_NEW[type_]:
        unknown = [seg for seg in fact.parsed if seg not in names]
        assert unknown == [], f"{type_} {fact.path}: {unknown} not in its pulumi_gcp module"
        assert re.fullmatch(rf"{re.escape(gcp.TPGB)}\S+\.go:\d+", fact.source)


def test_the_reader_reads_every_pinned_provider_file_and_names_what_it_cannot() -> None:
    r = provider()
    pinned = {f.path.removeprefix(provider_schema.BASE + "/") for f in upstream.under(provider_schema.BASE)}
    files = {f.rel for p in r.packages.values() for f in p.files}
    assert files == pinned and len(files) == 18
    declared = {rel: r.file_attributes(rel) for rel in sorted(files)}
    assert all(any(declared[rel].values()) for rel in files), "a file whose schemas the reader did not find"
    assert {provider_schema.unread(p) for p in r.problems} == set(provider_schema.UNREAD)
    assert set(provider_schema.ROOTS) == set(gcp.FORCE_NEW)


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
    names = sdk_names(type_)
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


def test_a_change_inside_a_node_config_replaces_the_cluster_or_pool_as_the_provider_does() -> None:
    """node_config.go's inner ForceNew fields apply to the cluster's node_config too (it is schemaNodeConfig(),
    resource_container_cluster.go:1848), and the pool's whole block is ForceNew (node_config.go:284)."""
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


def test_growing_a_proxy_only_subnet_is_rejected_and_a_private_one_updates() -> None:
    for purpose in ("REGIONAL_MANAGED_PROXY", "GLOBAL_MANAGED_PROXY"):
        (c,) = engine.diff([subnet("172.16.0.0/26", purpose)], [subnet("172.16.0.0/25", purpose)]).changes
        assert c.action == engine.REJECTED and gcp.API_REFUSALS[SUBNET][0].source in c.reason
    (c,) = engine.diff([subnet("10.8.0.0/14", "PRIVATE")], [subnet("10.8.0.0/13", "PRIVATE")]).changes
    assert c.action == engine.UPDATE
    # shrinking or moving it is a replacement (ForceNew when shrink), not a refused update
    moved = {**subnet("172.16.1.0/26", "REGIONAL_MANAGED_PROXY"), "options": {"deleteBeforeReplace": True}}
    (c,) = engine.diff([subnet("172.16.0.0/26", "REGIONAL_MANAGED_PROXY")], [moved]).changes
    assert c.action == engine.REPLACE and "ForceNew when shrink" in c.reason
