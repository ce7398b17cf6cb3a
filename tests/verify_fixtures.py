"""What the verify tests share: a scripted OpenAI-compatible stub on 127.0.0.1 (port 0) and a fake cluster's
CustomObjectsApi; timeouts are ~0.2 s and backoff sleeps are recorded, not slept."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes.client.exceptions import ApiException

MODEL = "qwen3.5-397b"
COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
ANSWER = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
TWELVE = "one two three four five six seven eight nine ten eleven twelve ..."
READ_TIMEOUT = 0.2


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


def serve() -> Iterator[Stub]:
    """A stub serving until the test ends: the body of each module's `stub` fixture."""
    server = Stub()
    # A short poll interval keeps shutdown() (and so each test's teardown) fast.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


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


def argv(stub: Stub, *extra: str) -> list[str]:
    """The Gateway in namespace ns, reached from this machine at the stub's port."""
    return ["--namespace", "ns", "--model", MODEL, "--port", str(stub.port), "--direct", *extra]
