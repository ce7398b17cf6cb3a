import pickle
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.cli import charts, upstream_files
from components.cli.render import redact
from tests import harness, upstream
from tests.harness import Run, run_program
from tests.stack_config import CODELAB_MIX, OPT_IN_ADDONS

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _loopback_only(url: str, *args: Any, **kwargs: Any) -> Any:
    """The tests download nothing: the offline commands' fetch reaches a file server on this machine, or fails as
    with no network (tests that serve the files themselves put their own opener in)."""
    if urllib.parse.urlsplit(url).hostname not in _LOOPBACK:
        raise urllib.error.URLError(f"no network in the tests ({url})")
    return urllib.request.urlopen(url, *args, **kwargs)


upstream_files.OPENER = _loopback_only

# The session's shared runs, as recorded: a test that changes one fails, and the run is put back for the next.
_SHARED: dict[str, tuple[Run, bytes]] = {}


def _shared(name: str, run: Run) -> Run:
    assert run.error is None, run.error
    _SHARED[name] = (run, pickle.dumps(run))
    return run


@pytest.fixture(scope="session")
def dev() -> Run:
    """The real program on the real Pulumi.dev.yaml, placeholders filled (one run per session)."""
    return _shared("dev", run_program())


@pytest.fixture(scope="session")
def staging() -> Run:
    return _shared("staging", run_program(stack="staging"))


@pytest.fixture(scope="session")
def prod() -> Run:
    return _shared("prod", run_program(stack="prod"))


@pytest.fixture(scope="session")
def codelab() -> Run:
    """Dev with the codelab's whole mix: the super-slicing demo on beside serving (stack_config.CODELAB_MIX)."""
    return _shared("codelab", run_program(CODELAB_MIX))


@pytest.fixture(autouse=True)
def _recorded_runs(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that monkeypatches runs the program afresh (its run must see the patch); a test that changed a
    shared run fails, naming it."""
    harness.CACHING = "monkeypatch" not in request.fixturenames
    yield
    harness.CACHING = True
    for name in set(request.fixturenames) & _SHARED.keys():
        run, recorded = _SHARED[name]
        if pickle.dumps(run) != recorded:
            run.__dict__.update(pickle.loads(recorded).__dict__)
            _SHARED[name] = (run, pickle.dumps(run))  # a set's order may differ once rebuilt
            pytest.fail(f"the test changed the session's shared `{name}` run: copy it (copy.deepcopy) first")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport]:
    """Every skip for missing upstream files, one location: the short summary folds them into one line.

    Their reasons are the same line already (`upstream.skip_reason`), but pytest reports a skip raised in a
    fixture at the test's own location, and folds only skips of the same location: without this, one
    `SKIPPED` line per test module (or per test) repeats the same files.
    """
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and upstream.is_skip_reason(str(report.longrepr[2])):
        report.longrepr = (upstream.__file__, None, report.longrepr[2])
    return report


@pytest.fixture(scope="session")
def releases() -> list[charts.Release]:
    run = run_program(OPT_IN_ADDONS)  # dev with every chart it can install
    assert run.error is None, run.error
    return charts.releases(run.registrations, redact)


@pytest.fixture(scope="session")
def rendered(releases: list[charts.Release]) -> dict[str, charts.Rendered]:
    upstream.require("charts")
    return {r.resource: charts.render_release(r) for r in releases}
