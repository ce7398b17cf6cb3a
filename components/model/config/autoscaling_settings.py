"""Settings of elastic serving: per role, a floor of `replicas` groups that never scales, and above it burst slots up
to `autoscaling.maxGroups`, each slot a LeaderWorkerSet of one group scaled between 0 and 1 on the role's signal
(docs/serving.md, "Elastic serving"; the model is components/model/serving/burst.py).

The bounds that read other sections (the TPU quota, the other role, the demos' priorities) are cross-checks
(components/model/config/cross_checks.py `_check_burst_bounds`); the one that needs the usable cubes is the capacity
plan's (components/model/tpu/elastic.py).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from components.model.config.checks import Model, SettingError
from components.model.config.rules import THIS_PROGRAM, Flag, Rule
from components.model.config.serving_parts_settings import GATEWAY_REQUEST_TIMEOUT_SECONDS, ServingRole

LLMD_AUTOSCALING = "llm-d/llm-d@560d420e guides/workload-autoscaling/keda-epp-token-aware/README.md"
_ELASTIC = Rule(change="elastic")


class RoleAutoscaling(Model):
    """What both roles' autoscaling sections have: whether it is on and how far the role may grow."""

    enabled: Annotated[Flag, _ELASTIC] = Field(
        False,
        description="burst slots above the role's `replicas`, each one group that KEDA turns on and off with load "
        "(needs addons.keda.enabled and the scrapes)",
    )
    max_groups: Annotated[
        int | None,
        Rule(
            "unset, or an integer of at least 2; with autoscaling.enabled it is required and more than the role's "
            "replicas, at most what the TPU quota holds beside every workload a burst slot cannot preempt, and both "
            "roles' slots together fit the usable cubes beside them (the preview names each bound)",
            f"{THIS_PROGRAM}: kubernetes-sigs/kueue v0.17.4 pkg/controller/jobs/leaderworkerset/"
            "leaderworkerset_reconciler.go:251-281 (one Workload per group, each admitted on quota)",
            "elastic",
            refused=1,
            accepted=2,
        ),
    ] = Field(None, ge=2, description="the role's groups at most: its `replicas` floor plus its burst slots")


class PrefillAutoscaling(RoleAutoscaling):
    backlog_seconds: Annotated[
        float,
        Rule(
            f"a number of seconds greater than 0 and less than {GATEWAY_REQUEST_TIMEOUT_SECONDS} (the Gateway's "
            "request timeout, past which a request waiting for its first token fails): the prefill backlog one group "
            "may hold, a share of the time-to-first-token target (the target less the idle prefill time of a typical "
            "prompt); the backlog is the router's in-flight prompt tokens over serving.router.peakPrefillThroughput",
            f"{LLMD_AUTOSCALING} (Choosing the two thresholds)",
            "elastic",
            refused=GATEWAY_REQUEST_TIMEOUT_SECONDS,
            accepted=0.001,
        ),
    ] = Field(
        1.5, gt=0, lt=GATEWAY_REQUEST_TIMEOUT_SECONDS, description="seconds of prefill backlog per group before another"
    )


class DecodeAutoscaling(RoleAutoscaling):
    kv_cache_usage: Annotated[
        float,
        Rule(
            "a fraction greater than 0 and at most 1: the KV cache occupancy per group (vLLM's kv_cache_usage_perc "
            "summed over the decode leaders) at which another group is wanted",
            "llm-d/llm-d@56cb1218 guides/workload-autoscaling/keda-epp-token-aware/pd-disaggregation/base/"
            "decode-scaledobject.yaml (threshold 0.8)",
            "elastic",
            refused=0,
            accepted=1,
        ),
    ] = Field(0.8, gt=0, le=1, description="KV cache occupancy per decode group before another")


def _burst_problem(replicas: int, autoscaling: RoleAutoscaling) -> SettingError | None:
    if not autoscaling.enabled:
        return None
    if autoscaling.max_groups is None:
        return SettingError(
            "autoscaling.maxGroups",
            None,
            f"required with autoscaling.enabled: the role's groups at most, more than its replicas ({replicas}); "
            "the groups above the replicas are its burst slots",
        )
    if autoscaling.max_groups <= replicas:
        return SettingError(
            "autoscaling.maxGroups",
            autoscaling.max_groups,
            f"more than the role's replicas ({replicas}) with autoscaling.enabled: the groups above the replicas are "
            "its burst slots (to run a fixed number of groups, set autoscaling.enabled to false)",
        )
    return None


class ElasticRole(ServingRole):
    """A serving role with its autoscaling section (each role's type gives the section of its signal)."""

    autoscaling: RoleAutoscaling = Field(default_factory=dict)

    @model_validator(mode="after")
    def _burst_slots(self) -> ElasticRole:
        if problem := _burst_problem(self.replicas, self.autoscaling):
            raise problem
        return self


class PrefillRole(ElasticRole):
    autoscaling: PrefillAutoscaling = Field(default_factory=dict)


class DecodeRole(ElasticRole):
    autoscaling: DecodeAutoscaling = Field(default_factory=dict)


def burst_slots(role: ElasticRole) -> int:
    """The role's burst slots: `maxGroups - replicas` with autoscaling on, else none."""
    autoscaling = role.autoscaling
    if not autoscaling.enabled or autoscaling.max_groups is None:
        return 0
    return max(0, autoscaling.max_groups - role.replicas)
