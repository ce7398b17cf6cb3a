"""The root of the stack settings: the `Settings` model, its sections, the cross-key checks' table, the
warnings and the values derived from several keys.

The checks themselves are in components/model/config/cross_checks.py; loading stack config into this model, and
the error that names every problem, in components/model/config/settings.py.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, ClassVar

from pydantic import Field, SecretStr, field_validator, model_validator

from components.model.addons import tested_sets
from components.model.config.addons_settings import AddonsSettings
from components.model.config.autoscaling_settings import burst_slots
from components.model.config.burst_checks import BurstChecks
from components.model.config.capacity_checks import CapacityChecks
from components.model.config.checks import (
    MIN_SLICE_CONTROLLER_VERSION,
    MIN_SUBSLICING_VERSION,
    PROJECT,
    ZONE_RE,
    Model,
    SettingError,
    accept_if,
    gke_version_tuple,
    raise_all,
)
from components.model.config.cluster_settings import ClusterSettings, node_service_account_id
from components.model.config.cross_checks import CrossChecks
from components.model.config.gke_versions import DYNAMIC_SLICING_DOC
from components.model.config.images import VLLM_TPU, digest_advice, parts
from components.model.config.k8s_settings import DemosSettings, KueueSettings
from components.model.config.network_settings import NetworkSettings
from components.model.config.observability_settings import PROMQL_LOOKBACK_SECONDS, ObservabilitySettings
from components.model.config.resources_settings import ResourceRequirements
from components.model.config.rules import OCI, THIS_PROGRAM, Flag, ProjectId, Rule
from components.model.config.serving_settings import ServingSettings
from components.model.config.tpu_settings import TpuSettings
from components.model.serving.burst import BurstPriority, burst_priority
from components.model.tpu.geometry import TPU_ZONES_DOC, Slice, SliceKind, Topology


class Settings(CapacityChecks, CrossChecks, BurstChecks, Model):
    project: Annotated[ProjectId, Rule(change="project")] = Field(
        description="the project of every Google Cloud resource, the workload pool `<project>.svc.id.goog`"
    )
    zone: Annotated[
        str | None,
        accept_if(ZONE_RE.match, "a zone of the form <region>-<suffix>, such as us-central1-ai1a"),
        Rule(
            "unset (the reservation's zone, read at preview), or a zone, <region>-<suffix> (us-central1-ai1a); the "
            "region is the zone without its suffix; unset needs a SPECIFIC reservation to read (tpu.cubes > 0)",
            f"https://cloud.google.com/compute/docs/regions-zones; {TPU_ZONES_DOC}",
            "cluster-replace",
            "uscentral1",
            "europe-west4-a",
        ),
    ] = Field(
        None,
        description="the TPU pools' node location; the region (cluster, subnets, policy) is the zone minus its last "
        "part; unset: the zone of tpu.reservation.name, looked for at preview among the zones offering the machine "
        "type (a running stack keeps its pools' zone)",
    )
    network: NetworkSettings = Field(default_factory=dict)
    cluster: ClusterSettings = Field(default_factory=dict)
    tpu: TpuSettings = Field(default_factory=dict)
    addons: AddonsSettings = Field(default_factory=dict)
    kueue: Annotated[KueueSettings, Rule(change="kueue-objects")] = Field(default_factory=dict)
    demos: DemosSettings = Field(default_factory=dict)
    serving: Annotated[ServingSettings, Rule(change="serving-pods")] = Field(default_factory=dict)
    observability: Annotated[ObservabilitySettings, Rule(change="observability")] = Field(default_factory=dict)
    require_image_digests: Annotated[
        Flag,
        Rule(
            "true or false; true refuses, at preview, every image the stack runs (serving.image, "
            "serving.routingSidecar.image, serving.weightsDownload.image, demos.image) that has no @sha256 digest",
            f"{THIS_PROGRAM}; {OCI}",
            "image-digests",
            accepted=True,
            context={
                "serving": {
                    "image": f"{VLLM_TPU.image}@sha256:{'0' * 64}",
                    "routingSidecar": {"image": f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0@sha256:{'0' * 64}"},
                }
            },
        ),
    ] = Field(False, description="refuse an image without a digest (staging and prod set it; others get a warning)")
    hf_token: Annotated[
        SecretStr | None,
        Rule(
            "a Pulumi secret (`pulumi config set --secret hfToken <token>`): plain text is refused; unset or empty "
            "= weights preloaded, no Secret",
            "https://www.pulumi.com/docs/iac/concepts/secrets/",
            "secret",
            "hf_" + "x" * 34,  # the shape of a Hugging Face token (never a real one)
            "",
        ),
    ] = Field(
        None,
        description="the Hugging Face token (a Secret and `HF_TOKEN` of the serving pods and the download Job); "
        "unset or empty for a public model or preloaded weights",
    )

    @field_validator("hf_token")
    @classmethod
    def _empty_token_is_none(cls, v: SecretStr | None) -> SecretStr | None:
        # An empty token means "weights are preloaded": no Secret, no HF_TOKEN env.
        return v if v is not None and v.get_secret_value() else None

    def images(self) -> dict[str, str]:
        """Config key -> reference of every image the stack runs (the program's defaults: model/config/images.py)."""
        out: dict[str, str] = {}
        if self.serving.enabled:
            out["serving.image"] = self.serving.image
            out["serving.routingSidecar.image"] = self.serving.routing_sidecar_image
            if self.serving.weights_download.enabled:
                out["serving.weightsDownload.image"] = self.serving.weights_download.image
        if any(demo.enabled for demo in self.demos.jobsets().values()):
            out["demos.image"] = self.demos.image
        return out

    def system_pool_pods(self) -> dict[str, ResourceRequirements]:
        """Config key -> resources of every controller pod this program places on the system pool."""
        pods: dict[str, ResourceRequirements] = {
            f"addons.{key}.controllerResources": addon.rendered_resources()
            for key, addon in self.addons.helm_addons().items()
        }
        if self.serving.enabled:
            # The gateway-mode chart runs no proxy of its own: the GKE Gateway's load balancer is the proxy.
            pods["serving.router.eppResources"] = self.serving.router.rendered_epp_resources()
        return pods

    # Each cross-check with the top-level keys it reads: when some other key is invalid, the checks that do
    # not read it still run, so every independent problem is in the one error.
    CROSS_CHECKS: ClassVar[tuple[tuple[frozenset[str], str], ...]] = (
        (frozenset({"cluster", "addons", "serving"}), "_check_system_pool_fit"),
        (frozenset({"network", "cluster", "tpu", "serving"}), "_check_subnet_fit"),
        (frozenset({"tpu", "project"}), "_check_reservation_project"),
        (frozenset({"zone", "tpu"}), "_check_zone_source"),
        (frozenset({"kueue", "tpu", "demos", "serving"}), "_check_workloads"),
        (frozenset({"tpu", "serving"}), "_check_serving"),
        (frozenset({"tpu", "demos"}), "_check_demos"),
        (frozenset({"kueue", "addons"}), "_check_workload_namespace"),
        (frozenset({"project", "cluster", "serving"}), "_check_buckets"),
        (frozenset({"cluster", "tpu", "demos", "serving", "addons"}), "_check_version_floor"),
        (frozenset({"addons", "serving"}), "_check_addon_versions"),
        (frozenset({"kueue", "tpu", "demos", "serving"}), "_check_burst_bounds"),
        (frozenset({"serving", "addons", "observability"}), "_check_burst_needs"),
        (frozenset({"demos", "serving", "require_image_digests"}), "_check_image_digests"),
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
            floor = (MIN_SUBSLICING_VERSION, why)
        else:
            floor = (MIN_SLICE_CONTROLLER_VERSION, f"GKE's floor for dynamic slicing ({DYNAMIC_SLICING_DOC})")
        tested = tested_sets.matching_set(tested_sets.versions_of(self))
        if tested is not None and gke_version_tuple(tested.gke_minimum) > gke_version_tuple(floor[0]):
            return (
                tested.gke_minimum,
                f"the floor of the add-on versions of tested set {tested.name} (docs/upgrades.md)",
            )
        return floor

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
        exclusion = self.cluster.maintenance_exclusion
        past = exclusion and exclusion.past_support(self.cluster.version_spec.minor)
        if past:
            out.append(past)  # 'default' is checked at preview, once resolved (components/preflight.py)
        if not self.require_image_digests:  # else _check_image_digests refuses them
            unpinned = {k: ref for k, ref in self.images().items() if not parts(ref)[2]}
            out += [f"{PROJECT}:{key} = {ref}: {digest_advice(ref)}" for key, ref in unpinned.items()]
        untested = tested_sets.untested_warning(tested_sets.versions_of(self), f"{PROJECT}:")
        if untested:
            out.append(untested)
        o = self.observability
        if o.enabled and not o.scraping and (o.dashboard or o.alerts):
            out.append(
                f"{PROJECT}:observability.scraping = false: the dashboard's Kueue, vLLM and router charts and every "
                "alert read scraped metrics, so they will show no data (only the TPU system metrics remain)"
            )
        if o.scrapes and o.has_alerts and o.scrape_interval_seconds > PROMQL_LOOKBACK_SECONDS:
            out.append(
                f"{PROJECT}:observability.scrapeInterval = {o.scrape_interval}: longer than the 5 minutes PromQL looks "
                "back for a sample, so the alerts' series come and go between scrapes and the alerts miss what they "
                "watch; 5m or less keeps them whole"
            )
        return out

    # Derived values -------------------------------------------------------------------------

    @property
    def region(self) -> str:
        """The zone's region; the zone is set, or placed from the reservation (components/placement.py)."""
        if self.zone is None:
            raise ValueError(f"{PROJECT}:zone is not placed yet: read it from the reservation first (placement.place)")
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
        return node_service_account_id(self.cluster.name)

    @property
    def reservation_project(self) -> str:
        return self.tpu.reservation.project or self.project

    def workload_topologies(self) -> dict[str, tuple[str, str]]:
        """Config key -> (topology, priority) of every enabled slice consumer."""
        out: dict[str, tuple[str, str]] = {}
        for key, demo in self.demos.jobsets().items():
            if demo.enabled:
                out[f"demos.{key}"] = (demo.topology, demo.priority)
        if self.serving.enabled:
            for role, spec in self.serving.roles().items():
                out[f"serving.{role}"] = (spec.topology, spec.priority)
        return out

    def tpu_quota(self) -> int:
        """The ClusterQueue's TPU quota: kueue.tpuQuota, else every chip the TPU node pools provide."""
        return self.kueue.tpu_quota if self.kueue.tpu_quota is not None else self.tpu.chips

    def burst_slots(self) -> dict[str, int]:
        """Role -> burst slots (`maxGroups - replicas`) of every serving role with autoscaling on."""
        if not self.serving.enabled:
            return {}
        return {role: n for role, spec in self.serving.roles().items() if (n := burst_slots(spec))}

    def burst_priority(self) -> BurstPriority | None:
        """The burst slots' WorkloadPriorityClass, derived from kueue.priorities and every floor's (none without
        slots); raises components.model.serving.burst.BurstPriorityError when no value fits between."""
        if not self.burst_slots():
            return None
        return burst_priority(self.kueue.priorities, [spec.priority for spec in self.serving.roles().values()])

    def slice_of(self, topology: str) -> Slice:
        return self.tpu.cube.classify(Topology.parse(topology))

    def serving_slice(self, role: str) -> Slice:
        return self.slice_of(self.serving.roles()[role].topology)

    def lws_name(self, role: str) -> str:
        return self.serving.roles()[role].name or f"kueue-vllm-{role}-model-streamer"

    @property
    def model_label(self) -> str:
        return self.serving.model.rsplit("/", 1)[-1]
