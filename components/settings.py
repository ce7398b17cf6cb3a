"""Stack settings: one pydantic model tree, the single source of truth for every name and number.

Validated straight from stack config before any resource is registered. Every problem is reported
as `<config key> = <bad value>: <what is allowed>`, all problems in one error.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components import geometry
from components.geometry import Slice, SliceKind, Topology

PROJECT = "gke-tpu-slicing"

# The first GKE release with the TPU slice controller (super-slicing, Rapid channel), per
# https://cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing ("Requirements")
MIN_SLICE_CONTROLLER_VERSION = "1.35.2-gke.1842000"
# ... and for sub-slices (topologies smaller than 4x4x4), per the same page. The codelab's own default
# (1.36.0-gke.2459000) predates it, so it is a warning, not an error.
MIN_SUBSLICING_VERSION = "1.36.0-gke.3712000"
_GKE_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")
# GCE resource names (RFC 1035); GKE cluster names are limited to 40 characters, node pools to 40.
_GCE_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Kubernetes object names that become DNS labels (namespaces, services, LWS).
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ZONE_RE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-(?P<suffix>[a-z0-9]+)$")
_CHART_VERSION_RE = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_QUANTITY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|Ei|M|G|T|P|E)?$")

# Limits that bite after `pulumi up` if not checked here.
LWS_NAME_MAX = 39  # llm-d: LWS names under Kueue (they feed slice and pod names)
SLICE_NAME_MAX = 49  # GKE slice names
LABEL_VALUE_MAX = 63  # Kubernetes label values
MTU_MIN, MTU_MAX = 1300, 8896  # GCE VPC MTU range


class SettingError(ValueError):
    """A bad value, raised inside a validator; `field` is relative to the model being validated."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field} = {value!r}: {allowed}")


class ConfigError(Exception):
    """Invalid stack configuration. Raised before any resource is registered."""


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        validate_default=True,
    )


def _gce_name(value: str, max_len: int, what: str) -> str:
    if len(value) > max_len or not _GCE_NAME_RE.match(value):
        raise ValueError(
            f"{what}: lowercase letters, digits and hyphens, starting with a letter, at most {max_len} characters"
        )
    return value


def _dns_label(value: str, max_len: int = 63) -> str:
    if len(value) > max_len or not _DNS_LABEL_RE.match(value):
        raise ValueError(f"a DNS label: lowercase letters, digits and hyphens, at most {max_len} characters")
    return value


def _cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ValueError("an IPv4 CIDR block with no host bits set, such as 10.10.0.0/18") from None
    if net.version != 4:
        raise ValueError("an IPv4 CIDR block")
    return str(net)


def _topology(value: str) -> str:
    try:
        return str(Topology.parse(value))
    except geometry.GeometryError as err:
        raise ValueError(str(err)) from None


def gke_version_tuple(version: str) -> tuple[int, int, int, int]:
    m = _GKE_VERSION_RE.match(version)
    if not m:
        raise ValueError(f"{version!r} is not a GKE version such as 1.36.0-gke.2459000")
    return tuple(int(g) for g in m.groups())  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# Google Cloud half (SPEC sections 1-5)


class NetworkSettings(Model):
    prefix: str = "qwen-serving"
    mtu: int = 8896
    tpu_subnet_cidr: str = "10.10.0.0/18"
    proxy_subnet_cidr: str = "172.16.0.0/26"
    internal_source_ranges: list[str] = Field(default_factory=lambda: ["172.16.0.0/12", "10.0.0.0/8"], min_length=1)

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        # The longest derived name is <prefix>-allow-internal; GCE names stop at 63 characters.
        return _gce_name(v, 63 - len("-allow-internal"), "a GCE name prefix")

    @field_validator("mtu")
    @classmethod
    def _mtu(cls, v: int) -> int:
        if not MTU_MIN <= v <= MTU_MAX:
            raise ValueError(f"an MTU from {MTU_MIN} to {MTU_MAX} (the range GCE VPCs allow)")
        return v

    _cidrs = field_validator("tpu_subnet_cidr", "proxy_subnet_cidr")(classmethod(lambda cls, v: _cidr(v)))

    @field_validator("internal_source_ranges")
    @classmethod
    def _ranges(cls, v: list[str]) -> list[str]:
        return [_cidr(r) for r in v]

    @model_validator(mode="after")
    def _disjoint(self) -> NetworkSettings:
        tpu, proxy = ipaddress.ip_network(self.tpu_subnet_cidr), ipaddress.ip_network(self.proxy_subnet_cidr)
        if tpu.overlaps(proxy):
            raise SettingError(
                "proxySubnetCidr",
                self.proxy_subnet_cidr,
                f"must not overlap network.tpuSubnetCidr {self.tpu_subnet_cidr}",
            )
        return self

    @property
    def network_name(self) -> str:
        return f"{self.prefix}-main"

    @property
    def tpu_subnet_name(self) -> str:
        return f"{self.prefix}-tpu"

    @property
    def proxy_subnet_name(self) -> str:
        return f"{self.prefix}-proxy"

    @property
    def firewall_name(self) -> str:
        return f"{self.prefix}-allow-internal"


class MaintenanceExclusion(Model):
    name: str = "no-upgrade-next-month"
    start: datetime = datetime.fromisoformat("2026-05-18T00:00:00+00:00")
    end: datetime = datetime.fromisoformat("2026-08-15T00:00:00+00:00")
    scope: Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"] = "NO_UPGRADES"

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("an RFC 3339 time with a zone, such as 2026-05-18T00:00:00Z")
        return v

    @model_validator(mode="after")
    def _ordered(self) -> MaintenanceExclusion:
        if self.end <= self.start:
            raise SettingError("end", self.end.isoformat(), f"must be after start {self.start.isoformat()}")
        return self

    def rfc3339(self, when: datetime) -> str:
        return when.isoformat().replace("+00:00", "Z")


class ClusterSettings(Model):
    name: str = "qwen-serving-cluster"
    version: str = "1.36.0-gke.2459000"
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = "RAPID"
    system_machine_type: str = "n2-standard-32"
    system_node_count: int = Field(1, ge=1)
    deletion_protection: bool = True
    # HH:MM (GMT) start of the daily maintenance window; pulumi-gcp needs one beside an exclusion.
    daily_maintenance_start: str = Field("03:00", pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
    maintenance_exclusion: MaintenanceExclusion | None = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _gce_name(v, 40, "a GKE cluster name")

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if gke_version_tuple(v) < gke_version_tuple(MIN_SLICE_CONTROLLER_VERSION):
            raise ValueError(
                f"{MIN_SLICE_CONTROLLER_VERSION} or newer (the first GKE release with the slice controller, "
                "https://cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing)"
            )
        return v

    @field_validator("system_machine_type")
    @classmethod
    def _machine(cls, v: str) -> str:
        machine_shape(v)
        return v


class ReservationSettings(Model):
    name: str | None = None
    project: str | None = None  # defaults to the stack's project
    block: str = "block-0"  # "" = the whole reservation, not one block
    consume_type: Literal["SPECIFIC", "ANY", "NONE"] = "SPECIFIC"


class TpuSettings(Model):
    machine_type: str = "tpu7x-standard-4t"
    cube_topology: str = "4x4x4"
    cubes: int = Field(2, ge=0)
    workload_policy_name: str = "superslice-policy"
    accelerator_topology_mode: Literal["PROVISION_ONLY", "AUTO_CONNECT"] = "PROVISION_ONLY"
    pool_prefix: str = "tpu7-pool"
    reservation: ReservationSettings = Field(default_factory=dict)

    @field_validator("machine_type")
    @classmethod
    def _machine(cls, v: str) -> str:
        sliceable = geometry.sliceable_machine_types()
        if v not in geometry.SYSTEMS:
            raise ValueError(f"a TPU machine type with known chips per VM: {', '.join(sliceable)}")
        if v not in sliceable:
            raise ValueError(f"a machine type that supports dynamic slicing: {', '.join(sliceable)}")
        return v

    _topo = field_validator("cube_topology")(classmethod(lambda cls, v: _topology(v)))

    @field_validator("workload_policy_name")
    @classmethod
    def _policy(cls, v: str) -> str:
        return _gce_name(v, 63, "a GCE resource policy name")

    @field_validator("pool_prefix")
    @classmethod
    def _pool(cls, v: str) -> str:
        # Pools are named <prefix>-<n>; GKE node pool names stop at 40 characters.
        return _gce_name(v, 36, "a node pool name prefix")

    @model_validator(mode="after")
    def _consistent(self) -> TpuSettings:
        system = geometry.SYSTEMS[self.machine_type]
        assert system.cube is not None
        allowed = system.partitions(system.cube)
        if Topology.parse(self.cube_topology) not in allowed:
            raise SettingError(
                "cubeTopology",
                self.cube_topology,
                f"one node pool's ICI block on {self.machine_type}: {', '.join(str(t) for t in allowed)}",
            )
        r = self.reservation
        if self.cubes > 0 and r.consume_type == "SPECIFIC" and not r.name:
            raise SettingError(
                "reservation.name", r.name, "the name of the TPU reservation (required when tpu.cubes > 0)"
            )
        if self.accelerator_topology_mode == "PROVISION_ONLY" and r.consume_type != "SPECIFIC":
            raise SettingError(
                "reservation.consumeType",
                r.consume_type,
                "SPECIFIC: acceleratorTopologyMode PROVISION_ONLY needs a specific reservation",
            )
        return self

    @cached_property
    def system(self) -> geometry.TpuSystem:
        return geometry.system(self.machine_type)

    @cached_property
    def cube(self) -> geometry.Cube:
        return geometry.Cube(self.system, Topology.parse(self.cube_topology))

    def pool_name(self, index: int) -> str:
        return f"{self.pool_prefix}-{index + 1}"


# ---------------------------------------------------------------------------------------------
# Cluster add-ons, Kueue, demo workloads (SPEC sections 6-8)


class ResourceAmounts(Model):
    cpu: str | None = None
    memory: str | None = None

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, v: str | None) -> str | None:
        if v is not None and not _QUANTITY_RE.match(v):
            raise ValueError("a Kubernetes quantity such as 500m, 2, 512Mi or 4Gi")
        return v


class ResourceRequirements(Model):
    requests: ResourceAmounts = Field(default_factory=dict)
    limits: ResourceAmounts = Field(default_factory=dict)

    def manifest(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for kind in ("requests", "limits"):
            amounts = getattr(self, kind).model_dump(exclude_none=True)
            if amounts:
                out[kind] = amounts
        return out


def _resources(req_cpu: str, req_mem: str, lim_cpu: str | None, lim_mem: str | None) -> ResourceRequirements:
    return ResourceRequirements(
        requests=ResourceAmounts(cpu=req_cpu, memory=req_mem),
        limits=ResourceAmounts(cpu=lim_cpu, memory=lim_mem),
    )


class HelmAddonSettings(Model):
    """An add-on installed from its OCI Helm chart; subclasses give the pinned defaults."""

    chart: str
    version: str
    namespace: str
    # Defaults are the pinned chart's own values.yaml defaults, so the fit check sees real numbers.
    controller_resources: ResourceRequirements
    # Where the chart's values.yaml keeps the controller's resources.
    resources_path: ClassVar[tuple[str, ...]] = ()

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not _CHART_VERSION_RE.match(v):
            raise ValueError("a pinned chart version such as 0.11.1 (no ranges, no 'latest')")
        return v.removeprefix("v")

    @field_validator("chart")
    @classmethod
    def _chart(cls, v: str) -> str:
        if not v.startswith("oci://"):
            raise ValueError("an OCI chart reference, oci://<registry>/<path>")
        return v

    _ns = field_validator("namespace")(classmethod(lambda cls, v: _dns_label(v)))


class JobSetAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("controller", "resources")
    chart: str = "oci://registry.k8s.io/jobset/charts/jobset"
    version: str = "0.11.1"
    namespace: str = "jobset-system"
    controller_resources: ResourceRequirements = Field(default_factory=lambda: _resources("500m", "128Mi", "2", "4Gi"))


class KueueAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("controllerManager", "manager", "resources")
    chart: str = "oci://registry.k8s.io/kueue/charts/kueue"
    version: str = "0.17.4"
    namespace: str = "kueue-system"
    controller_resources: ResourceRequirements = Field(
        default_factory=lambda: _resources("500m", "512Mi", "2", "512Mi")
    )


class LwsAddon(HelmAddonSettings):
    resources_path: ClassVar[tuple[str, ...]] = ("resources",)
    chart: str = "oci://registry.k8s.io/lws/charts/lws"
    version: str = "0.8.0"
    namespace: str = "lws-system"
    controller_resources: ResourceRequirements = Field(default_factory=lambda: _resources("1", "1Gi", None, None))


class SliceControllerSettings(Model):
    manifest_url: str = (
        # the codelab's pinned gist revision
        "https://gist.githubusercontent.com/mwysokin/f8ff6a7f8c2f8808ba30177e51413e32/raw/"
        "9086457ea35cd31a3bb95b714bf72309a2be357c/kueue-slice-controller-v0.8.0-200.yaml"
    )

    @field_validator("manifest_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith("https://") or re.search(r"/(latest|main|master|HEAD)/", v):
            raise ValueError("an https:// URL of a pinned manifest (a tag or commit, not latest/main)")
        return v


class InferenceExtensionSettings(Model):
    version: str = "v1.5.0"

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not _CHART_VERSION_RE.match(v):
            raise ValueError("a released tag such as v1.5.0")
        return v if v.startswith("v") else f"v{v}"


class AddonsSettings(Model):
    jobset: JobSetAddon = Field(default_factory=dict)
    kueue: KueueAddon = Field(default_factory=dict)
    lws: LwsAddon = Field(default_factory=dict)
    slice_controller: SliceControllerSettings = Field(default_factory=dict)
    inference_extension: InferenceExtensionSettings = Field(default_factory=dict)

    def helm_addons(self) -> dict[str, HelmAddonSettings]:
        return {"jobset": self.jobset, "kueue": self.kueue, "lws": self.lws}


class KueueSettings(Model):
    namespace: str = "llm-d-pd-disaggregation"
    topology_name: str = "slice-topology"
    flavor_name: str = "slice-rf"
    admission_check_name: str = "ac"
    cluster_queue: str = "cq"
    local_queue: str = "lq"
    priorities: dict[str, int] = Field(
        default_factory=lambda: {
            "low-priority-1000": 1000,
            "medium-priority-2000": 2000,
            "high-priority-3000": 3000,
        },
        min_length=1,
    )
    # None = the chips the TPU node pools provide, so Kueue's quota preemption matches the hardware.
    tpu_quota: int | None = Field(None, ge=0)
    cpu_quota: str = "999999"
    memory_quota: str = "999999Pi"

    _names = field_validator(
        "namespace", "topology_name", "flavor_name", "admission_check_name", "cluster_queue", "local_queue"
    )(classmethod(lambda cls, v: _dns_label(v)))

    @field_validator("priorities")
    @classmethod
    def _priorities(cls, v: dict[str, int]) -> dict[str, int]:
        for name in v:
            _dns_label(name)
        return v


class SubslicingDemo(Model):
    enabled: bool = True
    name: str = "kueue-jobset-simple-subslicing"
    topology: str = "2x2x2"
    replicas: int = Field(6, ge=1)
    priority: str = "low-priority-1000"

    _topo = field_validator("topology")(classmethod(lambda cls, v: _topology(v)))
    _name = field_validator("name")(classmethod(lambda cls, v: _dns_label(v)))


class SuperslicingDemo(Model):
    enabled: bool = True
    name: str = "kueue-jobset-simple-superslicing"
    topology: str = "4x4x8"
    priority: str = "medium-priority-2000"

    _topo = field_validator("topology")(classmethod(lambda cls, v: _topology(v)))
    _name = field_validator("name")(classmethod(lambda cls, v: _dns_label(v)))

    @property
    def replicas(self) -> int:
        return 1


class DemosSettings(Model):
    subslicing: SubslicingDemo = Field(default_factory=dict)
    superslicing: SuperslicingDemo = Field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Serving (SPEC section 9)


class ServingResources(ResourceAmounts):
    """Per-pod CPU and memory of a vLLM pod (requests = limits, as in the reference)."""

    cpu: str | None = "220"
    memory: str | None = "850Gi"


class ServingRole(Model):
    # The LeaderWorkerSet's name; None = kueue-vllm-<role>-model-streamer, the reference's.
    name: str | None = None
    replicas: int = Field(4, ge=1)
    topology: str = "2x2x2"
    priority: str = "high-priority-3000"
    # None = chips in the slice x TensorCores per chip; set only to assert a value.
    tensor_parallel_size: int | None = Field(None, ge=1)
    resources: ServingResources = Field(default_factory=dict)

    _topo = field_validator("topology")(classmethod(lambda cls, v: _topology(v)))

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return None if v is None else _dns_label(v)


class GatewaySettings(Model):
    name: str = "llm-d-inference-gateway"
    class_name: str = "gke-l7-rilb"

    _name = field_validator("name")(classmethod(lambda cls, v: _dns_label(v)))


class RouterSettings(Model):
    chart: str = "oci://ghcr.io/llm-d/charts/llm-d-router-gateway-dev"
    # llm-d publishes this chart only under the tag v0 (what the codelab installs); pin a digest-backed
    # semver tag here once llm-d publishes one.
    version: str = "v0"
    # The EPP and its Envoy sidecar run on the system pool; llm-d's base.values.yaml sizes them so.
    epp_resources: ResourceRequirements = Field(default_factory=lambda: _resources("4", "8Gi", None, "16Gi"))
    proxy_resources: ResourceRequirements = Field(default_factory=lambda: _resources("4", "8Gi", None, "16Gi"))

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not re.match(r"^v?\d+(\.\d+){0,2}(-[0-9A-Za-z.-]+)?$", v):
            raise ValueError("a pinned chart version such as v0 or 1.2.3 (no ranges, no 'latest')")
        return v


class RoutingSidecarSettings(Model):
    image: str = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0"


class ServingSettings(Model):
    enabled: bool = True
    guide: str = "pd-disaggregation"
    model: str = "Qwen/Qwen3.5-397B-A17B-FP8"
    served_model_name: str | None = None  # defaults to model
    weights_bucket: str = "gemma3-weights"
    model_path: str = "models--Qwen--Qwen3.5-397B-A17B-FP8/snapshots/ea5b4f81096f3901c91dea97f81324302495781d"
    image: str = "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26"
    max_model_len: int = Field(9216, ge=1)
    max_num_batched_tokens: int = Field(8192, ge=1)
    max_num_seqs: int = Field(512, ge=1)
    kv_cache_dtype: str = "fp8"
    enable_expert_parallel: bool = True
    prefill: ServingRole = Field(default_factory=dict)
    decode: ServingRole = Field(default_factory=dict)
    gateway: GatewaySettings = Field(default_factory=dict)
    router: RouterSettings = Field(default_factory=dict)
    routing_sidecar: RoutingSidecarSettings = Field(default_factory=dict)

    # The guide names the router's Helm release (at most 53 characters) and labels every model server.
    _guide = field_validator("guide")(classmethod(lambda cls, v: _dns_label(v, 53)))

    @property
    def model_served(self) -> str:
        return self.served_model_name or self.model

    def roles(self) -> dict[str, ServingRole]:
        return {"prefill": self.prefill, "decode": self.decode}


# ---------------------------------------------------------------------------------------------
# The root


class Settings(Model):
    project: str
    zone: str = "us-central1-ai1a"
    network: NetworkSettings = Field(default_factory=dict)
    cluster: ClusterSettings = Field(default_factory=dict)
    tpu: TpuSettings = Field(default_factory=dict)
    addons: AddonsSettings = Field(default_factory=dict)
    kueue: KueueSettings = Field(default_factory=dict)
    demos: DemosSettings = Field(default_factory=dict)
    serving: ServingSettings = Field(default_factory=dict)
    hf_token: SecretStr | None = None

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        if not re.match(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$", v):
            raise ValueError("a Google Cloud project ID (6-30 lowercase letters, digits, hyphens)")
        return v

    @field_validator("zone")
    @classmethod
    def _zone(cls, v: str) -> str:
        if not _ZONE_RE.match(v):
            raise ValueError("a zone of the form <region>-<suffix>, such as us-central1-ai1a")
        return v

    @field_validator("hf_token")
    @classmethod
    def _empty_token_is_none(cls, v: SecretStr | None) -> SecretStr | None:
        # An empty token means "weights are preloaded": no Secret, no HF_TOKEN env.
        return v if v is not None and v.get_secret_value() else None

    def system_pool_pods(self) -> dict[str, ResourceRequirements]:
        """Config key -> resources of every controller pod this program places on the system pool."""
        pods: dict[str, ResourceRequirements] = {
            f"addons.{key}.controllerResources": addon.controller_resources
            for key, addon in self.addons.helm_addons().items()
        }
        if self.serving.enabled:
            pods["serving.router.eppResources"] = self.serving.router.epp_resources
            pods["serving.router.proxyResources"] = self.serving.router.proxy_resources
        return pods

    def _check_system_pool_fit(self) -> None:
        """Controllers sized beyond the system pool stay Pending: refuse that at preview time."""
        cpu, mem = node_allocatable(self.cluster.system_machine_type)
        cpu, mem = cpu - SYSTEM_PODS_CPU_MILLIS, mem - SYSTEM_PODS_MEMORY
        total_cpu = total_mem = 0
        for key, res in self.system_pool_pods().items():
            pod_cpu = cpu_millis(res.requests.cpu or "0")
            pod_mem = memory_bytes(res.requests.memory or "0")
            if pod_cpu > cpu or pod_mem > mem:
                raise SettingError(
                    f"{key}.requests",
                    res.requests.model_dump(exclude_none=True),
                    f"at most {cpu}m CPU and {mem / GIB:.1f}Gi memory, what one "
                    f"{self.cluster.system_machine_type} system node has left for pods",
                )
            total_cpu, total_mem = total_cpu + pod_cpu, total_mem + pod_mem
        nodes = self.cluster.system_node_count
        if total_cpu > cpu * nodes or total_mem > mem * nodes:
            raise SettingError(
                "cluster.systemMachineType",
                self.cluster.system_machine_type,
                f"room for the controllers' requests ({total_cpu}m CPU, {total_mem / GIB:.1f}Gi) on "
                f"cluster.systemNodeCount={nodes} node(s) per zone, which leave {cpu * nodes}m CPU and "
                f"{mem * nodes / GIB:.1f}Gi; use a larger machine or more nodes, or smaller controller requests",
            )

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        self._check_system_pool_fit()
        priorities = self.kueue.priorities
        workloads = self.workload_topologies()
        for key, (topology, priority) in workloads.items():
            if priority not in priorities:
                raise SettingError(f"{key}.priority", priority, f"one of kueue.priorities: {', '.join(priorities)}")
            try:
                self.tpu.cube.classify(Topology.parse(topology))
            except geometry.GeometryError as err:
                raise SettingError(f"{key}.topology", topology, str(err)) from None
        if self.serving.enabled:
            for role, spec in self.serving.roles().items():
                derived = self.serving_slice(role).tensorcores
                if spec.tensor_parallel_size is not None and spec.tensor_parallel_size != derived:
                    raise SettingError(
                        f"serving.{role}.tensorParallelSize",
                        spec.tensor_parallel_size,
                        f"{derived}: a {spec.topology} slice of {self.tpu.machine_type} has "
                        f"{self.serving_slice(role).chips} chips x {self.tpu.system.tensorcores_per_chip} "
                        "TensorCores per chip",
                    )
                name = self.lws_name(role)
                if len(name) > LWS_NAME_MAX:
                    raise SettingError(
                        f"serving.{role}.name",
                        name,
                        f"at most {LWS_NAME_MAX} characters: Kueue's LeaderWorkerSet integration bounds LWS names "
                        f"so, because they feed pod and slice names (GKE slice names stop at {SLICE_NAME_MAX})",
                    )
            # The model's last path segment becomes the llm-d.ai/model label of every pod.
            if len(self.model_label) > LABEL_VALUE_MAX or not _LABEL_VALUE_RE.match(self.model_label):
                raise SettingError(
                    "serving.model",
                    self.serving.model,
                    f"a model whose last path segment is a Kubernetes label value (at most {LABEL_VALUE_MAX} "
                    "letters, digits, '-', '_' or '.', starting and ending alphanumeric)",
                )
        return self

    def warnings(self, now: datetime) -> list[str]:
        """Things that are allowed but probably not what the user wants."""
        out = []
        ex = self.cluster.maintenance_exclusion
        if ex is not None and ex.end <= now:
            out.append(
                f"{PROJECT}:cluster.maintenanceExclusion.end = {ex.rfc3339(ex.end)} is in the past: "
                "the exclusion protects nothing; move the window forward"
            )
        subslices = [k for k, (t, _) in self.workload_topologies().items() if self.slice_of(t).kind is SliceKind.SUB]
        if subslices and gke_version_tuple(self.cluster.version) < gke_version_tuple(MIN_SUBSLICING_VERSION):
            out.append(
                f"{PROJECT}:cluster.version = {self.cluster.version}: GKE documents {MIN_SUBSLICING_VERSION} or "
                f"later for sub-slicing ({', '.join(subslices)}); see "
                "https://cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing"
            )
        return out

    # Derived values -------------------------------------------------------------------------

    @property
    def region(self) -> str:
        m = _ZONE_RE.match(self.zone)
        assert m is not None
        return m.group("region")

    @property
    def workload_pool(self) -> str:
        return f"{self.project}.svc.id.goog"

    @property
    def cluster_identifier(self) -> str:
        return f"projects/{self.project}/locations/{self.region}/clusters/{self.cluster.name}"

    @property
    def node_service_account_id(self) -> str:
        # Service account IDs stop at 30 characters.
        return f"{self.cluster.name[:24].rstrip('-')}-nodes"

    @property
    def reservation_project(self) -> str:
        return self.tpu.reservation.project or self.project

    def workload_topologies(self) -> dict[str, tuple[str, str]]:
        """Config key -> (topology, priority) of every enabled slice consumer."""
        out: dict[str, tuple[str, str]] = {}
        if self.demos.subslicing.enabled:
            out["demos.subslicing"] = (self.demos.subslicing.topology, self.demos.subslicing.priority)
        if self.demos.superslicing.enabled:
            out["demos.superslicing"] = (self.demos.superslicing.topology, self.demos.superslicing.priority)
        if self.serving.enabled:
            for role, spec in self.serving.roles().items():
                out[f"serving.{role}"] = (spec.topology, spec.priority)
        return out

    def slice_of(self, topology: str) -> Slice:
        return self.tpu.cube.classify(Topology.parse(topology))

    def serving_slice(self, role: str) -> Slice:
        return self.slice_of(self.serving.roles()[role].topology)

    def lws_name(self, role: str) -> str:
        return self.serving.roles()[role].name or f"kueue-vllm-{role}-model-streamer"

    @property
    def model_label(self) -> str:
        return self.serving.model.rsplit("/", 1)[-1]


# ---------------------------------------------------------------------------------------------
# Loading and error reporting

_SECRET_KEYS = {"hfToken"}
_STRUCTURED = {name for name, f in Settings.model_fields.items() if name not in ("project", "zone", "hf_token")}


_MEMORY_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_MEMORY_UNITS.update({"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18})
GIB = 2**30


def cpu_millis(quantity: str) -> int:
    return int(float(quantity[:-1])) if quantity.endswith("m") else int(float(quantity) * 1000)


def memory_bytes(quantity: str) -> int:
    for unit, factor in _MEMORY_UNITS.items():
        if quantity.endswith(unit):
            return int(float(quantity[: -len(unit)]) * factor)
    return int(float(quantity))


def _tiered(amount: float, tiers: tuple[tuple[float, float], ...]) -> float:
    """Sum of share x the part of `amount` inside each tier (tiers are (upper bound, share), ascending)."""
    total, lower = 0.0, 0.0
    for upper, share in tiers:
        total += max(0.0, min(amount, upper) - lower) * share
        lower = upper
    return total


def node_allocatable(machine_type: str) -> tuple[int, int]:
    """(millicores, bytes) a GKE node of this machine type offers to pods after GKE's reservations.

    https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations
    """
    vcpus, mem_gib = machine_shape(machine_type)
    cpu_reserved = _tiered(vcpus, ((1, 0.06), (2, 0.01), (4, 0.005), (math.inf, 0.0025)))
    mem_reserved = _tiered(mem_gib, ((4, 0.25), (8, 0.20), (16, 0.10), (128, 0.06), (math.inf, 0.02)))
    eviction = 100 * 2**20
    return int((vcpus - cpu_reserved) * 1000), int((mem_gib - mem_reserved) * GIB) - eviction


# GKE's own per-node pods (CNI, logging, metrics, CSI drivers, NodeLocal DNS) on a system node: an
# estimate, so that the fit check does not promise room that kube-system already took.
SYSTEM_PODS_CPU_MILLIS = 1000
SYSTEM_PODS_MEMORY = 2 * GIB


def machine_shape(machine_type: str) -> tuple[int, float]:
    """(vCPUs, memory GiB) of a general-purpose GCE machine type such as n2-standard-32."""
    m = re.match(r"^(e2|n1|n2|n2d|n4|c2|c2d|c3|c3d|c4|t2d)-(standard|highmem|highcpu)-(\d+)$", machine_type)
    if not m:
        raise ValueError(
            "a general-purpose GCE machine type such as n2-standard-32 (<family>-standard|highmem|highcpu-N)"
        )
    family, kind, vcpus = m.group(1), m.group(2), int(m.group(3))
    per_cpu = {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0}[kind]
    if family == "n1":
        per_cpu = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}[kind]
    return vcpus, vcpus * per_cpu


def _alias_path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    model: Any = Settings
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = next((f for n, f in model.model_fields.items() if n == part or f.alias == part), None)
        if field is None:
            return None
        model = field.annotation
        args = [a for a in getattr(model, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)]
        if args:
            model = args[0]
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _config_key(path: str) -> str:
    top = path.split(".", 1)[0]
    return f"gcp:{path}" if top == "project" else f"{PROJECT}:{path}"


def _show(path: str, value: Any, secret_keys: frozenset[str] = frozenset()) -> str:
    if path.split(".", 1)[0] in _SECRET_KEYS | secret_keys:
        return "[secret]"
    return json.dumps(value, default=str) if not isinstance(value, str) else repr(value)


def describe(err: ValidationError, secret_keys: frozenset[str] = frozenset()) -> list[str]:
    """One line per problem: `<key> = <value>: <allowed>`."""
    lines = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, SettingError):
            path = _alias_path(loc + tuple(cause.field.split(".")))
            lines.append(f"{_config_key(path)} = {_show(path, cause.value, secret_keys)}: {cause.allowed}")
            continue
        path = _alias_path(loc)
        if e["type"] == "extra_forbidden":
            parent = _model_at(loc[:-1])
            known = sorted(f.alias or n for n, f in parent.model_fields.items()) if parent else []
            if parent is Settings:
                known.remove("project")  # that one is gcp:project
            shown = _show(path, e["input"], secret_keys)
            lines.append(f"{_config_key(path)} = {shown}: unknown key; allowed: {', '.join(known)}")
            continue
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "missing":
            lines.append(f"{_config_key(path)} is not set: it is required")
        else:
            lines.append(f"{_config_key(path)} = {_show(path, e['input'], secret_keys)}: {msg}")
    return lines


def load(raw: Mapping[str, Any], project: str | None, secret_keys: frozenset[str] = frozenset()) -> Settings:
    """Validates raw stack config (keys without the project prefix) into Settings, or raises ConfigError.

    Values of `secret_keys` (Pulumi secrets, by top-level key) are never echoed in the error.
    """
    data: dict[str, Any] = {}
    problems: list[str] = []
    camel = {(f.alias or n): n for n, f in Settings.model_fields.items()}
    for key, value in raw.items():
        field = camel.get(key)
        if field in _STRUCTURED and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                problems.append(f"{PROJECT}:{key} = {_show(key, value, secret_keys)}: a structured object (YAML map)")
                continue
        data[key] = value
    if project is not None:
        data["project"] = project
    try:
        settings = Settings.model_validate(data)
    except ValidationError as err:
        problems.extend(describe(err, secret_keys))
        settings = None
    if problems:
        raise ConfigError(
            f"invalid stack configuration ({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n  "
            + "\n  ".join(problems)
        )
    assert settings is not None
    return settings
