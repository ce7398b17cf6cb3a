"""The Kueue objects (components/kueue_objects.py): Topology, ResourceFlavor, queues, priority classes."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components import graph_args as program
from components.kueue_objects import SliceQueues
from tests import upstream
from tests.graph_queries import kueue_objects, shape
from tests.harness import CHART, JOBSET, KUEUE, Run, assert_rejected, declare, normalize, ok
from tests.stack_config import P, dev_settings


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


def test_every_kueue_object_waits_for_the_kueue_chart(dev: Run) -> None:
    kueue = dev.get(CHART, "kueue-chart")
    objects = kueue_objects(dev)
    # Topology, ResourceFlavor, AdmissionCheck, ClusterQueue, LocalQueue, 3 priorities and the burst slots'
    assert len(objects) == 9
    for obj in objects:
        assert kueue.urn in obj.dependencies, obj.name
    check = dev.get(f"{KUEUE}/v1beta2:AdmissionCheck", "queues-admission-check")
    slice_controller = dev.get("kubernetes:yaml/v2:ConfigFile", "slice-controller-manifest")
    assert dev.depends_on(check, slice_controller)
    assert dev.depends_on(slice_controller, kueue) and dev.depends_on(slice_controller, dev.get(CHART, "jobset-chart"))


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
    # and the burst slots' class, derived between the floors' (prod-99) and what runs below them (batch-10)
    assert classes == {"batch-10": 10, "prod-99": 99, "burst-priority-54": 54}
    labels = run.get(JOBSET, "subslicing-jobset").inputs["metadata"]["labels"]
    assert labels == {"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/priority-class": "batch-10"}
    cq = normalize(run.get(f"{KUEUE}/v1beta2:ClusterQueue", "queues-cluster-queue").inputs)
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "200"


def test_priority_classes_use_the_served_non_deprecated_version(dev: Run) -> None:
    """The pinned Kueue CRD decides: the storage version, not a deprecated one; old stacks update in place."""
    docs = [d for p in sorted(upstream.path("schemas/crds").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    crds = [d for d in docs if d and d.get("kind") == "CustomResourceDefinition"]
    (crd,) = [d for d in crds if d["spec"]["names"]["kind"] == "WorkloadPriorityClass"]
    (storage,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    assert storage["served"] and not storage.get("deprecated")
    api = f"{crd['spec']['group']}/{storage['name']}"
    classes = [r for r in dev.registrations if r.type.endswith(":WorkloadPriorityClass")]
    assert len(classes) == 4  # the three configured and the burst slots'
    for reg in classes:
        assert reg.inputs["apiVersion"] == api and reg.type == f"kubernetes:{api}:WorkloadPriorityClass"
        # stacks created with v1beta1 adopt the same object instead of creating a second one with its name
        assert {"spec": {"type": "kubernetes:kueue.x-k8s.io/v1beta1:WorkloadPriorityClass"}} in [
            {"spec": {"type": a.get("spec", {}).get("type")}} for a in reg.aliases
        ]


def test_the_queues_from_their_args_alone_register_as_in_the_program() -> None:
    s = dev_settings()
    types = {"kubernetes:kueue.x-k8s.io/v1beta2:" + k for k in ("Topology", "ResourceFlavor", "LocalQueue")}

    def body() -> None:
        provider = k8s.Provider("cluster-k8s", kubeconfig="{}")
        kueue = pulumi.ComponentResource("test:index:Kueue", "kueue")
        SliceQueues("queues", program.queues_args(s, provider, kueue, kueue))

    mine, theirs = shape(declare(body), types), shape(ok().registrations, types)
    assert len(mine) == 3 and mine == theirs
