"""Elastic serving's burst slots: per serving role with autoscaling, `maxGroups - replicas` LeaderWorkerSets of at
most one group each, built like the role's floor, each turned on and off by a KEDA ScaledObject of its own (the
model and its sources: components/model/serving/burst.py; the queries: components/model/observability/
burst_signals.py; KEDA's objects: components/model/addons/keda.py).

* A slot is the floor's LeaderWorkerSet with another name, the burst priority and the `burst-slot` pod label:
  the router's InferencePool, the leaders' scrape and the workload namespace's NetworkPolicies select pods by the
  labels both carry (components/vllm_leaderworkersets.py `leader_selector`, components/network_policies.py).
* Its name carries the floor's revision (`burst.slot_names`), its resource name does not: a change that rolls the
  floor to a new set replaces every slot, the new one created first (at 0 groups) and the old one deleted at the
  end of the update. The new slot's query reads the old one's leader (the same `burst-slot` value), so KEDA turns
  it on at its first poll while the old one serves.
* KEDA's operator owns `spec.replicas` (it writes `/scale`): Pulumi writes 0 on a create or replacement and ignores
  the field afterwards (components/model/addons/keda.py SCALED_FIELD), so a second run leaves a slot KEDA turned on
  as it is.
* `pulumi destroy` deletes each ScaledObject before its slot (it depends on the slot) and before KEDA (it depends
  on KEDA's `ready`), and every slot before the burst WorkloadPriorityClass and the LocalQueue its labels name.
"""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from components.component import Component
from components.kubernetes_object import KubernetesObject
from components.model.addons.keda import SCALED_FIELD, prometheus_scaled_object, trigger_authentication
from components.model.keys import BURST_SLOT_LABEL
from components.model.serving.burst import slot_names
from components.vllm_containers import ROLES, ModelServerArgs
from components.vllm_leaderworkersets import ServingRoleArgs, delete_timeouts, leader_worker_set, lws_revision

# The TriggerAuthentication every slot's trigger names: KEDA's operator's own Workload Identity.
TRIGGER_AUTHENTICATION = "managed-prometheus"
_TEMPLATES = ("leaderTemplate", "workerTemplate")


class BurstRoleArgs(TypedDict):
    floor: ServingRoleArgs
    """The role's floor LeaderWorkerSet: each slot is built like it and named after its revision."""
    queries: list[str]
    """Each slot's KEDA query, 1 while the slot should run (slot 1 first)."""


class BurstSlotsArgs(TypedDict):
    project: str
    """The project whose Managed Prometheus the slots' queries read."""
    namespace: pulumi.Input[str]
    """The workload namespace, the floors'."""
    model_server: ModelServerArgs
    """The vLLM pods' model, image, flags and budgets, the floors'."""
    roles: dict[str, BurstRoleArgs]
    """The roles with burst slots."""
    priority: str
    """The slots' WorkloadPriorityClass: below every floor, above what runs below the floors."""
    queue_labels: dict[str, pulumi.Input[str]]
    """The labels that queue a slot: the LocalQueue and the burst priority class, by Output."""
    polling_seconds: int
    """KEDA's pollingInterval of every slot."""
    cooldown_seconds: int
    """KEDA's cooldownPeriod of every slot: how long a slot no longer wanted keeps running."""
    service_account: pulumi.Input[str]
    """The serving pods' Kubernetes service account (Workload Identity on the buckets)."""
    hf_secret: NotRequired[pulumi.Input[str]]
    """The Hugging Face token Secret's name; none: no token."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    model_servers_wait_for: list[Any]
    """What every slot waits for, as the floors do: the LWS controller, the Kueue objects, the TPU pools and their
    teardown gates, the buckets' IAM (of this program's own types, which a schema cannot name)."""
    keda_ready: list[Any]
    """What the ScaledObjects and the TriggerAuthentication wait for: KEDA's chart and its operator's access to
    Managed Prometheus (components/keda.py `Keda.ready`)."""


def slot_leader_worker_set(
    model: ModelServerArgs,
    role: str,
    floor: ServingRoleArgs,
    *,
    name: str,
    slot: int,
    priority: str,
    queue_labels: dict[str, pulumi.Input[str]],
    namespace: pulumi.Input[str],
    service_account: pulumi.Input[str],
    hf_secret: pulumi.Input[str] | None,
) -> dict[str, Any]:
    """Slot `slot` of `role`: the floor's LeaderWorkerSet at 0 groups, the burst priority and the slot's label."""
    spec = ServingRoleArgs(**{**floor, "replicas": 0, "priority": priority, "queue_labels": queue_labels})
    manifest = leader_worker_set(
        model, ROLES[role], spec, namespace=namespace, service_account=service_account, hf_secret=hf_secret
    )
    manifest["metadata"]["name"] = name
    manifest["metadata"]["labels"][BURST_SLOT_LABEL] = str(slot)
    for template in _TEMPLATES:  # outside Kueue's pod shape: labels
        manifest["spec"]["leaderWorkerTemplate"][template]["metadata"]["labels"][BURST_SLOT_LABEL] = str(slot)
    return manifest


class BurstSlots(Component):
    """The burst slots of every role with autoscaling, their ScaledObjects and the TriggerAuthentication."""

    def __init__(self, name: str, args: BurstSlotsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:serving:BurstSlots", name, opts)
        provider, model, namespace = args["provider"], args["model_server"], args["namespace"]
        keda = self.child(provider=provider, depends_on=args["keda_ready"])
        self.trigger_authentication = KubernetesObject(
            f"{name}-trigger-authentication", trigger_authentication(TRIGGER_AUTHENTICATION, namespace), keda
        )
        self.slots: dict[str, list[KubernetesObject]] = {}
        self.scaled_objects: dict[str, list[KubernetesObject]] = {}
        for role, spec in args["roles"].items():
            floor = spec["floor"]
            names = slot_names(floor["name"], lws_revision(model, role, floor), len(spec["queries"]), args["priority"])
            self.slots[role], self.scaled_objects[role] = [], []
            for slot, (lws_name, query) in enumerate(zip(names, spec["queries"], strict=True), start=1):
                manifest = slot_leader_worker_set(
                    model,
                    role,
                    floor,
                    name=lws_name,
                    slot=slot,
                    priority=args["priority"],
                    queue_labels=args["queue_labels"],
                    namespace=namespace,
                    service_account=args["service_account"],
                    hf_secret=args.get("hf_secret"),
                )
                lws = KubernetesObject(
                    f"{name}-{role}-{slot}",
                    manifest,
                    self.child(
                        provider=provider,
                        depends_on=args["model_servers_wait_for"],
                        ignore_changes=[SCALED_FIELD],
                        custom_timeouts=delete_timeouts(model["termination_grace_period_seconds"]),
                    ),
                )
                scaled = prometheus_scaled_object(
                    lws_name,
                    namespace,
                    target=lws_name,
                    project=args["project"],
                    query=query,
                    activation_threshold=0,
                    cooldown_seconds=args["cooldown_seconds"],
                    authentication=TRIGGER_AUTHENTICATION,
                    polling_interval_seconds=args["polling_seconds"],
                )
                after = pulumi.ResourceOptions(depends_on=[lws, self.trigger_authentication])
                self.slots[role].append(lws)
                self.scaled_objects[role].append(
                    KubernetesObject(f"{name}-{role}-{slot}-scaler", scaled, pulumi.ResourceOptions.merge(keda, after))
                )
        self.register_outputs({role: [lws.object_name for lws in slots] for role, slots in self.slots.items()})
