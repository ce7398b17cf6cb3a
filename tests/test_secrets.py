"""A secret's value never leaves the program: not in an error, a warning, a log line or a traceback.

A token-shaped value is fed through every path that can echo a value (an unknown key, a misplaced key, a
wrong type, a flat nested key, a structured key given a string, an unparsable `--set`, plain text in the
stack file) and through every entry point (the program under the mock engine, `plan`, `render`,
`import-file`); what each prints on stdout and stderr, and any exception, must not contain it.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.model.config.settings import SECRET_PATHS, secret_paths
from tests.harness import COMMANDS, rejected, run_program
from tests.stack_config import ROOT, P, fill_placeholders, merge

TOKEN = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234567890"  # the shape of a Hugging Face token, not a real one

# (case, stack-file config on top of the filled dev stack, extra command-line arguments)
PATHS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("unknown key", {f"{P}:hfTokn": TOKEN}, []),
    ("misplaced key", {f"{P}:serving": {"hfToken": TOKEN}}, []),
    ("misplaced deeper", {f"{P}:serving": {"router": {"token": TOKEN}}}, []),
    ("wrong type of the secret", {f"{P}:hfToken": {"value": TOKEN}}, []),
    ("a token where a number goes", {f"{P}:tpu": {"cubes": TOKEN}}, []),
    ("a token where a name goes", {f"{P}:cluster": {"name": TOKEN}}, []),
    ("flat nested key", {f"{P}:serving.hfToken": TOKEN}, []),
    ("plain text in the stack file", {f"{P}:hfToken": TOKEN}, []),
    ("structured key given a string", {f"{P}:observability": TOKEN}, []),
    ("--set of a list where a number goes", {}, ["--set", f"tpu.cubes=[{TOKEN}"]),
    ("--set without =", {}, ["--set", TOKEN]),
    ("--set of a bad key", {}, ["--set", f"{TOKEN}.x=1"]),
    ("--set of a map", {}, ["--set", f"serving={{a: {TOKEN}}}"]),
]


def run_command(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: dict[str, Any], *extra: str
) -> tuple[int | None, str]:
    """Command `name` on the filled dev stack file with `overrides`: its exit code and everything it printed."""
    (tmp_path / "stack").mkdir()
    config = fill_placeholders(yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"])
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "stack" / "Pulumi.yaml")
    (tmp_path / "stack" / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": merge(config, overrides)}))
    args = ["--stack", "dev", "--dir", str(tmp_path / "stack"), *extra]
    if name == "render":
        args += ["--out", str(tmp_path / "out")]
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    raised = ""
    with contextlib.suppress(SystemExit):
        try:
            code = COMMANDS[name](args, stdout=out, stderr=err)
        except Exception as exc:
            raised = f"{type(exc).__name__}: {exc}"
    captured = capsys.readouterr()
    return code, out.getvalue() + err.getvalue() + captured.out + captured.err + raised


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(("case", "overrides", "extra"), PATHS, ids=[c[0] for c in PATHS])
def test_no_command_prints_the_token(
    case: str,
    overrides: dict[str, Any],
    extra: list[str],
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text = run_command(command, tmp_path, capsys, overrides, *extra)
    assert TOKEN not in text, f"{command}, {case}: the token was printed:\n{text}"
    assert "Traceback" not in text and code in (1, 2), f"{command}, {case}: exit {code}:\n{text}"
    assert text.count("error:") >= 1, text


@pytest.mark.parametrize(
    ("case", "overrides", "extra"), [p for p in PATHS if not p[2]], ids=[c[0] for c in PATHS if not c[2]]
)
def test_the_program_never_prints_the_token(case: str, overrides: dict[str, Any], extra: list[str]) -> None:
    run = run_program(overrides)
    text = rejected(run) + "".join(message for _, message in run.logs)
    assert TOKEN not in text, f"{case}: the token was printed:\n{text}"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_plaintext_secret_is_refused_by_every_command_with_the_fix(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = run_command(command, tmp_path, capsys, {f"{P}:hfToken": TOKEN})
    assert code == 1, text
    assert f"{P}:hfToken = [secret]: a secret stored in plain text" in text
    assert "pulumi config set --secret hfToken" in text


def test_the_program_refuses_a_plaintext_secret_with_the_fix() -> None:
    message = rejected(
        run_program({f"{P}:hfToken": TOKEN}),
        f"{P}:hfToken = [secret]: a secret stored in plain text",
        "pulumi config set --secret hfToken",
    )
    assert TOKEN not in message


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_encrypted_secret_and_a_set_secret_are_accepted(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = run_command(
        command, tmp_path, capsys, {f"{P}:hfToken": {"secure": "v1:AAAA"}}, "--set", f"hfToken={TOKEN}"
    )
    assert code == 0, text
    assert TOKEN not in text
    if command == "render":
        rendered = "".join(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())
        assert TOKEN not in rendered


def test_secret_keys_come_from_the_model_types() -> None:
    from pydantic import SecretStr

    from components.model.config.checks import Model

    class Inner(Model):
        api_key: SecretStr | None = None
        plain: str = "x"

    class Outer(Model):
        inner: Inner = Inner()
        token: SecretStr

    assert secret_paths(Outer) == {"inner.apiKey", "token"}
    assert "hfToken" in SECRET_PATHS


def test_secret_value_is_never_echoed_in_errors() -> None:
    # A secret set under a misspelt key is still a secret: the error names the key, not the value.
    run = run_program(secrets={f"{P}:hfTokn": "hf_typo_secret"})
    message = rejected(run, "gke-tpu-slicing:hfTokn: unknown key; did you mean gke-tpu-slicing:hfToken?")
    assert "hf_typo_secret" not in message
