"""Runs the real `__main__.py` in-process under Pulumi's mock runtime and records every registration.

Used by the offline commands and the tests' harness: `pulumi.runtime.set_mocks` swaps the resource monitor for a
recording one, and `pulumi.runtime.test` runs the program and waits for every outstanding registration. Each
RegisterResource request is kept whole, so callers can render objects or assert the dependency graph.
"""

from __future__ import annotations

import os
import runpy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import set_root_resource

from components import preflight as stack_module
from components.cli.mocks import SymbolicMocks
from components.cli.snapshot import SECRET_SIG, SIG_KEY
from components.preflight import OFFLINE_CONFIG, as_runtime_config

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "__main__.py"
PROJECT = "gke-tpu-slicing"
UNKNOWN = rpc.UNKNOWN


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    custom: bool
    remote: bool
    parent: str
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    inputs: dict[str, Any]
    protect: bool = False
    providers: dict[str, str] = field(default_factory=dict)  # a component's provider per package
    # Resource options as the engine receives them: deleteBeforeReplace, ignoreChanges, replaceOnChanges, ...
    options: dict[str, Any] = field(default_factory=dict)
    # The resource's aliases as sent (e.g. {"spec": {"type": ...}}), or {"urn": ...} for URN aliases.
    aliases: list[dict[str, Any]] = field(default_factory=list)
    id: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)

    def plain(self, key: str | None = None) -> Any:
        """Inputs with secrets unwrapped (tests of secrecy look at `inputs` directly)."""
        return unwrap(self.inputs if key is None else self.inputs.get(key))


def is_secret(value: Any) -> bool:
    """A secret crosses the wire as {SIG_KEY: SECRET_SIG, "value": ...}."""
    return isinstance(value, dict) and value.get(SIG_KEY) == SECRET_SIG


def is_unknown(value: Any) -> bool:
    """An input the engine does not know yet (a preview before the resource exists)."""
    if is_secret(value):
        return is_unknown(value["value"])
    return value == UNKNOWN or isinstance(value, pulumi.output.Unknown)


def contains_secret(value: Any) -> bool:
    if is_secret(value):
        return True
    if isinstance(value, dict):
        return any(contains_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_secret(v) for v in value)
    return False


def normalize(value: Any) -> Any:
    """Numbers cross the Pulumi wire as doubles: give integral ones back their integer type."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def unwrap(value: Any) -> Any:
    if is_secret(value):
        return unwrap(value["value"])
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def lookup(value: Any, dotted: str) -> Any:
    """`value["a"]["b"]` for `a.b`; None when a part is missing."""
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.component_outputs: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.registrations.append(
                Registration(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    custom=request.custom,
                    remote=request.remote,
                    parent=request.parent,
                    provider=request.provider,
                    dependencies=list(request.dependencies),
                    property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
                    inputs=rpc.deserialize_properties(request.object, keep_unknowns=True) if request.object else {},
                    protect=bool(request.protect),
                    providers=dict(request.providers),
                    id=response.id,
                    options={
                        "deleteBeforeReplace": request.deleteBeforeReplace,
                        "ignoreChanges": list(request.ignoreChanges),
                        "replaceOnChanges": list(request.replaceOnChanges),
                        "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else None,
                        "additionalSecretOutputs": list(request.additionalSecretOutputs),
                        "customTimeouts": json_format.MessageToDict(request.customTimeouts),
                    },
                    aliases=[json_format.MessageToDict(a) for a in request.aliases]
                    + [{"urn": u} for u in request.aliasURNs],
                )
            )
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        self.component_outputs[request.urn] = rpc.deserialize_properties(request.outputs, keep_unknowns=True)
        return super().RegisterResourceOutputs(request)


@dataclass
class MockRun:
    registrations: list[Registration]
    error: BaseException | None
    mocks: pulumi.runtime.Mocks
    component_outputs: dict[str, dict[str, Any]]
    logs: list[tuple[str, str]]
    required_cli: list[str] = field(default_factory=list)  # ranges passed to pulumi.require_pulumi_version


@contextmanager
def _captured_logs(logs: list[tuple[str, str]]) -> Iterator[None]:
    original = {lvl: getattr(pulumi.log, lvl) for lvl in ("info", "warn", "error")}
    for lvl in original:
        setattr(pulumi.log, lvl, lambda msg, *a, _lvl=lvl, **k: logs.append((_lvl, str(msg))))
    try:
        yield
    finally:
        for lvl, fn in original.items():
            setattr(pulumi.log, lvl, fn)


def exported(name: str) -> Any:
    """The stack output `name` of the run that just ended (None when it exported none); call it before the next
    run, which starts a new root stack."""
    from pulumi.runtime.settings import get_root_resource
    from pulumi.runtime.sync_await import _sync_await

    root = get_root_resource()
    outputs = getattr(root, "outputs", None) or {}
    if name not in outputs:
        return None
    return _sync_await(pulumi.Output.from_input(outputs[name]).future())


def execute(
    config: dict[str, Any],
    *,
    stack: str,
    secret_keys: list[str] | tuple[str, ...] = (),
    preview: bool = False,
    mocks: pulumi.runtime.Mocks | None = None,
    now: datetime | None = None,
    organization: str = "organization",
    program: Callable[[], object] | None = None,
) -> MockRun:
    """Runs __main__.py (or `program`) with `config` (full keys such as `gke-tpu-slicing:tpu`, YAML values) as the
    stack's config; the program's own error (bad configuration, an impossible plan) is returned, not raised.

    `now` is the program's clock (components.preflight.clock), so date checks do not depend on the day;
    `organization` what pulumi.get_organization() answers (a diy backend's by default).
    """
    mocks = mocks or SymbolicMocks()
    if isinstance(mocks, SymbolicMocks):  # the offline commands' mode, passed to the program as config
        config = {**config, ":".join(OFFLINE_CONFIG): True}
    pulumi.runtime.set_all_config(as_runtime_config(config), list(secret_keys))
    monitor = RecordingMonitor(mocks)
    logs: list[tuple[str, str]] = []
    # A fresh root stack per run, or exports of an earlier run would leak into this one.
    set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(
        mocks, project=PROJECT, stack=stack, preview=preview, monitor=monitor, organization=organization
    )
    # The mock engine has no RequirePulumiVersion: record what the program asks for instead.
    required: list[str] = []
    engine = pulumi.runtime.settings.SETTINGS.engine
    engine.RequirePulumiVersion = lambda request: required.append(request.pulumi_version_range)
    original_clock = stack_module.clock
    if now is not None:
        stack_module.clock = lambda: now
    error: BaseException | None = None
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        with _captured_logs(logs):
            run = program or (lambda: runpy.run_path(str(MAIN), run_name="__main__"))
            pulumi.runtime.test(lambda: run() and None)()
    except BaseException as err:
        error = err
    finally:
        os.chdir(cwd)
        stack_module.clock = original_clock
    return MockRun(monitor.registrations, error, mocks, monitor.component_outputs, logs, required)
