"""SPEC sections 6-8: add-ons, Kueue objects and the demo JobSets, their ordering and their derivation."""

from __future__ import annotations

import pytest
import yaml

from components.model.addons.kueue_config import INTEGRATIONS, KUEUE_CONFIG_VERSION
from components.model.tpu import geometry
from components.model.tpu.geometry import Topology, TpuSystem
from tests import upstream
from tests.harness import Registration, Run, assert_rejected, normalize, ok, tpu_pools

P = "gke-tpu-slicing"
CHART = "kubernetes:helm.sh/v4:Chart"
KUEUE = "kubernetes:kueue.x-k8s.io"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
POOL = "gcp:container/nodePool:NodePool"


def addon_charts(run: Run) -> list[Registration]:
    return [run.get(CHART, f"{name}-chart") for name in ("jobset", "kueue", "lws")]


def kueue_objects(run: Run) -> list[Registration]:
    return [r for r in run.registrations if r.type.startswith(KUEUE)]


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
    kueue_values = normalize(charts["kueue-chart"]["values"])
    # The manager configuration and the replicas: the tests below.
    assert set(kueue_values.pop("managerConfig")) == {"controllerManagerConfigYaml"}
    manager = kueue_values["controllerManager"]
    assert {k: manager.pop(k) for k in ("replicas", "podDisruptionBudget", "topologySpreadConstraints")}
    assert kueue_values == {
        "controllerManager": {
            "manager": {
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "512Mi"}}
            }
        }
    }


# ------------------------------------------------------------------------------------------------
# A Kueue outage stays in the workload namespace


def kueue_values(run: Run) -> dict:
    return normalize(run.get(CHART, "kueue-chart").plain("values"))


def manager_config(run: Run) -> dict:
    return yaml.safe_load(kueue_values(run)["managerConfig"]["controllerManagerConfigYaml"])


def pinned_kueue_values() -> dict:
    return yaml.safe_load(upstream.path(f"schemas/charts/kueue-v{KUEUE_CONFIG_VERSION}/values.yaml").read_text())


def rendered_webhooks(config: dict) -> dict[str, tuple[str, dict]]:
    """(failurePolicy, namespaceSelector) of the pod-level webhooks as Kueue's chart renders them for `config`.

    kubernetes-sigs/kueue charts/kueue/templates/webhook/manifests.yaml@v0.17.4: mpod.kb.io (L265-281),
    mdeployment.kb.io (L84-100) and mstatefulset.kb.io fail closed only when their integration is listed,
    and take `managedJobsNamespaceSelector` when the configuration has one, else exclude kube-system and the
    release namespace; the job kinds' webhooks (mjobset.kb.io, mleaderworkerset.kb.io, ...) always fail closed
    and take the configuration's selector when set (`{{- if (hasKey $managerConfig ...) }}`), none otherwise.
    """
    default = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}
        ]
    }
    selector = config.get("managedJobsNamespaceSelector")
    frameworks = config["integrations"]["frameworks"]
    out = {}
    for name, framework in (("mpod", "pod"), ("mdeployment", "deployment"), ("mstatefulset", "statefulset")):
        out[name] = ("Fail" if framework in frameworks else "Ignore", selector or default)
    for name in ("mjob", "mjobset", "mleaderworkerset"):
        out[name] = ("Fail", selector or {})  # {} selects every namespace
    return out


def test_kueue_webhooks_fail_closed_only_in_the_workload_namespace(dev: Run) -> None:
    config = manager_config(dev)
    queued = sorted({w.plain("metadata")["namespace"] for w in dev.of_type(JOBSET) + dev.of_type(LWS)})
    assert queued == ["llm-d-pd-disaggregation"]  # every queued workload of the run, demos and serving
    webhooks = rendered_webhooks(config)
    only_queued = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": queued}]}
    assert webhooks["mpod"] == ("Fail", only_queued)  # LWS pods are never created unmanaged
    assert webhooks["mdeployment"][0] == webhooks["mstatefulset"][0] == "Ignore"
    assert all(sel == only_queued for _, sel in webhooks.values())
    # With the pinned default, the same webhooks covered every namespace but two.
    default = yaml.safe_load(pinned_kueue_values()["managerConfig"]["controllerManagerConfigYaml"])
    assert rendered_webhooks(default)["mpod"][1]["matchExpressions"][0]["operator"] == "NotIn"
    assert rendered_webhooks(default)["mdeployment"][0] == "Fail"
    # The selector follows the namespace setting.
    moved = manager_config(ok({f"{P}:kueue": {"namespace": "tpu-jobs"}}))
    assert moved["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"] == ["tpu-jobs"]


@pytest.mark.parametrize(
    ("namespace", "why"),
    [
        ("kueue-system", "it is addons.kueue.namespace"),
        ("lws-system", "it is addons.lws.namespace"),
        ("kube-system", "kube- is Kubernetes' own prefix"),
    ],
)
def test_the_workload_namespace_is_no_controllers_namespace(namespace: str, why: str) -> None:
    """Kueue's pod webhook fails closed in the workload namespace (mpod.kb.io, `pod` listed): Kueue's own pods
    there would need Kueue to start, and an add-on's or kube-system's pods would stop whenever Kueue is down.
    Kueue's default selector leaves kube-system and its own namespace out for that reason
    (kubernetes-sigs/kueue apis/config/v1beta2/defaults.go@v0.17.4 L111-119)."""
    assert_rejected({f"{P}:kueue": {"namespace": namespace}}, ["kueue.namespace", repr(namespace), why])
    # The add-on moved away, the name is free again.
    ok({f"{P}:kueue": {"namespace": "kueue-system"}, f"{P}:addons": {"kueue": {"namespace": "kq"}}})


def test_kueue_manager_config_is_the_pinned_default_but_namespaces_integrations_and_metrics(dev: Run) -> None:
    default = yaml.safe_load(pinned_kueue_values()["managerConfig"]["controllerManagerConfigYaml"])
    ours = manager_config(dev)
    assert ours.pop("managedJobsNamespaceSelector")
    assert ours["metrics"].pop("enableClusterQueueResources") is True  # observability's quota series
    frameworks = ours["integrations"].pop("frameworks")
    assert frameworks == list(INTEGRATIONS)
    assert set(frameworks) < set(default["integrations"].pop("frameworks"))
    assert ours == default
    # Every integration kept has objects in the run (or is LWS's implicit pod integration).
    assert dev.of_type(JOBSET) and dev.of_type(LWS)
    # Leader election stays on: the replicas below elect one leader.
    assert ours["leaderElection"]["leaderElect"] is True


def test_kueue_runs_two_replicas_under_the_charts_disruption_budget(dev: Run) -> None:
    pinned = pinned_kueue_values()["controllerManager"]
    manager = kueue_values(dev)["controllerManager"]
    # Keys the pinned chart has (its default: 1 replica, no PDB).
    assert pinned["replicas"] == 1 and pinned["podDisruptionBudget"] == {"enabled": False, "minAvailable": 1}
    assert {"replicas", "podDisruptionBudget", "topologySpreadConstraints"} <= set(pinned)
    assert manager["replicas"] == 2
    assert manager["podDisruptionBudget"] == {"enabled": True, "minAvailable": 1}
    (spread,) = manager["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["whenUnsatisfiable"] == "ScheduleAnyway"
    # One replica: no budget (minAvailable 1 of 1 would block every drain), no spread.
    single = kueue_values(ok({f"{P}:addons": {"kueue": {"replicas": 1}}}))["controllerManager"]
    assert single["replicas"] == 1 and single["podDisruptionBudget"]["enabled"] is False
    assert "topologySpreadConstraints" not in single
    assert_rejected({f"{P}:addons": {"kueue": {"replicas": 0}}}, ["addons.kueue.replicas"])


def test_the_system_pool_fit_counts_every_kueue_replica() -> None:
    big = {"requests": {"cpu": "13", "memory": "1Gi"}}
    ok({f"{P}:addons": {"kueue": {"replicas": 1, "controllerResources": big}}})
    assert_rejected(
        {f"{P}:addons": {"kueue": {"replicas": 2, "controllerResources": big}}}, ["cluster.systemMachineType"]
    )


def test_addon_versions_and_resources_are_configurable() -> None:
    run = ok({f"{P}:addons": {"kueue": {"version": "0.17.5", "controllerResources": {"requests": {"cpu": "1"}}}}})
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


def test_names_flow_as_outputs_not_literals(codelab: Run) -> None:
    def urn(type_: str, name: str) -> str:
        return codelab.get(type_, name).urn

    topology = urn(f"{KUEUE}/v1beta2:Topology", "queues-topology")
    flavor = urn(f"{KUEUE}/v1beta2:ResourceFlavor", "queues-flavor")
    check = urn(f"{KUEUE}/v1beta2:AdmissionCheck", "queues-admission-check")
    cq = urn(f"{KUEUE}/v1beta2:ClusterQueue", "queues-cluster-queue")
    lq = urn(f"{KUEUE}/v1beta2:LocalQueue", "queues-local-queue")
    ns = urn("kubernetes:core/v1:Namespace", "queues-namespace")
    assert topology in codelab.get(f"{KUEUE}/v1beta2:ResourceFlavor", "queues-flavor").property_dependencies["spec"]
    assert {check, flavor} <= set(
        codelab.get(f"{KUEUE}/v1beta2:ClusterQueue", "queues-cluster-queue").property_dependencies["spec"]
    )
    local = codelab.get(f"{KUEUE}/v1beta2:LocalQueue", "queues-local-queue").property_dependencies
    assert cq in local["spec"] and ns in local["metadata"]
    low = urn(f"{KUEUE}/v1beta2:WorkloadPriorityClass", "queues-priority-low-priority-1000")
    medium = urn(f"{KUEUE}/v1beta2:WorkloadPriorityClass", "queues-priority-medium-priority-2000")
    assert {lq, ns, low} <= set(codelab.get(JOBSET, "subslicing-jobset").property_dependencies["metadata"])
    assert {lq, ns, medium} <= set(codelab.get(JOBSET, "superslicing-jobset").property_dependencies["metadata"])
    for chart in addon_charts(codelab):
        namespace = codelab.get("kubernetes:core/v1:Namespace", chart.name.replace("-chart", "-namespace"))
        assert namespace.urn in chart.property_dependencies["namespace"]


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
                "superslicing": {"enabled": True, "topology": "2x4x8"},
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


def test_priorities_and_names_are_configurable() -> None:
    run = ok(
        {
            f"{P}:kueue": {"localQueue": "team-a", "priorities": {"batch-10": 10, "prod-99": 99}, "tpuQuota": 200},
            f"{P}:demos": {"subslicing": {"priority": "batch-10"}, "superslicing": {"priority": "prod-99"}},
            f"{P}:serving": {"prefill": {"priority": "prod-99"}, "decode": {"priority": "prod-99"}},
        }
    )
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
    run = ok({f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}})
    assert run.of_type(JOBSET) == []
    assert run.outputs["demoJobSets"] == {}


BAD = [
    (
        "system pool too small for the controllers",
        {
            f"{P}:cluster": {"systemMachineType": "n2-standard-8"},
            f"{P}:serving": {"router": {"eppResources": {"requests": {"cpu": "6"}}}},
        },
        ["cluster.systemMachineType", "n2-standard-8", "8500m CPU"],  # Kueue's two replicas count twice,
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
        {f"{P}:demos": {"superslicing": {"enabled": True, "priority": "urgent"}}},
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
