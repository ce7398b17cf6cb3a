"""The sub-slicing and super-slicing demo JobSets, derived from their slice topology.

One pod per TPU VM: parallelism = completions = VMs in the slice, each pod requesting all the
chips of its VM. 2x2x2 on tpu7x-standard-4t gives 2 pods of 4 chips; 4x4x8 gives 32.
"""

from pathlib import Path
from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.component import Component
from components.kubernetes_object import KubernetesObject
from components.kueue_objects import healthy_partition_selector
from components.model.config.images import pull_policy
from components.model.config.k8s_settings import DEMO_REPLICATED_JOB
from components.model.keys import ACCELERATOR_LABEL, SKIP_TPU_WEBHOOK_CHECK, SLICE_TOPOLOGY_ANNOTATION, TPU_RESOURCE
from components.model.pod_security import container_context, pod_context
from components.model.tpu import geometry
from components.model.tpu.geometry import Slice, Topology

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
DEMO_POD = Path(__file__).resolve().parent.parent / "manifests" / "demo-pod.yaml"


def demo_pod(slice_: Slice, image: str) -> dict[str, Any]:
    pod = yaml.safe_load(DEMO_POD.read_text())
    pod["metadata"]["annotations"][SLICE_TOPOLOGY_ANNOTATION] = str(slice_.topology)
    # No static `cloud.google.com/gke-tpu-topology` node selector, which GKE's TPU admission webhook otherwise
    # requires; llm-d's TPU7x dynamic-slice recipe sets this on every pod template (llm-d/llm-d@33a21d70
    # guides/pd-disaggregation/modelserver/tpu/v7-dynamic-slice/vllm/base/disaggregatedset.yaml).
    pod["metadata"]["annotations"][SKIP_TPU_WEBHOOK_CHECK] = "true"
    pod["spec"]["nodeSelector"][ACCELERATOR_LABEL] = slice_.cube.system.accelerator
    pod["spec"]["nodeSelector"].update(healthy_partition_selector(slice_))
    chips = str(slice_.chips_per_pod)
    # Root: the pods pip-install into the image's site-packages (model/pod_security.py).
    pod["spec"]["securityContext"] = pod_context()
    for container in pod["spec"]["containers"]:
        container["image"], container["imagePullPolicy"] = image, pull_policy(image)
        container["securityContext"] = container_context()
        container["resources"] = {"requests": {TPU_RESOURCE: chips}, "limits": {TPU_RESOURCE: chips}}
    return pod


def jobset_spec(slice_: Slice, replicas: int, image: str) -> dict[str, Any]:
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
                        "template": demo_pod(slice_, image),
                    }
                },
            }
        ]
    }


class SlicingJobSetArgs(TypedDict):
    jobset_name: str
    """The JobSet's name."""
    machine_type: str
    """The TPU machine type of the pools."""
    cube_topology: str
    """The topology of one pool's cube."""
    topology: str
    """The topology of each slice."""
    replicas: int
    """The slices (replicated jobs) of the JobSet."""
    image: str
    """The pods' image (python3 and pip)."""
    namespace: pulumi.Input[str]
    """The workload namespace."""
    queue_labels: dict[str, pulumi.Input[str]]
    """The labels that queue it: the LocalQueue and the priority class, by Output (SliceQueues.admission_labels)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""


class SlicingJobSet(Component):
    """One demo JobSet: `replicas` slices of one topology, queued through Kueue.

    `opts.depends_on`: the JobSet controller, the Kueue objects, the TPU pools and the slice controller.
    """

    def __init__(self, name: str, args: SlicingJobSetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:workloads:SlicingJobSet", name, opts)
        cube = geometry.Cube(geometry.system(args["machine_type"]), Topology.parse(args["cube_topology"]))
        slice_ = cube.classify(Topology.parse(args["topology"]))
        replicas = args["replicas"]
        self.pods = slice_.vms * replicas
        self.jobset = KubernetesObject(
            f"{name}-jobset",
            {
                "apiVersion": JOBSET_API,
                "kind": "JobSet",
                "metadata": {
                    "name": args["jobset_name"],
                    "namespace": args["namespace"],
                    "labels": args["queue_labels"],
                },
                "spec": jobset_spec(slice_, replicas, args["image"]),
            },
            self.child(
                provider=args["provider"],
                # Every change replaces the JobSet, delete-first (the name is fixed): none updates in place once
                # it runs (JobSet's and Kueue's webhooks, Kueue's nodeSelector merge: model/diff/kubernetes.py).
                # A priority change (a label only) too: a new JobSet is a new Workload, admitted at its new priority.
                replace_on_changes=["*"],
                delete_before_replace=True,
            ),
        )
        self.register_outputs(
            {
                "name": args["jobset_name"],
                "topology": args["topology"],
                "pods": self.pods,
                "chips": slice_.chips * replicas,
            }
        )
