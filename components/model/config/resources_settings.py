"""Settings of a container's CPU and memory: requests and limits, as Kubernetes quantities."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from components.model.config.checks import QUANTITY_RE, Model, SettingError, cpu_millis, memory_bytes, raise_all
from components.model.config.rules import NODE_SIZES, QUANTITY, REQUESTS_LIMITS, Rule

# The rules of a system-pool container's CPU and memory, whose requests the system-pool fit adds up.
_FIT = "; requests at most limits; the requests of all controllers fit the system pool"
_SOURCES = f"{QUANTITY}; {REQUESTS_LIMITS}; {NODE_SIZES}"
_CPU = Rule("a Kubernetes quantity (the full grammar: 500m, 2, 1.5, 2e3, 100u)" + _FIT, _SOURCES, refused="-1")
_MEMORY = Rule("a Kubernetes quantity (512Mi, 4Gi, 1e9, 1G)" + _FIT, _SOURCES, refused="4 Gi")


class ResourceAmounts(Model):
    cpu: str | None = None
    memory: str | None = None

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, v: str | None) -> str | None:
        if v is not None and not QUANTITY_RE.match(v):
            raise ValueError("a Kubernetes quantity such as 500m, 2, 512Mi or 4Gi")
        return v


class Requests(ResourceAmounts):
    cpu: Annotated[str | None, _CPU, Rule(accepted="0.001")] = Field(None, description="the container's CPU request")
    memory: Annotated[str | None, _MEMORY, Rule(accepted="1Ki")] = Field(
        None, description="the container's memory request"
    )


class Limits(ResourceAmounts):
    cpu: Annotated[str | None, _CPU, Rule(accepted="1e3")] = Field(None, description="the container's CPU limit")
    memory: Annotated[str | None, _MEMORY, Rule(accepted="64Gi")] = Field(
        None, description="the container's memory limit"
    )


class ResourceRequirements(Model):
    requests: Requests = Field(default_factory=dict)
    limits: Limits = Field(default_factory=dict)

    @model_validator(mode="after")
    def _requests_within_limits(self) -> ResourceRequirements:
        # The API server refuses a container whose request exceeds its limit (k8s.io/kubernetes
        # pkg/apis/core/validation/validation.go ValidateResourceRequirements: "must be less than or equal to
        # <resource> limit"); the chart would fail at `pulumi up`, so say it here.
        errors = []
        for kind, amount in (("cpu", cpu_millis), ("memory", memory_bytes)):
            request, limit = getattr(self.requests, kind), getattr(self.limits, kind)
            if request is not None and limit is not None and amount(request) > amount(limit):
                errors.append(SettingError(f"requests.{kind}", request, f"at most limits.{kind} ({limit})"))
        raise_all(errors)
        return self

    def manifest(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for kind in ("requests", "limits"):
            amounts = getattr(self, kind).model_dump(exclude_none=True)
            if amounts:
                out[kind] = amounts
        return out


def requirements(req_cpu: str, req_mem: str, lim_cpu: str | None, lim_mem: str | None) -> ResourceRequirements:
    return ResourceRequirements(
        requests=Requests(cpu=req_cpu, memory=req_mem), limits=Limits(cpu=lim_cpu, memory=lim_mem)
    )
