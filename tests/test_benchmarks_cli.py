"""`python -m benchmarks`: help per option, one-line errors for bad arguments (no benchmark is run here)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import pytest

from benchmarks import __main__ as bench
from tests.stack_config import ROOT


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_help_names_the_command_and_explains_every_option() -> None:
    done = run("--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m benchmarks ")
    assert [action.option_strings for action in bench.parser()._actions if not action.help] == []
    assert [option for option in ("--repeats", "--cubes", "--json") if option not in done.stdout] == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--cubes", "two"], "argument --cubes: 'two' is not a whole number"),
        (["--cubes", "2,x"], "argument --cubes: '2,x': 'x' is not a whole number"),
        (["--cubes", "2,0"], "every count must be at least 1"),
        (["--cubes", "2,2"], "2 is listed twice"),
        (["--cubes", ""], "'' is not a whole number"),
        (["--repeats", "0"], "argument --repeats: 0: must be at least 1"),
        (["--repeats", "many"], "argument --repeats: 'many' is not a whole number"),
        (["--cores", "2"], "unrecognized arguments: --cores 2"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_status_2(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        bench.parser().parse_args(args)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.count("\n") == 1 and err.startswith("python -m benchmarks: error: "), err
    assert expected in err and "see `python -m benchmarks --help`" in err


def test_the_command_itself_ends_without_a_traceback() -> None:
    done = run("--cubes", "two")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "python -m benchmarks: error: argument --cubes: 'two' is not a whole number; give cube counts separated "
        "by commas, e.g. 2,64 (see `python -m benchmarks --help`)"
    ]


def test_good_arguments_parse() -> None:
    args = bench.parser().parse_args(["--repeats", "1", "--cubes", "2,64", "--json"])
    assert (args.repeats, args.cubes, args.json) == (1, [2, 64], True)
    defaults = bench.parser().parse_args([])
    assert (defaults.repeats, defaults.cubes, defaults.json) == (5, [1, 2, 8, 32, 64, 144], False)


def test_every_name_the_benchmarks_import_from_the_tests_exists() -> None:
    # Their imports inside functions run only minutes into a run: one left behind by a split of the tests'
    # modules fails `python -m benchmarks` at its last step.
    missing = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
                module = importlib.import_module(node.module)
                missing += [f"{path.name}: {node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)]
    assert missing == []
