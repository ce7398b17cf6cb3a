"""Fakes the command tests share: a Kubernetes API server on 127.0.0.1 that wants a bearer token, a kubeconfig
that reaches it with one, a clock whose sleeps advance it, builders of a Slice and of a protobuf Struct, and what
GKE's getServerConfig answers (with the engine-versions invoke's filtering of it).

The official `kubernetes` client talks to the server as to a cluster (tests/test_health_live.py,
tests/test_dynamic_provider_host.py, tests/test_probe_pod.py); each test file answers the paths it needs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from google.protobuf import struct_pb2

from components.model import keys


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # as sent, without the query
    query: dict[str, list[str]]
    authorization: str  # "" when the request has none
    body: bytes


def not_found() -> tuple[int, dict[str, Any]]:
    return 404, {"kind": "Status", "code": 404}


def replying(reply: Callable[[str, dict[str, list[str]]], Any]) -> Callable[[Request], tuple[int, Any]]:
    """An `answer` from `reply(path without a trailing /, query)`: 200 with its body, a 404 Status for None."""

    def answer(request: Request) -> tuple[int, Any]:
        body = reply(request.path.rstrip("/") or "/", request.query)
        return (200, body) if body is not None else not_found()

    return answer


def serve_api(
    answer: Callable[[Request], tuple[int, Any]], token: str, seen: Callable[[Request], None] = lambda _request: None
) -> ThreadingHTTPServer:
    """Serves GET, POST and DELETE on a free port of 127.0.0.1 until `shutdown()`. Every request goes to `seen`;
    one without `Authorization: Bearer <token>` gets 401 (as GKE: no anonymous discovery), the others what
    `answer` returns, (status, body): a str body as text/plain, anything else as JSON."""

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            url = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            authorization = self.headers.get("Authorization", "")
            request = Request(self.command, url.path, parse_qs(url.query), authorization, self.rfile.read(length))
            seen(request)
            if authorization != f"Bearer {token}":
                self.send_response(401)
                self.end_headers()
                return
            code, body = answer(request)
            text = body if isinstance(body, str) else json.dumps(body)
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
            self.end_headers()
            self.wfile.write(text.encode())

        do_GET = do_POST = do_DELETE = _any  # http.server's names

        def log_message(self, *_args: object) -> None: ...

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def address(server: ThreadingHTTPServer) -> str:
    """`127.0.0.1:<port>` of a server from `serve_api`."""
    return f"127.0.0.1:{server.server_address[1]}"


def write_kubeconfig(path: Path, server: str, token: str, context: str = "x") -> Path:
    """A kubeconfig whose current context reaches `server` (a URL) with the bearer token."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(config))
    return path


class Clock:
    """time.monotonic and time.sleep in one: sleeping advances the clock."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def slice_(
    name: str, topology: str, ids: list[str], reason: str = "ACTIVE", *, deleting: bool = False, owner: str = ""
) -> dict[str, Any]:
    """A Slice the controller made for workload `owner` (namespace/name; default llm-d-pd-disaggregation/wl-<name>)."""
    namespace, _, owner = (owner or f"llm-d-pd-disaggregation/wl-{name}").partition("/")
    meta: dict[str, Any] = {"name": name, "annotations": {keys.OWNER_NAMESPACE: namespace, keys.OWNER_NAME: owner}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T08:00:00Z"
    ready = "True" if reason in ("ACTIVE", "ACTIVE_DEGRADED") else "False"
    return {
        "apiVersion": "accelerator.gke.io/v1beta1",
        "kind": "Slice",
        "metadata": meta,
        "spec": {"type": "tpu7x", "topology": topology, "partitionIds": ids},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": "m"}]},
    }


KUBE_TOKEN = "kube-token"


def serve_kube(
    request: pytest.FixtureRequest, answers: dict[str, tuple[int, Any]], token: str = KUBE_TOKEN
) -> tuple[Path, list[Request]]:
    """A fake API server, until the test ends, answering the paths of `answers` (without a trailing /) with their
    (status, body) and any other with a 404, to KUBE_TOKEN: a kubeconfig reaching it with `token`, and the
    requests it got."""
    seen: list[Request] = []
    server = serve_api(lambda r: answers.get(r.path.rstrip("/"), not_found()), KUBE_TOKEN, seen.append)
    request.addfinalizer(server.shutdown)
    url = f"http://{address(server)}"
    return write_kubeconfig(request.getfixturevalue("tmp_path") / "kubeconfig", url, token), seen


def struct(props: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(props)
    return out


# What GKE's getServerConfig answers for the region in tests (newest first, as the API lists them): the
# location's valid versions and, per release channel, its default and valid versions. Shaped like the API,
# not like the data source: `engine_versions` below applies the data source's own filtering to it.
SERVER_CONFIG: dict[str, Any] = {
    "defaultClusterVersion": "1.35.3-gke.1100000",
    "validMasterVersions": [
        "1.36.2-gke.1500000",
        "1.36.1-gke.2000000",
        "1.36.0-gke.3712000",
        "1.35.3-gke.1100000",
        "1.35.2-gke.1842000",
        "1.34.6-gke.1200000",
    ],
    "channels": {
        "RAPID": {
            "defaultVersion": "1.36.1-gke.2000000",
            "upgradeTargetVersion": "1.36.1-gke.2000000",
            "validVersions": ["1.36.2-gke.1500000", "1.36.1-gke.2000000", "1.36.0-gke.3712000", "1.35.3-gke.1100000"],
        },
        "REGULAR": {
            "defaultVersion": "1.35.3-gke.1100000",
            "upgradeTargetVersion": "1.35.3-gke.1100000",
            "validVersions": ["1.35.3-gke.1100000", "1.35.2-gke.1842000", "1.34.6-gke.1200000"],
        },
    },
}


def engine_versions(server: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The `gcp:container/getEngineVersions` invoke's answer, as the provider computes it from `server`.

    terraform-provider-google-beta release-8.0.0 @93c65b2d60, data_source_google_container_engine_versions.go
    lines 113-175: valid versions filtered by the plain string prefix, `latest_*` the first match, per channel
    the default (unfiltered) and the first matching valid version. Keys are exactly the SDK result type's
    (pulumi_gcp.container.GetEngineVersionsResult, camelCase on the wire).
    """
    prefix = args.get("versionPrefix") or ""
    masters = [v for v in server["validMasterVersions"] if v.startswith(prefix)]
    channels = server["channels"]
    first = {n: next((v for v in c["validVersions"] if v.startswith(prefix)), None) for n, c in channels.items()}
    return {
        "defaultClusterVersion": server["defaultClusterVersion"],
        "id": "2026-11-30 12:00:00 +0000 UTC",
        "latestMasterVersion": masters[0] if masters else "",
        "latestNodeVersion": masters[0] if masters else "",
        "location": args.get("location"),
        "project": args.get("project"),
        "releaseChannelDefaultVersion": {n: c["defaultVersion"] for n, c in channels.items()},
        "releaseChannelLatestVersion": {n: v for n, v in first.items() if v is not None},
        "releaseChannelUpgradeTargetVersion": {n: c["upgradeTargetVersion"] for n, c in channels.items()},
        "validMasterVersions": masters,
        "validNodeVersions": masters,
        "versionPrefix": args.get("versionPrefix"),
    }
