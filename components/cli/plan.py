"""`python -m components plan`: the capacity plan of a stack file; and how every offline command reads a stack.

A stack's config is `Pulumi.yaml`'s declared values and defaults with `Pulumi.<stack>.yaml` on top, as `pulumi up`
merges them, then `--set` overrides as `pulumi config set --path` stores them, validated by the program's Settings.
Exit status: 0 feasible (warnings allowed), 1 errors (an impossible request, invalid configuration), 2 usage errors.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import yaml

from components import placement
from components import reservation_reads as reservation
from components.model.config.checks import PLACEHOLDER_RE, looks_secret
from components.model.config.settings import PROJECT, ConfigError, Settings, is_secret_path, load
from components.model.tpu import planner

ROOT = Path(__file__).resolve().parents[2]
SECRET_PLACEHOLDER = "[secret]"


class StackFileError(Exception):
    """A missing or unreadable stack or project file, or a bad `--set`."""


def fail(err: TextIO, message: object, code: int = 2) -> int:
    """`error: <message>` on `err`; returns the exit status."""
    print(f"error: {message}", file=err)
    return code


def _secure_to_placeholder(value: Any) -> Any:
    """Encrypted values (`{secure: ...}`) cannot be read without Pulumi; the plan never needs them."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER
        return {k: _secure_to_placeholder(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_secure_to_placeholder(v) for v in value]
    return value


class GoYamlLoader(yaml.SafeLoader):
    """YAML 1.1 as PyYAML reads it, but for the two plain scalars Pulumi's Go YAML (go-yaml, resolve.go `resolve`
    and decode.go `scalar`) reads otherwise: a timestamp decoded into interface{} stays the string typed, and base 60
    is "purposefully unsupported" (`12:30` is no 750). Stack files are read as `pulumi up` reads them."""


GoYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _no_base_60(constructor: Any) -> Any:
    def construct(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        return node.value if ":" in node.value else constructor(loader, node)

    return construct


GoYamlLoader.add_constructor("tag:yaml.org,2002:int", _no_base_60(yaml.SafeLoader.construct_yaml_int))
GoYamlLoader.add_constructor("tag:yaml.org,2002:float", _no_base_60(yaml.SafeLoader.construct_yaml_float))


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(), Loader=GoYamlLoader)
    except OSError as err:
        raise StackFileError(f"cannot read {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise StackFileError(f"{path} is not valid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise StackFileError(f"{path} is not a YAML map")
    return data


def stack_config(directory: Path, stack: str) -> dict[str, Any]:
    """Project-level values and declared defaults from Pulumi.yaml, then the stack file on top."""
    project = read_yaml(directory / "Pulumi.yaml")
    name = project.get("name", PROJECT)
    config: dict[str, Any] = {}
    for key, value in (project.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        if not (isinstance(value, dict) and {"type", "default", "value"} & set(value)):
            config[full] = value
        elif "value" in value or "default" in value:
            config[full] = value["value"] if "value" in value else value["default"]
    config.update(read_yaml(directory / f"Pulumi.{stack}.yaml").get("config") or {})
    return _secure_to_placeholder(config)


def secret_keys(directory: Path, stack: str) -> list[str]:
    """Full config keys whose stack-file value is (or holds) an encrypted `{secure: ...}` value."""
    config = read_yaml(directory / f"Pulumi.{stack}.yaml").get("config") or {}
    return sorted(key for key, value in config.items() if _secure_to_placeholder(value) != value)


# KEY of `--set KEY=VALUE`: an optional `namespace:` then a path of names and [index]es, as
# `pulumi config set --path` takes it (tpu.reservation.name, observability.notificationChannels[0]).
_SET_KEY_RE = re.compile(r"^(?:[A-Za-z][-\w]*:)?[A-Za-z_][-\w]*(?:\[\d{1,4}\])*(?:\.[A-Za-z_][-\w]*(?:\[\d{1,4}\])*)*$")


def _set_error(key: str, what: str, fix: str) -> StackFileError:
    return StackFileError(f"--set {key}: {what}; {fix}")


# Go's strconv.Atoi on a 64-bit platform: an optional sign, ASCII digits, within int64.
_ATOI_RE = re.compile(r"^[+-]?[0-9]+$")


def path_value(text: str) -> bool | int | str:
    """VALUE as `pulumi config set --path` stores it under a nested key (pulumi/pulumi@c5647f7c
    sdk/go/common/resource/config/map.go `adjustObjectValue`): `true` and `false` are booleans, a base-10 integer
    without a leading zero (Atoi) an integer, and anything else the string typed: a date, `yes`, `0755`, `1.36`,
    `null`, quotes and brackets included. What the key's setting then makes of it is the program's check."""
    if text in ("true", "false"):
        return text == "true"
    if (len(text) > 1 and text[0] == "0") or not _ATOI_RE.match(text):
        return text
    number = int(text)
    return number if -(2**63) <= number < 2**63 else text


def apply_set(config: dict[str, Any], assignment: str) -> dict[str, Any]:
    """`KEY=VALUE` as `pulumi config set --path KEY VALUE` would store it, on a copy of `config`.

    KEY is `gcp:project`, or a project key with or without the `gke-tpu-slicing:` prefix, with
    `.` and `[n]` for nested items (`tpu.reservation.name`). VALUE is stored as `path_value` says (a one-segment
    key's as typed: map.go `Set` stores it unchanged). A bad assignment is a StackFileError of one line naming the
    key; a secret key's value is never in it.
    """
    key, sep, text = assignment.partition("=")
    shown_key = key if _SET_KEY_RE.match(key) else "<key>"
    if not sep or not key:
        shown = "[secret]" if looks_secret(assignment) else repr(assignment)
        raise StackFileError(f"--set {shown}: expected KEY=VALUE, e.g. --set tpu.cubes=4")
    if not _SET_KEY_RE.match(key):
        raise _set_error(
            "[secret]" if looks_secret(key) else repr(key),
            "not a config key",
            "use names joined by '.' with [n] for list items, e.g. tpu.reservation.name or "
            "observability.notificationChannels[0]",
        )
    if ":" not in key.split(".", 1)[0]:
        key = f"{PROJECT}:{key}"
    top, _, rest = key.partition(".")
    parts: list[str | int] = [top, *[int(x) if x.isdigit() else x for x in re.split(r"\.|\[|\]\.?", rest) if x]]
    value = path_value(text) if len(parts) > 1 else text
    out = copy.deepcopy(config)
    node: Any = out
    for part, after in itertools.pairwise([*parts, None]):  # `after` None: `part` is where the value goes
        if isinstance(node, list) != isinstance(part, int):
            raise _set_error(shown_key, f"{part!r} does not fit the value there", "check the key's path")
        if isinstance(node, list):
            node.extend([None] * (part + 1 - len(node)))
        if after is None:
            node[part] = value
            break
        child = node[part] if isinstance(node, list) else node.get(part)
        if not isinstance(child, dict | list):
            child = [] if isinstance(after, int) else {}
            node[part] = child
        node = child
    return out


def set_secret_keys(assignments: Sequence[str]) -> set[str]:
    """Full keys that `--set` gives a secret field: a value typed on the command line is no stack-file
    plain text, and stays secret (redacted, a Pulumi secret in the render)."""
    out = set()
    for assignment in assignments:
        bare = assignment.partition("=")[0].removeprefix(f"{PROJECT}:")
        if ":" not in bare.split(".", 1)[0] and is_secret_path(bare):
            out.add(f"{PROJECT}:{re.split(r'[.[]', bare, maxsplit=1)[0]}")
    return out


def all_secret_keys(directory: Path, stack: str, assignments: Sequence[str]) -> set[str]:
    """The stack file's encrypted keys and the secret keys given with `--set`."""
    return set(secret_keys(directory, stack)) | set_secret_keys(assignments)


def load_config(config: dict[str, Any], directory: Path, stack: str, assignments: Sequence[str]) -> Settings:
    """Settings of a stack's merged config (read_stack), validated as the program would. Raises ConfigError."""
    raw, project = settings_input(config)
    prefix = f"{PROJECT}:"
    secrets = all_secret_keys(directory, stack, assignments)
    return load(raw, project, frozenset(k[len(prefix) :] for k in secrets if k.startswith(prefix)))


def settings_input(config: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(raw project keys without the `gke-tpu-slicing:` prefix, gcp:project) for `settings.load`."""
    prefix = f"{PROJECT}:"
    raw = {key[len(prefix) :]: value for key, value in config.items() if key.startswith(prefix)}
    project = config.get("gcp:project")
    # The program reads every config value as a string (`pulumi.Config.get`): a number typed for gcp:project
    # (YAML reads `123456789012` as an integer) is the string the program would see, not a missing project.
    if isinstance(project, bool):
        project = str(project).lower()
    elif isinstance(project, int | float):
        project = str(project)
    return raw, project if isinstance(project, str) else None


def placeholder_flags(config: dict[str, Any]) -> list[str]:
    """`--set KEY=VALUE` for every `<REPLACE-ME...>` value left in `config`, as `apply_set` reads them."""

    def walk(value: Any, path: str) -> list[str]:
        if isinstance(value, str):
            return [path] if PLACEHOLDER_RE.search(value) else []
        if isinstance(value, dict):
            return [hit for k, v in value.items() for hit in walk(v, f"{path}.{k}")]
        if isinstance(value, list):
            return [hit for i, v in enumerate(value) for hit in walk(v, f"{path}[{i}]")]
        return []

    found = [hit for key, value in config.items() for hit in walk(value, key.removeprefix(f"{PROJECT}:"))]
    # Quoted for the shell: zsh expands an unquoted `[0]` as a glob (and fails on no match).
    return [f"--set {shlex.quote(f'{path}=VALUE')}" for path in found]


def config_error(message: str, config: dict[str, Any], sep: str = "\n") -> str:
    """The refusal as `pulumi preview` prints it, plus, when placeholders are left, the `--set` flags that
    fill them for one offline command (the message itself names `pulumi config set`, which needs the CLI)."""
    flags = placeholder_flags(config)
    return f"{message}{sep}or, for this command alone (no Pulumi CLI needed): {' '.join(flags)}" if flags else message


class OneLineParser(argparse.ArgumentParser):
    """A usage error as one line naming the command's `--help`, exit 2 (argparse prints the whole usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def add_stack_arguments(parser: argparse.ArgumentParser, *, stack_required: bool = False) -> None:
    """`--stack`, `--dir` and `--set`: which stack file the offline commands read, and overrides on top."""
    if stack_required:
        parser.add_argument("--stack", required=True, help="stack name: reads Pulumi.<stack>.yaml")
    else:
        parser.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default: dev)")
    parser.add_argument(
        "--dir", type=Path, default=ROOT, help="directory holding Pulumi.yaml and the stack files (default: the repo)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config value, as `pulumi config set --path` would (repeatable), e.g. "
        "--set gcp:project=my-project --set tpu.reservation.name=my-reservation",
    )


def read_stack(directory: Path, stack: str, assignments: Sequence[str]) -> dict[str, Any]:
    """The stack's config as `pulumi up` would merge it, with `--set` overrides on top."""
    config = stack_config(directory, stack)
    for assignment in assignments:
        config = apply_set(config, assignment)
    return config


def _shown(path: Path) -> str:
    """The stack file as the user would type it: relative to the working directory when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None, word: str) -> argparse.Namespace:
    """`argv` (sys.argv's when None) parsed, without a leading subcommand `word`."""
    args = list(sys.argv[1:] if argv is None else argv)
    return parser.parse_args(args[1:] if args[:1] == [word] else args)


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Runs the planner on a stack file. `argv` may start with the subcommand word `plan`."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m components plan",
        description="Print the TPU capacity plan of a stack file: slices per cube, admitted / pending / "
        "preempted workloads, chips requested vs provisioned. No Pulumi, no cloud.",
    )
    add_stack_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON (the stack output) instead")
    parser.add_argument(
        "--reservation",
        type=Path,
        metavar="FILE",
        help="JSON of the reservation invokes' results (getReservation, getReservationBlock, "
        "getReservationSubBlock list, optional getCluster), as the provider returns them; without it the "
        "sub-blocks are not read and every cube counts",
    )
    args = parse_args(parser, argv, "plan")
    try:
        config = read_stack(args.dir, args.stack, args.set)
    except StackFileError as e:
        return fail(err, e)
    try:
        settings = load_config(config, args.dir, args.stack, args.set)
    except ConfigError as e:
        return fail(err, config_error(str(e), config), 1)
    chosen: tuple[str, ...] | list[str]
    try:
        if args.reservation is not None:
            placed = placement.place(settings, placement.from_file(args.reservation))
            settings, sub_blocks, chosen = placed.settings, placed.sub_blocks, placed.chosen
        else:
            settings, chosen = placement.stand_ins(settings)
            sub_blocks = reservation.not_read(settings, offline=True)
    except reservation.ReservationError as e:
        return fail(err, e, 1)
    assert sub_blocks is not None
    if sub_blocks.errors:
        return fail(err, sub_blocks.error_message(), 1)
    result = planner.plan(settings, sub_blocks)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2), file=out)
    else:
        print(f"stack {args.stack}: {_shown(args.dir / f'Pulumi.{args.stack}.yaml')}", file=out)
        for line in chosen:
            print(f"placement: {line}", file=out)
        print(result.table(), file=out)
        for warning in result.warnings:
            print(f"warning: {warning}", file=out)
    for error in result.errors:
        print(f"error: {error}", file=err)
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
