"""The cross-key checks of the stack settings: problems between keys, each read by the root model's
CROSS_CHECKS table (components/model/config/root_settings.py) with the top-level keys it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from components.model.addons import tested_sets
from components.model.config.checks import (
    DNS_LABEL_MAX,
    GIB,
    LABEL_VALUE_MAX,
    LABEL_VALUE_RE,
    LWS_NAME_MAX,
    LWS_REVISION_LEN,
    SLICE_NAME_MAX,
    SettingError,
    bucket_name,
    cpu_millis,
    gke_version_tuple,
    memory_bytes,
    node_allocatable_of,
)
from components.model.config.images import digest_advice, parts
from components.model.config.k8s_settings import DEMO_REPLICATED_JOB, longest_pod_name
from components.model.config.resources_settings import ResourceAmounts
from components.model.config.rules import LWS_ROOM
from components.model.tpu import geometry
from components.model.tpu.geometry import Topology

if TYPE_CHECKING:
    from components.model.config.root_settings import Settings


class CrossChecks:
    """The `_check_*` methods of `Settings` (a mixin: they read the settings' sections)."""

    def _check_reservation_project(self: Settings) -> list[SettingError]:
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

    def _check_zone_source(self: Settings) -> list[SettingError]:
        """An unset zone is read from a SPECIFIC reservation's cubes: without one there is nothing to read."""
        tpu = self.tpu
        readable = tpu.cubes > 0 and tpu.reservation.consume_type == "SPECIFIC"
        if self.zone is not None or (readable and tpu.system.zones):
            return []
        why = "tpu.cubes = 0" if tpu.cubes == 0 else f"tpu.reservation.consumeType = {tpu.reservation.consume_type}"
        if readable:
            why = f"no zone known to offer {tpu.machine_type}"
        zones = ", ".join(tpu.system.zones) or "see the TPU regions and zones page"
        return [
            SettingError(
                "zone",
                None,
                f"a zone ({zones} offer {tpu.machine_type}): with {why} there is no reservation to read it from",
            )
        ]

    def _check_buckets(self: Settings) -> list[SettingError]:
        # serving.weightsBucket and xlaCacheBucket themselves are checked in ServingSettings; this is the name
        # derived from the project and the cluster.
        if not self.serving.enabled or self.serving.xla_cache_bucket is not None:
            return []
        try:
            bucket_name(self.xla_cache_bucket)
        except ValueError as err:  # never for a hash, but the rule is the API's, not ours
            return [SettingError("serving.xlaCacheBucket", self.xla_cache_bucket, str(err))]
        return []

    def _check_workloads(self: Settings) -> list[SettingError]:
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

    def _check_serving(self: Settings) -> list[SettingError]:
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
            if len(name) > LWS_ROOM:
                errors.append(
                    SettingError(
                        f"serving.{role}.name",
                        name,
                        f"at most {LWS_ROOM} characters: the LeaderWorkerSet is named <name>-<{LWS_REVISION_LEN}-digit "
                        f"revision of its pod shape>, and Kueue's LeaderWorkerSet integration bounds LWS names to "
                        f"{LWS_NAME_MAX}, because they feed pod and slice names (GKE slice names stop at "
                        f"{SLICE_NAME_MAX})",
                    )
                )
            errors += self._check_tpu_vm_fit(f"serving.{role}.resources", spec.resources, role == "decode")
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

    def _check_tpu_vm_fit(self: Settings, key: str, amounts: ResourceAmounts, sidecar: bool) -> list[SettingError]:
        """A vLLM pod (requests = limits), decode's with its routing sidecar, asks for at most what one TPU VM offers
        to pods (a native sidecar's requests add to the other containers')."""
        system = self.tpu.system
        if system.vcpus is None or system.memory_gib is None:
            return []
        cpu, mem = node_allocatable_of(system.vcpus, system.memory_gib)
        less = ""
        if sidecar:
            extra = self.serving.routing_sidecar.resources.requests
            cpu -= cpu_millis(extra.cpu) if extra.cpu else 0
            mem -= memory_bytes(extra.memory) if extra.memory else 0
            less = ", less the routing sidecar's requests (serving.routingSidecar.resources.requests)"
        errors = []
        if amounts.cpu is not None and cpu_millis(amounts.cpu) > cpu:
            errors.append(
                SettingError(
                    f"{key}.cpu",
                    amounts.cpu,
                    f"at most {cpu / 1000:g} CPUs, what one {self.tpu.machine_type} VM ({system.vcpus} vCPUs) "
                    f"offers to pods after GKE's reservation{less}; a larger request never schedules",
                )
            )
        if amounts.memory is not None and memory_bytes(amounts.memory) > mem:
            errors.append(
                SettingError(
                    f"{key}.memory",
                    amounts.memory,
                    f"at most {mem // 2**20}Mi ({mem / GIB:.1f}Gi), what one {self.tpu.machine_type} VM "
                    f"({system.memory_gib:g} GiB) offers to pods after GKE's reservation and eviction threshold{less}",
                )
            )
        return errors

    def _check_image_digests(self: Settings) -> list[SettingError]:
        """With requireImageDigests, every image the stack runs names its content by digest."""
        if not self.require_image_digests:
            return []
        return [
            SettingError(key, ref, f"a reference with its digest (requireImageDigests is true): {digest_advice(ref)}")
            for key, ref in self.images().items()
            if not parts(ref)[2]
        ]

    def _check_demos(self: Settings) -> list[SettingError]:
        """JobSet's webhook refuses a JobSet whose longest pod name is not a DNS-1035 label (longest_pod_name)."""
        errors = []
        for key, demo in self.demos.jobsets().items():
            try:
                pods = self.slice_of(demo.topology).vms if demo.enabled else 0
            except geometry.GeometryError:  # _check_workloads names the topology
                continue
            pod = longest_pod_name(demo.name, demo.replicas, pods)
            if pods and len(pod) > DNS_LABEL_MAX:
                errors.append(
                    SettingError(
                        f"demos.{key}.name",
                        demo.name,
                        f"at most {DNS_LABEL_MAX - (len(pod) - len(demo.name))} characters here: JobSet names its "
                        f"pods <name>-{DEMO_REPLICATED_JOB}-<job index>-<pod index>-<5 characters> ({pod!r} would "
                        f"be {len(pod)}), and a pod name is a DNS-1035 label of at most {DNS_LABEL_MAX}",
                    )
                )
        return errors

    def _check_workload_namespace(self: Settings) -> list[SettingError]:
        """Kueue's webhooks fail closed in exactly this namespace (components/model/addons/kueue_config.py sets it as
        managedJobsNamespaceSelector, and the chart gives the pod webhook that selector with `failurePolicy: Fail`:
        kubernetes-sigs/kueue v0.17.4 charts/kueue/templates/webhook/manifests.yaml mpod.kb.io). Kueue's own default
        leaves kube-system and its own namespace out for that reason (apis/config/v1beta2/defaults.go): in an
        add-on's namespace no controller pod could start while Kueue is down (Kueue's own, never), and `kube-` is
        Kubernetes' own prefix (kubernetes.io/docs/concepts/overview/working-with-objects/namespaces, "Avoid
        creating namespaces with the prefix kube-"). The program also creates this namespace itself."""
        namespace = self.kueue.namespace
        taken = [f"addons.{key}.namespace" for key, a in self.addons.helm_addons().items() if a.namespace == namespace]
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

    def _check_version_floor(self: Settings) -> list[SettingError]:
        """A pin or prefix that can never reach the floor is refused here; what a prefix resolves to, at preview."""
        try:
            floor, why = self.version_floor()
        except geometry.GeometryError:
            return []  # the floor depends on which workloads are sub-slices: _check_workloads reports the shape
        newest = self.cluster.version_spec.newest_possible()
        if newest is not None and newest < gke_version_tuple(floor):
            return [SettingError("cluster.version", self.cluster.version, f"{floor} or newer: {why}")]
        return []

    def _check_addon_versions(self: Settings) -> list[SettingError]:
        """A version in a range known to break the program is refused (components/model/addons/tested_sets.py)."""
        versions = tested_sets.versions_of(self)
        return [
            SettingError(
                tested_sets.COLUMNS[column].key, versions[column], f"{known.allowed}: {known.why} ({known.source})"
            )
            for column, known in tested_sets.breaks(versions)
        ]
