"""The stack files as the tests hand them to the program: placeholders filled, the keys no default
can give, the program's clock, and the smallest configurations the settings tests start from.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from components.cli.mockrun import PROJECT
from components.cli.plan import stack_config
from components.model.config.checks import PLACEHOLDER_RE
from components.model.config.settings import ConfigError, Settings, load
from components.model.diff import paths

ROOT = Path(__file__).resolve().parent.parent
# The project's config namespace.
P = PROJECT
# The program's clock in every run (date checks must not make tests depend on the day they run).
CLOCK = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml"))

# What tests put where a stack file says <REPLACE-ME...>, by config path. A placeholder without an
# entry here fails every run of that stack, naming it, so a new placeholder cannot go untested.
PLACEHOLDER_VALUES: dict[str, Any] = {
    "gcp:project": "my-tpu-project",
    f"{PROJECT}:tpu.reservation.name": "tpu7x-reservation",
    f"{PROJECT}:serving.weightsBucket": "gemma3-weights",
    f"{PROJECT}:cluster.controlPlane.authorizedNetworks[0].cidrBlock": "198.51.100.0/24",
    f"{PROJECT}:observability.notificationChannels[0]": "projects/my-tpu-project/notificationChannels/123456",
    # Test digests (no registry here: any well-formed digest pins as well as a real one).
    f"{PROJECT}:serving.image": f"docker.io/vllm/vllm-tpu:nightly-20260430-18ed615-5b39b26@sha256:{'a' * 64}",
    f"{PROJECT}:serving.routingSidecar.image": f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0@sha256:{'b' * 64}",
}


def placeholders(value: Any, path: str) -> list[str]:
    """Config paths (`gcp:project`, `gke-tpu-slicing:tpu.reservation.name`) of every placeholder in `value`."""
    if isinstance(value, str):
        return [path] if PLACEHOLDER_RE.search(value) else []
    if isinstance(value, dict):
        sep = "" if not path else "."
        return [hit for k, v in value.items() for hit in placeholders(v, f"{path}{sep}{k}")]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in placeholders(v, f"{path}[{i}]")]
    return []


def fill_placeholders(config: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(config)
    for path in placeholders(config, ""):
        if path not in PLACEHOLDER_VALUES:
            raise KeyError(f"{path} is a placeholder in a stack file: give it a test value in PLACEHOLDER_VALUES")
        top, _, rest = path.partition(".") if not path.startswith("gcp:") else (path, "", "")
        paths.assign(out, (top, *paths.parse(rest)), PLACEHOLDER_VALUES[path])
    return out


# The keys settings without a stack file need besides the reservation (they have no default): the weights
# bucket, who hears of alerts, who may reach the control plane.
REQUIRED_KEYS: dict[str, Any] = {
    "serving": {"weightsBucket": "my-weights"},
    "observability": {"notifyNobody": True},
    "cluster": {"controlPlane": {"authorizedNetworks": [{"cidrBlock": "198.51.100.0/24"}]}},
}


def set_arguments(stack: str) -> list[str]:
    """`--set KEY=VALUE` arguments of the offline commands that fill the stack file's placeholders."""
    out: list[str] = []
    for path in placeholders(stack_config(ROOT, stack), ""):
        out += ["--set", f"{path}={PLACEHOLDER_VALUES[path]}"]
    return out


# The codelab's whole mix on dev's two cubes: serving and both demos at once. Dev's stack file leaves the
# super-slicing demo off (it needs both cubes, which serving holds: docs/stacks.md, "The dev tour"); the
# tests of that demo, of its preemption and of a graph with every workload kind start from this.
CODELAB_MIX = {f"{PROJECT}:demos": {"superslicing": {"enabled": True}}}
# The add-ons dev does not turn on by default: none left (KEDA came on with elastic serving); kept for the tests
# that check every chart and type with them all.
OPT_IN_ADDONS = {f"{PROJECT}:addons": {"keda": {"enabled": True}}}
# Dev without elastic serving (fixed groups, no KEDA), for the tests that reshape serving, shrink the cubes below
# what dev's slots need or turn off the scrapes they read (the configuration would be refused: tests/test_burst.py).
FIXED_SERVING = {
    f"{PROJECT}:serving": {role: {"autoscaling": {"enabled": False}} for role in ("prefill", "decode")},
    f"{PROJECT}:addons": {"keda": {"enabled": False}},
}
# The same as the offline commands' `--set` arguments.
_FIXED = ("serving.prefill.autoscaling.enabled", "serving.decode.autoscaling.enabled", "addons.keda.enabled")
FIXED_SERVING_SETS = tuple(a for key in _FIXED for a in ("--set", f"{key}=false"))


def stack_file_config(stack: str = "dev", *, filled: bool = True) -> dict[str, Any]:
    """What `pulumi up` would hand the program: project-level values and declared defaults, then the
    stack file; its placeholders replaced by PLACEHOLDER_VALUES unless `filled=False`."""
    config = stack_config(ROOT, stack)
    return fill_placeholders(config) if filled else config


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Deep merge; a None value deletes the key (an unset config key)."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def stack_settings(stack: str, overrides: dict[str, Any] | None = None) -> Settings:
    """A stack file's settings (with `overrides`, project keys without their prefix), its placeholders filled, as its
    preview places them against the tests' default reservation (components/cli/mocks.py FakeReservation: one in
    us-central1-ai1a, whose only block is block-0)."""
    from components.placement import with_placement  # here: preview.yml imports this module without the program

    config = stack_file_config(stack)
    raw = {k.removeprefix(f"{PROJECT}:"): v for k, v in config.items() if k.startswith(f"{PROJECT}:")}
    raw = merge(raw, overrides or {})
    return with_placement(load(raw, config["gcp:project"], now=CLOCK), zone="us-central1-ai1a", block="block-0")


def dev_settings(overrides: dict[str, Any] | None = None) -> Settings:
    return stack_settings("dev", overrides)


WORKFLOWS = ROOT / ".github" / "workflows"


def workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


PROJECT_ID = "my-tpu-project"
# The smallest valid configuration: the defaults plus the values no default can give.
SMALLEST: dict[str, Any] = {"tpu": {"reservation": {"name": "tpu7x-reservation"}}, **REQUIRED_KEYS}


def with_value(path: str, value: Any, context: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(raw config, gcp:project) with `value` at `path`, on top of SMALLEST and the rule's context."""
    raw = merge(SMALLEST, context)
    if path == "project":
        return raw, value
    paths.assign(raw, tuple(path.split(".")), value)
    return raw, PROJECT_ID


# The settings tests vary the TPU keys, with REQUIRED_KEYS merged under every configuration.
BASE: dict[str, Any] = {"tpu": SMALLEST["tpu"]}


def problems(raw: dict[str, Any], project: str = PROJECT_ID) -> list[str]:
    import pytest  # here: preview.yml imports this module with the program's requirements alone

    with pytest.raises(ConfigError) as err:
        load(merge(REQUIRED_KEYS, raw), project, now=CLOCK)
    lines = str(err.value).splitlines()
    assert lines[0] == f"invalid stack configuration ({len(lines) - 1} problem{'s' if len(lines) > 2 else ''}):"
    return [line.strip() for line in lines[1:]]
