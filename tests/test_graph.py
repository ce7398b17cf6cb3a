"""The whole program's wiring (components/graph.py): what waits for what, the names and derived sizes passed
between components, the stack outputs, and what a second run and one-key changes move."""

from __future__ import annotations

import pytest

from components.model.tpu import geometry
from components.model.tpu.geometry import Topology, TpuSystem
from tests.graph_queries import addon_charts, tpu_pools
from tests.harness import CLUSTER, JOBSET, KUEUE, POOL, Registration, Run, changes, normalize, ok, run_program
from tests.stack_config import P


def levels_of(run: Run) -> list[str]:
    topo = run.get(f"{KUEUE}/v1beta2:Topology", "queues-topology")
    return [level["nodeLabel"] for level in topo.inputs["spec"]["levels"]]


def demo_shape(run: Run, name: str) -> tuple[int, int, int, str]:
    spec = normalize(run.get(JOBSET, f"{name}-jobset").inputs["spec"])["replicatedJobs"][0]
    job = spec["template"]["spec"]
    pod = job["template"]
    tpu = pod["spec"]["containers"][0]["resources"]["requests"]["google.com/tpu"]
    assert job["parallelism"] == job["completions"]
    assert pod["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] == tpu
    return (
        spec["replicas"],
        job["parallelism"],
        int(tpu),
        pod["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"],
    )


def partition(shape: str) -> str:
    return f"cloud.google.com/gke-tpu-partition-{shape}-id"


def moved(*changed: str, added: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> tuple[set[str], ...]:
    return set(added), set(removed), set(changed)


# Every LeaderWorkerSet of dev's serving: the floors and their burst slots, built alike.
SERVING_PODS = ("serving-prefill", "serving-decode", *(f"burst-{r}-{k}" for r in ("prefill", "decode") for k in (1, 2)))
# One key changed at a time -> exactly the resources whose inputs may differ (added, removed, changed).
ONE_KEY = [
    ("another system machine type", {f"{P}:cluster": {"systemMachineType": "n2-standard-48"}}, moved("cluster-system")),
    (
        "more cubes",
        {f"{P}:tpu": {"cubes": 3}},
        # a new pool and its teardown gate; the ClusterQueue's TPU quota (chips provisioned) grows with it,
        # and so do the dashboard's provisioned-chips line and the quota-full alert's threshold, and the record
        # of the pools' ids that refuses their replacement
        moved(
            "queues-cluster-queue",
            "observability-dashboard",
            "observability-tpu-quota-full",
            "teardown-pool-replacements",
            added=("capacity-tpu7-pool-3", "teardown-tpu7-pool-3"),
        ),
    ),
    ("a newer add-on version", {f"{P}:addons": {"kueue": {"version": "0.17.5"}}}, moved("kueue-chart")),
    (
        "more serving replicas",
        {f"{P}:serving": {"decode": {"replicas": 3}}},
        # the new set's leaders-ready patch (named per revision) replaces the old set's; the no-ready-leader alert
        # watches the new set (a new name: not ready yet, so held for its startup budget). The burst slots roll with
        # the floor (their names carry its revision), and maxGroups 6 above 3 groups is one slot more, which the
        # dashboard's desired count and the slots' queries (their thresholds rise from the floor) follow.
        moved(
            "serving-decode",
            "observability-no-ready-decode-leader",
            "observability-dashboard",
            *(f"burst-decode-{k}{part}" for k in (1, 2) for part in ("", "-scaler")),
            added=("serving-decode-ready-<new>", "burst-decode-3", "burst-decode-3-scaler"),
            removed=("serving-decode-ready-<old>",),
        ),
    ),
    (
        # the weights' read-only members and the pods' --model; the XLA cache bucket and its members stay
        "another weights bucket",
        {f"{P}:serving": {"weightsBucket": "other-weights"}},
        moved("serving-weights-bucketviewer", "serving-weights-objectviewer", *SERVING_PODS),
    ),
    (
        # the cache bucket (name is ForceNew: replaced delete-first), its members, the pods' VLLM_XLA_CACHE_PATH
        "another XLA cache bucket",
        {f"{P}:serving": {"xlaCacheBucket": "my-xla-cache"}},
        moved("serving-xla-cache", "serving-xla-cache-bucketviewer", "serving-xla-cache-objectuser", *SERVING_PODS),
    ),
    (
        # one burst slot fewer: it and its ScaledObject go; the floor, its patch and the other slots stay
        "fewer burst slots",
        {f"{P}:serving": {"decode": {"autoscaling": {"maxGroups": 5}}}},
        moved("observability-dashboard", removed=("burst-decode-2", "burst-decode-2-scaler")),
    ),
    (
        # another target: the role's slots' queries and the dashboard's desired count; nothing else
        "another decode target",
        {f"{P}:serving": {"decode": {"autoscaling": {"kvCacheUsage": 0.7}}}},
        moved("observability-dashboard", "burst-decode-1-scaler", "burst-decode-2-scaler"),
    ),
]

# Named resources exempt from delete-first, and why.
NOT_REPLACEABLE = {
    # A project-wide singleton whose only ForceNew input is its constant name: no config key replaces it.
    "gcp:compute/previewFeature:PreviewFeature"
}


def test_everything_waits_for_the_apis(dev: Run) -> None:
    compute = dev.get("gcp:projects/service:Service", "project-compute")
    container = dev.get("gcp:projects/service:Service", "project-container")
    # The dashboard and alert policies call the Monitoring API alone, and wait for it alone (docs/benchmarks.md).
    monitoring = dev.get("gcp:projects/service:Service", "project-monitoring")
    # ... and the XLA cache bucket for the Cloud Storage API alone. The Kueue immutable-fields record lives in
    # Pulumi's state only: it calls no API (components/kueue_guard.py).
    storage = dev.get("gcp:projects/service:Service", "project-storage")
    state_only = "pulumi-python:dynamic/queues:ImmutableFields"
    for reg in dev.registrations:
        if reg.custom and not reg.type.startswith(("gcp:projects/service", "pulumi:providers", state_only)):
            api = monitoring if reg.type.startswith("gcp:monitoring/") else compute
            api = storage if reg.type == "gcp:storage/bucket:Bucket" else api
            assert dev.depends_on(reg, api), reg.name
    assert dev.depends_on(dev.get(CLUSTER, "cluster-gke"), container)


def test_stack_outputs(dev: Run) -> None:
    assert dev.outputs["clusterName"] == "qwen-serving-cluster"
    assert dev.outputs["clusterEndpoint"] == "203.0.113.10"
    assert dev.outputs["network"] == "qwen-serving-main"
    assert dev.outputs["nodePools"] == ["tpu7-pool-1", "tpu7-pool-2"]
    assert dev.outputs["workloadPolicy"].endswith("/superslice-policy")
    assert dev.secret_outputs >= {"kubeconfig"}
    assert "clusterName" not in dev.secret_outputs


def test_components_have_type_tokens_and_own_their_children(dev: Run) -> None:
    components = [r for r in dev.registrations if not r.custom and not r.remote]
    tokens = {r.type for r in components}
    some = ["project:ProjectServices", "network:Network", "identity:NodeIdentity", "cluster:Cluster"]
    assert {f"{P}:{t}" for t in [*some, "capacity:TpuCapacity"]} <= tokens
    for token in tokens:
        assert token.startswith(f"{P}:") and token.count(":") == 2, token
    component_urns = {r.urn for r in components}
    for reg in dev.registrations:
        if reg.custom or reg.remote:
            assert reg.parent in component_urns, f"{reg.type} {reg.name} is not inside a component"
            assert reg.name.startswith(dev.by_urn(reg.parent).name + "-"), reg.name
    # register_outputs was called with real outputs by every component
    for comp in components:
        assert dev.component_outputs.get(comp.urn), comp.type


def test_names_flow_as_outputs_not_literals(codelab: Run) -> None:
    def queue(kind: str, name: str) -> Registration:
        return codelab.get(f"{KUEUE}/v1beta2:{kind}", f"queues-{name}")

    ns = codelab.get("kubernetes:core/v1:Namespace", "queues-namespace").urn
    assert queue("Topology", "topology").urn in queue("ResourceFlavor", "flavor").property_dependencies["spec"]
    cq = queue("ClusterQueue", "cluster-queue")
    assert {queue("AdmissionCheck", "admission-check").urn, queue("ResourceFlavor", "flavor").urn} <= set(
        cq.property_dependencies["spec"]
    )
    local = queue("LocalQueue", "local-queue")
    assert cq.urn in local.property_dependencies["spec"] and ns in local.property_dependencies["metadata"]
    for demo, priority in (("subslicing", "low-priority-1000"), ("superslicing", "medium-priority-2000")):
        wanted = {local.urn, ns, queue("WorkloadPriorityClass", f"priority-{priority}").urn}
        assert wanted <= set(codelab.get(JOBSET, f"{demo}-jobset").property_dependencies["metadata"])
    for chart in addon_charts(codelab):
        namespace = codelab.get("kubernetes:core/v1:Namespace", chart.name.replace("-chart", "-namespace"))
        assert namespace.urn in chart.property_dependencies["namespace"]


def test_default_derivations(codelab: Run) -> None:
    assert levels_of(codelab) == [
        "cloud.google.com/gce-topology-block",
        *(partition(s) for s in ("4x4x4", "2x4x4", "2x2x4", "2x2x2", "2x2x1")),
        "kubernetes.io/hostname",
    ]
    assert demo_shape(codelab, "subslicing") == (6, 2, 4, "2x2x2")  # 12 pods
    assert demo_shape(codelab, "superslicing") == (1, 32, 4, "4x4x8")
    cq = normalize(codelab.get(f"{KUEUE}/v1beta2:ClusterQueue", "queues-cluster-queue").inputs)
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": "google.com/tpu",
        "nominalQuota": "128",
    }


def test_cube_topology_changes_levels_pools_and_quota() -> None:
    run = ok(
        {
            f"{P}:tpu": {"cubeTopology": "2x4x4", "cubes": 3},
            f"{P}:demos": {
                # the largest slice of a 2x4x4 cube (GKE super-slices 4x4x4 cubes only)
                "superslicing": {"enabled": True, "topology": "2x4x4"},
                "subslicing": {"topology": "2x2x4", "replicas": 3},
            },
            f"{P}:serving": {"enabled": False},
        }
    )
    assert levels_of(run) == [
        "cloud.google.com/gce-topology-block",
        *(partition(s) for s in ("2x4x4", "2x2x4", "2x2x2", "2x2x1")),
        "kubernetes.io/hostname",
    ]
    assert [p.inputs["nodeCount"] for p in tpu_pools(run)] == [8, 8, 8]
    assert demo_shape(run, "subslicing") == (3, 4, 4, "2x2x4")
    assert demo_shape(run, "superslicing") == (1, 8, 4, "2x4x4")
    cq = normalize(run.get(f"{KUEUE}/v1beta2:ClusterQueue", "queues-cluster-queue").inputs)
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "96"


def test_machine_type_changes_levels_pods_and_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with 8 chips per VM (2x2x2 hosts), added to the facts table, re-derives everything."""
    row = TpuSystem(
        machine_type="tpu7x-test-8t",
        generation="tpu7x",
        accelerator="tpu7x",
        chips_per_vm=8,
        host=Topology.parse("2x2x2"),
        tensorcores_per_chip=2,
        cube=Topology.parse("4x4x4"),
        source="test",
        zones=("us-central1-ai1a",),
    )
    monkeypatch.setitem(geometry.SYSTEMS, row.machine_type, row)
    run = ok(
        {
            f"{P}:tpu": {"machineType": "tpu7x-test-8t"},
            f"{P}:demos": {"subslicing": {"topology": "2x2x2"}, "superslicing": {"enabled": True}},
        }
    )
    assert levels_of(run)[1:-1] == [partition(s) for s in ("4x4x4", "2x4x4", "2x2x4", "2x2x2")]
    assert [p.inputs["nodeCount"] for p in tpu_pools(run)] == [8, 8]
    assert demo_shape(run, "subslicing") == (6, 1, 8, "2x2x2")
    assert demo_shape(run, "superslicing") == (1, 16, 8, "4x4x8")
    lws = normalize(run.get("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "serving-prefill").inputs)
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 1
    assert (
        "--tensor-parallel-size=16"
        in lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["command"][2]
    )


def test_a_second_run_registers_identical_inputs(dev: Run) -> None:
    # Nothing in the program depends on the time or on randomness: a second `up` has nothing to do.
    assert changes(dev, run_program(fresh=True)) == (set(), set(), set())


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
    assert ({label.get(n, n) for n in added}, {label.get(n, n) for n in removed}, changed) == expected


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
