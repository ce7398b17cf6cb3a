"""Runs the real `__main__.py` under Pulumi's mock runtime and records what it registers.

The recording itself is `components/cli/mockrun.py` (the offline render uses it too); this adds the
fakes' answers for computed values and the runs' comparison by the change model. The stack files as tests
fill them are tests/stack_config.py's; the queries tests assert with, tests/graph_queries.py's.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import set_root_resource
from pulumi.runtime.sync_await import _sync_await

from components.cli import import_file, plan, render
from components.cli.mockrun import (
    PROJECT,
    UNKNOWN,
    RecordingMonitor,
    Registration,
    contains_secret,
    execute,
    is_secret,
    is_unknown,
    normalize,
    unwrap,
)
from components.cli.mocks import RESERVATION_TOKENS, FakeReservation, list_bucket, read_stack_outputs
from components.cli.snapshot import records
from components.model.diff import engine
from components.model.serving.deployed import READ_STACK_OUTPUTS
from components.preflight import WEIGHTS_LIST, as_runtime_config
from tests.fakes import SERVER_CONFIG, engine_versions
from tests.stack_config import CLOCK, merge, stack_file_config

__all__ = ["UNKNOWN", "Registration", "contains_secret", "is_secret", "is_unknown", "normalize", "unwrap"]

# The resource types tests name most.
CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
CHART = "kubernetes:helm.sh/v4:Chart"
KUEUE = "kubernetes:kueue.x-k8s.io"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
PROJECT_NUMBER = "123456789012"


class Mocks(pulumi.runtime.Mocks):
    """Returns inputs as state plus the computed fields the program reads.

    `known_cluster=False` models the first preview of a fresh stack: the cluster has no endpoint yet.
    """

    def __init__(
        self,
        known_cluster: bool = True,
        cluster_hash: str = "a1b2c3d4e5f6",
        server_config: dict[str, Any] | None = None,
        reservation: FakeReservation | None = None,
        previous_outputs: dict[str, Any] | None = None,
        weights: dict[str, list[str] | None] | None = None,
    ) -> None:
        self.known_cluster = known_cluster
        # Object names per bucket, listed at preview (components/preflight.py check_weights); None: every prefix holds
        # a model.
        self.weights = weights
        # The stack's outputs as its last update left them, which reading the stack itself answers
        # (components/preflight.py read_deployed_serving); none by default: a stack's first update.
        self.previous_outputs = previous_outputs or {}
        self.stack_references: list[str] = []  # the stack names whose outputs the program read
        # What GKE offers in the region (getServerConfig); tests change it to model a later day.
        self.server_config = server_config or SERVER_CONFIG
        # The reservation's block: healthy free sub-blocks and no cluster yet, unless a test says otherwise.
        self.reservation = reservation or FakeReservation.healthy()
        # GKE's DNS endpoint embeds a per-cluster hash: a replaced cluster gets a new one.
        self.cluster_hash = cluster_hash
        self.calls: list[pulumi.runtime.MockCallArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        name = state.get("name", args.name)
        state.setdefault("name", name)
        project = state.get("project", "my-tpu-project")
        if args.typ.startswith("gcp:"):
            state.setdefault("selfLink", f"https://www.googleapis.com/mock/projects/{project}/{args.typ}/{name}")
        if args.typ == "gcp:serviceaccount/account:Account":
            email = f"{state['accountId']}@{project}.iam.gserviceaccount.com"
            state.update(email=email, member=f"serviceAccount:{email}")
        if args.typ == "gcp:container/cluster:Cluster":
            if self.known_cluster:
                dns = f"gke-{self.cluster_hash}-{PROJECT_NUMBER}.{state.get('location')}.gke.goog"
                state.update(
                    endpoint="203.0.113.10",
                    # The pods' range GKE allocates (ip_allocation_policy {}): read back, never sent.
                    clusterIpv4Cidr="10.4.0.0/14",
                    masterAuth={"clusterCaCertificate": "Q0EtY2VydA=="},
                    controlPlaneEndpointsConfig={"dnsEndpointConfig": {"endpoint": dns}},
                )
            else:
                # Computed by GKE: unknown in the first preview (the DNS endpoint, inside the block the program
                # sends, with it: a provider reports a partly computed block as unknown until the create).
                state.pop("endpoint", None)
                state.pop("masterAuth", None)
                state.pop("controlPlaneEndpointsConfig", None)
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        self.calls.append(args)
        if args.token == READ_STACK_OUTPUTS:
            self.stack_references.append(args.args["name"])
            return read_stack_outputs(args.args, self.previous_outputs), []
        if args.token == "gcp:organizations/getProject:getProject":
            return {"number": PROJECT_NUMBER, "projectId": args.args.get("projectId", "my-tpu-project")}, []
        if args.token == "gcp:container/getEngineVersions:getEngineVersions":
            return engine_versions(self.server_config, args.args), []
        if args.token in RESERVATION_TOKENS:
            return self.reservation.call(args.token, args.args), []
        if args.token == WEIGHTS_LIST:
            return list_bucket(self.weights, args.args), []
        return {}, []


@dataclass
class Run:
    registrations: list[Registration]
    outputs: dict[str, Any]
    secret_outputs: set[str]
    error: BaseException | None
    mocks: Mocks
    component_outputs: dict[str, dict[str, Any]]
    logs: list[tuple[str, str]]
    required_cli: list[str] = field(default_factory=list)  # ranges passed to pulumi.require_pulumi_version

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def get(self, type_: str, name: str) -> Registration:
        found = [r for r in self.registrations if r.type == type_ and r.name == name]
        assert len(found) == 1, f"expected one {type_} named {name}, found {len(found)}: " + ", ".join(
            sorted(r.name for r in self.of_type(type_))
        )
        return found[0]

    def by_urn(self, urn: str) -> Registration:
        return next(r for r in self.registrations if r.urn == urn)

    def direct_edges(self, reg: Registration) -> set[str]:
        """What Pulumi orders this resource after: dependencies, property dependencies, parent, provider."""
        provider = reg.provider.split("::" + reg.provider.rsplit("::", 1)[-1])[0] if reg.provider else ""
        edges = set(reg.dependencies).union(*reg.property_dependencies.values(), [reg.parent, provider])
        return {e for e in edges if e}

    def depends_on(self, a: Registration, b: Registration) -> bool:
        """True when `a` is (transitively) ordered after `b`; components count through their children."""
        targets = {b.urn} | {r.urn for r in self.descendants(b)}
        by_urn = {r.urn: r for r in self.registrations}
        seen: set[str] = set()
        todo = [a.urn]
        while todo:
            urn = todo.pop()
            if urn in seen or urn not in by_urn:
                continue
            seen.add(urn)
            for edge in self.direct_edges(by_urn[urn]):
                if edge in targets:
                    return True
                todo.append(edge)
        return False

    def descendants(self, reg: Registration) -> list[Registration]:
        out = [r for r in self.registrations if r.parent == reg.urn]
        for child in list(out):
            out.extend(self.descendants(child))
        return out


def run_program(
    overrides: dict[str, Any] | None = None,
    *,
    stack: str = "dev",
    secrets: dict[str, str] | None = None,
    preview: bool = False,
    mocks: Mocks | None = None,
    filled: bool = True,
    now: datetime = CLOCK,
    organization: str = "organization",
    fresh: bool = False,
) -> Run:
    """Runs __main__.py with the stack file's config deep-merged with `overrides` (keys like 'gke-tpu-slicing:tpu').

    `now` is the program's clock (components.preflight.clock); `organization` what pulumi.get_organization() answers
    (a diy backend's by default, as the project's state bucket is). A configuration already run with the same default
    fakes is answered from the session's recording as a private copy, unless `fresh` or CACHING is off.
    """
    config = merge(stack_file_config(stack, filled=filled), overrides or {})
    config.update(secrets or {})
    secret_keys = list((secrets or {}).keys())
    key = None
    state = _mocks_state(mocks)
    if state is not None and CACHING and not fresh:
        key = json.dumps([config, secret_keys, stack, preview, now.isoformat(), organization, state], sort_keys=True)
        if key in _RECORDED:
            pulumi.runtime.set_all_config(as_runtime_config(config), secret_keys)  # as a run would leave it
            run = pickle.loads(_RECORDED[key])
            if mocks is not None:  # the caller's mocks (and its reservation) read what the run asked them
                _adopt(mocks, run.mocks)
                run.mocks = mocks
            return run
    run = _run(config, secret_keys, mocks or Mocks(), stack=stack, preview=preview, now=now, organization=organization)
    if key is not None:
        try:
            _RECORDED[key] = pickle.dumps(run)
            pickle.loads(_RECORDED[key])
        except Exception:  # an error or output that does not round-trip is simply run again next time
            _RECORDED.pop(key, None)
    return run


def _hooks() -> dict[str, Any]:
    """The engine's methods a test may wrap (tests/test_slice_controller.py does): a wrapped one is no replay."""
    return {f"{c.__name__}.{n}": f for c in (MockMonitor, RecordingMonitor) for n, f in vars(c).items() if callable(f)}


_UNWRAPPED = _hooks()


def _mocks_state(mocks: Mocks | None) -> str | None:
    """What a run's answers depend on, for the default fakes before their first run; None: not recordable."""
    if _hooks() != _UNWRAPPED:
        return None
    if mocks is None:
        return ""
    if type(mocks) is not Mocks or type(mocks.reservation) is not FakeReservation:
        return None  # a subclass answers in its own way
    if mocks.calls or mocks.stack_references or mocks.reservation.calls:
        return None
    return hashlib.sha256(pickle.dumps(vars(mocks))).hexdigest()


def _adopt(mine: Any, recorded: Any) -> None:
    for name, value in vars(recorded).items():
        current = getattr(mine, name, None)
        if type(current) is type(value) and hasattr(value, "__dict__"):
            _adopt(current, value)
        else:
            setattr(mine, name, value)


# Recorded runs by configuration and options (pickled: every hit unpickles its own copy, so no test can change
# another's). conftest turns CACHING off for a test that monkeypatches: its run must see the patch.
_RECORDED: dict[str, bytes] = {}
CACHING = True


def _run(config: dict[str, Any], secret_keys: list[str], mocks: Mocks, **options: Any) -> Run:
    result = execute(config, secret_keys=secret_keys, mocks=mocks, **options)
    outputs: dict[str, Any] = {}
    secret_outputs: set[str] = set()
    root = pulumi.runtime.get_root_resource()
    if result.error is None and root is not None:
        for key, value in root.outputs.items():  # type: ignore[attr-defined]
            out = pulumi.Output.from_input(value)
            outputs[key] = _sync_await(out.future(with_unknowns=True))
            if _sync_await(out.is_secret()):
                secret_outputs.add(key)
    return Run(
        result.registrations,
        outputs,
        secret_outputs,
        result.error,
        mocks,
        result.component_outputs,
        result.logs,
        result.required_cli,
    )


def assert_rejected(
    overrides: dict[str, Any], fragments: list[str], prefix: str = "invalid stack configuration"
) -> str:
    """The program stops with one error containing every fragment, before registering anything."""
    return rejected(run_program(overrides), *fragments, prefix=prefix)


def ok(overrides: dict[str, Any] | None = None, **options: Any) -> Run:
    run = run_program(overrides, **options)
    assert run.error is None, run.error
    return run


def warnings_of(run: Run) -> list[str]:
    """The warnings a run that must succeed logged (what `pulumi preview` shows)."""
    assert run.error is None, run.error
    return [message for level, message in run.logs if level == "warn"]


def preview(before: Run, after: Run) -> engine.Result:
    """What `pulumi preview` does between two runs, from the change model (components/model/diff)."""
    assert before.error is None and after.error is None, before.error or after.error
    return engine.diff(records(before.registrations), records(after.registrations))


def changes(before: Run, after: Run) -> tuple[set[str], set[str], set[str]]:
    """(added, removed, changed) resource names between two runs."""
    result = preview(before, after).changes
    added = {c.name for c in result if c.action == engine.CREATE}
    removed = {c.name for c in result if c.action == engine.DELETE}
    changed = {c.name for c in result if c.action in (engine.UPDATE, engine.REPLACE, engine.REJECTED)}
    # The model compares the same inputs the snapshot holds: no change it misses.
    assert (snapshot(before) == snapshot(after)) == (not added | removed | changed)
    return added, removed, changed


def snapshot(run: Run) -> dict[tuple[str, str], Any]:
    """What `pulumi preview` diffs: each resource's inputs (secrets unwrapped, numbers normalized)."""
    assert run.error is None, run.error
    return {(r.type, r.name): normalize(unwrap(r.inputs)) for r in run.registrations if r.custom or r.remote}


@cache
def stack_run(stack: str) -> Run:
    """The stack file's run that must succeed, shared by the tests that only read it."""
    return ok(stack=stack)


def declare(body: Callable[[], None]) -> list[Registration]:
    """What `body` registers under the mocks: a component declared alone, from its args."""
    mocks = Mocks()
    monitor = RecordingMonitor(mocks)
    set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack="dev", monitor=monitor)
    pulumi.runtime.test(body)()
    return monitor.registrations


def rejected(run: Run, *fragments: str, prefix: str = "") -> str:
    assert run.error is not None, "accepted"
    message = str(run.error)
    assert message.startswith(prefix), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message}"
    assert run.registrations == [], "resources registered before the error"
    return message


COMMANDS = {"plan": plan.main, "import-file": import_file.main, "render": render.main}
