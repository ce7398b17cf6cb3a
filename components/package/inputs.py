"""The whole-stack component's inputs as the program's settings: the same model, the same one-line errors.

The inputs mirror the stack configuration key for key (components/package/stack_args.py), so they are turned
back into the configuration's camelCase tree and validated by `components.model.config.settings.load`, which reports
every problem at once, naming the key, before any resource is registered. Every input is a plain value (they
decide names, counts and the capacity plan before anything exists) except `hfToken`, a Pulumi secret that stays
one: its value is never read here, only handed to the Secret that holds it.
"""

import re
import types
import typing
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pulumi
from pydantic import BaseModel, SecretStr

from components.model.config.checks import PROJECT, ConfigError
from components.model.config.root_settings import Settings
from components.model.config.settings import load

SECRET_INPUT = "hfToken"
# What validation sees in place of the caller's secret: its value stays inside the Output (see `settings_from`).
_STAND_IN = "secret-given"


def _convert(item: Any, annotation: Any) -> Any:
    members = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(members) == 1:
        annotation = members[0]
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return to_config(item, annotation)
    if origin is list and isinstance(item, list):
        return [_convert(i, typing.get_args(annotation)[0]) for i in item]
    if origin is dict and isinstance(item, Mapping):
        return {k: _convert(v, typing.get_args(annotation)[1]) for k, v in item.items()}
    return item


def to_config(value: Any, model: type[BaseModel] = Settings) -> Any:
    """The inputs (the SDK hands them over under the models' Python names) as the configuration's camelCase tree.

    Keys given in either spelling are accepted; an unknown key stays as it is, so validation names it.
    """
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        field = next((f for n, f in model.model_fields.items() if key in (n, f.alias)), None)
        if field is None:
            out[key] = item
        else:
            out[field.alias or key] = _convert(item, field.annotation)
    return out


def outputs_in(value: Any, path: str = "") -> list[str]:
    """The paths of every Output (a value known only once some resource exists) inside `value`."""
    if isinstance(value, pulumi.Output):
        return [path]
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in outputs_in(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in outputs_in(v, f"{path}[{i}]")]
    return []


def plain_value_problem(path: str) -> str:
    return (
        f"{PROJECT}:{path}: a plain value is required (it decides names, counts or the capacity plan before any "
        "resource is registered); an Output was given"
    )


def problems_text(what: str, problems: list[str]) -> str:
    """`what (N problems):` and one indented line per problem, as the program's ConfigError reads."""
    return f"{what} ({len(problems)} problem{'s' * (len(problems) > 1)}):\n  " + "\n  ".join(problems)


def settings_from(args: Mapping[str, Any], now: datetime | None = None) -> Settings:
    """Validates the inputs into Settings, or raises ConfigError with every problem (the program's messages).

    `hfToken` given as an Output is validated as a set secret and handed on inside its Output: Settings'
    SecretStr then holds that Output, which components/graph_args.py hf_token wraps as a secret again for the Secret's
    data. A plain string is refused as the program refuses a token in plain text.
    """
    raw = to_config(dict(args))
    token = raw.pop(SECRET_INPUT, None)
    problems = [plain_value_problem(p) for p in outputs_in(raw)]
    if problems:
        raise ConfigError(problems_text("invalid stack configuration", problems))
    project = raw.pop("project", None)
    secret_keys: frozenset[str] = frozenset()
    if isinstance(token, pulumi.Output):
        raw[SECRET_INPUT], secret_keys = _STAND_IN, frozenset({SECRET_INPUT})
    elif token is not None:
        raw[SECRET_INPUT] = token  # a plain value: refused as a secret stored in plain text
    settings = load(raw, project, secret_keys, now=now or datetime.now(UTC))
    if isinstance(token, pulumi.Output) and settings.hf_token is not None:
        settings = settings.model_copy(update={"hf_token": SecretStr(token)})  # type: ignore[arg-type]
    return settings


_PROBLEM = re.compile(rf"^(?:{PROJECT}|gcp):(?P<path>[^\s:=]+)")


def problem_paths(err: ConfigError) -> list[tuple[str, str]]:
    """(input path, message) per problem of the error, the path as the package's inputs spell it."""
    out = []
    for line in str(err).splitlines()[1:]:
        line = line.strip()
        match = _PROBLEM.match(line)
        out.append((match["path"] if match else "", line))
    return out
