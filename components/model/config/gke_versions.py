"""The cluster's GKE version: what `cluster.version` may say, and how it is resolved at preview time.

No Pulumi here. `components/preflight.py` asks GKE (`gcp.container.get_engine_versions`, the provider's
`google_container_engine_versions` data source) and hands the answer to `resolve`, before anything is
registered. Why not pin: GKE accepts only the versions a release channel currently offers ("Master
version must be one of "RAPID" channel supported versions [...]") and Rapid drops patch versions
within weeks, so a pinned patch fails a new environment some weeks later.

What the data source answers (terraform-provider-google-beta, release-8.0.0 @93c65b2d60,
google-beta/services/container/data_source_google_container_engine_versions.go, lines 113-160):
`release_channel_latest_version[channel]` is the FIRST of that channel's `validVersions` (newest
first) that starts with `version_prefix`, and `release_channel_default_version[channel]` is the
channel's default (not filtered by the prefix). So:

* an exact version is offered on the channel iff asking with it as the prefix answers that version;
* a prefix `1.36` (asked as `1.36.`) answers the newest `1.36` version the channel offers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from components.model.config.checks import gke_version_tuple

DYNAMIC_SLICING_DOC = "https://cloud.google.com/kubernetes-engine/docs/how-to/use-gke-dynamic-slicing#requirements"

_EXACT_RE = re.compile(r"^\d+\.\d+\.\d+-gke\.\d+$")
_MINOR_RE = re.compile(r"^(\d+)\.(\d+)$")
_PATCH_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
# The end of GKE's standard support per minor version, where the program knows it: GKE's release schedule
# (https://cloud.google.com/kubernetes-engine/docs/release-schedule, "End of standard support"), as transcribed by
# https://endoflife.date/api/v1/products/google-kubernetes-engine (generated 2026-04-10: 1.35 `eolFrom`). Only the
# minor versions the program's floor admits (1.35 for super-slices); 1.36 has no date in those sources yet, so an
# exclusion on it is not checked. A "No minor (or node) upgrades" exclusion lasts at most until then (rules.py
# MAINTENANCE_LIMITS); `endTimeBehavior: UNTIL_END_OF_SUPPORT` follows the date GKE itself holds.
END_OF_STANDARD_SUPPORT: dict[str, date] = {"1.35": date(2027, 4, 11)}
ALLOWED = (
    "'default' (the release channel's default version), a version prefix such as 1.36 or 1.36.1 "
    "(the newest such version the channel offers), or an exact GKE version such as 1.36.0-gke.3712000 "
    "(must be offered by the channel at preview time)"
)


@dataclass(frozen=True)
class VersionSpec:
    """`cluster.version`, parsed."""

    kind: Literal["default", "prefix", "exact"]
    value: str

    @property
    def invoke_prefix(self) -> str | None:
        """The `version_prefix` to ask GKE with (the data source matches by plain string prefix)."""
        if self.kind == "default":
            return None
        if self.kind == "exact":
            return self.value
        # "1.36." and "1.36.1-": a bare "1.3" would also match 1.30-1.39.
        return self.value + ("." if _MINOR_RE.match(self.value) else "-")

    @property
    def minor(self) -> str | None:
        """The minor version it names ("1.36"); None for 'default' (the channel's, known once resolved)."""
        return None if self.kind == "default" else minor_of(self.value)

    def newest_possible(self) -> tuple[int, ...] | None:
        """An upper bound of every version this spec can resolve to (None: unbounded, 'default')."""
        if self.kind == "exact":
            return gke_version_tuple(self.value)
        if self.kind == "prefix":
            parts = [int(p) for p in self.value.split(".")]
            inf = 10**12
            return tuple(parts + [inf] * (4 - len(parts)))
        return None


def minor_of(version: str) -> str:
    """ "1.36" of 1.36, 1.36.1 and 1.36.0-gke.3712000."""
    return ".".join(version.split("-")[0].split(".")[:2])


def parse(value: str) -> VersionSpec:
    if value == "default":
        return VersionSpec("default", value)
    if _EXACT_RE.match(value):
        return VersionSpec("exact", value)
    if _MINOR_RE.match(value) or _PATCH_RE.match(value):
        return VersionSpec("prefix", value)
    raise ValueError(ALLOWED)


class VersionError(ValueError):
    """The version GKE offers does not satisfy the settings; `allowed` is the message for cluster.version."""

    def __init__(self, value: str, allowed: str, *, not_offered: bool = False) -> None:
        # not_offered: the channel no longer offers what the spec names (not a floor the workloads need).
        self.value, self.allowed, self.not_offered = value, allowed, not_offered
        super().__init__(allowed)


@dataclass(frozen=True)
class Resolution:
    version: str
    note: str = ""


def _channel_map(answer: Mapping[str, Any], key: str) -> Mapping[str, str]:
    return answer.get(key) or {}


def offline(spec: VersionSpec, channel: str) -> Resolution:
    """What an offline run shows without GKE's list: an exact version as given, anything else as a marker."""
    if spec.kind == "exact":
        return Resolution(spec.value, note=f"used as given, not checked against the {channel} list")
    what = f"the {channel} channel's default" if spec.kind == "default" else f"the newest {spec.value} on {channel}"
    return Resolution(f"<{what}, read at preview>", note="resolved by `pulumi preview`")


def resolve(
    spec: VersionSpec,
    answer: Mapping[str, Any],
    *,
    channel: str,
    location: str,
    floor: str,
    floor_reason: str,
    suggestion: Mapping[str, Any] | None = None,
) -> Resolution:
    """The version to create the cluster with, from GKE's answer to `get_engine_versions(version_prefix=...)`.

    `answer` is the invoke's result as a mapping of the SDK's snake_case names; `floor` the oldest version
    the workloads need (why: `floor_reason`). `suggestion` (the answer for the spec's minor version, no
    prefix for 'default') only words the error. Raises VersionError naming what is offered.
    """
    latest = _channel_map(answer, "release_channel_latest_version").get(channel)
    default = _channel_map(answer, "release_channel_default_version").get(channel)
    hint = _offered(spec, suggestion or answer, channel)
    if spec.kind == "exact":
        if latest != spec.value:
            raise VersionError(
                spec.value,
                f"a version the {channel} channel offers in {location} now, and {spec.value} is not "
                f"offered{hint}; GKE drops patch versions from Rapid within weeks, so use a prefix such as "
                f"{'.'.join(spec.value.split('.')[:2])} or 'default' to follow the channel",
                not_offered=True,
            )
        version = spec.value
    elif spec.kind == "prefix":
        if not latest:
            raise VersionError(
                spec.value, f"a prefix of a version the {channel} channel offers in {location}{hint}", not_offered=True
            )
        version = latest
    else:
        if not default:
            raise VersionError(spec.value, f"the {channel} channel reports no default version in {location}")
        version = default
    if gke_version_tuple(version) < gke_version_tuple(floor):
        raise VersionError(
            spec.value,
            f"resolves to {version} (the {channel} channel in {location}), older than {floor}: {floor_reason}; "
            f"use a prefix or an exact version at or above {floor}{hint}",
        )
    return Resolution(version)


def _offered(spec: VersionSpec, answer: Mapping[str, Any], channel: str) -> str:
    latest = _channel_map(answer, "release_channel_latest_version").get(channel)
    default = _channel_map(answer, "release_channel_default_version").get(channel)
    parts = []
    if latest and spec.kind == "exact":
        parts.append(f"the newest {'.'.join(spec.value.split('.')[:2])} on {channel}: {latest}")
    if default:
        parts.append(f"{channel}'s default: {default}")
    return f" ({'; '.join(parts)})" if parts else ""


def to_send(resolved: str | None, running: str | None) -> str | None:
    """The `min_master_version` to send: the higher of the resolved version and the one the control plane runs.

    The provider compares `min_master_version` with the `master_version` kept in the state (terraform-provider-
    google-beta release-8.0.0 @93c65b2d60, resource_container_cluster.go lines 4916-4935: an upgrade request
    whenever the state's version is older), and `pulumi up` does not refresh that state (only `--refresh` does).
    So once GKE has auto-upgraded the cluster past the resolved version (Rapid moving to a new minor), a newer
    patch of the configured minor would be requested as a downgrade, which GKE refuses. The running version
    (`master_version` as `get_cluster` reads it live, line 3752) is never lower than what runs, so sending the
    higher of the two requests at most the version the control plane already runs. Both are full GKE versions
    (1.36.0-gke.N), never a bare prefix: the provider's version library (hashicorp/go-version) ranks
    1.36.0-gke.N, a pre-release, below 1.36.0. None: neither is known.
    """
    if resolved is None or running is None:
        return resolved or running
    return running if gke_version_tuple(running) > gke_version_tuple(resolved) else resolved
