"""The package's provider: the SDK's ComponentProvider, with its known traps (SDK 3.272.0) handled before them.

`pulumi.provider.experimental.component.ComponentProvider` infers the schema from the components' annotations
and maps `construct`'s inputs onto the args. Two of its traps sit in that mapping (`map_input_properties`):

* integers arrive as floats: its `int(...)` conversion is overwritten by the line after it (no `continue`), and
  numbers inside lists and maps are never converted (Pulumi's wire has only doubles);
* an Output in an integer input raises a bare TypeError from `int(Output)` (it catches only ValueError), with
  an SDK stack trace; an Output where an object is expected is silently replaced by `{}`.

So before the SDK's mapping, `map_inputs` refuses an Output in any plain input (each one named, as the engine
shows input errors) and gives whole numbers of integer inputs their type back, and `construct` runs the
component's own input check (`input_problems`) before constructing it, so bad input is reported per input,
without a stack trace.
The third trap, `from __future__ import annotations` breaking the inference, is kept out by
tests/test_package_sdk_traps.py.
"""

import sys
from typing import Any

import pulumi
from pulumi.errors import InputPropertiesError, InputPropertyErrorDetails
from pulumi.provider.experimental.analyzer import ComponentDefinition, PropertyDefinition, PropertyType
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.provider import ConstructResult

from components.package import NAME, VERSION
from components.package.blocks import SliceQueues, TpuCapacity
from components.package.dynamic_host import carry_the_checkout
from components.package.inputs import plain_value_problem, problems_text
from components.package.serving_block import Serving
from components.package.stack import TpuSlicingStack

COMPONENTS: list[type[pulumi.ComponentResource]] = [TpuSlicingStack, TpuCapacity, SliceQueues, Serving]


class PackageProvider(ComponentProvider):
    def __init__(self) -> None:
        super().__init__(COMPONENTS, NAME, version=VERSION)

    def _walk(self, value: Any, prop: PropertyDefinition, path: str, problems: list[str]) -> Any:
        """`value` with whole floats of integer inputs as ints; the path of each Output in a plain input noted."""
        if isinstance(value, pulumi.Output):
            if prop.plain:
                problems.append(path)
            return value
        if value is None:
            return None
        if prop.type == PropertyType.INTEGER and isinstance(value, float) and value.is_integer():
            return int(value)
        if prop.ref:
            type_def = self.get_type_definition(prop)
            if type_def is None or type_def.enum or not isinstance(value, dict):
                return value
            return self._object(value, type_def.properties, path, problems)
        if prop.items and isinstance(value, list):
            return [self._walk(v, prop.items, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        if prop.additional_properties and isinstance(value, dict):
            extra = prop.additional_properties
            return {k: self._walk(v, extra, f"{path}.{k}", problems) for k, v in value.items()}
        return value

    def _object(
        self, value: dict[str, Any], properties: dict[str, PropertyDefinition], path: str, problems: list[str]
    ) -> dict[str, Any]:
        return {
            key: self._walk(item, properties[key], f"{path}.{key}" if path else key, problems)
            if key in properties
            else item
            for key, item in value.items()
        }

    def map_inputs(self, inputs: Any, component_def: ComponentDefinition) -> Any:
        problems: list[str] = []
        inputs = self._object(dict(inputs), component_def.inputs, "", problems)
        if problems:
            raise _input_errors([(p, plain_value_problem(p)) for p in problems])
        return super().map_inputs(inputs, component_def)

    def construct(
        self, name: str, resource_type: str, inputs: Any, options: pulumi.ResourceOptions | None = None
    ) -> ConstructResult:
        component = resource_type.rsplit(":", 1)[-1]
        args = self.map_inputs(inputs, self._component_defs[component])
        # A component's own check of its inputs, reported per input; its constructor's errors would reach the
        # caller wrapped with a stack trace (the SDK's ComponentInitError).
        check = getattr(self._components[component], "input_problems", None)
        problems = check(args) if check is not None else []
        if problems:
            raise _input_errors(problems)
        return super().construct(name, resource_type, inputs, options)


def _input_errors(problems: list[tuple[str, str]]) -> InputPropertiesError:
    errors: list[InputPropertyErrorDetails] = [{"property_path": path, "reason": line} for path, line in problems]
    return InputPropertiesError(problems_text("invalid inputs", [line for _, line in problems]), errors)


def main() -> None:
    """The plugin's entry point (plugin/__main__.py): serves the provider to the engine.

    `component_provider_host` would build the SDK's ComponentProvider itself; this is its body with the
    provider above (pulumi/provider/experimental/host.py: `main(ComponentProvider(...), sys.argv[1:])`). The
    dynamic resources' providers are pickled so that the consumer's dynamic provider host finds this checkout
    (components/package/dynamic_host.py).
    """
    carry_the_checkout()
    pulumi.provider.main(PackageProvider(), sys.argv[1:])
