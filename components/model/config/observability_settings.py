"""Settings of the observability section: Managed Prometheus scraping, the dashboard and the alerts."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from components.model.config.checks import _PROJECT_ID_RE, Model, SettingError, accept_if
from components.model.config.rules import MINUTES, THIS_PROGRAM, Flag, Rule

# projects/<project id or number>/notificationChannels/<channel id>, the form the Monitoring API returns
# (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.notificationChannels); a project ID as
# gcp:project takes it (checks.py).
NOTIFICATION_CHANNEL_RE = re.compile(
    rf"^projects/({_PROJECT_ID_RE.pattern[1:-1]}|[0-9]{{1,20}})/notificationChannels/[0-9]+$"
)
# A Prometheus duration (prometheus/common model.ParseDuration: integer amounts of y w d h m s ms, largest unit
# first, each at most once), as the Managed Prometheus operator parses PodMonitoring intervals
# (prometheus-engine v0.17.2 pkg/operator/apis/monitoring/v1/common_types.go). Without `y`: the CRD's
# `format: duration` is validated by the API server (kube-openapi strfmt), which knows no years.
_DURATION_RE = re.compile(r"^(?=.)([0-9]+w)?([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$")
_UNIT_SECONDS = (604800, 86400, 3600, 60, 1, 0.001)  # _DURATION_RE's groups, in order
# PromQL takes an instant selector's sample from the last 5 minutes (Prometheus' default lookback delta; Managed
# Service for Prometheus is at parity with Prometheus 2.44 but for the differences it lists, and this is none:
# https://cloud.google.com/stackdriver/docs/managed-prometheus/promql-differences).
PROMQL_LOOKBACK_SECONDS = 300


_THRESHOLD = "how long the condition holds before that alert fires"


class ObservabilitySettings(Model):
    enabled: Flag = Field(True, description="every scrape object, the dashboard and the alerts")
    scraping: Flag = Field(True, description="the PodMonitorings (and Kueue's resource metrics)")
    dashboard: Flag = Field(True, description="the Cloud Monitoring dashboard")
    alerts: Flag = Field(True, description="the alert policies")
    scrape_interval: Annotated[
        str,
        accept_if(
            lambda v: _DURATION_RE.match(v) and re.search(r"[1-9]", v),
            "a positive Prometheus duration: whole numbers of w, d, h, m, s, ms, largest first, such as 30s, 1m30s "
            "or 1500ms",
        ),
        Rule(
            "a positive Prometheus duration: whole numbers of w, d, h, m, s, ms, largest unit first (30s, 1m30s, "
            "1500ms); no y, which the CRD's duration format does not know",
            "prometheus/common model.ParseDuration, as prometheus-engine v0.17.2 pkg/operator/apis/monitoring/v1/"
            "common_types.go parses it; kube-openapi strfmt for the CRD's format: duration",
            refused="1.5m",
            accepted="1m30s",
        ),
    ] = Field("30s", description="how often Managed Prometheus scrapes vLLM and Kueue")
    pending_workload_minutes: Annotated[int, MINUTES] = Field(30, ge=1, le=1440, description=_THRESHOLD)
    no_ready_leader_minutes: Annotated[int, MINUTES] = Field(10, ge=1, le=1440, description=_THRESHOLD)
    quota_full_minutes: Annotated[int, MINUTES] = Field(30, ge=1, le=1440, description=_THRESHOLD)
    # At least one while alerts are on, or the explicit opt-out: an alert nobody hears of is the failure to prevent.
    notification_channels: Annotated[
        list[str],
        Rule(
            "a list of distinct notification channel names, projects/<project ID or number>/notificationChannels/"
            "<id>; at least one while alerts are on, unless observability.notifyNobody",
            "https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.notificationChannels",
            "alerts",
            ["projects/p/notificationChannels/1"],
            ["projects/123/notificationChannels/1", "projects/my-tpu-project/notificationChannels/2"],
            {"observability": {"notifyNobody": False}},
        ),
    ] = Field(default_factory=list, description="the channels the alerts notify (none: incidents in the console only)")
    notify_nobody: Annotated[
        Flag,
        Rule(
            "true or false; true only while observability.notificationChannels is empty",
            THIS_PROGRAM,
            "alerts",
            True,
            False,
            {"observability": {"notificationChannels": ["projects/123/notificationChannels/1"]}},
        ),
    ] = Field(False, description="the explicit opt-out of alert notifications")

    @field_validator("notification_channels", mode="before")
    @classmethod
    def _channels(cls, v: object) -> object:
        # Before pydantic's own check: a bare channel id (YAML reads `123456` as a number) gets the full form with
        # that id, not "Input should be a valid string".
        if not isinstance(v, list):
            return v
        for channel in v:
            text = str(channel)
            if (
                isinstance(channel, bool)
                or not isinstance(channel, str | int)
                or not NOTIFICATION_CHANNEL_RE.match(text)
            ):
                bare = re.fullmatch(r"[0-9]+", text) and not isinstance(channel, bool)
                example = f"projects/<project>/notificationChannels/{text if bare else '<numeric id>'}"
                raise ValueError(
                    f"{channel!r} is not a notification channel name: each must be the channel's full name, "
                    f"{example} (`gcloud beta monitoring channels list --project=<project>` shows them)"
                )
        if len(set(v)) != len(v):
            raise ValueError("each notification channel at most once")
        return v

    @model_validator(mode="after")
    def _someone_is_notified(self) -> ObservabilitySettings:
        if self.has_alerts and not self.notification_channels and not self.notify_nobody:
            raise SettingError(
                "notificationChannels",
                [],
                "at least one notification channel, projects/<project>/notificationChannels/<numeric id> (`gcloud "
                "beta monitoring channels list --project=<project>` shows them), while alerts are on; or "
                "observability.notifyNobody: "
                "true to open incidents in the Cloud Monitoring console only, or observability.alerts: false",
            )
        if self.notify_nobody and self.notification_channels:
            raise SettingError(
                "notifyNobody",
                True,
                "false (or unset) while observability.notificationChannels lists channels: the policies notify them",
            )
        return self

    @property
    def scrapes(self) -> bool:
        return self.enabled and self.scraping

    @property
    def has_dashboard(self) -> bool:
        return self.enabled and self.dashboard

    @property
    def has_alerts(self) -> bool:
        return self.enabled and self.alerts

    @property
    def scrape_interval_seconds(self) -> float:
        m = _DURATION_RE.match(self.scrape_interval)
        assert m is not None  # the field's rule
        return sum(float(g.rstrip("mswdh")) * k for g, k in zip(m.groups(), _UNIT_SECONDS, strict=True) if g)
