"""Project services: the Google APIs and the compute preview feature the deployment needs."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.base import Component
from components.model.settings import Settings

APIS = ("container", "compute", "iam", "cloudresourcemanager", "file", "networkservices")
# Dashboards and alert policies are Cloud Monitoring API objects; GKE's managed Prometheus writes through the
# same API but does not enable it for us, so it is enabled here whenever either is declared.
MONITORING_API = "monitoring"


# Serving creates a bucket of its own (the XLA compilation cache). The Cloud Storage API is on by default in new
# projects (https://cloud.google.com/service-usage/docs/enabled-service#default), but an organization may turn it off.
STORAGE_API = "storage"


def apis(settings: Settings) -> tuple[str, ...]:
    o = settings.observability
    return (
        APIS
        + ((MONITORING_API,) if o.has_dashboard or o.has_alerts else ())
        + ((STORAGE_API,) if settings.serving.enabled else ())
    )


AI_ZONES_FEATURE = "ai-zones-visibility"


class ProjectServices(Component):
    """Enables the APIs and the `ai-zones-visibility` preview feature (AI zones such as us-central1-ai1a)."""

    def __init__(self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:project:ProjectServices", name, opts)
        self.services = {
            api: gcp.projects.Service(
                f"{name}-{api}",
                project=settings.project,
                service=f"{api}.googleapis.com",
                # Other workloads in the project may use these APIs: destroying this stack must not turn them off.
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=self.child(),
            )
            for api in apis(settings)
        }
        self.ai_zones = gcp.compute.PreviewFeature(
            f"{name}-{AI_ZONES_FEATURE}",
            name=AI_ZONES_FEATURE,
            project=settings.project,
            activation_status="ENABLED",
            rollout_operation={"rollout_input": {"predefined_rollout_plan": "ROLLOUT_PLAN_FAST_ROLLOUT"}},
            opts=self.child(depends_on=[self.services["compute"]]),
        )
        # What the rest of the graph waits for before it calls these APIs.
        self.ready: list[pulumi.Resource] = [*self.services.values(), self.ai_zones]
        self.register_outputs(
            {
                "services": [s.service for s in self.services.values()],
                "aiZonesVisibility": self.ai_zones.activation_status,
            }
        )
