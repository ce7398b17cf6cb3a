"""Reads the stack's configuration into Settings, before any resource exists."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
import yaml

from components import reservation
from components.model import planner
from components.model.reservation import Assignment
from components.model.settings import PROJECT, ConfigError, Settings, load

PROJECT_FILE = Path(__file__).resolve().parent.parent / "Pulumi.yaml"


def required_cli() -> str:
    """The CLI version range Pulumi.yaml declares (`requiredPulumiVersion`), the one place it is written."""
    return str(yaml.safe_load(PROJECT_FILE.read_text())["requiredPulumiVersion"])


def require_cli() -> None:
    """Stops a CLI outside the declared range, including CLIs too old to read `requiredPulumiVersion`."""
    pulumi.require_pulumi_version(required_cli())


def _project_config() -> dict[str, Any]:
    """Every `gke-tpu-slicing:*` key that is set, typos included (Pulumi has no public listing)."""
    merged: dict[str, Any] = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{PROJECT}:"
    return {key[len(prefix) :]: value for key, value in merged.items() if key.startswith(prefix)}


def clock() -> datetime:
    """The time date checks run against (tests pin it)."""
    return datetime.now(UTC)


def load_settings() -> Settings:
    raw = _project_config()
    project = pulumi.Config("gcp").get("project")
    secret_keys = frozenset(k for k in raw if runtime_config.is_config_secret(f"{PROJECT}:{k}"))
    try:
        settings = load(raw, project, secret_keys, now=clock())
    except ConfigError as err:
        # One message, then stop: nothing has been registered yet.
        raise pulumi.RunError(str(err)) from None
    for warning in settings.warnings():
        pulumi.log.warn(warning)
    if "hfToken" in raw and "hfToken" not in secret_keys:
        pulumi.log.warn(f"{PROJECT}:hfToken is stored in plain text: set it with `pulumi config set --secret hfToken`")
    return settings


def read_sub_blocks(settings: Settings) -> Assignment:
    """Reads the reservation block's sub-blocks and puts each cube on one (components/reservation.py).

    A missing reservation or block, an unreadable one, or cubes without a usable sub-block stop the
    preview here, before any resource is registered.
    """
    try:
        result = reservation.assignment(settings)
    except reservation.ReservationError as err:
        raise pulumi.RunError(str(err)) from None
    if result.errors:
        raise pulumi.RunError(result.error_message())
    return result


def plan_capacity(settings: Settings, sub_blocks: Assignment | None = None) -> planner.Plan:
    """Places every enabled workload's slices into the cubes before anything is created.

    A request the reservation can never hold stops the preview here; a contended mix is a warning
    naming who will wait or be preempted, with the plan as a table. Cubes on unusable sub-blocks
    do not count.
    """
    plan = planner.plan(settings, sub_blocks)
    if plan.errors:
        raise pulumi.RunError(plan.error_message())
    for warning in plan.warnings:
        pulumi.log.warn(warning)
    pulumi.log.info(plan.table())
    return plan


def as_runtime_config(stack_config: dict[str, Any]) -> dict[str, str]:
    """Stack-file config (YAML values) in the string form the Pulumi runtime hands to programs."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_config.items()}
