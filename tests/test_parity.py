"""Semantic parity with the reference manifests (../shared/reference/codelab), field by field.

Every difference must be one of the deliberate improvements listed in IMPROVEMENTS (and in the
README); a difference that is not listed fails, and so does a listed one that disappears.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import upstream
from tests.harness import Run, normalize, run_program

NAMESPACE = "llm-d-pd-disaggregation"
BUCKET = "gemma3-weights"

# path -> (ours, reference, why). Paths are "<kind>/<name>:<dotted path>".
IMPROVEMENTS: dict[str, tuple[Any, Any, str]] = {
    "ClusterQueue/cq:spec.resourceGroups[0].flavors[0].resources[0].nominalQuota": (
        "128",
        "999999",
        "TPU quota = chips the node pools provide (2 x 64), so Kueue's quota preemption matches the hardware",
    ),
}


def reference_dir() -> Path:
    return upstream.path("reference/codelab")


def load_reference(name: str) -> list[dict[str, Any]]:
    text = (reference_dir() / name).read_text()
    text = text.replace("${NAMESPACE}", NAMESPACE).replace("MODEL_WEIGHT_BUCKET", BUCKET)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def diff(ours: Any, ref: Any, path: str = "") -> dict[str, tuple[Any, Any]]:
    if isinstance(ours, dict) and isinstance(ref, dict):
        out: dict[str, tuple[Any, Any]] = {}
        for key in sorted(set(ours) | set(ref)):
            sub = f"{path}.{key}" if path else key
            out.update(diff(ours.get(key, "<absent>"), ref.get(key, "<absent>"), sub))
        return out
    if isinstance(ours, list) and isinstance(ref, list) and len(ours) == len(ref):
        out = {}
        for i, (a, b) in enumerate(zip(ours, ref, strict=True)):
            out.update(diff(a, b, f"{path}[{i}]"))
        return out
    return {} if ours == ref else {path: (ours, ref)}


@pytest.fixture(scope="module")
def dev_with_token() -> Run:
    # The reference always mounts HF_TOKEN; with a token configured the program does too.
    run = run_program(secrets={"gke-tpu-slicing:hfToken": "hf_parity_token"})
    assert run.error is None, run.error
    return run


def ours_by_kind_and_name(run: Run) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for reg in run.registrations:
        if reg.custom and reg.type.startswith("kubernetes:") and "kind" in reg.inputs:
            obj = normalize(reg.plain())
            out[(obj["kind"], obj["metadata"]["name"])] = obj
    return out


@pytest.mark.parametrize(
    "reference",
    [
        "kueue-resources.yaml.template",
        "workload-priority-class.yaml",
        "kueue-jobset-simple-subslicing.yaml",
        "kueue-jobset-simple-superslicing.yaml",
        "kueue-lws-prefill-model-streamer.yaml",
        "kueue-lws-decode-model-streamer.yaml",
    ],
)
def test_matches_reference_except_documented_improvements(dev_with_token: Run, reference: str) -> None:
    ours = ours_by_kind_and_name(dev_with_token)
    docs = load_reference(reference)
    assert docs
    for ref in docs:
        key = (ref["kind"], ref["metadata"]["name"])
        assert key in ours, f"the program declares no {key}"
        found = {f"{key[0]}/{key[1]}:{p}": v for p, v in diff(ours[key], ref).items()}
        expected = {p: (o, r) for p, (o, r, _) in IMPROVEMENTS.items() if p.startswith(f"{key[0]}/{key[1]}:")}
        assert found == expected, f"{reference}: undocumented differences"


def test_reference_has_no_object_the_program_lacks(dev_with_token: Run) -> None:
    ours = ours_by_kind_and_name(dev_with_token)
    for ref_file in sorted(reference_dir().iterdir()):
        for ref in load_reference(ref_file.name):
            assert (ref["kind"], ref["metadata"]["name"]) in ours, ref_file.name
