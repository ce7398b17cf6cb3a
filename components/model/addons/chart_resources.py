"""What an add-on's chart renders for its controller's resources when a stack sets some of them (pure).

Helm merges the values a release sets over the chart's values.yaml key by key (helm/helm@018982f1
pkg/chartutil/coalesce.go `coalesceValues`, `CoalesceTables`: maps merge, a key set wins, one left out keeps the
chart's): `controllerResources` naming only `requests.memory` still gets the chart's `requests.cpu` and both its
limits. So what the container gets, and what the system-pool fit counts, is the chart's block with the stack's
amounts over it; a request above a limit the chart keeps is refused by the API server (a container's request at most
its limit) when `pulumi up` applies the Deployment, so the settings refuse it first.
"""

from __future__ import annotations

from components.model.config.checks import SettingError, cpu_millis, memory_bytes
from components.model.config.resources_settings import ResourceRequirements

KINDS = ("requests", "limits")


def rendered(chart_default: ResourceRequirements, ours: ResourceRequirements) -> ResourceRequirements:
    """The block the chart renders: `chart_default` (its values.yaml's) with every amount `ours` sets over it."""
    merged = {
        kind: {
            **getattr(chart_default, kind).model_dump(exclude_none=True),
            **getattr(ours, kind).model_dump(exclude_none=True),
        }
        for kind in KINDS
    }
    return ResourceRequirements.model_construct(
        **{kind: type(getattr(chart_default, kind)).model_construct(**amounts) for kind, amounts in merged.items()}
    )


def kept_limit_problems(
    field: str, chart_default: ResourceRequirements, ours: ResourceRequirements
) -> list[SettingError]:
    """Each request `ours` sets above a limit it leaves to the chart (its own limits are checked where it is parsed)."""
    errors = []
    for kind, amount in (("cpu", cpu_millis), ("memory", memory_bytes)):
        request, limit = getattr(ours.requests, kind), getattr(chart_default.limits, kind)
        if request is None or limit is None or getattr(ours.limits, kind) is not None:
            continue
        if amount(request) > amount(limit):
            errors.append(
                SettingError(
                    f"{field}.requests.{kind}",
                    request,
                    f"at most limits.{kind} ({limit}, the chart's default, which Helm keeps beside a block that sets "
                    f"no limits.{kind}): set limits.{kind} too",
                )
            )
    return errors
