"""The HTTP probe of `verify`: one OpenAI request to the Gateway, retried, and how an answer is judged.

Success, per the OpenAI API: HTTP 200 whose body is a JSON object with a non-empty `choices` list. Retried (up to
`attempts`, at most `Backoff.max_delay` apart; a `Retry-After` in seconds lengthens the next delay, capped there):
connection errors and timeouts, HTTP 5xx, 408, 425, 429 and 404, and a 200 that is not JSON or has no `choices`.
Right after `pulumi up` the regional L7 load balancer answers 404 until the HTTPRoute is programmed and 502/503
until the inference pool has ready endpoints, and a half-configured proxy can return an HTML 200: all mean "not
ready yet" (vLLM's 404 for an unknown model name fails after the bounded attempts, its body excerpt naming the
cause). Not retried: any other 4xx, redirects and invalid URLs; the same request would fail the same way, so
waiting minutes for it only hides the error. `judge` applies the same rules to what the probe pod saw.
"""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import requests

from components.cli.verify_reads import one_line as _one_line

PROMPT = "How are you today?"
CHAT_MAX_TOKENS = 200
FIRST_TOKENS = 12

Kind = Literal["completions", "chat"]
KINDS: tuple[Kind, ...] = ("completions", "chat")
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}

RETRY_STATUSES = frozenset({404, 408, 425, 429})


@dataclass(frozen=True)
class Backoff:
    """Delay before retry n (1-based): min(max_delay, initial * factor ** (n - 1))."""

    initial: float = 1.0
    factor: float = 2.0
    max_delay: float = 10.0

    def __post_init__(self) -> None:
        if self.initial < 0 or self.factor < 1 or self.max_delay < 0:
            raise ValueError("backoff needs initial >= 0, factor >= 1, max_delay >= 0")

    def delay(self, retry: int) -> float:
        return min(self.max_delay, self.initial * self.factor ** max(0, retry - 1))


@dataclass(frozen=True)
class ProbeResult:
    kind: str
    url: str
    status: int | None  # HTTP status of the last attempt; None when no response arrived
    attempts: int
    latency_ms: float | None  # of the last attempt; None when it got no response (timeout, refused)
    first_tokens: str  # the first FIRST_TOKENS whitespace-separated tokens of the answer
    error: str | None = None  # None exactly when the probe succeeded

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        latency = "-" if self.latency_ms is None else f"{self.latency_ms:.0f}"
        status = "-" if self.status is None else str(self.status)
        head = f"{self.kind:<11} {'OK' if self.ok else 'FAIL':<4} status={status} attempts={self.attempts} "
        head += f"latency_ms={latency}"
        if self.ok:
            return f"{head} first_tokens={json.dumps(self.first_tokens, ensure_ascii=False)}"
        return f"{head} error={json.dumps(self.error, ensure_ascii=False)}"


def request_body(kind: Kind, model: str) -> dict[str, Any]:
    """The codelab's request bodies."""
    if kind == "completions":
        return {"model": model, "prompt": PROMPT}
    return {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": CHAT_MAX_TOKENS}


def answer_text(payload: Mapping[str, Any]) -> str:
    """The answer of choices[0]: `text` (completions) or `message.content` (chat).

    Falls back to `message.reasoning_content`/`reasoning` because a reasoning model can spend all of
    `max_tokens` thinking and return `content: null`, which is still a served answer.
    """
    choice = payload["choices"][0]
    if not isinstance(choice, Mapping):
        return ""
    text = choice.get("text")
    message = choice.get("message")
    if not isinstance(text, str) and isinstance(message, Mapping):
        text = message.get("content") or message.get("reasoning_content") or message.get("reasoning")
    return text if isinstance(text, str) else ""


def first_tokens(text: str, n: int = FIRST_TOKENS) -> str:
    words = text.split()
    return " ".join(words[:n]) + (" ..." if len(words) > n else "")


def probe(
    base_url: str,
    model: str,
    kind: Kind,
    *,
    attempts: int = 15,
    backoff: Backoff = Backoff(),  # frozen, so a shared default is safe
    connect_timeout: float = 5.0,
    read_timeout: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
    session: requests.Session | None = None,
    on_retry: Callable[[int, str, float], None] | None = None,
) -> ProbeResult:
    """POST one OpenAI request to `base_url` until it succeeds or `attempts` are used up.

    `read_timeout` bounds each socket read (as `requests` does), not the whole response.
    `on_retry(attempt, error, delay)` is called before each sleep, e.g. to log progress.
    """
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    url = base_url.rstrip("/") + PATHS[kind]
    body = request_body(kind, model)
    own_session = session is None
    http = session if session is not None else _session()
    status: int | None = None
    latency_ms: float | None = None
    error = "no attempt made"
    try:
        for attempt in range(1, attempts + 1):
            started = time.perf_counter()
            retry_after: float | None = None
            try:
                response = http.post(
                    url,
                    json=body,
                    headers={"Content-Type": "application/json", "Accept": "application/json"},
                    timeout=(connect_timeout, read_timeout),
                    allow_redirects=False,
                )
            except (requests.Timeout, requests.ConnectionError) as exc:  # the latter: also read timeouts in the body
                status, latency_ms, retryable = None, None, True
                error = (
                    f"{'timeout' if isinstance(exc, requests.Timeout) else 'connection error'}: {_one_line(str(exc))}"
                )
            except requests.RequestException as exc:  # invalid URL and the like: retrying cannot help
                return ProbeResult(kind, url, None, attempt, None, "", f"{type(exc).__name__}: {_one_line(str(exc))}")
            else:
                latency_ms = (time.perf_counter() - started) * 1000
                status = response.status_code
                text, judged, retryable = _judge(response)
                if judged is None:
                    return ProbeResult(kind, url, status, attempt, latency_ms, first_tokens(text))
                error = judged
                retry_after = _retry_after(response.headers.get("Retry-After"))
            if not retryable or attempt == attempts:
                break
            delay = backoff.delay(attempt)
            if retry_after is not None:
                delay = min(backoff.max_delay, max(delay, retry_after))
            if on_retry is not None:
                on_retry(attempt, error, delay)
            sleep(delay)
    finally:
        if own_session:
            http.close()
    return ProbeResult(kind, url, status, attempt, latency_ms, "", error)


def _judge(response: requests.Response) -> tuple[str, str | None, bool]:
    """(answer text, error or None, retryable) of one response."""
    status = response.status_code
    if status != 200:
        retryable = status >= 500 or status in RETRY_STATUSES
        reason = f" {response.reason}" if response.reason else ""
        excerpt = _one_line(response.text)
        return "", f"HTTP {status}{reason}" + (f": {excerpt}" if excerpt else ""), retryable
    text, error = _answer(response.json, response.text)
    return text, error, error is not None  # a 200 without an answer: a half-configured proxy, retried


def _answer(payload_of: Callable[[], Any], body: str) -> tuple[str, str | None]:
    """(answer text, error or None) of an HTTP 200 body: a JSON object with a non-empty `choices` list."""
    try:
        payload = payload_of()
    except ValueError:
        return "", f"HTTP 200 but the body is not JSON: {_one_line(body) or '(empty)'}"
    choices = payload.get("choices") if isinstance(payload, Mapping) else None
    if not isinstance(choices, list) or not choices:
        return "", f"HTTP 200 but no non-empty 'choices' list: {_one_line(body)}"
    return answer_text(payload), None


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:  # an HTTP date: ignore, the backoff still applies
        return None
    return seconds if seconds is not None and seconds >= 0 else None


def _session() -> requests.Session:
    session = requests.Session()
    # The Gateway is an internal address: proxies and .netrc from the environment would only misroute
    # the request or attach credentials it does not need.
    session.trust_env = False
    return session


def base_url(address: str, scheme: str = "http", port: int | None = None) -> str:
    """`scheme://address[:port]`, bracketing a bare IPv6 address."""
    host = address.strip()
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass  # a hostname, an IPv4 address or host:port
    return f"{scheme}://{host}" + (f":{port}" if port is not None else "")


def judge(status: int | None, body: str) -> tuple[str, str | None]:
    """(answer text, error or None) of a status and body the probe pod saw: `_judge`'s rules without the retry."""
    if status is None:
        return "", f"no response: {_one_line(body) or '(nothing)'}"
    if status != 200:
        excerpt = _one_line(body)
        return "", f"HTTP {status}" + (f": {excerpt}" if excerpt else "")
    return _answer(lambda: json.loads(body), body)
