"""The rule each configuration key carries on its field (`Rule`, in the field's `Annotated` type), the sources
the rules cite, and the rule types several keys share.

A key's description is its field's `description`; its `Rule` says what it accepts, why, what changing it does
and the two values its per-key tests set. components/model/config/reference.py reads both to generate
docs/configuration.md and the Pulumi.yaml key list. Pure model code: no Pulumi.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Annotated, Any

from pydantic import AfterValidator

from components.model.config.checks import (
    K8S_NAMES,
    LWS_NAME_MAX,
    LWS_REVISION_LEN,
    dns_label,
    dns_subdomain,
    parse_topology,
    project_id,
)
from components.model.config.machines import GENERAL_PURPOSE
from components.model.config.oci import helm_chart, oci_chart

# Sources, cited by many rules.
GCE_NAMES = "https://cloud.google.com/compute/docs/naming-resources#resource-name-format"
GKE_NODE_POOL_API = (
    "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools"
)
TF_CLUSTER = "hashicorp/terraform-provider-google-beta google-beta/services/container/resource_container_cluster.go"
TF_POLICY = "hashicorp/terraform-provider-google-beta google-beta/services/compute/resource_compute_resource_policy.go"
PROJECT_IDS = "https://cloud.google.com/resource-manager/docs/creating-managing-projects#before_you_begin"
VPC_MTU = "https://cloud.google.com/vpc/docs/mtu"
FLOW_LOGS = "https://cloud.google.com/vpc/docs/flow-logs"
NAT_LOGS = "https://cloud.google.com/nat/docs/monitoring"
TF_SUBNETWORK = "hashicorp/terraform-provider-google-beta google-beta/services/compute/resource_compute_subnetwork.go"
TF_NAT = "hashicorp/terraform-provider-google-beta google-beta/services/compute/resource_compute_router_nat.go"
DYNAMIC_SLICING = "https://cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing"
MAINTENANCE = (
    "https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions"
    "#scope_of_maintenance_to_exclude"
)
MAINTENANCE_LIMITS = (
    "https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions#limitations"
)
NODE_SIZES = "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations"
MACHINES = GENERAL_PURPOSE  # the machine-type table's own sources (components/model/config/machines.py)
TPU7X = "https://cloud.google.com/tpu/docs/tpu7x"
SLICE_CRD = "https://cloud.google.com/kubernetes-engine/docs/reference/crds/slice"
RESERVATION_BLOCK_API = (
    "googleapis/googleapis@f8291d2b google/cloud/compute/v1/compute.proto:65408 (ReservationBlock.name: "
    "1-63 characters, RFC 1035)"
)
RESERVATION_API = "googleapis/googleapis@f8291d2b google/cloud/compute/v1/compute.proto (Reservation.name)"
QUANTITY = "kubernetes/apimachinery pkg/api/resource/quantity.go (ParseQuantity)"
REQUESTS_LIMITS = "kubernetes/kubernetes pkg/apis/core/validation/validation.go (ValidateResourceRequirements)"
HELM_OCI = "https://helm.sh/docs/topics/registries/"
HELM_REPO = "https://helm.sh/docs/topics/chart_repository/"
SEMVER = "https://semver.org (Helm chart versions are SemVer 2)"
KUEUE_CRDS = (
    "kubernetes-sigs/kueue v0.17.4 config/components/crd/bases (ClusterQueueReference, ResourceFlavorReference)"
)
JOBSET_WEBHOOK = "kubernetes-sigs/jobset v0.11.1 pkg/webhooks/jobset_webhook.go (validateCreate, IsDNS1035Label)"
LWS_SERVICE = (
    "kubernetes-sigs/lws v0.8.0 pkg/controllers/leaderworkerset_controller.go:194 (headless Service = LWS name)"
)
LLMD_LIMITS = "llm-d TPU guides (LWS names under Kueue <= 39, GKE slice names <= 49)"
OCI = "distribution/reference regexp.go, reference.go (NameTotalLengthMax = 255); opencontainers/go-digest"
VLLM_SCHEDULER = "vllm-project/vllm vllm/config/scheduler.py (SchedulerConfig._verify_args)"
VLLM_CACHE = "vllm-project/vllm vllm/config/cache.py (CacheDType)"
BUCKETS = "https://cloud.google.com/storage/docs/buckets#naming"
GATEWAY_CLASSES = "https://cloud.google.com/kubernetes-engine/docs/how-to/gatewayclass-capabilities"
LABELS = "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set"
ROUTER_RELEASE = "llm-d/llm-d-router v0.10.0 .github/workflows/ci-release.yaml, hack/push-chart.sh"
THIS_PROGRAM = "this program (see the allowed values)"

ISOLATION = "https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation"
DNS_ENDPOINT = "https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation (DNS-based endpoint)"
AUTHORIZED_NETWORKS = "https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks"
PULUMI_PROTECT = "https://www.pulumi.com/docs/iac/concepts/options/protect/"
NODE_POOL_LIMIT = (
    "GKE's 40-character node pool limit (https://gitlab.com/thorchain/devops/cluster-launcher/-/merge_requests/67)"
)

CHANGES = "changes.md"
LWS_ROOM = LWS_NAME_MAX - 1 - LWS_REVISION_LEN


UNSET: Any = object()  # a test value no rule gave (None, "" and False are values)


# eq=False: hashable by identity, as `Annotated` metadata must be (the contexts are dicts).
@dataclass(frozen=True, eq=False)
class Rule:
    """What a key accepts, why, and what changing it does. On a field, in its `Annotated` type; a rule type's
    parts (allowed, source, test values) come first and the field's own override them; a rule on a section's
    field gives its keys what they leave unset (a change anchor, a context)."""

    allowed: str = ""
    source: str = ""
    change: str = ""  # anchor of the row in docs/changes.md
    refused: Any = UNSET  # a value the rule refuses (the per-key test sets it and expects the key named)
    accepted: Any = UNSET  # a legal edge value (the per-key test sets it and expects it to load)
    context: Mapping[str, Any] = field(default_factory=dict)  # other keys the two test values need
    refused_context: Mapping[str, Any] | None = None  # other keys for the refused value alone (default: context)

    def over(self, base: Rule) -> Rule:
        """This rule, its unset parts taken from `base`."""
        empty = {"refused": UNSET, "accepted": UNSET, "refused_context": None}
        unset = {f.name: getattr(base, f.name) for f in fields(self) if _unset(getattr(self, f.name), empty, f.name)}
        return replace(self, **unset) if unset else self

    @property
    def complete(self) -> bool:
        parts = (self.allowed.strip(), self.source.strip(), self.change)
        return all(parts) and UNSET not in (self.refused, self.accepted)


def _unset(value: Any, empty: dict[str, Any], name: str) -> bool:
    return value is empty[name] if name in empty else not value


# Rule types: the validation and the rule of a kind of value several keys take, written once.
FLAG = Rule("true or false", THIS_PROGRAM, refused="maybe", accepted=False)
Flag = Annotated[bool, FLAG]
ProjectId = Annotated[
    str,
    AfterValidator(project_id),
    Rule(
        "a project ID: 6-30 lowercase letters, digits and hyphens, starting with a letter, not ending with '-'",
        PROJECT_IDS,
        refused="My_Project",
        accepted="a" * 6,
    ),
]
TopologyName = Annotated[
    str,
    AfterValidator(parse_topology),
    Rule(
        "a topology AxBxC that is a partition of a cube (sub-slice) or whole cubes (super-slice: 4x4x4 cubes only, "
        "dimensions that do not decrease, at most 9216 chips), within tpu.cubes",
        f"{DYNAMIC_SLICING}; {TPU7X}; {SLICE_CRD}",
        refused="3x3x3",
        accepted="2x2x1",
    ),
]
PriorityName = Annotated[
    str, Rule("a key of kueue.priorities", THIS_PROGRAM, refused="urgent", accepted="high-priority-3000")
]
SUBDOMAIN = Rule(
    "a DNS-1123 subdomain (at most 253): a custom resource's name, and Kueue's CRDs pattern references to these "
    "objects so",
    f"{K8S_NAMES}; {KUEUE_CRDS}",
    refused="Slice_RF",
    accepted="a." * 126 + "a",
)
NAMESPACE = Rule(
    "a namespace name: a DNS-1123 label (lowercase letters, digits, '-', at most 63)",
    K8S_NAMES,
    refused="Jobset-System",
    accepted="0" * 63,
)
BUCKET = Rule(
    "a bucket name without gs://, 3-63 lowercase letters, digits, '-', '_', '.' (up to 222 with dots, 63 between "
    "two), alphanumeric at both ends, not an IP address, no goog prefix, no google",
    BUCKETS,
)
OCI_CHART = Rule(
    "an OCI chart reference, oci://<registry>/<repository> (OCI name grammar; no tag: the version key pins it)",
    f"{HELM_OCI}; {OCI}",
    refused="ghcr.io/llm-d/charts/x",
    accepted="oci://r/c",
)
# Custom resources are named by DNS-1123 subdomains, and the pinned Kueue CRDs pattern references to them so.
Subdomain = Annotated[str, AfterValidator(dns_subdomain), SUBDOMAIN]
Namespace = Annotated[str, AfterValidator(dns_label), NAMESPACE]  # k8s ValidateNamespaceName
OciChart = Annotated[str, AfterValidator(oci_chart), OCI_CHART]
# For a chart published in a classic Helm repository too (KEDA's, https://kedacore.github.io/charts, has no OCI one).
HelmChart = Annotated[
    str,
    AfterValidator(helm_chart),
    Rule(
        "an OCI chart reference, oci://<registry>/<repository>, or a Helm repository's chart, https://<repository "
        "URL>/<chart name> (no version: the version key pins it)",
        f"{HELM_OCI}; {HELM_REPO}",
        refused="kedacore/keda",
        accepted="https://example.com/charts/keda",
    ),
]
QUANTITY_RULE = Rule("a Kubernetes quantity (full grammar, no sign)", QUANTITY, refused="lots", accepted="1e3")
MINUTES = Rule("an integer from 1 to 1440", THIS_PROGRAM, refused=1441, accepted=1440)


def at_least(n: int, why: str = "", source: str = THIS_PROGRAM, change: str = "", **parts: Any) -> Rule:
    """The rule of an integer key of at least `n`, which its text and its two test values (n - 1, n) say."""
    return Rule(f"an integer of at least {n}{why}", source, change, n - 1, n, **parts)
