"""Writes the package's input types (components/package/stack_args.py) from the settings models.

`python -m components.cli.package_args` prints the module, `--write` writes it; tests/test_package.py fails when
the committed copy is stale. One TypedDict per settings model, the field names the models' (the schema's
camelCase names are the models' aliases), each key's description from its pydantic Field. The package's
schema (components/package/schema.json) is written with it: `--write` writes both.
"""

import argparse
import json
import sys
import types
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from components.model.config.root_settings import Settings

ROOT = Path(__file__).resolve().parents[2]
ARGS_MODULE = ROOT / "components" / "package" / "stack_args.py"
SCHEMA_FILE = ROOT / "components" / "package" / "schema.json"
# The root model's TypedDict: the whole-stack component's `args`.
ROOT_NAME = "TpuSlicingStackArgs"

HEADER = '''"""GENERATED from the settings models (components/model/) by
`python -m components.cli.package_args --write`: do not edit. The inputs of the package's whole-stack component,
one TypedDict per settings model, each field's description from its pydantic Field.

No `from __future__ import annotations` here: the SDK's schema inference reads these annotations as objects.
"""

# ruff: noqa: E501 (a description is one line, however long)

from typing import NotRequired, TypedDict

import pulumi
'''


def _members(annotation: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _without_none(annotation: Any) -> Any:
    members = [a for a in _members(annotation) if a is not type(None)]
    if len(members) != 1:
        raise TypeError(f"no schema type for the union {annotation!r}: the SDK's inference refuses unions")
    return members[0]


def _class_name(model: type[BaseModel]) -> str:
    return ROOT_NAME if model is Settings else model.__name__


def _type(annotation: Any, models: list[type[BaseModel]]) -> str:
    """The TypedDict annotation of a model's field annotation; every nested model is collected in `models`."""
    annotation = _without_none(annotation)
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        models.append(annotation)
        return _class_name(annotation)
    if annotation is SecretStr:
        # A Pulumi secret from the caller stays one: an Input, never a plain value.
        return "pulumi.Input[str]"
    if annotation in (str, int, float, bool):
        return annotation.__name__
    if annotation is datetime:
        return "str"  # RFC 3339, as in the stack files
    if origin is typing.Literal:
        values = typing.get_args(annotation)
        if all(isinstance(v, str) for v in values):
            return "str"
    if origin is list:
        (item,) = typing.get_args(annotation)
        return f"list[{_type(item, models)}]"
    if origin is dict:
        key, value = typing.get_args(annotation)
        if key is not str:
            raise TypeError(f"map keys must be strings: {annotation!r}")
        return f"dict[str, {_type(value, models)}]"
    raise TypeError(f"no schema type for {annotation!r}: extend components/cli/package_args.py")


def _default(field: FieldInfo) -> Any:
    if field.default is PydanticUndefined or field.default_factory is not None:
        return PydanticUndefined
    return field.default


def description(field: FieldInfo) -> str | None:
    """The input's description: the model's own (None until the field has one), its allowed values and default."""
    parts = [field.description.strip()] if field.description else []
    literal = _without_none(field.annotation)
    if typing.get_origin(literal) is typing.Literal:
        parts.append("One of: " + ", ".join(str(v) for v in typing.get_args(literal)) + ".")
    default = _default(field)
    if default is not PydanticUndefined and default is not None and not isinstance(default, SecretStr):
        parts.append(f"Default: {json.dumps(default, default=str)}.")
    return " ".join(parts) or None


def _doc(model: type[BaseModel]) -> str:
    if model is Settings:
        return (
            "The whole stack's settings: the keys of the program's stack configuration, camelCase as in its stack "
            "files, `project` for gcp:project."
        )
    doc = (model.__doc__ or "").strip().split("\n\n", 1)[0]
    return " ".join(doc.split()) or f"The {model.__name__} settings."


def _literal(text: str, indent: str) -> str:
    """A docstring after the field (the SDK reads it as the input's description), stable under `ruff format`."""
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    pad = " " if body.endswith('"') else ""
    return f'{indent}"""{body}{pad}"""'


def _class(model: type[BaseModel], models: list[type[BaseModel]]) -> str:
    lines = [f"class {_class_name(model)}(TypedDict):", f'    """{_doc(model)}"""', ""]
    for name, field in model.model_fields.items():
        kind = _type(field.annotation, models)
        lines.append(f"    {name}: {kind if field.is_required() else f'NotRequired[{kind}]'}")
        text = description(field)
        if text:
            lines.append(_literal(text, "    "))
    return "\n".join(lines)


def render() -> str:
    """The module: each model's class after the classes it refers to (the annotations are evaluated)."""
    ordered: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model in ordered:
            return
        nested: list[type[BaseModel]] = []
        for field in model.model_fields.values():
            _type(field.annotation, nested)
        for sub in nested:
            visit(sub)
        ordered.append(model)

    visit(Settings)
    classes = [_class(model, []) for model in ordered]
    return HEADER + "\n\n" + "\n\n\n".join(classes) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.cli.package_args", description=__doc__)
    parser.add_argument("--write", action="store_true", help="write stack_args.py and schema.json instead of printing")
    args = parser.parse_args(argv)
    text = render()
    if not args.write:
        sys.stdout.write(text)
        return 0
    ARGS_MODULE.write_text(text)
    # The schema reads the module just written: a fresh interpreter imports it.
    from components.package.schema import schema_text

    SCHEMA_FILE.write_text(schema_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
