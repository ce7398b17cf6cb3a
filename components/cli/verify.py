"""Post-deploy check of the serving stack: the codelab's verify script as a typed entry point (options: `--help`).

With `--pool`, first waits until the InferencePool's leaders are Ready (verify_reads.py): a leader is Ready only once
vLLM serves /v1/models, far later than any request retry would wait for a large model. Exit status: 0 both requests
succeed; 1 either fails, the leaders are not Ready in time or the Gateway has no address; 2 usage errors. No Pulumi
imports: it runs from a shell or with `--stack-outputs`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from components.cli.http_probe import (
    KINDS,
    PATHS,
    Backoff,
    ProbeResult,
    base_url,
    first_tokens,
    judge,
    probe,
    request_body,
)
from components.cli.probe_pod import PROBE_NAMESPACE, parse_log, pod_manifest, pod_name, request_json, run_probe_pod
from components.cli.verify_reads import (
    POLL_S,
    CustomObjects,
    GatewayNotReady,
    LeadersNotReady,
    NoKubeconfig,
    Pods,
    VerifyError,
    add_kubeconfig_arguments,
    core_api,
    custom_objects_api,
    gateway_address,
    wait_for_leaders,
)
from components.model.commands import verify_command as command

__all__ = ["GatewayNotReady", "LeadersNotReady", "VerifyError", "command", "gateway_address", "wait_for_leaders"]

DEFAULT_GATEWAY_NAME = "llm-d-inference-gateway"

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components verify",
        description="POST one /v1/completions and one /v1/chat/completions request through the Gateway.",
    )
    parser.add_argument(
        "--stack-outputs",
        metavar="FILE",
        help=f"JSON from `pulumi stack output --json` ('-' for stdin); reads {', '.join(STACK_OUTPUT_KEYS.values())}. "
        "Explicit flags win.",
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
    add_kubeconfig_arguments(
        parser,
        lambda parser: parser.add_argument(
            "--credentials-command",
            metavar="COMMAND",
            help="the command that writes the cluster's kubeconfig context (the stack's credentialsCommand output), "
            "named when no usable kubeconfig is found",
        ),
    )
    parser.add_argument(
        "--pool",
        help="InferencePool whose leaders must be Ready before the requests (default: no wait); "
        "needs the cluster, so not with --address",
    )
    for flag, kind, default, text in (
        ("--leaders", int, None, "how many leaders must be Ready (default: every pod the pool selects)"),
        (
            "--timeout",
            float,
            DEFAULT_WAIT_S,
            f"longest wait for the leaders, seconds (default: {DEFAULT_WAIT_S:g}, the leaders' startup budget)",
        ),
        ("--poll", float, POLL_S, f"seconds between readiness checks (default: {POLL_S:g})"),
        ("--attempts", int, 15, "attempts per request (default: 15)"),
        ("--read-timeout", float, 10.0, "read timeout per attempt, seconds (default: 10)"),
        ("--connect-timeout", float, 5.0, "connect timeout per attempt (default: 5)"),
        ("--backoff", float, 1.0, "first retry delay, seconds; doubles (default: 1)"),
        ("--max-delay", float, 10.0, "longest delay between attempts (default: 10)"),
    ):
        parser.add_argument(flag, type=_positive(kind), default=default, help=text)
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
    """The STACK_OUTPUT_KEYS fields found in `pulumi stack output --json` (a file, or '-' for stdin)."""
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
            # Without the stack's own command, point at it: a bare get-credentials targets the IP endpoint (private
            # in dev, authorized networks only in staging and prod), the stack's the DNS-based one (docs/access.md).
            fix = credentials or 'eval "$(pulumi stack output credentialsCommand)"'
            print(
                f"get the cluster's credentials first: {fix}\n(or pass --kubeconfig FILE, for example the stack's "
                "secret output: pulumi stack output kubeconfig --show-secrets > kubeconfig.yaml)",
                file=sys.stderr,
            )
        return 1

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    core: Any = pods
    in_cluster = not args.address and not args.direct
    try:
        if pool and not args.address:
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
        if args.address:
            address = args.address
            print(f"target {base_url(address, args.scheme, args.port)} (--address) model={model}")
        else:
            kube = api if api is not None else custom_objects_api(args.kubeconfig, args.context)
            address = gateway_address(gateway_name, namespace, kube)
            where = f"from a pod in namespace {PROBE_NAMESPACE}" if in_cluster else "from this machine"
            print(
                f"target {base_url(address, args.scheme, args.port)} (Gateway {namespace}/{gateway_name}, {where}) "
                f"model={model}"
            )
        url = base_url(address, args.scheme, args.port)
        if in_cluster:
            core = core if core is not None else core_api(args.kubeconfig, args.context)
            results = pod_probe(core, url, model, args, sleep=sleep, clock=clock, log=log)
        else:
            results = local_probe(url, model, args, sleep=sleep)
    except VerifyError as exc:
        return error(exc)
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

        results.append(probe(url, model, kind, backoff=backoff, sleep=sleep, on_retry=log, **_budget(args)))
    return results


def _budget(args: argparse.Namespace) -> dict[str, Any]:
    """What bounds each request, from this process or from the probe pod."""
    return {"attempts": args.attempts, "connect_timeout": args.connect_timeout, "read_timeout": args.read_timeout}


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
    manifest = pod_manifest(pod_name(), requests_, max_delay=args.max_delay, backoff=args.backoff, **_budget(args))
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


if __name__ == "__main__":
    sys.exit(main())
