"""The configuration reference: every key of the settings model, its rule and where the rule comes from.

`keys()` walks the pydantic model tree, so a key added to a model appears here (and in
docs/configuration.md, and in the per-key tests) without anything else to do, except recording its rule in
RULES: the allowed values in words, their source (documentation URL or upstream code), the row of the change
table that says what changing it does, one value the rule refuses and one legal edge value. A key without a
rule is listed as such, and tests/test_configuration_reference.py fails naming it.

Pure model code: no Pulumi. `python -m components reference --write` regenerates docs/configuration.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from components.model.checks import K8S_NAMES, LWS_NAME_MAX, LWS_REVISION_LEN, PROJECT
from components.model.settings import SECRET_PATHS, Settings, _is_secret

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
MACHINES = "https://cloud.google.com/compute/docs/general-purpose-machines"
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


def _cpu_mem(kind: str, amount: str) -> dict[str, Rule]:
    """Rules of one `requests` / `limits` block of a controller's resources."""
    return {
        f"{kind}.cpu": Rule(
            "a Kubernetes quantity (the full grammar: 500m, 2, 1.5, 2e3, 100u); requests at most limits",
            f"{QUANTITY}; {REQUESTS_LIMITS}",
            "addon-version",
            "-1",
            "0.001" if kind == "requests" else "1e3",
        ),
        f"{kind}.memory": Rule(
            "a Kubernetes quantity (512Mi, 4Gi, 1e9, 1G); requests at most limits",
            f"{QUANTITY}; {REQUESTS_LIMITS}",
            "addon-version",
            "4 Gi",
            amount,
        ),
    }


def _expand(pattern: str) -> list[str]:
    """`a.{b,c}.d` -> [a.b.d, a.c.d] (one level of alternatives, possibly several groups)."""
    m = re.search(r"\{([^}]*)\}", pattern)
    if not m:
        return [pattern]
    return [p for alt in m.group(1).split(",") for p in _expand(pattern[: m.start()] + alt + pattern[m.end() :])]


_TOKEN = "hf_" + "x" * 34  # the shape of a Hugging Face token (never a real one)
_NOW = "2026-11-30T12:00:00Z"
_EXCLUSION = {"cluster": {"maintenanceExclusion": {"start": "2026-12-01T00:00:00Z", "end": "2026-12-20T00:00:00Z"}}}

_RESOURCES: dict[str, Rule] = {}
for _prefix in ("addons.{jobset,kueue,lws}.controllerResources", "serving.router.eppResources"):
    for _key, _rule in {**_cpu_mem("requests", "1Ki"), **_cpu_mem("limits", "64Gi")}.items():
        _RESOURCES[f"{_prefix}.{_key}"] = Rule(
            _rule.allowed + "; the requests of all controllers fit the system pool",
            _rule.source + f"; {NODE_SIZES}",
            "router" if _prefix.startswith("serving") else "addon-version",
            _rule.refused,
            _rule.accepted,
        )

RULES: dict[str, Rule] = {
    "project": Rule(
        "a project ID: 6-30 lowercase letters, digits and hyphens, starting with a letter, not ending with '-'",
        PROJECT_IDS,
        "project",
        "My_Project",
        "a" * 6,
    ),
    "zone": Rule(
        "a zone, <region>-<suffix> (us-central1-ai1a); the region is the zone without its suffix",
        ZONES,
        "cluster-replace",
        "uscentral1",
        "europe-west4-a",
    ),
    "network.prefix": Rule(
        "a GCE name prefix: lowercase letters, digits, '-', starting with a letter; at most 48 characters, so "
        "that the longest derived name, <prefix>-allow-internal, is a GCE name of at most 63",
        GCE_NAMES,
        "cluster-replace",
        "a" * 49,
        "a" * 48,
    ),
    "network.mtu": Rule("an integer from 1300 to 8896", VPC_MTU, "network", 8897, 1300),
    "network.tpuSubnetCidr": Rule(
        "an IPv4 CIDR block with no host bits set, /29 or larger, not overlapping network.proxySubnetCidr",
        SUBNET_RANGES,
        "subnets",
        "10.10.0.0/30",
        "10.10.0.0/29",
    ),
    "network.proxySubnetCidr": Rule(
        "an IPv4 CIDR block with no host bits set, /26 or larger (64 addresses), not overlapping the TPU subnet",
        PROXY_SUBNETS,
        "subnets",
        "172.16.0.0/27",
        "192.168.0.0/26",
    ),
    "cluster.name": Rule(
        "a GKE cluster name: lowercase letters, digits and '-', starting with a letter, ending with a letter or "
        "digit, 1-40 characters",
        GKE_CLUSTER_API,
        "cluster-replace",
        "a" * 41,
        "a" * 40,
    ),
    "cluster.version": Rule(
        "a GKE version or prefix (1.36, 1.36.0, 1.36.0-gke.3712000), resolved at preview against what the channel "
        "offers; the newest it can reach is at least 1.35.2-gke.1842000 (the slice controller), and "
        "1.36.0-gke.3712000 while sub-slices are used",
        f"{DYNAMIC_SLICING}; components/model/gke_versions.py",
        "cluster-version",
        "1.36.0-gke.3711999",
        "1.36.0-gke.3712000",
    ),
    "cluster.releaseChannel": Rule(
        "RAPID: GKE dynamic slicing (the slice controller this cluster enables) requires the Rapid channel; the "
        "provider also takes REGULAR, STABLE, EXTENDED and UNSPECIFIED",
        f"{DYNAMIC_SLICING}; {TF_CLUSTER} (release_channel.channel)",
        "cluster",
        "REGULAR",
        "RAPID",
    ),
    "cluster.privateNodes": Rule(
        "true or false (false: a warning that every node gets an external IP address)",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation",
        "private-nodes",
        "maybe",
        False,
    ),
    "cluster.controlPlane.privateEndpoint": Rule(
        "true or false; true needs at least one authorized network (where `pulumi up` runs from) or dnsEndpoint",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation",
        "control-plane",
        "maybe",
        True,
    ),
    "cluster.controlPlane.dnsEndpoint": Rule(
        "true or false; true lets privateEndpoint go without authorized networks",
        "https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation (DNS-based endpoint); "
        f"{TF_CLUSTER} (control_plane_endpoints_config.dns_endpoint_config.allow_external_traffic)",
        "control-plane",
        "maybe",
        True,
        {"cluster": {"controlPlane": {"authorizedNetworks": [], "privateEndpoint": True}}},
    ),
    "cluster.controlPlane.authorizedNetworks": Rule(
        "a list of {cidrBlock, displayName}: IPv4 CIDR blocks with no host bits set, not 0.0.0.0/0; at least one "
        "unless unrestrictedPublicEndpoint; at most 100 with private nodes, 50 without",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks (Limitations); "
        f"{TF_CLUSTER} (master_authorized_networks_config.cidr_blocks: IsCIDRNetwork(0, 32))",
        "control-plane",
        [{"cidrBlock": "0.0.0.0/0"}],
        [{"cidrBlock": f"10.0.0.{i}/32"} for i in range(100)],
    ),
    "cluster.controlPlane.unrestrictedPublicEndpoint": Rule(
        "true or false; true (the explicit opt-in to a public endpoint open to any address, with a warning) only "
        "with no authorized networks and no private endpoint",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks",
        "control-plane",
        True,
        True,
        {"cluster": {"controlPlane": {"authorizedNetworks": []}}},
        {"cluster": {"controlPlane": {"authorizedNetworks": [], "privateEndpoint": True}}},
    ),
    "cluster.systemMachineType": Rule(
        "a general-purpose GCE machine type <family>-standard|highmem|highcpu-<vCPUs> whose nodes fit the "
        "controllers' requests",
        f"{MACHINES}; {NODE_SIZES}",
        "system-pool",
        "n2-standard",
        "n2-standard-8",
    ),
    "cluster.systemNodeCount": Rule(
        "an integer of at least 1 (nodes per zone)", GKE_NODE_POOL_API, "system-pool", 0, 1
    ),
    "cluster.deletionProtection": Rule("true or false", TF_CLUSTER, "cluster", "maybe", False),
    "cluster.protect": Rule(
        "true or false", "https://www.pulumi.com/docs/iac/concepts/options/protect/", "protect", "maybe", True
    ),
    "cluster.dailyMaintenanceStart": Rule(
        "HH:MM in GMT, 00:00 to 23:59",
        f"{TF_CLUSTER} (daily_maintenance_window.start_time)",
        "cluster",
        "24:00",
        "23:59",
    ),
    "cluster.maintenanceExclusion.name": Rule(
        "a string (the provider's schema has no rule for it)",
        f"{TF_CLUSTER} (maintenance_exclusion.exclusion_name)",
        "cluster",
        7,
        "x",
        _EXCLUSION,
    ),
    "cluster.maintenanceExclusion.start": Rule(
        "an RFC 3339 time with a zone, before end",
        MAINTENANCE,
        "cluster",
        "2026-12-01T00:00:00",
        "2026-12-19T23:59:59Z",
        _EXCLUSION,
    ),
    "cluster.maintenanceExclusion.end": Rule(
        "an RFC 3339 time with a zone, after start and in the future (GKE refuses adding an exclusion that has ended)",
        MAINTENANCE,
        "cluster",
        "2026-11-30T12:00:00Z",
        "2026-12-01T00:00:01Z",
        _EXCLUSION,
    ),
    "cluster.maintenanceExclusion.endTimeBehavior": Rule(
        "UNTIL_END_OF_SUPPORT (GKE ends the exclusion when the minor version's support ends) or unset; only with "
        "scope NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES, and without end",
        f"{MAINTENANCE}; {TF_CLUSTER} (maintenance_exclusion.end_time_behavior)",
        "cluster",
        "FOREVER",
        "UNTIL_END_OF_SUPPORT",
        {"cluster": {"maintenanceExclusion": {"start": "2026-12-01T00:00:00Z", "scope": "NO_MINOR_UPGRADES"}}},
    ),
    "cluster.maintenanceExclusion.scope": Rule(
        "NO_UPGRADES, NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES",
        f"{TF_CLUSTER} (exclusion_options.scope)",
        "cluster",
        "NO_PATCHES",
        "NO_MINOR_OR_NODE_UPGRADES",
        _EXCLUSION,
    ),
    "tpu.machineType": Rule(
        "a TPU machine type that supports dynamic slicing: tpu7x-standard-4t",
        f"{TPU7X}; {DYNAMIC_SLICING}",
        "workload-policy",
        "tpu7x-standard-1t",
        "tpu7x-standard-4t",
    ),
    "tpu.cubeTopology": Rule(
        "a partition of the machine's 4x4x4 cube (4x4x4, 2x4x4, 2x2x4, 2x2x2, 2x2x1 on tpu7x)",
        f"{TPU7X}; {DYNAMIC_SLICING}",
        "workload-policy",
        "4x4x",
        "2x2x1",
        {
            "demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
            "serving": {"enabled": False},
        },
    ),
    "tpu.cubes": Rule(
        "an integer of at least 0 (0 = no TPU pools)",
        THIS_PROGRAM,
        "cubes",
        -1,
        0,
        {"demos": {"superslicing": {"enabled": False}}},
    ),
    "tpu.workloadPolicyName": Rule(
        "a GCE resource policy name: RFC 1035, 1-63 characters", GCE_NAMES, "workload-policy", "Policy", "a" * 63
    ),
    "tpu.acceleratorTopologyMode": Rule(
        "PROVISION_ONLY (needs a SPECIFIC reservation) or AUTO_CONNECT",
        f"{TF_POLICY} (workload_policy.accelerator_topology_mode)",
        "workload-policy",
        "AUTO",
        "AUTO_CONNECT",
    ),
    "tpu.poolPrefix": Rule(
        "a GKE node pool name prefix: RFC 1035, such that the last pool, <prefix>-<tpu.cubes>, has at most "
        "40 characters",
        f"{GCE_NAMES}; GKE's 40-character node pool limit "
        "(https://gitlab.com/thorchain/devops/cluster-launcher/-/merge_requests/67)",
        "pool-prefix",
        "p" * 39,
        "p" * 38,
    ),
    "tpu.reservation.name": Rule(
        "a Compute Engine reservation name (RFC 1035, 1-63 characters) or its numeric resource ID; required when "
        "tpu.cubes > 0 with SPECIFIC",
        f"{RESERVATION_API}; {GCE_NAMES}",
        "reservation",
        "my reservation",
        "r" * 63,
    ),
    "tpu.reservation.project": Rule(
        "a project ID, or unset for the stack's project; another project only for a whole reservation "
        '(block: ""): GKE does not support a block shared from another project',
        PROJECT_IDS,
        "reservation",
        "shared-resv-project",
        "my-tpu-project",
    ),
    "tpu.reservation.block": Rule(
        'a reservation block name (RFC 1035, 1-63 characters, named by GCE) or its numeric resource ID, or "" for '
        "the whole reservation; the preview reads the reservation, so a block that does not exist is reported",
        RESERVATION_BLOCK_API,
        "reservation",
        "block 0",
        "",
    ),
    "tpu.subBlocks": Rule(
        "unset, or one distinct sub-block name (RFC 1035, 1-63 characters) or numeric resource ID per cube, with a "
        "SPECIFIC reservation and one tpu.reservation.block",
        f"{RESERVATION_BLOCK_API}; googleapis/googleapis@f8291d2b google/cloud/compute/v1/compute.proto "
        "(ReservationSubBlock.name)",
        "sub-blocks",
        ["sb-1"],
        ["sb-1", "18446744073709551615"],
    ),
    "tpu.reservation.consumeType": Rule(
        "SPECIFIC, ANY or NONE (ANY and NONE need acceleratorTopologyMode AUTO_CONNECT)",
        "hashicorp/terraform-provider-google-beta google-beta/services/container/node_config.go "
        f"(reservation_affinity.consume_reservation_type); {DYNAMIC_SLICING}",
        "reservation",
        "SOME",
        "NONE",
        {"tpu": {"acceleratorTopologyMode": "AUTO_CONNECT"}},
    ),
    "addons.{jobset,kueue,lws}.chart": Rule(
        "an OCI chart reference, oci://<registry>/<repository> (OCI name grammar; no tag: the version key pins it)",
        f"{HELM_OCI}; {OCI}",
        "addon-version",
        "oci://registry.k8s.io/jobset/charts/JobSet",
        "oci://r/c",
    ),
    "addons.{jobset,kueue,lws}.version": Rule(
        "a pinned chart version, SemVer with an optional v (no ranges, no latest)",
        SEMVER,
        "addon-version",
        "^0.11",
        "v0.0.0-rc.1",
    ),
    "addons.{jobset,kueue,lws}.namespace": Rule(
        "a namespace name: a DNS-1123 label (lowercase letters, digits, '-', at most 63)",
        K8S_NAMES,
        "addon-namespace",
        "Jobset-System",
        "0" * 63,
    ),
    **_RESOURCES,
    "addons.kueue.replicas": Rule(
        "an integer of at least 1; every replica's requests count in the system-pool fit",
        f"{THIS_PROGRAM}; {NODE_SIZES}",
        "kueue-replicas",
        0,
        1,
    ),
    "addons.sliceController.drainTimeoutSeconds": Rule(
        "an integer of at least 1 (seconds a pool's deletion waits for its Slices to be gone)",
        THIS_PROGRAM,
        "drain-timeout",
        0,
        1,
    ),
    "addons.sliceController.manifestUrl": Rule(
        "an https:// URL of a pinned manifest (no /latest/, /main/, /master/ or /HEAD/ in its path)",
        THIS_PROGRAM,
        "manifests",
        "https://example.com/main/x.yaml",
        "https://e/x",
    ),
    "addons.inferenceExtension.version": Rule(
        "a released tag such as v1.5.0", THIS_PROGRAM, "manifests", "main", "1.5.0"
    ),
    "kueue.namespace": Rule(
        "a namespace name: a DNS-1123 label (at most 63)", K8S_NAMES, "kueue-names", "llm_d", "a" * 63
    ),
    "kueue.{flavorName,admissionCheckName}": Rule(
        "a DNS-1123 subdomain (at most 253): a custom resource's name, and Kueue's CRDs pattern references to "
        "these objects so",
        f"{K8S_NAMES}; {KUEUE_CRDS}",
        "kueue-names",
        "Slice_RF",
        "a." * 126 + "a",
    ),
    "kueue.{topologyName,clusterQueue}": Rule(
        "a DNS-1123 subdomain (at most 253): a custom resource's name, and Kueue's CRDs pattern references to "
        "these objects so",
        f"{K8S_NAMES}; {KUEUE_CRDS}",
        "kueue-immutable",
        "Slice_RF",
        "a." * 126 + "a",
    ),
    "kueue.localQueue": Rule(
        "a DNS-1123 subdomain of at most 63 characters: it is also the kueue.x-k8s.io/queue-name label of every "
        "workload",
        f"{K8S_NAMES}; {LABELS}",
        "local-queue",
        "l" * 64,
        "l.q",
    ),
    "kueue.priorities": Rule(
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
    "kueue.tpuQuota": Rule(
        "an integer of at least 0, or unset for the chips the TPU pools provide",
        THIS_PROGRAM,
        "kueue-objects",
        -1,
        0,
    ),
    "kueue.{cpuQuota,memoryQuota}": Rule(
        "a Kubernetes quantity (full grammar, no sign)", QUANTITY, "kueue-objects", "lots", "1e3"
    ),
    "demos.{subslicing,superslicing}.enabled": Rule("true or false", THIS_PROGRAM, "demo-enabled", "maybe", False),
    "demos.subslicing.name": Rule(
        "a DNS-1035 label such that JobSet's longest Job name, <name>-job-jax-<replicas - 1>, has at most 63 "
        "characters (53 with 1-10 replicas)",
        JOBSET_WEBHOOK,
        "demo-jobsets",
        "a" * 54,
        "a" * 53,
        {"demos": {"subslicing": {"replicas": 10}}},
    ),
    "demos.superslicing.name": Rule(
        "a DNS-1035 label of at most 53 characters: JobSet names its one Job <name>-job-jax-0",
        JOBSET_WEBHOOK,
        "demo-jobsets",
        "0-superslice",
        "a" * 53,
    ),
    "demos.{subslicing,superslicing}.topology": Rule(
        "a topology AxBxC that is a partition of a cube (sub-slice) or whole cubes (super-slice), within tpu.cubes",
        f"{DYNAMIC_SLICING}; {TPU7X}",
        "demo-jobsets",
        "3x3x3",
        "2x2x1",
    ),
    "demos.subslicing.replicas": Rule(
        "an integer of at least 1 (slices); the longest Job name bounds it with demos.subslicing.name",
        f"{THIS_PROGRAM}; {JOBSET_WEBHOOK}",
        "demo-jobsets",
        0,
        1,
    ),
    "demos.{subslicing,superslicing}.priority": Rule(
        "a key of kueue.priorities", THIS_PROGRAM, "demo-jobsets", "urgent", "high-priority-3000"
    ),
    "serving.enabled": Rule("true or false", THIS_PROGRAM, "serving-layer", "maybe", False),
    "serving.guide": Rule(
        "a DNS-1035 label of at most 53 characters: it names the router's Helm release (Helm's bound) and its "
        "EPP Service, <guide[:40]>-epp (a Service name starts with a letter)",
        f"{K8S_NAMES}; helm/helm pkg/chartutil/validate_name.go (maxReleaseNameLen = 53); llm-d/llm-d-router "
        "71f4f099 config/charts/routerlib/templates/_helpers.tpl (llm-d-router.name)",
        "guide",
        "1-guide",
        "g" * 53,
    ),
    "serving.model": Rule(
        "a model name whose last path segment is a label value (at most 63 letters, digits, '-', '_', '.', "
        "alphanumeric at both ends): it labels every pod llm-d.ai/model",
        LABELS,
        "serving-pods",
        "Qwen/Qwen 3",
        "o/" + "m" * 63,
    ),
    "serving.servedModelName": Rule(
        "a string (what clients send as `model`), or unset for serving.model",
        "vllm-project/vllm vllm/config/model.py (served_model_name)",
        "serving-pods",
        3,
        "m",
    ),
    "serving.weightsBucket": Rule(
        "required while serving is on: a bucket name without gs://, 3-63 lowercase letters, digits, '-', '_', '.' "
        "(up to 222 with dots, 63 between two), alphanumeric at both ends, not an IP address, no goog prefix, no "
        "google",
        BUCKETS,
        "weights-bucket",
        "gs://my-weights",
        "b" * 3,
    ),
    "serving.xlaCacheBucket": Rule(
        "a bucket name (the same rule), other than serving.weightsBucket; or unset for xla-cache-<hash of project "
        "and cluster>",
        BUCKETS,
        "cache-bucket",
        "my-weights",
        "c" * 63,
    ),
    "serving.terminationGracePeriodSeconds": Rule(
        "an integer of at least 300, the Gateway's request timeout: a pod stopped sooner cuts requests in flight",
        "llm-d/llm-d-router v0.10.0 chart (GCPBackendPolicy timeoutSec 300); components/router.py",
        "serving-pods",
        299,
        300,
    ),
    "serving.modelPath": Rule(
        "a Cloud Storage object path inside the bucket: 1-1024 bytes of UTF-8, no line breaks, no leading /",
        GCS_OBJECTS,
        "serving-pods",
        "/models",
        "m" * 1024,
    ),
    "serving.image": Rule(
        "an OCI image reference, [registry[:port]/]repository[:tag][@digest], lowercase repository, tag up to "
        "128 characters, name up to 255",
        OCI,
        "serving-pods",
        "docker.io/vLLM/vllm-tpu:nightly",
        "localhost:5000/v/t:" + "x" * 128 + "@sha256:" + "a" * 64,
    ),
    "serving.maxModelLen": Rule("an integer of at least 1", VLLM_SCHEDULER, "serving-pods", 0, 1),
    "serving.maxNumBatchedTokens": Rule(
        "an integer of at least 1 and at least serving.maxNumSeqs", VLLM_SCHEDULER, "serving-pods", 511, 512
    ),
    "serving.maxNumSeqs": Rule(
        "an integer of at least 1 and at most serving.maxNumBatchedTokens", VLLM_SCHEDULER, "serving-pods", 8193, 1
    ),
    "serving.kvCacheDtype": Rule(
        "a vLLM --kv-cache-dtype: auto, float16, bfloat16, int8, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla",
        VLLM_CACHE,
        "serving-pods",
        "fp9",
        "auto",
    ),
    "serving.enableExpertParallel": Rule("true or false", THIS_PROGRAM, "serving-pods", "maybe", False),
    "serving.weightsVia": Rule("stream or mount", THIS_PROGRAM, "serving-pods", "copy", "mount"),
    "serving.startupTimeoutSeconds": Rule(
        "an integer of at least 3600 (the vLLM pod's own waits: 1800 s for Ray workers, 1800 s for its engine)",
        "manifests/vllm-pod.yaml (--ray_init_timeout, VLLM_ENGINE_CLIENT_STARTUP_TIMEOUT)",
        "serving-pods",
        3599,
        3600,
    ),
    "serving.{prefill,decode}.name": Rule(
        f"a DNS-1035 label of at most {LWS_ROOM} characters, or unset for kueue-vllm-<role>-model-streamer: the "
        f"LeaderWorkerSet is named <name>-<{LWS_REVISION_LEN}-digit revision>, and Kueue bounds LWS names to "
        f"{LWS_NAME_MAX}",
        f"{LWS_SERVICE}; {LLMD_LIMITS}",
        "serving-names",
        "x" * (LWS_ROOM + 1),
        "x" * LWS_ROOM,
    ),
    "serving.{prefill,decode}.replicas": Rule(
        "an integer of at least 1 (LWS groups, one slice each)", THIS_PROGRAM, "serving-replicas", 0, 1
    ),
    "serving.{prefill,decode}.topology": Rule(
        "a topology AxBxC that is a partition of a cube or whole cubes, within tpu.cubes",
        f"{DYNAMIC_SLICING}; {TPU7X}",
        "serving-pods",
        "2x2",
        "2x2x1",
    ),
    "serving.{prefill,decode}.priority": Rule(
        "a key of kueue.priorities", THIS_PROGRAM, "serving-replicas", "urgent", "low-priority-1000"
    ),
    "serving.{prefill,decode}.tensorParallelSize": Rule(
        "unset, or exactly the slice's chips x TensorCores per chip (16 for 2x2x2 on tpu7x)",
        f"{TPU7X} (2 TensorCores per chip)",
        "serving-pods",
        8,
        16,
    ),
    "serving.{prefill,decode}.resources.cpu": Rule(
        "a Kubernetes quantity of at most what one TPU VM leaves to pods (223.37 CPUs on tpu7x-standard-4t: "
        "224 vCPUs less GKE's reservation); requests = limits",
        f"{QUANTITY}; {TPU7X}; {NODE_SIZES}",
        "serving-pods",
        "224",
        "223370m",
    ),
    "serving.{prefill,decode}.resources.memory": Rule(
        "a Kubernetes quantity of at most what one TPU VM leaves to pods (about 933.9Gi on tpu7x-standard-4t: "
        "960 GiB less GKE's reservation and eviction threshold); requests = limits",
        f"{QUANTITY}; {TPU7X}; {NODE_SIZES}",
        "serving-pods",
        "934Gi",
        "1Ki",
    ),
    "serving.gateway.name": Rule(
        "a DNS-1123 subdomain (at most 253): a custom resource's name, and an HTTPRoute parentRef's ObjectName",
        f"{K8S_NAMES}; gateway-api v1.4.1 CRDs (ObjectName)",
        "serving-names",
        "Gateway",
        "g." * 126 + "g",
    ),
    "serving.gateway.exposeToInternet": Rule(
        "true or false; true exactly when serving.gateway.className is an external class (then a warning says "
        "what is exposed)",
        GATEWAY_CLASSES,
        "gateway",
        False,
        True,
        {"serving": {"gateway": {"className": "gke-l7-gxlb"}}},
    ),
    "serving.gateway.className": Rule(
        "a single-cluster GKE GatewayClass: gke-l7-rilb (internal), or gke-l7-regional-external-managed, "
        "gke-l7-global-external-managed, gke-l7-gxlb (external: only with serving.gateway.exposeToInternet)",
        GATEWAY_CLASSES,
        "gateway",
        "gke-l7-rilb-mc",
        "gke-l7-gxlb",
        {"serving": {"gateway": {"exposeToInternet": True}}},
    ),
    "serving.router.chart": Rule(
        "an OCI chart reference, oci://<registry>/<repository> (OCI name grammar; no tag: the version key pins it)",
        f"{HELM_OCI}; {OCI}",
        "router",
        "ghcr.io/llm-d/charts/x",
        "oci://r/c",
    ),
    "serving.router.version": Rule(
        "a pinned chart version v0.10.0 or later, or v0 (main's floating chart)",
        f"{ROUTER_RELEASE}; components/modelserver.py (the sidecar flags of v0.10.0)",
        "router",
        "v0.9.0",
        "v0",
    ),
    "serving.router.peakPrefillThroughput": Rule(
        "a number greater than 0 (tokens/s of one prefill server)",
        "llm-d guides/recipes/router (prefix-cache-affinity-filter)",
        "router",
        0,
        0.001,
    ),
    "serving.routingSidecar.image": Rule(
        "an OCI image reference pinned by a release tag (v0.10.0 or later, not latest/main) or a digest, not "
        "llm-d-routing-sidecar; or unset for the router's own release",
        f"{OCI}; {ROUTER_RELEASE}",
        "serving-pods",
        "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0",
        "mirror.example/llm-d/sidecar@sha256:" + "0" * 64,
    ),
    "observability.{enabled,scraping,dashboard,alerts}": Rule(
        "true or false", THIS_PROGRAM, "observability", "maybe", False
    ),
    "observability.scrapeInterval": Rule(
        "a positive Prometheus duration: whole numbers of w, d, h, m, s, ms, largest unit first (30s, 1m30s, "
        "1500ms); no y, which the CRD's duration format does not know",
        PROM_DURATION,
        "observability",
        "1.5m",
        "1m30s",
    ),
    "observability.{pendingWorkloadMinutes,noReadyLeaderMinutes,quotaFullMinutes}": Rule(
        "an integer from 1 to 1440", THIS_PROGRAM, "observability", 1441, 1440
    ),
    "observability.notificationChannels": Rule(
        "a list of distinct notification channel names, projects/<project ID or number>/notificationChannels/<id>; "
        "at least one while alerts are on, unless observability.notifyNobody",
        CHANNELS_API,
        "alerts",
        ["projects/p/notificationChannels/1"],
        ["projects/123/notificationChannels/1", "projects/my-tpu-project/notificationChannels/2"],
        {"observability": {"notifyNobody": False}},
    ),
    "observability.notifyNobody": Rule(
        "true or false; true only while observability.notificationChannels is empty",
        THIS_PROGRAM,
        "alerts",
        True,
        False,
        {"observability": {"notificationChannels": ["projects/123/notificationChannels/1"]}},
    ),
    "hfToken": Rule(
        "a Pulumi secret (`pulumi config set --secret hfToken <token>`): plain text is refused; unset or empty "
        "= weights preloaded, no Secret",
        PULUMI_SECRETS,
        "secret",
        _TOKEN,
        "",
    ),
}


# What each key sets, in a user's words (optional: a key without it still gets its row).
WHAT: dict[str, str] = {
    "project": "the project of every Google Cloud resource, the workload pool `<project>.svc.id.goog`",
    "zone": "the TPU pools' node location; the region (cluster, subnets, policy) is the zone minus its last part",
    "network.prefix": "names `<prefix>-main`, `-tpu`, `-proxy`, `-allow-internal`, `-allow-proxy`, `-router`, `-nat`",
    "network.mtu": "the VPC's MTU (the largest GCE allows, as the codelab sets it)",
    "network.tpuSubnetCidr": "primary range of the TPU and node subnet",
    "network.proxySubnetCidr": "the proxy-only subnet the regional internal Gateway needs",
    "cluster.name": "the GKE cluster's name; the node service account is `<name[:24]>-nodes`",
    "cluster.version": "the control plane's `min_master_version`",
    "cluster.releaseChannel": "the cluster's release channel",
    "cluster.systemMachineType": "machine type of the `system` pool (controllers, router)",
    "cluster.systemNodeCount": "`system` nodes per zone of the regional cluster",
    "cluster.deletionProtection": "GKE's deletion protection on the cluster",
    "cluster.protect": "Pulumi `protect` on the cluster, system pool, TPU pools and workload policy",
    "cluster.dailyMaintenanceStart": "start (HH:MM GMT) of the daily maintenance window",
    "cluster.maintenanceExclusion.name": "the exclusion's name",
    "cluster.maintenanceExclusion.start": "when the exclusion starts",
    "cluster.maintenanceExclusion.end": "when the exclusion ends",
    "cluster.maintenanceExclusion.scope": "which upgrades the exclusion holds back",
    "cluster.maintenanceExclusion.endTimeBehavior": "an exclusion that lasts until the minor version's end of support",
    "cluster.privateNodes": "nodes with internal addresses only (Cloud Router and Cloud NAT for their egress)",
    "cluster.controlPlane.privateEndpoint": "the control plane's IP endpoint without an external address",
    "cluster.controlPlane.dnsEndpoint": (
        "GKE's DNS-based endpoint takes user traffic (IAM-checked, from any network) and `pulumi up` connects "
        "through it"
    ),
    "cluster.controlPlane.authorizedNetworks": "the ranges that may reach the control plane's IP endpoint",
    "cluster.controlPlane.unrestrictedPublicEndpoint": "the opt-in to a public endpoint any address may reach",
    "tpu.machineType": "the TPU VM type (the TPU facts table, `components/model/geometry.py`)",
    "tpu.cubeTopology": "one node pool's ICI block and the workload policy's accelerator topology",
    "tpu.cubes": "TPU node pools `<poolPrefix>-1..N`, the ClusterQueue's TPU quota, the super-slice ceiling",
    "tpu.workloadPolicyName": "name of the `HIGH_THROUGHPUT` workload policy",
    "tpu.acceleratorTopologyMode": "how the workload policy connects the chips",
    "tpu.poolPrefix": "TPU node pool names",
    "tpu.reservation.name": "the reservation the pools consume",
    "tpu.reservation.project": "the project owning the reservation (shared reservations)",
    "tpu.reservation.block": "the reservation block the pools consume",
    "tpu.reservation.consumeType": "the pools' reservation affinity",
    "tpu.subBlocks": "pins cube i to sub-block subBlocks[i] of the block (unset: the program picks healthy free ones)",
    "addons.{jobset,kueue,lws}.chart": "the add-on's OCI Helm chart",
    "addons.{jobset,kueue,lws}.version": "the chart's pinned version",
    "addons.{jobset,kueue,lws}.namespace": "the controller's namespace",
    "addons.{jobset,kueue,lws}.controllerResources.{requests,limits}.{cpu,memory}": (
        "the controller's resources (default: the pinned chart's own)"
    ),
    "addons.sliceController.manifestUrl": "the slice controller's manifest",
    "addons.kueue.replicas": "Kueue controller replicas (two or more run under the chart's PodDisruptionBudget)",
    "addons.sliceController.drainTimeoutSeconds": "how long deleting or replacing a TPU pool waits for its Slices",
    "addons.inferenceExtension.version": "the Gateway API Inference Extension CRDs' tag",
    "kueue.namespace": "the workload namespace (LocalQueue, JobSets, serving)",
    "kueue.{topologyName,flavorName,admissionCheckName,clusterQueue,localQueue}": "a Kueue object's name",
    "kueue.priorities": "the WorkloadPriorityClasses",
    "kueue.tpuQuota": "the ClusterQueue's `google.com/tpu` nominal quota",
    "kueue.{cpuQuota,memoryQuota}": "the ClusterQueue's CPU or memory quota",
    "demos.{subslicing,superslicing}.enabled": "whether that demo JobSet exists",
    "demos.{subslicing,superslicing}.name": "the demo JobSet's name",
    "demos.{subslicing,superslicing}.topology": "the demo's slice shape",
    "demos.subslicing.replicas": "how many sub-slices the demo asks for",
    "demos.{subslicing,superslicing}.priority": "the demo's Kueue priority class",
    "serving.enabled": "the whole serving layer (HF Secret, KSA, bucket IAM, Gateway, router, LWS)",
    "serving.guide": "the router's Helm release and the `llm-d.ai/guide` label the router selects pods by",
    "serving.model": "the model; its last segment labels every pod `llm-d.ai/model`",
    "serving.servedModelName": "vLLM `--served-model-name`, what clients send",
    "serving.weightsBucket": "the bucket holding the model weights, which the pods only read",
    "serving.xlaCacheBucket": "the bucket this stack creates for vLLM's XLA compilation cache",
    "serving.terminationGracePeriodSeconds": "how long a stopping vLLM pod may finish its requests",
    "serving.gateway.exposeToInternet": "the opt-in an external Gateway class needs",
    "observability.notifyNobody": "the explicit opt-out of alert notifications",
    "serving.modelPath": "the weights' path inside the bucket (`--model=gs://<bucket>/<path>`)",
    "serving.image": "the vLLM TPU image of prefill and decode",
    "serving.{maxModelLen,maxNumBatchedTokens,maxNumSeqs}": "the vLLM flag of the same name",
    "serving.kvCacheDtype": "vLLM `--kv-cache-dtype`",
    "serving.enableExpertParallel": "vLLM `--enable-expert-parallel`",
    "serving.weightsVia": "`stream`: vLLM streams from `gs://`; `mount`: reads the GCS FUSE volume at `/data`",
    "serving.startupTimeoutSeconds": "the leaders' startup-probe budget for loading the model",
    "serving.{prefill,decode}.name": "the LeaderWorkerSet's name",
    "serving.{prefill,decode}.replicas": "LWS groups, one slice each",
    "serving.{prefill,decode}.topology": "each group's slice; the group size (its VMs) is derived",
    "serving.{prefill,decode}.priority": "the groups' Kueue priority class",
    "serving.{prefill,decode}.tensorParallelSize": "set only to assert the derived `--tensor-parallel-size`",
    "serving.{prefill,decode}.resources.{cpu,memory}": "per-pod CPU or memory (requests = limits)",
    "serving.gateway.name": "the Gateway's name",
    "serving.gateway.className": "the Gateway's GKE class (default: regional internal)",
    "serving.router.chart": "llm-d's router chart (EPP, InferencePool, HTTPRoute)",
    "serving.router.version": "the router chart's release",
    "serving.router.eppResources.{requests,limits}.{cpu,memory}": "the endpoint picker's resources",
    "serving.router.peakPrefillThroughput": "the P/D decider's prefill throughput estimate (re-measure per hardware)",
    "serving.routingSidecar.image": "the decode pods' routing sidecar (unset: the router's own release)",
    "observability.enabled": "every scrape object, the dashboard and the alerts",
    "observability.scraping": "the PodMonitorings (and Kueue's resource metrics)",
    "observability.dashboard": "the Cloud Monitoring dashboard",
    "observability.alerts": "the alert policies",
    "observability.scrapeInterval": "how often Managed Prometheus scrapes vLLM and Kueue",
    "observability.{pendingWorkloadMinutes,noReadyLeaderMinutes,quotaFullMinutes}": (
        "how long the condition holds before that alert fires"
    ),
    "observability.notificationChannels": "the channels the alerts notify (none: incidents in the console only)",
    "hfToken": "the Hugging Face token (a Secret and `HF_TOKEN`); unset or empty when the weights are preloaded",
}


@dataclass(frozen=True)
class Key:
    """One leaf key of the settings model."""

    path: str
    type: str
    default: str
    secret: bool
    description: str


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        parts = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" (optional)" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", _dt.datetime: "RFC 3339 time"}
    if isinstance(annotation, type) and issubclass(annotation, SecretStr):
        return "secret string"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The section model a field holds (itself or optional); a list or map of models is one key."""
    if typing.get_origin(annotation) in (list, dict, tuple, set):
        return []
    args = typing.get_args(annotation) or (annotation,)
    return [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]


def _show_default(value: Any) -> str:
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        return "unset"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`" if value != "" else '`""`'


def _walk(model: type[BaseModel], prefix: str, defaults: BaseModel | None, optional: str) -> list[Key]:
    out: list[Key] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{info.alias or name}"
        subs = _models(info.annotation)
        if defaults is not None:
            default = getattr(defaults, name)
        elif info.default_factory is not None:
            default = info.get_default(call_default_factory=True, validated_data={})
        else:
            default = info.default
        if subs:
            sub_defaults = default if isinstance(default, BaseModel) else None
            note = optional or (f"unset: {path} is optional" if default is None else "")
            out += _walk(subs[0], f"{path}.", sub_defaults, note)
            continue
        shown = _show_default(default)
        if optional and shown == "required":
            shown = f"required when `{prefix.rstrip('.')}` is set"
        out.append(
            Key(
                path=path,
                type=_type_name(info.annotation),
                default=shown,
                secret=_is_secret(info.annotation),
                description=info.description or "",
            )
        )
    return out


def keys() -> list[Key]:
    """Every leaf key of the settings model, in model order."""
    return _walk(Settings, "", None, "")


def _expanded(table: dict[str, Any], name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pattern, value in table.items():
        for path in _expand(pattern):
            if path in out:
                raise ValueError(f"{path} has two entries in components/model/reference.py {name}")
            out[path] = value
    return out


def expanded_rules() -> dict[str, Rule]:
    """RULES with their `{a,b}` patterns expanded to one entry per key."""
    return _expanded(RULES, "RULES")


def expanded_what() -> dict[str, str]:
    return _expanded(WHAT, "WHAT")


def config_key(path: str) -> str:
    return "gcp:project" if path == "project" else f"{PROJECT}:{path}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str) and len(value) > 8 and len(set(value)) == 1:
        return f"`{value[0]}` x {len(value)}"
    if len(text) > 40:
        text = text[:37] + "..."
    return f"`{_cell(text)}`" if text != "" else '`""`'


def _source(text: str) -> str:
    """URLs as links, the rest (upstream code paths) as written."""
    return re.sub(r"(https?://[^\s;,)]+)", r"<\1>", _cell(text))


BEGIN = "<!-- BEGIN: generated from the settings model by `python -m components reference --write` -->"
END = "<!-- END: generated -->"


def markdown() -> str:
    """The generated part of docs/configuration.md: one row per key, then the secret keys."""
    rules, what = expanded_rules(), expanded_what()
    rows = [
        "| key | what it sets | type | default | allowed values | source of the rule | refused / accepted "
        "| changing it |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in keys():
        rule = rules.get(key.path)
        head = f"| `{key.path}` | {_cell(what.get(key.path, ''))} | {_cell(key.type)} | {_cell(key.default)} |"
        if rule is None:
            rows.append(f"{head} **no rule recorded** | | | |")
            continue
        shown_refused = "a token in plain text" if key.secret else _value(rule.refused)
        rows.append(
            f"{head} {_cell(rule.allowed)} | {_source(rule.source)} | {shown_refused} / {_value(rule.accepted)} | "
            f"[{rule.change}]({CHANGES}#{rule.change}) |"
        )
    secret = ", ".join(f"`{p}`" for p in sorted(SECRET_PATHS))
    return (
        "\n".join(rows)
        + f"\n\nSecret keys (typed as secrets in the model, so any new one is treated alike): {secret}.\n"
    )


def page(current: str) -> str:
    """docs/configuration.md with its generated block (between BEGIN and END) made current; the prose around
    it is written by hand and kept as it is."""
    block = f"{BEGIN}\n\n{markdown()}\n{END}"
    if BEGIN in current and END in current:
        before, rest = current.split(BEGIN, 1)
        return before + block + rest.split(END, 1)[1]
    raise ValueError(f"docs/configuration.md has no {BEGIN!r} ... {END!r} block to generate into")
