"""Settings of the Kubernetes half: Kueue and the demo workloads; the add-ons are in addons_settings.py and serving in
serving_settings.py."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from components.model.config.checks import DNS_LABEL_MAX, QUANTITY_RE, Model, accept_if, dns1035_label, dns_subdomain
from components.model.config.images import PYTHON
from components.model.config.oci import pinned_image
from components.model.config.rules import (
    FLAG,
    JOBSET_WEBHOOK,
    K8S_NAMES,
    KUEUE_CRDS,
    LABELS,
    OCI,
    QUANTITY_RULE,
    THIS_PROGRAM,
    Namespace,
    PriorityName,
    Rule,
    Subdomain,
    TopologyName,
    at_least,
)

_IMMUTABLE = Rule(change="kueue-immutable")
Quota = Annotated[
    str, accept_if(QUANTITY_RE.match, "a Kubernetes quantity such as 999999, 500m or 999999Pi"), QUANTITY_RULE
]
_QUOTA = "the ClusterQueue's CPU or memory quota"


class KueueSettings(Model):
    namespace: Annotated[
        Namespace,
        Rule(
            "a namespace name: a DNS-1123 label (at most 63), its own: not an add-on's namespace, not kube-*",
            f"{K8S_NAMES}; kubernetes-sigs/kueue v0.17.4 charts/kueue/templates/webhook/manifests.yaml (mpod.kb.io "
            "fails closed in managedJobsNamespaceSelector) and apis/config/v1beta2/defaults.go (kube-system and "
            "Kueue's own namespace left out)",
            "kueue-names",
            "llm_d",
            "a" * 63,
        ),
    ] = Field("llm-d-pd-disaggregation", description="the workload namespace (LocalQueue, JobSets, serving)")
    topology_name: Annotated[Subdomain, _IMMUTABLE] = Field("slice-topology", description="a Kueue object's name")
    flavor_name: Annotated[Subdomain, _IMMUTABLE] = Field("slice-rf", description="a Kueue object's name")
    admission_check_name: Annotated[Subdomain, Rule(change="kueue-names")] = Field(
        "ac", description="a Kueue object's name"
    )
    cluster_queue: Annotated[Subdomain, _IMMUTABLE] = Field("cq", description="a Kueue object's name")
    # The LocalQueue's name is also the kueue.x-k8s.io/queue-name label the program puts on every workload.
    local_queue: Annotated[
        str,
        AfterValidator(lambda v: dns_subdomain(v, DNS_LABEL_MAX, ": it is the kueue.x-k8s.io/queue-name label")),
        Rule(
            "a DNS-1123 subdomain of at most 63 characters: it is also the kueue.x-k8s.io/queue-name label of "
            "every workload",
            f"{K8S_NAMES}; {LABELS}",
            "local-queue",
            "l" * 64,
            "l.q",
        ),
    ] = Field("lq", description="a Kueue object's name")
    priorities: Annotated[
        dict[str, int],
        Rule(
            "a non-empty map of WorkloadPriorityClass name (a DNS-1123 subdomain of at most 63, the "
            "kueue.x-k8s.io/priority-class label) to an int32 value; every `priority` key names one",
            f"{KUEUE_CRDS} (workloadpriorityclasses: value int32); {LABELS}",
            "kueue-objects",
            {"Low": 1},
            {
                "low-priority-1000": -(2**31),
                "medium-priority-2000": 0,
                "high-priority-3000": 2**31 - 1,
                "p." + "x" * 61: 1,
            },
        ),
    ] = Field(
        default_factory=lambda: {"low-priority-1000": 1000, "medium-priority-2000": 2000, "high-priority-3000": 3000},
        min_length=1,
        description="the WorkloadPriorityClasses",
    )
    # None = the chips the TPU node pools provide, so Kueue's quota preemption matches the hardware.
    tpu_quota: Annotated[int | None, at_least(0, ", or unset for the chips the TPU pools provide")] = Field(
        None, ge=0, description="the ClusterQueue's `google.com/tpu` nominal quota"
    )
    cpu_quota: Quota = Field("999999", description=_QUOTA)
    memory_quota: Quota = Field("999999Pi", description=_QUOTA)

    @field_validator("priorities")
    @classmethod
    def _priorities(cls, v: dict[str, int]) -> dict[str, int]:
        # A WorkloadPriorityClass is named by the kueue.x-k8s.io/priority-class label of each workload: a
        # label value that is also an object name, so a DNS-1123 subdomain of at most 63 characters. Its value
        # is an int32 (kueue v0.17.4 CRD workloadpriorityclasses: value format int32).
        for name, value in v.items():
            try:
                dns_subdomain(name, DNS_LABEL_MAX)
            except ValueError as err:
                raise ValueError(f"priority class {name!r}: {err}") from None
            if not -(2**31) <= value < 2**31:
                raise ValueError(f"priority class {name!r}: a value from -2147483648 to 2147483647 (int32)")
        return v


# The replicated job of each demo JobSet; JobSet names its Jobs <jobset>-<replicated job>-<index>.
DEMO_REPLICATED_JOB = "job-jax"


def longest_pod_name(jobset: str, replicas: int, pods: int) -> str:
    """The longest pod name JobSet's webhook checks: it makes every Job Indexed, then refuses a JobSet whose
    GenPodName + "-abcde" is no DNS-1035 label (kubernetes-sigs/jobset v0.11.1 pkg/webhooks/jobset_webhook.go:127,254;
    pkg/util/placement/placement.go:20). Longer than every Job name, <jobset>-<replicatedJob>-<index>."""
    return f"{jobset}-{DEMO_REPLICATED_JOB}-{replicas - 1}-{pods - 1}-abcde"


def _jobset_name(v: str) -> str:
    # A JobSet's Jobs and pods take its name as prefix, and JobSet's webhook requires them to be DNS-1035 labels.
    return dns1035_label(v, DNS_LABEL_MAX - len(longest_pod_name("", 1, 1)), ": JobSet's pod names start with it")


# The keys both demos have.
DemoEnabled = Annotated[bool, Field(description="whether that demo JobSet exists"), FLAG, Rule(change="demo-enabled")]
DemoTopology = Annotated[TopologyName, Field(description="the demo's slice shape")]
DemoPriority = Annotated[PriorityName, Field(description="the demo's Kueue priority class")]
_DEMO_NAME = "the demo JobSet's name"


class SubslicingDemo(Model):
    enabled: DemoEnabled = True
    name: Annotated[
        str,
        AfterValidator(_jobset_name),
        Rule(
            "a DNS-1035 label such that JobSet's longest pod name, <name>-job-jax-<replicas - 1>-<pods - 1>-abcde, "
            "has at most 63 characters (45 with 1-10 replicas of 1-10 pods)",
            JOBSET_WEBHOOK,
            refused="a" * 46,
            accepted="a" * 45,
            context={"demos": {"subslicing": {"replicas": 10}}},
        ),
    ] = Field("kueue-jobset-simple-subslicing", description=_DEMO_NAME)
    topology: DemoTopology = "2x2x2"
    replicas: Annotated[
        int,
        at_least(
            1,
            " (slices); the longest pod name bounds it with demos.subslicing.name",
            f"{THIS_PROGRAM}; {JOBSET_WEBHOOK}",
        ),
    ] = Field(6, ge=1, description="how many sub-slices the demo asks for")
    priority: DemoPriority = "low-priority-1000"


class SuperslicingDemo(Model):
    enabled: DemoEnabled = True
    name: Annotated[
        str,
        AfterValidator(_jobset_name),
        Rule(
            "a DNS-1035 label such that JobSet's longest pod name, <name>-job-jax-0-<pods - 1>-abcde, has at most 63 "
            "characters (44 with 11-100 pods)",
            JOBSET_WEBHOOK,
            refused="0-superslice",
            accepted="a" * 44,
        ),
    ] = Field("kueue-jobset-simple-superslicing", description=_DEMO_NAME)
    topology: DemoTopology = "4x4x8"
    priority: DemoPriority = "medium-priority-2000"

    @property
    def replicas(self) -> int:
        return 1


_DEMO = Rule(change="demo-jobsets")


class DemosSettings(Model):
    subslicing: Annotated[SubslicingDemo, _DEMO] = Field(default_factory=dict)
    superslicing: Annotated[SuperslicingDemo, _DEMO] = Field(default_factory=dict)
    image: Annotated[
        str,
        AfterValidator(pinned_image),
        Rule(
            "a pinned OCI image reference with python3 and pip: an exact tag, a sha256 digest or both, no 'latest' "
            "without a digest",
            OCI,
            "demo-jobsets",
            "python:latest",
            "python@sha256:" + "0" * 64,
        ),
    ] = Field(PYTHON.reference, description="the demo JobSets' image (its pods pip-install jax[tpu] as they start)")

    def jobsets(self) -> dict[str, SubslicingDemo | SuperslicingDemo]:
        return {"subslicing": self.subslicing, "superslicing": self.superslicing}
