"""The sub-slicing and super-slicing demo JobSets, derived from their slice topology.

One pod per TPU VM: parallelism = completions = VMs in the slice, each pod requesting all the
chips of its VM. 2x2x2 on tpu7x-standard-4t gives 2 pods of 4 chips; 4x4x8 gives 32.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.base import Component
from components.model.geometry import Slice
from components.model.k8s_settings import DEMO_REPLICATED_JOB, SubslicingDemo, SuperslicingDemo
from components.model.settings import Settings
from components.objects import KubernetesObject
from components.queues import ACCELERATOR_LABEL, TPU_RESOURCE, SliceQueues, healthy_partition_selector

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
SLICE_TOPOLOGY_ANNOTATION = "cloud.google.com/gke-tpu-slice-topology"
# Dynamic-slice pods carry no static `cloud.google.com/gke-tpu-topology` node selector, which GKE's TPU admission
# webhook otherwise requires; llm-d's TPU7x dynamic-slice recipe sets this on every pod template
# (llm-d/llm-d@33a21d70 guides/pd-disaggregation/modelserver/tpu/v7-dynamic-slice/vllm/base/disaggregatedset.yaml).
SKIP_TPU_WEBHOOK_CHECK = "cloud.google.com/skip-tpu-webhook-check"
DEMO_POD = Path(__file__).resolve().parent.parent / "manifests" / "demo-pod.yaml"


def demo_pod(slice_: Slice) -> dict[str, Any]:
    pod = copy.deepcopy(yaml.safe_load(DEMO_POD.read_text()))
    pod["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION] = str(slice_.topology)
    pod["metadata"]["annotations"][SKIP_TPU_WEBHOOK_CHECK] = "true"
    pod["spec"]["nodeSelector"][ACCELERATOR_LABEL] = slice_.cube.system.accelerator
    pod["spec"]["nodeSelector"].update(healthy_partition_selector(slice_))
    chips = str(slice_.chips_per_pod)
    for container in pod["spec"]["containers"]:
        container["resources"] = {"requests": {TPU_RESOURCE: chips}, "limits": {TPU_RESOURCE: chips}}
    return pod


def jobset_spec(slice_: Slice, replicas: int) -> dict[str, Any]:
    return {
        "replicatedJobs": [
            {
                "name": DEMO_REPLICATED_JOB,
                "replicas": replicas,
                "template": {
                    "spec": {
                        "parallelism": slice_.vms,
                        "completions": slice_.vms,
                        "backoffLimit": 10,
                        "template": demo_pod(slice_),
                    }
                },
            }
        ]
    }


class SlicingJobSet(Component):
    """One demo JobSet: `replicas` slices of one topology, queued through Kueue."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        demo: SubslicingDemo | SuperslicingDemo,
        queues: SliceQueues,
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gke-tpu-slicing:workloads:SlicingJobSet", name, opts)
        slice_ = settings.slice_of(demo.topology)
        self.pods = slice_.vms * demo.replicas
        self.jobset = KubernetesObject(
            f"{name}-jobset",
            {
                "apiVersion": JOBSET_API,
                "kind": "JobSet",
                "metadata": {
                    "name": demo.name,
                    "namespace": queues.namespace.metadata.name,
                    "labels": queues.admission_labels(demo.priority),
                },
                "spec": jobset_spec(slice_, demo.replicas),
            },
            # The labels name the LocalQueue and priority class; the rest of the Kueue objects must exist too.
            self.child(
                provider=provider,
                depends_on=queues.objects,
                # Every change replaces the JobSet, delete-first (the name is fixed): none updates in place once
                # it runs. JobSet's webhook refuses any change of spec.replicatedJobs while the JobSet is not
                # suspended (kubernetes-sigs/jobset v0.11.1 pkg/webhooks/jobset_webhook.go:336-350); on admission
                # Kueue merges the flavor's and the slice controller's node labels
                # (cloud.google.com/gke-tpu-topology) into the pod template's nodeSelector (kueue v0.17.4
                # pkg/controller/jobs/jobset/jobset_controller.go:148, pkg/podset/podset.go:161-174), an atomic
                # map (the JobSet CRD's x-kubernetes-map-type: atomic), so Pulumi's next apply of that template
                # conflicts with Kueue's field manager; and Kueue refuses a new queue-name label on a job that is
                # not suspended (pkg/controller/jobframework/validation.go:151). A priority change (a label only)
                # is one more such update: a new JobSet is a new Workload, admitted at its new priority.
                replace_on_changes=["*"],
                delete_before_replace=True,
            ),
        )
        self.register_outputs(
            {"name": demo.name, "topology": demo.topology, "pods": self.pods, "chips": slice_.chips * demo.replicas}
        )


def demo_workloads(
    settings: Settings,
    queues: SliceQueues,
    provider: k8s.Provider,
    jobset: pulumi.Resource,
    pools: list[pulumi.Resource],
    slice_controller: pulumi.Resource,
    opts: pulumi.ResourceOptions | None = None,
) -> dict[str, SlicingJobSet]:
    """The demos enabled under `demos`, after the JobSet controller, the Kueue objects and the TPU pools.

    And after the slice controller: `pulumi destroy` deletes each JobSet (foreground: Pulumi waits for its
    Kueue Workload) while the controller that holds the Workload's slice finalizer is still running.
    """
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[jobset, *pools, slice_controller]))
    demos = {"subslicing": settings.demos.subslicing, "superslicing": settings.demos.superslicing}
    return {
        key: SlicingJobSet(key, settings, demo, queues, provider, opts) for key, demo in demos.items() if demo.enabled
    }
