"""OCI references: the image and Helm chart grammar the add-on and serving settings check against."""

from __future__ import annotations

import re

# OCI image references, the grammar of distribution/reference (regexp.go at 0965666a, the library containerd
# and the kubelet parse image names with): [domain[:port]/]path[:tag][@digest], path components lowercase,
# a tag up to 128 characters, a name up to 255 (reference.go NameTotalLengthMax).
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
OCI_REFERENCE_RE = re.compile(
    rf"^(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
)
# opencontainers/go-digest algorithm.go: the registered algorithms and their hex lengths.
_DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}


def image_reference(v: str) -> str:
    """Checks `v` against the OCI reference grammar; returns it unchanged."""
    m = OCI_REFERENCE_RE.match(v)
    problem = None
    if not m:
        problem = "does not follow the grammar"
    elif len(m["name"]) > 255:
        problem = "has a name over 255 characters"
    elif m["digest"]:
        algorithm, _, hex_ = m["digest"].partition(":")
        if _DIGEST_HEX.get(algorithm) != len(hex_) or hex_ != hex_.lower():
            problem = "has a digest that is not sha256:<64 hex>, sha384:<96 hex> or sha512:<128 hex>"
    if problem:
        raise ValueError(
            f"an OCI image reference, [registry[:port]/]repository[:tag][@sha256:<digest>] with a lowercase "
            f"repository; this one {problem}"
        )
    return v


def pinned_image(v: str) -> str:
    """An OCI image reference pinned by an exact tag or a digest (a `latest` tag only with a digest)."""
    image_reference(v)
    match = OCI_REFERENCE_RE.match(v)
    if not match or not (match["tag"] or match["digest"]) or (match["tag"] == "latest" and not match["digest"]):
        raise ValueError(
            "a pinned image reference: [registry/]path:<exact tag>[@sha256:<digest>] or "
            "[registry/]path@sha256:<digest>, no 'latest' without a digest"
        )
    return v


def oci_chart(v: str) -> str:
    """oci://<registry>/<repository> (https://helm.sh/docs/topics/registries/): an OCI name with a registry."""
    m = OCI_REFERENCE_RE.match(v.removeprefix("oci://"))
    if not v.startswith("oci://") or not m or "/" not in m["name"] or m["tag"] or m["digest"]:
        raise ValueError(
            "an OCI chart reference, oci://<registry>/<repository> (lowercase repository, no tag: the version "
            "key pins it)"
        )
    return v


# A chart in a classic Helm repository (https://helm.sh/docs/topics/chart_repository/): the repository's URL and
# the chart's name, which Helm joins with "/" to find index.yaml's entry. The name: lowercase letters, digits and
# dashes (https://helm.sh/docs/chart_best_practices/conventions/#chart-names).
_REPO_CHART_RE = re.compile(r"^https://[^\s/?#]+(?:/[^\s/?#]+)*/(?P<name>[a-z0-9]+(?:-[a-z0-9]+)*)$")


def helm_chart(v: str) -> str:
    """An OCI chart (oci://...) or a chart of an https Helm repository (https://<repository>/<chart name>)."""
    if v.startswith("oci://"):
        return oci_chart(v)
    if not _REPO_CHART_RE.match(v):
        raise ValueError(
            "an OCI chart reference, oci://<registry>/<repository>, or a Helm repository's chart, "
            "https://<repository URL>/<chart name> (lowercase name; no version: the version key pins it)"
        )
    return v


def chart_source(v: str) -> tuple[str, str | None]:
    """(chart, repository) as helm.v4.Chart takes them: an OCI reference whole, a repository's chart split."""
    if v.startswith("oci://"):
        return v, None
    repository, _, name = v.rpartition("/")
    return name, repository
