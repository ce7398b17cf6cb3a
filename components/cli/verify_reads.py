"""What `verify` reads from the cluster: the Gateway's address and the readiness of the pool's leaders.

Official `kubernetes` client only, built per call from the kubeconfig (or in-cluster config), never the global
configuration (importing and calling this has no side effect on other users of the client).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from components.model.keys import BURST_SLOT_LABEL, ROLE_LABEL

# (group, version, plural) of the custom objects read.
POOL = ("inference.networking.k8s.io", "v1", "inferencepools")
GATEWAY = ("gateway.networking.k8s.io", "v1", "gateways")
POLL_S = 30.0
_EXCERPT = 200


class VerifyError(RuntimeError):
    """The check could not run (no cluster access, no Gateway, no address yet)."""


class NoKubeconfig(VerifyError):
    """No usable kubeconfig (none, no current context, or the context asked for is missing)."""


class GatewayNotReady(VerifyError):
    """The Gateway exists but has no address in its status yet."""


class LeadersNotReady(VerifyError):
    """The pool's leaders did not all become Ready within the timeout."""


class CustomObjects(Protocol):
    """The part of `kubernetes.client.CustomObjectsApi` this module uses (tests inject a fake)."""

    def get_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> Any: ...


class Pods(Protocol):
    """The part of `kubernetes.client.CoreV1Api` this module uses (tests inject a fake)."""

    def list_namespaced_pod(self, namespace: str, *, label_selector: str) -> Any: ...


def add_kubeconfig_arguments(
    parser: argparse.ArgumentParser, between: Callable[[argparse.ArgumentParser], object] = lambda _parser: None
) -> None:
    """`--kubeconfig` and `--context`, the two arguments of `api_client`; `between` adds a command's own options
    where `--help` lists them, after `--kubeconfig`."""
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    between(parser)
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")


def custom_objects_api(kubeconfig: str | None = None, context: str | None = None) -> CustomObjects:
    """A CustomObjectsApi from the kubeconfig (file, `$KUBECONFIG` or ~/.kube/config), else in-cluster."""
    from kubernetes import client

    return client.CustomObjectsApi(api_client(kubeconfig, context))


def core_api(kubeconfig: str | None = None, context: str | None = None) -> Pods:
    """A CoreV1Api from the same configuration as custom_objects_api."""
    from kubernetes import client

    return client.CoreV1Api(api_client(kubeconfig, context))


def api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An ApiClient from the kubeconfig, else in-cluster."""
    from kubernetes import client, config  # lazy: the HTTP probe and `--address` need no cluster client

    try:
        return config.new_client_from_config(config_file=kubeconfig, context=context)
    except config.ConfigException as exc:
        if kubeconfig or context or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise NoKubeconfig(f"no usable kubeconfig in {where} ({one_line(str(exc))})") from exc
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as exc2:
            raise VerifyError(f"cannot load kubeconfig or in-cluster config: {exc2}") from exc2
        return client.ApiClient(configuration)


def _custom_object(api: CustomObjects, resource: tuple[str, str, str], namespace: str, name: str, where: str) -> Any:
    group, version, plural = resource
    try:
        return api.get_namespaced_custom_object(group, version, namespace, plural, name)
    except Exception as exc:  # kubernetes ApiException, urllib3 errors: all mean "cannot read it"
        raise _api_error(where, exc, f"{group}/{version}") from exc


def _api_error(where: str, exc: Exception, group_version: str) -> VerifyError:
    if getattr(exc, "status", None) == 404:
        return VerifyError(f"{where} not found ({group_version})")
    return VerifyError(f"cannot read {where}: {api_reason(exc)}")


def api_reason(exc: Exception) -> str:
    """An API client's failure in a few words: `HTTP <status> <reason>`, or the exception's own one line."""
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None) or type(exc).__name__
    return f"HTTP {status} {reason}" if status else f"{reason}: {one_line(str(exc))}"


@dataclass(frozen=True)
class LeaderStatus:
    """Ready leaders by role (`llm-d.ai/role`), of the pods the InferencePool selects; the burst slots' apart (they
    come and go with load, and a preempted one waits pending: what `verify` waits for is the floors)."""

    ready: dict[str, int]
    total: dict[str, int]
    burst_ready: int = 0
    burst_total: int = 0

    @property
    def ready_count(self) -> int:
        return sum(self.ready.values())

    @property
    def count(self) -> int:
        return sum(self.total.values())

    def done(self, expected: int | None) -> bool:
        """All selected pods are Ready (and at least `expected` of them, when known; at least one otherwise)."""
        return self.ready_count == self.count and self.ready_count >= (expected or 1)

    def line(self, expected: int | None) -> str:
        want = max(expected or 0, self.count)
        roles = ", ".join(f"{role} {self.ready[role]}/{self.total[role]}" for role in sorted(self.total))
        burst = f"; burst slots {self.burst_ready}/{self.burst_total} (not waited for)" if self.burst_total else ""
        return f"leaders ready: {self.ready_count}/{want}" + (f" ({roles})" if roles else "") + burst


def pool_selector(name: str, namespace: str, api: CustomObjects) -> str:
    """The InferencePool's spec.selector.matchLabels as a label selector string (k=v,...)."""
    where = f"InferencePool {namespace}/{name}"
    pool = _custom_object(api, POOL, namespace, name, where)
    labels = (((pool or {}).get("spec") or {}).get("selector") or {}).get("matchLabels")
    if not isinstance(labels, Mapping) or not labels:
        raise VerifyError(f"{where} has no spec.selector.matchLabels")
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _is_ready(pod: Any) -> bool:
    conditions = getattr(getattr(pod, "status", None), "conditions", None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def leader_status(namespace: str, selector: str, pods: Pods) -> LeaderStatus:
    try:
        items = pods.list_namespaced_pod(namespace, label_selector=selector).items
    except Exception as exc:
        raise _api_error(f"pods {selector!r} in {namespace}", exc, "v1") from exc
    ready: dict[str, int] = {}
    total: dict[str, int] = {}
    burst = [0, 0]
    for pod in items:
        labels = getattr(pod.metadata, "labels", None) or {}
        if BURST_SLOT_LABEL in labels:
            burst = [burst[0] + _is_ready(pod), burst[1] + 1]
            continue
        role = labels.get(ROLE_LABEL, "?")
        total[role] = total.get(role, 0) + 1
        ready[role] = ready.get(role, 0) + _is_ready(pod)
    return LeaderStatus(ready, total, *burst)


def wait_for_leaders(
    pool: str,
    namespace: str,
    *,
    api: CustomObjects,
    pods: Pods,
    expected: int | None,
    timeout: float,
    poll: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = lambda line: None,
) -> LeaderStatus:
    """Polls the pods the InferencePool selects until they are all Ready, or raises LeadersNotReady.

    `log` gets one line whenever the count changes (and the first and last one).
    """
    selector = pool_selector(pool, namespace, api)
    deadline = clock() + timeout
    last = ""
    while True:
        status = leader_status(namespace, selector, pods)
        line = status.line(expected)
        remaining = deadline - clock()
        if status.done(expected):
            log(f"{line}: all Ready")
            return status
        if line != last:
            log(f"{line}; waiting up to {max(0.0, remaining):.0f}s more (selector {selector})")
            last = line
        if remaining <= 0:
            raise LeadersNotReady(f"InferencePool {namespace}/{pool}: {line} after {timeout:g}s")
        sleep(min(poll, remaining))


def gateway_address(name: str, namespace: str, api: CustomObjects | None = None) -> str:
    """`status.addresses[0].value` of the Gateway `namespace/name` (the load balancer IP or hostname).

    Raises VerifyError when the Gateway cannot be read and GatewayNotReady when it has no address.
    """
    api = api if api is not None else custom_objects_api()
    where = f"Gateway {namespace}/{name}"
    gateway = _custom_object(api, GATEWAY, namespace, name, where)
    status = (gateway.get("status") if isinstance(gateway, Mapping) else None) or {}
    addresses = status.get("addresses") if isinstance(status, Mapping) else None
    first = addresses[0] if isinstance(addresses, list) and addresses else None
    value = first.get("value") if isinstance(first, Mapping) else None
    if not isinstance(value, str) or not value.strip():
        raise GatewayNotReady(
            f"{where} has no address yet (status.addresses is empty); the load balancer may still be provisioning"
        )
    return value.strip()


def one_line(text: str, limit: int = _EXCERPT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
