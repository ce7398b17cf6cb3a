"""Project services: the Google APIs and the compute preview feature the deployment needs."""

from typing import TypedDict

import pulumi
import pulumi_gcp as gcp

from components.component import Component
from components.model.config.settings import Settings

APIS = ("container", "compute", "iam", "cloudresourcemanager", "file", "networkservices")
# Dashboards and alert policies are Cloud Monitoring API objects; GKE's managed Prometheus writes through the
# same API but does not enable it for us, so it is enabled here whenever either is declared, or KEDA reads it.
MONITORING_API = "monitoring"


# Serving creates a bucket of its own (the XLA compilation cache). The Cloud Storage API is on by default in new
# projects (https://cloud.google.com/service-usage/docs/enabled-service#default), but an organization may turn it off.
STORAGE_API = "storage"


def apis(settings: Settings) -> tuple[str, ...]:
    o = settings.observability
    return (
        APIS
        + ((MONITORING_API,) if o.has_dashboard or o.has_alerts or settings.addons.keda.enabled else ())
        + ((STORAGE_API,) if settings.serving.enabled else ())
    )


AI_ZONES_FEATURE = "ai-zones-visibility"


class ProjectServicesArgs(TypedDict):
    project: str
    """The project the APIs and the preview feature are enabled in."""
    apis: list[str]
    """The APIs to enable, each by its short name (`container` for container.googleapis.com); `apis()` lists them."""


class ProjectServices(Component):
    """Enables the APIs and the `ai-zones-visibility` preview feature (AI zones such as us-central1-ai1a)."""

    def __init__(self, name: str, args: ProjectServicesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:project:ProjectServices", name, opts)
        services = {
            api: gcp.projects.Service(
                f"{name}-{api}",
                project=args["project"],
                service=f"{api}.googleapis.com",
                # Other workloads in the project may use these APIs: destroying this stack must not turn them off.
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=self.child(),
            )
            for api in args["apis"]
        }
        # The APIs single resources wait for (the network: Compute alone; serving: Resource Manager and Storage;
        # observability: Monitoring), None when not enabled.
        self.compute_api = services["compute"]
        self.project_api = services.get("cloudresourcemanager")
        self.storage_api = services.get(STORAGE_API)
        self.monitoring_api = services.get(MONITORING_API)
        self.ai_zones = gcp.compute.PreviewFeature(
            f"{name}-{AI_ZONES_FEATURE}",
            name=AI_ZONES_FEATURE,
            project=args["project"],
            activation_status="ENABLED",
            rollout_operation={"rollout_input": {"predefined_rollout_plan": "ROLLOUT_PLAN_FAST_ROLLOUT"}},
            opts=self.child(depends_on=[self.compute_api]),
        )
        # What the rest of the graph waits for before it calls these APIs.
        self.ready: list[pulumi.Resource] = [*services.values(), self.ai_zones]
        self.register_outputs(
            {"services": [s.service for s in services.values()], "aiZonesVisibility": self.ai_zones.activation_status}
        )
