"""Imports run only downward: cli -> resources -> model (docs/architecture.md, "Layers"): `components/model/` imports
no Pulumi SDK, resource module or command; the resources (`components/*.py`) and `__main__.py` no command
(`components/cli/`, `components/__main__.py`). Read with `ast` (every import, also inside functions or
`if TYPE_CHECKING:`), so a new module is covered the day it is added.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PULUMI_SDKS = ("pulumi", "pulumi_gcp", "pulumi_kubernetes", "pulumi_random", "pulumi_policy")


def layer(path: str) -> str:
    parts = Path(path).parts
    if parts == ("__main__.py",):
        return "program"
    if parts[:2] == ("components", "model"):
        return "model"
    if parts[:2] == ("components", "cli") or parts == ("components", "__main__.py"):
        return "cli"
    if parts[0] == "components" and (len(parts) == 2 or parts[1] == "package"):
        return "resources"  # components/package/: the package's components, over the resources
    raise ValueError(f"{path}: not a module of the program")


def module_layer(module: str) -> str | None:
    """None for anything outside the program (stdlib, third party)."""
    parts = module.split(".")
    if parts[0] != "components":
        return None
    if len(parts) == 1:
        return "resources"  # `import components` / `from components import x`: the package of the resources
    if parts[1] == "model":
        return "model"
    if parts[1] in ("cli", "__main__"):
        return "cli"
    return "resources"


def imported_modules(path: str, source: str) -> list[tuple[int, str]]:
    """(line, module) for every import in `source`; `from a import b` yields `a.b` (b may be a module)."""
    package = ".".join(Path(path).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the file's package
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            out += [(node.lineno, f"{base}.{alias.name}" if alias.name != "*" else base) for alias in node.names]
    return out


def violations(path: str, source: str) -> list[str]:
    """Every import of `source` (the file at `path`) that runs up or sideways out of its layer."""
    own = layer(path)
    found = []
    for line, module in imported_modules(path, source):
        target = module_layer(module)
        top = module.split(".")[0]
        if own == "model":
            if top in PULUMI_SDKS:
                found.append(f"{path}:{line}: the pure model imports the Pulumi SDK ({module})")
            elif target in ("resources", "cli") and not module.startswith("components.model"):
                found.append(f"{path}:{line}: the pure model imports the {target} layer ({module})")
        elif own in ("resources", "program") and target == "cli":
            found.append(f"{path}:{line}: the {own} layer imports the command-line layer ({module})")
    return found


def program_files() -> list[str]:
    files = ["__main__.py", *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "components").rglob("*.py")))]
    return [f for f in files if "__pycache__" not in f]


def test_every_module_of_the_program_has_a_layer() -> None:
    layers = {f: layer(f) for f in program_files()}
    assert layers["components/serving.py"] == "resources"
    assert layers["components/model/config/settings.py"] == "model"
    assert layers["components/cli/verify.py"] == "cli"
    assert set(layers.values()) == {"program", "model", "cli", "resources"}


@pytest.mark.parametrize("path", program_files())
def test_imports_run_only_downward(path: str) -> None:
    assert violations(path, (ROOT / path).read_text()) == []


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        ("components/serving.py", "from components.cli import verify", "the resources layer imports the command"),
        ("components/serving.py", "import components.cli.verify as v", "the resources layer imports the command"),
        ("__main__.py", "from components.cli.plan import main", "the program layer imports the command"),
        ("components/model/x.py", "import pulumi", "the pure model imports the Pulumi SDK"),
        ("components/model/x.py", "from pulumi_gcp import compute", "the pure model imports the Pulumi SDK"),
        ("components/model/x.py", "def f():\n    from components.component import Component", "imports the resources"),
        ("components/model/x.py", "from components import serving", "imports the resources layer"),
        ("components/model/x.py", "from .. import cli", "imports the cli layer"),
        ("components/model/x.py", "from ..cli.plan import main", "imports the cli layer"),
    ],
)
def test_an_upward_import_is_caught(path: str, source: str, expected: str) -> None:
    (found,) = violations(path, source)
    assert expected in found and found.startswith(f"{path}:")


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("components/serving.py", "from components.model.commands import verify_command"),
        ("components/model/x.py", "from . import geometry\nfrom components.model.config.settings import Settings"),
        ("components/cli/render.py", "import pulumi\nfrom components.serving import Serving"),
    ],
)
def test_downward_imports_pass(path: str, source: str) -> None:
    assert violations(path, source) == []


# The developers' guide: "a module past ~400 lines splits by its seams". A generated module is as long as what it
# is generated from: its first line says it is generated (GENERATED_MARK).
MODULE_LINES = 400
GENERATED_MARK = "# GENERATED by "


def oversized(files: dict[str, str]) -> list[str]:
    """The hand-written modules among `files` (path -> source) past MODULE_LINES."""
    return [
        f"{path}: {n} lines (split it by its seams)"
        for path, source in files.items()
        if (n := len(source.splitlines())) > MODULE_LINES and not source.startswith(GENERATED_MARK)
    ]


def python_modules() -> list[str]:
    """The program's modules, the tests' and the benchmarks': every module someone reads to change something."""
    extra = sorted(p.relative_to(ROOT).as_posix() for d in ("tests", "benchmarks") for p in (ROOT / d).glob("*.py"))
    return [*program_files(), *extra]


def test_no_hand_written_module_passes_about_400_lines() -> None:
    assert "tests/harness.py" in python_modules() and "benchmarks/graph.py" in python_modules()
    assert oversized({f: (ROOT / f).read_text() for f in python_modules()}) == []


def test_the_size_rule_exempts_only_a_module_marked_generated() -> None:
    long = "x = 1\n" * (MODULE_LINES + 1)
    assert oversized({"a.py": long, "b.py": f"{GENERATED_MARK}tool: do not edit.\n{long}"}) == [
        f"a.py: {MODULE_LINES + 1} lines (split it by its seams)"
    ]
    # The mark counts only as the first line: a comment further down is no exemption.
    assert oversized({"c.py": f"x = 0\n{GENERATED_MARK}\n{long}"})
    # The package's inputs module is generated with the mark (components/package/stack_args.py).
    from components.cli.package_args import GENERATED

    assert GENERATED.startswith(GENERATED_MARK)


def borrowed_from_tests(path: str, source: str) -> list[str]:
    """Imports of `source` from a test module: what tests share lives in tests/harness.py, fakes.py and the like."""
    found = [(line, m) for line, m in imported_modules(path, source) if m.startswith("tests.test_")]
    return [f"{path}:{line}: imports from a test module ({m})" for line, m in found]


def test_no_test_module_is_another_ones_library() -> None:
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*.py"))
    assert [problem for f in files for problem in borrowed_from_tests(f, (ROOT / f).read_text())] == []
    assert borrowed_from_tests("tests/test_a.py", "from tests.test_b import helper") == [
        "tests/test_a.py:1: imports from a test module (tests.test_b.helper)"
    ]
    assert borrowed_from_tests("tests/test_a.py", "import tests.test_b") == [
        "tests/test_a.py:1: imports from a test module (tests.test_b)"
    ]
