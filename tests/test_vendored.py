"""The vendored upstream files (manifests/vendored/, components/model/addons/vendored.py): each one is the file at its
release tag, nothing the program applies is fetched, and the change preview compares their objects."""

from __future__ import annotations

import hashlib
import json

import pytest

from components.cli import chart_diff
from components.cli.diff import _diff
from components.model.addons import vendored
from tests import upstream
from tests.harness import Run, assert_rejected, normalize, ok
from tests.preview import record
from tests.stack_config import P

GROUP = "kubernetes:yaml/v2:ConfigGroup"
GKE_MANAGED = "inference.networking.k8s.io_inferencepools.yaml"


def test_every_vendored_file_is_listed_with_its_hash_and_nothing_else_is_there() -> None:
    listed = {f.path: f for f in vendored.files()}
    on_disk = {p.relative_to(vendored.VENDORED).as_posix() for p in vendored.VENDORED.rglob("*") if p.is_file()} - {
        "sources.toml"
    }
    assert on_disk == set(listed)
    for path, f in listed.items():
        assert hashlib.sha256((vendored.VENDORED / path).read_bytes()).hexdigest() == f.sha256, path
        # The raw file at the release tag, and the tag's commit recorded beside it.
        project, version = f.release
        assert f.url.startswith(f"https://raw.githubusercontent.com/kubernetes-sigs/{project}/{version}/"), f.url
        assert f.url.endswith("/" + path.split("/", 1)[1]) and len(f.revision) == 40


def test_each_vendored_file_is_the_pinned_upstream_copy_of_its_url() -> None:
    """The tests' upstream copies were checked blob by blob against each tag's tree (tests/upstream_files.toml):
    the vendored file has the same URL and the same hash, so it is that file."""
    upstream.require("schemas/crds", "upstream-next")
    pinned = {f.url: f for f in upstream.load()}
    for f in vendored.files():
        assert f.url in pinned, f"{f.path}: its URL is not among the pinned upstream files"
        assert pinned[f.url].sha256 == f.sha256, f.path
        assert (upstream.root() / pinned[f.url].path).read_bytes() == (vendored.VENDORED / f.path).read_bytes()


@pytest.mark.parametrize("version", vendored.versions(vendored.GAIE))
def test_each_release_is_vendored_whole_but_for_what_is_left_out_with_its_reason(version: str) -> None:
    """Every CRD file of a release is vendored or left out with a reason; GKE's InferencePool always left out."""
    left_out = {o.path.rsplit("/", 1)[1]: o.why for o in vendored.omitted(vendored.GAIE, version)}
    kept = {f.path.rsplit("/", 1)[1] for f in vendored.files(vendored.GAIE, version)}
    assert not kept & set(left_out) and all(left_out.values())
    assert GKE_MANAGED in left_out and "GKE" in left_out[GKE_MANAGED]
    # v1.6.0 ships two CRDs (config/crd/kustomization.yaml at the tag): InferenceObjective and InferenceModelRewrite
    # are gone.
    if version == "v1.6.0":
        assert kept | set(left_out) == {GKE_MANAGED, "inference.networking.x-k8s.io_inferencepoolimports.yaml"}


@pytest.mark.parametrize("version", ["v1.5.0", "v1.6.0"])
def test_the_program_applies_the_vendored_crds_of_the_release_and_fetches_nothing(version: str) -> None:
    run = ok({f"{P}:addons": {"inferenceExtension": {"version": version}}})
    group = run.get(GROUP, "inference-extension-crds")
    inputs = normalize(group.inputs)
    assert set(inputs) == {"objs"}  # no files, no URL: the provider fetches nothing
    assert inputs["objs"] == vendored.objects(vendored.GAIE, version)
    names = {o["metadata"]["name"] for o in inputs["objs"]}
    assert "inferencepools.inference.networking.k8s.io" not in names
    assert "gateway-api-inference-extension" not in json.dumps([normalize(r.inputs) for r in run.registrations])


def test_a_release_that_is_not_vendored_is_refused() -> None:
    message = assert_rejected(
        {f"{P}:addons": {"inferenceExtension": {"version": "v1.4.0"}}}, ["addons.inferenceExtension.version"]
    )
    assert "v1.5.0, v1.6.0" in message


def test_the_router_waits_for_the_crds(dev: Run) -> None:
    router = dev.get("kubernetes:helm.sh/v4:Chart", "serving-router")
    assert dev.depends_on(router, dev.get(GROUP, "inference-extension-crds"))


def _group(inputs: dict) -> dict:
    return record("inference-extension-crds", GROUP, inputs, parent="", remote=True)


def test_the_preview_compares_each_crd_and_knows_what_a_url_it_cannot_read_deletes() -> None:
    """A stack last updated when the program still applied GAIE's files by URL: the file it vendors is compared by
    content; one it does not vendor is known by name only, so it is deleted when the new release lacks it and
    `unknown` when both have it (never `same`)."""
    base = "https://raw.githubusercontent.com/kubernetes-sigs/gateway-api-inference-extension/v1.5.0/config/crd/bases/"
    files = [
        base + "inference.networking.x-k8s.io_inferencemodelrewrites.yaml",
        base + "inference.networking.x-k8s.io_inferenceobjectives.yaml",
        base + "inference.networking.x-k8s.io_inferencepoolimports.yaml",
    ]

    def actions(version: str) -> tuple[dict[str, str], list[str]]:
        notes: list[str] = []
        result = _diff([_group({"files": files})], [_group({"objs": vendored.objects(vendored.GAIE, version)})], notes)
        return {c.name.split(":", 1)[1]: c.action for c in result.changes if ":" in c.name}, notes

    same_release, notes = actions("v1.5.0")
    assert same_release == {
        "inferencemodelrewrites.inference.networking.x-k8s.io": "delete",
        "inferenceobjectives.inference.networking.x-k8s.io": "same",
        "inferencepoolimports.inference.networking.x-k8s.io": "delete",
    }
    assert notes == []
    upgraded, notes = actions("v1.6.0")
    assert upgraded == {
        "inferencemodelrewrites.inference.networking.x-k8s.io": "delete",
        "inferenceobjectives.inference.networking.x-k8s.io": "delete",
        "inferencepoolimports.inference.networking.x-k8s.io": "unknown",
    }
    assert notes == [
        "inference-extension-crds:inferencepoolimports.inference.networking.x-k8s.io not compared: "
        f"{files[2]} is not vendored here"
    ]
    assert chart_diff.CONFIG_GROUP == GROUP
