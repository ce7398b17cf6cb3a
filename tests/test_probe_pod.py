"""`verify` from anywhere kubectl works: the requests go out from a short-lived pod inside the cluster.

The official `kubernetes` client talks to a fake API server on 127.0.0.1 (a kubeconfig with a bearer token,
tests/fakes.py): the Gateway read, the pod's create, reads, log and delete, each request recorded. The pod's
own script runs in /bin/sh with a fake `curl` (and `sleep`) on PATH, so its retries and the log it prints are
tested as the container would run them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from components.cli import probe_pod, verify
from components.model.commands import credentials_command
from tests import fakes
from tests.fakes import Clock
from tests.harness import Run, ok
from tests.schema_checks import validate_builtin
from tests.stack_config import ROOT

TOKEN = "fake-token"
MODEL = "qwen3.5-397b"
GATEWAY_IP = "10.128.0.42"
GATEWAY = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "Gateway",
    "metadata": {"name": "gw", "namespace": "ns"},
    "status": {"addresses": [{"type": "IPAddress", "value": GATEWAY_IP}]},
}


def answer(kind: str, status: int, body: Any, attempts: int = 1) -> str:
    text = body if isinstance(body, str) else json.dumps(body)
    head = f"{probe_pod.MARK} kind={kind} attempts={attempts} status={status} seconds=0.250"
    return f"{head}\n{text}\n{probe_pod.MARK} end\n"


OK_LOG = answer("completions", 200, {"choices": [{"text": "I am fine, thank you"}]}) + answer(
    "chat", 200, {"choices": [{"message": {"content": "Doing well"}}]}, attempts=3
)


@dataclass
class FakeApiServer:
    """The Gateway, and one pod: its phases in order (the last repeats), its log."""

    phases: list[str] = field(default_factory=lambda: ["Pending", "Running", "Succeeded"])
    log: str = OK_LOG
    refuse_create: int | None = None
    seen: list[tuple[str, str]] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    url: str = ""  # where it listens, once served

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        self.seen.append((method, path))
        if path == "/apis/gateway.networking.k8s.io/v1/namespaces/ns/gateways/gw" and method == "GET":
            return 200, GATEWAY
        pods = f"/api/v1/namespaces/{probe_pod.PROBE_NAMESPACE}/pods"
        if path == pods and method == "POST":
            if self.refuse_create:
                return self.refuse_create, {"kind": "Status", "code": self.refuse_create, "reason": "Forbidden"}
            self.created.append(json.loads(body))
            return 201, self.created[-1]
        name = self.created[-1]["metadata"]["name"] if self.created else "?"
        if path == f"{pods}/{name}" and method == "GET":
            phase = self.phases.pop(0) if len(self.phases) > 1 else self.phases[0]
            return 200, {**self.created[-1], "status": {"phase": phase}}
        if path == f"{pods}/{name}/log" and method == "GET":
            return 200, self.log
        if path == f"{pods}/{name}" and method == "DELETE":
            self.deleted.append(name)  # the API server answers a pod's DELETE with the pod (ReturnDeletedObject)
            return 200, {**self.created[-1], "status": {"phase": "Succeeded"}}
        return 404, {"kind": "Status", "code": 404}

    def serve(self) -> ThreadingHTTPServer:
        return fakes.serve_api(lambda request: self.handle(request.method, request.path, request.body), TOKEN)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    fake = FakeApiServer()
    server = fake.serve()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    server.shutdown()


@pytest.fixture
def no_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Outside a cluster, with KUBECONFIG naming a file that does not exist."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    return tmp_path / "none"


def verify_via(api: FakeApiServer, tmp_path: Path, *extra: str) -> tuple[int, Clock]:
    """verify against the fake API server's Gateway ns/gw, on a fake clock: its exit code and the clock."""
    clock = Clock()
    kubeconfig = fakes.write_kubeconfig(tmp_path / "kubeconfig", api.url, TOKEN, context="ctx")
    argv = ["--namespace", "ns", "--gateway-name", "gw", "--model", MODEL, "--kubeconfig", str(kubeconfig), *extra]
    return verify.main(argv, sleep=clock.sleep, clock=clock), clock


def test_requests_go_out_from_a_pod_whose_log_is_the_answer(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, clock = verify_via(api, tmp_path)

    out, err = capsys.readouterr()
    assert code == 0, (out, err)
    (pod,) = api.created
    assert api.deleted == [pod["metadata"]["name"]] and "could not delete" not in err
    # the pod runs the image pinned by exact tag, POSTs both bodies to the Gateway's own address
    (container,) = pod["spec"]["containers"]
    assert container["image"] == probe_pod.CURL_IMAGE
    args = container["command"][4:]
    assert args[0::3] == ["completions", "chat"]
    assert args[1::3] == [f"http://{GATEWAY_IP}/v1/completions", f"http://{GATEWAY_IP}/v1/chat/completions"]
    assert [json.loads(a)["model"] for a in args[2::3]] == [MODEL, MODEL]
    lines = out.splitlines()
    assert lines[0] == f"target http://{GATEWAY_IP} (Gateway ns/gw, from a pod in namespace default) model={MODEL}"
    assert lines[1].startswith("completions OK   status=200 attempts=1 latency_ms=250 ")
    assert lines[1].endswith('first_tokens="I am fine, thank you"')
    assert lines[2].startswith("chat        OK   status=200 attempts=3 ")
    assert clock.sleeps  # polled until Succeeded
    methods = [m for m, _ in api.seen]
    assert methods.index("DELETE") > max(i for i, (m, p) in enumerate(api.seen) if p.endswith("/log"))


def test_the_pod_passes_conformance_and_is_locked_down() -> None:
    requests = [
        ("completions", "http://10.0.0.1/v1/completions", "{}"),
        ("chat", "http://10.0.0.1/v1/chat/completions", "{}"),
    ]
    pod = probe_pod.pod_manifest(
        "gke-tpu-slicing-verify-0a1b2c3d", requests, attempts=15, connect_timeout=5, read_timeout=10, max_delay=10
    )

    assert validate_builtin(pod) == []
    # pinned: an exact version tag (or a digest), never a floating one
    assert re.fullmatch(
        r"docker\.io/curlimages/curl(:\d+\.\d+\.\d+|@sha256:[0-9a-f]{64})", pod["spec"]["containers"][0]["image"]
    )
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    # bounded: every attempt of both requests at its longest, plus the image pull
    assert spec["activeDeadlineSeconds"] == probe_pod.PULL_MARGIN_S + 2 * 15 * (15 + 10)
    security = spec["containers"][0]["securityContext"]
    assert security == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert spec["securityContext"]["runAsNonRoot"] is True
    # no TPU toleration: it lands on a system node; no queue label: Kueue never manages it
    assert "tolerations" not in spec and not any("kueue" in k for k in pod["metadata"]["labels"])
    # outside the workload namespace, which the fail-closed Kueue webhooks select
    assert pod["metadata"]["namespace"] == "default"


def test_a_pod_that_never_ends_is_bounded_and_still_deleted(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.phases = ["Pending"]  # e.g. the image cannot be pulled
    code, clock = verify_via(api, tmp_path, "--attempts", "1")

    assert code == 1
    (pod,) = api.created
    assert api.deleted == [pod["metadata"]["name"]]
    limit = pod["spec"]["activeDeadlineSeconds"] + 60
    assert f"still Pending after {limit}s" in capsys.readouterr().err
    assert limit <= clock.now < limit + 3


def test_a_failed_answer_fails_verify(api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api.log = answer("completions", 404, "no route", attempts=15) + answer("chat", 200, "<html>proxy</html>")
    code, _ = verify_via(api, tmp_path)

    out = capsys.readouterr().out
    assert code == 1
    assert 'completions FAIL status=404 attempts=15 latency_ms=250 error="HTTP 404: no route"' in out
    assert "chat        FAIL status=200 attempts=1" in out and "not JSON" in out
    assert len(api.deleted) == 1


def test_a_refused_create_is_named(api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api.refuse_create = 403
    code, _ = verify_via(api, tmp_path)

    assert code == 1
    err = capsys.readouterr().err
    assert "cannot create the probe pod default/gke-tpu-slicing-verify-" in err and "HTTP 403" in err
    assert api.deleted == []  # nothing was created


def test_without_a_kubeconfig_verify_names_the_stacks_get_credentials_command(
    no_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fix = credentials_command(
        "qwen-serving-cluster", "us-central1", "my-project", dns_endpoint=True, private_endpoint=True
    )
    line = verify.command("gw", "ns", MODEL, pool="pd", leaders=8, timeout=60, credentials=fix)

    code = verify.main(shlex.split(line)[4:], sleep=lambda _s: None)

    err = capsys.readouterr().err
    assert code == 1
    assert f"no usable kubeconfig in {no_kubeconfig}" in err
    assert f"get the cluster's credentials first: {fix}\n" in err
    assert fix.endswith(
        "get-credentials qwen-serving-cluster --location us-central1 --project my-project --dns-endpoint"
    )
    assert "pulumi stack output kubeconfig --show-secrets" in err


def test_without_the_stacks_command_verify_points_at_it(
    no_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Flags typed by hand name no credentials command: the hint is the stack's own (its endpoint flag included),
    not a bare get-credentials, which targets the IP endpoint (private in dev) instead of the DNS-based one."""
    assert verify.main(["--namespace", "ns", "--model", MODEL], sleep=lambda _s: None) == 1
    err = capsys.readouterr().err
    assert 'get the cluster\'s credentials first: eval "$(pulumi stack output credentialsCommand)"\n' in err


# ---------------------------------------------------------------------------------------------
# The pod's script, in /bin/sh with a fake curl

POSIX = pytest.mark.skipif(
    shutil.which("sh") is None or shutil.which("sed") is None, reason="needs a POSIX shell and sed"
)


def run_script(
    tmp_path: Path, replies: list[tuple[str, str]], attempts: int = 3, script: str | None = None
) -> tuple[str, list[str]]:
    """Runs the pod's script (or `script`) with a `curl` answering `replies` in order ((body, "CODE SECONDS"));
    returns its stdout and the URLs curl was called with. `sleep` records its argument in tmp_path/sleeps."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    (bin_dir / "curl").write_text(
        f"#!{sys.executable}\nimport json, pathlib, sys\n"
        f"state = pathlib.Path({str(tmp_path / 'n')!r}); n = int(state.read_text()) if state.exists() else 0\n"
        "state.write_text(str(n + 1))\n"
        f"body, tail = json.loads(pathlib.Path({str(tmp_path / 'replies.json')!r}).read_text())[n]\n"
        f"with open({str(tmp_path / 'calls')!r}, 'a') as f: f.write(sys.argv[-1] + '\\n')\n"
        "sys.stdout.write(body + '\\n' + tail)\n"
    )
    (bin_dir / "sleep").write_text(f'#!/bin/sh\necho "$1" >> {shlex.quote(str(tmp_path / "sleeps"))}\n')
    for tool in ("curl", "sleep"):
        (bin_dir / tool).chmod(0o755)
    script = script if script is not None else probe_pod.pod_script(attempts, 5, 10, 4)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    args = ["completions", "http://gw/v1/completions", '{"model":"m"}', "chat", "http://gw/v1/chat/completions", "{}"]
    done = subprocess.run(
        ["/bin/sh", "-c", script, "verify", *args], env=env, capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout, (tmp_path / "calls").read_text().split()


@POSIX
def test_the_script_retries_not_ready_answers_and_stops_on_others(tmp_path: Path) -> None:
    replies = [
        ("curl: (7) Failed to connect", "000 0.001"),  # no response yet: retried
        ("<html>503</html>", "503 0.010"),  # pool without endpoints: retried
        ('{"choices": [{"text": "hi there"}]}', "200 1.500"),
        ('{"error": "bad request"}', "400 0.020"),  # a client error: not retried
    ]

    out, calls = run_script(tmp_path, replies)

    answers = probe_pod.parse_log(out)
    assert answers["completions"] == probe_pod.PodAnswer(
        "completions", 3, 200, 1500.0, '{"choices": [{"text": "hi there"}]}'
    )
    assert answers["chat"] == probe_pod.PodAnswer("chat", 1, 400, 20.0, '{"error": "bad request"}')
    assert calls == ["http://gw/v1/completions"] * 3 + ["http://gw/v1/chat/completions"]


@POSIX
def test_the_script_gives_up_after_its_attempts(tmp_path: Path) -> None:
    replies = [("curl: (28) timed out", "000 15.0")] * 2 + [("multi\nline body", "404 0.1")] * 2

    out, calls = run_script(tmp_path, replies, attempts=2)

    answers = probe_pod.parse_log(out)
    assert answers["completions"].attempts == 2 and answers["completions"].status is None
    assert answers["completions"].latency_ms is None
    assert answers["chat"] == probe_pod.PodAnswer("chat", 2, 404, 100.0, "multi\nline body")
    assert len(calls) == 4


@POSIX
def test_verify_backoff_and_max_delay_space_the_pods_retries(api: FakeApiServer, tmp_path: Path) -> None:
    """`--backoff` is the first retry's delay wherever the requests go out from, not only with `--direct`."""
    assert verify_via(api, tmp_path, "--backoff", "4", "--max-delay", "6", "--attempts", "4")[0] == 0
    script = api.created[-1]["spec"]["containers"][0]["command"][2]
    replies = [("<html>503</html>", "503 0.1")] * 4 + [('{"error": "bad"}', "400 0.1")]

    out, calls = run_script(tmp_path, replies, script=script)

    assert (tmp_path / "sleeps").read_text().split() == ["4", "6", "6"]  # then the 4th attempt fails: no sleep
    assert probe_pod.parse_log(out)["completions"].attempts == 4 and len(calls) == 5


# ---------------------------------------------------------------------------------------------
# docs/serving.md shows what the dev stack prints, and a first request that is the verify request


def serving_page() -> str:
    return (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")


def test_the_pages_verify_command_is_the_dev_stacks_output() -> None:
    run = ok({"gcp:project": "my-project"})
    block = re.search(r"```bash\n(python -m components verify .*?)\n```", serving_page(), re.S)
    assert block, "docs/serving.md: the verifyCommand block is missing"
    assert shlex.split(block.group(1).replace("\\\n", " ")) == shlex.split(run.outputs["verifyCommand"])
    assert f"get the cluster's credentials first: {run.outputs['credentialsCommand']}\n" in serving_page()


def test_the_pages_first_request_is_the_verify_request_to_the_dev_gateway(dev: Run) -> None:
    block = re.search(r"```bash\n(kubectl run first-request .*?)\n```", serving_page(), re.S)
    assert block, "docs/serving.md: the first request by hand is missing"
    words = shlex.split(block.group(1).replace("\\\n", " "))
    assert f"--image={probe_pod.CURL_IMAGE}" in words and "--rm" in words and "-n" in words
    outputs = dev.outputs
    url = words[words.index("--max-time") + 2]
    lookup = f"kubectl get gateway {outputs['gatewayName']} -n {outputs['gatewayNamespace']}"
    assert url.startswith(f"http://$({lookup}") and url.endswith("/v1/chat/completions"), url
    body = json.loads(words[words.index("-d") + 1])
    assert body == verify.request_body("chat", outputs["servedModelName"])


def test_verify_reads_the_credentials_command_from_the_stack_outputs(
    tmp_path: Path, no_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = tmp_path / "outputs.json"
    fix = "gcloud container clusters get-credentials c --location r --project p --dns-endpoint"
    outputs.write_text(json.dumps({"gatewayNamespace": "ns", "servedModelName": MODEL, "credentialsCommand": fix}))

    assert verify.main(["--stack-outputs", str(outputs)], sleep=lambda _s: None) == 1
    assert f"get the cluster's credentials first: {fix}\n" in capsys.readouterr().err
