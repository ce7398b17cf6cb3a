"""The rules of the gke-tpu-slicing policy pack, one mandatory policy each.

Validators see resource inputs the way the engine sends them: camelCase property names (the
program's `node_config.machine_type` arrives as `nodeConfig.machineType`). A value the engine does
not know yet during a preview raises pulumi_policy's UnknownValueError on access; the SDK reports
that as "can't run policy during preview" and the policy runs for real during `pulumi up`.

Secret values reach validators unwrapped (pulumi_policy's Analyze deserializes them as plain values),
so secrecy is checked through what the engine does pass: the resource's additional secret outputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

# Raised by the props proxy on a value unknown during preview (the module documents it; not re-exported).
from pulumi_policy.proxy import UnknownValueError

PACK_NAME = "gke-tpu-slicing"

NETWORK = "gcp:compute/network:Network"
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
RESOURCE_POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
K8S_SECRET = "kubernetes:core/v1:Secret"
K8S_PROVIDER = "pulumi:providers:kubernetes"

# TPU7x data-center networking: jumbo frames (the codelab's `--mtu=8896`).
TPU_MTU = 8896
# GKE's reservation affinity for one named reservation (or one block of it).
SPECIFIC = "SPECIFIC_RESERVATION"
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
# The Compute Engine default service account (Editor on the project), or "default", which GKE reads as it.
DEFAULT_COMPUTE_SA = re.compile(r"^(default|\d+-compute@developer\.gserviceaccount\.com)$")
PROTECTED_STACKS = ["staging", "prod"]
HF_SECRET = "llm-d-hf-token"
HF_ENV = "HF_TOKEN"
SECRET_FIELDS = ("data", "stringData")


def current_stack() -> str:
    """The stack under analysis: the engine passes it to the pack, which configures the Pulumi runtime with it."""
    return pulumi.get_stack()


def _config(args: ResourceValidationArgs, key: str, default: Any) -> Any:
    value = args.get_config().get(key)
    return default if value is None else value


def _dig(props: Mapping[str, Any], *path: str) -> Any:
    """props[path[0]][path[1]]...; None where a level is absent."""
    value: Any = props
    for key in path:
        if not isinstance(value, Mapping) or key not in list(value):
            return None
        value = value[key]
    return value


def _is_tpu_pool(props: Mapping[str, Any]) -> bool:
    return str(_dig(props, "nodeConfig", "machineType") or "").startswith("tpu")


def tpu_network_mtu(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NETWORK:
        return
    want = _config(args, "mtu", TPU_MTU)
    mtu = args.props.get("mtu")
    # Absent = GCP's default of 1460.
    if mtu is None or int(mtu) != want:
        report(f"network MTU is {mtu if mtu is not None else 'unset (1460)'}; TPU networks use {want}")


def tpu_pool_specific_reservation(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NODE_POOL or not _is_tpu_pool(args.props):
        return
    affinity = _dig(args.props, "nodeConfig", "reservationAffinity") or {}
    kind = affinity.get("consumeReservationType")
    if kind != SPECIFIC:
        report(f"TPU node pool consumes reservation type {kind!r}; it must be {SPECIFIC} (one named reservation)")
        return
    if affinity.get("key") != RESERVATION_KEY or not affinity.get("values"):
        report(f"TPU node pool's {SPECIFIC} affinity must name the reservation: key {RESERVATION_KEY}, values [...]")


def tpu_pool_workload_policy(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NODE_POOL or not _is_tpu_pool(args.props):
        return
    if not _dig(args.props, "placementPolicy", "policyName"):
        report("TPU node pool has no placementPolicy.policyName: it must be placed by the workload policy")


def _node_configs(args: ResourceValidationArgs) -> list[tuple[str, Any]]:
    """(where, nodeConfig) of every node pool the resource declares."""
    if args.resource_type == NODE_POOL:
        return [("nodeConfig", args.props.get("nodeConfig"))]
    if args.resource_type == CLUSTER:
        # The cluster's own nodeConfig is its default pool's. GKE creates that pool even when the provider
        # removes it right after (remove_default_node_pool), and without a nodeConfig its nodes run as the
        # Compute Engine default account, or fail to start where that account is disabled: it counts too.
        found = [("nodeConfig", args.props.get("nodeConfig"))]
        for i, pool in enumerate(args.props.get("nodePools") or []):
            found.append((f"nodePools[{i}].nodeConfig", pool.get("nodeConfig")))
        return found
    return []


def no_default_service_account(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for where, node_config in _node_configs(args):
        account = (node_config or {}).get("serviceAccount")
        if not account:
            report(f"{where}.serviceAccount is unset: nodes would run as the Compute Engine default service account")
        elif DEFAULT_COMPUTE_SA.match(str(account)):
            report(f"{where}.serviceAccount is the Compute Engine default service account ({account})")


def _protected_stack(args: ResourceValidationArgs) -> str | None:
    """The stack's name when the policy's `protectedStacks` lists it."""
    stack = current_stack()
    return stack if stack in _config(args, "protectedStacks", PROTECTED_STACKS) else None


def protected_cluster_deletion_protection(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != CLUSTER or not (stack := _protected_stack(args)):
        return
    if args.props.get("deletionProtection") is not True:
        report(f"stack {stack!r} is protected: its cluster needs deletionProtection: true")


def protected_capacity_pulumi_protect(args: ResourceValidationArgs, report: ReportViolation) -> None:
    # What a mistaken `pulumi up` or `destroy` must not delete: the cluster, its node pools and the
    # workload policy the TPU pools are placed by.
    if args.resource_type not in (CLUSTER, NODE_POOL, RESOURCE_POLICY) or not (stack := _protected_stack(args)):
        return
    if not args.opts.protect:
        kind = args.resource_type.rsplit(":", 1)[-1]
        report(f"stack {stack!r} is protected: this {kind} needs the `protect` resource option")


def hf_token_secret_encrypted(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != K8S_SECRET or _dig(args.props, "metadata", "name") != _config(
        args, "hfTokenSecret", HF_SECRET
    ):
        return
    # The typed Secret resource marks both fields secret, so the token is encrypted in state and masked
    # in diffs; a Secret declared as a generic object does not.
    missing = [f for f in SECRET_FIELDS if f not in (args.opts.additional_secret_outputs or [])]
    if missing:
        report(f"the HF token Secret does not mark {', '.join(missing)} as secret outputs")


def _known(value: Mapping[str, Any] | Sequence[Any], key: Any) -> Any:
    """value[key], or None when absent or unknown during preview (an unknown value is no literal token)."""
    try:
        return value[key]
    except (KeyError, IndexError, UnknownValueError):
        return None


def _literal_env(value: Any, name: str) -> bool:
    """True when some env list in `value` sets `name` with a literal `value` instead of a secret reference."""
    if isinstance(value, Mapping):
        if "value" in list(value) and _known(value, "name") == name:
            return True
        return any(_literal_env(_known(value, k), name) for k in list(value))
    if isinstance(value, Sequence) and not isinstance(value, str):
        return any(_literal_env(_known(value, i), name) for i in range(len(value)))
    return False


def hf_token_from_secret_ref(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type.startswith("kubernetes:") and _literal_env(args.props, HF_ENV):
        report(f"{HF_ENV} is set as a literal env value; it must come from the Secret (valueFrom.secretKeyRef)")


def kubernetes_explicit_provider(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if not args.resource_type.startswith("kubernetes:"):
        return
    provider = args.provider
    # Default providers are named "default" or "default_<version>" and use the ambient kubeconfig.
    if provider is None or provider.resource_type != K8S_PROVIDER or provider.name.startswith("default"):
        name = "none" if provider is None else f"{provider.resource_type}::{provider.name}"
        report(f"Kubernetes resource uses provider {name}; it must use the cluster's explicit provider")


def _policy(
    name: str, description: str, validate: Any, config: dict[str, Any] | None = None
) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PolicyConfigSchema(properties=config) if config else None,
    )


POLICIES = [
    _policy(
        "tpu-network-mtu",
        f"VPC networks carry TPU traffic and use MTU {TPU_MTU}.",
        tpu_network_mtu,
        {"mtu": {"type": "integer", "default": TPU_MTU}},
    ),
    _policy(
        "tpu-node-pool-specific-reservation",
        "Every TPU node pool consumes one named reservation (SPECIFIC_RESERVATION with its name).",
        tpu_pool_specific_reservation,
    ),
    _policy(
        "tpu-node-pool-workload-policy",
        "Every TPU node pool is placed by the workload policy (placementPolicy.policyName).",
        tpu_pool_workload_policy,
    ),
    _policy(
        "node-pool-not-default-service-account",
        "No node pool runs as the Compute Engine default service account.",
        no_default_service_account,
    ),
    _policy(
        "protected-stack-cluster-deletion-protection",
        "Clusters of protected stacks (policy config protectedStacks) have deletion protection on.",
        protected_cluster_deletion_protection,
        {"protectedStacks": {"type": "array", "items": {"type": "string"}, "default": PROTECTED_STACKS}},
    ),
    _policy(
        "protected-stack-pulumi-protect",
        "In protected stacks, the cluster, its node pools and the workload policy carry Pulumi's `protect` option.",
        protected_capacity_pulumi_protect,
        {"protectedStacks": {"type": "array", "items": {"type": "string"}, "default": PROTECTED_STACKS}},
    ),
    _policy(
        "hf-token-secret-encrypted",
        "The HF token Secret marks data and stringData as secrets (encrypted in state, masked in diffs).",
        hf_token_secret_encrypted,
        {"hfTokenSecret": {"type": "string", "default": HF_SECRET}},
    ),
    _policy(
        "hf-token-from-secret-ref",
        f"Workloads read {HF_ENV} from the Secret, never as a literal env value.",
        hf_token_from_secret_ref,
    ),
    _policy(
        "kubernetes-explicit-provider",
        "Every Kubernetes resource goes through the explicit provider built from the cluster, never a default one.",
        kubernetes_explicit_provider,
    ),
]
