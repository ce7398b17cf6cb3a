"""Stack settings: one pydantic model tree, the single source of truth for every name and number.

Validated straight from stack config before any resource is registered. Every problem is reported
as `<config key> = <bad value>: <what is allowed>`, all problems in one error. This module loads stack config
into the model and formats its errors; the root model is components/model/config/root_settings.py, the checks between
keys components/model/config/cross_checks.py (+ capacity_checks.py), the sections network_settings.py,
cluster_settings.py (+ maintenance_settings.py), tpu_settings.py, addons_settings.py, k8s_settings.py
(+ resources_settings.py), serving_settings.py (+ serving_parts_settings.py, router_settings.py),
observability_settings.py.
"""

from __future__ import annotations

import difflib
import json
import re
import typing
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, SecretStr, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from components.model.config.checks import (
    PLACEHOLDER_RE,
    PROJECT,
    REDACTED,
    ConfigError,
    SettingError,
    SettingErrors,
    looks_secret,
    redact_text,
)
from components.model.config.root_settings import Settings


def _types_in(annotation: Any, base: type) -> list[type]:
    args = typing.get_args(annotation) or (annotation,)
    return [a for a in args if isinstance(a, type) and issubclass(a, base)]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    return _types_in(annotation, BaseModel)


def _is_secret(annotation: Any) -> bool:
    return bool(_types_in(annotation, SecretStr))


def _fields(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, FieldInfo]]:
    """(config path, field) of every field of the model tree, sections included, in model order."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        yield path, field
        for sub in _models_in(field.annotation):
            yield from _fields(sub, f"{path}.")


def secret_paths(model: type[BaseModel] = Settings, prefix: str = "") -> frozenset[str]:
    """Config paths of every secret field (typed SecretStr), wherever it sits in the model tree.

    A new secret key is secret everywhere (redacted, refused in plain text) by its type alone.
    """
    return frozenset(path for path, field in _fields(model, prefix) if _is_secret(field.annotation))


SECRET_PATHS = secret_paths()
# Top-level keys holding a secret: Pulumi encrypts (and reports as secret) whole top-level keys.
SECRET_TOP_KEYS = frozenset(p.split(".", 1)[0] for p in SECRET_PATHS)
_STRUCTURED = {
    f.alias or name
    for name, f in Settings.model_fields.items()
    if _models_in(f.annotation) or typing.get_origin(f.annotation) in (list, dict)
}


def _field(model: Any, part: Any) -> FieldInfo | None:
    """The field `part` names in `model` (by its Python name or its key), if `model` is a section."""
    if isinstance(model, type) and issubclass(model, BaseModel):
        return next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
    return None


def _alias_path(loc: tuple[Any, ...]) -> str:
    """The config path of an error location: pydantic names a field by its Python name when its default is
    what failed (`weights_bucket`), and by its key when a value was given (`weightsBucket`)."""
    parts: list[str] = []
    model: Any = Settings
    for part in loc:
        field = _field(model, part)
        parts.append(field.alias or str(part) if field else str(part))
        model = _model_at((part,), model) if field else None
    return ".".join(parts)


def _model_at(loc: tuple[Any, ...], model: Any = Settings) -> type[BaseModel] | None:
    for part in loc:
        field = _field(model, part)
        if field is None:
            return None
        model = next(iter(_models_in(field.annotation)), None)
    return model


def all_paths() -> list[str]:
    """Every config path of the model tree, sections included (`tpu`, `tpu.reservation`, `tpu.reservation.name`)."""
    return [path for path, _ in _fields(Settings, "")]


def config_key(path: str) -> str:
    top = path.split(".", 1)[0]
    return f"gcp:{path}" if top == "project" else f"{PROJECT}:{path}"


def is_secret_path(path: str, secret_keys: frozenset[str] = frozenset()) -> bool:
    top = re.split(r"[.\[]", path, maxsplit=1)[0]
    return top in SECRET_TOP_KEYS | secret_keys or any(
        path == p or path.startswith((f"{p}.", f"{p}[")) for p in SECRET_PATHS
    )


def _show(path: str, value: Any, secret_keys: frozenset[str] = frozenset()) -> str:
    if is_secret_path(path, secret_keys) or looks_secret(value):
        return REDACTED
    return json.dumps(value, default=str) if not isinstance(value, str) else repr(value)


def _unknown_key(path: str, parent: type[BaseModel] | None) -> str:
    """`<key>: unknown key ...`, never with its value (it may be a secret put in the wrong place)."""
    known = sorted(f.alias or n for n, f in parent.model_fields.items()) if parent else []
    if parent is Settings:
        known.remove("project")  # that one is gcp:project
    name = path.rsplit(".", 1)[-1]
    prefix = path[: -len(name)]
    close = [f"{prefix}{k}" for k in difflib.get_close_matches(name, known, n=1)]
    elsewhere = close or [p for p in all_paths() if p.rsplit(".", 1)[-1] == name and p != path]
    hint = f"; did you mean {', '.join(config_key(p) for p in elsewhere)}?" if elsewhere else ""
    return f"{config_key(path)}: unknown key{hint} (allowed here: {', '.join(known)})"


def _problem(path: str, value: Any, allowed: str, secret_keys: frozenset[str]) -> str:
    if value is None:  # a key that may be unset, but not here
        return f"{config_key(path)} is not set: {allowed}"
    return f"{config_key(path)} = {_show(path, value, secret_keys)}: {allowed}"


def describe(err: ValidationError, secret_keys: frozenset[str] = frozenset()) -> list[str]:
    """One line per problem: `<key> = <value>: <allowed>`."""
    lines = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        cause = (e.get("ctx") or {}).get("error")
        causes = (
            cause.errors if isinstance(cause, SettingErrors) else [cause] if isinstance(cause, SettingError) else []
        )
        if causes:
            lines += [
                _problem(_alias_path(loc + tuple(c.field.split("."))), c.value, c.allowed, secret_keys) for c in causes
            ]
            continue
        path = _alias_path(loc)
        if e["type"] == "extra_forbidden":
            lines.append(_unknown_key(path, _model_at(loc[:-1])))
            continue
        msg = redact_text(e["msg"].removeprefix("Value error, "))
        if e["type"] in ("model_type", "model_attributes_type", "dict_type"):
            msg = _map_shape(path, _model_at(loc))
        if is_secret_path(path, secret_keys):
            msg = f"a {e['type'].removesuffix('_type').replace('_', ' ')}" if e["type"].endswith("_type") else "invalid"
        if e["type"] == "missing":
            lines.append(f"{config_key(path)} is not set: it is required")
        else:
            lines.append(_problem(path, e["input"], msg, secret_keys))
    return lines


def _map_shape(path: str, model: type[BaseModel] | None) -> str:
    """What a section takes when it was given a plain value: its keys (the required ones first) and the command
    that sets one, instead of pydantic's message naming the internal class."""
    if model is None:
        return "a map (YAML mapping), not a plain value"
    fields = sorted(model.model_fields.items(), key=lambda item: not item[1].is_required())
    keys = [f.alias or n for n, f in fields]
    return (
        f"a map with the keys {', '.join(keys)}, not a plain value; set one with `{set_command(f'{path}.{keys[0]}')}`"
    )


def _placeholders(value: Any, path: str) -> list[tuple[str, Any]]:
    """(config path, value) of every string holding a `<REPLACE-ME...>` marker, in document order."""
    if isinstance(value, str):
        return [(path, value)] if PLACEHOLDER_RE.search(value) else []
    if isinstance(value, Mapping):
        return [hit for k, v in value.items() for hit in _placeholders(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in _placeholders(v, f"{path}[{i}]")]
    return []


def _without(value: Any, path: list[str | int]) -> Any:
    """A copy of `value` without the item at `path` (so its default, or 'not set', applies instead)."""
    head, rest = path[0], path[1:]
    if not isinstance(value, Mapping | list) or isinstance(head, int) != isinstance(value, list):
        return value
    copy = dict(value) if isinstance(value, Mapping) else list(value)
    if rest:
        copy[head] = _without(copy[head], rest)
    else:
        del copy[head]
    return copy


def _split_path(path: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in re.split(r"\.|\[|\]\.?", path) if p]


def _get(value: Any, path: list[str | int]) -> Any:
    for part in path:
        if isinstance(value, Mapping) and isinstance(part, str):
            value = value.get(part)
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        else:
            return None
    return value


def set_command(path: str, secret: bool = False) -> str:
    """The `pulumi config set` command that stores a value at `path` (nested paths need --path)."""
    if path == "project":
        return "pulumi config set gcp:project <value>"
    flag = " --secret" if secret else ""
    where = f" --path '{path}'" if re.search(r"[.\[]", path) else f" {path}"
    return f"pulumi config set{flag}{where} <value>"


def _placeholder_problem(path: str, value: Any, secret_keys: frozenset[str]) -> str:
    how = f"`{set_command(path, is_secret_path(path))}`"
    return _problem(
        path,
        value,
        f"a placeholder left in the stack file; set this environment's value there or with {how}",
        secret_keys,
    )


def _plaintext_secrets(data: Mapping[str, Any], secret_keys: frozenset[str]) -> list[str]:
    """A secret field set in plain text (not a Pulumi secret) is refused: the stack file would hold it."""
    problems = []
    for path in sorted(SECRET_PATHS):
        value = _get(data, _split_path(path))
        if value in (None, "") or path.split(".", 1)[0] in secret_keys:
            continue
        problems.append(
            f"{config_key(path)} = {REDACTED}: a secret stored in plain text; remove it (`pulumi config rm"
            f"{' --path' if '.' in path else ''} {path}`) and set it encrypted with `{set_command(path, True)}`"
        )
    return problems


def _flat_nested_key(key: str) -> str | None:
    """A top-level key such as `tpu.cubes`: what `pulumi config set tpu.cubes 4` stores without --path."""
    top = re.split(r"[.\[]", key, maxsplit=1)[0]
    camel = {(f.alias or n) for n, f in Settings.model_fields.items()} - {"project"}
    if key == top or top not in camel:
        return None
    return (
        f"{PROJECT}:{key}: a nested key set without --path (Pulumi stored one flat key named {key!r}, which the "
        f"program does not read); run `pulumi config rm {key}`, then `pulumi config set --path '{key}' <value>`"
    )


def _partial(data: Mapping[str, Any], valid: set[str], context: dict[str, Any]) -> tuple[Settings, frozenset[str]]:
    """Settings built from the top-level keys that validate on their own, and the names of those left out."""
    values: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        if name not in valid:
            continue
        alias = field.alias or name
        try:
            if alias in data:
                values[name] = TypeAdapter(field.annotation).validate_python(data[alias], context=context)
            else:
                values[name] = field.get_default(call_default_factory=True, validated_data={})
                if isinstance(values[name], dict) and _models_in(field.annotation):
                    values[name] = _models_in(field.annotation)[0].model_validate({}, context=context)
        except (ValidationError, ValueError, TypeError):
            continue
    return Settings.model_construct(**values), frozenset(set(Settings.model_fields) - set(values))


def _independent_problems(
    err: ValidationError, data: Mapping[str, Any], context: dict[str, Any], secret_keys: frozenset[str]
) -> list[str]:
    """Cross-key problems among the keys that are valid, found although other keys are not."""
    alias_to_name = {(f.alias or n): n for n, f in Settings.model_fields.items()}
    failed = {alias_to_name.get(str(e["loc"][0]), str(e["loc"][0])) for e in err.errors() if e["loc"]}
    if any(not e["loc"] for e in err.errors()):
        return []  # the cross-checks themselves ran and failed: already reported
    partial, left_out = _partial(data, set(Settings.model_fields) - failed, context)
    try:
        errors = partial.cross_check_errors(skip=left_out)
    except Exception:
        return []
    return [_problem(c.field, c.value, c.allowed, secret_keys) for c in errors]


def load(
    raw: Mapping[str, Any], project: str | None, secret_keys: frozenset[str] = frozenset(), now: datetime | None = None
) -> Settings:
    """Validates raw stack config (keys without the project prefix) into Settings, or raises ConfigError.

    Values of `secret_keys` (Pulumi secrets, by top-level key) and of secret fields are never echoed, and a
    secret field outside `secret_keys` (plain text in the stack) is an error. `now` is the clock for date
    checks (a maintenance exclusion must not be over); default: the current time. A value holding a
    `<REPLACE-ME...>` marker is one problem naming its key; it is then validated as if unset, and other
    problems of the same key are not reported on top. (The offline commands add the `--set` flags that fill
    the placeholders: components/cli/plan.py config_error.)
    """
    data: dict[str, Any] = {}
    problems: list[str] = []
    secret_keys = frozenset(secret_keys)
    for key, value in raw.items():
        flat = _flat_nested_key(key)
        if flat:
            problems.append(flat)
            continue
        if key in _STRUCTURED and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                problems.append(
                    f"{PROJECT}:{key} = {_show(key, value, secret_keys)}: a structured object (YAML map); set "
                    f"its items with `pulumi config set --path '{key}.<item>' <value>`"
                )
                continue
        data[key] = value
    if project is not None:
        data["project"] = project
    # gcp:project first, then the project's keys in stack-file order.
    placeholders = sorted(_placeholders(data, ""), key=lambda hit: hit[0] != ".project")
    placeholder_keys = []
    for path, value in placeholders:
        path = path.lstrip(".")
        problems.append(_placeholder_problem(path, value, secret_keys))
        placeholder_keys.append(config_key(path))
        # Validation errors spell list items `a.0.b`, placeholders `a[0].b`: drop both forms.
        placeholder_keys.append(config_key(re.sub(r"\[(\d+)\]", r".\1", path)))
        # A placeholder inside a list (`channels[0]`) stands for the whole list's value.
        placeholder_keys.append(config_key(re.sub(r"(\[\d+\])+$", "", path)))
        data = _without(data, _split_path(path))
    problems += _plaintext_secrets(data, secret_keys)  # after the placeholders: a marker is no secret
    context = {"now": now or datetime.now(UTC)}
    try:
        settings = Settings.model_validate(data, context=context)
    except ValidationError as err:
        lines = describe(err, secret_keys) + _independent_problems(err, data, context, secret_keys)
        problems.extend(
            line
            for line in lines
            if not any(line.startswith((f"{key} ", f"{key}.", f"{key}[", f"{key}:")) for key in placeholder_keys)
        )
        settings = None
    if problems:
        raise ConfigError(
            f"invalid stack configuration ({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n  "
            # Credential-shaped text is redacted wherever it sits, key names included.
            + "\n  ".join(redact_text(line) for line in problems)
        )
    assert settings is not None
    return settings
