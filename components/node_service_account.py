"""Node identity: a dedicated least-privilege service account for every node pool.

The reference scripts run nodes as the Compute Engine default service account (Editor on the
project). GKE documents `roles/container.defaultNodeServiceAccount` as the role a custom node
service account needs (logging, monitoring, metadata), so that is all this account gets:
https://cloud.google.com/kubernetes-engine/docs/how-to/service-accounts#default-gke-service-agent

The bootstrap (components/bootstrap.py) creates the same account before the first `up`, so that a CI deploy account
can be let act as it alone; the stack adopts it (`create_ignore_already_exists`: the provider reads the account when
creating answers 409, resource_google_service_account.go:169) and leaves it on delete (`deletion_policy` ABANDON: the
delete calls nothing, :304-308), so the grants on it outlive a `destroy` and the next `up` finds them.
"""

from typing import TypedDict

import pulumi
import pulumi_gcp as gcp

from components.component import Component

NODE_ROLES = ("roles/container.defaultNodeServiceAccount",)


def node_display_name(cluster_name: str) -> str:
    return f"GKE nodes of {cluster_name}"


class NodeIdentityArgs(TypedDict):
    project: str
    """The project of the service account and its role."""
    account_id: str
    """The service account's id (derived from the cluster's name)."""
    cluster_name: str
    """The cluster whose nodes run as it (its display name says so)."""


class NodeIdentity(Component):
    """The nodes' service account and the one role GKE documents for it."""

    def __init__(self, name: str, args: NodeIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:identity:NodeIdentity", name, opts)
        project = args["project"]
        self.account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            account_id=args["account_id"],
            display_name=node_display_name(args["cluster_name"]),
            project=project,
            create_ignore_already_exists=True,
            deletion_policy="ABANDON",
            # account_id is ForceNew (model/diff/gcp_force_new.py); a replacement's delete calls nothing (ABANDON)
            # and its create adopts an account still there, so the order only keeps the binding's below.
            opts=self.child(delete_before_replace=True),
        )
        self.bindings = [
            gcp.projects.IAMMember(
                f"{name}-{role.rsplit('/', 1)[-1]}",
                project=project,
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
