"""The offline commands on a stack file with placeholders: the refusal names
`--set`, and the flags it prints, with values, make the same command run (what docs/offline.md tells a newcomer)."""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from components.cli import diff, import_file, plan, render
from components.model.config.settings import PROJECT
from tests.stack_config import PLACEHOLDER_VALUES, ROOT, STACKS

Main = Callable[..., int]


def run(main: Main, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def hint_flags(err: str) -> list[str]:
    """The `--set KEY=VALUE` flags of the refusal's last line, with the tests' values for VALUE."""
    *_, last = err.strip().splitlines()
    assert last.startswith("or, for this command alone (no Pulumi CLI needed): --set "), err
    flags = shlex.split(last.split(": ", 1)[1])
    filled = []
    for flag in flags:
        if flag == "--set":
            filled.append(flag)
            continue
        key, value = flag.split("=", 1)
        assert value == "VALUE", flag
        full = key if key.startswith("gcp:") else f"{PROJECT}:{key}"
        filled.append(f"{key}={PLACEHOLDER_VALUES[full]}")
    return filled


@pytest.mark.parametrize("stack", STACKS)
def test_plan_names_set_for_every_placeholder_and_its_flags_work(stack: str) -> None:
    code, _, err = run(plan.main, ["--stack", stack])
    assert code == 1 and err.startswith("error: invalid stack configuration")
    placeholders = re.findall(r"^  (\S+) = '[^'\n]*<REPLACE-ME", err, flags=re.M)
    flags = hint_flags(err)
    assert [f.split("=")[0] for f in flags[1::2]] == [p.removeprefix(f"{PROJECT}:") for p in placeholders]
    code, out, err = run(plan.main, ["--stack", stack, *flags])
    assert code == 0, err
    assert "TPU plan:" in out


def test_no_hint_when_no_placeholder_is_left() -> None:
    values = ("gcp:project=p-1234", "tpu.reservation.name=r", "serving.weightsBucket=b", "network.mtu=99999")
    flags = [word for value in values for word in ("--set", value)]
    code, _, err = run(plan.main, ["--stack", "dev", *flags])
    assert code == 1 and "network.mtu" in err and "--set" not in err


def test_the_reservation_example_of_offline_md_runs_as_pasted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The page's heredoc and command, run from a directory holding only the file they write: a sub-block the
    # block lists but the file omits, or a pool on another project's path, would stop the plan.
    page = (ROOT / "docs" / "offline.md").read_text(encoding="utf-8")
    section = page[page.index("### The reservation, offline") :]
    script = re.search(
        r"```bash\ncat > reservation\.json <<'EOF'\n(.*?)\nEOF\n(python -m components plan .*?)\n```", section, re.S
    )
    assert script, "offline.md: the --reservation example (heredoc, then the plan command) is missing"
    (tmp_path / "reservation.json").write_text(script.group(1), encoding="utf-8")
    words = shlex.split(script.group(2).replace("\\\n", " "))
    assert words[:4] == ["python", "-m", "components", "plan"]
    monkeypatch.chdir(tmp_path)
    code, out, err = run(plan.main, words[4:])  # --dir defaults to the repository, whatever the cwd
    assert code == 0, err
    shown = re.search(r"```\n((?:placement: .*\n)*SUB-BLOCKS: .*?)\n```", section, re.S)
    assert shown, "offline.md: the example's output is missing"
    for line in shown.group(1).splitlines():
        assert line in out.splitlines(), (line, out)


PLAN_BLOCK = re.compile(r"```\n\$ python -m components plan (--stack dev[^\n]*)\n(.*?)\n```", re.S)


def test_the_plan_reports_of_offline_md_are_what_plan_prints_for_dev() -> None:
    """The page shows dev's plan as a newcomer gets it: a change of dev's stack file (the demos it runs) changes
    the report, and the page must follow."""
    page = (ROOT / "docs" / "offline.md").read_text(encoding="utf-8")
    blocks = PLAN_BLOCK.findall(page)
    assert len(blocks) == 2, "offline.md: the placeholder refusal and dev's plan"
    for args, shown in blocks:
        code, out, err = run(plan.main, shlex.split(args))
        printed = (out + err).strip()
        assert printed == shown.strip(), f"offline.md: `plan {args}` prints\n{printed}"
        assert code == (1 if shown.startswith("error:") else 0), (args, code)  # plan.py: 1 invalid configuration


def test_the_import_file_example_of_offline_md_is_what_it_prints() -> None:
    page = (ROOT / "docs" / "offline.md").read_text(encoding="utf-8")
    example = re.search(r"```\n\$ python -m components import-file (.*?)\n(.*?)\n\.\.\.\n```", page, re.S)
    assert example, "offline.md: the import-file example is missing"
    code, out, err = run(import_file.main, shlex.split(example.group(1)))
    assert code == 0, err
    assert out.startswith(f"{example.group(2)}\n"), f"offline.md: `import-file {example.group(1)}` prints\n{out}"


def test_the_render_and_diff_examples_of_offline_md_are_what_they_print(tmp_path: Path) -> None:
    """Their counts follow every resource the program adds. The objects inside the charts count only where Helm's
    engine and the chart sources are there (`render`'s table says so), so those two numbers are not compared."""
    page = (ROOT / "docs" / "offline.md").read_text(encoding="utf-8")
    render_args, render_shown = re.search(
        r"```\n\$ python -m components render ((?:.*\\\n)*.*)\n(?:warning: .*\n)*(stack .*)", page
    ).groups()
    diff_args = re.search(r"```bash\n# a change to try.*?\npython -m components diff (.*?)\n#", page, re.S)[1]
    diff_shown = re.search(r"\n```\n(stack dev: .*)\n", page[page.index(diff_args) :])[1]
    # The page writes the digests a reader fills in as sha256:<digest>; any well-formed one renders the same.
    words = [
        w.replace("rendered/prod", str(tmp_path / "prod")).replace("sha256:<digest>", f"sha256:{'0' * 64}")
        for w in shlex.split(render_args.replace("\\\n", " "))
    ]
    mask = re.compile(r"\d+ (?=chart objects|same)")
    for main, argv, shown in (
        (render.main, words, render_shown),
        (diff.main, shlex.split(diff_args.replace("\\\n", " ")), diff_shown),
    ):
        _, out, err = run(main, argv)
        first = next(line for line in out.splitlines() if line.startswith("stack "))
        assert mask.sub("N ", first.replace(str(tmp_path / "prod"), "rendered/prod")) == mask.sub("N ", shown), err
