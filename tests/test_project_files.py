"""Pulumi.yaml and every Pulumi.<stack>.yaml against the Pulumi CLI's own rules, so a typo fails here first.

The project file: the CLI's JSON schema (pulumi/pulumi@1b5949891b3c ``sdk/go/common/workspace/project.json``), as
``workspace.ValidateProject`` checks it, with the top level closed to the keys the ``Project`` struct reads
(project.go): the schema allows any (``additionalProperties: true``, kept in ``AdditionalKeys`` and ignored), so a
misspelled ``backend:`` would silently fall back to the default backend. Stack files have no schema:
``LoadProjectStackBytes`` (loaders.go) reads the ``ProjectStack`` struct's keys and ignores the rest; a value of a
key the project declares with a ``type`` must have it (what ``pulumi preview`` checks before running the program).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from tests import upstream
from tests.harness import Run
from tests.stack_config import ROOT

# Top-level keys of the Project struct (sdk/go/common/workspace/project.go @1b5949891b3c) not in project.json.
PROJECT_STRUCT_EXTRA = {"requiredPulumiVersion": {"type": "string"}}
STACK_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "secretsprovider": {"type": "string"},
        "encryptedkey": {"type": "string"},
        "encryptionsalt": {"type": "string"},
        "config": {"type": ["object", "null"]},
        "environment": {"type": ["array", "string", "object", "null"]},
    },
}
CONFIG_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict}

STACK_FILES = sorted(ROOT.glob("Pulumi.*.yaml"))


@pytest.fixture(scope="module")
def project_schema() -> dict[str, Any]:
    return json.loads((upstream.path("schemas/pulumi") / "project.json").read_text())


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(schema)
    out["properties"].update(PROJECT_STRUCT_EXTRA)
    out["additionalProperties"] = False
    return out


def project_errors(project: Any, schema: dict[str, Any]) -> list[str]:
    """The CLI's ValidateProject (a non-empty string name, then the schema), with the closed top level."""
    if not isinstance(project, dict):
        return [f"expected the project to be an object, got {type(project).__name__}"]
    if not isinstance(project.get("name"), str) or not project["name"]:
        return ["project is missing a non-empty string 'name' attribute"]
    validator = Draft202012Validator(strict(schema))
    return sorted(f"#/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(project))


def stack_errors(stack: Any, project: dict[str, Any]) -> list[str]:
    if stack is None:
        return []  # an empty stack file is valid
    errors = [
        f"#/{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in Draft202012Validator(STACK_SCHEMA).iter_errors(stack)
    ]
    declared = project.get("config") or {}
    for key, value in ((stack or {}).get("config") or {}).items():
        namespace, _, name = key.rpartition(":")
        decl = declared.get(name) if namespace in ("", project["name"]) else None
        wanted = decl.get("type") if isinstance(decl, dict) else None
        python_type = CONFIG_TYPES.get(wanted or "")
        if python_type and (not isinstance(value, python_type) or (python_type is int and isinstance(value, bool))):
            errors.append(f"#/config/{key}: {value!r} is not of the declared type {wanted!r}")
    return errors


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


# --------------------------------------------------------------------------------------------- the real files


def test_the_project_file_matches_the_pulumi_project_schema(project_schema: dict[str, Any]) -> None:
    assert project_errors(_load(ROOT / "Pulumi.yaml"), project_schema) == []


def test_there_is_a_stack_file() -> None:
    assert ROOT / "Pulumi.dev.yaml" in STACK_FILES


@pytest.mark.parametrize("path", STACK_FILES, ids=[p.name for p in STACK_FILES])
def test_every_stack_file_has_only_keys_the_cli_reads(path: Path) -> None:
    assert stack_errors(_load(path), _load(ROOT / "Pulumi.yaml")) == []


# --------------------------------------------------------------------------------------------- typos are caught


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda p: p["runtime"].update(nmae=p["runtime"].pop("name")), "#/runtime: "),  # the upstream schema
        # Pulumi.yaml names no backend (`pulumi login` decides); a team that adds one gets it checked too.
        (lambda p: p.update(backnd={"url": "gs://b"}), "#/: Additional properties are not allowed ('backnd'"),
        (lambda p: p.update(backend={"ulr": "gs://b"}), "#/backend: Additional properties are not allowed ('ulr'"),
        (lambda p: p["config"].update(zone={"tpye": "string"}), "#/config/zone: "),
        (lambda p: p.update(requiredPulumiVersion=3), "#/requiredPulumiVersion: 3 is not of type 'string'"),
    ],
    ids=["runtime.nmae", "backnd", "backend.ulr", "config.zone.tpye", "requiredPulumiVersion"],
)
def test_a_typo_in_the_project_file_is_caught(project_schema: dict[str, Any], edit: Any, expected: str) -> None:
    project = _load(ROOT / "Pulumi.yaml")
    edit(project)
    errors = project_errors(project, project_schema)
    assert any(e.startswith(expected) for e in errors), errors


def test_a_project_without_a_name_is_caught(project_schema: dict[str, Any]) -> None:
    project = _load(ROOT / "Pulumi.yaml")
    del project["name"]
    assert project_errors(project, project_schema) == ["project is missing a non-empty string 'name' attribute"]


def test_a_typo_in_a_stack_file_is_caught() -> None:
    project = _load(ROOT / "Pulumi.yaml")
    stack = _load(ROOT / "Pulumi.dev.yaml")
    stack["confg"] = stack.pop("config")
    assert stack_errors(stack, project) == ["#/: Additional properties are not allowed ('confg' was unexpected)"]
    project["config"]["zone"] = {"type": "string"}  # a declared key's type binds the stack files
    stack["config"] = {f"{project['name']}:zone": 7}
    assert (
        stack_errors(stack, project)[-1] == f"#/config/{project['name']}:zone: 7 is not of the declared type 'string'"
    )


def test_cli_floor_is_declared_and_checked(dev: Run) -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    declared = project["requiredPulumiVersion"]
    assert declared.startswith(">=")
    floor = tuple(int(p) for p in declared.removeprefix(">=").split("."))
    assert floor >= (3, 130, 0)  # pulumi/pulumi#16868: charts preview against a cluster not yet created
    # The program asks the engine for the same range, so CLIs that predate the key stop too.
    assert dev.required_cli == [declared]


def test_no_directory_relative_backend() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    url = (project.get("backend") or {}).get("url", "")
    assert not url.startswith(("file://./", "file://.")), url
    readme = (ROOT / "README.md").read_text()
    assert "pulumi login gs://" in readme
