"""The log-based alert on a failed TPU Slice: no metric says a Slice failed, the slice controller's log does.

A Slice's state is its `Ready` condition, which no metric exports (docs/health.md, "Alerts and dashboard"). The
slice controller logs one line per FAILED Slice of a workload it reconciles (xpk slice/internal/controller/
workload_controller.go@250d4b3c:786-797, `log.V(2).Info("WARNING: Slice is not operational due to an error",
"slice", ..., "error", ...)`), with controller-runtime's zap logger, JSON in production mode (cmd/main.go:107,
129), so Cloud Logging parses it into `jsonPayload` (`msg`, `slice`, `error`). Its manifest runs the manager with
`--zap-log-level=3` (config/manager/manager.yaml:66), which keeps V(2). GKE sends the containers' logs of
workload namespaces to Cloud Logging by default (`k8s_container` entries labelled with cluster and namespace).

A log-match condition needs a notification rate limit (Cloud Monitoring: "notificationRateLimit ... required for
log-based alerts"): at most one notification every RATE_LIMIT.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.model.addons.slice_controller import DEPLOYMENT
from components.model.config.settings import Settings

FAILED_SLICE_MESSAGE = "WARNING: Slice is not operational due to an error"
RATE_LIMIT = "300s"
AUTO_CLOSE = "1800s"


@dataclass(frozen=True)
class LogAlert:
    key: str
    display_name: str
    filter: str
    severity: str
    documentation: str


def failed_slice_alert(settings: Settings) -> LogAlert:
    namespace = DEPLOYMENT[0]
    log_filter = "\n".join(
        [
            'resource.type="k8s_container"',
            f'resource.labels.cluster_name="{settings.cluster.name}"',
            f'resource.labels.namespace_name="{namespace}"',
            f'jsonPayload.msg="{FAILED_SLICE_MESSAGE}"',
        ]
    )
    return LogAlert(
        "slice-failed",
        f"{settings.cluster.name}: a TPU Slice failed",
        log_filter,
        "WARNING",
        "The slice controller reports a Slice FAILED (GKE's health of the slice): the workload on it is evicted "
        "and requeued. Run `python -m components health --stack <stack> --live` for its cube, the cube's "
        "sub-block and partitions, and the `tpu.subBlocks` change that moves it.\n\n"
        f"From the slice controller's log ({namespace}); at most one notification every {RATE_LIMIT}.",
    )
