"""Command-line errors of the offline commands: one clear line, exit 2 for usage, never a traceback."""

from __future__ import annotations

import io
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.harness import COMMANDS
from tests.stack_config import ROOT, fill_placeholders, set_arguments

# (--set argument, the key the error names, what it says is wrong)
BAD_SETS = [
    ("tpu.cubes", "'tpu.cubes'", "expected KEY=VALUE"),
    ("=4", "'=4'", "expected KEY=VALUE"),
    ("tpu..cubes=4", "'tpu..cubes'", "not a config key"),
    ("tpu.cubes[x]=4", "'tpu.cubes[x]'", "not a config key"),
    ("tpu.reservation[0]=x", "tpu.reservation[0]", "does not fit"),
    ("observability.notificationChannels[99999]=x", "'observability.notificationChannels[99999]'", "not a config key"),
]


def run(command: str, args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    if command == "render":
        args = [*args, "--out", str(tmp_path / "out")]
    code = COMMANDS[command](args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(("assignment", "key", "problem"), BAD_SETS, ids=[b[0] for b in BAD_SETS])
def test_a_bad_set_is_one_line_naming_the_key_and_exits_2(
    command: str, assignment: str, key: str, problem: str, tmp_path: Path
) -> None:
    code, out, err = run(command, ["--stack", "dev", "--set", assignment], tmp_path)
    assert (code, out) == (2, ""), err
    (line,) = err.splitlines()
    assert line.startswith(f"error: --set {key}:") and problem in line, err
    assert "e.g." in line or "; " in line, f"no fix in {err!r}"
    assert not (tmp_path / "out").exists()


# (--set argument, what the program's check says of the value): VALUE is the text `pulumi config set --path` stores,
# never YAML, so a value of the wrong shape is the same one-line refusal `pulumi preview` prints, exit 1.
WRONG_VALUES = [
    ("tpu.cubes=[2, 4]", "gke-tpu-slicing:tpu.cubes = '[2, 4]': Input should be a valid integer"),
    ("tpu={cubes: 4}", "gke-tpu-slicing:tpu = '{cubes: 4}': a structured object (YAML map)"),
    ("demos.subslicing.enabled=maybe", "gke-tpu-slicing:demos.subslicing.enabled = 'maybe'"),
]


@pytest.mark.parametrize(("assignment", "line"), WRONG_VALUES, ids=[w[0] for w in WRONG_VALUES])
def test_a_value_of_the_wrong_shape_is_the_programs_refusal(assignment: str, line: str, tmp_path: Path) -> None:
    code, out, err = run("plan", ["--stack", "dev", *set_arguments("dev"), "--set", assignment], tmp_path)
    assert (code, out) == (1, ""), err
    assert err.startswith("error: invalid stack configuration (") and f"\n  {line}" in err, err


def test_a_secret_value_the_program_refuses_is_not_echoed(tmp_path: Path) -> None:
    args = ["--stack", "dev", *set_arguments("dev"), "--set", "hfToken.x=my secret value"]
    code, _, err = run("plan", args, tmp_path)
    assert code == 1 and "my secret value" not in err and "hfToken" in err, err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_placeholder_error_of_a_command_names_set_quoted_for_the_shell(command: str, tmp_path: Path) -> None:
    # The staging stack ships placeholders for the project and the reservation.
    code, _, err = run(command, ["--stack", "staging"], tmp_path)
    assert code == 1, err
    assert "gcp:project = '<REPLACE-ME" in err
    hint = err.splitlines()[-1]
    assert hint.startswith("or, for this command alone (no Pulumi CLI needed): --set gcp:project=VALUE ")
    assert "--set tpu.reservation.name=VALUE" in hint
    assert "pulumi config set --path 'tpu.reservation.name' <value>" in err
    # zsh expands an unquoted `[0]` as a glob ("no matches found"): the list paths staging's placeholders have
    # must reach the command as one word each, pasted into any shell.
    assert "--set 'observability.notificationChannels[0]=VALUE'" in hint
    assert "--set 'cluster.controlPlane.authorizedNetworks[0].cidrBlock=VALUE'" in hint
    words = shlex.split(hint.split(": ", 1)[1])
    assert "observability.notificationChannels[0]=VALUE" in words


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_flat_nested_key_gets_a_hint_naming_path(command: str, tmp_path: Path) -> None:
    # What `pulumi config set tpu.cubes 4` (without --path) stores in a stack file.
    config = fill_placeholders(yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"])
    config["gke-tpu-slicing:tpu.cubes"] = "4"
    directory = tmp_path / "stack"
    directory.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", directory / "Pulumi.yaml")
    (directory / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": config}))
    code, _, err = run(command, ["--stack", "dev", "--dir", str(directory)], tmp_path)
    assert code == 1, err
    assert "gke-tpu-slicing:tpu.cubes: a nested key set without --path" in err
    assert "pulumi config set --path 'tpu.cubes' <value>" in err


def test_a_good_set_still_works(tmp_path: Path) -> None:
    code, out, err = run("plan", ["--stack", "dev", *set_arguments("dev"), "--set", "tpu.cubes=3"], tmp_path)
    assert code == 0, err
    assert "stack dev" in out


def test_every_command_the_docs_name_is_registered() -> None:
    from components.__main__ import COMMANDS as ALL

    pages = "".join(page.read_text(encoding="utf-8") for page in [ROOT / "README.md", *ROOT.glob("docs/*.md")])
    named = set(re.findall(r"python -m components ([a-z][-a-z]*)", pages))
    assert "import-file" in named and named <= set(ALL), named - set(ALL)


def test_the_real_process_prints_one_line_and_exits_2() -> None:
    # The whole path a user runs, python -m components, in a process of its own: no traceback, no token.
    token = "hf_" + "Q" * 34
    proc = subprocess.run(
        [sys.executable, "-m", "components", "plan", "--stack", "dev", "--set", f"hfToken:{token}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: --set [secret]:"), proc.stderr
    assert token not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
