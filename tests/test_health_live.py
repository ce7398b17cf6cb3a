"""`python -m components health --live`: the reads from a fake Compute API (an injected session) and a fake
Kubernetes API server that wants the bearer token, and the kubeconfig `--gke` builds."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from components.cli import health as cli
from components.cli import health_reads
from components.model.tpu import slices
from tests import fakes
from tests.fakes import KUBE_TOKEN, serve_kube
from tests.health_fixtures import BLOCK, POOLS, RES, affinity, command, copy_stack, no_preview, reservation, state
from tests.stack_config import PROJECT_ID


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    return copy_stack(tmp_path)


@dataclass
class FakeResponse:
    status_code: int
    body: dict[str, Any]

    def json(self) -> dict[str, Any]:
        return self.body


@dataclass
class FakeCompute:
    """The Compute REST answers (`get` of a block or sub-block wraps it in `resource`, `list` in `items`) for
    my-tpu-project's reservation, and GKE's for its cluster (`cluster`, else the two pools); anything else is
    refused."""

    subs: dict[str, dict[str, Any]]
    cluster: dict[str, Any] | None = None
    seen: list[str] = field(default_factory=list)

    def get(self, url: str, params: Any = None, timeout: float = 0) -> FakeResponse:
        self.seen.append(url)
        base = f"{health_reads.COMPUTE}/projects/{PROJECT_ID}/zones/us-central1-ai1a/reservations/{RES}"
        blocks, subs = f"{base}/reservationBlocks", f"{base}/reservationBlocks/{BLOCK}/reservationSubBlocks"
        if url.startswith(health_reads.CONTAINER):
            pools = [
                {"name": p, "config": {"reservationAffinity": affinity(s)}}
                for p, s in zip(POOLS, ("sb-1", "sb-2"), strict=True)
            ]
            return FakeResponse(200, self.cluster or {"name": "tpu-cluster", "nodePools": pools})
        answers = {
            base: {"name": RES, "selfLink": base},
            blocks: {"items": [{"name": BLOCK}]},
            f"{blocks}/{BLOCK}": {"resource": {"name": BLOCK}},
            subs: {"items": [{"name": n} for n in self.subs]},
            **{f"{subs}/{name}": {"resource": sub} for name, sub in self.subs.items()},
        }
        if url in answers:
            return FakeResponse(200, answers[url])
        if url == base.replace("us-central1-ai1a", "us-central1-c"):  # the zone is looked for: not in this one
            return FakeResponse(404, {"error": {"message": f"The resource '{RES}' was not found"}})
        return FakeResponse(403, {"error": {"message": "Required 'compute.reservations.get' permission"}})


def rest_sub_block(name: str, health: str = "HEALTHY", in_use: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "status": "READY",
        "count": 16,
        "inUseCount": in_use,
        "healthInfo": {"healthStatus": health},
        "reservationSubBlockMaintenance": {"maintenancePendingCount": 0},
        "physicalTopology": {"cluster": "c", "block": "b", "subBlock": name},
    }


def kube(
    request: pytest.FixtureRequest, cluster: dict[str, Any], token: str = KUBE_TOKEN
) -> tuple[Path, list[fakes.Request]]:
    """A fake API server with the cluster's TPU nodes, Slices and Workloads: a kubeconfig reaching it with `token`,
    and the requests it gets."""

    def group(name: str, version: str) -> dict[str, Any]:
        v = {"groupVersion": f"{name}/{version}", "version": version}
        return {"name": name, "versions": [v], "preferredVersion": v}

    groups = [group(slices.SLICE_GROUP, "v1beta1"), group(health_reads.KUEUE_GROUP, "v1beta2")]
    answers = {
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups},
        "/api/v1/nodes": {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": cluster["nodes"]["items"]},
        "/apis/accelerator.gke.io/v1beta1/slices": {"kind": "SliceList", "items": cluster["slices"]},
        "/apis/kueue.x-k8s.io/v1beta2/workloads": {"kind": "WorkloadList", "items": cluster["workloads"]},
    }
    return serve_kube(request, {p: (200, body) for p, body in answers.items()}, token)


def test_live_reads_the_compute_api_and_the_kubernetes_api(
    stack: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    subs = [rest_sub_block("sb-1", "DEGRADED", 16), rest_sub_block("sb-2", in_use=16), rest_sub_block("sb-3")]
    compute = FakeCompute({sub["name"]: sub for sub in subs})
    monkeypatch.setattr(health_reads, "adc_session", lambda: compute)
    kubeconfig, seen = kube(request, state("DEGRADED"))
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(
        command(stack, "--live", "--kubeconfig", str(kubeconfig), "--json"), out, err, run_preview=no_preview
    )
    assert (code, err.getvalue()) == (1, "")
    data = json.loads(out.getvalue())
    assert data["proposal"]["value"] == ["sb-3", "sb-2"]
    assert data["cubes"][0]["slices"][0]["name"] == "default-wl-sub-0"
    selectors = [r.query["labelSelector"] for r in seen if r.path == "/api/v1/nodes"]
    assert selectors == [["cloud.google.com/gke-nodepool in (tpu7-pool-1,tpu7-pool-2)"]]
    assert data["source"].endswith("read from the Compute API")


def test_live_without_the_credential_is_one_line(
    stack: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health_reads, "adc_session", lambda: FakeCompute({"sb-1": rest_sub_block("sb-1")}))
    kubeconfig, _ = kube(request, state(), token="wrong")
    (stack / "res.json").write_text(json.dumps(reservation()))
    err = io.StringIO()
    argv = command(stack, "--live", "--kubeconfig", str(kubeconfig), "--reservation", str(stack / "res.json"))
    assert cli.main(argv, io.StringIO(), err) == 2
    assert err.getvalue() == "error: could not read the cluster: HTTP 401 Unauthorized\n"


def test_a_refused_compute_read_names_the_answer() -> None:
    with pytest.raises(health_reads.ReadError, match=r"HTTP 403 Required 'compute\.reservations\.get' permission"):
        health_reads.reservation_data(
            FakeCompute({}), project="p", zone="z", reservation="r", block="b", cluster=("p", "l", "c")
        )


def test_the_gke_kubeconfig_is_the_programs_own() -> None:
    """--gke reaches the cluster as the program's provider does (components/cluster.py kubeconfig)."""
    raw = {
        "name": "tpu-cluster",
        "endpoint": "203.0.113.7",
        "masterAuth": {"clusterCaCertificate": "Q0E="},
        "controlPlaneEndpointsConfig": {"dnsEndpointConfig": {"endpoint": "gke-abc.us-central1.gke.goog"}},
    }
    session = FakeCompute({}, cluster=raw)

    def kubeconfig(dns: bool) -> dict[str, Any]:
        return health_reads.gke_kubeconfig(session, project="p", location="us-central1", name="tpu-cluster", dns=dns)

    dns = kubeconfig(dns=True)
    assert dns["clusters"][0]["cluster"] == {"server": "https://gke-abc.us-central1.gke.goog"}
    assert dns["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    ip = kubeconfig(dns=False)
    assert ip["clusters"][0]["cluster"] == {"server": "https://203.0.113.7", "certificate-authority-data": "Q0E="}
    assert session.seen[0] == f"{health_reads.CONTAINER}/projects/p/locations/us-central1/clusters/tpu-cluster"
    raw.pop("controlPlaneEndpointsConfig")
    with pytest.raises(health_reads.ReadError, match="has no DNS-based endpoint"):
        kubeconfig(dns=True)
