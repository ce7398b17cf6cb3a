"""The images the program declares: tag and digest kept side by side, pulled once per node, a warning for an image
without a digest, and staging and prod refusing one (components/model/config/images.py)."""

from __future__ import annotations

import pytest

from components.model.config import images
from components.model.config.settings import ConfigError, load
from tests.graph_queries import leader, lws, templates
from tests.harness import Run, ok, warnings_of
from tests.stack_config import CLOCK, PROJECT, PROJECT_ID, SMALLEST, merge, stack_file_config
from tests.weights_fixtures import JOB, ON

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
DIGEST = "sha256:" + "c" * 64


def containers(run: Run) -> dict[str, dict]:
    """Every container the program declares, by `<object>/<container>`."""
    out = {}
    for role in ("prefill", "decode"):
        for kind, template in templates(lws(run, role)).items():
            for c in [*template["spec"].get("initContainers", []), *template["spec"]["containers"]]:
                out[f"{role}-{kind}/{c['name']}"] = c
    for reg in run.registrations:
        if reg.type in (JOBSET, JOB):
            spec = reg.plain()["spec"]
            pod = spec["replicatedJobs"][0]["template"]["spec"]["template"] if reg.type == JOBSET else spec["template"]
            out |= {f"{reg.name}/{c['name']}": c for c in pod["spec"]["containers"]}
    return out


def test_the_python_images_are_pinned_by_tag_and_digest_and_pulled_once() -> None:
    """The demos' and the download Job's image: the table's tag and digest, never a floating `python:3.12`."""
    run = ok({**ON, **{f"{PROJECT}:demos": {"superslicing": {"enabled": True}}}})
    found = containers(run)
    python = {name: c for name, c in found.items() if "python" in c["image"]}
    assert {n.split("/")[0] for n in python} == {"subslicing-jobset", "superslicing-jobset", "serving-weights-job"}
    # Docker's official-images record of the tag (docker-library/repo-info repos/python/remote/3.12.8-slim-bookworm.md).
    digest = "sha256:10f3aaab98db50cba827d3b33a91f39dc9ec2d02ca9b85cbc5008220d07b17f3"
    pinned = f"docker.io/library/python:3.12.8-slim-bookworm@{digest}"
    assert images.parts(pinned) == ("docker.io/library/python", "3.12.8-slim-bookworm", digest)
    for c in python.values():
        assert (c["image"], c["imagePullPolicy"]) == (pinned, "IfNotPresent")
    assert all(c["imagePullPolicy"] == "IfNotPresent" for c in found.values()), found


def test_a_tag_and_its_digest_reach_every_container_as_written() -> None:
    vllm, sidecar = f"{images.VLLM_TPU.image}@{DIGEST}", f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0@{DIGEST}"
    demo = f"mirror.example/python:3.12.8-slim-bookworm@{DIGEST}"
    run = ok(
        {
            f"{PROJECT}:serving": {"image": vllm, "routingSidecar": {"image": sidecar}},
            f"{PROJECT}:demos": {"image": demo},
        }
    )
    found = containers(run)
    assert {c["image"] for n, c in found.items() if "vllm" in n} == {vllm}
    assert leader(lws(run, "decode"))["initContainers"][0]["image"] == sidecar
    assert found["subslicing-jobset/simple-container"]["image"] == demo
    assert warnings_of(run) == [w for w in warnings_of(run) if "digest" not in w]


def test_an_image_without_a_digest_is_a_warning_naming_the_key_and_how_to_pin_it(dev: Run) -> None:
    unpinned = {w.split(" = ")[0]: w for w in warnings_of(dev) if "no @sha256 digest" in w}
    assert sorted(unpinned) == [f"{PROJECT}:serving.image", f"{PROJECT}:serving.routingSidecar.image"]
    assert f"pin it as {images.VLLM_TPU.image}@sha256:<digest>" in unpinned[f"{PROJECT}:serving.image"]
    assert f"`crane digest {images.VLLM_TPU.image}`" in unpinned[f"{PROJECT}:serving.image"]


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_staging_and_prod_refuse_an_image_without_a_digest(stack: str) -> None:
    config = stack_file_config(stack)
    raw = {k.removeprefix(f"{PROJECT}:"): v for k, v in config.items() if k.startswith(f"{PROJECT}:")}
    settings = load(raw, config["gcp:project"], now=CLOCK)
    assert settings.require_image_digests and all(images.parts(r)[2] for r in settings.images().values())
    assert not [w for w in settings.warnings() if "digest" in w]
    # Their stack files leave the two digests no public record gives as placeholders.
    unfilled = stack_file_config(stack, filled=False)[f"{PROJECT}:serving"]
    assert unfilled["image"].startswith(f"{images.VLLM_TPU.image}@<REPLACE-ME")
    assert "<REPLACE-ME" in unfilled["routingSidecar"]["image"]
    raw["serving"] = {**raw["serving"], "image": images.VLLM_TPU.image}
    with pytest.raises(ConfigError) as err:
        load(raw, config["gcp:project"], now=CLOCK)
    assert f"{PROJECT}:serving.image = '{images.VLLM_TPU.image}': a reference with its digest" in str(err.value)


def test_require_image_digests_covers_every_image_in_use() -> None:
    raw = merge(SMALLEST, {"requireImageDigests": True, "demos": {"image": "python:3.12.8"}})
    with pytest.raises(ConfigError) as err:
        load(raw, PROJECT_ID, now=CLOCK)
    message = str(err.value)
    for key in ("serving.image", "serving.routingSidecar.image", "demos.image"):
        assert f"{PROJECT}:{key} = " in message, key
    assert "serving.weightsDownload.image" not in message  # the Job is off, and its default is pinned
