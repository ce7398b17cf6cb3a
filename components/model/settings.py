"""Stack settings: one pydantic model tree, the single source of truth for every name and number.

Validated straight from stack config before any resource is registered. Every problem is reported
as `<config key> = <bad value>: <what is allowed>`, all problems in one error.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import typing
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from components.model import geometry
from components.model.checks import (
    DNS_LABEL_MAX,
    GIB,
    LABEL_VALUE_MAX,
    LABEL_VALUE_RE,
    LWS_NAME_MAX,
    LWS_REVISION_LEN,
    MIN_SLICE_CONTROLLER_VERSION,
    MIN_SUBSLICING_VERSION,
    PLACEHOLDER_RE,
    PROJECT,
    REDACTED,
    SLICE_NAME_MAX,
    SYSTEM_PODS_CPU_MILLIS,
    SYSTEM_PODS_MEMORY,
    ZONE_RE,
    ConfigError,
    Model,
    SettingError,
    SettingErrors,
    bucket_name,
    cpu_millis,
    gke_version_tuple,
    looks_secret,
    memory_bytes,
    node_allocatable,
    node_allocatable_of,
    project_id,
    raise_all,
    redact_text,
)
from components.model.gcp_settings import (
    ClusterSettings,
    NetworkSettings,
    TpuSettings,
)
from components.model.geometry import Slice, SliceKind, Topology
from components.model.gke_versions import DYNAMIC_SLICING_DOC
from components.model.k8s_settings import (
    DEMO_REPLICATED_JOB,
    AddonsSettings,
    DemosSettings,
    KueueSettings,
    ResourceAmounts,
    ResourceRequirements,
    ServingSettings,
    longest_job_name,
)
from components.model.observability_settings import ObservabilitySettings

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
    observability: ObservabilitySettings = Field(default_factory=dict)
    hf_token: SecretStr | None = None

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        return project_id(v)

    @field_validator("zone")
    @classmethod
    def _zone(cls, v: str) -> str:
        if not ZONE_RE.match(v):
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
            # The gateway-mode chart runs no proxy of its own: the GKE Gateway's load balancer is the proxy.
            pods["serving.router.eppResources"] = self.serving.router.epp_resources
        return pods

    def _check_system_pool_fit(self) -> list[SettingError]:
        """Controllers sized beyond the system pool stay Pending: refuse that at preview time."""
        cpu, mem = node_allocatable(self.cluster.system_machine_type)
        cpu, mem = cpu - SYSTEM_PODS_CPU_MILLIS, mem - SYSTEM_PODS_MEMORY
        total_cpu = total_mem = 0
        errors = []
        counts = {f"addons.{k}.controllerResources": a.pod_count() for k, a in self.addons.helm_addons().items()}
        for key, res in self.system_pool_pods().items():
            pod_cpu = cpu_millis(res.requests.cpu or "0")
            pod_mem = memory_bytes(res.requests.memory or "0")
            if pod_cpu > cpu or pod_mem > mem:
                errors.append(
                    SettingError(
                        f"{key}.requests",
                        res.requests.model_dump(exclude_none=True),
                        f"at most {cpu}m CPU and {mem / GIB:.1f}Gi memory, what one "
                        f"{self.cluster.system_machine_type} system node has left for pods",
                    )
                )
            n = counts.get(key, 1)
            total_cpu, total_mem = total_cpu + n * pod_cpu, total_mem + n * pod_mem
        nodes = self.cluster.system_node_count
        if not errors and (total_cpu > cpu * nodes or total_mem > mem * nodes):
            errors.append(
                SettingError(
                    "cluster.systemMachineType",
                    self.cluster.system_machine_type,
                    f"room for the controllers' requests ({total_cpu}m CPU, {total_mem / GIB:.1f}Gi) on "
                    f"cluster.systemNodeCount={nodes} node(s) per zone, which leave {cpu * nodes}m CPU and "
                    f"{mem * nodes / GIB:.1f}Gi; use a larger machine or more nodes, or smaller controller requests",
                )
            )
        return errors

    def _check_reservation_project(self) -> list[SettingError]:
        r = self.tpu.reservation
        # GKE cannot bind a node pool to a block of a reservation shared from another project (issue #8
        # reports cluster-toolkit refusing it as a precondition; not found in the snapshot we could read).
        if self.tpu.cubes > 0 and r.consume_type == "SPECIFIC" and r.block and r.project not in (None, self.project):
            return [
                SettingError(
                    "tpu.reservation.project",
                    r.project,
                    f"the stack's project gcp:project={self.project} (or unset): GKE does not support a reservation "
                    f"block ({r.block}) shared from another project; use a reservation of this project, or the whole "
                    'shared reservation (tpu.reservation.block: "")',
                )
            ]
        return []

    def _check_buckets(self) -> list[SettingError]:
        # serving.weightsBucket and xlaCacheBucket themselves are checked in ServingSettings; this is the name
        # derived from the project and the cluster.
        if not self.serving.enabled or self.serving.xla_cache_bucket is not None:
            return []
        try:
            bucket_name(self.xla_cache_bucket)
        except ValueError as err:  # never for a hash, but the rule is the API's, not ours
            return [SettingError("serving.xlaCacheBucket", self.xla_cache_bucket, str(err))]
        return []

    def _check_workloads(self) -> list[SettingError]:
        errors = []
        priorities = self.kueue.priorities
        for key, (topology, priority) in self.workload_topologies().items():
            if priority not in priorities:
                errors.append(
                    SettingError(f"{key}.priority", priority, f"one of kueue.priorities: {', '.join(priorities)}")
                )
            try:
                self.tpu.cube.classify(Topology.parse(topology))
            except geometry.GeometryError as err:
                errors.append(SettingError(f"{key}.topology", topology, str(err)))
        return errors

    def _check_serving(self) -> list[SettingError]:
        if not self.serving.enabled:
            return []
        errors = []
        system = self.tpu.system
        for role, spec in self.serving.roles().items():
            try:
                slice_ = self.serving_slice(role)
            except geometry.GeometryError:
                continue  # reported by _check_workloads
            if spec.tensor_parallel_size is not None and spec.tensor_parallel_size != slice_.tensorcores:
                errors.append(
                    SettingError(
                        f"serving.{role}.tensorParallelSize",
                        spec.tensor_parallel_size,
                        f"{slice_.tensorcores}: a {spec.topology} slice of {self.tpu.machine_type} has "
                        f"{slice_.chips} chips x {system.tensorcores_per_chip} TensorCores per chip",
                    )
                )
            name = self.lws_name(role)
            room = LWS_NAME_MAX - 1 - LWS_REVISION_LEN
            if len(name) > room:
                errors.append(
                    SettingError(
                        f"serving.{role}.name",
                        name,
                        f"at most {room} characters: the LeaderWorkerSet is named <name>-<{LWS_REVISION_LEN}-digit "
                        f"revision of its pod shape>, and Kueue's LeaderWorkerSet integration bounds LWS names to "
                        f"{LWS_NAME_MAX}, because they feed pod and slice names (GKE slice names stop at "
                        f"{SLICE_NAME_MAX})",
                    )
                )
            errors += self._check_tpu_vm_fit(f"serving.{role}.resources", spec.resources)
        # The model's last path segment becomes the llm-d.ai/model label of every pod.
        if len(self.model_label) > LABEL_VALUE_MAX or not LABEL_VALUE_RE.match(self.model_label):
            errors.append(
                SettingError(
                    "serving.model",
                    self.serving.model,
                    f"a model whose last path segment is a Kubernetes label value (at most {LABEL_VALUE_MAX} "
                    "letters, digits, '-', '_' or '.', starting and ending alphanumeric)",
                )
            )
        return errors

    def _check_tpu_vm_fit(self, key: str, amounts: ResourceAmounts) -> list[SettingError]:
        """A vLLM pod (requests = limits) asks for at most what one TPU VM offers to pods."""
        system = self.tpu.system
        if system.vcpus is None or system.memory_gib is None:
            return []
        cpu, mem = node_allocatable_of(system.vcpus, system.memory_gib)
        errors = []
        if amounts.cpu is not None and cpu_millis(amounts.cpu) > cpu:
            errors.append(
                SettingError(
                    f"{key}.cpu",
                    amounts.cpu,
                    f"at most {cpu / 1000:g} CPUs, what one {self.tpu.machine_type} VM ({system.vcpus} vCPUs) "
                    "offers to pods after GKE's reservation; a larger request never schedules",
                )
            )
        if amounts.memory is not None and memory_bytes(amounts.memory) > mem:
            errors.append(
                SettingError(
                    f"{key}.memory",
                    amounts.memory,
                    f"at most {mem // 2**20}Mi ({mem / GIB:.1f}Gi), what one {self.tpu.machine_type} VM "
                    f"({system.memory_gib:g} GiB) offers to pods after GKE's reservation and eviction threshold",
                )
            )
        return errors

    def _check_demos(self) -> list[SettingError]:
        """JobSet's webhook refuses a JobSet whose longest Job name, <jobset>-<replicatedJob>-<last index>,
        is not a DNS-1035 label (kubernetes-sigs/jobset v0.11.1 pkg/webhooks/jobset_webhook.go, validateCreate:
        placement.GenJobName(js.Name, rJob.Name, rJob.Replicas-1) through validation.IsDNS1035Label)."""
        errors = []
        for key, demo in (("demos.subslicing", self.demos.subslicing), ("demos.superslicing", self.demos.superslicing)):
            if not demo.enabled:
                continue
            job = longest_job_name(demo.name, demo.replicas)
            if len(job) > DNS_LABEL_MAX:
                errors.append(
                    SettingError(
                        f"{key}.name",
                        demo.name,
                        f"at most {DNS_LABEL_MAX - (len(job) - len(demo.name))} characters here: JobSet names its "
                        f"Jobs <name>-{DEMO_REPLICATED_JOB}-<index> ({job!r} would be {len(job)}), and a Job name "
                        f"is a DNS-1035 label of at most {DNS_LABEL_MAX}",
                    )
                )
        return errors

    def _check_workload_namespace(self) -> list[SettingError]:
        """Kueue's webhooks fail closed in exactly this namespace (components/model/kueue_config.py sets it as
        managedJobsNamespaceSelector, and the chart gives the pod webhook that selector with `failurePolicy: Fail`:
        kubernetes-sigs/kueue v0.17.4 charts/kueue/templates/webhook/manifests.yaml mpod.kb.io). Kueue's own default
        leaves kube-system and its own namespace out for that reason (apis/config/v1beta2/defaults.go): in an
        add-on's namespace no controller pod could start while Kueue is down (Kueue's own, never), and `kube-` is
        Kubernetes' own prefix (kubernetes.io/docs/concepts/overview/working-with-objects/namespaces, "Avoid
        creating namespaces with the prefix kube-"). The program also creates this namespace itself."""
        namespace = self.kueue.namespace
        addons = {
            f"addons.{key}.namespace": addon.namespace
            for key, addon in (("jobset", self.addons.jobset), ("kueue", self.addons.kueue), ("lws", self.addons.lws))
        }
        taken = [key for key, value in addons.items() if value == namespace]
        if taken or namespace.startswith("kube-"):
            why = f"it is {', '.join(taken)}" if taken else "kube- is Kubernetes' own prefix"
            return [
                SettingError(
                    "kueue.namespace",
                    namespace,
                    "a namespace of its own, not an add-on's and not kube-*: Kueue's pod webhook fails closed "
                    f"there, so no other controller may live in it ({why})",
                )
            ]
        return []

    # Each cross-check with the top-level keys it reads: when some other key is invalid, the checks that do
    # not read it still run, so every independent problem is in the one error.
    CROSS_CHECKS: ClassVar[tuple[tuple[frozenset[str], str], ...]] = (
        (frozenset({"cluster", "addons", "serving"}), "_check_system_pool_fit"),
        (frozenset({"tpu", "project"}), "_check_reservation_project"),
        (frozenset({"kueue", "tpu", "demos", "serving"}), "_check_workloads"),
        (frozenset({"tpu", "serving"}), "_check_serving"),
        (frozenset({"demos"}), "_check_demos"),
        (frozenset({"kueue", "addons"}), "_check_workload_namespace"),
        (frozenset({"project", "cluster", "serving"}), "_check_buckets"),
        (frozenset({"cluster", "tpu", "demos", "serving"}), "_check_version_floor"),
    )

    def cross_check_errors(self, skip: frozenset[str] = frozenset()) -> list[SettingError]:
        """Problems between keys, from every check that reads none of the keys in `skip` (invalid ones)."""
        errors: list[SettingError] = []
        for needs, check in self.CROSS_CHECKS:
            if not needs & skip:
                errors += getattr(self, check)()
        return errors

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        raise_all(self.cross_check_errors())
        return self

    def version_floor(self) -> tuple[str, str]:
        """(the oldest GKE version the cluster may run, why): GKE's documented floors for dynamic slicing."""
        subslices = [k for k, (t, _) in self.workload_topologies().items() if self.slice_of(t).kind is SliceKind.SUB]
        if subslices:
            why = f"GKE's floor for dynamic sub-slicing, which {', '.join(subslices)} use ({DYNAMIC_SLICING_DOC})"
            return MIN_SUBSLICING_VERSION, why
        return MIN_SLICE_CONTROLLER_VERSION, f"GKE's floor for dynamic slicing ({DYNAMIC_SLICING_DOC})"

    def _check_version_floor(self) -> list[SettingError]:
        """A pin or prefix that can never reach the floor is refused here; what a prefix resolves to, at preview."""
        try:
            floor, why = self.version_floor()
        except geometry.GeometryError:
            return []  # the floor depends on which workloads are sub-slices: _check_workloads reports the shape
        newest = self.cluster.version_spec.newest_possible()
        if newest is not None and newest < gke_version_tuple(floor):
            return [SettingError("cluster.version", self.cluster.version, f"{floor} or newer: {why}")]
        return []

    def warnings(self) -> list[str]:
        """Things that are allowed but probably not what the user wants."""
        out = []
        if self.cluster.control_plane.unrestricted_public_endpoint:
            out.append(
                f"{PROJECT}:cluster.controlPlane.unrestrictedPublicEndpoint = true: the control plane's public IP "
                "endpoint accepts connections from any address on the internet (Kubernetes authentication and IAM "
                "still apply); set cluster.controlPlane.authorizedNetworks to the ranges you connect from instead"
            )
        if not self.cluster.private_nodes:
            out.append(
                f"{PROJECT}:cluster.privateNodes = false: every node, TPU VMs included, gets an external IP address "
                "(an organization enforcing constraints/compute.vmExternalIpAccess refuses to create them)"
            )
        gateway = self.serving.gateway
        if self.serving.enabled and gateway.external:
            out.append(
                f"{PROJECT}:serving.gateway.className = {gateway.class_name}: the Gateway "
                f"{gateway.name} gets a public IP address and serves {self.serving.model_served} to the internet "
                "over plain HTTP on port 80, with no authentication (serving.gateway.exposeToInternet is true)"
            )
        o = self.observability
        if o.enabled and not o.scraping and (o.dashboard or o.alerts):
            out.append(
                f"{PROJECT}:observability.scraping = false: the dashboard's Kueue, vLLM and router charts and every "
                "alert read scraped metrics, so they will show no data (only the TPU system metrics remain)"
            )
        return out

    # Derived values -------------------------------------------------------------------------

    @property
    def region(self) -> str:
        m = ZONE_RE.match(self.zone)
        assert m is not None
        return m.group("region")

    @property
    def xla_cache_bucket(self) -> str:
        """The XLA compilation cache's bucket: `serving.xlaCacheBucket`, or `xla-cache-<hash>`.

        Bucket names are global and public, and Google asks not to put project IDs in them
        (https://cloud.google.com/storage/docs/buckets#considerations): a hash of project and cluster names is
        unique per deployment, stable across runs, and 30 characters whatever the inputs' length.
        """
        if self.serving.xla_cache_bucket is not None:
            return self.serving.xla_cache_bucket
        digest = hashlib.sha256(f"{self.project}/{self.cluster.name}".encode()).hexdigest()
        return f"xla-cache-{digest[:20]}"

    @property
    def workload_pool(self) -> str:
        return f"{self.project}.svc.id.goog"

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


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    args = typing.get_args(annotation) or (annotation,)
    return [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]


def _is_secret(annotation: Any) -> bool:
    args = typing.get_args(annotation) or (annotation,)
    return any(isinstance(a, type) and issubclass(a, SecretStr) for a in args)


def secret_paths(model: type[BaseModel] = Settings, prefix: str = "") -> frozenset[str]:
    """Config paths of every secret field (typed SecretStr), wherever it sits in the model tree.

    A new secret key is secret everywhere (redacted, refused in plain text) by its type alone.
    """
    out: set[str] = set()
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        if _is_secret(field.annotation):
            out.add(path)
        for sub in _models_in(field.annotation):
            out |= secret_paths(sub, f"{path}.")
    return frozenset(out)


SECRET_PATHS = secret_paths()
# Top-level keys holding a secret: Pulumi encrypts (and reports as secret) whole top-level keys.
SECRET_TOP_KEYS = frozenset(p.split(".", 1)[0] for p in SECRET_PATHS)
_STRUCTURED = {
    f.alias or name
    for name, f in Settings.model_fields.items()
    if _models_in(f.annotation) or typing.get_origin(f.annotation) in (list, dict)
}


def _alias_path(loc: tuple[Any, ...]) -> str:
    """The config path of an error location: pydantic names a field by its Python name when its default is
    what failed (`weights_bucket`), and by its key when a value was given (`weightsBucket`)."""
    parts: list[str] = []
    model: Any = Settings
    for part in loc:
        field = None
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is None:
            parts.append(str(part))
            model = None
            continue
        parts.append(field.alias or str(part))
        model = _model_at(tuple(loc[: len(parts)]))
    return ".".join(parts)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    model: Any = Settings
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = next((f for n, f in model.model_fields.items() if n == part or f.alias == part), None)
        if field is None:
            return None
        subs = _models_in(field.annotation)
        model = subs[0] if subs else None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def all_paths(model: type[BaseModel] = Settings, prefix: str = "") -> list[str]:
    """Every config path of the model tree, sections included (`tpu`, `tpu.reservation`, `tpu.reservation.name`)."""
    out = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        out.append(path)
        for sub in _models_in(field.annotation):
            out += all_paths(sub, f"{path}.")
    return out


def _config_key(path: str) -> str:
    top = path.split(".", 1)[0]
    return f"gcp:{path}" if top == "project" else f"{PROJECT}:{path}"


def is_secret_path(path: str, secret_keys: frozenset[str] = frozenset()) -> bool:
    top = re.split(r"[.\[]", path, maxsplit=1)[0]
    return top in SECRET_TOP_KEYS | secret_keys or any(
        path == p or path.startswith((f"{p}.", f"{p}[")) for p in SECRET_PATHS
    )


def _show(path: str, value: Any, secret_keys: frozenset[str] = frozenset()) -> str:
    if is_secret_path(path, secret_keys) or looks_secret(value):
        return REDACTED
    return json.dumps(value, default=str) if not isinstance(value, str) else repr(value)


def _unknown_key(path: str, parent: type[BaseModel] | None) -> str:
    """`<key>: unknown key ...`, never with its value (it may be a secret put in the wrong place)."""
    known = sorted(f.alias or n for n, f in parent.model_fields.items()) if parent else []
    if parent is Settings:
        known.remove("project")  # that one is gcp:project
    name = path.rsplit(".", 1)[-1]
    prefix = path[: -len(name)]
    close = [f"{prefix}{k}" for k in difflib.get_close_matches(name, known, n=1)]
    elsewhere = close or [p for p in all_paths() if p.rsplit(".", 1)[-1] == name and p != path]
    hint = f"; did you mean {', '.join(_config_key(p) for p in elsewhere)}?" if elsewhere else ""
    return f"{_config_key(path)}: unknown key{hint} (allowed here: {', '.join(known)})"


def describe(err: ValidationError, secret_keys: frozenset[str] = frozenset()) -> list[str]:
    """One line per problem: `<key> = <value>: <allowed>`."""
    lines = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        cause = (e.get("ctx") or {}).get("error")
        causes = (
            cause.errors if isinstance(cause, SettingErrors) else [cause] if isinstance(cause, SettingError) else []
        )
        if causes:
            for c in causes:
                path = _alias_path(loc + tuple(c.field.split(".")))
                if c.value is None:
                    lines.append(f"{_config_key(path)} is not set: {c.allowed}")
                else:
                    lines.append(f"{_config_key(path)} = {_show(path, c.value, secret_keys)}: {c.allowed}")
            continue
        path = _alias_path(loc)
        if e["type"] == "extra_forbidden":
            lines.append(_unknown_key(path, _model_at(loc[:-1])))
            continue
        msg = redact_text(e["msg"].removeprefix("Value error, "))
        if is_secret_path(path, secret_keys):
            msg = f"a {_type_word(e['type'])}" if e["type"].endswith("_type") else "invalid"
        if e["type"] == "missing":
            lines.append(f"{_config_key(path)} is not set: it is required")
        elif e["input"] is None:  # a key that may be unset, but not here
            lines.append(f"{_config_key(path)} is not set: {msg}")
        else:
            lines.append(f"{_config_key(path)} = {_show(path, e['input'], secret_keys)}: {msg}")
    return lines


def _type_word(error_type: str) -> str:
    return error_type.removesuffix("_type").replace("_", " ")


def _placeholders(value: Any, path: str) -> list[tuple[str, Any]]:
    """(config path, value) of every string holding a `<REPLACE-ME...>` marker, in document order."""
    if isinstance(value, str):
        return [(path, value)] if PLACEHOLDER_RE.search(value) else []
    if isinstance(value, Mapping):
        return [hit for k, v in value.items() for hit in _placeholders(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in _placeholders(v, f"{path}[{i}]")]
    return []


def _without(value: Any, path: list[str | int]) -> Any:
    """A copy of `value` without the item at `path` (so its default, or 'not set', applies instead)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(value, Mapping) and isinstance(head, str):
        if not rest:
            return {k: v for k, v in value.items() if k != head}
        return {**value, head: _without(value[head], rest)}
    if isinstance(value, list) and isinstance(head, int):
        if not rest:
            return value[:head] + value[head + 1 :]
        return [*value[:head], _without(value[head], rest), *value[head + 1 :]]
    return value


def _split_path(path: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in re.split(r"\.|\[|\]\.?", path) if p]


def _get(value: Any, path: list[str | int]) -> Any:
    for part in path:
        if isinstance(value, Mapping) and isinstance(part, str):
            value = value.get(part)
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        else:
            return None
    return value


def set_command(path: str, secret: bool = False) -> str:
    """The `pulumi config set` command that stores a value at `path` (nested paths need --path)."""
    if path == "project":
        return "pulumi config set gcp:project <value>"
    flag = " --secret" if secret else ""
    where = f" --path '{path}'" if re.search(r"[.\[]", path) else f" {path}"
    return f"pulumi config set{flag}{where} <value>"


def _placeholder_problem(path: str, value: Any, secret_keys: frozenset[str]) -> str:
    key = _config_key(path)
    how = f"`{set_command(path, is_secret_path(path))}`"
    return (
        f"{key} = {_show(path, value, secret_keys)}: a placeholder left in the stack file; set this "
        f"environment's value there or with {how}"
    )


def _plaintext_secrets(data: Mapping[str, Any], secret_keys: frozenset[str]) -> list[str]:
    """A secret field set in plain text (not a Pulumi secret) is refused: the stack file would hold it."""
    problems = []
    for path in sorted(SECRET_PATHS):
        value = _get(data, _split_path(path))
        if value in (None, "") or path.split(".", 1)[0] in secret_keys:
            continue
        problems.append(
            f"{_config_key(path)} = {REDACTED}: a secret stored in plain text; remove it (`pulumi config rm"
            f"{' --path' if '.' in path else ''} {path}`) and set it encrypted with `{set_command(path, True)}`"
        )
    return problems


def _flat_nested_key(key: str) -> str | None:
    """A top-level key such as `tpu.cubes`: what `pulumi config set tpu.cubes 4` stores without --path."""
    top = re.split(r"[.\[]", key, maxsplit=1)[0]
    camel = {(f.alias or n) for n, f in Settings.model_fields.items()} - {"project"}
    if key == top or top not in camel:
        return None
    return (
        f"{PROJECT}:{key}: a nested key set without --path (Pulumi stored one flat key named {key!r}, which the "
        f"program does not read); run `pulumi config rm {key}`, then `pulumi config set --path '{key}' <value>`"
    )


def _partial(data: Mapping[str, Any], valid: set[str], context: dict[str, Any]) -> tuple[Settings, frozenset[str]]:
    """Settings built from the top-level keys that validate on their own, and the names of those left out."""
    values: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        if name not in valid:
            continue
        alias = field.alias or name
        try:
            if alias in data:
                values[name] = TypeAdapter(field.annotation).validate_python(data[alias], context=context)
            else:
                values[name] = field.get_default(call_default_factory=True, validated_data={})
                if isinstance(values[name], dict) and _models_in(field.annotation):
                    values[name] = _models_in(field.annotation)[0].model_validate({}, context=context)
        except (ValidationError, ValueError, TypeError):
            continue
    return Settings.model_construct(**values), frozenset(set(Settings.model_fields) - set(values))


def _independent_problems(
    err: ValidationError, data: Mapping[str, Any], context: dict[str, Any], secret_keys: frozenset[str]
) -> list[str]:
    """Cross-key problems among the keys that are valid, found although other keys are not."""
    alias_to_name = {(f.alias or n): n for n, f in Settings.model_fields.items()}
    failed = {alias_to_name.get(str(e["loc"][0]), str(e["loc"][0])) for e in err.errors() if e["loc"]}
    if any(not e["loc"] for e in err.errors()):
        return []  # the cross-checks themselves ran and failed: already reported
    partial, left_out = _partial(data, set(Settings.model_fields) - failed, context)
    lines = []
    try:
        errors = partial.cross_check_errors(skip=left_out)
    except Exception:
        return []
    for c in errors:
        if c.value is None:
            lines.append(f"{_config_key(c.field)} is not set: {c.allowed}")
        else:
            lines.append(f"{_config_key(c.field)} = {_show(c.field, c.value, secret_keys)}: {c.allowed}")
    return lines


def load(
    raw: Mapping[str, Any],
    project: str | None,
    secret_keys: frozenset[str] = frozenset(),
    now: datetime | None = None,
) -> Settings:
    """Validates raw stack config (keys without the project prefix) into Settings, or raises ConfigError.

    Values of `secret_keys` (Pulumi secrets, by top-level key) and of secret fields are never echoed, and a
    secret field outside `secret_keys` (plain text in the stack) is an error. `now` is the clock for date
    checks (a maintenance exclusion must not be over); default: the current time. A value holding a
    `<REPLACE-ME...>` marker is one problem naming its key; it is then validated as if unset, and other
    problems of the same key are not reported on top. (The offline commands add the `--set` flags that fill
    the placeholders: components/cli/plan.py config_error.)
    """
    data: dict[str, Any] = {}
    problems: list[str] = []
    secret_keys = frozenset(secret_keys)
    for key, value in raw.items():
        flat = _flat_nested_key(key)
        if flat:
            problems.append(flat)
            continue
        if key in _STRUCTURED and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                problems.append(
                    f"{PROJECT}:{key} = {_show(key, value, secret_keys)}: a structured object (YAML map); set "
                    f"its items with `pulumi config set --path '{key}.<item>' <value>`"
                )
                continue
        data[key] = value
    if project is not None:
        data["project"] = project
    # gcp:project first, then the project's keys in stack-file order.
    placeholders = sorted(_placeholders(data, ""), key=lambda hit: hit[0] != ".project")
    placeholder_keys = []
    for path, value in placeholders:
        path = path.lstrip(".")
        problems.append(_placeholder_problem(path, value, secret_keys))
        placeholder_keys.append(_config_key(path))
        # Validation errors spell list items `a.0.b`, placeholders `a[0].b`: drop both forms.
        placeholder_keys.append(_config_key(re.sub(r"\[(\d+)\]", r".\1", path)))
        # A placeholder inside a list (`channels[0]`) stands for the whole list's value.
        placeholder_keys.append(_config_key(re.sub(r"(\[\d+\])+$", "", path)))
        data = _without(data, _split_path(path))
    problems += _plaintext_secrets(data, secret_keys)  # after the placeholders: a marker is no secret
    context = {"now": now or datetime.now(UTC)}
    try:
        settings = Settings.model_validate(data, context=context)
    except ValidationError as err:
        lines = describe(err, secret_keys) + _independent_problems(err, data, context, secret_keys)
        problems.extend(
            line
            for line in lines
            if not any(line.startswith((f"{key} ", f"{key}.", f"{key}[", f"{key}:")) for key in placeholder_keys)
        )
        settings = None
    if problems:
        raise ConfigError(
            f"invalid stack configuration ({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n  "
            # Credential-shaped text is redacted wherever it sits, key names included.
            + "\n  ".join(redact_text(line) for line in problems)
        )
    assert settings is not None
    return settings
