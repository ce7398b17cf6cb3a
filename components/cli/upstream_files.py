"""The pinned upstream files (tests/upstream_files.toml): where they are read from, whether they verify, and the
hash-checked download of the missing ones.

The offline chart render (charts.py) reads the chart sources through this reader and fetches the ones a render needs
on first use; tests/upstream.py adds the tests' side (skip or fail when files are missing) and the fetch command.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LIST = REPO / "tests" / "upstream_files.toml"
ROOT_ENV = "GKE_TPU_SLICING_UPSTREAM"
SHARED = REPO.parent / "shared"
FETCH_COMMAND = "python -m tests.upstream fetch"
TIMEOUT = 30  # seconds per download
# How a file is downloaded: urllib's opener (the tests put one in front that reaches nothing but 127.0.0.1).
OPENER: Callable[..., Any] = urllib.request.urlopen


@dataclass(frozen=True)
class Pinned:
    path: str  # relative to the root, e.g. "schemas/crds/kueue-v0.17.4_topologies.yaml"
    url: str
    sha256: str
    note: str = ""


def load(list_file: Path = LIST) -> list[Pinned]:
    """The pinned files, as listed (read again only when the list changes: a diff looks it up once per chart)."""
    return list(_load(list_file, list_file.stat().st_mtime_ns))


@functools.cache
def _load(list_file: Path, _mtime: int) -> tuple[Pinned, ...]:
    data = tomllib.loads(list_file.read_text())
    files = [Pinned(**entry) for entry in data.get("file", [])]
    for entry in files:
        if Path(entry.path).is_absolute() or ".." in Path(entry.path).parts:
            raise ValueError(f"{list_file}: path {entry.path!r} must be relative and inside the root")
    return tuple(files)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser() / "gke-tpu-slicing" / "upstream"


def from_env() -> Path | None:
    value = os.environ.get(ROOT_ENV, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else (REPO / path).resolve()


def root(shared: Path | None = None) -> Path:
    """Where the upstream files are read from: ``$GKE_TPU_SLICING_UPSTREAM``, ``../shared``, or the cache."""
    env = from_env()
    if env is not None:
        return env
    shared = SHARED if shared is None else shared
    return shared.resolve() if shared.is_dir() else cache_dir()


def fetch_dest() -> Path:
    """Where a fetch writes: never ``../shared`` (CI's read-only copy), the variable's directory or the cache."""
    return from_env() or cache_dir()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.cache
def _problem(file: Path, expected: str, _mtime: float) -> str | None:
    return None if sha256(file) == expected else "differs from its pinned sha256"


def problems(base: Path, files: Sequence[Pinned]) -> dict[str, str]:
    """``{path: what is wrong}`` for each pinned file that is missing under ``base`` or has another hash."""
    out = {}
    for entry in files:
        file = base / entry.path
        if not file.is_file():
            out[entry.path] = "missing"
            continue
        problem = _problem(file, entry.sha256, file.stat().st_mtime)
        if problem:
            out[entry.path] = problem
    return out


def under(prefix: str, files: Sequence[Pinned] | None = None) -> list[Pinned]:
    """The pinned files at or under ``prefix`` (a file or directory relative to the root)."""
    prefix = prefix.strip("/")
    return [f for f in (load() if files is None else files) if f.path == prefix or f.path.startswith(prefix + "/")]


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fetch(dest: Path, files: Sequence[Pinned], log: Callable[[str], object] = print) -> list[str]:
    """Download every pinned file missing under ``dest`` or with another hash, and write it (atomically) only when
    its bytes have the pinned sha256. Returns one error per file not fetched or not verified."""
    errors = []
    todo = problems(dest, files)
    offline = None
    for entry in files:
        if entry.path not in todo:
            continue
        if offline is not None:  # no network: do not wait for a timeout per file
            errors.append(f"{entry.path}: not tried ({offline})")
            continue
        try:
            with OPENER(entry.url, timeout=TIMEOUT) as response:
                data = response.read()
        except OSError as err:
            errors.append(f"{entry.path}: cannot download {entry.url}: {err}")
            if not isinstance(err, urllib.error.HTTPError):  # no route, DNS, timeouts: the network, not this file
                offline = f"offline? {err}"
            continue
        got = hashlib.sha256(data).hexdigest()
        if got != entry.sha256:
            errors.append(f"{entry.path}: {entry.url} has sha256 {got}, pinned {entry.sha256}; not written")
            continue
        _write_atomically(dest / entry.path, data)
        log(f"fetched {entry.path}")
    return errors
