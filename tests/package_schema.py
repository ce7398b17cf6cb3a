"""The whole-stack component (components/package) as tests drive it: a token, its inputs from a
stack's configuration and on the wire, and a YAML program's properties checked against the schema.
"""

from __future__ import annotations

import re
from typing import Any

from components.cli.mockrun import PROJECT
from components.package.schema import schema
from components.package.stack import TYPE

TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123456789"


def args_of(config: dict[str, Any]) -> dict[str, Any]:
    """A stack's configuration as the component's inputs: the same tree, `project` for gcp:project."""
    return {"project": config["gcp:project"]} | {
        k.split(":", 1)[1]: v for k, v in config.items() if k.startswith(f"{PROJECT}:")
    }


def wire(value: Any) -> Any:
    """Inputs as `construct` receives them: Pulumi's wire has only doubles."""
    if isinstance(value, dict):
        return {k: wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [wire(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _check(value: Any, prop: dict[str, Any], types: dict[str, Any], path: str, problems: list[str]) -> None:
    """A value of a Pulumi YAML program against a schema property (what `pulumi preview` would type-check)."""
    if isinstance(value, str) and re.fullmatch(r"\$\{[^}]+\}", value):
        return  # a reference: the checker of the variable's own type applies
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith("fn::"):
        if prop.get("plain"):
            problems.append(f"{path}: a plain input given a function's result")
        return
    if "$ref" in prop:
        t = types[prop["$ref"].rsplit(":", 1)[-1]]
        _object(value, t.get("properties", {}), t.get("required", []), types, path, problems)
        return
    kind = prop.get("type")
    expected = {"string": str, "integer": int, "boolean": bool, "number": (int, float), "array": list, "object": dict}
    if not isinstance(value, expected[kind]) or (kind == "integer" and isinstance(value, bool)):
        problems.append(f"{path}: {value!r} is not a {kind}")
    elif kind == "array":
        for i, item in enumerate(value):
            _check(item, prop["items"], types, f"{path}[{i}]", problems)
    elif kind == "object" and "additionalProperties" in prop:
        for k, item in value.items():
            _check(item, prop["additionalProperties"], types, f"{path}.{k}", problems)


def _object(value: Any, props: dict, required: list, types: dict, path: str, problems: list[str]) -> None:
    if not isinstance(value, dict):
        problems.append(f"{path}: not an object")
        return
    problems += [f"{path}.{k}: unknown input".lstrip(".") for k in value if k not in props]
    problems += [f"{path}.{k}: required".lstrip(".") for k in required if k not in value]
    for k, item in value.items():
        if k in props:
            _check(item, props[k], types, f"{path}.{k}".lstrip("."), problems)


def schema_problems(properties: dict[str, Any], resource: str = TYPE) -> list[str]:
    spec = schema()
    types = {key.rsplit(":", 1)[-1]: t for key, t in spec["types"].items()}
    block = spec["resources"][resource]
    problems: list[str] = []
    _object(properties, block["inputProperties"], block["requiredInputs"], types, "", problems)
    return problems
