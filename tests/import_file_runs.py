"""`python -m components import-file` run in-process for the tests, and the dev stack's whole file, made once
per session for the modules that check it (a library, not a test module)."""

from __future__ import annotations

import functools
import io
import json
from typing import Any

from components.cli import import_file
from tests.harness import PROJECT_NUMBER
from tests.stack_config import set_arguments


def cli(*args: str) -> tuple[int, str, str]:
    """The command's exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    if "--dir" not in args and "dev" in args:  # the repository's dev stack: fill its placeholders
        args = (*args, *set_arguments("dev"))
    code = import_file.main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def import_json(*args: str) -> dict[str, Any]:
    code, out, err = cli(*args)
    assert code == 0, err
    return json.loads(out)


@functools.cache
def _dev_file() -> str:
    return json.dumps(import_json("--stack", "dev", "--project-number", PROJECT_NUMBER))


def dev_file() -> dict[str, Any]:
    """The dev stack's import file with every part and the project number: a private copy of the one run."""
    return json.loads(_dev_file())
