"""Shared pieces of the settings model: the base model, errors, name and quantity checks, machine sizes.

No Pulumi here: the planner and the command-line entry points use it too.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from components.model.config.machines import GENERAL_PURPOSE, MACHINE_SERIES, machine_memory_gb
from components.model.tpu import geometry
from components.model.tpu.geometry import Topology

PROJECT = "gke-tpu-slicing"

# The first GKE release with the TPU slice controller (super-slicing, Rapid channel), per
# https://cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing ("Requirements")
MIN_SLICE_CONTROLLER_VERSION = "1.35.2-gke.1842000"
# ... and for sub-slices (topologies smaller than 4x4x4), per the same page. The default cluster version;
# an older one is a warning, not an error (the codelab's 1.36.0-gke.2459000 predates it and works).
MIN_SUBSLICING_VERSION = "1.36.0-gke.3712000"
_GKE_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")
# GCE resource names: RFC 1035, `[a-z]([-a-z0-9]*[a-z0-9])?`, 1-63 characters
# (https://cloud.google.com/compute/docs/naming-resources#resource-name-format).
_GCE_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
GKE_CLUSTER_NAME_MAX = 40
# GKE refuses node pool names over 40 characters (the API's own limit; not in the REST reference, reported in
# https://gitlab.com/thorchain/devops/cluster-launcher/-/merge_requests/67 "limited to 40 symbols by GCP").
NODE_POOL_NAME_MAX = 40
# Project IDs: "6 to 30 characters ... lowercase ASCII letters, digits, or hyphens ... must start with a
# letter ... cannot end with a hyphen" (https://cloud.google.com/resource-manager/docs/creating-managing-projects).
_PROJECT_ID_RE = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
# Kubernetes names (k8s.io/apimachinery pkg/util/validation/validation.go): a DNS-1123 label (namespaces,
# most objects), a DNS-1035 label (must start with a letter: Services, and the Jobs and pods JobSet and LWS
# generate), a DNS-1123 subdomain (up to 253 characters, dots allowed: custom resources in general).
_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL_MAX, DNS_SUBDOMAIN_MAX = 63, 253
K8S_NAMES = "https://kubernetes.io/docs/concepts/overview/working-with-objects/names/"
ZONE_RE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-(?P<suffix>[a-z0-9]+)$")
CHART_VERSION_RE = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
# A value a stack file leaves for its owner to fill in, e.g. "<REPLACE-ME: the staging project ID>".
# The program refuses to run while one is left anywhere in the configuration (docs/stacks.md, "Placeholders").
PLACEHOLDER_RE = re.compile(r"<REPLACE-ME\b[^>]*>")
# A Kubernetes quantity as resource.ParseQuantity reads it (k8s.io/apimachinery pkg/api/resource/quantity.go:
# <signedNumber><suffix>, suffix = binarySI Ki..Ei | decimalSI n u m "" k M G T P E | decimalExponent e<n>),
# without a sign: requests, limits and quotas cannot be negative.
QUANTITY_RE = re.compile(
    r"^\+?(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][-+]?[0-9]+)?$"
)

# Limits that bite after `pulumi up` if not checked here.
LWS_NAME_MAX = 39  # llm-d: LWS names under Kueue (they feed slice and pod names)
# A serving LWS is named <serving.<role>.name>-<revision>: this many hex digits of its pod shape's hash
# (components/model/serving/rollout.py), so the configured name gets LWS_NAME_MAX - 1 - LWS_REVISION_LEN.
LWS_REVISION_LEN = 5
SLICE_NAME_MAX = 49  # GKE slice names
LABEL_VALUE_MAX = 63  # Kubernetes label values
MTU_MIN, MTU_MAX = 1300, 8896  # GCE VPC MTU range


# Strings shaped like a credential (Hugging Face, GitHub, GitLab, Google API keys and OAuth tokens, OpenAI-style
# keys, PEM private keys): never echoed in an error, whatever key they were put under.
_TOKEN_RE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|AIza[0-9A-Za-z_-]{30,}|ya29\.[0-9A-Za-z_-]{20,}|sk-[A-Za-z0-9_-]{20,}|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)
REDACTED = "[secret]"


def looks_secret(value: Any) -> bool:
    """True when `value` (or anything inside it) holds a credential-shaped string."""
    if isinstance(value, str):
        return bool(_TOKEN_RE.search(value))
    if isinstance(value, dict):
        return any(looks_secret(k) or looks_secret(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(looks_secret(v) for v in value)
    return False


def redact_text(text: str) -> str:
    return _TOKEN_RE.sub(REDACTED, text)


class SettingError(ValueError):
    """A bad value, raised inside a validator; `field` is relative to the model being validated."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field} = {value!r}: {allowed}")


class SettingErrors(ValueError):
    """Several independent bad values found by one validator, each reported on its own line."""

    def __init__(self, errors: list[SettingError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def raise_all(errors: list[SettingError]) -> None:
    """Raises the problems a validator collected, all of them, or nothing."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise SettingErrors(errors)


class ConfigError(Exception):
    """Invalid stack configuration. Raised before any resource is registered."""


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, validate_default=True
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


def _name_check(pattern: str, allowed: str, default_max: int = DNS_LABEL_MAX) -> Callable[..., str]:
    """A check of a Kubernetes name of `pattern`, refused with `allowed`, its length bound and why."""
    regex = re.compile(f"^{pattern}$")

    def check(value: str, max_len: int = default_max, why: str = "") -> str:
        if len(value) > max_len or not regex.match(value):
            raise ValueError(f"{allowed}, at most {max_len} characters{why}")
        return value

    return check


dns_label = _name_check(
    _DNS_LABEL, "a DNS-1123 label: lowercase letters, digits and hyphens, starting and ending with a letter or digit"
)
dns1035_label = _name_check(
    "[a-z]([-a-z0-9]*[a-z0-9])?",
    "a DNS-1035 label: lowercase letters, digits and hyphens, starting with a letter and ending with a letter or digit",
)
dns_subdomain = _name_check(
    rf"{_DNS_LABEL}(\.{_DNS_LABEL})*",
    "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
    DNS_SUBDOMAIN_MAX,
)


def accept_if(ok: Callable[[Any], object], allowed: str) -> AfterValidator:
    """A field's validator: a set value `ok` refuses is reported with `allowed` (None passes: unset)."""

    def check(value: Any) -> Any:
        if value is not None and not ok(value):
            raise ValueError(allowed)
        return value

    return AfterValidator(check)


def project_id(value: str) -> str:
    if value.isdigit():
        # A project number (what IAM principals and some consoles show) is not accepted where an ID is wanted.
        raise ValueError(
            "a Google Cloud project ID (such as my-tpu-project), not the project's number; "
            f"`gcloud projects describe {value} --format='value(projectId)'` prints the ID"
        )
    if not _PROJECT_ID_RE.match(value):
        raise ValueError(
            "a Google Cloud project ID: 6-30 lowercase letters, digits and hyphens, starting with a letter, "
            "not ending with a hyphen"
        )
    return value


def cidr(value: str, max_prefix: int = 32, why: str = "") -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ValueError("an IPv4 CIDR block with no host bits set, such as 10.10.0.0/18") from None
    if net.version != 4:
        raise ValueError("an IPv4 CIDR block")
    if net.prefixlen > max_prefix:
        raise ValueError(f"an IPv4 CIDR block of /{max_prefix} or larger: {why}")
    return str(net)


def parse_topology(value: str) -> str:
    try:
        return str(Topology.parse(value))
    except geometry.GeometryError as err:
        raise ValueError(str(err)) from None


# A release version as charts and images tag it: `v` optional, minor and patch optional (0), a semver pre-release
# and build metadata.
_VERSION_RE = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
VersionOrder = tuple[int, int, int, bool, tuple[tuple[int, int, str], ...]]


def version_order(version: str) -> VersionOrder:
    """A version's place in semver precedence (semver.org 11): a pre-release is before its release
    (0.19.2-rc.0 < 0.19.2), its dot-separated parts compared as numbers or text, numbers first; build metadata
    ignored."""
    m = _VERSION_RE.match(version)
    if m is None:
        raise ValueError(f"{version!r} is not a version such as 0.19.2 or v0.10.0-rc.1")
    major, minor, patch, pre = m.groups()
    parts = () if pre is None else tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return int(major), int(minor or 0), int(patch or 0), pre is None, parts


# GKE's `-gke.N` is GKE's build of a Kubernetes patch, every GKE version has one: four numbers, not a pre-release.
def gke_version_tuple(version: str) -> tuple[int, int, int, int]:
    m = _GKE_VERSION_RE.match(version)
    if not m:
        raise ValueError(f"{version!r} is not a GKE version such as 1.36.0-gke.2459000")
    return tuple(int(g) for g in m.groups())  # type: ignore[return-value]


_SUFFIXES = {s: Decimal(2) ** (10 * i) for i, s in enumerate(("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))}
_SUFFIXES |= {s: Decimal(10) ** e for s, e in zip("numkMGTPE", (-9, -6, -3, 3, 6, 9, 12, 15, 18), strict=True)}
GIB = 2**30


def quantity(text: str) -> Decimal:
    """The value of a Kubernetes quantity (QUANTITY_RE), exactly."""
    m = QUANTITY_RE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    suffix = m["suffix"] or ""
    if suffix[:1] in ("e", "E") and suffix != "E":
        return Decimal(m["number"]) * Decimal(10) ** int(suffix[1:])
    return Decimal(m["number"]) * _SUFFIXES[suffix]


def cpu_millis(text: str) -> int:
    # Kubernetes rounds CPU up to whole millicores (Quantity.MilliValue rounds up).
    return math.ceil(quantity(text) * 1000)


def memory_bytes(text: str) -> int:
    return math.ceil(quantity(text))


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
    return node_allocatable_of(*machine_shape(machine_type))


def node_allocatable_of(vcpus: float, mem_gib: float) -> tuple[int, int]:
    """(millicores, bytes) GKE leaves to pods on a node of `vcpus` and `mem_gib` (same source as above)."""
    cpu_reserved = _tiered(vcpus, ((1, 0.06), (2, 0.01), (4, 0.005), (math.inf, 0.0025)))
    mem_reserved = _tiered(mem_gib, ((4, 0.25), (8, 0.20), (16, 0.10), (128, 0.06), (math.inf, 0.02)))
    eviction = 100 * 2**20
    return int((vcpus - cpu_reserved) * 1000), int((mem_gib - mem_reserved) * GIB) - eviction


# GKE's own per-node pods (CNI, logging, metrics, CSI drivers, NodeLocal DNS) on a system node: an
# estimate, so that the fit check does not promise room that kube-system already took.
SYSTEM_PODS_CPU_MILLIS = 1000
SYSTEM_PODS_MEMORY = 2 * GIB


def machine_shape(machine_type: str) -> tuple[int, float]:
    """(vCPUs, memory GiB) of a predefined GCE machine type such as n2-standard-32
    (components/model/config/machines.py)."""
    series_name, _, size = machine_type.rpartition("-")
    series = MACHINE_SERIES.get(series_name)
    if series is None:
        families = sorted({name.split("-", 1)[0] for name in MACHINE_SERIES})
        raise ValueError(
            "a predefined GCE machine type <family>-standard|highmem|highcpu-<vCPUs>, such as n2-standard-32, of "
            f"the families {', '.join(families)} ({GENERAL_PURPOSE})"
        )
    if not size.isdigit() or int(size) not in series.vcpus:
        sizes = ", ".join(str(n) for n in series.vcpus)
        raise ValueError(f"a machine type that exists: {series_name}-<vCPUs> comes in {sizes} ({series.source})")
    return int(size), machine_memory_gb(series, int(size))
