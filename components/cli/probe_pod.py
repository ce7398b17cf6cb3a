"""`verify`'s requests from inside the cluster: a short-lived curl pod, its answers read from its log.

The Gateway (`gke-l7-rilb`) has an internal address a laptop or Cloud Shell outside the VPC cannot reach; the
cluster's API is reachable wherever kubectl works. So, as the codelab's verify script does with `kubectl run`,
`verify` creates one pod (the official client, no kubectl) that POSTs both requests to the Gateway's address, waits
for it to end (bounded), reads its log and always deletes it.

Namespace: `default` (PROBE_NAMESPACE), not the workload namespace. Kueue's pod webhook is installed with the
workload namespace as its namespace selector (docs/architecture.md "Kueue's configuration") and fails closed; in
that namespace a pod with no queue label is still gated when a LocalQueue named `default` exists (the
LocalQueueDefaulting branch of kubernetes-sigs/kueue@001e49ba pkg/controller/jobs/pod/pod_webhook.go `Default`:
"suspend = QueueNameForObject(pod) != "" || manageJobsWithoutQueueName"). Outside it the API server never calls
Kueue. A pod is a client: the Gateway's `Same` namespace rule is about routes, not callers.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from components.cli.verify_reads import VerifyError, api_reason
from components.model.keys import APP_NAME_LABEL

# Pinned by exact tag (the curl project's official image, Alpine with /bin/sh; runs as uid 100, curl_user).
CURL_IMAGE = "docker.io/curlimages/curl:8.11.1"
PROBE_NAMESPACE = "default"
PROBE_LABEL = {APP_NAME_LABEL: "gke-tpu-slicing-verify"}
MARK = "@@verify"
# Statuses the pod retries, as `http_probe.probe` does (curl's 000: no response at all).
RETRY_STATUSES = "000|404|408|425|429|5??"
PULL_MARGIN_S = 180  # image pull and scheduling on a system node, before the requests' own budget starts


def pod_script(
    attempts: int, connect_timeout: float, read_timeout: float, max_delay: float, backoff: float = 1.0
) -> str:
    """The pod's `sh -c` script: for each (kind, url, body) argument triple, POST with bounded retries.

    The first retry waits `backoff` seconds, each next one twice as long, at most `max_delay` (whole seconds, at
    least 1: the shell's arithmetic is integer), as `http_probe.Backoff` does for `--direct`.
    Prints per request `@@verify kind=K attempts=N status=S seconds=T`, the body, then `@@verify end`.
    """
    c, m, d = int(max(1, connect_timeout)), int(max(1, connect_timeout + read_timeout)), int(max(1, max_delay))
    first = max(1, int(min(backoff, max_delay)))
    return "\n".join(
        [
            'while [ "$#" -ge 3 ]; do',
            f"  kind=$1; url=$2; body=$3; shift 3; n=0; delay={first}",
            "  while :; do",
            "    n=$((n+1))",
            f"    out=$(curl -sS --connect-timeout {c} --max-time {m} -H 'Content-Type: application/json' \\",
            "      -H 'Accept: application/json' -d \"$body\" -w '\\n%{http_code} %{time_total}' \"$url\" 2>&1)",
            "    tail=$(printf '%s\\n' \"$out\" | tail -n 1); status=${tail%% *}; seconds=${tail#* }",
            "    text=$(printf '%s\\n' \"$out\" | sed '$d')",
            '    case "$status" in',
            f'      {RETRY_STATUSES}) [ "$n" -lt {attempts} ] || break; sleep "$delay"',
            f'        delay=$((delay*2)); [ "$delay" -gt {d} ] && delay={d} ;;',
            "      *) break ;;",
            "    esac",
            "  done",
            f"  printf '{MARK} kind=%s attempts=%s status=%s seconds=%s\\n%s\\n{MARK} end\\n' "
            '"$kind" "$n" "$status" "$seconds" "$text"',
            "done",
        ]
    )


def deadline_seconds(attempts: int, connect_timeout: float, read_timeout: float, max_delay: float, kinds: int) -> int:
    """The pod's activeDeadlineSeconds: every attempt of every request at its longest, plus the pull margin."""
    per_request = attempts * (max(1, connect_timeout + read_timeout) + max(1, max_delay))
    return int(PULL_MARGIN_S + kinds * per_request)


def pod_manifest(
    name: str, requests: list[tuple[str, str, str]], *, attempts: int, connect_timeout: float, read_timeout: float,
    max_delay: float, backoff: float = 1.0,
) -> dict[str, Any]:  # fmt: skip
    """The probe pod: `requests` are (kind, url, JSON body); restricted security, no token, bounded run."""
    args = [arg for request in requests for arg in request]
    script = pod_script(attempts, connect_timeout, read_timeout, max_delay, backoff)
    deadline = deadline_seconds(attempts, connect_timeout, read_timeout, max_delay, len(requests))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": PROBE_NAMESPACE, "labels": dict(PROBE_LABEL)},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": deadline,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 100, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "curl",
                    "image": CURL_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/sh", "-c", script, "verify", *args],
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "32Mi"},
                        "limits": {"cpu": "200m", "memory": "64Mi"},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


@dataclass(frozen=True)
class PodAnswer:
    """One request as the pod saw it: its last attempt's status (None: no response), attempts, latency, body."""

    kind: str
    attempts: int
    status: int | None
    latency_ms: float | None
    body: str


_HEAD = re.compile(rf"^{MARK} kind=(\S+) attempts=(\d+) status=(\d+) seconds=(\S*)$")


def parse_log(log: str) -> dict[str, PodAnswer]:
    """The pod's answers by kind, from its log (lines outside the markers, curl's own stderr, are skipped)."""
    answers: dict[str, PodAnswer] = {}
    lines = log.splitlines()
    i = 0
    while i < len(lines):
        head = _HEAD.match(lines[i])
        i += 1
        if not head:
            continue
        body: list[str] = []
        while i < len(lines) and lines[i] != f"{MARK} end":
            body.append(lines[i])
            i += 1
        i += 1
        kind, n, status, seconds = head.groups()
        try:
            latency = float(seconds) * 1000 if status != "000" else None
        except ValueError:
            latency = None
        code = int(status)
        answers[kind] = PodAnswer(kind, int(n), code or None, latency, "\n".join(body))
    return answers


def run_probe_pod(
    core: Any,
    manifest: Mapping[str, Any],
    *,
    poll: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = lambda line: None,
) -> str:
    """Creates the pod, waits until it ends (bounded by its deadline plus a minute), returns its log; always deletes it.

    `core` is a `kubernetes.client.CoreV1Api`.
    """
    name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    limit = float(manifest["spec"]["activeDeadlineSeconds"]) + 60
    try:
        core.create_namespaced_pod(namespace, manifest)
    except Exception as exc:
        raise VerifyError(f"cannot create the probe pod {namespace}/{name}: {api_reason(exc)}") from exc
    log(f"probe pod {namespace}/{name} ({CURL_IMAGE}) sends the requests from inside the cluster")
    try:
        deadline = clock() + limit
        while True:
            try:
                phase = core.read_namespaced_pod(name, namespace).status.phase
            except Exception as exc:
                raise VerifyError(f"cannot read the probe pod {namespace}/{name}: {api_reason(exc)}") from exc
            if phase in ("Succeeded", "Failed"):
                break
            if clock() >= deadline:
                raise VerifyError(f"probe pod {namespace}/{name} still {phase} after {limit:g}s")
            sleep(poll)
        try:
            return str(core.read_namespaced_pod_log(name, namespace, container="curl"))
        except Exception as exc:
            raise VerifyError(f"cannot read the probe pod's log {namespace}/{name}: {api_reason(exc)}") from exc
    finally:
        try:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except Exception as exc:  # reported, never masking the result: the pod ends by its own deadline anyway
            log(f"warning: could not delete the probe pod {namespace}/{name}: {api_reason(exc)}; "
                f"delete it with `kubectl delete pod -n {shlex.quote(namespace)} {shlex.quote(name)}`")  # fmt: skip


def pod_name() -> str:
    return f"gke-tpu-slicing-verify-{secrets.token_hex(4)}"


def request_json(body: Mapping[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
