"""KEDA, the autoscaler of elastic serving's burst slots: its chart, and its operator's read access to Managed
Prometheus through Workload Identity. What it sets and why: components/model/addons/keda.py."""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.addons import HelmAddon, HelmAddonArgs
from components.component import Component
from components.model.addons.keda import METRICS_READER_ROLE, OPERATOR_KSA
from components.serving import workload_identity_principal


class KedaArgs(TypedDict):
    project: str
    """The project whose Managed Prometheus KEDA reads, and whose number names the operator's principal."""
    workload_pool: str
    """The cluster's Workload Identity pool (`<project>.svc.id.goog`)."""
    namespace: str
    """KEDA's namespace, created here."""
    chart: str
    """KEDA's chart (a Helm repository's URL and the chart's name)."""
    version: str
    """The chart's version."""
    values: dict[str, Any]
    """The values this program sets on the chart."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    project_api: NotRequired[gcp.projects.Service]
    """The Cloud Resource Manager API the project number lookup waits for."""


class Keda(Component):
    """KEDA's chart and the operator's role on the project. Every KEDA object of the program waits for `ready`
    (components/burst_slots.py), so that `pulumi destroy` deletes the ScaledObjects and TriggerAuthentications while
    the operator that holds their finalizer still runs, and before the chart's CRDs."""

    def __init__(self, name: str, args: KedaArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:keda:Keda", name, opts)
        namespace = args["namespace"]
        addon = HelmAddonArgs(
            namespace=namespace,
            chart=args["chart"],
            version=args["version"],
            values=args["values"],
            provider=args["provider"],
        )
        self.addon = HelmAddon(name, addon, self.child())
        project_api = args.get("project_api")
        number = gcp.organizations.get_project_output(
            project_id=args["project"],
            opts=pulumi.InvokeOutputOptions(depends_on=[project_api] if project_api else None),
        ).number
        # `project`, `role` and `member` are ForceNew (model/diff/gcp_force_new.py); a replacement that keeps them
        # would create a no-op binding and then delete the only one: delete first.
        self.metrics_reader = gcp.projects.IAMMember(
            f"{name}-metrics-reader",
            project=args["project"],
            role=METRICS_READER_ROLE,
            member=workload_identity_principal(args["workload_pool"], number, namespace, OPERATOR_KSA),
            opts=self.child(delete_before_replace=True),
        )
        # What a ScaledObject or TriggerAuthentication waits for: the chart (CRDs, operator available) and the
        # operator's read access, so that its first queries are not refused.
        self.ready: list[pulumi.Resource] = [self.addon.chart, self.metrics_reader]
        self.register_outputs({"namespace": namespace, "metricsReader": self.metrics_reader.member})
