"""The package's schema: the SDK's own inference (what the engine's GetSchema answers) is the committed copy, every
settings key an input of its type with the model's description, every output the program's."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pulumi.provider.experimental.analyzer import Analyzer
from pydantic import BaseModel, SecretStr

from components.cli import package_args
from components.model.config.root_settings import Settings
from components.package import NAME, VERSION
from components.package.schema import schema, schema_text
from components.package.stack import OUTPUTS, TYPE
from tests.harness import run_program
from tests.stack_config import ROOT

PACKAGE_DIR = ROOT / "components" / "package"


def test_the_committed_args_module_and_schema_are_current() -> None:
    """Regenerate with `python -m components.cli.package_args --write` (a settings change shows in review)."""
    assert (PACKAGE_DIR / "stack_args.py").read_text() == package_args.render()
    assert (PACKAGE_DIR / "schema.json").read_text() == schema_text()


def _models(model: type[BaseModel] = Settings, seen: dict[str, type[BaseModel]] | None = None):
    seen = {} if seen is None else seen
    seen[package_args.ROOT_NAME if model is Settings else model.__name__] = model
    for field in model.model_fields.values():
        for arg in typing.get_args(field.annotation) or (field.annotation,):
            for inner in typing.get_args(arg) or (arg,):
                if isinstance(inner, type) and issubclass(inner, BaseModel) and inner.__name__ not in seen:
                    _models(inner, seen)
    return seen


def _expected(annotation: Any, plain: bool) -> dict[str, Any]:
    """The schema property a settings annotation should become: counts integers, flags booleans, dates and
    choices strings, sections references to their type; plain everywhere but where the token is. An `Annotated`
    type is the type it annotates (its validators and rule are the model's)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    members = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        (annotation,) = members
        return _expected(annotation, plain)
    origin = typing.get_origin(annotation)
    out: dict[str, Any]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        out = {"$ref": f"#/types/{NAME}:index:{annotation.__name__}"}
    elif origin is list:
        out = {"type": "array", "items": _expected(typing.get_args(annotation)[0], True)}
    elif origin is dict:
        out = {"type": "object", "additionalProperties": _expected(typing.get_args(annotation)[1], True)}
    else:
        simple = {int: "integer", bool: "boolean", float: "number", str: "string", datetime: "string"}
        out = {"type": simple.get(annotation, "string")}
        assert annotation in simple or origin is typing.Literal or annotation is SecretStr, annotation
    return {**out, "plain": True} if plain else out


def test_every_settings_key_is_an_input_of_its_type_with_its_description() -> None:
    spec = schema()
    resource = spec["resources"][TYPE]
    assert spec["name"] == NAME and spec["version"] == VERSION
    types = {key.rsplit(":", 1)[-1]: t for key, t in spec["types"].items()}
    models = _models()
    # Every settings model is a type; besides them, only the building blocks' own (components/package/blocks.py).
    assert set(types) | {package_args.ROOT_NAME} == set(models) | {"TpuShape"}
    for name, model in models.items():
        props = resource["inputProperties"] if model is Settings else types[name]["properties"]
        required = resource["requiredInputs"] if model is Settings else types[name].get("required", [])
        assert set(props) == {f.alias for f in model.model_fields.values()}, name
        assert sorted(required) == sorted(f.alias for f in model.model_fields.values() if f.is_required()), name
        for field in model.model_fields.values():
            prop = props[field.alias]
            assert prop.get("description") == package_args.description(field), f"{name}.{field.alias}"
            assert _shape(prop) == _expected(field.annotation, field.alias != "hfToken"), f"{name}.{field.alias}"
    assert resource["requiredInputs"] == ["project"]


def _shape(prop: dict[str, Any]) -> dict[str, Any]:
    """A property without its descriptions (the SDK repeats an array's description on its items)."""
    return {k: _shape(v) if isinstance(v, dict) else v for k, v in prop.items() if k != "description"}


def test_only_the_secret_takes_an_output_and_no_integer_input_does() -> None:
    """Every input decides names, counts or the plan before any resource exists: plain. The token is an Input so
    that a Pulumi secret stays one. No `Input[int]` anywhere: an Output there crashes the SDK
    (test_package_sdk_traps.py)."""
    spec = schema()
    not_plain: list[str] = []

    def visit(path: str, prop: dict[str, Any]) -> None:
        if not prop.get("plain"):
            not_plain.append(path)
        for key in ("items", "additionalProperties"):
            if key in prop:
                visit(f"{path}[]", prop[key])

    for key, prop in spec["resources"][TYPE]["inputProperties"].items():
        visit(key, prop)
    for name, t in spec["types"].items():
        for key, prop in t.get("properties", {}).items():
            visit(f"{name.rsplit(':', 1)[-1]}.{key}", prop)
    assert not_plain == ["hfToken"]
    assert _shape(spec["resources"][TYPE]["inputProperties"]["hfToken"]) == {"type": "string"}


def test_every_component_input_output_and_type_has_a_description() -> None:
    spec = schema()
    props = {
        f"{n}.{k}": p
        for n, r in spec["resources"].items()
        for kind in ("inputProperties", "properties")
        for k, p in r[kind].items()
    }
    props |= {f"{n}.{k}": p for n, t in spec["types"].items() for k, p in t.get("properties", {}).items()}
    assert [k for k, p in props.items() if not p.get("description")] == []
    assert all(t.get("description") for t in [*spec["types"].values(), *spec["resources"].values()])
    assert all(r["inputProperties"] and r["properties"] for r in spec["resources"].values())


def test_an_input_says_what_its_rule_allows() -> None:
    """The rule's allowed values in words, after the description (not for a flag, whose type says it)."""
    props = schema()["resources"][TYPE]["inputProperties"]
    assert props["zone"]["description"].startswith(_sentence_of(Settings.model_fields["zone"].description))
    assert "Allowed: " in props["zone"]["description"] and "Allowed: " in props["project"]["description"]
    flags = [
        p["description"]
        for t in schema()["types"].values()
        for p in t.get("properties", {}).values()
        if p.get("type") == "boolean"
    ]
    assert flags and not any("Allowed: true or false" in d for d in flags)


def _sentence_of(text: str | None) -> str:
    assert text
    return text[:1].upper() + text[1:].rstrip(".")


def test_every_output_is_the_programs() -> None:
    resource = schema()["resources"][TYPE]
    assert set(resource["properties"]) == set(OUTPUTS)
    assert resource["description"].startswith("TPU7x (Ironwood) dynamic slicing on GKE")


def test_the_outputs_schema_types_are_the_programs_values() -> None:
    program = run_program()
    properties = schema()["resources"][TYPE]["properties"]
    kinds = {"string": str, "integer": int, "array": list, "object": dict}
    for key, value in program.outputs.items():
        expected = properties[key].get("type", "object")
        assert isinstance(value, kinds[expected]) or "<" in json.dumps(value), (key, value)


def test_a_description_on_a_settings_field_flows_into_the_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The models are the one description: a field's pydantic description becomes its input's description."""
    monkeypatch.setattr(Settings.model_fields["zone"], "description", 'The zone of the TPU pools, "an AI zone".')
    module = package_args.render()
    text = 'The zone of the TPU pools, "an AI zone". Allowed: '
    assert f'    """{text}' in module and module.count(text) == 1
    path = tmp_path / "probe_stack_args.py"
    path.write_text(module)
    spec = importlib.util.spec_from_file_location("probe_stack_args", path)
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "probe_stack_args", probe)
    spec.loader.exec_module(probe)
    # The SDK reads a field's docstring from the module's source, as for the committed module.
    read = Analyzer(NAME).get_docstring(probe.TpuSlicingStackArgs, "zone")
    assert read is not None and read.startswith(text) and "Allowed: unset (the reservation's zone" in read
