"""The configuration reference: every key of the settings model, its description and its rule, read from the
fields themselves.

`keys()` walks the pydantic model tree: a key's description is its field's `description`, its rule the
`Rule`s of its `Annotated` type (components/model/config/rules.py) over those of the sections around it.
A key added to a model appears in docs/configuration.md, the Pulumi.yaml key list and the per-key tests
without anything else to do; one without a complete rule is listed as such, and
tests/test_reference.py fails naming it.

Pure model code: no Pulumi. `python -m components reference --write` regenerates both generated texts.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from components.model.config.rules import CHANGES, Rule
from components.model.config.settings import SECRET_PATHS, SECRET_TOP_KEYS, Settings, _is_secret, _models_in
from components.model.config.settings import config_key as config_key  # tests/test_reference.py


@dataclass(frozen=True)
class Key:
    """One leaf key of the settings model."""

    path: str
    type: str
    default: str
    secret: bool
    description: str
    rule: Rule


def rule_of(info: FieldInfo, inherited: Rule | None = None) -> Rule:
    """A field's rule: its type's rules, then its own, each over the one before; the sections' under them."""
    found = [m for a in typing.get_args(info.annotation) if typing.get_origin(a) is Annotated for m in a.__metadata__]
    rule = Rule()
    for part in [*found, *info.metadata]:
        rule = part.over(rule) if isinstance(part, Rule) else rule
    return rule.over(inherited) if inherited else rule


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        parts = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" (optional)" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", _dt.datetime: "RFC 3339 time"}
    if isinstance(annotation, type) and issubclass(annotation, SecretStr):
        return "secret string"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The section model a field holds (itself or optional); a list or map of models is one key."""
    return [] if typing.get_origin(annotation) in (list, dict, tuple, set) else _models_in(annotation)


def _show_default(value: Any) -> str:
    if value is PydanticUndefined:
        return "required"
    if value is None or isinstance(value, SecretStr):
        return "unset"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`" if value != "" else '`""`'


def _walk(
    model: type[BaseModel],
    prefix: str,
    defaults: BaseModel | None,
    optional: str,
    inherited: Rule | None = None,
    section: str = "",
) -> list[Key]:
    """The leaf keys under `model`; `section` is the description of the nearest section that has one, which
    its keys' descriptions say first (`the controller's resources: the container's CPU request`)."""
    out: list[Key] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{info.alias or name}"
        subs = _models(info.annotation)
        if defaults is not None:
            default = getattr(defaults, name)
        else:
            default = info.get_default(call_default_factory=True, validated_data={})
        if subs:
            sub_defaults = default if isinstance(default, BaseModel) else None
            note = optional or (f"unset: {path} is optional" if default is None else "")
            out += _walk(subs[0], f"{path}.", sub_defaults, note, rule_of(info, inherited), info.description or section)
            continue
        shown = _show_default(default)
        if optional and shown == "required":
            shown = f"required when `{prefix.rstrip('.')}` is set"
        out.append(
            Key(
                path=path,
                type=_type_name(info.annotation),
                default=shown,
                secret=_is_secret(info.annotation),
                description=": ".join(d for d in (section, info.description) if d),
                rule=rule_of(info, inherited),
            )
        )
    return out


def keys() -> list[Key]:
    """Every leaf key of the settings model, in model order."""
    return _walk(Settings, "", None, "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str) and len(value) > 8 and len(set(value)) == 1:
        return f"`{value[0]}` x {len(value)}"
    if len(text) > 40:
        text = text[:37] + "..."
    return f"`{_cell(text)}`" if text != "" else '`""`'


def _source(text: str) -> str:
    """URLs as links, the rest (upstream code paths) as written."""
    return re.sub(r"(https?://[^\s;,)]+)", r"<\1>", _cell(text))


BEGIN = "<!-- BEGIN: generated from the settings model by `python -m components reference --write` -->"
END = "<!-- END: generated -->"


def markdown() -> str:
    """The generated part of docs/configuration.md: one row per key, then the secret keys."""
    rows = [
        "| key | what it sets | type | default | allowed values | source of the rule | refused / accepted "
        "| changing it |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in keys():
        rule = key.rule
        head = f"| `{key.path}` | {_cell(key.description)} | {_cell(key.type)} | {_cell(key.default)} |"
        if not rule.complete:
            rows.append(f"{head} **no rule recorded** | | | |")
            continue
        shown_refused = "a token in plain text" if key.secret else _value(rule.refused)
        rows.append(
            f"{head} {_cell(rule.allowed)} | {_source(rule.source)} | {shown_refused} / {_value(rule.accepted)} | "
            f"[{rule.change}]({CHANGES}#{rule.change}) |"
        )
    secret = ", ".join(f"`{p}`" for p in sorted(SECRET_PATHS))
    return (
        "\n".join(rows)
        + f"\n\nSecret keys (typed as secrets in the model, so any new one is treated alike): {secret}.\n"
    )


def page(current: str) -> str:
    """docs/configuration.md with its generated block (between BEGIN and END) made current; the prose around
    it is written by hand and kept as it is."""
    block = f"{BEGIN}\n\n{markdown()}\n{END}"
    if BEGIN in current and END in current:
        before, rest = current.split(BEGIN, 1)
        return before + block + rest.split(END, 1)[1]
    raise ValueError(f"docs/configuration.md has no {BEGIN!r} ... {END!r} block to generate into")


KEYS_BEGIN = "  # BEGIN: the keys, generated from the settings model by `python -m components reference --write`"
KEYS_END = "  # END: the keys"
KEY_DEPTH = 3  # levels the list spells out (`tpu.reservation.name`); below that, a map's keys are in the docs


def _tree(model: type[BaseModel], depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        subs = _models(info.annotation)
        out[info.alias or name] = _tree(subs[0], depth - 1) if subs and depth > 1 else {}
    return out


def _braced(tree: dict[str, Any]) -> str:
    """`{a, b/c {d}}`: siblings with the same keys share one brace (`b/c`)."""
    groups: dict[str, list[str]] = {}
    for key, sub in tree.items():
        groups.setdefault(_braced(sub) if sub else key, []).append(key)
    return "{" + ", ".join("/".join(keys) + (f" {sub}" if sub[0] == "{" else "") for sub, keys in groups.items()) + "}"


def key_list(declared: set[str]) -> list[str]:
    """The Pulumi.yaml comment lines listing every key but those `config:` declares with a type (and gcp:project)."""
    lines = []
    for key, sub in _tree(Settings, KEY_DEPTH).items():
        if key in declared | {"project"}:
            continue
        secret = key in SECRET_TOP_KEYS
        text = (
            _braced(sub)
            if sub
            else f"({'a secret: ' if secret else ''}pulumi config set{' --secret' * secret} {key} <value>)"
        )
        line = f"  #   {key:<9} "
        for word in text.split(" "):
            if len(line) + len(word) > 118 and line.strip() != "#":
                lines.append(line.rstrip())
                line = "  #" + " " * 14
            line += word + " "
        lines.append(line.rstrip())
    return lines


def project_file(current: str) -> str:
    """Pulumi.yaml with its key list (between KEYS_BEGIN and KEYS_END) made current."""
    if KEYS_BEGIN not in current or KEYS_END not in current:
        raise ValueError(f"Pulumi.yaml has no {KEYS_BEGIN!r} ... {KEYS_END!r} block to generate into")
    declared = {k for k in yaml.safe_load(current)["config"] if ":" not in k}
    before, rest = current.split(KEYS_BEGIN, 1)
    return "\n".join([before + KEYS_BEGIN, *key_list(declared), KEYS_END + rest.split(KEYS_END, 1)[1]])
