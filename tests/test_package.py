"""The stack as a Pulumi package (components/package/, plugin/, docs/package.md), offline: no CLI, no engine.

The schema is the SDK's own inference (`PackageProvider().schema`, what the engine's GetSchema answers), compared
with the committed copy; `construct` runs under Pulumi's mocks with the inputs as the wire delivers them (numbers
as floats, the token as a secret Output) and must register what the program registers for the same configuration.
"""

from __future__ import annotations

import ast
import copyreg
import functools
import importlib.util
import json
import re
import runpy
import subprocess
import sys
import types
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pulumi
import pytest
import yaml
from pulumi.errors import InputPropertiesError
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc
from pydantic import BaseModel, SecretStr

from components.cli import package_args
from components.cli.mockrun import contains_secret, execute, normalize, unwrap
from components.model.config.checks import PROJECT, REDACTED
from components.model.config.root_settings import Settings
from components.package import NAME, VERSION
from components.package.dynamic_host import PROVIDERS
from components.package.inputs import settings_from
from components.package.provider import PackageProvider
from components.package.schema import schema, schema_text
from components.package.stack import OUTPUTS, TYPE, TpuSlicingStack
from tests import harness
from tests.harness import CLOCK, ROOT, TOKEN, Mocks, args_of, run_program, schema_problems, stack_file_config, wire

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


# --- the schema ---------------------------------------------------------------------------------------------


def test_the_committed_args_module_and_schema_are_current() -> None:
    """Regenerate with `python -m components.cli.package_args --write` (a settings change shows in review)."""
    assert (PACKAGE_DIR / "stack_args.py").read_text() == package_args.render()
    assert (PACKAGE_DIR / "schema.json").read_text() == schema_text()


def _models(model: type[BaseModel] = Settings, seen: dict[str, type[BaseModel]] | None = None):
    seen = {} if seen is None else seen
    seen[package_args.ROOT_NAME if model is Settings else model.__name__] = model
    for field in model.model_fields.values():
        for arg in typing.get_args(field.annotation) or (field.annotation,):
            for inner in typing.get_args(arg) or (arg,):
                if isinstance(inner, type) and issubclass(inner, BaseModel) and inner.__name__ not in seen:
                    _models(inner, seen)
    return seen


def _expected(annotation: Any, plain: bool) -> dict[str, Any]:
    """The schema property a settings annotation should become: counts integers, flags booleans, dates and
    choices strings, sections references to their type; plain everywhere but where the token is. An `Annotated`
    type is the type it annotates (its validators and rule are the model's)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    members = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        (annotation,) = members
        return _expected(annotation, plain)
    origin = typing.get_origin(annotation)
    out: dict[str, Any]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        out = {"$ref": f"#/types/{NAME}:index:{annotation.__name__}"}
    elif origin is list:
        out = {"type": "array", "items": _expected(typing.get_args(annotation)[0], True)}
    elif origin is dict:
        out = {"type": "object", "additionalProperties": _expected(typing.get_args(annotation)[1], True)}
    else:
        simple = {int: "integer", bool: "boolean", float: "number", str: "string", datetime: "string"}
        out = {"type": simple.get(annotation, "string")}
        assert annotation in simple or origin is typing.Literal or annotation is SecretStr, annotation
    return {**out, "plain": True} if plain else out


def test_every_settings_key_is_an_input_of_its_type_with_its_description() -> None:
    spec = schema()
    resource = spec["resources"][TYPE]
    assert spec["name"] == NAME and spec["version"] == VERSION
    types = {key.rsplit(":", 1)[-1]: t for key, t in spec["types"].items()}
    models = _models()
    # Every settings model is a type; besides them, only the building blocks' own (components/package/blocks.py).
    assert set(types) | {package_args.ROOT_NAME} == set(models) | {"TpuShape"}
    for name, model in models.items():
        props = resource["inputProperties"] if model is Settings else types[name]["properties"]
        required = resource["requiredInputs"] if model is Settings else types[name].get("required", [])
        assert set(props) == {f.alias for f in model.model_fields.values()}, name
        assert sorted(required) == sorted(f.alias for f in model.model_fields.values() if f.is_required()), name
        for field in model.model_fields.values():
            prop = props[field.alias]
            assert prop.get("description") == package_args.description(field), f"{name}.{field.alias}"
            assert _shape(prop) == _expected(field.annotation, field.alias != "hfToken"), f"{name}.{field.alias}"
    assert resource["requiredInputs"] == ["project"]


def _shape(prop: dict[str, Any]) -> dict[str, Any]:
    """A property without its descriptions (the SDK repeats an array's description on its items)."""
    return {k: _shape(v) if isinstance(v, dict) else v for k, v in prop.items() if k != "description"}


def test_only_the_secret_takes_an_output_and_no_integer_input_does() -> None:
    """Every input decides names, counts or the plan before any resource exists: plain. The token is an Input so
    that a Pulumi secret stays one. No `Input[int]` anywhere: an Output there crashes the SDK (see below)."""
    spec = schema()
    not_plain: list[str] = []

    def visit(path: str, prop: dict[str, Any]) -> None:
        if not prop.get("plain"):
            not_plain.append(path)
        for key in ("items", "additionalProperties"):
            if key in prop:
                visit(f"{path}[]", prop[key])

    for key, prop in spec["resources"][TYPE]["inputProperties"].items():
        visit(key, prop)
    for name, t in spec["types"].items():
        for key, prop in t.get("properties", {}).items():
            visit(f"{name.rsplit(':', 1)[-1]}.{key}", prop)
    assert not_plain == ["hfToken"]
    assert _shape(spec["resources"][TYPE]["inputProperties"]["hfToken"]) == {"type": "string"}


def test_every_input_has_a_description() -> None:
    spec = schema()
    props = {f"{TYPE}.{k}": p for k, p in spec["resources"][TYPE]["inputProperties"].items()}
    props |= {f"{n}.{k}": p for n, t in spec["types"].items() for k, p in t.get("properties", {}).items()}
    assert [k for k, p in props.items() if not p.get("description")] == []
    assert all(t.get("description") for t in spec["types"].values())


def test_an_input_says_what_its_rule_allows() -> None:
    """The rule's allowed values in words, after the description (not for a flag, whose type says it)."""
    props = schema()["resources"][TYPE]["inputProperties"]
    assert props["zone"]["description"].startswith(_sentence_of(Settings.model_fields["zone"].description))
    assert "Allowed: " in props["zone"]["description"] and "Allowed: " in props["project"]["description"]
    flags = [
        p["description"]
        for t in schema()["types"].values()
        for p in t.get("properties", {}).values()
        if p.get("type") == "boolean"
    ]
    assert flags and not any("Allowed: true or false" in d for d in flags)


def _sentence_of(text: str | None) -> str:
    assert text
    return text[:1].upper() + text[1:].rstrip(".")


def test_every_output_is_the_programs_and_has_a_description() -> None:
    resource = schema()["resources"][TYPE]
    assert set(resource["properties"]) == set(OUTPUTS)
    assert all(p.get("description") for p in resource["properties"].values())
    assert resource["description"].startswith("TPU7x (Ironwood) dynamic slicing on GKE")


def test_a_description_on_a_settings_field_flows_into_the_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The models are the one description: a field's pydantic description becomes its input's description."""
    monkeypatch.setattr(Settings.model_fields["zone"], "description", 'The zone of the TPU pools, "an AI zone".')
    module = package_args.render()
    text = 'The zone of the TPU pools, "an AI zone". Allowed: '
    assert f'    """{text}' in module and module.count(text) == 1
    path = tmp_path / "probe_stack_args.py"
    path.write_text(module)
    spec = importlib.util.spec_from_file_location("probe_stack_args", path)
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "probe_stack_args", probe)
    spec.loader.exec_module(probe)
    # The SDK reads a field's docstring from the module's source, as for the committed module.
    read = Analyzer(NAME).get_docstring(probe.TpuSlicingStackArgs, "zone")
    assert read is not None and read.startswith(text) and read.endswith('Default: "us-central1-ai1a".')


# --- the SDK's traps (3.272.0) ----------------------------------------------------------------------------------


FUTURE_MODULE = """
from __future__ import annotations
from typing import TypedDict
import pulumi

class ProbeArgs(TypedDict):
    cubes: int

class Probe(pulumi.ComponentResource):
    def __init__(self, name: str, args: ProbeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("probe:index:Probe", name, {}, opts)
"""


def test_the_future_import_breaks_the_schema_inference(tmp_path: Path) -> None:
    """The trap: with postponed annotations, the SDK gets strings and cannot infer the schema."""
    path = tmp_path / "probe_future.py"
    path.write_text(FUTURE_MODULE)
    namespace = runpy.run_path(str(path))
    with pytest.raises(Exception):  # noqa: B017 (whatever it raises, no schema comes out)
        ComponentProvider([namespace["Probe"]], "probe")
    path.write_text(FUTURE_MODULE.replace("from __future__ import annotations\n", ""))
    ComponentProvider([runpy.run_path(str(path))["Probe"]], "probe")  # the same module without it: fine


def _future_imports(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
    ]


@pytest.mark.parametrize(
    "path", sorted(p.relative_to(ROOT).as_posix() for p in [*PACKAGE_DIR.glob("*.py"), ROOT / "plugin" / "__main__.py"])
)
def test_no_module_of_the_package_postpones_its_annotations(path: str) -> None:
    assert _future_imports(ROOT / path) == [], f"{path}: `from __future__ import annotations` breaks the schema"


def test_the_scan_finds_the_future_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(FUTURE_MODULE)
    assert _future_imports(tmp_path / "m.py") == [2]


WIRE_INPUTS = {"project": "p", "tpu": {"cubes": 2.0}, "kueue": {"priorities": {"high": 100.0}}}


def test_integers_arrive_as_floats_through_the_sdk_and_as_ints_through_the_package() -> None:
    """The trap: the SDK's mapping overwrites its own int() conversion and never converts map values. If this
    first assertion fails, the SDK fixed it and PackageProvider's conversion can go."""
    stack = PackageProvider()._component_defs["TpuSlicingStack"]
    sdk = ComponentProvider([TpuSlicingStack], NAME).map_inputs(WIRE_INPUTS, stack)
    assert type(sdk["tpu"]["cubes"]) is float and type(sdk["kueue"]["priorities"]["high"]) is float
    ours = PackageProvider().map_inputs(WIRE_INPUTS, stack)
    assert type(ours["tpu"]["cubes"]) is int and type(ours["kueue"]["priorities"]["high"]) is int
    # A number with a fraction is left to validation, which names the key (see test_bad_inputs...).
    assert PackageProvider().map_inputs({"project": "p", "tpu": {"cubes": 2.5}}, stack)["tpu"]["cubes"] == 2.5


def _raised(callable_: Any) -> BaseException | None:
    caught: list[BaseException] = []

    def program() -> None:
        try:
            callable_()
        except BaseException as err:  # returned to the test
            caught.append(err)

    execute({"gcp:project": "p"}, stack="dev", mocks=Mocks(), now=CLOCK, program=program)
    return caught[0] if caught else None


def test_an_output_in_an_integer_input_crashes_the_sdk_and_is_named_by_the_package() -> None:
    stack = PackageProvider()._component_defs["TpuSlicingStack"]

    def inputs() -> dict[str, Any]:
        return {"project": "p", "tpu": {"cubes": pulumi.Output.from_input(2)}, "zone": "us-central1-ai1a"}

    sdk = _raised(lambda: ComponentProvider([TpuSlicingStack], NAME).map_inputs(inputs(), stack))
    assert isinstance(sdk, TypeError), sdk  # the trap: int(Output), an SDK stack trace for the caller
    ours = _raised(lambda: PackageProvider().map_inputs(inputs(), stack))
    assert isinstance(ours, InputPropertiesError), ours
    assert [e["property_path"] for e in ours.errors or []] == ["tpu.cubes"]
    assert f"{PROJECT}:tpu.cubes: a plain value is required" in ours.message


# --- construct: the program's graph, its errors, its secrets ----------------------------------------------------


@functools.cache
def constructed(stack: str) -> Any:
    return construct(stack_file_config(stack), stack=stack)


@pytest.fixture(scope="module")
def dev_runs():
    return run_program(), constructed("dev")


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_construct_registers_what_the_program_registers(stack: str) -> None:
    program, component = run_program(stack=stack), constructed(stack)
    assert program.error is None and component.error is None, component.error
    assert len(program.registrations) > 50
    ours, theirs = _graph(component.registrations), _graph(program.registrations)
    assert set(ours) == set(theirs)
    assert [k for k in theirs if ours[k] != theirs[k]] == []


def test_the_outputs_schema_types_are_the_programs_values(dev_runs) -> None:
    program, _ = dev_runs
    properties = schema()["resources"][TYPE]["properties"]
    kinds = {"string": str, "integer": int, "array": list, "object": dict}
    for key, value in program.outputs.items():
        expected = properties[key].get("type", "object")
        assert isinstance(value, kinds[expected]) or "<" in json.dumps(value), (key, value)


def test_the_component_parents_the_graph_and_returns_the_programs_outputs(dev_runs) -> None:
    program, component = dev_runs
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
    config = harness.merge(stack_file_config("dev"), BAD)
    program = run_program(BAD)
    component = construct(config)
    assert component.registrations == [] and program.registrations == []
    assert isinstance(component.error, InputPropertiesError), component.error
    lines = _problems(program.error)
    assert len(lines) >= 3 and _problems(component.error) == lines
    paths = [e["property_path"] for e in component.error.errors or []]
    assert {"zone", "tpu.cubes", "kueue.priorities"} <= set(paths)


def test_the_component_used_from_python_stops_the_same_way() -> None:
    args = args_of(harness.merge(stack_file_config("dev"), BAD))
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
