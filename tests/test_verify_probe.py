"""verify.probe against the scripted stub: the codelab's two requests, which answers are retried, the backoff
between attempts, timeouts, refused connections and malformed answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from components.cli import verify
from components.cli.verify import Backoff
from tests.verify_fixtures import CHAT, COMPLETIONS, MODEL, READ_TIMEOUT, TWELVE, Step, Stub, serve


@pytest.fixture
def stub() -> Iterator[Stub]:
    yield from serve()


def probe(stub: Stub, kind: str = "completions", **options: Any) -> verify.ProbeResult:
    return verify.probe(stub.url, MODEL, kind, sleep=stub.sleeps.append, **{"read_timeout": 2, **options})


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
