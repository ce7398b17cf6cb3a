"""SPEC sections 6-8: add-ons, Kueue objects and the demo JobSets, their ordering and their derivation."""

from __future__ import annotations

import pytest
import yaml

from components.model import geometry
from components.model.geometry import Topology, TpuSystem
from tests import upstream
from tests.harness import Registration, Run, assert_rejected, normalize, run_program

P = "gke-tpu-slicing"
CHART = "kubernetes:helm.sh/v4:Chart"
KUEUE = "kubernetes:kueue.x-k8s.io"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
POOL = "gcp:container/nodePool:NodePool"


def addon_charts(run: Run) -> list[Registration]:
    return [run.get(CHART, f"{name}-chart") for name in ("jobset", "kueue", "lws")]


def kueue_objects(run: Run) -> list[Registration]:
    return [r for r in run.registrations if r.type.startswith(KUEUE)]


def tpu_pools(run: Run) -> list[Registration]:
    return [r for r in run.of_type(POOL) if r.name != "cluster-system"]


def test_addon_charts_are_pinned_oci_charts(dev: Run) -> None:
    charts = {r.name: r.inputs for r in dev.of_type(CHART)}
    expected = {
        "jobset-chart": ("jobset", "oci://registry.k8s.io/jobset/charts/jobset", "0.11.1", "jobset-system"),
        "kueue-chart": ("kueue", "oci://registry.k8s.io/kueue/charts/kueue", "0.17.4", "kueue-system"),
        "lws-chart": ("lws", "oci://registry.k8s.io/lws/charts/lws", "0.8.0", "lws-system"),
    }
    for name, (release, chart, version, namespace) in expected.items():
        c = charts[name]
        assert (c["name"], c["chart"], c["version"], c["namespace"]) == (release, chart, version, namespace)
        assert c["skipAwait"] is False  # wait for the controllers (and webhooks) to be ready
    assert normalize(charts["kueue-chart"]["values"]) == {
        "controllerManager": {
            "manager": {
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "512Mi"}}
            }
        }
    }


def test_addon_versions_and_resources_are_configurable() -> None:
    run = run_program(
        {f"{P}:addons": {"kueue": {"version": "0.17.5", "controllerResources": {"requests": {"cpu": "1"}}}}}
    )
    assert run.error is None, run.error
    chart = run.get(CHART, "kueue-chart").inputs
    assert chart["version"] == "0.17.5"
    assert chart["values"]["controllerManager"]["manager"]["resources"] == {"requests": {"cpu": "1"}}


def test_addons_depend_on_the_cluster_but_not_on_tpu_pools(dev: Run) -> None:
    cluster = dev.get("gcp:container/cluster:Cluster", "cluster-gke")
    system = dev.get(POOL, "cluster-system")
    for chart in addon_charts(dev) + dev.of_type("kubernetes:yaml/v2:ConfigFile"):
        assert dev.depends_on(chart, cluster) and dev.depends_on(chart, system), chart.name
        for pool in tpu_pools(dev):
            assert not dev.depends_on(chart, pool), f"{chart.name} waits for {pool.name}"


def test_every_kueue_object_waits_for_the_kueue_chart(dev: Run) -> None:
    kueue = dev.get(CHART, "kueue-chart")
    objects = kueue_objects(dev)
    assert len(objects) == 8  # Topology, ResourceFlavor, AdmissionCheck, ClusterQueue, LocalQueue, 3 priorities
    for obj in objects:
        assert kueue.urn in obj.dependencies, obj.name
    check = dev.get(f"{KUEUE}/v1beta2:AdmissionCheck", "queues-admission-check")
    assert dev.depends_on(check, dev.get("kubernetes:yaml/v2:ConfigFile", "slice-controller-manifest"))
    slice_controller = dev.get("kubernetes:yaml/v2:ConfigFile", "slice-controller-manifest")
    assert dev.depends_on(slice_controller, kueue) and dev.depends_on(slice_controller, dev.get(CHART, "jobset-chart"))


def test_jobsets_wait_for_jobset_kueue_objects_and_pools(dev: Run) -> None:
    jobset_chart = dev.get(CHART, "jobset-chart")
    for js in dev.of_type(JOBSET):
        assert dev.depends_on(js, jobset_chart)
        for obj in kueue_objects(dev):
            assert dev.depends_on(js, obj), f"{js.name} does not wait for {obj.name}"
        for pool in tpu_pools(dev):
            assert dev.depends_on(js, pool)


def test_names_flow_as_outputs_not_literals(dev: Run) -> None:
    def urn(type_: str, name: str) -> str:
        return dev.get(type_, name).urn

    topology = urn(f"{KUEUE}/v1beta2:Topology", "queues-topology")
    flavor = urn(f"{KUEUE}/v1beta2:ResourceFlavor", "queues-flavor")
    check = urn(f"{KUEUE}/v1beta2:AdmissionCheck", "queues-admission-check")
    cq = urn(f"{KUEUE}/v1beta2:ClusterQueue", "queues-cluster-queue")
    lq = urn(f"{KUEUE}/v1beta2:LocalQueue", "queues-local-queue")
    ns = urn("kubernetes:core/v1:Namespace", "queues-namespace")
    assert topology in dev.get(f"{KUEUE}/v1beta2:ResourceFlavor", "queues-flavor").property_dependencies["spec"]
    assert {check, flavor} <= set(
        dev.get(f"{KUEUE}/v1beta2:ClusterQueue", "queues-cluster-queue").property_dependencies["spec"]
    )
    local = dev.get(f"{KUEUE}/v1beta2:LocalQueue", "queues-local-queue").property_dependencies
    assert cq in local["spec"] and ns in local["metadata"]
    low = urn(f"{KUEUE}/v1beta2:WorkloadPriorityClass", "queues-priority-low-priority-1000")
    medium = urn(f"{KUEUE}/v1beta2:WorkloadPriorityClass", "queues-priority-medium-priority-2000")
    assert {lq, ns, low} <= set(dev.get(JOBSET, "subslicing-jobset").property_dependencies["metadata"])
    assert {lq, ns, medium} <= set(dev.get(JOBSET, "superslicing-jobset").property_dependencies["metadata"])
    for chart in addon_charts(dev):
        namespace = dev.get("kubernetes:core/v1:Namespace", chart.name.replace("-chart", "-namespace"))
        assert namespace.urn in chart.property_dependencies["namespace"]


def test_kubernetes_objects_use_only_the_cluster_provider(dev: Run) -> None:
    provider = dev.get("pulumi:providers:kubernetes", "cluster-k8s")
    k8s = [r for r in dev.registrations if r.type.startswith("kubernetes:")]
    assert len(k8s) > 20
    for reg in k8s:
        assert reg.provider.startswith(provider.urn + "::"), f"{reg.type} {reg.name}: {reg.provider!r}"


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


def test_default_derivations(dev: Run) -> None:
    assert levels_of(dev) == [
        "cloud.google.com/gce-topology-block",
        *(partition(s) for s in ("4x4x4", "2x4x4", "2x2x4", "2x2x2", "2x2x1")),
        "kubernetes.io/hostname",
    ]
    assert demo_shape(dev, "subslicing") == (6, 2, 4, "2x2x2")  # 12 pods
    assert demo_shape(dev, "superslicing") == (1, 32, 4, "4x4x8")
    cq = normalize(dev.get(f"{KUEUE}/v1beta2:ClusterQueue", "queues-cluster-queue").inputs)
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": "google.com/tpu",
        "nominalQuota": "128",
    }


def test_cube_topology_changes_levels_pools_and_quota() -> None:
    run = run_program(
        {
            f"{P}:tpu": {"cubeTopology": "2x4x4", "cubes": 3},
            f"{P}:demos": {"superslicing": {"topology": "2x4x8"}, "subslicing": {"topology": "2x2x4", "replicas": 3}},
            f"{P}:serving": {"enabled": False},
        }
    )
    assert run.error is None, run.error
    assert levels_of(run) == [
        "cloud.google.com/gce-topology-block",
        *(partition(s) for s in ("2x4x4", "2x2x4", "2x2x2", "2x2x1")),
        "kubernetes.io/hostname",
    ]
    assert [p.inputs["nodeCount"] for p in tpu_pools(run)] == [8, 8, 8]
    assert demo_shape(run, "subslicing") == (3, 4, 4, "2x2x4")
    assert demo_shape(run, "superslicing") == (1, 16, 4, "2x4x8")
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
    )
    monkeypatch.setitem(geometry.SYSTEMS, row.machine_type, row)
    run = run_program(
        {f"{P}:tpu": {"machineType": "tpu7x-test-8t"}, f"{P}:demos": {"subslicing": {"topology": "2x2x2"}}}
    )
    assert run.error is None, run.error
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


def test_priorities_and_names_are_configurable() -> None:
    run = run_program(
        {
            f"{P}:kueue": {"localQueue": "team-a", "priorities": {"batch-10": 10, "prod-99": 99}, "tpuQuota": 200},
            f"{P}:demos": {"subslicing": {"priority": "batch-10"}, "superslicing": {"priority": "prod-99"}},
            f"{P}:serving": {"prefill": {"priority": "prod-99"}, "decode": {"priority": "prod-99"}},
        }
    )
    assert run.error is None, run.error
    classes = {
        r.inputs["metadata"]["name"]: normalize(r.inputs["value"])
        for r in run.of_type(f"{KUEUE}/v1beta2:WorkloadPriorityClass")
    }
    assert classes == {"batch-10": 10, "prod-99": 99}
    labels = run.get(JOBSET, "subslicing-jobset").inputs["metadata"]["labels"]
    assert labels == {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "batch-10"}
    cq = normalize(run.get(f"{KUEUE}/v1beta2:ClusterQueue", "queues-cluster-queue").inputs)
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "200"


def test_demos_can_be_switched_off() -> None:
    run = run_program({f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}})
    assert run.error is None, run.error
    assert run.of_type(JOBSET) == []
    assert run.outputs["demoJobSets"] == {}


BAD = [
    (
        "system pool too small for the controllers",
        {
            f"{P}:cluster": {"systemMachineType": "n2-standard-8"},
            f"{P}:serving": {"router": {"eppResources": {"requests": {"cpu": "6"}}}},
        },
        ["cluster.systemMachineType", "n2-standard-8", "8000m CPU"],
    ),
    (
        "one controller bigger than a node",
        {f"{P}:addons": {"lws": {"controllerResources": {"requests": {"cpu": "64"}}}}},
        ["addons.lws.controllerResources.requests", '"cpu": "64"', "n2-standard-32"],
    ),
    (
        "demo shape fits no partition",
        {f"{P}:demos": {"subslicing": {"topology": "2x4x2"}}},
        ["demos.subslicing.topology", "2x4x2", "2x2x4"],
    ),
    (
        "unknown priority",
        {f"{P}:demos": {"superslicing": {"priority": "urgent"}}},
        ["demos.superslicing.priority", "low-priority-1000"],
    ),
    ("unpinned chart", {f"{P}:addons": {"jobset": {"version": "latest"}}}, ["addons.jobset.version", "'latest'"]),
    (
        "unpinned manifest",
        {f"{P}:addons": {"sliceController": {"manifestUrl": "https://example.com/main/x.yaml"}}},
        ["addons.sliceController.manifestUrl", "pinned"],
    ),
]


@pytest.mark.parametrize(("case", "overrides", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_layer_config_fails_before_any_resource(case: str, overrides: dict, expected: list[str]) -> None:
    assert_rejected(overrides, expected)


def test_priority_classes_use_the_served_non_deprecated_version(dev: Run) -> None:
    """The pinned Kueue CRD decides: the storage version, not a deprecated one; old stacks update in place."""
    crd_dir = upstream.path("schemas/crds")
    (crd,) = [
        doc
        for path in sorted(crd_dir.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
        and doc.get("kind") == "CustomResourceDefinition"
        and doc["spec"]["names"]["kind"] == "WorkloadPriorityClass"
    ]
    (storage,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    assert storage["served"] and not storage.get("deprecated")
    api = f"{crd['spec']['group']}/{storage['name']}"
    classes = [r for r in dev.registrations if r.type.endswith(":WorkloadPriorityClass")]
    assert len(classes) == 3
    for reg in classes:
        assert reg.inputs["apiVersion"] == api and reg.type == f"kubernetes:{api}:WorkloadPriorityClass"
        # stacks created with v1beta1 adopt the same object instead of creating a second one with its name
        assert {"spec": {"type": "kubernetes:kueue.x-k8s.io/v1beta1:WorkloadPriorityClass"}} in [
            {"spec": {"type": a.get("spec", {}).get("type")}} for a in reg.aliases
        ]
