"""Stack settings: one pydantic model tree, the single source of truth for every name and number.

Validated straight from stack config before any resource is registered. Every problem is reported
as `<config key> = <bad value>: <what is allowed>`, all problems in one error.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from components.model import geometry
from components.model.checks import (
    GIB,
    LABEL_VALUE_MAX,
    LABEL_VALUE_RE,
    LWS_NAME_MAX,
    LWS_REVISION_LEN,
    MIN_SLICE_CONTROLLER_VERSION,
    MIN_SUBSLICING_VERSION,
    PLACEHOLDER_RE,
    PROJECT,
    SLICE_NAME_MAX,
    SYSTEM_PODS_CPU_MILLIS,
    SYSTEM_PODS_MEMORY,
    ZONE_RE,
    ConfigError,
    Model,
    SettingError,
    bucket_name,
    cpu_millis,
    gke_version_tuple,
    memory_bytes,
    node_allocatable,
)
from components.model.gcp_settings import (
    ClusterSettings,
    NetworkSettings,
    TpuSettings,
)
from components.model.geometry import Slice, SliceKind, Topology
from components.model.gke_versions import DYNAMIC_SLICING_DOC
from components.model.k8s_settings import (
    AddonsSettings,
    DemosSettings,
    KueueSettings,
    ResourceRequirements,
    ServingSettings,
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
        if not re.match(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$", v):
            raise ValueError("a Google Cloud project ID (6-30 lowercase letters, digits, hyphens)")
        return v

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

    def _check_system_pool_fit(self) -> None:
        """Controllers sized beyond the system pool stay Pending: refuse that at preview time."""
        cpu, mem = node_allocatable(self.cluster.system_machine_type)
        cpu, mem = cpu - SYSTEM_PODS_CPU_MILLIS, mem - SYSTEM_PODS_MEMORY
        total_cpu = total_mem = 0
        counts = {f"addons.{k}.controllerResources": a.pod_count() for k, a in self.addons.helm_addons().items()}
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
            n = counts.get(key, 1)
            total_cpu, total_mem = total_cpu + n * pod_cpu, total_mem + n * pod_mem
        nodes = self.cluster.system_node_count
        if total_cpu > cpu * nodes or total_mem > mem * nodes:
            raise SettingError(
                "cluster.systemMachineType",
                self.cluster.system_machine_type,
                f"room for the controllers' requests ({total_cpu}m CPU, {total_mem / GIB:.1f}Gi) on "
                f"cluster.systemNodeCount={nodes} node(s) per zone, which leave {cpu * nodes}m CPU and "
                f"{mem * nodes / GIB:.1f}Gi; use a larger machine or more nodes, or smaller controller requests",
            )

    def _check_reservation_project(self) -> None:
        r = self.tpu.reservation
        # GKE cannot bind a node pool to a block of a reservation shared from another project (issue #8
        # reports cluster-toolkit refusing it as a precondition; not found in the snapshot we could read).
        if self.tpu.cubes > 0 and r.consume_type == "SPECIFIC" and r.block and r.project not in (None, self.project):
            raise SettingError(
                "tpu.reservation.project",
                r.project,
                f"the stack's project gcp:project={self.project} (or unset): GKE does not support a reservation "
                f"block ({r.block}) shared from another project; use a reservation of this project, or the whole "
                'shared reservation (tpu.reservation.block: "")',
            )

    def _check_buckets(self) -> None:
        # serving.weightsBucket and xlaCacheBucket themselves are checked in ServingSettings; this is the name
        # derived from the project and the cluster.
        s = self.serving
        if s.xla_cache_bucket is None:
            try:
                bucket_name(self.xla_cache_bucket)
            except ValueError as err:  # never for a hash, but the rule is the API's, not ours
                raise SettingError("serving.xlaCacheBucket", self.xla_cache_bucket, str(err)) from None

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        self._check_system_pool_fit()
        self._check_reservation_project()
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
            self._check_buckets()
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
                room = LWS_NAME_MAX - 1 - LWS_REVISION_LEN
                if len(name) > room:
                    raise SettingError(
                        f"serving.{role}.name",
                        name,
                        f"at most {room} characters: the LeaderWorkerSet is named <name>-<{LWS_REVISION_LEN}-digit "
                        f"revision of its pod shape>, and Kueue's LeaderWorkerSet integration bounds LWS names to "
                        f"{LWS_NAME_MAX}, because they feed pod and slice names (GKE slice names stop at "
                        f"{SLICE_NAME_MAX})",
                    )
            # The model's last path segment becomes the llm-d.ai/model label of every pod.
            if len(self.model_label) > LABEL_VALUE_MAX or not LABEL_VALUE_RE.match(self.model_label):
                raise SettingError(
                    "serving.model",
                    self.serving.model,
                    f"a model whose last path segment is a Kubernetes label value (at most {LABEL_VALUE_MAX} "
                    "letters, digits, '-', '_' or '.', starting and ending alphanumeric)",
                )
        # After the topologies are known to be valid: the floor depends on which of them are sub-slices.
        self._check_version_floor()
        return self

    def version_floor(self) -> tuple[str, str]:
        """(the oldest GKE version the cluster may run, why): GKE's documented floors for dynamic slicing."""
        subslices = [k for k, (t, _) in self.workload_topologies().items() if self.slice_of(t).kind is SliceKind.SUB]
        if subslices:
            why = f"GKE's floor for dynamic sub-slicing, which {', '.join(subslices)} use ({DYNAMIC_SLICING_DOC})"
            return MIN_SUBSLICING_VERSION, why
        return MIN_SLICE_CONTROLLER_VERSION, f"GKE's floor for dynamic slicing ({DYNAMIC_SLICING_DOC})"

    def _check_version_floor(self) -> None:
        """A pin or prefix that can never reach the floor is refused here; what a prefix resolves to, at preview."""
        floor, why = self.version_floor()
        newest = self.cluster.version_spec.newest_possible()
        if newest is not None and newest < gke_version_tuple(floor):
            raise SettingError("cluster.version", self.cluster.version, f"{floor} or newer: {why}")

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
            self._check_buckets()
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


def _alias_path(loc: tuple[Any, ...]) -> str:
    """The config path of an error location: pydantic names a field by its Python name when its default is
    what failed (`weights_bucket`), and by its key when a value was given (`weightsBucket`)."""
    parts, model = [], Settings
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
            if cause.value is None:
                lines.append(f"{_config_key(path)} is not set: {cause.allowed}")
                continue
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
        elif e["input"] is None:  # a key that may be unset, but not here
            lines.append(f"{_config_key(path)} is not set: {msg}")
        else:
            lines.append(f"{_config_key(path)} = {_show(path, e['input'], secret_keys)}: {msg}")
    return lines


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


def _placeholder_problem(path: str, value: Any, secret_keys: frozenset[str]) -> str:
    key = _config_key(path)
    if path == "project":
        how = "pulumi config set gcp:project <value>"
    else:
        secret = " --secret" if path.split(".", 1)[0] in _SECRET_KEYS | secret_keys else ""
        path_flag = f" --path '{path}'" if re.search(r"[.\[]", path) else f" {path}"
        how = f"pulumi config set{secret}{path_flag} <value>"
    return (
        f"{key} = {_show(path, value, secret_keys)}: a placeholder left in the stack file; set this "
        f"environment's value there or with `{how}`"
    )


def load(
    raw: Mapping[str, Any],
    project: str | None,
    secret_keys: frozenset[str] = frozenset(),
    now: datetime | None = None,
) -> Settings:
    """Validates raw stack config (keys without the project prefix) into Settings, or raises ConfigError.

    Values of `secret_keys` (Pulumi secrets, by top-level key) are never echoed in the error. `now` is the
    clock for date checks (a maintenance exclusion must not be over); default: the current time. A value
    holding a `<REPLACE-ME...>` marker is one problem naming its key; it is then validated as if unset,
    and other problems of the same key are not reported on top.
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
    try:
        settings = Settings.model_validate(data, context={"now": now or datetime.now(UTC)})
    except ValidationError as err:
        problems.extend(
            line
            for line in describe(err, secret_keys)
            if not any(line.startswith((f"{key} ", f"{key}.", f"{key}[")) for key in placeholder_keys)
        )
        settings = None
    if problems:
        raise ConfigError(
            f"invalid stack configuration ({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n  "
            + "\n  ".join(problems)
        )
    assert settings is not None
    return settings
