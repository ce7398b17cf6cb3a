"""The program's resources handed to the policy pack's rules the way pulumi_policy's analyzer hands them over."""

from __future__ import annotations

import copy
from typing import Any

from pulumi_policy import PolicyProviderResource, PolicyResourceOptions, ResourceValidationArgs
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

from policy import rules
from tests.harness import Registration


def provider_of(reg: Registration) -> PolicyProviderResource | None:
    """The provider as the engine describes it to the pack: type and name from the reference's URN."""
    if not reg.provider:
        return None
    urn = reg.provider.rsplit("::", 1)[0]  # a reference is "<urn>::<id>"
    qualified_type, name = urn.split("::")[-2:]
    # The URN qualifies the type with its parents' ("...:Cluster$pulumi:providers:kubernetes").
    return PolicyProviderResource(qualified_type.split("$")[-1], {}, urn, name)


def args_for(
    reg: Registration, inputs: dict[str, Any] | None = None, config: dict[str, Any] | None = None, **changes: Any
) -> ResourceValidationArgs:
    """What pulumi_policy's Analyze builds from the engine's request for this resource."""
    props = unknown_checking_proxy(deserialize_properties(copy.deepcopy(reg.inputs if inputs is None else inputs)))
    secret_outputs = reg.options.get("additionalSecretOutputs", [])  # none on a chart's objects
    opts = PolicyResourceOptions(
        protect=changes.get("protect", reg.protect),
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=None,  # type: ignore[arg-type]
        additional_secret_outputs=changes.get("additional_secret_outputs", secret_outputs),
        parent=reg.parent or None,
    )
    provider = changes["provider"] if "provider" in changes else provider_of(reg)
    return ResourceValidationArgs(reg.type, props, reg.urn, reg.name, opts, provider, config)


def violations(policy: rules.ResourceValidationPolicy, args: ResourceValidationArgs, stack: str = "dev") -> list[str]:
    found: list[str] = []
    original = rules.current_stack
    rules.current_stack = lambda: stack
    try:
        policy.validate(args, lambda message, urn=None: found.append(message))
    finally:
        rules.current_stack = original
    return found


def policy(name: str) -> rules.ResourceValidationPolicy:
    return next(p for p in rules.POLICIES if p.name == name)
