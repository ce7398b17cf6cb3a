"""The stack as a Pulumi package, offline (no CLI, no engine): `construct` under Pulumi's mocks with the inputs as the
wire delivers them registers what the program registers; the plugin that serves it, the examples and the docs page.
"""

from __future__ import annotations

import copyreg
import functools
import json
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pulumi
import pytest
import yaml
from pulumi.errors import InputPropertiesError
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from components.cli.mockrun import contains_secret, execute, normalize, unwrap
from components.model.config.checks import PROJECT, REDACTED
from components.package import NAME, VERSION
from components.package.dynamic_host import PROVIDERS
from components.package.inputs import settings_from
from components.package.provider import PackageProvider
from components.package.stack import TYPE, TpuSlicingStack
from tests import stack_config
from tests.harness import Mocks, run_program
from tests.package_schema import TOKEN, args_of, schema_problems, wire
from tests.stack_config import CLOCK, ROOT, stack_file_config

PACKAGE_DIR = ROOT / "components" / "package"


def construct(config: dict[str, Any], *, token: str | None = None, plain_token: bool = False, stack: str = "dev"):
    """Runs the provider's `construct` of the whole-stack component under the mocks (the program's config set too,
    so that nothing but the component differs)."""
    provider = PackageProvider()

    def program() -> None:
        inputs = wire(args_of(config))
        if token is not None:
            inputs["hfToken"] = token if plain_token else pulumi.Output.secret(token)
        provider.construct("tpu", TYPE, inputs, pulumi.ResourceOptions())

    return execute(config, stack=stack, mocks=Mocks(), now=CLOCK, program=program)


def _graph(registrations: list[Any]) -> dict[tuple[str, str], dict[str, Any]]:
    by_urn = {r.urn: (r.type, r.name) for r in registrations}
    return {
        (r.type, r.name): {
            "inputs": normalize(unwrap(r.inputs)),
            "options": r.options,
            "protect": r.protect,
            "dependencies": sorted(str(by_urn.get(u, u)) for u in r.dependencies),
            "secret": contains_secret(r.inputs),
        }
        for r in registrations
        if r.type != TYPE
    }


@functools.cache
def constructed(stack: str) -> Any:
    return construct(stack_file_config(stack), stack=stack)


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_construct_registers_what_the_program_registers(stack: str) -> None:
    program, component = run_program(stack=stack), constructed(stack)
    assert program.error is None and component.error is None, component.error
    assert len(program.registrations) > 50
    ours, theirs = _graph(component.registrations), _graph(program.registrations)
    assert set(ours) == set(theirs)
    assert [k for k in theirs if ours[k] != theirs[k]] == []


def test_the_component_parents_the_graph_and_returns_the_programs_outputs() -> None:
    program, component = run_program(), constructed("dev")
    (stack,) = [r for r in component.registrations if r.type == TYPE]
    tops = [r for r in component.registrations if r.parent == stack.urn]
    assert {r.name for r in tops} >= {"project", "network", "identity", "cluster", "capacity", "queues", "serving"}
    assert all(r.parent != program.registrations[0].parent for r in component.registrations if r is not stack)
    assert component.registrations[0] is stack  # validated first, then registered first, then its children
    outputs = component.component_outputs[stack.urn]
    assert set(outputs) == set(program.outputs)
    plain = {
        k for k, v in program.outputs.items() if isinstance(v, (int, str, list, dict)) and "<" not in json.dumps(v)
    }
    # A component's outputs are serialized (a null is left out); the program's root outputs are read as they are.
    assert plain and {k: normalize(unwrap(outputs[k])) for k in plain} == {
        k: _no_nulls(program.outputs[k]) for k in plain
    }


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    return [_no_nulls(v) for v in value] if isinstance(value, list) else value


def _problems(err: BaseException | None) -> list[str]:
    assert err is not None
    return [line.strip() for line in str(err).splitlines()[1:]]


BAD = {f"{PROJECT}:zone": "nowhere", f"{PROJECT}:tpu": {"cubes": -1}, f"{PROJECT}:kueue": {"priorities": {}}}


def test_bad_inputs_get_the_programs_errors_named_before_any_resource() -> None:
    config = stack_config.merge(stack_file_config("dev"), BAD)
    program = run_program(BAD)
    component = construct(config)
    assert component.registrations == [] and program.registrations == []
    assert isinstance(component.error, InputPropertiesError), component.error
    lines = _problems(program.error)
    assert len(lines) >= 3 and _problems(component.error) == lines
    paths = [e["property_path"] for e in component.error.errors or []]
    assert {"zone", "tpu.cubes", "kueue.priorities"} <= set(paths)


def test_the_component_used_from_python_stops_the_same_way() -> None:
    args = args_of(stack_config.merge(stack_file_config("dev"), BAD))
    run = execute({}, stack="dev", mocks=Mocks(), now=CLOCK, program=lambda: TpuSlicingStack("tpu", args))  # type: ignore[arg-type]
    assert isinstance(run.error, pulumi.RunError) and run.registrations == []
    assert _problems(run.error) == _problems(run_program(BAD).error)


def test_the_token_stays_a_secret_across_the_boundary() -> None:
    run = construct(stack_file_config("dev"), token=TOKEN)
    assert run.error is None, run.error
    secrets = [r for r in run.registrations if r.type == "kubernetes:core/v1:Secret" and r.name.endswith("hf-token")]
    assert secrets and all(contains_secret(r.inputs["stringData"]) for r in secrets)
    assert all(TOKEN in json.dumps(unwrap(r.inputs["stringData"])) for r in secrets)
    assert not any(TOKEN in json.dumps(unwrap(r.inputs)) for r in run.registrations if not contains_secret(r.inputs))


def test_a_token_in_plain_text_is_refused_unprinted() -> None:
    run = construct(stack_file_config("dev"), token=TOKEN, plain_token=True)
    assert isinstance(run.error, InputPropertiesError) and run.registrations == []
    assert f"{PROJECT}:hfToken = {REDACTED}: a secret stored in plain text" in run.error.message
    assert TOKEN not in run.error.message


# --- the plugin and the examples ------------------------------------------------------------------------------


def test_the_plugin_serves_the_package_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = yaml.safe_load((ROOT / "plugin" / "PulumiPlugin.yaml").read_text())
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert manifest == {"runtime": "python", "requiredPulumiVersion": project["requiredPulumiVersion"]}
    requirements = (ROOT / "plugin" / "requirements.txt").read_text().split()
    assert {"../requirements.txt", "../constraints.txt"} <= set(requirements)
    served: list[Any] = []
    monkeypatch.setattr(pulumi.provider, "main", lambda provider, args: served.append((provider, args)))
    monkeypatch.setattr(sys, "argv", ["plugin", "127.0.0.1:1234"])
    runpy.run_path(str(ROOT / "plugin" / "__main__.py"), run_name="__main__")
    ((provider, args),) = served
    assert isinstance(provider, PackageProvider) and args == ["127.0.0.1:1234"]
    # The entry point made the dynamic providers carry the checkout (undone: this process also runs the program).
    assert all(copyreg.dispatch_table.pop(cls, None) is not None for cls in PROVIDERS)
    assert json.loads(provider.schema)["version"] == VERSION


def test_the_plugin_started_as_the_language_host_starts_it_serves_the_committed_schema(tmp_path: Path) -> None:
    """`python <plugin dir> <engine address>` from another directory (the consumer's project), as the Python
    language host runs a plugin without a pyproject: it prints its port and answers GetSchema."""
    plugin = subprocess.Popen(
        [sys.executable, str(ROOT / "plugin"), "127.0.0.1:1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    try:
        assert plugin.stdout is not None
        port = plugin.stdout.readline().decode().strip()
        assert port.isdigit(), plugin.stderr.read().decode() if plugin.stderr else port
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            answer = provider_pb2_grpc.ResourceProviderStub(channel).GetSchema(provider_pb2.GetSchemaRequest(version=0))
        assert json.loads(answer.schema) == json.loads((PACKAGE_DIR / "schema.json").read_text())
    finally:
        plugin.terminate()
        plugin.wait(timeout=30)


def test_the_yaml_example_declares_the_stack_with_inputs_the_schema_and_the_validation_accept() -> None:
    program = yaml.safe_load((ROOT / "examples" / "yaml" / "Pulumi.yaml").read_text())
    assert program["runtime"] == "yaml" and NAME in program["packages"]
    (resource,) = [r for r in program["resources"].values() if r["type"] == f"{NAME}:TpuSlicingStack"]
    assert schema_problems(resource["properties"]) == []
    # The checker itself: a typo, a string count and a missing project are each found.
    bad = {**resource["properties"], "tpu": {"cubs": 2, "cubes": "2"}}
    bad.pop("project")
    assert schema_problems(bad) == ["project: required", "tpu.cubs: unknown input", "tpu.cubes: '2' is not a integer"]
    # With its configuration's values filled in, the inputs pass the program's own validation.
    filled = {"projectId": "my-tpu-project", "reservation": "my-reservation", "weightsBucket": "my-weights"}
    assert set(filled) <= set(program["config"])

    def fill(value: Any) -> Any:
        if isinstance(value, str) and (m := re.fullmatch(r"\$\{([^}]+)\}", value)):
            return filled.get(m[1], value)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items() if k != "hfToken"}
        return [fill(v) for v in value] if isinstance(value, list) else value

    settings = settings_from(fill(resource["properties"]), now=CLOCK)
    assert settings.tpu.cubes >= 1 and settings.tpu.reservation.name == "my-reservation"


def test_the_typescript_example_declares_the_stack() -> None:
    project = yaml.safe_load((ROOT / "examples" / "typescript" / "Pulumi.yaml").read_text())
    assert project["runtime"] == "nodejs" and NAME in project["packages"]
    source = (ROOT / "examples" / "typescript" / "index.ts").read_text()
    assert "new tpu.TpuSlicingStack(" in source and "getSecret(" in source
    for key in ("project", "tpu", "reservation", "weightsBucket"):
        assert f"{key}:" in source


def test_the_docs_page_names_the_version_and_every_language() -> None:
    page = (ROOT / "docs" / "package.md").read_text()
    assert f"v{VERSION}" in page
    for what in ("pulumi package add", "TypeScript", "Python", "Go", "C#", "YAML", "What is not exposed"):
        assert what in page, what
