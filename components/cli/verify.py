"""Post-deploy check of the serving stack: the codelab's verify script as a typed entry point.

With `--pool` (the stack's verifyCommand passes it), first waits until the InferencePool's leaders
are Ready (bounded by `--timeout`, one progress line on stderr per change; see cluster.py): a 397B
model takes far longer to load than any request retry would wait, and a leader is Ready only once
vLLM serves /v1/models. Then finds the Gateway's address (the official
`kubernetes` client, or `--address` when port-forwarding, which skips both cluster look-ups)
and POSTs one `/v1/completions` and one `/v1/chat/completions` request with the served model name,
retrying with bounded exponential backoff, and prints one line per request: status, attempts,
latency and the first tokens of the answer. Exit status: 0 when both succeed, 1 when either fails,
the leaders are not Ready in time or the Gateway has no address, 2 for usage errors (argparse).

Success, per the OpenAI API: HTTP 200 whose body is a JSON object with a non-empty `choices` list.

Retry policy (bounded by `attempts` and by `Backoff.max_delay` between attempts):

* retried: connection errors and timeouts, HTTP 5xx, 408, 425, 429, and 404, and a 200 whose body
  is not JSON or has no `choices`. Right after `pulumi up` the regional L7 load balancer answers
  404 until the HTTPRoute is programmed and 502/503 until the inference pool has ready endpoints,
  and a half-configured proxy can return an HTML 200, so all of these mean "not ready yet". vLLM
  also answers 404 for an unknown model name; that case fails after the bounded attempts, and the
  printed body excerpt names the cause.
* not retried: any other 4xx (400, 401, 403, 405, 413, 422, ...), redirects, and invalid URLs. The
  same request would fail the same way, so waiting minutes for it only hides the error.
* `Retry-After` (seconds) on a retried response lengthens the next delay, capped at `max_delay`.

No Pulumi imports: this runs from a shell (or a pod inside the VPC, since the `gke-l7-rilb`
address is internal) with `python -m components verify ...` or with `--stack-outputs`.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TextIO

import requests

from components.cli.cluster import (
    POLL_S,
    CustomObjects,
    GatewayNotReady,
    LeadersNotReady,
    NoKubeconfig,
    Pods,
    VerifyError,
    core_api,
    custom_objects_api,
    gateway_address,
    wait_for_leaders,
)
from components.cli.cluster import one_line as _one_line
from components.cli.probe_pod import PROBE_NAMESPACE, parse_log, pod_manifest, pod_name, request_json, run_probe_pod
from components.model.commands import verify_command as command

__all__ = [
    "GatewayNotReady",
    "LeadersNotReady",
    "VerifyError",
    "command",
    "gateway_address",
    "wait_for_leaders",
]

DEFAULT_GATEWAY_NAME = "llm-d-inference-gateway"

PROMPT = "How are you today?"
CHAT_MAX_TOKENS = 200
FIRST_TOKENS = 12

Kind = Literal["completions", "chat"]
KINDS: tuple[Kind, ...] = ("completions", "chat")
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}

RETRY_STATUSES = frozenset({404, 408, 425, 429})

# Keys of `pulumi stack output --json` that this entry point reads.
STACK_OUTPUT_KEYS = {
    "gateway_name": "gatewayName",
    "namespace": "gatewayNamespace",
    "model": "servedModelName",
    "pool": "inferencePool",
    "leaders": "servingLeaders",
    "credentials": "credentialsCommand",
}
DEFAULT_WAIT_S = 14400.0  # serving.startupTimeoutSeconds' default: the leaders' own startup budget


# ---------------------------------------------------------------------------------------------
# The HTTP probe


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
    if kind == "chat":
        return {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": CHAT_MAX_TOKENS}
    raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")


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
            except requests.Timeout as exc:
                status, latency_ms, retryable = None, None, True
                error = f"timeout: {_one_line(str(exc))}"
            except requests.ConnectionError as exc:  # includes read timeouts while reading the body
                status, latency_ms, retryable = None, None, True
                error = f"connection error: {_one_line(str(exc))}"
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
    try:
        payload = response.json()
    except ValueError:
        return "", f"HTTP 200 but the body is not JSON: {_one_line(response.text) or '(empty)'}", True
    choices = payload.get("choices") if isinstance(payload, Mapping) else None
    if not isinstance(choices, list) or not choices:
        return "", f"HTTP 200 but no non-empty 'choices' list: {_one_line(response.text)}", True
    return answer_text(payload), None, False


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


# ---------------------------------------------------------------------------------------------
# Command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components verify",
        description="POST one /v1/completions and one /v1/chat/completions request through the Gateway.",
    )
    parser.add_argument(
        "--stack-outputs",
        metavar="FILE",
        help="JSON from `pulumi stack output --json` ('-' for stdin); reads gatewayName, gatewayNamespace, "
        "servedModelName, inferencePool, servingLeaders. Explicit flags win.",
    )
    parser.add_argument("--gateway-name", help=f"Gateway name (default: {DEFAULT_GATEWAY_NAME})")
    parser.add_argument("--namespace", help="namespace of the Gateway")
    parser.add_argument("--model", help="served model name (vLLM --served-model-name)")
    parser.add_argument("--address", help="host[:port] to call instead of looking up the Gateway (port-forwarding)")
    parser.add_argument("--scheme", choices=("http", "https"), default="http")
    parser.add_argument("--port", type=int, help="port (default: the scheme's)")
    parser.add_argument(
        "--direct",
        action="store_true",
        help="send the requests from this machine to the Gateway's address (it is internal: only from the VPC or a "
        f"network connected to it); default: from a short-lived pod in the cluster's {PROBE_NAMESPACE!r} namespace",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument(
        "--credentials-command",
        metavar="COMMAND",
        help="the command that writes the cluster's kubeconfig context (the stack's credentialsCommand output), "
        "named when no usable kubeconfig is found",
    )
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")
    parser.add_argument(
        "--pool",
        help="InferencePool whose leaders must be Ready before the requests (default: no wait); "
        "needs the cluster, so not with --address",
    )
    parser.add_argument(
        "--leaders", type=_positive(int), help="how many leaders must be Ready (default: every pod the pool selects)"
    )
    parser.add_argument(
        "--timeout",
        type=_positive(float),
        default=DEFAULT_WAIT_S,
        help=f"longest wait for the leaders, seconds (default: {DEFAULT_WAIT_S:g}, the leaders' startup budget)",
    )
    parser.add_argument(
        "--poll", type=_positive(float), default=POLL_S, help=f"seconds between readiness checks (default: {POLL_S:g})"
    )
    parser.add_argument("--attempts", type=_positive(int), default=15, help="attempts per request (default: 15)")
    parser.add_argument(
        "--read-timeout", type=_positive(float), default=10.0, help="read timeout per attempt, seconds (default: 10)"
    )
    parser.add_argument(
        "--connect-timeout", type=_positive(float), default=5.0, help="connect timeout per attempt (default: 5)"
    )
    parser.add_argument(
        "--backoff", type=_positive(float), default=1.0, help="first retry delay, seconds; doubles (default: 1)"
    )
    parser.add_argument(
        "--max-delay", type=_positive(float), default=10.0, help="longest delay between attempts (default: 10)"
    )
    return parser


def _positive(kind: type[int] | type[float]) -> Callable[[str], Any]:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def read_stack_outputs(source: str, stdin: TextIO | None = None) -> dict[str, str]:
    """{gateway_name, namespace, model} found in `pulumi stack output --json` (a file, or '-' for stdin)."""
    try:
        if source == "-":
            data = json.load(stdin if stdin is not None else sys.stdin)
        else:
            with open(source, encoding="utf-8") as handle:
                data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise VerifyError(f"cannot read stack outputs {source!r}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise VerifyError(f"stack outputs {source!r}: expected a JSON object")
    found: dict[str, str] = {}
    for field, key in STACK_OUTPUT_KEYS.items():
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            value = str(value)
        if isinstance(value, str) and value:
            found[field] = value
    return found


def main(
    argv: Sequence[str] | None = None,
    *,
    api: CustomObjects | None = None,
    pods: Pods | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run the check; `argv` has no subcommand word. Returns 0 when both requests succeed, else 1.

    `api`/`pods` replace the cluster look-ups (`pods` a CoreV1Api: the leaders' pods and the probe pod), `sleep`
    the backoff and polling sleeps and `clock` the deadlines' clock (all for tests).
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        outputs = read_stack_outputs(args.stack_outputs) if args.stack_outputs else {}
    except VerifyError as exc:
        parser.error(str(exc))
    gateway_name = args.gateway_name or outputs.get("gateway_name") or DEFAULT_GATEWAY_NAME
    namespace = args.namespace or outputs.get("namespace")
    model = args.model or outputs.get("model")
    credentials = args.credentials_command or outputs.get("credentials")
    if not model:
        parser.error("--model (or servedModelName in --stack-outputs) is required")
    if not args.address and not namespace:
        parser.error("--namespace (or gatewayNamespace in --stack-outputs) is required unless --address is given")
    pool = args.pool or outputs.get("pool")
    leaders = args.leaders or (int(outputs["leaders"]) if "leaders" in outputs else None)
    if args.address and args.pool:
        parser.error("--pool needs the cluster; with --address, wait for the leaders yourself")
    if args.address and args.direct:
        parser.error("--direct looks up the Gateway; with --address the requests already go to that address")

    def error(exc: VerifyError) -> int:
        print(f"error: {exc}", file=sys.stderr)
        if isinstance(exc, NoKubeconfig):
            fix = credentials or "gcloud container clusters get-credentials CLUSTER --location REGION --project PROJECT"
            print(
                f"get the cluster's credentials first: {fix}\n(or pass --kubeconfig FILE, for example the stack's "
                "secret output: pulumi stack output kubeconfig --show-secrets > kubeconfig.yaml)",
                file=sys.stderr,
            )
        return 1

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    core: Any = pods
    if pool and not args.address:
        try:
            kube = api if api is not None else custom_objects_api(args.kubeconfig, args.context)
            core = core if core is not None else core_api(args.kubeconfig, args.context)
            wait_for_leaders(
                pool,
                namespace,
                api=kube,
                pods=core,
                expected=leaders,
                timeout=args.timeout,
                poll=args.poll,
                sleep=sleep,
                clock=clock,
                log=log,
            )
        except VerifyError as exc:
            return error(exc)

    in_cluster = not args.address and not args.direct
    if args.address:
        address = args.address
        print(f"target {base_url(address, args.scheme, args.port)} (--address) model={model}")
    else:
        try:
            kube = api if api is not None else custom_objects_api(args.kubeconfig, args.context)
            address = gateway_address(gateway_name, namespace, kube)
        except VerifyError as exc:
            return error(exc)
        where = f"from a pod in namespace {PROBE_NAMESPACE}" if in_cluster else "from this machine"
        print(
            f"target {base_url(address, args.scheme, args.port)} (Gateway {namespace}/{gateway_name}, {where}) "
            f"model={model}"
        )

    url = base_url(address, args.scheme, args.port)
    if in_cluster:
        try:
            core = core if core is not None else core_api(args.kubeconfig, args.context)
            results = pod_probe(core, url, model, args, sleep=sleep, clock=clock, log=log)
        except VerifyError as exc:
            return error(exc)
    else:
        results = local_probe(url, model, args, sleep=sleep)
    for result in results:
        print(result.line())
    return 0 if all(result.ok for result in results) else 1


def local_probe(url: str, model: str, args: argparse.Namespace, *, sleep: Callable[[float], None]) -> list[ProbeResult]:
    """Both requests from this process (`--address`, `--direct`)."""
    backoff = Backoff(initial=min(args.backoff, args.max_delay), max_delay=args.max_delay)
    results = []
    for kind in KINDS:

        def log(attempt: int, error: str, delay: float, kind: str = kind) -> None:
            print(f"{kind}: attempt {attempt}/{args.attempts} failed: {error}; retrying in {delay:g}s", file=sys.stderr)

        results.append(
            probe(
                url,
                model,
                kind,
                attempts=args.attempts,
                backoff=backoff,
                connect_timeout=args.connect_timeout,
                read_timeout=args.read_timeout,
                sleep=sleep,
                on_retry=log,
            )
        )
    return results


def pod_probe(
    core: Any,
    url: str,
    model: str,
    args: argparse.Namespace,
    *,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    log: Callable[[str], None],
) -> list[ProbeResult]:
    """Both requests from a pod in the cluster (components/cli/probe_pod.py), judged as `probe` judges them."""
    requests_ = [(kind, url.rstrip("/") + PATHS[kind], request_json(request_body(kind, model))) for kind in KINDS]
    manifest = pod_manifest(
        pod_name(),
        requests_,
        attempts=args.attempts,
        connect_timeout=args.connect_timeout,
        read_timeout=args.read_timeout,
        max_delay=args.max_delay,
    )
    answers = parse_log(run_probe_pod(core, manifest, sleep=sleep, clock=clock, log=log))
    results = []
    for kind, target, _ in requests_:
        answer = answers.get(kind)
        if answer is None:
            results.append(ProbeResult(kind, target, None, 0, None, "", "the probe pod printed no answer"))
            continue
        text, judged = judge(answer.status, answer.body)
        results.append(
            ProbeResult(kind, target, answer.status, answer.attempts, answer.latency_ms, first_tokens(text), judged)
        )
    return results


def judge(status: int | None, body: str) -> tuple[str, str | None]:
    """(answer text, error or None) of a status and body the probe pod saw: `_judge`'s rules without the retry."""
    if status is None:
        return "", f"no response: {_one_line(body) or '(nothing)'}"
    if status != 200:
        excerpt = _one_line(body)
        return "", f"HTTP {status}" + (f": {excerpt}" if excerpt else "")
    try:
        payload = json.loads(body)
    except ValueError:
        return "", f"HTTP 200 but the body is not JSON: {_one_line(body) or '(empty)'}"
    choices = payload.get("choices") if isinstance(payload, Mapping) else None
    if not isinstance(choices, list) or not choices:
        return "", f"HTTP 200 but no non-empty 'choices' list: {_one_line(body)}"
    return answer_text(payload), None


if __name__ == "__main__":
    sys.exit(main())
