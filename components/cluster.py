"""The GKE cluster, its system node pool, and the one Kubernetes provider every later layer uses (SPEC 3)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.base import Component
from components.model.settings import Settings

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def kubeconfig(name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that authenticates with gke-gcloud-auth-plugin, so no token is stored in state."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "provideClusterInfo": True,
            "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": name,
                    "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate},
                }
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [{"name": name, "user": user}],
        }
    )


def cluster_identifier(cluster: gcp.container.Cluster) -> pulumi.Output[str]:
    """Identifies one cluster *instance*: new when the cluster is replaced, stable for its lifetime.

    The kubeconfig alone cannot be the identity (an IP or CA rotation changes it, and would replace
    every Kubernetes object); the name alone is too stable (a cluster replaced under the same name
    would leave Pulumi believing every object still exists). GKE gives each cluster a unique DNS
    endpoint (`gke-<hash>-<project number>.<region>.gke.goog`, on every cluster regardless of version
    or configuration) that survives IP and CA rotation: the id plus that endpoint is the identity.
    The IP endpoint stands in only where GKE reports no DNS endpoint.
    """

    def dns_endpoint(config: Any) -> str | None:
        dns = getattr(config, "dns_endpoint_config", None)
        return getattr(dns, "endpoint", None)

    def identity(args: list[Any]) -> str:
        cluster_id, dns, ip = args
        return f"{cluster_id}@{dns or ip}"

    dns = cluster.control_plane_endpoints_config.apply(dns_endpoint)
    return pulumi.Output.all(cluster.id, dns, cluster.endpoint).apply(identity)


class Cluster(Component):
    """A regional Standard cluster with every flag of the reference `gcloud container clusters create`."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        network: gcp.compute.Network,
        subnetwork: gcp.compute.Subnetwork,
        node_service_account: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gke-tpu-slicing:cluster:Cluster", name, opts)
        c = settings.cluster
        exclusion = c.maintenance_exclusion
        node_identity = {
            "service_account": node_service_account,
            "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
            "workload_metadata_config": {"mode": "GKE_METADATA"},
        }
        self.cluster = gcp.container.Cluster(
            f"{name}-gke",
            name=c.name,
            project=settings.project,
            location=settings.region,
            network=network.id,
            subnetwork=subnetwork.id,
            release_channel={"channel": c.release_channel},
            min_master_version=c.version,
            # The default pool is replaced by the `system` pool below, so that changing the system
            # machine type updates a node pool instead of replacing the whole cluster. No `node_config`
            # here: the provider marks that block ForceNew and GKE stops returning it once the default
            # pool is gone, so setting it replaces the cluster on the next `up` (cloud-foundation-fabric
            # #1275, k8s-config-connector#8651). This is the provider's documented pattern
            # (website/docs/r/container_cluster.html.markdown, "with a separately managed node pool").
            remove_default_node_pool=True,
            initial_node_count=1,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy={},
            datapath_provider="ADVANCED_DATAPATH",
            gateway_api_config={"channel": "CHANNEL_STANDARD"},
            monitoring_config={
                "managed_prometheus": {"enabled": True},
                "advanced_datapath_observability_config": {"enable_metrics": True, "enable_relay": False},
            },
            workload_identity_config={"workload_pool": settings.workload_pool},
            addons_config={
                "http_load_balancing": {"disabled": False},
                "gcp_filestore_csi_driver_config": {"enabled": True},
                "gcs_fuse_csi_driver_config": {"enabled": True},
                "horizontal_pod_autoscaling": {"disabled": False},
                "dns_cache_config": {"enabled": True},
                "slice_controller_config": {"enabled": True},
            },
            maintenance_policy=None
            if exclusion is None
            else {
                # pulumi-gcp requires a window whenever a maintenance policy is set.
                "daily_maintenance_window": {"start_time": c.daily_maintenance_start},
                "maintenance_exclusions": [
                    {
                        "exclusion_name": exclusion.name,
                        "start_time": exclusion.rfc3339(exclusion.start),
                        "end_time": exclusion.rfc3339(exclusion.end),
                        "exclusion_options": {"scope": exclusion.scope},
                    }
                ],
            },
            deletion_protection=c.deletion_protection,
            opts=self.child(
                # A fixed name: a replacement must delete the old cluster first (create-first ends in 409).
                delete_before_replace=True,
                # ForceNew, and only shapes the default pool deleted right after creation: a value GKE
                # reports differently later must never replace the cluster.
                ignore_changes=["initialNodeCount"],
                # cluster.protect: Pulumi refuses any update or destroy that would delete or replace it.
                protect=c.protect,
            ),
        )
        self.system_pool = gcp.container.NodePool(
            f"{name}-system",
            name=c.system_pool_name,
            project=settings.project,
            location=settings.region,
            cluster=self.cluster.id,
            # Per zone of the regional cluster, as `gcloud --num-nodes` is.
            node_count=c.system_node_count,
            # machine_type updates the pool in place (provider: nodePoolNodeConfigUpdate); the identity
            # fields are ForceNew and replace it, delete-first because the name is fixed.
            node_config={"machine_type": c.system_machine_type, **node_identity},
            opts=self.child(delete_before_replace=True, protect=c.protect),
        )
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate
            ).apply(lambda a: kubeconfig(f"gke_{settings.project}_{settings.region}_{a[0]}", a[1], a[2] or ""))
        )
        # The only Kubernetes provider of the program (default providers are disabled in Pulumi.yaml).
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            cluster_identifier=cluster_identifier(self.cluster),
            opts=self.child(depends_on=[self.system_pool]),
        )
        self.register_outputs(
            {
                "name": self.cluster.name,
                "endpoint": self.cluster.endpoint,
                "systemPool": self.system_pool.name,
                "kubeconfig": self.kubeconfig,
            }
        )
