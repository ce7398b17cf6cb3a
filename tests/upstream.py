"""The upstream files the tests read (CRDs, chart values, reference manifests, the Pulumi project schema).

They are pinned in ``tests/upstream_files.toml`` (URL at a tag or commit, sha256) and read from one root:

1. ``$GKE_TPU_SLICING_UPSTREAM`` when set (relative paths are resolved against the repository root);
2. else ``../shared`` next to the repository, when it exists (this project's CI, which has no internet);
3. else the cache ``$XDG_CACHE_HOME/gke-tpu-slicing/upstream`` (default ``~/.cache/...``), outside the tree,
   which ``python -m tests.upstream fetch`` fills (and verifies) from the pinned URLs.

A test asks for what it needs with `require` (a directory or file, relative to the root): when a pinned file
under it is missing or differs from its pinned hash, the test skips, or fails where ``$CI`` is set. Every skip
has the same one-line reason (which files are not there, and the fetch command), so pytest's short summary
shows one ``SKIPPED [N]`` line however many tests skip.

Commands (run from the repository root)::

    python -m tests.upstream fetch    # download what is missing into $GKE_TPU_SLICING_UPSTREAM or the cache
    python -m tests.upstream check    # print the root; exit 1 when a pinned file is missing or differs
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

# The reader the offline chart render shares; the tests use these names from here.
from components.cli.upstream_files import (
    FETCH_COMMAND,
    LIST,
    ROOT_ENV,
    SHARED,
    fetch,
    fetch_dest,
    load,
    problems,
    under,
)
from components.cli.upstream_files import REPO as REPO
from components.cli.upstream_files import Pinned as Pinned
from components.cli.upstream_files import cache_dir as cache_dir
from components.cli.upstream_files import from_env as from_env
from components.cli.upstream_files import root as _root
from components.cli.upstream_files import sha256 as sha256

_SKIP_MARK = " pinned upstream files are not in "
_FALSY = {"", "0", "false", "no", "off", "n", "f"}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in _FALSY


def root() -> Path:
    return _root(SHARED)


def skip_reason(base: Path, bad: dict[str, str], total: int) -> str:
    """One line for every skip (all the pinned files not usable under ``base``, not only a test's own), so pytest's
    short summary (``-ra``, on by default here) folds the skips into one ``SKIPPED [N]`` line."""
    altered = sorted(p for p, why in bad.items() if why != "missing")
    if len(bad) <= 5:
        which = ", ".join(f"{p} ({bad[p]})" if p in altered else p for p in sorted(bad))
    else:
        groups: dict[str, int] = {}
        for p in sorted(bad):
            folder = "/".join(p.split("/")[:2])
            groups[folder] = groups.get(folder, 0) + 1
        which = ", ".join(f"{folder}/: {n}" for folder, n in groups.items())
        if altered:
            which += f"; {len(altered)} differ from their pinned sha256: " + ", ".join(altered[:5])
            which += ", ..." if len(altered) > 5 else ""
    return (
        f"{len(bad)} of {total}{_SKIP_MARK}{base} ({which}); "
        f"fetch them with `{FETCH_COMMAND}` (`python -m tests.upstream check` lists them)"
    )


def is_skip_reason(text: str) -> bool:
    """True for a skip `require` raised (tests/conftest.py gives them all one location, so they fold)."""
    return _SKIP_MARK in text and FETCH_COMMAND in text


def require(*prefixes: str) -> Path:
    """The root, once every pinned file under ``prefixes`` is there with its hash; else skip with `skip_reason`, or
    where ``$CI`` is set fail naming this test's own files."""
    import pytest

    base = root()
    wanted = [f for prefix in prefixes for f in under(prefix, load())]
    if not wanted:
        raise ValueError(f"nothing in {LIST.name} is under {', '.join(prefixes)}")
    bad = problems(base, wanted)
    if not bad:
        return base
    if in_ci():
        listed = ", ".join(f"{p} ({why})" if why != "missing" else p for p, why in sorted(bad.items()))
        message = f"{len(bad)} upstream file(s) not in {base}: {listed}; fetch them with `{FETCH_COMMAND}`"
        pytest.fail(f"CI={os.environ.get('CI')}: {message}", pytrace=False)
    everything = load()
    pytest.skip(skip_reason(base, problems(base, everything), len(everything)))
    raise AssertionError("unreachable")  # pragma: no cover (pytest.skip raises)


def path(prefix: str) -> Path:
    """``root / prefix`` for a test, after `require` (skips or fails when files are missing)."""
    return require(prefix) / prefix


# --------------------------------------------------------------------------------------------- fetching
# The download itself is the offline commands' too (components/cli/upstream_files.py fetch).


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.upstream", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["fetch", "check"])
    parser.add_argument("--list", type=Path, default=LIST, help="the pinned list (default: %(default)s)")
    parser.add_argument("--dest", type=Path, help=f"fetch into this directory (default: ${ROOT_ENV} or the cache)")
    args = parser.parse_args(argv)
    files = load(args.list)
    if args.command == "check":
        base = args.dest or root()
        bad = problems(base, files)
        print(f"upstream files: {base} ({len(files) - len(bad)}/{len(files)} present and verified)")
        for name, why in sorted(bad.items()):
            print(f"  {name}: {why}")
        return 1 if bad else 0
    dest = args.dest or fetch_dest()
    errors = fetch(dest, files)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"upstream files: {dest} ({len(files) - len(errors)}/{len(files)} verified)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
