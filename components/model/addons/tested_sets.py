"""The add-on versions the program knows to work together: tested sets, each with its evidence and the GKE version it
needs, and the combinations known to break (pure data).

A column is an add-on whose version a stack sets; a row, a set of versions the suite renders with Helm's own engine
and checks against that set's own CRDs (tests/test_tested_sets.py). The preview refuses a combination known to break
and warns on one that is no row; the defaults are the newest row, and staging and prod pin the previous one in their
stack files until promoted (docs/upgrades.md). A new add-on is one more `Column`, and a value for it in each row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from components.model.config.checks import MIN_SLICE_CONTROLLER_VERSION, version_order

if TYPE_CHECKING:
    from components.model.config.root_settings import Settings


@dataclass(frozen=True)
class Column:
    key: str  # the configuration key of the version
    read: Callable[[Settings], str | None]  # the stack's version, None where the add-on is not installed


COLUMNS: dict[str, Column] = {
    "kueue": Column("addons.kueue.version", lambda s: s.addons.kueue.version),
    "jobset": Column("addons.jobset.version", lambda s: s.addons.jobset.version),
    "lws": Column("addons.lws.version", lambda s: s.addons.lws.version),
    "router": Column("serving.router.version", lambda s: s.serving.router.version if s.serving.enabled else None),
    "inferenceExtension": Column("addons.inferenceExtension.version", lambda s: s.addons.inference_extension.version),
    "keda": Column("addons.keda.version", lambda s: s.addons.keda.version if s.addons.keda.enabled else None),
}

# Every add-on's own Kubernetes floor is below the program's (MIN_SLICE_CONTROLLER_VERSION, GKE's floor for dynamic
# slicing): Kueue 1.29 (kubernetes-sigs/kueue README.md:62 at v0.17.4, :95 at v0.19.2), LWS 1.26
# (kubernetes-sigs/lws site/content/en/docs/installation/_index.md:28 at v0.8.0, :29 at v0.10.0), JobSet "the
# last 3 Kubernetes minor versions" at its release (site/content/en/docs/installation/_index.md:25 at v0.12.0, May
# 2026: 1.34-1.36), the inference extension's GA InferencePool managed by GKE from 1.34, KEDA 2.20 1.33
# (kedacore/charts@cbb9bb8c keda/templates/NOTES.txt:56-58).
PROGRAM_EVIDENCE = (
    "tests/test_tested_sets.py: every chart of the set rendered by Helm's engine with the program's values, every "
    "chart object and every object the program declares valid against the set's own CRDs (schema and CEL), no value "
    "the program sets ignored by its chart, and the set's objects read back by the other set's CRDs (rollback)",
)

# KEDA reaches the other add-ons only through a LeaderWorkerSet's /scale subresource (components/model/addons/keda.py),
# which LWS serves on spec.replicas at v0.8.0 and v0.10.0 alike (both pinned CRDs, tests/test_burst.py).
KEDA_EVIDENCE = (
    "KEDA 2.20.2 scales the burst slots' LeaderWorkerSets through /scale, which this set's LWS serves (its CRD's "
    "scale subresource on spec.replicas); its chart renders and checks with the set when elastic serving is on"
)


@dataclass(frozen=True)
class VersionSet:
    name: str
    versions: Mapping[str, str]  # column -> version, as the settings normalise it
    gke_minimum: str
    evidence: tuple[str, ...]


TESTED_SETS: tuple[VersionSet, ...] = (
    VersionSet(
        "2026.05",
        {
            "kueue": "0.17.4",
            "jobset": "0.11.1",
            "lws": "0.8.0",
            "router": "v0.10.0",
            "inferenceExtension": "v1.5.0",
            "keda": "2.20.2",
        },
        MIN_SLICE_CONTROLLER_VERSION,
        (
            *PROGRAM_EVIDENCE,
            KEDA_EVIDENCE,
            "the codelab's versions (GoogleCloudPlatform/devrel-demos ai-ml/dynamic-slicing@62d320c2); the slice "
            "controller is built against them (AI-Hypercomputer/xpk@250d4b3c slice/go.mod: kueue v0.17.0, jobset "
            "v0.11.1, lws v0.8.0)",
        ),
    ),
    VersionSet(
        "2026.12",
        {
            "kueue": "0.19.2",
            "jobset": "0.12.0",
            "lws": "0.10.0",
            "router": "v0.10.0",
            "inferenceExtension": "v1.6.0",
            "keda": "2.20.2",
        },
        MIN_SLICE_CONTROLLER_VERSION,
        (
            *PROGRAM_EVIDENCE,
            KEDA_EVIDENCE,
            "Kueue 0.19.2 is built against these JobSet and LWS APIs (kubernetes-sigs/kueue@8eab6877 go.mod: jobset "
            "v0.12.0, lws v0.9.0; LWS 0.10.0 keeps leaderworkerset.x-k8s.io/v1 and the labels Kueue reads)",
            "the slice controller works with them (docs/architecture.md, 'The slice controller and newer add-ons'): "
            "Kueue's v1beta2 Workload, the only Kueue API it reads and patches, has the same fields at 0.17.4 and "
            "0.19.2 and stays the storage version; it patches Workload status by server-side apply; its JobSet, LWS "
            "and StatefulSet webhooks keep fields its types do not know (controller-runtime v0.23.3 "
            "pkg/webhook/admission/defaulter_custom.go:164-166); the slice annotations it writes pass Kueue 0.19's "
            "slice-size validation (tests/test_tested_sets.py)",
            "Kueue's metrics the dashboard and alerts read keep their names and labels (pkg/metrics/metrics.go at "
            "v0.19.2); waitForPodsReady, on by default from 0.19, is set by the program (kueue_config.py)",
            "LWS 0.10.0 compares a running set's revision semantically, so the upgrade rolls no serving group "
            "(kubernetes-sigs/lws@2161f38f pkg/utils/revision/revision_utils.go:200-236, #798)",
        ),
    ),
)


@dataclass(frozen=True)
class KnownBreak:
    """Versions of one or more columns that do not work with the program, whatever the rest: each column maps to
    the ranges it breaks in (`>=a,<b`, `<b`)."""

    ranges: Mapping[str, tuple[str, ...]]
    why: str
    source: str
    allowed: str = ""


KNOWN_BREAKS: tuple[KnownBreak, ...] = (
    KnownBreak(
        {"kueue": ("<0.15.0",)},
        "the program's Kueue objects are kueue.x-k8s.io/v1beta2, and the slice controller reads Workloads at "
        "v1beta2: Kueue serves v1beta2 from 0.15.0 on",
        "kubernetes-sigs/kueue config/components/crd/bases (v1beta2 served from v0.15.0, absent at v0.14.0); "
        "AI-Hypercomputer/xpk@250d4b3c slice/go.mod (kueue v0.17.0)",
        "0.15.0 or later",
    ),
    KnownBreak(
        {"kueue": (">=0.18.0,<0.18.6", ">=0.19.0,<0.19.2")},
        "these releases stopped writing the queue-name label on LeaderWorkerSet pods (their webhook stamps it on "
        "the pod templates instead, only on create and update): pods of a serving LeaderWorkerSet created under an "
        "older Kueue, once recreated, stay scheduling-gated, are evicted by waitForPodsReady and recreated again, "
        "until the group is deactivated",
        "kubernetes-sigs/kueue 5252f419ec (#4932, first in v0.18.0); the fix d25cc39ae9 (#14602, v0.19.2; "
        "CHANGELOG/CHANGELOG-0.19.md:28) and 1d36a33377 (#14603, v0.18.6)",
        "0.18.6 or a later 0.18, 0.19.2 or later",
    ),
)


def in_range(version: str, spec: str) -> bool:
    """Whether `version` is in `spec`, a comma-separated AND of `<x`, `<=x`, `>x`, `>=x`."""
    v = version_order(version)
    ops = {"<": v.__lt__, "<=": v.__le__, ">": v.__gt__, ">=": v.__ge__}
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(<=|>=|<|>)\s*(\S+)\s*", part)
        if m is None:
            raise ValueError(f"not a version range: {spec!r}")
        if not ops[m[1]](version_order(m[2])):
            return False
    return True


def versions_of(settings: Settings) -> dict[str, str]:
    """The stack's version of every installed column."""
    return {name: v for name, c in COLUMNS.items() if (v := c.read(settings)) is not None}


def matching_set(versions: Mapping[str, str]) -> VersionSet | None:
    """The tested set the stack's versions are (every installed column equal), if any."""
    return next((s for s in reversed(TESTED_SETS) if all(s.versions[k] == v for k, v in versions.items())), None)


def breaks(versions: Mapping[str, str]) -> list[tuple[str, KnownBreak]]:
    """(column, break) for each known break the versions fall in (a column absent from `versions` never matches)."""
    out = []
    for known in KNOWN_BREAKS:
        hits = [
            k for k, specs in known.ranges.items() if k in versions and any(in_range(versions[k], s) for s in specs)
        ]
        if len(hits) == len(known.ranges):
            out += [(k, known) for k in hits]
    return out


def untested_warning(versions: Mapping[str, str], prefix: str = "") -> str | None:
    """The preview's warning for a combination no tested set is: the keys that differ from the nearest set."""
    if matching_set(versions) is not None:
        return None

    def differ(s: VersionSet) -> list[str]:
        return [k for k, v in versions.items() if s.versions[k] != v]

    nearest = min(reversed(TESTED_SETS), key=lambda s: len(differ(s)))
    keys = ", ".join(
        f"{prefix}{COLUMNS[k].key} = {versions[k]} ({nearest.versions[k]} in the set)" for k in differ(nearest)
    )
    return (
        f"{keys}: no tested set of add-on versions has this combination (the nearest is {nearest.name}); the "
        "program's tests render and check the tested sets together, a combination outside them is yours to verify "
        "(docs/upgrades.md)"
    )


def newest() -> VersionSet:
    return TESTED_SETS[-1]
