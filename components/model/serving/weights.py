"""The model's weights in `serving.weightsBucket`: the Hugging Face cache layout, the model's size, and what
makes a prefix servable.

`serving.modelPath` is `models--<org>--<name>/snapshots/<revision>` (Hugging Face's cache layout,
huggingface/huggingface_hub src/huggingface_hub/file_download.py `repo_folder_name`: "models" + "--" joined
repo id, then `snapshots/<commit>`), so the repository and the pinned revision are read from it and from
`serving.model`, never typed again. Pure model code: no Pulumi.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# A Hugging Face commit: 40 hex digits (what `hf download --revision` and the cache's snapshot folders take).
_SNAPSHOT_RE = re.compile(r"^(?P<cache>(?:.+/)?models--[^/]+)/snapshots/(?P<revision>[0-9a-f]{40})$")
# What vLLM needs to load a safetensors checkpoint: its config and at least one shard.
REQUIRED_FILE = "config.json"
WEIGHTS_SUFFIX = ".safetensors"
# How to fill the bucket, for the messages (docs/serving.md).
PREPARE_DOC = "docs/serving.md#prepare-the-weights"
SCRIPTS = Path(__file__).resolve().parent.parent.parent.parent / "manifests"
CHECK_SCRIPT = SCRIPTS / "weights_check.py"
DOWNLOAD_SCRIPT = SCRIPTS / "weights_download.py"


@dataclass(frozen=True)
class ModelFacts:
    """What the program needs to know about a model's files: their total size, and where that comes from."""

    total_bytes: int
    source: str

    @property
    def gigabytes(self) -> int:
        return math.ceil(self.total_bytes / 1e9)


# The models the program knows the size of. 397 B parameters in FP8 E4M3 (one byte each; the gates, norms and
# embeddings stay BF16): about 397 GB from the parameter count alone, "about 400GB" of safetensors per
# https://awesomeagents.ai/news/qwen-3-5-fp8-weights-vllm-sglang. An estimate: not read from the repository's
# file listing (https://huggingface.co/Qwen/Qwen3.5-397B-A17B-FP8/tree/main, each shard's size); it only sizes
# the download Job's deadline, at the slowest allowed rate.
MODEL_FACTS: dict[str, ModelFacts] = {
    "Qwen/Qwen3.5-397B-A17B-FP8": ModelFacts(
        400 * 10**9, "397 B parameters in FP8: about 400 GB (an estimate from the parameter count and a news article)"
    )
}
# For a model outside the table: sized as the largest one the program knows (it only bounds the Job's deadline).
UNKNOWN_MODEL = ModelFacts(max(f.total_bytes for f in MODEL_FACTS.values()), "not in the table: sized as the largest")

# The slowest sustained copy the download Job is allowed before its deadline: one stream from Hugging Face's CDN
# into one Cloud Storage upload (both typically give 100-500 MB/s to a VM; an estimate, not a measurement).
MIN_THROUGHPUT_BYTES_S = 50 * 10**6
# The typical rate, for the benchmarks' time-to-ready model (an estimate).
TYPICAL_THROUGHPUT_BYTES_S = 200 * 10**6
# Failed pods the Job retries (each retry resumes: files already in the bucket at their size are skipped).
BACKOFF_LIMIT = 3
# Scheduling and image pull before the copy starts, added to Pulumi's wait.
JOB_START_BUDGET_S = 600


def facts(model: str) -> ModelFacts:
    return MODEL_FACTS.get(model, UNKNOWN_MODEL)


@dataclass(frozen=True)
class Snapshot:
    """Where a pinned snapshot lives in the bucket, and which repository and revision fill it."""

    bucket: str
    repo: str  # org/name on Hugging Face
    cache: str  # models--org--name (with any folder in front of it)
    revision: str

    @property
    def prefix(self) -> str:
        """The snapshot folder inside the bucket (serving.modelPath)."""
        return f"{self.cache}/snapshots/{self.revision}"

    @property
    def uri(self) -> str:
        return f"gs://{self.bucket}/{self.prefix}"


def cache_folder(repo: str) -> str:
    """Hugging Face's cache folder of a model repository (file_download.py `repo_folder_name`)."""
    return "--".join(["models", *repo.split("/")])


def snapshot(bucket: str, model: str, model_path: str) -> Snapshot | None:
    """The snapshot `model_path` names, if it is the cache layout of `model`; else None."""
    match = _SNAPSHOT_RE.match(model_path)
    if not match or match["cache"].rsplit("/", 1)[-1] != cache_folder(model):
        return None
    return Snapshot(bucket, model, match["cache"], match["revision"])


def layout_problem(model: str, model_path: str) -> str | None:
    """Why `model_path` cannot be filled from Hugging Face for `model`, or None."""
    if snapshot("b", model, model_path) is not None:
        return None
    return (
        f"{cache_folder(model)}/snapshots/<40-hex revision> (optionally under a folder): the download fills Hugging "
        f"Face's cache layout of serving.model ({model}) at the revision this path pins"
    )


def listing_problem(bucket: str, model_path: str, names: Iterable[str]) -> str | None:
    """Why the objects listed under `model_path/` cannot be served, or None: config.json and a shard are needed."""
    prefix = model_path.rstrip("/") + "/"
    files = {n[len(prefix) :] for n in names if n.startswith(prefix)}
    missing = []
    if REQUIRED_FILE not in files:
        missing.append(REQUIRED_FILE)
    if not any(f.endswith(WEIGHTS_SUFFIX) for f in files):
        missing.append(f"*{WEIGHTS_SUFFIX}")
    if not missing:
        return None
    found = f"{len(files)} objects, no {' and no '.join(missing)}" if files else "no objects"
    return f"gs://{bucket}/{prefix} holds {found}"


def deadline_seconds(model: str) -> int:
    """The Job's activeDeadlineSeconds: the whole model at the slowest allowed rate, every retry included."""
    return math.ceil(facts(model).total_bytes / MIN_THROUGHPUT_BYTES_S)


def typical_download_seconds(model: str) -> int:
    return math.ceil(facts(model).total_bytes / TYPICAL_THROUGHPUT_BYTES_S)
