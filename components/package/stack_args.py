"""GENERATED from the settings models (components/model/) by
`python -m components.cli.package_args --write`: do not edit. The inputs of the package's whole-stack component,
one TypedDict per settings model, each field's description from its pydantic Field.

No `from __future__ import annotations` here: the SDK's schema inference reads these annotations as objects.
"""

# ruff: noqa: E501 (a description is one line, however long)

from typing import NotRequired, TypedDict

import pulumi


class NetworkSettings(TypedDict):
    """The NetworkSettings settings."""

    prefix: NotRequired[str]
    """Default: "qwen-serving"."""
    mtu: NotRequired[int]
    """Default: 8896."""
    tpu_subnet_cidr: NotRequired[str]
    """Default: "10.10.0.0/18"."""
    proxy_subnet_cidr: NotRequired[str]
    """Default: "172.16.0.0/26"."""


class MaintenanceExclusion(TypedDict):
    """A window without upgrades. No default dates: any fixed default is in the past some day."""

    name: NotRequired[str]
    """Default: "no-upgrade-next-month"."""
    start: str
    end: NotRequired[str]
    end_time_behavior: NotRequired[str]
    """One of: UNTIL_END_OF_SUPPORT."""
    scope: NotRequired[str]
    """One of: NO_UPGRADES, NO_MINOR_UPGRADES, NO_MINOR_OR_NODE_UPGRADES. Default: "NO_UPGRADES"."""


class AuthorizedNetwork(TypedDict):
    """One CIDR range allowed to reach the control plane's IP endpoint (the provider's `cidr_blocks`)."""

    cidr_block: str
    display_name: NotRequired[str]


class ControlPlaneSettings(TypedDict):
    """Who can reach the control plane: its IP endpoint, and its DNS-based endpoint."""

    private_endpoint: NotRequired[bool]
    """Default: false."""
    dns_endpoint: NotRequired[bool]
    """Default: false."""
    authorized_networks: NotRequired[list[AuthorizedNetwork]]
    unrestricted_public_endpoint: NotRequired[bool]
    """Default: false."""


class ClusterSettings(TypedDict):
    """The ClusterSettings settings."""

    name: NotRequired[str]
    """Default: "qwen-serving-cluster"."""
    version: NotRequired[str]
    """Default: "1.36"."""
    release_channel: NotRequired[str]
    """Default: "RAPID"."""
    system_machine_type: NotRequired[str]
    """Default: "n2-standard-32"."""
    system_node_count: NotRequired[int]
    """Default: 1."""
    deletion_protection: NotRequired[bool]
    """Default: true."""
    protect: NotRequired[bool]
    """Default: false."""
    daily_maintenance_start: NotRequired[str]
    """Default: "03:00"."""
    maintenance_exclusion: NotRequired[MaintenanceExclusion]
    private_nodes: NotRequired[bool]
    """Default: true."""
    control_plane: NotRequired[ControlPlaneSettings]


class ReservationSettings(TypedDict):
    """The ReservationSettings settings."""

    name: NotRequired[str]
    project: NotRequired[str]
    block: NotRequired[str]
    """Default: "block-0"."""
    consume_type: NotRequired[str]
    """One of: SPECIFIC, ANY, NONE. Default: "SPECIFIC"."""


class TpuSettings(TypedDict):
    """The TpuSettings settings."""

    machine_type: NotRequired[str]
    """Default: "tpu7x-standard-4t"."""
    cube_topology: NotRequired[str]
    """Default: "4x4x4"."""
    cubes: NotRequired[int]
    """Default: 2."""
    workload_policy_name: NotRequired[str]
    """Default: "superslice-policy"."""
    accelerator_topology_mode: NotRequired[str]
    """One of: PROVISION_ONLY, AUTO_CONNECT. Default: "PROVISION_ONLY"."""
    pool_prefix: NotRequired[str]
    """Default: "tpu7-pool"."""
    reservation: NotRequired[ReservationSettings]
    sub_blocks: NotRequired[list[str]]


class ResourceAmounts(TypedDict):
    """The ResourceAmounts settings."""

    cpu: NotRequired[str]
    memory: NotRequired[str]


class ResourceRequirements(TypedDict):
    """The ResourceRequirements settings."""

    requests: NotRequired[ResourceAmounts]
    limits: NotRequired[ResourceAmounts]


class JobSetAddon(TypedDict):
    """The JobSetAddon settings."""

    chart: NotRequired[str]
    """Default: "oci://registry.k8s.io/jobset/charts/jobset"."""
    version: NotRequired[str]
    """Default: "0.11.1"."""
    namespace: NotRequired[str]
    """Default: "jobset-system"."""
    controller_resources: NotRequired[ResourceRequirements]


class KueueAddon(TypedDict):
    """The KueueAddon settings."""

    chart: NotRequired[str]
    """Default: "oci://registry.k8s.io/kueue/charts/kueue"."""
    version: NotRequired[str]
    """Default: "0.17.4"."""
    namespace: NotRequired[str]
    """Default: "kueue-system"."""
    controller_resources: NotRequired[ResourceRequirements]
    replicas: NotRequired[int]
    """Default: 2."""


class LwsAddon(TypedDict):
    """The LwsAddon settings."""

    chart: NotRequired[str]
    """Default: "oci://registry.k8s.io/lws/charts/lws"."""
    version: NotRequired[str]
    """Default: "0.8.0"."""
    namespace: NotRequired[str]
    """Default: "lws-system"."""
    controller_resources: NotRequired[ResourceRequirements]


class SliceControllerSettings(TypedDict):
    """The SliceControllerSettings settings."""

    manifest_url: NotRequired[str]
    """Default: "https://gist.githubusercontent.com/mwysokin/f8ff6a7f8c2f8808ba30177e51413e32/raw/9086457ea35cd31a3bb95b714bf72309a2be357c/kueue-slice-controller-v0.8.0-200.yaml"."""
    drain_timeout_seconds: NotRequired[int]
    """Default: 1200."""
    feature_gates: NotRequired[list[str]]


class InferenceExtensionSettings(TypedDict):
    """The InferenceExtensionSettings settings."""

    version: NotRequired[str]
    """Default: "v1.5.0"."""


class AddonsSettings(TypedDict):
    """The AddonsSettings settings."""

    jobset: NotRequired[JobSetAddon]
    kueue: NotRequired[KueueAddon]
    lws: NotRequired[LwsAddon]
    slice_controller: NotRequired[SliceControllerSettings]
    inference_extension: NotRequired[InferenceExtensionSettings]


class KueueSettings(TypedDict):
    """The KueueSettings settings."""

    namespace: NotRequired[str]
    """Default: "llm-d-pd-disaggregation"."""
    topology_name: NotRequired[str]
    """Default: "slice-topology"."""
    flavor_name: NotRequired[str]
    """Default: "slice-rf"."""
    admission_check_name: NotRequired[str]
    """Default: "ac"."""
    cluster_queue: NotRequired[str]
    """Default: "cq"."""
    local_queue: NotRequired[str]
    """Default: "lq"."""
    priorities: NotRequired[dict[str, int]]
    tpu_quota: NotRequired[int]
    cpu_quota: NotRequired[str]
    """Default: "999999"."""
    memory_quota: NotRequired[str]
    """Default: "999999Pi"."""


class SubslicingDemo(TypedDict):
    """The SubslicingDemo settings."""

    enabled: NotRequired[bool]
    """Default: true."""
    name: NotRequired[str]
    """Default: "kueue-jobset-simple-subslicing"."""
    topology: NotRequired[str]
    """Default: "2x2x2"."""
    replicas: NotRequired[int]
    """Default: 6."""
    priority: NotRequired[str]
    """Default: "low-priority-1000"."""


class SuperslicingDemo(TypedDict):
    """The SuperslicingDemo settings."""

    enabled: NotRequired[bool]
    """Default: true."""
    name: NotRequired[str]
    """Default: "kueue-jobset-simple-superslicing"."""
    topology: NotRequired[str]
    """Default: "4x4x8"."""
    priority: NotRequired[str]
    """Default: "medium-priority-2000"."""


class DemosSettings(TypedDict):
    """The DemosSettings settings."""

    subslicing: NotRequired[SubslicingDemo]
    superslicing: NotRequired[SuperslicingDemo]


class ServingResources(TypedDict):
    """Per-pod CPU and memory of a vLLM pod (requests = limits, as in the reference)."""

    cpu: NotRequired[str]
    """Default: "220"."""
    memory: NotRequired[str]
    """Default: "850Gi"."""


class ServingRole(TypedDict):
    """The ServingRole settings."""

    name: NotRequired[str]
    replicas: NotRequired[int]
    """Default: 4."""
    topology: NotRequired[str]
    """Default: "2x2x2"."""
    priority: NotRequired[str]
    """Default: "high-priority-3000"."""
    tensor_parallel_size: NotRequired[int]
    resources: NotRequired[ServingResources]


class GatewaySettings(TypedDict):
    """The GatewaySettings settings."""

    name: NotRequired[str]
    """Default: "llm-d-inference-gateway"."""
    class_name: NotRequired[str]
    """Default: "gke-l7-rilb"."""
    expose_to_internet: NotRequired[bool]
    """Default: false."""


class RouterSettings(TypedDict):
    """The RouterSettings settings."""

    chart: NotRequired[str]
    """Default: "oci://ghcr.io/llm-d/charts/llm-d-router-gateway"."""
    version: NotRequired[str]
    """Default: "v0.10.0"."""
    epp_resources: NotRequired[ResourceRequirements]
    peak_prefill_throughput: NotRequired[float]
    """Default: 33821."""


class RoutingSidecarSettings(TypedDict):
    """The RoutingSidecarSettings settings."""

    image: NotRequired[str]


class WeightsDownloadSettings(TypedDict):
    """The WeightsDownloadSettings settings."""

    enabled: NotRequired[bool]
    """Default: false."""
    image: NotRequired[str]
    """Default: "docker.io/library/python:3.12.8-slim-bookworm"."""


class ServingSettings(TypedDict):
    """The ServingSettings settings."""

    enabled: NotRequired[bool]
    """Default: true."""
    guide: NotRequired[str]
    """Default: "pd-disaggregation"."""
    model: NotRequired[str]
    """Default: "Qwen/Qwen3.5-397B-A17B-FP8"."""
    served_model_name: NotRequired[str]
    weights_bucket: NotRequired[str]
    xla_cache_bucket: NotRequired[str]
    model_path: NotRequired[str]
    """Default: "models--Qwen--Qwen3.5-397B-A17B-FP8/snapshots/ea5b4f81096f3901c91dea97f81324302495781d"."""
    image: NotRequired[str]
    """Default: "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26"."""
    max_model_len: NotRequired[int]
    """Default: 9216."""
    max_num_batched_tokens: NotRequired[int]
    """Default: 8192."""
    max_num_seqs: NotRequired[int]
    """Default: 512."""
    kv_cache_dtype: NotRequired[str]
    """Default: "fp8"."""
    enable_expert_parallel: NotRequired[bool]
    """Default: true."""
    weights_via: NotRequired[str]
    """One of: stream, mount. Default: "stream"."""
    startup_timeout_seconds: NotRequired[int]
    """Default: 14400."""
    termination_grace_period_seconds: NotRequired[int]
    """Default: 360."""
    prefill: NotRequired[ServingRole]
    decode: NotRequired[ServingRole]
    gateway: NotRequired[GatewaySettings]
    router: NotRequired[RouterSettings]
    routing_sidecar: NotRequired[RoutingSidecarSettings]
    weights_download: NotRequired[WeightsDownloadSettings]


class ObservabilitySettings(TypedDict):
    """The ObservabilitySettings settings."""

    enabled: NotRequired[bool]
    """Default: true."""
    scraping: NotRequired[bool]
    """Default: true."""
    dashboard: NotRequired[bool]
    """Default: true."""
    alerts: NotRequired[bool]
    """Default: true."""
    scrape_interval: NotRequired[str]
    """Default: "30s"."""
    pending_workload_minutes: NotRequired[int]
    """Default: 30."""
    no_ready_leader_minutes: NotRequired[int]
    """Default: 10."""
    quota_full_minutes: NotRequired[int]
    """Default: 30."""
    notification_channels: NotRequired[list[str]]
    notify_nobody: NotRequired[bool]
    """Default: false."""


class TpuSlicingStackArgs(TypedDict):
    """The whole stack's settings: the keys of the program's stack configuration, camelCase as in its stack files, `project` for gcp:project."""

    project: str
    zone: NotRequired[str]
    """Default: "us-central1-ai1a"."""
    network: NotRequired[NetworkSettings]
    cluster: NotRequired[ClusterSettings]
    tpu: NotRequired[TpuSettings]
    addons: NotRequired[AddonsSettings]
    kueue: NotRequired[KueueSettings]
    demos: NotRequired[DemosSettings]
    serving: NotRequired[ServingSettings]
    observability: NotRequired[ObservabilitySettings]
    hf_token: NotRequired[pulumi.Input[str]]
