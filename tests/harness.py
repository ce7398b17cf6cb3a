"""Runs the real `__main__.py` under Pulumi's mock runtime and records what it registers.

The recording itself is `components/cli/mockrun.py` (the offline render uses it too); this adds
realistic fakes for computed values, the stack files with their placeholders filled in, and the
graph queries tests assert with.
"""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
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
from components.cli.plan import stack_config
from components.cli.snapshot import records
from components.model.config.checks import PLACEHOLDER_RE
from components.model.config.settings import ConfigError, Settings, load
from components.model.diff import engine, paths
from components.model.serving.deployed import READ_STACK_OUTPUTS
from components.package.schema import schema
from components.package.stack import TYPE
from components.preflight import WEIGHTS_LIST, as_runtime_config

__all__ = ["UNKNOWN", "Registration", "contains_secret", "is_secret", "is_unknown", "normalize", "unwrap"]

ROOT = Path(__file__).resolve().parent.parent
# The project's config namespace and the resource types tests name most.
P = PROJECT
CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
CHART = "kubernetes:helm.sh/v4:Chart"
KUEUE = "kubernetes:kueue.x-k8s.io"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
PROJECT_NUMBER = "123456789012"
# The program's clock in every run (date checks must not make tests depend on the day they run).
CLOCK = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml"))

# What tests put where a stack file says <REPLACE-ME...>, by config path. A placeholder without an
# entry here fails every run of that stack, naming it, so a new placeholder cannot go untested.
PLACEHOLDER_VALUES: dict[str, Any] = {
    "gcp:project": "my-tpu-project",
    f"{PROJECT}:tpu.reservation.name": "tpu7x-reservation",
    f"{PROJECT}:serving.weightsBucket": "gemma3-weights",
    f"{PROJECT}:cluster.controlPlane.authorizedNetworks[0].cidrBlock": "198.51.100.0/24",
    f"{PROJECT}:observability.notificationChannels[0]": "projects/my-tpu-project/notificationChannels/123456",
}


def placeholders(value: Any, path: str) -> list[str]:
    """Config paths (`gcp:project`, `gke-tpu-slicing:tpu.reservation.name`) of every placeholder in `value`."""
    if isinstance(value, str):
        return [path] if PLACEHOLDER_RE.search(value) else []
    if isinstance(value, dict):
        sep = "" if not path else "."
        return [hit for k, v in value.items() for hit in placeholders(v, f"{path}{sep}{k}")]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in placeholders(v, f"{path}[{i}]")]
    return []


def fill_placeholders(config: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(config)
    for path in placeholders(config, ""):
        if path not in PLACEHOLDER_VALUES:
            raise KeyError(f"{path} is a placeholder in a stack file: give it a test value in PLACEHOLDER_VALUES")
        top, _, rest = path.partition(".") if not path.startswith("gcp:") else (path, "", "")
        paths.assign(out, (top, *paths.parse(rest)), PLACEHOLDER_VALUES[path])
    return out


# The keys settings without a stack file need besides the reservation (they have no default): the weights
# bucket, who hears of alerts, who may reach the control plane.
REQUIRED_KEYS: dict[str, Any] = {
    "serving": {"weightsBucket": "my-weights"},
    "observability": {"notifyNobody": True},
    "cluster": {"controlPlane": {"authorizedNetworks": [{"cidrBlock": "198.51.100.0/24"}]}},
}


def set_arguments(stack: str) -> list[str]:
    """`--set KEY=VALUE` arguments of the offline commands that fill the stack file's placeholders."""
    out: list[str] = []
    for path in placeholders(stack_config(ROOT, stack), ""):
        out += ["--set", f"{path}={PLACEHOLDER_VALUES[path]}"]
    return out


# The codelab's whole mix on dev's two cubes: serving and both demos at once. Dev's stack file leaves the
# super-slicing demo off (it needs both cubes, which serving holds: docs/stacks.md, "The dev tour"); the
# tests of that demo, of its preemption and of a graph with every workload kind start from this.
CODELAB_MIX = {f"{PROJECT}:demos": {"superslicing": {"enabled": True}}}


def stack_file_config(stack: str = "dev", *, filled: bool = True) -> dict[str, Any]:
    """What `pulumi up` would hand the program: project-level values and declared defaults, then the
    stack file; its placeholders replaced by PLACEHOLDER_VALUES unless `filled=False`."""
    config = stack_config(ROOT, stack)
    return fill_placeholders(config) if filled else config


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Deep merge; a None value deletes the key (an unset config key)."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# What GKE's getServerConfig answers for the region in tests (newest first, as the API lists them): the
# location's valid versions and, per release channel, its default and valid versions. Shaped like the API,
# not like the data source: `engine_versions` below applies the data source's own filtering to it.
SERVER_CONFIG: dict[str, Any] = {
    "defaultClusterVersion": "1.35.3-gke.1100000",
    "validMasterVersions": [
        "1.36.2-gke.1500000",
        "1.36.1-gke.2000000",
        "1.36.0-gke.3712000",
        "1.35.3-gke.1100000",
        "1.35.2-gke.1842000",
        "1.34.6-gke.1200000",
    ],
    "channels": {
        "RAPID": {
            "defaultVersion": "1.36.1-gke.2000000",
            "upgradeTargetVersion": "1.36.1-gke.2000000",
            "validVersions": ["1.36.2-gke.1500000", "1.36.1-gke.2000000", "1.36.0-gke.3712000", "1.35.3-gke.1100000"],
        },
        "REGULAR": {
            "defaultVersion": "1.35.3-gke.1100000",
            "upgradeTargetVersion": "1.35.3-gke.1100000",
            "validVersions": ["1.35.3-gke.1100000", "1.35.2-gke.1842000", "1.34.6-gke.1200000"],
        },
    },
}


def engine_versions(server: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The `gcp:container/getEngineVersions` invoke's answer, as the provider computes it from `server`.

    terraform-provider-google-beta release-8.0.0 @93c65b2d60, data_source_google_container_engine_versions.go
    lines 113-175: valid versions filtered by the plain string prefix, `latest_*` the first match, per channel
    the default (unfiltered) and the first matching valid version. Keys are exactly the SDK result type's
    (pulumi_gcp.container.GetEngineVersionsResult, camelCase on the wire).
    """
    prefix = args.get("versionPrefix") or ""
    masters = [v for v in server["validMasterVersions"] if v.startswith(prefix)]
    channels = server["channels"]
    first = {n: next((v for v in c["validVersions"] if v.startswith(prefix)), None) for n, c in channels.items()}
    return {
        "defaultClusterVersion": server["defaultClusterVersion"],
        "id": "2026-11-30 12:00:00 +0000 UTC",
        "latestMasterVersion": masters[0] if masters else "",
        "latestNodeVersion": masters[0] if masters else "",
        "location": args.get("location"),
        "project": args.get("project"),
        "releaseChannelDefaultVersion": {n: c["defaultVersion"] for n, c in channels.items()},
        "releaseChannelLatestVersion": {n: v for n, v in first.items() if v is not None},
        "releaseChannelUpgradeTargetVersion": {n: c["upgradeTargetVersion"] for n, c in channels.items()},
        "validMasterVersions": masters,
        "validNodeVersions": masters,
        "versionPrefix": args.get("versionPrefix"),
    }


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
        weights: dict[str, list[str]] | None = None,
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


def label_selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Kubernetes' label-selector semantics (apimachinery LabelSelectorAsSelector): every part must match; an
    absent or empty selector matches everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req["key"], req["operator"], req.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def ok(overrides: dict[str, Any] | None = None, **options: Any) -> Run:
    run = run_program(overrides, **options)
    assert run.error is None, run.error
    return run


def warnings_of(run: Run) -> list[str]:
    """The warnings a run that must succeed logged (what `pulumi preview` shows)."""
    assert run.error is None, run.error
    return [message for level, message in run.logs if level == "warn"]


def tpu_pools(run: Run) -> list[Registration]:
    return [r for r in run.of_type(POOL) if r.name != "cluster-system"]


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


def addon_charts(run: Run) -> list[Registration]:
    return [run.get(CHART, f"{name}-chart") for name in ("jobset", "kueue", "lws")]


def kueue_objects(run: Run) -> list[Registration]:
    return [r for r in run.registrations if r.type.startswith(KUEUE)]


def dev_settings() -> Settings:
    config = stack_file_config("dev")
    raw = {k.removeprefix(f"{PROJECT}:"): v for k, v in config.items() if k.startswith(f"{PROJECT}:")}
    return load(raw, config["gcp:project"], now=CLOCK)


def declare(body: Callable[[], None]) -> list[Registration]:
    """What `body` registers under the mocks: a component declared alone, from its args."""
    mocks = Mocks()
    monitor = RecordingMonitor(mocks)
    set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack="dev", monitor=monitor)
    pulumi.runtime.test(body)()
    return monitor.registrations


def shape(regs: list[Registration], types: set[str]) -> dict[tuple[str, str], Any]:
    return {(r.type, r.name): (r.plain(), r.options) for r in regs if r.type in types}


ROLES = ("prefill", "decode")


def lws(run: Run, role: str) -> dict:
    return normalize(run.get(LWS, f"serving-{role}").plain())


def templates(obj: dict) -> dict[str, dict]:
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}


def leader(obj: dict) -> dict:
    return templates(obj)["leader"]["spec"]


def vllm_leader(obj: dict) -> dict:
    return leader(obj)["containers"][0]


def rejected(run: Run, *fragments: str, prefix: str = "") -> str:
    assert run.error is not None, "accepted"
    message = str(run.error)
    assert message.startswith(prefix), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message}"
    assert run.registrations == [], "resources registered before the error"
    return message


def inputs_of(run: Run) -> dict[tuple[str, str], Any]:
    return {(r.type, r.name): r.inputs for r in run.registrations}


DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
NO_DEMOS = {f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}}


def tiles(d: dict[str, Any]) -> list[dict[str, Any]]:
    return d["mosaicLayout"]["tiles"]


def emitted(run: Run) -> dict[str, Any]:
    assert run.error is None, run.error
    return json.loads(run.get(DASHBOARD, "observability-dashboard").inputs["dashboardJson"])


COMMANDS = {"plan": plan.main, "import-file": import_file.main, "render": render.main}
WORKFLOWS = ROOT / ".github" / "workflows"


def workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


PROJECT_ID = "my-tpu-project"
# The smallest valid configuration: the defaults plus the values no default can give.
SMALLEST: dict[str, Any] = {"tpu": {"reservation": {"name": "tpu7x-reservation"}}, **REQUIRED_KEYS}


def with_value(path: str, value: Any, context: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(raw config, gcp:project) with `value` at `path`, on top of SMALLEST and the rule's context."""
    raw = merge(SMALLEST, context)
    if path == "project":
        return raw, value
    paths.assign(raw, tuple(path.split(".")), value)
    return raw, PROJECT_ID


# The settings tests vary the TPU keys, with REQUIRED_KEYS merged under every configuration.
BASE: dict[str, Any] = {"tpu": SMALLEST["tpu"]}


def problems(raw: dict[str, Any], project: str = PROJECT_ID) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load(merge(REQUIRED_KEYS, raw), project, now=CLOCK)
    lines = str(err.value).splitlines()
    assert lines[0] == f"invalid stack configuration ({len(lines) - 1} problem{'s' if len(lines) > 2 else ''}):"
    return [line.strip() for line in lines[1:]]


# The whole-stack component (components/package): a token, its inputs from a stack's configuration and on the
# wire, and a YAML or TypeScript program's properties checked against the committed schema.
TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123456789"


def args_of(config: dict[str, Any]) -> dict[str, Any]:
    """A stack's configuration as the component's inputs: the same tree, `project` for gcp:project."""
    return {"project": config["gcp:project"]} | {
        k.split(":", 1)[1]: v for k, v in config.items() if k.startswith(f"{PROJECT}:")
    }


def wire(value: Any) -> Any:
    """Inputs as `construct` receives them: Pulumi's wire has only doubles."""
    if isinstance(value, dict):
        return {k: wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [wire(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _check(value: Any, prop: dict[str, Any], types: dict[str, Any], path: str, problems: list[str]) -> None:
    """A value of a Pulumi YAML program against a schema property (what `pulumi preview` would type-check)."""
    if isinstance(value, str) and re.fullmatch(r"\$\{[^}]+\}", value):
        return  # a reference: the checker of the variable's own type applies
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith("fn::"):
        if prop.get("plain"):
            problems.append(f"{path}: a plain input given a function's result")
        return
    if "$ref" in prop:
        t = types[prop["$ref"].rsplit(":", 1)[-1]]
        _object(value, t.get("properties", {}), t.get("required", []), types, path, problems)
        return
    kind = prop.get("type")
    expected = {"string": str, "integer": int, "boolean": bool, "number": (int, float), "array": list, "object": dict}
    if not isinstance(value, expected[kind]) or (kind == "integer" and isinstance(value, bool)):
        problems.append(f"{path}: {value!r} is not a {kind}")
    elif kind == "array":
        for i, item in enumerate(value):
            _check(item, prop["items"], types, f"{path}[{i}]", problems)
    elif kind == "object" and "additionalProperties" in prop:
        for k, item in value.items():
            _check(item, prop["additionalProperties"], types, f"{path}.{k}", problems)


def _object(value: Any, props: dict, required: list, types: dict, path: str, problems: list[str]) -> None:
    if not isinstance(value, dict):
        problems.append(f"{path}: not an object")
        return
    problems += [f"{path}.{k}: unknown input".lstrip(".") for k in value if k not in props]
    problems += [f"{path}.{k}: required".lstrip(".") for k in required if k not in value]
    for k, item in value.items():
        if k in props:
            _check(item, props[k], types, f"{path}.{k}".lstrip("."), problems)


def schema_problems(properties: dict[str, Any], resource: str = TYPE) -> list[str]:
    spec = schema()
    types = {key.rsplit(":", 1)[-1]: t for key, t in spec["types"].items()}
    block = spec["resources"][resource]
    problems: list[str] = []
    _object(properties, block["inputProperties"], block["requiredInputs"], types, "", problems)
    return problems
