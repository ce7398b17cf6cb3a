"""Day 2: a second `pulumi up` changes nothing, one config key moves only what it must, replacements
of fixed-name resources go delete-first, and `pulumi destroy` deletes in an order that finishes.

Provider facts the options rely on are cited where they are used (components/*.py) and in
docs/changes.md and docs/teardown.md; these tests pin the options and the graph.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pulumi
import pytest
import yaml

from components.model.config.checks import gke_version_tuple
from components.model.config.settings import ConfigError, load
from components.model.diff import engine
from tests.harness import (
    CODELAB_MIX,
    ROOT,
    UNKNOWN,
    Mocks,
    Registration,
    Run,
    _sync_await,
    assert_rejected,
    merge,
    normalize,
    preview,
    run_program,
    tpu_pools,
    unwrap,
)

P = "gke-tpu-slicing"
CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
CHART = "kubernetes:helm.sh/v4:Chart"
SLICE_CONTROLLER = ("kubernetes:yaml/v2:ConfigFile", "slice-controller-manifest")
# GKE's documented floor for sub-slices (cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing).
SUBSLICING_FLOOR = "1.36.0-gke.3712000"


# ------------------------------------------------------------------------------------------------
# 1. The cluster is not replaced on the second `up`


def test_cluster_ignores_what_only_shapes_the_default_pool(dev: Run) -> None:
    cluster = dev.get(CLUSTER, "cluster-gke")
    # node_config is ForceNew and GKE stops returning it once the default pool is removed: only its identity
    # (the dedicated node account, test_diff_model), ignored after creation.
    assert set(cluster.inputs["nodeConfig"]) == {"serviceAccount", "oauthScopes"}
    assert cluster.inputs["removeDefaultNodePool"] is True
    assert cluster.inputs["initialNodeCount"] == 1  # the provider requires it with remove_default_node_pool
    assert cluster.options["ignoreChanges"] == ["initialNodeCount", "nodeConfig"]
    # The system machine type lives on the system pool only.
    assert dev.get(POOL, "cluster-system").inputs["nodeConfig"]["machineType"] == "n2-standard-32"
    assert "n2-standard-32" not in json.dumps(cluster.inputs)


def snapshot(run: Run) -> dict[tuple[str, str], Any]:
    """What `pulumi preview` diffs: each resource's inputs (secrets unwrapped, numbers normalized)."""
    assert run.error is None, run.error
    return {(r.type, r.name): normalize(unwrap(r.inputs)) for r in run.registrations if r.custom or r.remote}


def changes(before: Run, after: Run) -> tuple[set[str], set[str], set[str]]:
    """(added, removed, changed) resource names between two runs."""
    result = preview(before, after).changes
    added = {c.name for c in result if c.action == engine.CREATE}
    removed = {c.name for c in result if c.action == engine.DELETE}
    changed = {c.name for c in result if c.action in (engine.UPDATE, engine.REPLACE, engine.REJECTED)}
    # The model compares the same inputs the snapshot holds: no change it misses.
    assert (snapshot(before) == snapshot(after)) == (not added | removed | changed)
    return added, removed, changed


def test_a_second_run_registers_identical_inputs(dev: Run) -> None:
    # Nothing in the program depends on the time or on randomness: a second `up` has nothing to do.
    assert changes(dev, run_program(fresh=True)) == (set(), set(), set())


# One key changed at a time -> exactly the resources whose inputs may differ (added, removed, changed).
ONE_KEY = [
    (
        "another system machine type",
        {f"{P}:cluster": {"systemMachineType": "n2-standard-48"}},
        (set(), set(), {"cluster-system"}),
    ),
    (
        "more cubes",
        {f"{P}:tpu": {"cubes": 3}},
        # a new pool and its teardown gate; the ClusterQueue's TPU quota (chips provisioned) grows with it,
        # and so do the dashboard's provisioned-chips line and the quota-full alert's threshold
        (
            {"capacity-tpu7-pool-3", "teardown-tpu7-pool-3"},
            set(),
            {"queues-cluster-queue", "observability-dashboard", "observability-tpu-quota-full"}
            | {"teardown-pool-replacements"},  # the record of the pools' ids that refuses their replacement
        ),
    ),
    (
        "a newer add-on version",
        {f"{P}:addons": {"kueue": {"version": "0.17.5"}}},
        (set(), set(), {"kueue-chart"}),
    ),
    (
        "more serving replicas",
        {f"{P}:serving": {"decode": {"replicas": 3}}},
        # the new set's leaders-ready patch (named per revision) replaces the old set's
        ({"serving-decode-ready-<new>"}, {"serving-decode-ready-<old>"}, {"serving-decode"}),
    ),
    (
        # the weights' read-only members and the pods' --model; the XLA cache bucket and its members stay
        "another weights bucket",
        {f"{P}:serving": {"weightsBucket": "other-weights"}},
        (
            set(),
            set(),
            {"serving-weights-bucketviewer", "serving-weights-objectviewer", "serving-prefill", "serving-decode"},
        ),
    ),
    (
        # the cache bucket (name is ForceNew: replaced delete-first), its members, the pods' VLLM_XLA_CACHE_PATH
        "another XLA cache bucket",
        {f"{P}:serving": {"xlaCacheBucket": "my-xla-cache"}},
        (
            set(),
            set(),
            {
                "serving-xla-cache",
                "serving-xla-cache-bucketviewer",
                "serving-xla-cache-objectuser",
                "serving-prefill",
                "serving-decode",
            },
        ),
    ),
]


@pytest.mark.parametrize(("case", "overrides", "expected"), ONE_KEY, ids=[c[0] for c in ONE_KEY])
def test_one_key_moves_only_what_it_must(
    dev: Run, case: str, overrides: dict, expected: tuple[set[str], set[str], set[str]]
) -> None:
    after = run_program(overrides)
    added, removed, changed = changes(dev, after)
    revisions = {}
    for run, which in ((dev, "old"), (after, "new")):
        for reg in run.registrations:
            if "-ready-" in reg.name:
                revisions.setdefault(reg.name, set()).add(which)
    # A name in one run only is that run's revision's patch (both runs: the patch did not move).
    label = {n: f"{n.rsplit('-', 1)[0]}-<{w.pop()}>" for n, w in revisions.items() if len(w) == 1}
    assert (
        {label.get(n, n) for n in added},
        {label.get(n, n) for n in removed},
        changed,
    ) == expected


def test_the_system_machine_type_updates_the_pool_in_place(dev: Run) -> None:
    bigger = run_program({f"{P}:cluster": {"systemMachineType": "n2-standard-48"}})
    # The model: node_config.machine_type is not ForceNew on google_container_node_pool, nothing else changes.
    (pool,) = [c for c in preview(dev, bigger).changes if c.action != engine.SAME]
    assert (pool.name, pool.action, pool.properties) == ("cluster-system", engine.UPDATE, ["nodeConfig.machineType"])


def test_another_reservation_replaces_the_tpu_pools_delete_first(dev: Run) -> None:
    other = run_program({f"{P}:tpu": {"reservation": {"name": "another-reservation"}}})
    changes = [c for c in preview(dev, other).changes if c.action != engine.SAME]
    # The record of the pools takes their new ids (the program's check refuses this while workloads run).
    record = [c for c in changes if c.type == REPLACEMENTS]
    assert [c.action for c in record] == [engine.UPDATE]
    moved = [c for c in changes if c.type != REPLACEMENTS]
    # the pools, and with each its teardown gate (the gate's provider replaces it when its pool is new)
    gates = {c.name for c in moved if c.type == "pulumi-python:dynamic/teardown:SliceGate"}
    assert {c.name for c in moved} - gates == {p.name for p in tpu_pools(dev)} and len(gates) == len(tpu_pools(dev))
    assert all(c.action == engine.REPLACE and c.delete_first for c in moved)


# ------------------------------------------------------------------------------------------------
# 2. Replacements of fixed-name resources go delete-first


# Named resources exempt from delete-first, and why.
NOT_REPLACEABLE = {
    # A project-wide singleton whose only ForceNew input is its constant name: no config key replaces it.
    "gcp:compute/previewFeature:PreviewFeature",
}


def test_every_fixed_name_cloud_resource_replaces_delete_first(dev: Run) -> None:
    named = [
        r
        for r in dev.registrations
        if r.custom and r.type.startswith("gcp:") and ({"name", "accountId"} & r.inputs.keys())
    ]
    assert {r.type for r in named} >= {
        CLUSTER,
        POOL,
        "gcp:compute/resourcePolicy:ResourcePolicy",
        "gcp:compute/network:Network",
        "gcp:compute/subnetwork:Subnetwork",
        "gcp:compute/firewall:Firewall",
        "gcp:serviceaccount/account:Account",
    }
    for reg in named:
        if reg.type not in NOT_REPLACEABLE:
            assert reg.options["deleteBeforeReplace"] is True, f"{reg.type} {reg.name}"
    # The node account keeps its email when replaced, so its role binding must go first too.
    for binding in dev.of_type("gcp:projects/iAMMember:IAMMember"):
        assert binding.options["deleteBeforeReplace"] is True


def test_pools_reference_the_policy_so_a_policy_replacement_replaces_them_first(dev: Run) -> None:
    policy = dev.get("gcp:compute/resourcePolicy:ResourcePolicy", "capacity-policy")
    for pool in tpu_pools(dev):
        # Pulumi deletes dependents whose referencing input is ForceNew (placement_policy) before a
        # delete-first replacement of what they reference.
        assert policy.urn in pool.property_dependencies["placementPolicy"]
    # ...and the model says so: a new accelerator topology mode replaces the policy, and with it every pool.
    other = run_program({f"{P}:tpu": {"acceleratorTopologyMode": "AUTO_CONNECT"}})
    result = preview(dev, other).by_name()
    assert result["capacity-policy"].action == engine.REPLACE
    assert all(result[p.name].action == engine.REPLACE for p in tpu_pools(dev))


# ------------------------------------------------------------------------------------------------
# 3. The Kubernetes provider does not outlive its cluster


class RotatedIp(Mocks):
    """The same cluster after an IP rotation: a new IP endpoint, the same DNS endpoint."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        id_, state = super().new_resource(args)
        if args.typ == CLUSTER:
            state["endpoint"] = "203.0.113.99"
        return id_, state


def identifier(run: Run) -> str:
    assert run.error is None, run.error
    return run.get("pulumi:providers:kubernetes", "cluster-k8s").inputs["clusterIdentifier"]


def test_provider_identity_changes_with_the_cluster_instance_only(dev: Run) -> None:
    provider = dev.get("pulumi:providers:kubernetes", "cluster-k8s")
    assert dev.get(CLUSTER, "cluster-gke").urn in provider.property_dependencies["clusterIdentifier"]
    # A cluster replaced under the same name gets a new DNS endpoint: a new provider, new objects.
    assert identifier(run_program(mocks=Mocks(cluster_hash="0f0f0f0f0f0f"))) != identifier(dev)
    # An IP rotation of the same cluster does not replace every Kubernetes object.
    assert identifier(run_program(mocks=RotatedIp())) == identifier(dev)


# ------------------------------------------------------------------------------------------------
# 4. JobSet specs are immutable


@pytest.mark.parametrize(
    ("demo", "override"),
    [
        ("subslicing", {"replicas": 4}),  # the spec: JobSet's webhook refuses it while the JobSet runs
        ("subslicing", {"priority": "high-priority-3000"}),  # a label only
        ("superslicing", {"priority": "low-priority-1000"}),
    ],
    ids=["replicas", "subslicing-priority", "superslicing-priority"],
)
def test_every_jobset_change_replaces_it_delete_first(codelab: Run, demo: str, override: dict[str, Any]) -> None:
    """No change of a running demo JobSet can be applied in place: JobSet's webhook refuses any change of
    spec.replicatedJobs unless the JobSet is suspended (kubernetes-sigs/jobset v0.11.1
    pkg/webhooks/jobset_webhook.go:336-350); on admission Kueue merges the slice controller's and the flavor's node
    labels into the pod template's nodeSelector (kueue v0.17.4 pkg/controller/jobs/jobset/jobset_controller.go:148,
    pkg/podset/podset.go:161-174), an atomic map in the JobSet CRD, so Pulumi's next apply of the template
    conflicts with Kueue's; and Kueue refuses a new queue name on a running job (jobframework/validation.go:151).
    A priority change, a label alone, was an in-place update; now it is a replacement like the rest, deleted first
    (the JobSet's name is fixed), and only that JobSet moves."""
    changed = run_program(merge(CODELAB_MIX, {f"{P}:demos": {demo: override}}))
    assert changed.error is None, changed.error
    result = preview(codelab, changed).by_name()
    jobset = result[f"{demo}-jobset"]
    assert (jobset.action, jobset.delete_first) == (engine.REPLACE, True), jobset
    others = [c.name for c in result.values() if c.type == JOBSET and c.action != engine.SAME and c is not jobset]
    assert others == []


# ------------------------------------------------------------------------------------------------
# 5. Objects GKE installs itself


def test_the_gke_managed_inference_pool_crd_is_not_applied(dev: Run) -> None:
    group = dev.get("kubernetes:yaml/v2:ConfigGroup", "inference-extension-crds")
    files = group.inputs["files"]
    names = [f.rsplit("/", 1)[-1] for f in files]
    # GKE (1.34+) installs the GA InferencePool CRD; the program's version floor is above that.
    assert "inference.networking.k8s.io_inferencepools.yaml" not in names
    # ...but still applies the rest of GAIE's config/crd, e.g. the InferenceObjective CRD.
    assert "inference.networking.x-k8s.io_inferenceobjectives.yaml" in names
    version = "v1.5.0"
    assert all(f"/gateway-api-inference-extension/{version}/config/crd/bases/" in f for f in files)
    assert gke_version_tuple("1.35.2-gke.1842000") > gke_version_tuple("1.34.0-gke.0")
    assert dev.depends_on(dev.get(CHART, "serving-router"), group)


# ------------------------------------------------------------------------------------------------
# 6. Teardown order


def teardown_order(run: Run) -> list[str]:
    """A deletion order Pulumi may use: every resource after everything that depends on it (Kahn)."""
    urns = [r.urn for r in run.registrations]
    dependents: dict[str, set[str]] = {u: set() for u in urns}
    for reg in run.registrations:
        for edge in run.direct_edges(reg):
            if edge in dependents and edge != reg.parent:  # a parent is not deleted before its children
                dependents[edge].add(reg.urn)
    order: list[str] = []
    remaining = dict(dependents)
    while remaining:
        ready = sorted(u for u, deps in remaining.items() if not deps & remaining.keys())
        assert ready, "dependency cycle"
        order.extend(ready)
        for u in ready:
            del remaining[u]
    return order


GATE = "pulumi-python:dynamic/teardown:SliceGate"
REPLACEMENTS = "pulumi-python:dynamic/teardown:PoolReplacements"


def gate_of(run: Run, pool: Registration) -> Registration:
    (gate,) = [g for g in run.of_type(GATE) if pool.urn in g.property_dependencies.get("pool", [])]
    return gate


def test_destroy_deletes_workloads_then_each_gate_then_its_pool_then_the_slice_controller(codelab: Run) -> None:
    order = teardown_order(codelab)
    position = {urn: i for i, urn in enumerate(order)}
    workloads = codelab.of_type(JOBSET) + codelab.of_type(LWS)
    pools = tpu_pools(codelab)
    slice_controller = codelab.get(*SLICE_CONTROLLER)
    kueue, jobset = codelab.get(CHART, "kueue-chart"), codelab.get(CHART, "jobset-chart")
    assert len(workloads) == 4 and len(pools) == 2 and len(codelab.of_type(GATE)) == 2
    for pool in pools:
        gate = gate_of(codelab, pool)
        # The gate's delete waits until no Slice uses the pool: after every workload, before the pool.
        for w in workloads:
            assert position[w.urn] < position[gate.urn], f"{w.name} before {gate.name}"
            assert codelab.depends_on(w, gate) and codelab.depends_on(w, slice_controller), w.name
        assert position[gate.urn] < position[pool.urn]
        # The slice controller (which deletes the Slices of deleted Workloads) outlives every gate's wait.
        assert codelab.depends_on(gate, slice_controller)
        assert position[gate.urn] < position[slice_controller.urn]
    # ...and goes before Kueue and JobSet, whose objects it watches; the cluster goes last of all.
    assert position[slice_controller.urn] < position[kueue.urn]
    assert position[slice_controller.urn] < position[jobset.urn]
    assert codelab.depends_on(slice_controller, kueue) and codelab.depends_on(slice_controller, jobset)
    cluster = codelab.get(CLUSTER, "cluster-gke")
    assert all(position[r.urn] < position[cluster.urn] for r in codelab.registrations if codelab.depends_on(r, cluster))


def test_the_pools_wait_for_nothing_in_the_cluster(dev: Run) -> None:
    """They are created while the add-ons install; only their gates wait for the slice controller."""
    slice_controller = dev.get(*SLICE_CONTROLLER)
    for pool in tpu_pools(dev):
        assert not dev.depends_on(pool, slice_controller), pool.name
        assert not any(dev.depends_on(pool, r) for r in dev.registrations if r.type.startswith("kubernetes:"))
        assert not dev.depends_on(slice_controller, pool)
    policy = dev.get("gcp:compute/resourcePolicy:ResourcePolicy", "capacity-policy")
    assert not dev.depends_on(policy, slice_controller)


def dependent_replacements(run: Run, root: Registration) -> list[Registration]:
    """What Pulumi deletes before a delete-first replacement of `root`, in deletion order.

    pulumi/pulumi pkg/resource/deploy/step_generator.go `calculateDependentReplacements`: walk the dependents;
    one whose inputs reference a resource being replaced is asked its provider's Diff with those inputs
    unknown, and is replaced (deleted first) if the Diff says so; deletions run in reverse dependency order
    before the root's. Only the gates' Diff is ours to call; every other dependent of a pool references it
    by `depends_on` alone (asserted), which never replaces.
    """
    from components.teardown import PoolReplacementsProvider, SliceGateProvider

    providers = {GATE: SliceGateProvider(), REPLACEMENTS: PoolReplacementsProvider()}
    replace = {root.urn}
    found: list[Registration] = []
    for reg in run.registrations:  # registration order is a dependency order
        keys = [k for k, urns in reg.property_dependencies.items() if replace & set(urns)]
        if not keys or not reg.custom:
            continue
        assert reg.type in providers, f"{reg.type} {reg.name} references {root.name} by an input: model its Diff"
        olds = unwrap(reg.inputs)
        news = {**olds, **dict.fromkeys(keys, UNKNOWN)}
        diff = providers[reg.type].diff(reg.id, olds, news)
        if diff.replaces:
            replace.add(reg.urn)
            found.append(reg)
    return list(reversed(found))


def test_a_pool_replacement_deletes_its_gate_first_and_only_its_gate(dev: Run) -> None:
    """The pools are replaced delete-first; the gate's delete (the wait for Slices) completes before the pool's."""
    pools = tpu_pools(dev)
    for pool in pools:
        assert pool.options["deleteBeforeReplace"] is True
        assert dependent_replacements(dev, pool) == [gate_of(dev, pool)]
        gate = gate_of(dev, pool)
        # The gate itself has the pool's fixed name: it too is replaced delete-first.
        assert gate.options["deleteBeforeReplace"] is True
    # A replaced workload policy replaces every pool first (placementPolicy is ForceNew), and with each its gate.
    policy = dev.get("gcp:compute/resourcePolicy:ResourcePolicy", "capacity-policy")
    assert all(policy.urn in p.property_dependencies["placementPolicy"] for p in pools)


# ------------------------------------------------------------------------------------------------
# 7. The CLI floor is declared


def test_cli_floor_is_declared_and_checked(dev: Run) -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    declared = project["requiredPulumiVersion"]
    assert declared.startswith(">=")
    floor = tuple(int(p) for p in declared.removeprefix(">=").split("."))
    assert floor >= (3, 130, 0)  # pulumi/pulumi#16868: charts preview against a cluster not yet created
    # The program asks the engine for the same range, so CLIs that predate the key stop too.
    assert dev.required_cli == [declared]


# ------------------------------------------------------------------------------------------------
# 8. State location does not depend on the working directory


def test_no_directory_relative_backend() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    url = (project.get("backend") or {}).get("url", "")
    assert not url.startswith(("file://./", "file://.")), url
    readme = (ROOT / "README.md").read_text()
    assert "pulumi login gs://" in readme


# ------------------------------------------------------------------------------------------------
# 9. Defaults GKE accepts on any day; no shared reservation blocks


def test_a_past_maintenance_exclusion_is_an_error() -> None:
    assert_rejected(
        {f"{P}:cluster": {"maintenanceExclusion": {"start": "2026-05-18T00:00:00Z", "end": "2026-08-15T00:00:00Z"}}},
        ["gke-tpu-slicing:cluster.maintenanceExclusion.end", "2026-08-15T00:00:00Z", "in the future"],
        prefix="invalid stack configuration (1 problem)",
    )


@pytest.mark.parametrize("year", [2020, 2026, 2031, 2099])
def test_the_defaults_are_valid_on_any_day(year: int) -> None:
    now = datetime(year, 6, 1, tzinfo=UTC)
    # Keys with no default: the bucket, who hears of alerts, who may reach the control plane.
    required = {"serving": {"weightsBucket": "my-weights"}, "observability": {"notifyNobody": True}}
    access = {"controlPlane": {"authorizedNetworks": [{"cidrBlock": "198.51.100.0/24"}]}}
    settings = load({"tpu": {"reservation": {"name": "r"}}, "cluster": access, **required}, "my-tpu-project", now=now)
    assert settings.cluster.maintenance_exclusion is None
    # ...while an explicit window is judged against that day.
    window = {"maintenanceExclusion": {"start": f"{year}-05-01T00:00:00Z", "end": f"{year}-05-20T00:00:00Z"}}
    with pytest.raises(ConfigError, match=r"maintenanceExclusion\.end"):
        load(
            {"tpu": {"reservation": {"name": "r"}}, "cluster": {**access, **window}, **required},
            "my-tpu-project",
            now=now,
        )
    # An end-of-support exclusion has no end date for any day to pass.
    lasting = {"maintenanceExclusion": {"start": "2026-12-01T00:00:00Z", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}}
    lasting["maintenanceExclusion"]["scope"] = "NO_MINOR_UPGRADES"
    load(
        {"tpu": {"reservation": {"name": "r"}}, "cluster": {**access, **lasting}, **required}, "my-tpu-project", now=now
    )


LASTING = {"name": "no-minor", "start": "2026-12-01T00:00:00Z", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}


def test_a_daily_maintenance_start_without_an_exclusion_is_applied() -> None:
    """`cluster.dailyMaintenanceStart` alone is a window of its own (the provider's maintenance_policy takes
    exactly one of daily_maintenance_window and recurring_window, exclusions optional: resource_container_
    cluster.go lines 1297-1309; updated in place by SetMaintenancePolicy, lines 4991-5016). A stack that sets
    neither key sends no policy, as before (no change to a running cluster)."""
    run = run_program({f"{P}:cluster": {"dailyMaintenanceStart": "22:30"}})
    assert run.error is None, run.error
    assert run.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"] == {
        "dailyMaintenanceWindow": {"startTime": "22:30"}
    }
    assert "maintenancePolicy" not in run_program().get(CLUSTER, "cluster-gke").inputs
    # Beside an exclusion the window is the one given, or 03:00 when none is.
    exclusion = {**LASTING, "scope": "NO_MINOR_UPGRADES"}
    both = run_program({f"{P}:cluster": {"dailyMaintenanceStart": "22:30", "maintenanceExclusion": exclusion}})
    policy = both.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"]
    assert policy["dailyMaintenanceWindow"] == {"startTime": "22:30"} and len(policy["maintenanceExclusions"]) == 1


def test_an_end_of_support_exclusion_sends_no_end_time() -> None:
    run = run_program({f"{P}:cluster": {"maintenanceExclusion": {**LASTING, "scope": "NO_MINOR_OR_NODE_UPGRADES"}}})
    assert run.error is None, run.error
    # The provider drops end_time with a behaviour and reads none back: sending one would diff every run.
    assert run.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"]["maintenanceExclusions"] == [
        {
            "exclusionName": "no-minor",
            "startTime": "2026-12-01T00:00:00Z",
            "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"},
        }
    ]


@pytest.mark.parametrize(
    ("exclusion", "expected"),
    [
        ({**LASTING, "scope": "NO_UPGRADES"}, ["maintenanceExclusion.endTimeBehavior", "NO_MINOR_UPGRADES"]),
        (
            {**LASTING, "scope": "NO_MINOR_UPGRADES", "end": "2027-01-01T00:00:00Z"},
            ["maintenanceExclusion.end = '2027-01-01T00:00:00Z'", "unset when endTimeBehavior"],
        ),
        ({"start": "2026-12-01T00:00:00Z"}, ["maintenanceExclusion.end is not set", "UNTIL_END_OF_SUPPORT"]),
        (
            {**LASTING, "endTimeBehavior": "FOREVER", "scope": "NO_MINOR_UPGRADES"},
            ["maintenanceExclusion.endTimeBehavior = 'FOREVER'", "UNTIL_END_OF_SUPPORT"],
        ),
    ],
)
def test_an_exclusion_gke_would_not_take_is_refused(exclusion: dict[str, Any], expected: list[str]) -> None:
    assert_rejected(
        {f"{P}:cluster": {"maintenanceExclusion": exclusion}},
        expected,
        prefix="invalid stack configuration (1 problem)",
    )


def test_default_version_meets_the_subslicing_floor(dev: Run) -> None:
    version = dev.get(CLUSTER, "cluster-gke").inputs["minMasterVersion"]
    assert gke_version_tuple(version) >= gke_version_tuple(SUBSLICING_FLOOR)


def test_a_reservation_block_shared_from_another_project_is_rejected() -> None:
    assert_rejected(
        {f"{P}:tpu": {"reservation": {"project": "other-project", "block": "block-0"}}},
        [
            "gke-tpu-slicing:tpu.reservation.project",
            "'other-project'",
            "my-tpu-project",
            "GKE does not support",
            "tpu.reservation.block",
        ],
        prefix="invalid stack configuration (1 problem)",
    )
    # The stack's own project, spelled out, is fine.
    same = run_program({f"{P}:tpu": {"reservation": {"project": "my-tpu-project"}}})
    assert same.error is None, same.error


# ------------------------------------------------------------------------------------------------
# 10. The project lookup waits for the Cloud Resource Manager API


def test_project_lookup_waits_for_the_resource_manager_api(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    invoke_output = pulumi.runtime.invoke_output

    def recording(token: str, props: Any, opts: Any = None, typ: Any = None, **kwargs: Any) -> Any:
        if token == "gcp:organizations/getProject:getProject":
            seen.append(opts)
        return invoke_output(token, props, opts, typ, **kwargs)

    monkeypatch.setattr(pulumi.runtime, "invoke_output", recording)
    run = run_program()
    assert run.error is None, run.error
    assert len(seen) == 1 and seen[0] is not None
    deps = seen[0].depends_on if isinstance(seen[0].depends_on, list) else [seen[0].depends_on]
    crm = run.get("gcp:projects/service:Service", "project-cloudresourcemanager")
    assert crm.inputs["service"] == "cloudresourcemanager.googleapis.com"
    urns = [_sync_await(d.urn.future()) for d in deps]
    assert crm.urn in urns
