"""Runs the real `__main__.py` in-process under Pulumi's mock runtime and records every registration.

Used by `python -m components render` (offline review) and by the tests' harness. No cloud, no
Pulumi CLI, no engine: `pulumi.runtime.set_mocks` swaps the resource monitor for a recording one,
and `pulumi.runtime.test` runs the program and waits for every outstanding registration.
Each RegisterResource request is kept whole (type, name, parent, provider, dependencies, property
dependencies, inputs, `protect`), so callers can render objects or assert the dependency graph.
"""

from __future__ import annotations

import os
import runpy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pulumi
from google.protobuf import json_format
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import set_root_resource

from components import stack as stack_module
from components.model.deployed import READ_STACK_OUTPUTS
from components.model.gke_versions import OFFLINE_ID
from components.stack import as_runtime_config

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "__main__.py"
PROJECT = "gke-tpu-slicing"
# Markers of Pulumi's property wire format (sdk/go/common/resource/properties.go: SigKey, SecretSig):
# a secret crosses the wire as {SIG_KEY: SECRET_SIG, "value": ...}.
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
UNKNOWN = rpc.UNKNOWN


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    custom: bool
    remote: bool
    parent: str
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    inputs: dict[str, Any]
    protect: bool = False
    providers: dict[str, str] = field(default_factory=dict)  # a component's provider per package
    # Resource options as the engine receives them: deleteBeforeReplace, ignoreChanges, replaceOnChanges, ...
    options: dict[str, Any] = field(default_factory=dict)
    # The resource's aliases as sent (e.g. {"spec": {"type": ...}}), or {"urn": ...} for URN aliases.
    aliases: list[dict[str, Any]] = field(default_factory=list)
    id: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)

    def plain(self, key: str | None = None) -> Any:
        """Inputs with secrets unwrapped (tests of secrecy look at `inputs` directly)."""
        return unwrap(self.inputs if key is None else self.inputs.get(key))


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SIG_KEY) == SECRET_SIG


def is_unknown(value: Any) -> bool:
    """An input the engine does not know yet (a preview before the resource exists)."""
    if is_secret(value):
        return is_unknown(value["value"])
    return value == UNKNOWN or isinstance(value, pulumi.output.Unknown)


def contains_secret(value: Any) -> bool:
    if is_secret(value):
        return True
    if isinstance(value, dict):
        return any(contains_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_secret(v) for v in value)
    return False


def normalize(value: Any) -> Any:
    """Numbers cross the Pulumi wire as doubles: give integral ones back their integer type."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def unwrap(value: Any) -> Any:
    if is_secret(value):
        return unwrap(value["value"])
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.component_outputs: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.registrations.append(
                Registration(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    custom=request.custom,
                    remote=request.remote,
                    parent=request.parent,
                    provider=request.provider,
                    dependencies=list(request.dependencies),
                    property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
                    inputs=rpc.deserialize_properties(request.object, keep_unknowns=True) if request.object else {},
                    protect=bool(request.protect),
                    providers=dict(request.providers),
                    id=response.id,
                    options={
                        "deleteBeforeReplace": request.deleteBeforeReplace,
                        "ignoreChanges": list(request.ignoreChanges),
                        "replaceOnChanges": list(request.replaceOnChanges),
                        "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else None,
                        "additionalSecretOutputs": list(request.additionalSecretOutputs),
                    },
                    aliases=[json_format.MessageToDict(a) for a in request.aliases]
                    + [{"urn": u} for u in request.aliasURNs],
                )
            )
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        self.component_outputs[request.urn] = rpc.deserialize_properties(request.outputs, keep_unknowns=True)
        return super().RegisterResourceOutputs(request)


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
    return {
        "name": name,
        "status": "READY",
        "subBlockCount": hosts,
        "inUseCount": 0,
        "healthInfos": [
            {
                "healthStatus": "HEALTHY",
                "healthyHostCount": hosts,
                "degradedHostCount": 0,
                "healthyInfraCount": 1,
                "degradedInfraCount": 0,
            }
        ],
        "reservationSubBlockMaintenances": [
            {
                "maintenanceOngoingCount": 0,
                "maintenancePendingCount": 0,
                "schedulingType": "GROUPED",
                "subblockInfraMaintenanceOngoingCount": 0,
                "subblockInfraMaintenancePendingCount": 0,
                "instanceMaintenanceOngoingCount": 0,
                "instanceMaintenancePendingCount": 0,
            }
        ],
        "physicalTopologies": [{"cluster": "cluster-a", "block": "b0", "subBlock": name}],
        "kind": "compute#reservationSubBlock",
    }


@dataclass
class FakeReservation:
    """Answers the reservation and cluster invokes the way terraform-provider-google-beta's data sources do.

    `sub_blocks`: every sub-block of the block, name -> its getReservationSubBlock result (wire shape);
    `exists=False`: getReservation's answer for a missing reservation (no error, no selfLink: the resource
    Read turns the 404 into "gone" and the data source sets the id anyway); a block not in `blocks` fails
    like the API's 404; `cluster_pools`: getCluster's nodePools, None when the cluster does not exist yet.
    """

    sub_blocks: dict[str, dict[str, Any]]
    exists: bool = True
    blocks: tuple[str, ...] = ("block-0",)
    cluster_pools: list[dict[str, Any]] | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    self_link_prefix: str = "https://www.googleapis.com/compute/v1/"

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
            if self.exists:
                out.update(
                    selfLink=f"{self.self_link_prefix}{out['id']}",
                    status="READY",
                    blockNames=list(self.blocks),
                    specificReservationRequired=True,
                )
            return out
        if token == RESERVATION_TOKENS[1]:
            if not self.exists or args["name"] not in self.blocks:
                raise InvokeError(
                    token,
                    "Error reading ReservationBlock: googleapi: Error 404: The resource "
                    f"'projects/{project}/zones/{zone}/reservations/{args['reservation']}/reservationBlocks/"
                    f"{args['name']}' was not found, notFound",
                )
            return {
                "name": args["name"],
                "reservation": args["reservation"],
                "status": "READY",
                "reservationSubBlockCount": len(self.sub_blocks),
                "reservationSubBlockInUseCount": sum(1 for s in self.sub_blocks.values() if s.get("inUseCount")),
                "subBlockNames": list(self.sub_blocks),
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
        return {"name": args.get("name"), "nodePools": self.cluster_pools}


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

    def __init__(self, previous_outputs: dict[str, Any] | None = None) -> None:
        # The outputs reading the stack itself answers (`diff` hands on those of its first run).
        self.previous_outputs = previous_outputs or {}
        # Offline, nothing is read: sub-blocks are markers in name order, each ready and free.
        self.reservation = FakeReservation(
            {f"<sub-block {i:03d}>": healthy_sub_block(f"<sub-block {i:03d}>") for i in range(1, 257)},
            self_link_prefix="<selfLink of ",
        )

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        if args.token == READ_STACK_OUTPUTS:  # no backend is read offline: a stack's first update unless told
            return read_stack_outputs(args.args, self.previous_outputs), []
        if args.token == "gcp:organizations/getProject:getProject":
            project = args.args.get("projectId", "<project>")
            return {"number": f"<number of project {project}>", "projectId": project}, []
        if args.token == "gcp:container/getEngineVersions:getEngineVersions":
            # Offline, GKE's list cannot be read: the answer says so (its id), in the SDK result type's shape
            # (pulumi_gcp.container.GetEngineVersionsResult), with no versions. The program then uses an exact
            # `cluster.version` as given and shows a prefix or 'default' as a marker, with a warning
            # (components/model/gke_versions.py resolve); `pulumi preview` resolves and checks it for real.
            return {
                "defaultClusterVersion": "",
                "id": OFFLINE_ID,
                "latestMasterVersion": "",
                "latestNodeVersion": "",
                "location": args.args.get("location"),
                "project": args.args.get("project"),
                "releaseChannelDefaultVersion": {},
                "releaseChannelLatestVersion": {},
                "releaseChannelUpgradeTargetVersion": {},
                "validMasterVersions": [],
                "validNodeVersions": [],
                "versionPrefix": args.args.get("versionPrefix"),
            }, []
        if args.token in RESERVATION_TOKENS:
            return self.reservation.call(args.token, args.args), []
        return {}, []


@dataclass
class MockRun:
    registrations: list[Registration]
    error: BaseException | None
    mocks: pulumi.runtime.Mocks
    component_outputs: dict[str, dict[str, Any]]
    logs: list[tuple[str, str]]
    required_cli: list[str] = field(default_factory=list)  # ranges passed to pulumi.require_pulumi_version


@contextmanager
def _captured_logs(logs: list[tuple[str, str]]) -> Iterator[None]:
    original = {lvl: getattr(pulumi.log, lvl) for lvl in ("info", "warn", "error")}
    for lvl in original:
        setattr(pulumi.log, lvl, lambda msg, *a, _lvl=lvl, **k: logs.append((_lvl, str(msg))))
    try:
        yield
    finally:
        for lvl, fn in original.items():
            setattr(pulumi.log, lvl, fn)


def exported(name: str) -> Any:
    """The stack output `name` of the run that just ended (None when it exported none); call it before the next
    run, which starts a new root stack."""
    from pulumi.runtime.settings import get_root_resource
    from pulumi.runtime.sync_await import _sync_await

    root = get_root_resource()
    outputs = getattr(root, "outputs", None) or {}
    if name not in outputs:
        return None
    return _sync_await(pulumi.Output.from_input(outputs[name]).future())


def execute(
    config: dict[str, Any],
    *,
    stack: str,
    secret_keys: list[str] | tuple[str, ...] = (),
    preview: bool = False,
    mocks: pulumi.runtime.Mocks | None = None,
    now: datetime | None = None,
    organization: str = "organization",
) -> MockRun:
    """Runs __main__.py with `config` (full keys such as `gke-tpu-slicing:tpu`, YAML values) as the stack's config.

    The program's own error (bad configuration, an impossible plan) is returned, not raised. `now`, when
    given, is the program's clock (components.stack.clock), so date checks do not depend on the day; `organization` is
    what pulumi.get_organization() answers (a diy backend's by default).
    """
    pulumi.runtime.set_all_config(as_runtime_config(config), list(secret_keys))
    mocks = mocks or SymbolicMocks()
    monitor = RecordingMonitor(mocks)
    logs: list[tuple[str, str]] = []
    # A fresh root stack per run, or exports of an earlier run would leak into this one.
    set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(
        mocks, project=PROJECT, stack=stack, preview=preview, monitor=monitor, organization=organization
    )
    # The mock engine has no RequirePulumiVersion: record what the program asks for instead.
    required: list[str] = []
    engine = pulumi.runtime.settings.SETTINGS.engine
    engine.RequirePulumiVersion = lambda request: required.append(request.pulumi_version_range)
    original_clock = stack_module.clock
    if now is not None:
        stack_module.clock = lambda: now
    error: BaseException | None = None
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        with _captured_logs(logs):
            pulumi.runtime.test(lambda: runpy.run_path(str(MAIN), run_name="__main__") and None)()
    except BaseException as err:
        error = err
    finally:
        os.chdir(cwd)
        stack_module.clock = original_clock
    return MockRun(monitor.registrations, error, mocks, monitor.component_outputs, logs, required)
