"""Runs the real `__main__.py` under Pulumi's mock runtime and records what it registers.

Every RegisterResource request is kept whole (type, name, parent, provider, dependencies,
property dependencies, inputs), so tests can assert exact properties and the dependency graph.
"""

from __future__ import annotations

import copy
import os
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.cli.plan import stack_config
from components.stack import as_runtime_config

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "__main__.py"
PROJECT = "gke-tpu-slicing"
SECRET_SIG = rpc._special_sig_key  # the key marking a serialized secret
UNKNOWN = rpc.UNKNOWN
PROJECT_NUMBER = "123456789012"


def stack_file_config(stack: str = "dev") -> dict[str, Any]:
    """What `pulumi up` would hand the program: project-level values and declared defaults, then the stack file."""
    return stack_config(ROOT, stack)


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
    id: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    # The resource's aliases as sent (e.g. {"spec": {"type": ...}}), or {"urn": ...} for URN aliases.
    aliases: list[dict[str, Any]] = field(default_factory=list)

    def plain(self, key: str | None = None) -> Any:
        """Inputs with secrets unwrapped (tests of secrecy look at `inputs` directly)."""
        value = unwrap(self.inputs if key is None else self.inputs.get(key))
        return value


def is_unknown(value: Any) -> bool:
    """An input the engine does not know yet (a preview before the resource exists)."""
    if is_secret(value):
        return is_unknown(value["value"])
    return value == UNKNOWN or isinstance(value, pulumi.output.Unknown)


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SECRET_SIG) == rpc._special_secret_sig


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


class Mocks(pulumi.runtime.Mocks):
    """Returns inputs as state plus the computed fields the program reads.

    `known_cluster=False` models the first preview of a fresh stack: the cluster has no endpoint yet.
    """

    def __init__(self, known_cluster: bool = True) -> None:
        self.known_cluster = known_cluster
        self.calls: list[pulumi.runtime.MockCallArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        name = state.get("name", args.name)
        state.setdefault("name", name)
        project = state.get("project", "my-tpu-project")
        if args.typ.startswith("gcp:"):
            state.setdefault("selfLink", f"https://www.googleapis.com/mock/projects/{project}/{args.typ}/{name}")
        if args.typ == "gcp:serviceaccount/account:Account":
            email = f"{state['accountId']}@{project}.iam.gserviceaccount.com"
            state.update(email=email, member=f"serviceAccount:{email}")
        if args.typ == "gcp:container/cluster:Cluster":
            if self.known_cluster:
                state.update(endpoint="203.0.113.10", masterAuth={"clusterCaCertificate": "Q0EtY2VydA=="})
            else:
                state.pop("endpoint", None)
                state.pop("masterAuth", None)
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        self.calls.append(args)
        if args.token == "gcp:organizations/getProject:getProject":
            return {"number": PROJECT_NUMBER, "projectId": args.args.get("projectId", "my-tpu-project")}, []
        return {}, []


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: Mocks) -> None:
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
                    id=response.id,
                    aliases=[json_format.MessageToDict(a) for a in request.aliases]
                    + [{"urn": u} for u in request.aliasURNs],
                )
            )
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        self.component_outputs[request.urn] = rpc.deserialize_properties(request.outputs, keep_unknowns=True)
        return super().RegisterResourceOutputs(request)


@dataclass
class Run:
    registrations: list[Registration]
    outputs: dict[str, Any]
    secret_outputs: set[str]
    error: BaseException | None
    mocks: Mocks
    component_outputs: dict[str, dict[str, Any]]
    logs: list[tuple[str, str]]

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def get(self, type_: str, name: str) -> Registration:
        found = [r for r in self.registrations if r.type == type_ and r.name == name]
        assert len(found) == 1, f"expected one {type_} named {name}, found {len(found)}: " + ", ".join(
            sorted(r.name for r in self.of_type(type_))
        )
        return found[0]

    def by_urn(self, urn: str) -> Registration:
        return next(r for r in self.registrations if r.urn == urn)

    def direct_edges(self, reg: Registration) -> set[str]:
        """What Pulumi orders this resource after: dependencies, property dependencies, parent, provider."""
        edges = set(reg.dependencies)
        for urns in reg.property_dependencies.values():
            edges.update(urns)
        if reg.parent:
            edges.add(reg.parent)
        if reg.provider:
            edges.add(reg.provider.split("::" + reg.provider.rsplit("::", 1)[-1])[0])
        return {e for e in edges if e}

    def depends_on(self, a: Registration, b: Registration) -> bool:
        """True when `a` is (transitively) ordered after `b`; components count through their children."""
        targets = {b.urn} | {r.urn for r in self.descendants(b)}
        seen: set[str] = set()
        todo = [a.urn]
        while todo:
            urn = todo.pop()
            if urn in seen:
                continue
            seen.add(urn)
            try:
                reg = self.by_urn(urn)
            except StopIteration:
                continue
            for edge in self.direct_edges(reg):
                if edge in targets:
                    return True
                todo.append(edge)
        return False

    def descendants(self, reg: Registration) -> list[Registration]:
        out = [r for r in self.registrations if r.parent == reg.urn]
        for child in list(out):
            out.extend(self.descendants(child))
        return out


def run_program(
    overrides: dict[str, Any] | None = None,
    *,
    stack: str = "dev",
    secrets: dict[str, str] | None = None,
    preview: bool = False,
    mocks: Mocks | None = None,
) -> Run:
    """Runs __main__.py with the stack file's config deep-merged with `overrides` (keys like 'gke-tpu-slicing:tpu')."""
    config = merge(stack_file_config(stack), overrides or {})
    config.update(secrets or {})
    pulumi.runtime.set_all_config(as_runtime_config(config), list((secrets or {}).keys()))
    mocks = mocks or Mocks()
    monitor = RecordingMonitor(mocks)
    logs: list[tuple[str, str]] = []
    # A fresh root stack per run, or exports of an earlier run would leak into this one.
    pulumi.runtime.settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=preview, monitor=monitor)
    original_log = {lvl: getattr(pulumi.log, lvl) for lvl in ("info", "warn", "error")}
    for lvl in original_log:
        setattr(pulumi.log, lvl, lambda msg, *a, _lvl=lvl, **k: logs.append((_lvl, str(msg))))
    error: BaseException | None = None
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        _sync_await(run_pulumi_func(lambda: runpy.run_path(str(MAIN), run_name="__main__")))
    except BaseException as err:
        error = err
    finally:
        os.chdir(cwd)
        for lvl, fn in original_log.items():
            setattr(pulumi.log, lvl, fn)
    outputs: dict[str, Any] = {}
    secret_outputs: set[str] = set()
    root = pulumi.runtime.get_root_resource()
    if error is None and root is not None:
        for key, value in root.outputs.items():  # type: ignore[attr-defined]
            out = pulumi.Output.from_input(value)
            outputs[key] = _sync_await(out.future(with_unknowns=True))
            if _sync_await(out.is_secret()):
                secret_outputs.add(key)
    return Run(monitor.registrations, outputs, secret_outputs, error, mocks, monitor.component_outputs, logs)


def assert_rejected(
    overrides: dict[str, Any], fragments: list[str], prefix: str = "invalid stack configuration"
) -> str:
    """The program stops with one error containing every fragment, before registering anything."""
    run = run_program(overrides)
    assert run.error is not None, f"accepted: {overrides}"
    message = str(run.error)
    assert message.startswith(prefix), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert run.registrations == [], f"{len(run.registrations)} resources registered before the error"
    return message
