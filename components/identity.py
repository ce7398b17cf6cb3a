"""Node identity: a dedicated least-privilege service account for every node pool.

The reference scripts run nodes as the Compute Engine default service account (Editor on the
project). GKE documents `roles/container.defaultNodeServiceAccount` as the role a custom node
service account needs (logging, monitoring, metadata), so that is all this account gets:
https://cloud.google.com/kubernetes-engine/docs/how-to/service-accounts#default-gke-service-agent
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.base import Component
from components.model.settings import Settings

NODE_ROLES = ("roles/container.defaultNodeServiceAccount",)


class NodeIdentity(Component):
    def __init__(self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:identity:NodeIdentity", name, opts)
        self.account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            account_id=settings.node_service_account_id,
            display_name=f"GKE nodes of {settings.cluster.name}",
            project=settings.project,
            # account_id is ForceNew and fixed (derived from the cluster name): delete first.
            opts=self.child(delete_before_replace=True),
        )
        self.bindings = [
            gcp.projects.IAMMember(
                f"{name}-{role.rsplit('/', 1)[-1]}",
                project=settings.project,
                role=role,
                member=self.account.member,
                # A replaced account keeps its email: creating the "new" binding first would be a no-op,
                # and deleting the old one afterwards would remove the role. Delete first.
                opts=self.child(delete_before_replace=True),
            )
            for role in NODE_ROLES
        ]
        self.email = self.account.email
        self.register_outputs({"email": self.email, "roles": list(NODE_ROLES)})
