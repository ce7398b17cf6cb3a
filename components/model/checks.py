"""Shared pieces of the settings model: the base model, errors, name and quantity checks, machine sizes.

No Pulumi here: the planner and the command-line entry points use it too.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
)
from pydantic.alias_generators import to_camel

from components.model import geometry
from components.model.geometry import Topology

PROJECT = "gke-tpu-slicing"

# The first GKE release with the TPU slice controller (super-slicing, Rapid channel), per
# https://cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing ("Requirements")
MIN_SLICE_CONTROLLER_VERSION = "1.35.2-gke.1842000"
# ... and for sub-slices (topologies smaller than 4x4x4), per the same page. The default cluster version;
# an older one is a warning, not an error (the codelab's 1.36.0-gke.2459000 predates it and works).
MIN_SUBSLICING_VERSION = "1.36.0-gke.3712000"
_GKE_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")
# GCE resource names (RFC 1035); GKE cluster names are limited to 40 characters, node pools to 40.
_GCE_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Kubernetes object names that become DNS labels (namespaces, services, LWS).
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
ZONE_RE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-(?P<suffix>[a-z0-9]+)$")
CHART_VERSION_RE = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
# A value a stack file leaves for its owner to fill in, e.g. "<REPLACE-ME: the staging project ID>".
# The program refuses to run while one is left anywhere in the configuration (docs/stacks.md, "Placeholders").
PLACEHOLDER_RE = re.compile(r"<REPLACE-ME\b[^>]*>")
QUANTITY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|Ei|M|G|T|P|E)?$")

# Limits that bite after `pulumi up` if not checked here.
LWS_NAME_MAX = 39  # llm-d: LWS names under Kueue (they feed slice and pod names)
# A serving LWS is named <serving.<role>.name>-<revision>: this many hex digits of its pod shape's hash
# (components/model/rollout.py), so the configured name gets LWS_NAME_MAX - 1 - LWS_REVISION_LEN.
LWS_REVISION_LEN = 5
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


def gce_name(value: str, max_len: int, what: str) -> str:
    if len(value) > max_len or not _GCE_NAME_RE.match(value):
        raise ValueError(
            f"{what}: lowercase letters, digits and hyphens, starting with a letter, at most {max_len} characters"
        )
    return value


# Cloud Storage bucket names (https://cloud.google.com/storage/docs/buckets#naming): lowercase letters, digits,
# `-`, `_` and `.`, starting and ending with a letter or digit; 3-63 characters, or up to 222 with dots where each
# dot-separated part stops at 63; not an IP address in dotted-decimal; not starting with "goog"; not containing
# "google" or a close misspelling (the API may refuse more misspellings than the digit look-alikes checked here).
_BUCKET_RE = re.compile(r"^[a-z0-9][-a-z0-9_.]*[a-z0-9]$")
_GOOGLE_RE = re.compile(r"g[o0][o0]g[l1]e")
BUCKET_RULES = (
    "a Cloud Storage bucket name without gs://: 3-63 lowercase letters, digits, '-', '_' or '.' (up to 222 with "
    "dots, at most 63 between two), starting and ending with a letter or digit, not an IP address, not starting "
    'with "goog", not containing "google" (https://cloud.google.com/storage/docs/buckets#naming)'
)


def bucket_name(value: str) -> str:
    if value.startswith("gs://"):
        raise ValueError(f"the bucket's name alone, {value.removeprefix('gs://').split('/', 1)[0]!r}: {BUCKET_RULES}")
    parts = value.split(".")
    long_ok = len(value) <= (222 if len(parts) > 1 else 63) and all(len(p) <= 63 for p in parts)
    if (
        len(value) < 3
        or not long_ok
        or not _BUCKET_RE.match(value)
        or re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", value)
        or value.startswith("goog")
        or _GOOGLE_RE.search(value)
    ):
        raise ValueError(BUCKET_RULES)
    return value


# Compute Engine names in request paths (reservations, blocks, sub-blocks): "Name should conform to RFC1035
# or be a resource ID" (Compute API reference, reservationBlocks.get / reservationSubBlocks.get path
# parameters); RFC1035 names are 1-63 characters, `[a-z]([-a-z0-9]*[a-z0-9])?` (the same reference, `name`).
# A resource ID is the unsigned 64-bit number the API assigns (`id`, "string (uint64 format)").
_RESOURCE_ID_RE = re.compile(r"^[0-9]{1,20}$")


def compute_name(value: str, what: str) -> str:
    if _RESOURCE_ID_RE.match(value) and int(value) < 2**64:
        return value
    if len(value) > 63 or not _GCE_NAME_RE.match(value):
        raise ValueError(
            f"{what}: 1-63 lowercase letters, digits and hyphens, starting with a letter and not ending with a "
            "hyphen (RFC 1035), or a numeric resource ID"
        )
    return value


def dns_label(value: str, max_len: int = 63) -> str:
    if len(value) > max_len or not _DNS_LABEL_RE.match(value):
        raise ValueError(f"a DNS label: lowercase letters, digits and hyphens, at most {max_len} characters")
    return value


def cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ValueError("an IPv4 CIDR block with no host bits set, such as 10.10.0.0/18") from None
    if net.version != 4:
        raise ValueError("an IPv4 CIDR block")
    return str(net)


def parse_topology(value: str) -> str:
    try:
        return str(Topology.parse(value))
    except geometry.GeometryError as err:
        raise ValueError(str(err)) from None


def gke_version_tuple(version: str) -> tuple[int, int, int, int]:
    m = _GKE_VERSION_RE.match(version)
    if not m:
        raise ValueError(f"{version!r} is not a GKE version such as 1.36.0-gke.2459000")
    return tuple(int(g) for g in m.groups())  # type: ignore[return-value]


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
