"""components.cli.verify against a scripted OpenAI-compatible stub on 127.0.0.1; the cluster is faked.

Every request goes to the stub (port 0 on the loopback); the Gateway look-up is an injected fake
CustomObjectsApi, never a cluster. Timeouts are ~0.2 s and backoff sleeps are recorded, not slept.
"""

from __future__ import annotations

import io
import json
import shlex
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta, V1Pod, V1PodCondition, V1PodList, V1PodStatus
from kubernetes.client.exceptions import ApiException

from components.cli import verify
from components.cli.verify import Backoff, GatewayNotReady, VerifyError
from components.cli.verify_reads import NoKubeconfig
from tests.fakes import Clock

MODEL = "qwen3.5-397b"
COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
ANSWER = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
TWELVE = "one two three four five six seven eight nine ten eleven twelve ..."
READ_TIMEOUT = 0.2


# ---------------------------------------------------------------------------------------------
# The stub server


@dataclass
class Step:
    """One scripted response; `delay` (seconds) is waited before answering."""

    status: int = 200
    body: bytes | dict[str, Any] | None = None  # None: a valid OpenAI answer for the path
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def ok_body(path: str) -> dict[str, Any]:
    if path == CHAT:
        choice = {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}
        return {"object": "chat.completion", "model": MODEL, "choices": [choice]}
    return {"object": "text_completion", "model": MODEL, "choices": [{"index": 0, "text": ANSWER}]}


class Handler(BaseHTTPRequestHandler):
    server: Stub

    def do_POST(self) -> None:
        received = Received(self.path, dict(self.headers.items()), self.rfile.read(int(self.headers["Content-Length"])))
        step = self.server.next_step(received)
        if step.delay and self.server.release.wait(step.delay):
            return  # torn down while waiting
        body = step.body if step.body is not None else ok_body(self.path)
        payload = json.dumps(body).encode() if isinstance(body, dict) else body
        try:
            self.send_response(step.status)
            headers = {"Content-Type": "application/json", "Content-Length": str(len(payload)), **step.headers}
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client gave up (timeout test)

    def log_message(self, *_args: object) -> None: ...


class Stub(ThreadingHTTPServer):
    """Answers each path from its script in order; the last step repeats; unscripted paths succeed."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.scripts: dict[str, list[Step]] = {}
        self.received: list[Received] = []
        self.release = threading.Event()  # set at teardown so delayed handlers stop waiting
        self.lock = threading.Lock()
        self.sleeps: list[float] = []  # handed over as `sleep=stub.sleeps.append`: recorded, not waited
        self.port = self.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def script(self, path: str, *steps: Step) -> None:
        self.scripts[path] = list(steps)

    def paths(self) -> list[str]:
        return [r.path for r in self.received]

    def next_step(self, received: Received) -> Step:
        with self.lock:
            self.received.append(received)
            steps = self.scripts.get(received.path) or [Step()]
            return steps.pop(0) if len(steps) > 1 else steps[0]


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    # A short poll interval keeps shutdown() (and so each test's teardown) fast.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def probe(stub: Stub, kind: str = "completions", **options: Any) -> verify.ProbeResult:
    return verify.probe(stub.url, MODEL, kind, sleep=stub.sleeps.append, **{"read_timeout": 2, **options})


# ---------------------------------------------------------------------------------------------
# A fake cluster


def gateway_with(address: str | None) -> dict[str, Any]:
    gateway: dict[str, Any] = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {}}
    if address is not None:
        gateway["status"] = {"addresses": [{"type": "IPAddress", "value": address}]}
    return gateway


class FakeCustomObjects:
    """The Gateway (at the stub's loopback address unless given) and the InferencePool, by plural; a missing one
    is a 404, and `error` is the answer to every read."""

    def __init__(self, gateway: Any = None, pool: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        self.objects = {"gateways": gateway_with("127.0.0.1") if gateway is None else gateway, "inferencepools": pool}
        self.error = error
        self.calls: list[tuple[str, ...]] = []
        self.opened: list[tuple[str | None, str | None]] = []  # (kubeconfig, context) of each factory call

    def get_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> Any:
        self.calls.append((group, version, namespace, plural, name))
        if self.error is not None:
            raise self.error
        if self.objects.get(plural) is None:
            raise ApiException(status=404, reason="Not Found")
        return self.objects[plural]


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCustomObjects:
    """What the api factory answers, recording the kubeconfig and context it was given."""
    api = FakeCustomObjects()

    def factory(kubeconfig: str | None = None, context: str | None = None) -> FakeCustomObjects:
        api.opened.append((kubeconfig, context))
        return api

    monkeypatch.setattr(verify, "custom_objects_api", factory)
    return api


# ---------------------------------------------------------------------------------------------
# probe


@pytest.mark.parametrize(
    ("kind", "path", "request_body"),
    [
        ("completions", COMPLETIONS, {"model": MODEL, "prompt": "How are you today?"}),
        (
            "chat",
            CHAT,
            {"model": MODEL, "messages": [{"role": "user", "content": "How are you today?"}], "max_tokens": 200},
        ),
    ],
)
def test_success_sends_the_codelab_request(stub: Stub, kind: str, path: str, request_body: dict[str, Any]) -> None:
    result = probe(stub, kind)

    assert result.ok and result.error is None
    assert (result.status, result.attempts, result.first_tokens) == (200, 1, TWELVE)
    assert result.url == stub.url + path
    assert result.latency_ms is not None and 0 < result.latency_ms < 2000
    assert stub.sleeps == []
    [request] = stub.received
    assert request.path == path
    assert request.headers["Content-Type"] == "application/json"
    assert request.json() == request_body
    assert "OK" in result.line() and json.dumps(TWELVE) in result.line()


def test_reasoning_answer_without_content_still_counts(stub: Stub) -> None:
    message = {"role": "assistant", "content": None, "reasoning_content": "Okay, the user asks how I am."}
    stub.script(CHAT, Step(body={"choices": [{"message": message}]}))

    result = probe(stub, "chat")

    assert result.ok and result.first_tokens == "Okay, the user asks how I am."


def test_5xx_then_success_retries_with_backoff(stub: Stub) -> None:
    stub.script(COMPLETIONS, Step(503, b"no healthy upstream"), Step())
    retries: list[tuple[int, str, float]] = []

    result = probe(
        stub, attempts=5, backoff=Backoff(initial=0.5, factor=2, max_delay=4), on_retry=lambda *a: retries.append(a)
    )

    assert result.ok and (result.status, result.attempts) == (200, 2)
    assert stub.sleeps == [0.5]
    assert retries == [(1, "HTTP 503 Service Unavailable: no healthy upstream", 0.5)]
    assert stub.paths() == [COMPLETIONS, COMPLETIONS]


# path -> its script, the probe's options, then (ok, status, attempts, error), the recorded sleeps.
SCRIPTED = {
    "bounded by attempts and max delay": (
        CHAT,
        [Step(502, b"upstream connect error")],
        {"attempts": 6, "backoff": Backoff(1, 2, 5)},
        (False, 502, 6, "HTTP 502 Bad Gateway: upstream connect error"),
        [1, 2, 4, 5, 5],  # no sleep after the last attempt
    ),
    "retry-after lengthens the delay up to the cap": (
        COMPLETIONS,
        [Step(429, headers={"Retry-After": "3"}), Step(429, headers={"Retry-After": "99"}), Step()],
        {"backoff": Backoff(1, 2, 8)},
        (True, 200, 3, None),
        [3, 8],
    ),
    "malformed json is a failure": (
        COMPLETIONS,
        [Step(body=b"<html>default backend - 200</html>")],
        {"attempts": 2},
        (False, 200, 2, "HTTP 200 but the body is not JSON: <html>default backend - 200</html>"),
        [1.0],
    ),
    "malformed json then success is retried": (
        CHAT,
        [Step(body=b'{"choices": [tru'), Step()],
        {"attempts": 3},
        (True, 200, 2, None),
        [1.0],
    ),
}


@pytest.mark.parametrize(("path", "steps", "options", "expected", "slept"), SCRIPTED.values(), ids=SCRIPTED.keys())
def test_retries_and_backoff(stub: Stub, path: str, steps: list, options: dict, expected: tuple, slept: list) -> None:
    stub.script(path, *steps)
    result = probe(stub, "chat" if path == CHAT else "completions", **options)
    assert (result.ok, result.status, result.attempts, result.error) == expected
    assert stub.sleeps == slept
    assert stub.paths() == [path] * result.attempts
    assert ("OK" if result.ok else "FAIL") in result.line()


@pytest.mark.parametrize(
    ("status", "retried"),
    [(400, False), (401, False), (403, False), (422, False), (404, True), (408, True), (429, True), (500, True)],
)
def test_which_statuses_are_retried(stub: Stub, status: int, retried: bool) -> None:
    stub.script(COMPLETIONS, Step(status, {"object": "error", "message": "nope"}))

    result = probe(stub, attempts=3, backoff=Backoff(0.1))

    assert not result.ok and result.status == status
    assert result.attempts == (3 if retried else 1)
    assert len(stub.sleeps) == (2 if retried else 0)
    assert result.error is not None and result.error.startswith(f"HTTP {status}") and "nope" in result.error


def test_timeout_fails_after_the_configured_attempts(stub: Stub) -> None:
    stub.script(COMPLETIONS, Step(delay=5))

    result = probe(stub, attempts=2, read_timeout=READ_TIMEOUT, connect_timeout=1)

    assert not result.ok
    assert (result.status, result.attempts, result.latency_ms) == (None, 2, None)
    assert result.error is not None and result.error.startswith("timeout")
    assert stub.sleeps == [1.0]
    assert len(stub.received) == 2


def test_connection_refused_is_retried_then_fails() -> None:
    sleeps: list[float] = []
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        port = closed.server_address[1]  # bound, then closed: nothing listens there any more

    result = verify.probe(f"http://127.0.0.1:{port}", MODEL, "chat", attempts=3, sleep=sleeps.append)

    assert not result.ok and (result.status, result.attempts) == (None, 3)
    assert result.error is not None and result.error.startswith("connection error")
    assert sleeps == [1.0, 2.0]


@pytest.mark.parametrize("body", [{"object": "list", "data": []}, {"choices": []}, {"choices": "x"}, [1, 2]])
def test_200_without_choices_is_a_failure(stub: Stub, body: Any) -> None:
    stub.script(COMPLETIONS, Step(body=json.dumps(body).encode()))

    result = probe(stub, attempts=2)

    assert not result.ok and result.status == 200 and result.attempts == 2
    assert result.error is not None and "no non-empty 'choices' list" in result.error


def test_probe_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        verify.probe("http://127.0.0.1:1", MODEL, "completions", attempts=0)
    with pytest.raises(ValueError):
        Backoff(initial=1, factor=0.5)


# ---------------------------------------------------------------------------------------------
# gateway_address


def test_gateway_address_reads_the_first_status_address() -> None:
    api = FakeCustomObjects(gateway_with("10.128.0.7"))

    assert verify.gateway_address("llm-d-inference-gateway", "llm-d-pd", api) == "10.128.0.7"
    assert api.calls == [("gateway.networking.k8s.io", "v1", "llm-d-pd", "gateways", "llm-d-inference-gateway")]


@pytest.mark.parametrize(
    "gateway",
    [
        gateway_with(None),
        {"status": {}},
        {"status": {"addresses": []}},
        {"status": {"addresses": [{"type": "IPAddress", "value": ""}]}},
        {"status": None},
    ],
)
def test_gateway_without_an_address_is_a_clear_error(gateway: dict[str, Any]) -> None:
    with pytest.raises(GatewayNotReady, match=r"Gateway ns/gw has no address yet"):
        verify.gateway_address("gw", "ns", FakeCustomObjects(gateway))


def test_missing_gateway_and_api_errors_are_clear() -> None:
    with pytest.raises(VerifyError, match=r"Gateway ns/gw not found") as missing:
        verify.gateway_address("gw", "ns", FakeCustomObjects(error=ApiException(status=404, reason="Not Found")))
    assert not isinstance(missing.value, GatewayNotReady)
    with pytest.raises(VerifyError, match=r"cannot read Gateway ns/gw: HTTP 403 Forbidden"):
        verify.gateway_address("gw", "ns", FakeCustomObjects(error=ApiException(status=403, reason="Forbidden")))


def test_unloadable_kubeconfig_is_a_verify_error(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(NoKubeconfig, match=f"no usable kubeconfig in {tmp_path / 'missing'}"):
        verify.custom_objects_api(kubeconfig=str(tmp_path / "missing"))


# ---------------------------------------------------------------------------------------------
# main


def main(stub: Stub, args: list[str]) -> int:
    return verify.main(args, sleep=stub.sleeps.append)


def argv(stub: Stub, *extra: str) -> list[str]:
    """The Gateway in namespace ns, reached from this machine at the stub's port."""
    return ["--namespace", "ns", "--model", MODEL, "--port", str(stub.port), "--direct", *extra]


def test_main_looks_up_the_gateway_and_checks_both_endpoints(
    stub: Stub, cluster: FakeCustomObjects, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(stub, [*argv(stub, "--gateway-name", "gw"), "--kubeconfig", "/tmp/kc", "--context", "ctx"]) == 0

    assert cluster.calls == [("gateway.networking.k8s.io", "v1", "ns", "gateways", "gw")]
    assert cluster.opened == [("/tmp/kc", "ctx")]
    assert stub.paths() == [COMPLETIONS, CHAT]
    assert [r.json()["model"] for r in stub.received] == [MODEL, MODEL]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"target {stub.url} (Gateway ns/gw, from this machine) model={MODEL}"
    assert lines[1].startswith("completions OK   status=200 attempts=1 latency_ms=")
    assert lines[2].startswith("chat        OK   status=200 attempts=1 latency_ms=")
    assert all(line.endswith(f"first_tokens={json.dumps(TWELVE)}") for line in lines[1:])


def test_main_reads_stack_outputs_from_a_file_or_stdin_and_flags_override_them(
    stub: Stub, cluster: FakeCustomObjects, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = tmp_path / "outputs.json"
    names = {"gatewayName": "llm-d-inference-gateway", "gatewayNamespace": "llm-d-pd", "servedModelName": "m/x"}
    outputs.write_text(json.dumps({**names, "clusterName": "c", "kubeconfig": "[secret]"}))
    assert main(stub, ["--stack-outputs", str(outputs), "--port", str(stub.port), "--direct"]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(names)))
    assert main(stub, ["--stack-outputs", "-", "--model", "from-flag", "--port", str(stub.port), "--direct"]) == 0

    assert cluster.calls == [("gateway.networking.k8s.io", "v1", "llm-d-pd", "gateways", "llm-d-inference-gateway")] * 2
    assert [r.json()["model"] for r in stub.received] == ["m/x", "m/x", "from-flag", "from-flag"]


def test_main_with_address_skips_the_cluster(stub: Stub, cluster: FakeCustomObjects) -> None:
    assert main(stub, ["--address", "127.0.0.1", "--port", str(stub.port), "--model", MODEL]) == 0
    assert (cluster.opened, cluster.calls) == ([], [])
    assert stub.paths() == [COMPLETIONS, CHAT]


@pytest.mark.usefixtures("cluster")
def test_main_timeout_exits_non_zero(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    stub.script(COMPLETIONS, Step(delay=5))
    stub.script(CHAT, Step(delay=5))
    timeouts = ["--attempts", "2", "--read-timeout", str(READ_TIMEOUT), "--connect-timeout", "1"]

    assert main(stub, argv(stub, *timeouts)) == 1

    out, err = capsys.readouterr()
    assert 'completions FAIL status=- attempts=2 latency_ms=- error="timeout' in out
    assert 'chat        FAIL status=- attempts=2 latency_ms=- error="timeout' in out
    assert "completions: attempt 1/2 failed: timeout" in err
    assert stub.sleeps == [1.0, 1.0]
    assert stub.paths() == [COMPLETIONS, COMPLETIONS, CHAT, CHAT]


@pytest.mark.parametrize(
    ("path", "body", "shown"),
    [
        (CHAT, b"not json", ["completions OK", "chat        FAIL status=200 attempts=2", "not JSON"]),
        (
            COMPLETIONS,
            b'{"id": "x", "object": "text_completion"}',
            ["chat        OK", "completions FAIL status=200 attempts=2", "no non-empty 'choices' list"],
        ),
    ],
)
@pytest.mark.usefixtures("cluster")
def test_main_malformed_answers_exit_non_zero(
    stub: Stub, capsys: pytest.CaptureFixture[str], path: str, body: bytes, shown: list[str]
) -> None:
    stub.script(path, Step(body=body))

    assert main(stub, argv(stub, "--attempts", "2")) == 1

    out = capsys.readouterr().out
    assert all(line in out for line in shown), out


def test_main_gateway_without_address_exits_non_zero(
    stub: Stub, cluster: FakeCustomObjects, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.objects["gateways"] = gateway_with(None)

    assert main(stub, ["--namespace", "ns", "--model", MODEL, "--port", str(stub.port)]) == 1

    assert "error: Gateway ns/llm-d-inference-gateway has no address yet" in capsys.readouterr().err
    assert stub.received == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--namespace", "ns"], "--model"),
        (["--model", MODEL], "--namespace"),
        (["--model", MODEL, "--namespace", "ns", "--attempts", "0"], "must be > 0"),
        (["--stack-outputs", "/nonexistent/outputs.json"], "cannot read stack outputs"),
        (["--address", "127.0.0.1", "--model", MODEL, "--pool", "pd"], "--pool needs the cluster"),
    ],
)
def test_main_usage_errors_exit_2(
    args: list[str], message: str, cluster: FakeCustomObjects, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        verify.main(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert (cluster.opened, cluster.calls) == ([], [])


# ---------------------------------------------------------------------------------------------
# Helpers


def test_command_is_shell_quoted() -> None:
    line = verify.command(
        "llm-d-inference-gateway", "llm-d-pd", "Qwen/Qwen3.5 397B; rm -rf /", pool="pd", leaders=8, timeout=14400
    )

    assert shlex.split(line) == [
        "python", "-m", "components", "verify",
        "--gateway-name", "llm-d-inference-gateway", "--namespace", "llm-d-pd",
        "--model", "Qwen/Qwen3.5 397B; rm -rf /",
        "--pool", "pd", "--leaders", "8", "--timeout", "14400",
    ]  # fmt: skip
    # and the command parses as this module's own arguments
    args = verify._parser().parse_args(shlex.split(line)[4:])
    assert (args.pool, args.leaders, args.timeout) == ("pd", 8, 14400.0)


def test_base_url() -> None:
    assert verify.base_url("10.0.0.5") == "http://10.0.0.5"
    assert verify.base_url("fd00::5", "https", 8443) == "https://[fd00::5]:8443"
    assert verify.base_url("gw.internal", port=80) == "http://gw.internal:80"


# ---------------------------------------------------------------------------------------------
# Waiting for the pool's leaders (a fake cluster: the InferencePool and the pods it selects)

SELECTOR = {"llm-d.ai/guide": "pd-disaggregation", "leaderworkerset.sigs.k8s.io/worker-index": "0"}
POOL = {
    "apiVersion": "inference.networking.k8s.io/v1",
    "kind": "InferencePool",
    "spec": {"selector": {"matchLabels": SELECTOR}},
}
LABEL_SELECTOR = "leaderworkerset.sigs.k8s.io/worker-index=0,llm-d.ai/guide=pd-disaggregation"


def pod(role: str, ready: bool) -> V1Pod:
    condition = V1PodCondition(type="Ready", status="True" if ready else "False")
    meta = V1ObjectMeta(name=f"{role}-0", labels={**SELECTOR, "llm-d.ai/role": role})
    return V1Pod(metadata=meta, status=V1PodStatus(conditions=[condition]))


class FakePods:
    """Answers each list with the next scripted pod list (the last one repeats)."""

    def __init__(self, *lists: list[V1Pod]) -> None:
        self.lists = list(lists)
        self.selectors: list[tuple[str, str]] = []

    def list_namespaced_pod(self, namespace: str, *, label_selector: str) -> V1PodList:
        self.selectors.append((namespace, label_selector))
        return V1PodList(items=self.lists.pop(0) if len(self.lists) > 1 else self.lists[0])


def waited(
    stub: Stub,
    extra: list[str],
    pods: FakePods,
    objects: FakeCustomObjects | None = None,
    base: list[str] | None = None,
) -> tuple[int, Clock]:
    """verify.main for pool pd against the fake pool and pods, on a fake clock: its exit code and the clock."""
    clock = Clock(1000.0)  # time.monotonic starts anywhere, not at 0
    args = argv(stub, "--pool", "pd", *extra) if base is None else base
    code = verify.main(args, api=objects or FakeCustomObjects(pool=POOL), pods=pods, sleep=clock.sleep, clock=clock)
    return code, clock


def test_main_waits_for_the_leaders_then_sends_the_requests(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    objects = FakeCustomObjects(pool=POOL)
    pods = FakePods(
        [pod("prefill", False), pod("decode", False)],
        [pod("prefill", True), pod("decode", False)],
        [pod("prefill", True), pod("decode", False)],
        [pod("prefill", True), pod("decode", True)],
    )
    code, clock = waited(stub, ["--leaders", "2", "--poll", "60", "--timeout", "3600"], pods, objects)

    assert code == 0
    assert objects.calls[0] == ("inference.networking.k8s.io", "v1", "ns", "inferencepools", "pd")
    assert pods.selectors[0] == ("ns", LABEL_SELECTOR)  # the pool's own selector, as a label selector string
    assert clock.sleeps == [60, 60, 60]
    progress = [line for line in capsys.readouterr().err.splitlines() if line.startswith("leaders ready")]
    assert progress == [  # one line per change, not per poll
        f"leaders ready: 0/2 (decode 0/1, prefill 0/1); waiting up to 3600s more (selector {LABEL_SELECTOR})",
        f"leaders ready: 1/2 (decode 0/1, prefill 1/1); waiting up to 3540s more (selector {LABEL_SELECTOR})",
        "leaders ready: 2/2 (decode 1/1, prefill 1/1): all Ready",
    ]
    assert stub.paths() == [COMPLETIONS, CHAT]  # only after the leaders were ready


def test_main_gives_up_after_the_timeout_without_sending_requests(
    stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    code, clock = waited(
        stub, ["--timeout", "100", "--poll", "30"], FakePods([pod("prefill", True), pod("decode", False)])
    )

    assert code == 1
    assert clock.sleeps == [30, 30, 30, 10]  # bounded by the timeout, not a whole poll past it
    err = capsys.readouterr().err
    assert "error: InferencePool ns/pd: leaders ready: 1/2 (decode 0/1, prefill 1/1) after 100s" in err
    assert stub.received == []


@pytest.mark.parametrize(
    ("leaders", "pods"),
    [
        (["--leaders", "8"], [pod("prefill", True), pod("decode", True)]),  # Kueue admits groups one by one
        ([], []),  # an empty pool is not ready
    ],
)
def test_leaders_that_do_not_exist_yet_keep_it_waiting(stub: Stub, leaders: list[str], pods: list[V1Pod]) -> None:
    code, _ = waited(stub, ["--timeout", "60", "--poll", "30", *leaders], FakePods(pods))
    assert code == 1 and stub.received == []


def test_a_missing_pool_is_a_clear_error(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    code, clock = waited(stub, [], FakePods([]), FakeCustomObjects())
    assert code == 1
    assert "error: InferencePool ns/pd not found (inference.networking.k8s.io/v1)" in capsys.readouterr().err
    assert clock.sleeps == [] and stub.received == []


def test_stack_outputs_name_the_pool_and_the_leader_count(stub: Stub, tmp_path: Any) -> None:
    outputs = tmp_path / "outputs.json"
    names = {"gatewayName": "gw", "gatewayNamespace": "ns", "servedModelName": MODEL, "inferencePool": "pd"}
    outputs.write_text(json.dumps({**names, "servingLeaders": 2}))
    objects, pods = FakeCustomObjects(pool=POOL), FakePods([pod("prefill", True), pod("decode", True)])
    code, _ = waited(
        stub, [], pods, objects, base=["--stack-outputs", str(outputs), "--port", str(stub.port), "--direct"]
    )

    assert code == 0
    assert objects.calls[0][3:] == ("inferencepools", "pd") and pods.selectors
    assert verify.read_stack_outputs(str(outputs))["leaders"] == "2"
