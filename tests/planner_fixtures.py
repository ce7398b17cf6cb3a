"""The planner tests' settings: the least configuration that loads, with the demos, serving and cube count
overridden per case (keys without the namespace)."""

from __future__ import annotations

import functools
from typing import Any

from components.model.config.settings import Settings, load
from components.model.tpu import planner
from components.model.tpu.planner import Plan
from tests.stack_config import REQUIRED_KEYS, merge

BASE: dict[str, Any] = {"tpu": {"reservation": {"name": "r"}}, **REQUIRED_KEYS}
NO_DEMOS = {"demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}}


def settings(*overrides: dict[str, Any]) -> Settings:
    return load(functools.reduce(merge, overrides, BASE), "my-project-123")


def cubes(n: int) -> dict[str, Any]:
    return {"tpu": {"cubes": n}}


def run_plan(*overrides: dict[str, Any]) -> Plan:
    return planner.plan(settings(*overrides))


KEDA = {"addons": {"keda": {"enabled": True}}}  # what scales the burst slots: required with autoscaling


def elastic(role: str, max_groups: int | None) -> dict[str, Any]:
    """Autoscaling on for `role`, up to `max_groups` groups (None: maxGroups unset), and KEDA."""
    autoscaling: dict[str, Any] = {"enabled": True}
    if max_groups is not None:
        autoscaling["maxGroups"] = max_groups
    return {"serving": {role: {"autoscaling": autoscaling}}, **KEDA}


def both(prefill: int, decode: int) -> dict[str, Any]:
    """Autoscaling on for both roles, up to these many groups each, and KEDA."""
    roles = (("prefill", prefill), ("decode", decode))
    return {"serving": {r: elastic(r, n)["serving"][r] for r, n in roles}, **KEDA}
