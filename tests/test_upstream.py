"""The pinned upstream files: the list, where they are read from, the skip/fail rule, and the fetch command."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import upstream

PINNED = upstream.load()
LISTED = ("schemas", "reference", "charts", "provider-sources")  # whole folders of ../shared, every file listed
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


# --------------------------------------------------------------------------------------------- the list


def test_the_list_is_well_formed() -> None:
    paths = [f.path for f in PINNED]
    assert len(paths) == len(set(paths)) and paths == sorted(paths)
    for f in PINNED:
        assert re.fullmatch(r"[0-9a-f]{64}", f.sha256), f.path
        # Raw file at a release tag or a full commit, never a branch that moves.
        match = re.fullmatch(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/([^/]+)/.+", f.url)
        assert match, f.url
        assert re.fullmatch(r"v\d+\.\d+\.\d+|[0-9a-f]{40}", match[1]), f.url


def test_the_list_covers_every_directory_the_tests_read() -> None:
    dirs = ("schemas/crds", "schemas/monitoring", "schemas/charts", "schemas/pulumi", "reference/codelab", "charts")
    for prefix in (*dirs, "provider-sources"):
        assert upstream.under(prefix), prefix


def test_the_list_and_the_upstream_files_agree() -> None:
    """Same names, same hashes: the pinned list and ../shared (this project's CI copy) cannot drift.

    Elsewhere (the cache, or $GKE_TPU_SLICING_UPSTREAM) every listed file must be there with its hash.
    """
    base = upstream.require(*LISTED)  # every listed file, hash checked (skips offline)
    upstream.require("upstream-next")  # the files used from upstream-next/ (only those are listed)
    if base != upstream.SHARED.resolve():
        return
    shared = {
        p.relative_to(base).as_posix(): upstream.sha256(p) for d in LISTED for p in (base / d).rglob("*") if p.is_file()
    }
    assert shared == {f.path: f.sha256 for f in PINNED if f.path.split("/")[0] in LISTED}


def test_a_file_in_shared_that_the_list_lacks_is_caught(monkeypatch, tmp_path: Path) -> None:
    base = upstream.require(*LISTED)
    copy = tmp_path / "shared"
    for d in (*LISTED, "upstream-next"):
        shutil.copytree(base / d, copy / d)
    monkeypatch.delenv(upstream.ROOT_ENV, raising=False)
    monkeypatch.setattr(upstream, "SHARED", copy)
    test_the_list_and_the_upstream_files_agree()  # an exact copy agrees
    (copy / "schemas/crds/unlisted.yaml").write_text("kind: CustomResourceDefinition\n")
    with pytest.raises(AssertionError, match="unlisted"):
        test_the_list_and_the_upstream_files_agree()


# --------------------------------------------------------------------------------------------- the root


@pytest.fixture
def no_shared(monkeypatch, tmp_path: Path) -> Path:
    """No ../shared and no variable: the cache under $XDG_CACHE_HOME is the root."""
    monkeypatch.delenv(upstream.ROOT_ENV, raising=False)
    monkeypatch.setattr(upstream, "SHARED", tmp_path / "no-shared")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gke-tpu-slicing" / "upstream"


def test_root_is_the_variable_then_shared_then_the_cache(monkeypatch, tmp_path: Path, no_shared: Path) -> None:
    assert upstream.root() == no_shared == upstream.fetch_dest()
    monkeypatch.setattr(upstream, "SHARED", tmp_path)
    assert upstream.root() == tmp_path.resolve()
    assert upstream.fetch_dest() == no_shared  # never into ../shared
    monkeypatch.setenv(upstream.ROOT_ENV, "some/dir")
    assert upstream.root() == (upstream.REPO / "some/dir").resolve() == upstream.fetch_dest()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert upstream.cache_dir() == tmp_path / ".cache" / "gke-tpu-slicing" / "upstream"


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("1", True), ("", False), ("false", False)])
def test_in_ci(monkeypatch, value: str, expected: bool) -> None:
    monkeypatch.setenv("CI", value)
    assert upstream.in_ci() is expected


def test_require_skips_with_one_line_and_fails_in_ci(monkeypatch, no_shared: Path) -> None:
    for f in upstream.under("reference/codelab")[1:]:  # all but one there, but empty
        (no_shared / f.path).parent.mkdir(parents=True, exist_ok=True)
        (no_shared / f.path).write_bytes(b"")
    missing = upstream.under("reference/codelab")[0].path
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        upstream.require("reference/codelab")
    line = str(skipped.value)
    assert "\n" not in line and "python -m tests.upstream fetch" in line
    assert line.startswith(f"{len(PINNED)} of {len(PINNED)} pinned upstream files are not in {no_shared} (")
    assert "reference/codelab/: 6" in line and "schemas/crds/: " in line  # every pinned file, by folder
    assert "5 differ from their pinned sha256: reference/codelab/" in line  # the empty files are named
    # Another test needing other files skips with the very same line (pytest folds them into one).
    with pytest.raises(pytest.skip.Exception) as other:
        upstream.require("schemas/pulumi")
    assert str(other.value) == line
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=re.escape(missing)):
        upstream.require("reference/codelab")


def test_a_few_missing_files_are_named_one_by_one(tmp_path: Path) -> None:
    bad = {"schemas/crds/a.yaml": "missing", "schemas/pulumi/project.json": "differs from its pinned sha256"}
    line = upstream.skip_reason(tmp_path, bad, 29)
    assert line == (
        f"2 of 29 pinned upstream files are not in {tmp_path} (schemas/crds/a.yaml, schemas/pulumi/project.json "
        "(differs from its pinned sha256)); fetch them with `python -m tests.upstream fetch` "
        "(`python -m tests.upstream check` lists them)"
    )


SKIPPING_TESTS = """
import pytest

from tests import upstream


@pytest.mark.parametrize("n", range(4))
def test_codelab(n):
    upstream.require("reference/codelab")


@pytest.fixture
def crds():
    return upstream.path("schemas/crds")


def test_crds(crds):
    pass


def test_runs():
    pass
"""


def test_the_test_run_prints_one_summary_line_for_every_upstream_skip(tmp_path: Path) -> None:
    """The whole suite's output, offline with nothing cached: one SKIPPED line (with the files and the fetch
    command) for all the skips, and in CI the same tests fail instead."""
    (tmp_path / "test_offline.py").write_text(SKIPPING_TESTS)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env.update({upstream.ROOT_ENV: str(tmp_path / "empty"), "PYTHONPATH": str(upstream.REPO)})

    def pytest_run(**extra: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest"]
        argv += ["-c", str(upstream.REPO / "pyproject.toml"), "--rootdir", str(tmp_path)]
        argv.append(str(tmp_path / "test_offline.py"))
        return subprocess.run(argv, cwd=tmp_path, env={**env, **extra}, capture_output=True, text=True, timeout=120)

    done = pytest_run()
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1, done.stdout
    assert skipped[0].startswith("SKIPPED [5] ") and upstream.is_skip_reason(skipped[0])
    assert "`python -m tests.upstream fetch`" in skipped[0]
    assert f"{len(PINNED)} of {len(PINNED)} pinned upstream files are not in {tmp_path / 'empty'}" in skipped[0]
    assert "1 passed, 5 skipped" in done.stdout
    failed = pytest_run(CI="true")
    # The fixture's failure is an error of its test: every test that needs the files fails, none skips.
    assert failed.returncode == 1 and "4 failed, 1 passed, 1 error" in failed.stdout, failed.stdout
    assert "SKIPPED" not in failed.stdout


def test_require_names_only_listed_paths() -> None:
    with pytest.raises(ValueError, match=r"nothing in upstream_files\.toml"):
        upstream.require("schemas/unlisted")


def test_require_passes_when_every_file_verifies(monkeypatch, no_shared: Path) -> None:
    files = upstream.under("schemas/pulumi")
    body = b'{"type": "object"}'
    target = no_shared / files[0].path
    target.parent.mkdir(parents=True)
    target.write_bytes(body)
    pinned = [upstream.Pinned(files[0].path, files[0].url, hashlib.sha256(body).hexdigest())]
    monkeypatch.setattr(upstream, "load", lambda list_file=upstream.LIST: pinned)
    assert upstream.path("schemas/pulumi") == no_shared / "schemas/pulumi"


# --------------------------------------------------------------------------------------------- fetching


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def no_proxy(monkeypatch) -> None:
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture
def server(tmp_path: Path, no_proxy: None) -> Iterator[tuple[str, Path]]:
    """A static file server on 127.0.0.1 over a temporary directory; no internet involved."""
    served = tmp_path / "served"
    served.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(served)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", served
    finally:
        httpd.shutdown()
        httpd.server_close()


def _pin(base: str, served: Path, name: str, pinned_body: bytes, served_body: bytes | None) -> upstream.Pinned:
    if served_body is not None:
        (served / name).write_bytes(served_body)
    return upstream.Pinned(f"schemas/x/{name}", f"{base}/{name}", hashlib.sha256(pinned_body).hexdigest())


def test_fetch_writes_verified_files_and_refuses_tampered_ones(server: tuple[str, Path], tmp_path: Path) -> None:
    base, served = server
    good = _pin(base, served, "good.yaml", b"kind: Good\n", b"kind: Good\n")
    tampered = _pin(base, served, "tampered.yaml", b"kind: Real\n", b"kind: Evil\n")
    absent = _pin(base, served, "absent.yaml", b"x", None)
    dest = tmp_path / "cache"
    logged: list[str] = []
    errors = upstream.fetch(dest, [good, tampered, absent], log=logged.append)
    assert (dest / good.path).read_bytes() == b"kind: Good\n" and logged == [f"fetched {good.path}"]
    assert not (dest / tampered.path).exists() and not (dest / absent.path).exists()
    assert [e.split(":", 1)[0] for e in errors] == [tampered.path, absent.path]
    assert "has sha256" in errors[0] and "not written" in errors[0] and "404" in errors[1]
    assert [p.name for p in (dest / "schemas/x").iterdir()] == ["good.yaml"]  # no partial files left
    # Fixed upstream: a second run fetches only what is still missing.
    (served / "tampered.yaml").write_bytes(b"kind: Real\n")
    logged.clear()
    assert upstream.fetch(dest, [good, tampered], log=logged.append) == []
    assert logged == [f"fetched {tampered.path}"]
    # A local file that was changed since is fetched again.
    (dest / good.path).write_bytes(b"edited")
    assert upstream.fetch(dest, [good], log=logged.append) == [] and (dest / good.path).read_bytes() == b"kind: Good\n"


def test_the_fetch_command_exits_non_zero_on_a_mismatch(server: tuple[str, Path], tmp_path: Path) -> None:
    base, served = server
    good = _pin(base, served, "good.yaml", b"good", b"good")
    tampered = _pin(base, served, "tampered.yaml", b"real", b"evil")
    listing = tmp_path / "list.toml"
    listing.write_text(
        "".join(f'[[file]]\npath = "{f.path}"\nurl = "{f.url}"\nsha256 = "{f.sha256}"\n\n' for f in (good, tampered))
    )
    dest = tmp_path / "dest"
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "tests.upstream", *args, "--list", str(listing), "--dest", str(dest)]
        return subprocess.run(argv, cwd=upstream.REPO, env=env, capture_output=True, text=True, timeout=60)

    fetched = command("fetch")
    assert fetched.returncode == 1, fetched
    assert f"error: {tampered.path}: " in fetched.stderr and "not written" in fetched.stderr
    assert "(1/2 verified)" in fetched.stdout
    checked = command("check")
    assert checked.returncode == 1 and f"{tampered.path}: missing" in checked.stdout
    (served / "tampered.yaml").write_bytes(b"real")
    assert command("fetch").returncode == 0
    assert command("check").returncode == 0


def test_fetch_stops_at_the_first_network_error(tmp_path: Path, no_proxy: None) -> None:
    """Offline, the first failure says so and the rest are not tried (no timeout per file)."""
    with socket.socket() as probe:  # a port nothing listens on: connection refused at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    files = [upstream.Pinned(f"a/{i}", f"http://127.0.0.1:{port}/{i}", "0" * 64) for i in range(3)]
    errors = upstream.fetch(tmp_path, files, log=print)
    assert "cannot download" in errors[0] and all(": not tried (offline?" in e for e in errors[1:]), errors
