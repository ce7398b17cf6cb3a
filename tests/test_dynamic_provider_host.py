"""The program's dynamic providers as the Pulumi engine runs them: in Pulumi's own provider host process.

How the engine runs them (pulumi/pulumi, cited at the commit read):

* The CLI launches `pulumi-resource-pulumi-python`, a shell script that runs
  `$PULUMI_RUNTIME_VIRTUALENV/bin/python -u -m pulumi.dynamic` (sdk/python/dist/pulumi-resource-pulumi-python
  @332a620f), `PULUMI_RUNTIME_VIRTUALENV` being the project's `runtime.options.virtualenv` made absolute from
  `$PWD`: the engine appends every runtime option as `PULUMI_RUNTIME_<KEY>` to `os.Environ()`
  (sdk/go/common/resource/plugin/provider_plugin.go NewProvider, "Runtime options are passed as environment
  variables ... used by dynamic providers to ... lookup the virtual environment").
* It starts the script with `cmd.Dir = pwd`, `ctx.Pwd` being the project's directory, and `cmd.Env = env`
  (sdk/go/common/resource/plugin/plugin.go newPlugin/ExecPlugin@00712118). `python -m` puts that directory
  first on `sys.path`, which is how the providers, pickled by reference (`components.teardown`,
  `components.kueue_guard`), import. `pulumi destroy` does not run the program but starts the same host the
  same way, and each Delete unpickles the provider from the resource's state (`pulumi/dynamic/__main__.py`
  Delete -> get_provider(props)).
* The dynamic host answers Configure with `acceptSecrets: False`, so the engine sends the kubeconfig plain.
* The kubeconfig's credential plugin runs as a child of that process with its environment
  (kubernetes/config/exec_provider.py: `env = os.environ.copy()`, `KUBERNETES_EXEC_INFO`, the cluster when
  `provideClusterInfo`): `gke-gcloud-auth-plugin` (and the gcloud credentials it reads) must be found from
  the environment `pulumi` itself was started with.

Here: the real host (`python -u -m pulumi.dynamic`), from the project's directory with no PYTHONPATH, a fake
`gke-gcloud-auth-plugin` on PATH and a fake API server; then from another directory, where the import fails.
"""

from __future__ import annotations

import base64
import copyreg
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import rpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from components.cluster import kubeconfig
from components.kueue_guard import ImmutableFieldsProvider
from components.model import keys
from components.model.tpu import slices as model
from components.package import dynamic_host
from components.teardown import PoolReplacementsProvider, SliceGateProvider
from tests import fakes
from tests.fakes import struct
from tests.harness import Run, unwrap
from tests.stack_config import ROOT

TOKEN = "ya29.fake-token"
POOL = "tpu7-pool-0"
NODE = {keys.NODE_POOL_LABEL: POOL, keys.partition_label("4x4x4"): "cube-a"}
SLICE = {
    "apiVersion": "accelerator.gke.io/v1beta1",
    "kind": "Slice",
    "metadata": {"name": "wl-sub-abc", "annotations": {keys.OWNER_NAMESPACE: "ns", keys.OWNER_NAME: "wl"}},
    "spec": {"type": "tpu7x", "topology": "4x4x8", "partitionIds": ["cube-a"]},
    "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "ACTIVE"}]},
}


@dataclass
class FakeApiServer:
    """The three reads a gate makes: API discovery, the pool's nodes, the Slices; each request's Authorization."""

    slices: list[dict[str, Any]] = field(default_factory=lambda: [SLICE])
    seen: list[tuple[str, str]] = field(default_factory=list)

    def reply(self, path: str, query: dict[str, list[str]]) -> dict[str, Any] | None:
        version = {"groupVersion": "accelerator.gke.io/v1beta1", "version": "v1beta1"}
        if path == "/apis":
            group = {"name": model.SLICE_GROUP, "versions": [version], "preferredVersion": version}
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}
        if path == "/api/v1/nodes":
            wanted = query["labelSelector"][0].split("=", 1)
            items = [{"metadata": {"name": "n0", "labels": NODE}}] if NODE.get(wanted[0]) == wanted[1] else []
            return {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items}
        if path == "/apis/accelerator.gke.io/v1beta1/slices":
            return {"kind": "SliceList", "apiVersion": "accelerator.gke.io/v1beta1", "items": self.slices}
        return None

    def serve(self) -> tuple[ThreadingHTTPServer, str]:
        def record(request: fakes.Request) -> None:
            self.seen.append((request.path.rstrip("/") or "/", request.authorization))

        server = fakes.serve_api(fakes.replying(self.reply), TOKEN, record)
        return server, fakes.address(server)


def fake_auth_plugin(bin_dir: Path, record: Path) -> None:
    """A `gke-gcloud-auth-plugin` that records what it was given and prints an ExecCredential."""
    bin_dir.mkdir()
    script = bin_dir / "gke-gcloud-auth-plugin"
    script.write_text(
        f"#!{sys.executable}\nimport json, os, pathlib\n"
        f"pathlib.Path({str(record)!r}).write_text(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', 'kind': 'ExecCredential',"
        f" 'status': {{'token': {TOKEN!r}}}}}))\n"
    )
    script.chmod(0o755)


@dataclass
class Host:
    process: subprocess.Popen[bytes]
    stub: provider_pb2_grpc.ResourceProviderStub

    def delete(self, props: dict[str, Any]) -> None:
        self.stub.Delete(provider_pb2.DeleteRequest(id="c/p", urn="urn:pulumi:dev::p::t::n", properties=struct(props)))

    def diff(self, olds: dict[str, Any], news: dict[str, Any]) -> provider_pb2.DiffResponse:
        request = provider_pb2.DiffRequest(
            id="c/p", urn="urn:pulumi:dev::p::t::n", olds=struct(olds), news=struct(news)
        )
        return self.stub.Diff(request)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> list[str]:
        request = provider_pb2.CheckRequest(urn="urn:pulumi:dev::p::t::n", olds=struct(olds), news=struct(news))
        return [f.property for f in self.stub.Check(request).failures]


@pytest.fixture
def host_in(tmp_path: Path) -> Iterator[Any]:
    """Starts the dynamic provider host as the engine does, in a given directory, with a fake auth plugin."""
    started: list[Host] = []

    def start(cwd: Path, path: str | None = None, pythonpath: Path | None = None) -> Host:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PATH"] = path if path is not None else f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        if pythonpath is not None:
            env["PYTHONPATH"] = str(pythonpath)
        process = subprocess.Popen(
            [sys.executable, "-u", "-m", "pulumi.dynamic", "127.0.0.1:0"],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert process.stdout is not None
        port = int(process.stdout.readline())  # the engine reads the port the same way (plugin.go newPlugin)
        host = Host(process, provider_pb2_grpc.ResourceProviderStub(grpc.insecure_channel(f"127.0.0.1:{port}")))
        started.append(host)
        return host

    fake_auth_plugin(tmp_path / "bin", tmp_path / "exec-info.json")
    yield start
    for host in started:
        host.process.kill()
        host.process.wait()


@pytest.fixture
def api() -> Iterator[tuple[FakeApiServer, str]]:
    """A fake API server and its address."""
    fake = FakeApiServer()
    server, address = fake.serve()
    yield fake, address
    server.shutdown()


def gate_state(server: str, timeout: int) -> dict[str, Any]:
    config = json.loads(kubeconfig("c", "placeholder", None))
    config["clusters"][0]["cluster"]["server"] = f"http://{server}"  # the real user entry; plain HTTP to the fake
    return {
        "__provider": serialize_provider(SliceGateProvider()),
        "pool": POOL,
        "cluster": "c",
        "kubeconfig": json.dumps(config),
        "timeoutSeconds": timeout,
    }


def test_a_gates_delete_runs_in_pulumis_host_from_the_project_directory(host_in: Any, api: Any, tmp_path: Path) -> None:
    fake, address = api
    host = host_in(ROOT)
    with pytest.raises(grpc.RpcError) as err:
        host.delete(gate_state(address, timeout=0))
    details = err.value.details() or ""
    assert f"node pool {POOL}: 1 TPU Slice(s) still use its nodes" in details, details
    assert "wl-sub-abc (ACTIVE, workload ns/wl)" in details
    # The credential plugin was found on PATH, told the cluster (provideClusterInfo), not interactive.
    info = json.loads((tmp_path / "exec-info.json").read_text())
    assert info["spec"]["cluster"]["server"] == f"http://{address}" and info["spec"]["interactive"] is False
    assert {auth for _path, auth in fake.seen} == {f"Bearer {TOKEN}"}
    assert "/api/v1/nodes" in {path for path, _auth in fake.seen}
    fake.slices = []  # GKE has dismantled the Slice: the same delete now returns
    host.delete(gate_state(address, timeout=0))


def test_outside_the_project_directory_the_reference_does_not_import(host_in: Any, dev: Run, tmp_path: Path) -> None:
    """Why the engine's working directory matters: the providers are stored as references to this checkout,
    pickled as they always were (existing stacks unpickle them), importable elsewhere only on PYTHONPATH."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(grpc.RpcError) as err:
        host_in(elsewhere).delete(gate_state("127.0.0.1:9", timeout=0))
    assert "No module named 'components'" in (err.value.details() or "")
    (guard,) = dev.of_type("pulumi-python:dynamic/queues:ImmutableFields")
    pickled = serialize_provider(ImmutableFieldsProvider())
    assert b"exec" not in base64.b64decode(pickled) and b"components.kueue_guard" in base64.b64decode(pickled)
    news = {**unwrap(guard.inputs), "__provider": pickled}
    assert host_in(elsewhere, pythonpath=ROOT).check(news, news) == []
    with pytest.raises(grpc.RpcError) as err:
        host_in(elsewhere).check(news, news)
    assert "No module named 'components'" in (err.value.details() or "")


def _plugin_serialized(provider: Any) -> str:
    """`provider` pickled as in the plugin's process (its entry point calls carry_the_checkout)."""
    dynamic_host.carry_the_checkout()
    try:
        return serialize_provider(provider)
    finally:
        for cls in dynamic_host.PROVIDERS:  # the program's own pickling in this process stays as it is
            copyreg.dispatch_table.pop(cls, None)


@pytest.mark.parametrize(
    ("cls", "kind"),
    [
        (ImmutableFieldsProvider, "ImmutableFields"),
        (SliceGateProvider, "SliceGate"),
        (PoolReplacementsProvider, "PoolReplacements"),
    ],
)
def test_the_plugins_dynamic_providers_run_from_a_consumers_project_without_pythonpath(
    host_in: Any, dev: Run, tmp_path: Path, cls: type, kind: str
) -> None:
    """Pickled in the plugin's process, a provider carries its checkout: the host in the consumer's directory runs
    it with no PYTHONPATH (components/package/dynamic_host.py)."""
    registration = next(r for r in dev.registrations if r.type.endswith(f":{kind}"))
    news = {**unwrap(registration.inputs), "__provider": _plugin_serialized(cls())}
    assert host_in(tmp_path).check(news, news) == []


def test_the_guard_checks_on_the_wire_and_never_refuses_a_no_op(host_in: Any, dev: Run) -> None:
    """The engine's Check gets the old inputs from state (numbers as doubles after the protobuf round trip)."""
    (guard,) = dev.of_type("pulumi-python:dynamic/queues:ImmutableFields")
    news = {**unwrap(guard.inputs), "__provider": serialize_provider(ImmutableFieldsProvider())}
    assert news["queuedWorkloads"] > 0
    host = host_in(ROOT)
    assert host.check(news, news) == []  # the second `up`, nothing changed
    assert host.check({}, news) == []  # the first `up`
    fields = news["fields"]
    changed = {**news, "fields": {**fields, "LocalQueue.spec.clusterQueue": {**fields["LocalQueue.spec.clusterQueue"]}}}
    changed["fields"]["LocalQueue.spec.clusterQueue"]["value"] = "another-cq"
    assert host.check(news, changed) == ["LocalQueue.spec.clusterQueue"]


def test_a_pools_delete_first_replacement_reaches_its_gate_through_the_host(host_in: Any) -> None:
    """The engine asks each dependent's Diff with the inputs that reference the replaced pool computed
    (step_generator.go calculateDependentReplacements: `resource.MakeComputed`); on the wire that is the
    unknown sentinel, which the host turns into `rpc.UNKNOWN` (deserialize_properties(..., keep_unknowns=True))."""
    host = host_in(ROOT)
    state = gate_state("127.0.0.1:9", timeout=1200)
    same = host.diff(state, state)
    assert same.changes == provider_pb2.DiffResponse.DIFF_NONE and not same.replaces
    for key in ("pool", "cluster"):
        replaced = host.diff(state, {**state, key: rpc.UNKNOWN})
        assert list(replaced.replaces) == [key] and replaced.deleteBeforeReplace, key
    # The pool updated in place keeps its name and cluster: a new kubeconfig updates the gate, nothing is replaced.
    updated = host.diff(state, {**state, "kubeconfig": state["kubeconfig"].replace("127.0.0.1:9", "10.0.0.2")})
    assert updated.changes == provider_pb2.DiffResponse.DIFF_SOME and not updated.replaces


def test_without_the_credential_plugin_the_gate_says_so(host_in: Any, api: Any, tmp_path: Path) -> None:
    """The kubernetes client logs a failed credential plugin and carries on anonymously; the gate stops first."""
    fake, address = api
    (tmp_path / "bin" / "gke-gcloud-auth-plugin").unlink()
    path = str(tmp_path / "bin")  # nothing else: this machine may have the real plugin
    assert shutil.which("gke-gcloud-auth-plugin", path=path) is None
    with pytest.raises(grpc.RpcError) as err:
        host_in(ROOT, path).delete(gate_state(address, timeout=0))
    details = err.value.details() or ""
    assert "credential plugin gke-gcloud-auth-plugin gave no credential" in details, details
    assert "gcloud components install gke-gcloud-auth-plugin" in details  # the kubeconfig's installHint
    assert fake.seen == []  # nothing was asked anonymously
