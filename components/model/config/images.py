"""The container images the program declares, each pinned by its tag and, where a citable source gives it, its
digest: one table, the one place a bump changes both (docs/stacks.md, "Images: tags and digests"). Pure, no Pulumi.

A reference `name:tag@sha256:<hex>` keeps both: the tag for the people and checks that read versions (the routing
sidecar's release), the digest for the runtime, which pulls by digest and ignores the tag (distribution/reference
reference.go: a `Canonical` reference names its content by digest). No digest is ever written here without a source:
where none was found the row says so, every preview warns, and a stack with `requireImageDigests` (staging and prod)
refuses to run until its file pins the image.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.model.config.oci import OCI_REFERENCE_RE

# Tags that name whatever was pushed last (Docker's `latest`, llm-d-router's `main`, .github/workflows/ci-dev.yaml).
FLOATING_TAGS = ("latest", "main")
# What `pull_policy` gives a reference the registry cannot move, and one it can.
IF_NOT_PRESENT, ALWAYS = "IfNotPresent", "Always"


@dataclass(frozen=True)
class Pin:
    """One image the program declares by default: `<registry>/<path>:<tag>` and its digest, with their source."""

    image: str
    digest: str | None
    source: str

    @property
    def reference(self) -> str:
        """What the pods run: the tag, and the digest after it when one is known."""
        return with_digest(self.image, self.digest)


# Python's official image at an exact tag (the download Job needs only python3's standard library, the demos python3
# and pip). The digest of its multi-platform index, as Docker's official-images bot recorded it
# (docker-library/repo-info repos/python/remote/3.12.8-slim-bookworm.md, read from its mirror
# maxmood96/repo-info@03a85756497fa6b6b150bcbbac0e3f18ec83b0d6, `docker pull python@sha256:10f3aaab...`).
PYTHON = Pin(
    "docker.io/library/python:3.12.8-slim-bookworm",
    "sha256:10f3aaab98db50cba827d3b33a91f39dc9ec2d02ca9b85cbc5008220d07b17f3",
    "docker-library/repo-info repos/python/remote/3.12.8-slim-bookworm.md (maxmood96/repo-info@03a85756)",
)
# vLLM's TPU image, the nightly of tpu-inference 18ed615 and vLLM 5b39b26 (vllm-project/tpu-inference
# docker/Dockerfile). Docker Hub shows its digest only to a registry client; no public record of it was found.
VLLM_TPU = Pin(
    "docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26",
    None,
    "none found: no public record gives this tag's digest (read it with `crane digest`)",
)
# llm-d-router's P/D sidecar by release tag (.github/workflows/ci-release.yaml pushes it with the release's chart);
# a release whose digest no public record gives has no entry.
SIDECAR_DIGESTS: dict[str, str] = {}


def with_digest(image: str, digest: str | None) -> str:
    return f"{image}@{digest}" if digest else image


def parts(reference: str) -> tuple[str, str | None, str | None]:
    """(name, tag, digest) of an OCI reference the settings already checked."""
    match = OCI_REFERENCE_RE.match(reference)
    assert match is not None, reference
    return match["name"], match["tag"], match["digest"]


def floating(reference: str) -> bool:
    """True when the registry decides what the reference means next time: no digest and no tag, or a floating tag."""
    _, tag, digest = parts(reference)
    return digest is None and (tag is None or tag in FLOATING_TAGS)


def pull_policy(reference: str) -> str:
    """`IfNotPresent` for a reference the registry cannot move (a node restarts its pods without the registry);
    `Always` for a floating one, which `IfNotPresent` would leave at whatever each node pulled first."""
    return ALWAYS if floating(reference) else IF_NOT_PRESENT


def digest_advice(reference: str) -> str:
    """What to do about an image without a digest, for the preview's warning and the refusal alike."""
    return (
        f"no @sha256 digest, so the registry decides what the pods run (a tag can be pushed again); pin it as "
        f"{reference}@sha256:<digest> in the stack file (`crane digest {reference}` prints the digest)"
    )
