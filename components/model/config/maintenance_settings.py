"""Settings of the cluster's maintenance exclusion: a window without upgrades."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, model_validator

from components.model.config.checks import PROJECT, Model, SettingError, accept_if
from components.model.config.gke_versions import END_OF_STANDARD_SUPPORT
from components.model.config.rules import MAINTENANCE, MAINTENANCE_LIMITS, TF_CLUSTER, Rule

# GKE's limit on a "No upgrades" exclusion (MAINTENANCE_LIMITS, section Limitations), which the provider does not
# check (only the time format and the scope enum: terraform-provider-google-beta@93c65b2d60
# resource_container_cluster.go:1441,1446,1465), so `pulumi up` would fail on it; Google's own sample says so too
# (terraform-google-modules/terraform-docs-samples@fd275b80
# gke/standard/zonal/no-channel-to-release-channel/no_upgrade/main.tf:42).
NO_UPGRADES_MAX = timedelta(days=30)
STEER = "use scope NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES with endTimeBehavior: UNTIL_END_OF_SUPPORT"
_AWARE = accept_if(lambda v: v.tzinfo is not None, "an RFC 3339 time with a zone, such as 2026-05-18T00:00:00Z")


class MaintenanceExclusion(Model):
    """A window without upgrades. No default dates: any fixed default is in the past some day.

    Either `end` or `endTimeBehavior: UNTIL_END_OF_SUPPORT` (GKE ends the exclusion when the cluster's
    minor version reaches its end of support, so the stack file never expires). The provider sends no
    end time with that behaviour and reads none back (terraform-provider-google-beta release-8.0.0
    @93c65b2d60, resource_container_cluster.go lines 6387-6389 and 8299-8306): an `end` next to it would
    diff on every run, so exactly one of the two is allowed.
    """

    # "" is no value to Terraform's SDK: the preview would fail on the cluster instead of here.
    name: Annotated[
        str,
        accept_if(bool, "a non-empty name: the exclusion's name is required by the provider"),
        Rule(
            "a non-empty string (the provider requires it; its schema has no other rule)",
            f"{TF_CLUSTER}:1434-1436 at 93c65b2d60 (maintenance_exclusion.exclusion_name: Required; it keys the "
            "API's exclusions, :6376)",
            refused="",
            accepted="x",
        ),
    ] = Field("no-upgrade-next-month", description="the exclusion's name")
    start: Annotated[
        datetime,
        _AWARE,
        Rule(
            "an RFC 3339 time with a zone, before end",
            MAINTENANCE,
            refused="2026-12-01T00:00:00",
            accepted="2026-12-19T23:59:59Z",
        ),
    ] = Field(description="when the exclusion starts")
    end: Annotated[
        datetime | None,
        _AWARE,
        Rule(
            "an RFC 3339 time with a zone, after start and in the future (GKE refuses adding an exclusion that has "
            "ended); with scope NO_UPGRADES at most 30 days after start, with a NO_MINOR scope at most the minor "
            "version's end of support (a warning where the program knows that date: endTimeBehavior: "
            "UNTIL_END_OF_SUPPORT follows it instead)",
            f"{MAINTENANCE}; {MAINTENANCE_LIMITS}",
            refused="2026-12-31T00:00:01Z",
            accepted="2026-12-31T00:00:00Z",
        ),
    ] = Field(None, description="when the exclusion ends")
    end_time_behavior: Annotated[
        Literal["UNTIL_END_OF_SUPPORT"] | None,
        Rule(
            "UNTIL_END_OF_SUPPORT (GKE ends the exclusion when the minor version's support ends) or unset; only with "
            "scope NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES, and without end",
            f"{MAINTENANCE}; {TF_CLUSTER} (maintenance_exclusion.end_time_behavior)",
            refused="FOREVER",
            accepted="UNTIL_END_OF_SUPPORT",
            context={
                "cluster": {"maintenanceExclusion": {"start": "2026-12-01T00:00:00Z", "scope": "NO_MINOR_UPGRADES"}}
            },
        ),
    ] = Field(None, description="an exclusion that lasts until the minor version's end of support")
    scope: Annotated[
        Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"],
        Rule(
            "NO_UPGRADES, NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES",
            f"{TF_CLUSTER} (exclusion_options.scope)",
            refused="NO_PATCHES",
            accepted="NO_MINOR_OR_NODE_UPGRADES",
        ),
    ] = Field("NO_UPGRADES", description="which upgrades the exclusion holds back")

    @model_validator(mode="after")
    def _ordered(self, info: ValidationInfo) -> MaintenanceExclusion:
        if self.end_time_behavior is not None:
            # GKE offers end-of-support exclusions for the minor-upgrade scopes only.
            if self.scope == "NO_UPGRADES":
                raise SettingError(
                    "endTimeBehavior",
                    self.end_time_behavior,
                    "only with scope NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES (a NO_UPGRADES exclusion "
                    "needs an end)",
                )
            if self.end is not None:
                raise SettingError(
                    "end",
                    self.rfc3339(self.end),
                    "unset when endTimeBehavior is UNTIL_END_OF_SUPPORT (GKE takes no end time with it)",
                )
            return self
        if self.end is None:
            raise SettingError(
                "end", None, "an RFC 3339 time, or endTimeBehavior: UNTIL_END_OF_SUPPORT (NO_MINOR scopes)"
            )
        if self.end <= self.start:
            raise SettingError("end", self.end.isoformat(), f"must be after start {self.start.isoformat()}")
        # An exclusion that is over protects nothing, and GKE rejects adding one that has ended.
        now = (info.context or {}).get("now")
        if now is not None and self.end <= now:
            raise SettingError(
                "end",
                self.rfc3339(self.end),
                f"a time in the future (it is {self.rfc3339(now.replace(microsecond=0))}): move the window "
                "forward, use endTimeBehavior: UNTIL_END_OF_SUPPORT (NO_MINOR scopes), or set "
                "cluster.maintenanceExclusion to null for none",
            )
        if self.scope == "NO_UPGRADES" and self.end - self.start > NO_UPGRADES_MAX:
            raise SettingError(
                "end",
                self.rfc3339(self.end),
                f"at most 30 days after start {self.rfc3339(self.start)} with scope NO_UPGRADES (GKE's limit, "
                f"{MAINTENANCE_LIMITS}): shorten it, or to hold back minor upgrades longer, {STEER} instead of end",
            )
        return self

    def past_support(self, minor: str | None) -> str | None:
        """A warning when a NO_MINOR scope's `end` lies past the end of `minor`'s standard support, where known:
        GKE limits such an exclusion to that day (MAINTENANCE_LIMITS), so `pulumi up` would fail on it."""
        eos = END_OF_STANDARD_SUPPORT.get(minor or "")
        if self.scope == "NO_UPGRADES" or self.end is None or eos is None or self.end.astimezone(UTC).date() <= eos:
            return None
        return (
            f"{PROJECT}:cluster.maintenanceExclusion.end = {self.rfc3339(self.end)!r}: past the end of GKE's standard "
            f"support of {minor} on {eos.isoformat()}, the latest end GKE takes for scope {self.scope} "
            f"({MAINTENANCE_LIMITS}), so `pulumi up` may fail on it; replace end with endTimeBehavior: "
            "UNTIL_END_OF_SUPPORT (GKE ends the exclusion on that day, and it moves with the minor version)"
        )

    def rfc3339(self, when: datetime) -> str:
        """`when` as GKE reads it back: a protobuf Timestamp (googleapis container/v1 cluster_service.proto
        TimeWindow), in UTC with 0, 3 or 6 fractional digits (https://protobuf.dev/programming-guides/json/). The
        provider diffs the times as read (flattenMaintenancePolicy, resource_container_cluster.go line 8288), so
        another spelling of the same time would update the cluster on every run."""
        utc = when.astimezone(UTC)
        digits = "seconds" if not utc.microsecond else "milliseconds" if utc.microsecond % 1000 == 0 else "microseconds"
        return utc.isoformat(timespec=digits).replace("+00:00", "Z")
