import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.harness import Run, run_program


@pytest.fixture(scope="module")
def dev() -> Run:
    """The real program on the real Pulumi.dev.yaml (one run per test module)."""
    run = run_program()
    assert run.error is None, run.error
    return run
