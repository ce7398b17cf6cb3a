"""The sources the configuration reference's rules cite, the `Rule` record the per-section rule
tables (components/model/reference_gcp.py, reference_k8s.py, reference_serving.py) share.

Pure model code: no Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.model.checks import LWS_NAME_MAX, LWS_REVISION_LEN
from components.model.machines import GENERAL_PURPOSE

# Sources, cited by many rules.
GCE_NAMES = "https://cloud.google.com/compute/docs/naming-resources#resource-name-format"
GKE_CLUSTER_API = (
    "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster; "
    "googleapis/googleapis@f8291d2b google/container/v1/cluster_service.proto:2912 (Cluster.name)"
)
GKE_NODE_POOL_API = (
    "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools"
)
TF_CLUSTER = "hashicorp/terraform-provider-google-beta google-beta/services/container/resource_container_cluster.go"
TF_POLICY = "hashicorp/terraform-provider-google-beta google-beta/services/compute/resource_compute_resource_policy.go"
PROJECT_IDS = "https://cloud.google.com/resource-manager/docs/creating-managing-projects#before_you_begin"
ZONES = "https://cloud.google.com/compute/docs/regions-zones"
VPC_MTU = "https://cloud.google.com/vpc/docs/mtu"
SUBNET_RANGES = "https://cloud.google.com/vpc/docs/subnets#valid-ranges"
PROXY_SUBNETS = "https://cloud.google.com/load-balancing/docs/proxy-only-subnets#proxy_only_subnet_size"
DYNAMIC_SLICING = "https://cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing"
MAINTENANCE = (
    "https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions"
    "#scope_of_maintenance_to_exclude"
)
NODE_SIZES = "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations"
MACHINES = GENERAL_PURPOSE  # the machine-type table's own sources (components/model/machines.py)
TPU7X = "https://cloud.google.com/tpu/docs/tpu7x"
RESERVATION_BLOCK_API = (
    "googleapis/googleapis@f8291d2b google/cloud/compute/v1/compute.proto:65408 (ReservationBlock.name: "
    "1-63 characters, RFC 1035)"
)
RESERVATION_API = "googleapis/googleapis@f8291d2b google/cloud/compute/v1/compute.proto (Reservation.name)"
QUANTITY = "kubernetes/apimachinery pkg/api/resource/quantity.go (ParseQuantity)"
REQUESTS_LIMITS = "kubernetes/kubernetes pkg/apis/core/validation/validation.go (ValidateResourceRequirements)"
HELM_OCI = "https://helm.sh/docs/topics/registries/"
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
GCS_OBJECTS = "https://cloud.google.com/storage/docs/objects#naming"
BUCKETS = "https://cloud.google.com/storage/docs/buckets#naming"
GATEWAY_CLASSES = "https://cloud.google.com/kubernetes-engine/docs/how-to/gatewayclass-capabilities"
PROM_DURATION = (
    "prometheus/common model.ParseDuration, as prometheus-engine v0.17.2 pkg/operator/apis/monitoring/v1/"
    "common_types.go parses it; kube-openapi strfmt for the CRD's format: duration"
)
CHANNELS_API = "https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.notificationChannels"
PULUMI_SECRETS = "https://www.pulumi.com/docs/iac/concepts/secrets/"
LABELS = "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set"
ROUTER_RELEASE = "llm-d/llm-d-router v0.10.0 .github/workflows/ci-release.yaml, hack/push-chart.sh"
THIS_PROGRAM = "this program (see the allowed values)"

CHANGES = "changes.md"
LWS_ROOM = LWS_NAME_MAX - 1 - LWS_REVISION_LEN

PEM = "-----BEGIN PRIVATE KEY-----"


@dataclass(frozen=True)
class Rule:
    """What one key (or a `{a,b}`-pattern of keys) accepts, why, and what changing it does."""

    allowed: str
    source: str
    change: str  # anchor of the row in docs/changes.md
    refused: Any  # a value the rule refuses (the per-key test sets it and expects the key named)
    accepted: Any  # a legal edge value (the per-key test sets it and expects it to load)
    context: dict[str, Any] = field(default_factory=dict)  # other keys the two test values need
    refused_context: dict[str, Any] | None = None  # other keys for the refused value alone (default: context)
