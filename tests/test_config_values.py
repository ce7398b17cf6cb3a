"""What a value typed on the command line or in a stack file is, as Pulumi reads it, in every offline command.

`--set KEY=VALUE` stores VALUE as `pulumi config set --path KEY VALUE` would, and a stack file's plain scalars
read as Pulumi's Go YAML reads them: a date stays the string typed, and no command crashes on one.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cli import diff, plan, render
from components.cli.plan import apply_set, read_yaml
from tests.stack_config import ROOT, P, fill_placeholders, set_arguments

DATE = "2026-12-18T00:00:00Z"
EXCLUSION = (
    "cluster.maintenanceExclusion.name=hold",
    f"cluster.maintenanceExclusion.start={DATE}",
    "cluster.maintenanceExclusion.end=2026-12-20T00:00:00Z",
    "cluster.maintenanceExclusion.scope=NO_UPGRADES",
)

# (VALUE typed, what a nested key holds): pulumi/pulumi sdk/go/common/resource/config/map.go adjustObjectValue.
NESTED = [
    (DATE, DATE),
    ("2026-12-18", "2026-12-18"),
    ("12:30", "12:30"),  # YAML 1.1 reads base 60 (750)
    ("yes", "yes"),
    ("no", "no"),
    ("on", "on"),
    ("True", "True"),  # only the lower-case words are booleans
    ("true", True),
    ("false", False),
    ("0755", "0755"),  # a leading zero keeps the digits
    ("0", 0),
    ("42", 42),
    ("-3", -3),
    ("+3", 3),
    ("1_000", "1_000"),
    ("1.36", "1.36"),  # a version prefix, not the float 1.36
    ("1e3", "1e3"),
    ("0x1F", "0x1F"),
    ("9223372036854775808", "9223372036854775808"),  # past int64: Atoi fails, the string stays
    ("null", "null"),
    ("~", "~"),
    ("", ""),
    ('"quoted"', '"quoted"'),
    ("[2, 4]", "[2, 4]"),
    ("@x", "@x"),
]


@pytest.mark.parametrize(("typed", "stored"), NESTED, ids=[repr(t) for t, _ in NESTED])
def test_a_nested_value_is_what_pulumi_config_set_path_stores(typed: str, stored: Any) -> None:
    config = apply_set({}, f"cluster.maintenanceExclusion.start={typed}")
    value = config[f"{P}:cluster"]["maintenanceExclusion"]["start"]
    assert value == stored and type(value) is type(stored)


@pytest.mark.parametrize("typed", ["true", "42", DATE, "0755"])
def test_a_top_level_value_is_the_string_typed(typed: str) -> None:
    # `pulumi config set KEY VALUE` of a one-segment key stores the text (map.go Set: `m[configKey] = v`).
    assert apply_set({}, f"zone={typed}")[f"{P}:zone"] == typed
    assert apply_set({}, f"gcp:project={typed}")["gcp:project"] == typed


def test_a_stack_file_reads_dates_and_clock_times_as_the_strings_typed(tmp_path: Path) -> None:
    # Pulumi's Go YAML keeps a timestamp-like scalar a string when it decodes into interface{}, and reads no base 60.
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(f"config:\n  {P}:cluster:\n    start: {DATE}\n    day: 2026-12-18\n    window: 12:30\n")
    cluster = read_yaml(path)["config"][f"{P}:cluster"]
    assert cluster == {"start": DATE, "day": "2026-12-18", "window": "12:30"}


def _run(main: Any, args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _sets(*values: str) -> list[str]:
    return [word for value in values for word in ("--set", value)]


def test_render_takes_a_date_given_with_set(tmp_path: Path) -> None:
    args = ["--stack", "dev", *set_arguments("dev"), *_sets(*EXCLUSION), "--out", str(tmp_path / "out")]
    code, _, err = _run(render.main, args)
    assert code == 0, err
    rendered = "".join(p.read_text() for p in (tmp_path / "out").rglob("*.yaml"))
    assert f"start_time: '{DATE}'" in rendered or f"startTime: '{DATE}'" in rendered


def test_diff_takes_a_date_given_with_set_or_change() -> None:
    base = ["--stack", "dev", *set_arguments("dev")]
    change = "cluster.maintenanceExclusion.start=2026-12-19T00:00:00Z"
    code, out, err = _run(diff.main, [*base, *_sets(*EXCLUSION), "--change", change])
    assert code == 0, err
    assert "cluster-gke" in out and "maintenancePolicy" in out


def test_every_command_takes_an_unquoted_date_in_the_stack_file(tmp_path: Path) -> None:
    config = fill_placeholders(yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"])
    (tmp_path / "stack").mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "stack" / "Pulumi.yaml")
    text = yaml.safe_dump({"config": config})
    exclusion = f"    maintenanceExclusion:\n      name: hold\n      start: {DATE}\n      end: 2026-12-20T00:00:00Z\n"
    text = text.replace(f"  {P}:cluster:\n", f"  {P}:cluster:\n{exclusion}", 1)
    (tmp_path / "stack" / "Pulumi.dev.yaml").write_text(text)
    args = ["--stack", "dev", "--dir", str(tmp_path / "stack")]
    assert _run(plan.main, args)[0] == 0
    code, _, err = _run(render.main, [*args, "--out", str(tmp_path / "out")])
    assert code == 0, err
