"""The Pulumi SDK's three traps (3.272.0), each shown and each avoided by the package: postponed annotations break the
schema inference, integers arrive as floats, an Output in an integer input crashes the SDK."""

from __future__ import annotations

import ast
import runpy
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.errors import InputPropertiesError
from pulumi.provider.experimental.component import ComponentProvider

from components.cli.mockrun import execute
from components.model.config.checks import PROJECT
from components.package import NAME
from components.package.provider import PackageProvider
from components.package.stack import TpuSlicingStack
from tests.harness import Mocks
from tests.stack_config import CLOCK, ROOT

PACKAGE_DIR = ROOT / "components" / "package"

FUTURE_MODULE = """
from __future__ import annotations
from typing import TypedDict
import pulumi

class ProbeArgs(TypedDict):
    cubes: int

class Probe(pulumi.ComponentResource):
    def __init__(self, name: str, args: ProbeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("probe:index:Probe", name, {}, opts)
"""


def test_the_future_import_breaks_the_schema_inference(tmp_path: Path) -> None:
    """The trap: with postponed annotations, the SDK gets strings and cannot infer the schema."""
    path = tmp_path / "probe_future.py"
    path.write_text(FUTURE_MODULE)
    namespace = runpy.run_path(str(path))
    with pytest.raises(Exception):  # noqa: B017 (whatever it raises, no schema comes out)
        ComponentProvider([namespace["Probe"]], "probe")
    path.write_text(FUTURE_MODULE.replace("from __future__ import annotations\n", ""))
    ComponentProvider([runpy.run_path(str(path))["Probe"]], "probe")  # the same module without it: fine


def _future_imports(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
    ]


@pytest.mark.parametrize(
    "path", sorted(p.relative_to(ROOT).as_posix() for p in [*PACKAGE_DIR.glob("*.py"), ROOT / "plugin" / "__main__.py"])
)
def test_no_module_of_the_package_postpones_its_annotations(path: str) -> None:
    assert _future_imports(ROOT / path) == [], f"{path}: `from __future__ import annotations` breaks the schema"


def test_the_scan_finds_the_future_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(FUTURE_MODULE)
    assert _future_imports(tmp_path / "m.py") == [2]


WIRE_INPUTS = {"project": "p", "tpu": {"cubes": 2.0}, "kueue": {"priorities": {"high": 100.0}}}


def test_integers_arrive_as_floats_through_the_sdk_and_as_ints_through_the_package() -> None:
    """The trap: the SDK's mapping overwrites its own int() conversion and never converts map values. If this
    first assertion fails, the SDK fixed it and PackageProvider's conversion can go."""
    stack = PackageProvider()._component_defs["TpuSlicingStack"]
    sdk = ComponentProvider([TpuSlicingStack], NAME).map_inputs(WIRE_INPUTS, stack)
    assert type(sdk["tpu"]["cubes"]) is float and type(sdk["kueue"]["priorities"]["high"]) is float
    ours = PackageProvider().map_inputs(WIRE_INPUTS, stack)
    assert type(ours["tpu"]["cubes"]) is int and type(ours["kueue"]["priorities"]["high"]) is int
    # A number with a fraction is left to validation, which names the key (see test_bad_inputs...).
    assert PackageProvider().map_inputs({"project": "p", "tpu": {"cubes": 2.5}}, stack)["tpu"]["cubes"] == 2.5


def _raised(callable_: Any) -> BaseException | None:
    caught: list[BaseException] = []

    def program() -> None:
        try:
            callable_()
        except BaseException as err:  # returned to the test
            caught.append(err)

    execute({"gcp:project": "p"}, stack="dev", mocks=Mocks(), now=CLOCK, program=program)
    return caught[0] if caught else None


def test_an_output_in_an_integer_input_crashes_the_sdk_and_is_named_by_the_package() -> None:
    stack = PackageProvider()._component_defs["TpuSlicingStack"]

    def inputs() -> dict[str, Any]:
        return {"project": "p", "tpu": {"cubes": pulumi.Output.from_input(2)}, "zone": "us-central1-ai1a"}

    sdk = _raised(lambda: ComponentProvider([TpuSlicingStack], NAME).map_inputs(inputs(), stack))
    assert isinstance(sdk, TypeError), sdk  # the trap: int(Output), an SDK stack trace for the caller
    ours = _raised(lambda: PackageProvider().map_inputs(inputs(), stack))
    assert isinstance(ours, InputPropertiesError), ours
    assert [e["property_path"] for e in ours.errors or []] == ["tpu.cubes"]
    assert f"{PROJECT}:tpu.cubes: a plain value is required" in ours.message
