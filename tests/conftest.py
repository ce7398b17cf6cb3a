import sys
from collections.abc import Generator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import upstream
from tests.harness import CODELAB_MIX, Run, run_program


@pytest.fixture(scope="module")
def dev() -> Run:
    """The real program on the real Pulumi.dev.yaml (one run per test module)."""
    run = run_program()
    assert run.error is None, run.error
    return run


@pytest.fixture(scope="module")
def codelab() -> Run:
    """Dev with the codelab's whole mix: the super-slicing demo on beside serving (harness.CODELAB_MIX)."""
    run = run_program(CODELAB_MIX)
    assert run.error is None, run.error
    return run


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
