"""The answers of the offline runs' mocks (components/cli/mockrun.py): computed values as markers, the
reservation and cluster invokes as the provider's data sources answer them, the stack's own outputs.

The tests' harness answers with the same fakes (FakeReservation, healthy_sub_block).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import grpc
import pulumi

from components.model.serving.deployed import READ_STACK_OUTPUTS
from components.preflight import WEIGHTS_LIST


def read_stack_outputs(args: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """What the builtin provider answers to `readStackOutputs` (builtins.go `readStackReference`; the Node SDK's
    `ReadStackOutputsResult`): the name, the referenced stack's outputs and which of them are secret."""
    return {"name": args.get("name"), "outputs": outputs, "secretOutputNames": []}


RESERVATION_TOKENS = (
    "gcp:compute/getReservation:getReservation",
    "gcp:compute/getReservationBlock:getReservationBlock",
    "gcp:compute/getReservationSubBlock:getReservationSubBlock",
    "gcp:container/getCluster:getCluster",
)


class InvokeError(grpc.RpcError):
    """A provider's failed invoke, as the engine answers it: a gRPC error whose details the SDK raises as
    `invoke of <token> failed: <details>` (pulumi/runtime/invoke.py, settings.grpc_error_to_exception)."""

    def __init__(self, token: str, message: str) -> None:
        super().__init__(message)
        self._details = f"invocation of {token} returned an error: invoking {token}: 1 error occurred:\n\t* {message}"

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return self._details


def healthy_sub_block(name: str, hosts: int = 16) -> dict[str, Any]:
    """A getReservationSubBlock result, wire shape (pulumi-gcp 10.2 GetReservationSubBlockResult)."""
    counts = {"healthyHostCount": hosts, "degradedHostCount": 0, "healthyInfraCount": 1, "degradedInfraCount": 0}
    maintenance = {"maintenanceOngoingCount": 0, "maintenancePendingCount": 0, "schedulingType": "GROUPED"}
    maintenance |= {
        f"{of}Maintenance{state}Count": 0 for of in ("subblockInfra", "instance") for state in ("Ongoing", "Pending")
    }
    return {
        "name": name,
        "status": "READY",
        "subBlockCount": hosts,
        "inUseCount": 0,
        "healthInfos": [{"healthStatus": "HEALTHY", **counts}],
        "reservationSubBlockMaintenances": [maintenance],
        "physicalTopologies": [{"cluster": "cluster-a", "block": "b0", "subBlock": name}],
        "kind": "compute#reservationSubBlock",
    }


@dataclass
class FakeReservation:
    """Answers the reservation and cluster invokes the way terraform-provider-google-beta's data sources do.

    `sub_blocks`: every sub-block of the block, name -> its getReservationSubBlock result (wire shape);
    `exists=False`: getReservation's answer for a missing reservation (no error, no selfLink: the resource
    Read turns the 404 into "gone" and the data source sets the id anyway); a block not in `blocks` fails
    like the API's 404; `cluster_pools`: getCluster's nodePools, None when the cluster does not exist yet;
    `master_version`: the version its control plane runs (getCluster's `masterVersion`, GKE's currentMasterVersion).
    """

    sub_blocks: dict[str, dict[str, Any]]
    exists: bool = True
    blocks: tuple[str, ...] = ("block-0",)
    cluster_pools: list[dict[str, Any]] | None = None
    master_version: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    self_link_prefix: str = "https://www.googleapis.com/compute/v1/"
    # The reservation's zone (a reservation lives in one; asked in another, it is missing there); None: any zone.
    zone: str | None = "us-central1-ai1a"
    # Block name -> its sub-block names, for a reservation whose blocks differ; a block not listed has them all.
    block_sub_blocks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    any_block: bool = False  # every block name answers (the offline markers)

    @classmethod
    def healthy(cls, count: int = 256, prefix: str = "subblock-") -> FakeReservation:
        width = len(str(count))
        return cls({f"{prefix}{i:0{width}d}": healthy_sub_block(f"{prefix}{i:0{width}d}") for i in range(1, count + 1)})

    def call(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((token, dict(args)))
        project, zone = args.get("project"), args.get("zone")
        if token == RESERVATION_TOKENS[0]:
            out: dict[str, Any] = {"name": args["name"], "project": project, "zone": zone}
            out["id"] = f"projects/{project}/zones/{zone}/reservations/{args['name']}"
            if self.exists and self.zone in (None, zone):
                out.update(
                    selfLink=f"{self.self_link_prefix}{out['id']}",
                    status="READY",
                    blockNames=[] if self.any_block else list(self.blocks),
                    specificReservationRequired=True,
                )
            return out
        if token == RESERVATION_TOKENS[1]:
            if not self.exists or (args["name"] not in self.blocks and not self.any_block):
                raise InvokeError(
                    token,
                    "Error reading ReservationBlock: googleapi: Error 404: The resource "
                    f"'projects/{project}/zones/{zone}/reservations/{args['reservation']}/reservationBlocks/"
                    f"{args['name']}' was not found, notFound",
                )
            names = list(self.block_sub_blocks.get(args["name"], self.sub_blocks))
            return {
                "name": args["name"],
                "reservation": args["reservation"],
                "status": "READY",
                "reservationSubBlockCount": len(names),
                "reservationSubBlockInUseCount": sum(1 for n in names if self.sub_blocks[n].get("inUseCount")),
                "subBlockNames": names,
                "healthInfos": [{"healthStatus": "HEALTHY"}],
            }
        if token == RESERVATION_TOKENS[2]:
            if args["name"] not in self.sub_blocks:
                raise InvokeError(token, "Error reading ReservationSubBlock: googleapi: Error 404")
            return self.sub_blocks[args["name"]]
        if self.cluster_pools is None:
            raise InvokeError(
                token, f"projects/{project}/locations/{args.get('location')}/clusters/{args.get('name')} not found"
            )
        running = {"masterVersion": self.master_version} if self.master_version else {}
        return {"name": args.get("name"), "nodePools": self.cluster_pools, **running}


def list_bucket(buckets: dict[str, list[str] | None] | None, args: dict[str, Any]) -> dict[str, Any]:
    """The listing of a bucket in the provider's result shape (pulumi_gcp.storage.GetBucketObjectsResult).

    `buckets` None: offline nothing is read, so every prefix holds a model (config.json and one shard); a bucket
    missing from `buckets` answers as the API does for a bucket that does not exist, one mapped to None as it does
    for a caller without storage.objects.list (components/preflight.py NO_SUCH_BUCKET).
    """
    bucket, prefix = args.get("bucket", ""), args.get("prefix", "")
    listed = (buckets or {}).get(bucket)
    if buckets is None:
        names = [f"{prefix}config.json", f"{prefix}model-00001-of-00001.safetensors"]
    elif bucket not in buckets:
        raise InvokeError(
            WEIGHTS_LIST,
            "Error retrieving bucket objects: googleapi: Error 404: The specified bucket does not exist., notFound",
        )
    elif listed is None:
        raise InvokeError(
            WEIGHTS_LIST,
            "Error retrieving bucket objects: googleapi: Error 403: preview@p.iam.gserviceaccount.com does not have "
            "storage.objects.list access to the Google Cloud Storage bucket. Permission 'storage.objects.list' "
            "denied on resource (or it may not exist)., forbidden",
        )
    else:
        names = [n for n in listed if n.startswith(prefix)]
    objects = [
        {"name": n, "contentType": "", "mediaLink": "", "selfLink": "", "storageClass": "STANDARD"} for n in names
    ]
    return {"bucket": bucket, "bucketObjects": objects, "id": bucket, "prefix": prefix}


class SymbolicMocks(pulumi.runtime.Mocks):
    """Computed values as visible markers (`<network-main.id>`), so offline output never looks real.

    A service account's email is exact (GCP's documented `<id>@<project>.iam.gserviceaccount.com`).
    """

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        state.setdefault("name", args.name)
        if args.typ.startswith("gcp:"):
            state.setdefault("selfLink", f"<{args.name}.selfLink>")
        if args.typ == "gcp:serviceaccount/account:Account":
            email = f"{state['accountId']}@{state.get('project', '<project>')}.iam.gserviceaccount.com"
            state.update(email=email, member=f"serviceAccount:{email}")
        if args.typ == "gcp:container/cluster:Cluster":
            state.update(
                endpoint=f"<{args.name}.endpoint>",
                masterAuth={"clusterCaCertificate": "<ca>"},
                clusterIpv4Cidr=f"<{args.name}.clusterIpv4Cidr>",
                # GKE's DNS-based endpoint, which every cluster has (the kubeconfig may target it).
                controlPlaneEndpointsConfig={"dnsEndpointConfig": {"endpoint": f"<{args.name}.dnsEndpoint>"}},
            )
        return f"<{args.name}.id>", state

    def __init__(
        self, previous_outputs: dict[str, Any] | None = None, weights: dict[str, list[str] | None] | None = None
    ) -> None:
        # The outputs reading the stack itself answers (`diff` hands on those of its first run).
        self.previous_outputs = previous_outputs or {}
        # Offline, nothing is read: sub-blocks are markers in name order, each ready and free.
        self.reservation = FakeReservation(
            {f"<sub-block {i:03d}>": healthy_sub_block(f"<sub-block {i:03d}>") for i in range(1, 257)},
            self_link_prefix="<selfLink of ",
            zone=None,
            any_block=True,
        )
        # Object names per bucket (`gs://` listing at preview); None: every prefix holds a config and a shard.
        self.weights = weights

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        if args.token == READ_STACK_OUTPUTS:  # no backend is read offline: a stack's first update unless told
            return read_stack_outputs(args.args, self.previous_outputs), []
        if args.token == "gcp:organizations/getProject:getProject":
            project = args.args.get("projectId", "<project>")
            return {"number": f"<number of project {project}>", "projectId": project}, []
        if args.token in RESERVATION_TOKENS:
            return self.reservation.call(args.token, args.args), []
        if args.token == WEIGHTS_LIST:
            return list_bucket(self.weights, args.args), []
        return {}, []
