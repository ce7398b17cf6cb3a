"""`python -m components health`: each case the hourly check meets, from files and from fake APIs.

The Slices, node labels and Workloads are shaped as the slice controller (xpk `slice/` at 250d4b3c) and Kueue
v0.17.4 write them: the `cloud.google.com/gke-tpu-partition-<shape>-state` labels (core/constants.go), the
Slice's Ready condition reason (MMIGHealthStatus*), the Workload's `TPUSliceFailure` condition and its
admission check state (workload_controller.go updateWorkloadStatus), Kueue's `Evicted` condition with
reason `AdmissionCheck` (pkg/controller/core/workload_controller.go:767).
"""

from __future__ import annotations

import copy
import io
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cli import health as cli
from components.cli import health_reads
from components.cli.mocks import healthy_sub_block
from components.model import keys
from components.model.observability import health as model
from components.model.tpu import slices
from tests import fakes
from tests.harness import set_arguments

ROOT = Path(__file__).resolve().parent.parent
PROJECT_ID = "my-tpu-project"
RES, BLOCK = "tpu7x-reservation", "block-0"
POOLS = ("tpu7-pool-1", "tpu7-pool-2")
TOKEN = "health-token"


def affinity(sub: str) -> dict[str, Any]:
    path = f"projects/{PROJECT_ID}/reservations/{RES}/reservationBlocks/{BLOCK}/reservationSubBlocks/{sub}"
    return {"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
            "values": [path]}  # fmt: skip


def reservation_file(subs: dict[str, dict[str, Any]], on: tuple[str, ...] = ("sb-1", "sb-2")) -> dict[str, Any]:
    """The `plan --reservation` format: pool i runs on on[i]."""
    return {
        "getReservation": {"name": RES, "selfLink": f"https://compute/{RES}", "blockNames": [BLOCK]},
        "getReservationBlock": {"name": BLOCK, "subBlockNames": list(subs)},
        "getReservationSubBlock": list(subs.values()),
        "getCluster": {
            "name": "tpu-cluster",
            "nodePools": [
                {"name": pool, "nodeConfigs": [{"reservationAffinities": [affinity(sb)]}]}
                for pool, sb in zip(POOLS, on, strict=False)
            ],
        },
    }


def sub_blocks(count: int = 3, **changes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {f"sb-{i}": healthy_sub_block(f"sb-{i}") for i in range(1, count + 1)}
    for i in (1, 2):  # the running pools' VMs
        out[f"sb-{i}"]["inUseCount"] = 16
    for name, patch in changes.items():
        out[name.replace("_", "-")] = {**out[name.replace("_", "-")], **patch}
    return out


DEGRADED = {"healthInfos": [{"healthStatus": "DEGRADED", "healthyHostCount": 14, "degradedHostCount": 2}]}
MAINTENANCE = {"reservationSubBlockMaintenances": [{"maintenancePendingCount": 3, "maintenanceOngoingCount": 0}]}


def node(pool: str, i: int, state: str = "HEALTHY") -> dict[str, Any]:
    cube = pool[-1]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"gke-{pool}-{i}",
            "labels": {
                keys.NODE_POOL_LABEL: pool,
                keys.partition_label("4x4x4"): f"cube-{cube}",
                keys.partition_label("2x2x2"): f"c{cube}-{i // 2}",
                "cloud.google.com/gke-tpu-partition-4x4x4-state": state if i == 0 else "HEALTHY",
                "cloud.google.com/gke-tpu-partition-2x2x2-state": state if i == 0 else "HEALTHY",
            },
        },
    }


def slice_(name: str, ids: list[str], reason: str = "ACTIVE", owner: str = "wl-sub", topology: str = "2x2x2") -> dict:
    status = "True" if reason in ("ACTIVE", "ACTIVE_DEGRADED") else "False"
    return {
        "apiVersion": "accelerator.gke.io/v1beta1",
        "kind": "Slice",
        "metadata": {"name": name, "annotations": {keys.OWNER_NAMESPACE: "default", keys.OWNER_NAME: owner}},
        "spec": {"type": "tpu7x", "topology": topology, "partitionIds": ids},
        "status": {"conditions": [{"type": "Ready", "status": status, "reason": reason, "message": "m"}]},
    }


def workload(name: str, check: str = "Ready", conditions: list[dict[str, Any]] | None = None, msg: str = "") -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "status": {
            "conditions": conditions or [{"type": "Admitted", "status": "True", "reason": "Admitted"}],
            "admissionChecks": [{"name": "ac", "state": check, "message": msg}],
        },
    }


def state(node_state: str = "HEALTHY", slice_list: list[dict] | None = None, workloads: list[dict] | None = None):
    nodes = [node("tpu7-pool-1", i, node_state) for i in range(16)] + [node("tpu7-pool-2", i) for i in range(16)]
    default = [slice_("default-wl-sub-0", ["c1-0"]), slice_("default-wl-other-0", ["c2-0"], owner="wl-other")]
    return {
        "nodes": {"kind": "NodeList", "items": nodes},  # as `kubectl get -o json` / the API answers
        "slices": slice_list if slice_list is not None else default,
        "workloads": workloads if workloads is not None else [workload("wl-sub"), workload("wl-other")],
    }


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    """A copy of the project's files, so `--write` can be tried on the dev stack file."""
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def run(
    tmp: Path, res: dict | str, cluster: dict | str, *extra: str, preview: Any = None, res_file: str = "res.json"
) -> tuple[int, str, str]:
    """The command on these files (a str is written as it is, unreadable JSON included)."""
    (tmp / res_file).write_text(res if isinstance(res, str) else json.dumps(res))
    (tmp / "state.json").write_text(cluster if isinstance(cluster, str) else json.dumps(cluster))
    out, err = io.StringIO(), io.StringIO()
    argv = ["--stack", "dev", "--dir", str(tmp), *set_arguments("dev")]
    argv += ["--reservation", str(tmp / res_file), "--cluster-state", str(tmp / "state.json"), *extra]
    kwargs = {"run_preview": preview} if preview is not None else {}
    code = cli.main(argv, out, err, **kwargs)
    return code, out.getvalue(), err.getvalue()


def no_preview(*_args: Any) -> None: ...


def test_all_healthy_exits_0_with_one_row_per_cube(stack: Path) -> None:
    code, out, err = run(stack, reservation_file(sub_blocks()), state())
    assert (code, err) == (0, "")
    table = out.splitlines()
    heading = ["CUBE", "SUB-BLOCK", "HEALTH", "PARTITIONS", "SLICES", "WORKLOADS", "AFFECTED", "ACTION"]
    assert table[1].split() == heading
    assert table[2].split()[:4] == ["0", "tpu7-pool-1", "sb-1", "HEALTHY"]
    assert "16 nodes HEALTHY" in table[2] and "1 ACTIVE" in table[2] and table[2].endswith("none")
    assert table[3].split()[:3] == ["1", "tpu7-pool-2", "sb-2"]
    assert out.rstrip().endswith("healthy: nothing to do")


def test_a_degraded_sub_block_under_a_running_pool_with_a_spare_proposes_the_move(stack: Path) -> None:
    res = reservation_file(sub_blocks(3, sb_1=DEGRADED))
    code, out, err = run(stack, res, state("DEGRADED"), "--json", preview=no_preview)
    assert (code, err) == (1, "")
    data = json.loads(out)
    assert data["proposal"] == {"key": "gke-tpu-slicing:tpu.subBlocks", "value": ["sb-3", "sb-2"]}
    cube = data["cubes"][0]
    assert (cube["status"], cube["moveTo"], cube["degradedNodes"]) == ("action", "sb-3", 1)
    assert cube["action"].startswith("move to sb-3: its sub-block is health DEGRADED")
    assert data["cubes"][1]["status"] == "ok"
    assert [w["name"] for w in cube["workloads"]] == [] and cube["slices"][0]["owner"] == "default/wl-sub"


def test_the_move_is_previewed_by_the_change_preview_and_written_only_when_asked(stack: Path) -> None:
    res = reservation_file(sub_blocks(3, sb_1=DEGRADED))
    before = (stack / "Pulumi.dev.yaml").read_text()
    code, out, _ = run(stack, res, state("DEGRADED"))
    assert code == 1
    assert (stack / "Pulumi.dev.yaml").read_text() == before  # a report, not a change
    assert "proposed change: gke-tpu-slicing:tpu.subBlocks: [sb-3, sb-2]" in out
    # The change preview's own verdict: the first pool is replaced (its reservation affinity is ForceNew),
    # the second is not touched.
    preview = out.split("what the move does", 1)[1]
    replaced = [line.split()[1] for line in preview.splitlines() if line.strip().startswith("replace")]
    assert "capacity-tpu7-pool-1" in replaced and "teardown-tpu7-pool-1" in replaced
    assert not [name for name in replaced if "tpu7-pool-2" in name]
    assert "tpu7-pool-1 moves sb-1 -> sb-3: these workloads restart: default/wl-sub" in preview
    code, _, _ = run(stack, res, state("DEGRADED"), "--write", preview=no_preview)
    written = (stack / "Pulumi.dev.yaml").read_text()
    assert yaml.safe_load(written)["config"]["gke-tpu-slicing:tpu"]["subBlocks"] == ["sb-3", "sb-2"]
    # Every comment and every other line stays.
    assert [line for line in written.splitlines() if "subBlocks" not in line] == before.splitlines()


NO_WORKLOADS = ("--set", "demos.subslicing.enabled=false", "--set", "serving.enabled=false")


def test_a_move_under_running_workloads_is_a_move_after_draining_as_the_preview_refuses_it(stack: Path) -> None:
    """The change preview refuses a pool's replacement while the stack runs queued workloads (teardown.py
    replacement_refusals): the report says so, names the keys to turn off, and the three deployments in order."""
    res = reservation_file(sub_blocks(3, sb_1=DEGRADED))
    code, out, _ = run(stack, res, state("DEGRADED"), "--json")
    data = json.loads(out)
    assert code == 1 and data["preview"]["rejected"] is True
    rejected = [c for c in data["preview"]["changes"] if c["action"] == "rejected"]
    assert [c["name"] for c in rejected] == ["teardown-pool-replacements"]
    assert data["nextAction"] == "move after draining"
    assert data["drainFirst"] == ["demos.subslicing.enabled", "serving.enabled"]  # dev runs no super-slicing demo
    off, move, on = data["steps"]
    assert "demos.subslicing.enabled: false, serving.enabled: false in Pulumi.dev.yaml" in off and "pulumi up" in off
    assert "tpu.subBlocks: [sb-3, sb-2]" in move
    assert "serving.enabled: true" in on
    _, text, _ = run(stack, res, state("DEGRADED"))
    assert "next step: move after draining" in text and "  1. turn the workloads off" in text
    # With the workloads off (step 1 deployed), the same move is a plain move, and the preview lets it through.
    code, out, _ = run(stack, res, state("DEGRADED"), "--json", *NO_WORKLOADS)
    data = json.loads(out)
    assert code == 1 and data["preview"]["rejected"] is False
    assert (data["nextAction"], data["drainFirst"], len(data["steps"])) == ("move", [], 1)
    # Nothing to move, or nothing a move fixes: no steps.
    assert json.loads(run(stack, reservation_file(sub_blocks()), state(), "--json")[1])["nextAction"] == "none"
    no_spare = run(stack, reservation_file(sub_blocks(2, sb_1=DEGRADED)), state("DEGRADED"), "--json")[1]
    assert (json.loads(no_spare)["nextAction"], json.loads(no_spare)["steps"]) == ("other", [])


def test_a_move_of_a_protected_pool_is_a_move_after_unprotecting(stack: Path) -> None:
    """Staging and prod protect their pools (cluster.protect): Pulumi refuses the replacement the move is, so the
    steps turn protection off first and on again at the end, with the workloads when they run."""
    res = reservation_file(sub_blocks(3, sb_1=DEGRADED))
    protect = ("--set", "cluster.protect=true")
    code, out, _ = run(stack, res, state("DEGRADED"), "--json", *protect, *NO_WORKLOADS)
    data = json.loads(out)
    assert code == 1 and data["preview"]["rejected"] is True
    (rejected,) = [c for c in data["preview"]["changes"] if c["action"] == "rejected"]
    assert rejected["name"] == "capacity-tpu7-pool-1" and rejected["reason"].startswith("protected")
    assert (data["nextAction"], data["drainFirst"], data["unprotectFirst"]) == (
        "move after unprotecting",
        [],
        ["cluster.protect"],
    )
    off, _, on = data["steps"]
    assert "cluster.protect: false" in off and "cluster.protect: true" in on
    data = json.loads(run(stack, res, state("DEGRADED"), "--json", *protect)[1])
    assert data["nextAction"] == "move after draining"
    assert "demos.subslicing.enabled: false, serving.enabled: false, cluster.protect: false" in data["steps"][0]
    # The change preview of the move with step 1 deployed lets it through.
    data = json.loads(run(stack, res, state("DEGRADED"), "--json", *NO_WORKLOADS)[1])
    assert data["preview"]["rejected"] is False and data["nextAction"] == "move"


def test_the_same_with_no_spare_says_so_and_what_else_helps(stack: Path) -> None:
    res = reservation_file(sub_blocks(2, sb_1=DEGRADED))
    code, out, err = run(stack, res, state("DEGRADED"), preview=no_preview)
    assert (code, err) == (1, "")
    assert "no healthy free sub-block in block block-0 to move it to: its sub-block is health DEGRADED" in out
    assert "lower gke-tpu-slicing:tpu.cubes (fewer cubes), add capacity in another block" in out
    assert "proposed change" not in out


def test_a_spare_used_by_something_else_is_no_spare(stack: Path) -> None:
    res = reservation_file(sub_blocks(3, sb_1=DEGRADED, sb_3={"inUseCount": 4}))
    code, out, _ = run(stack, res, state(), preview=no_preview)
    assert code == 1 and "no healthy free sub-block" in out


def test_pending_maintenance_proposes_moving_before_it_starts(stack: Path) -> None:
    res = reservation_file(sub_blocks(3, sb_2=MAINTENANCE))
    code, out, _ = run(stack, res, state(), "--json", preview=no_preview)
    data = json.loads(out)
    assert code == 1
    assert data["cubes"][1]["health"] == "HEALTHY, maintenance pending (3)"
    assert "without live migration the slices on it stop" in data["cubes"][1]["action"]
    assert data["proposal"]["value"] == ["sb-1", "sb-3"]


def failed_slice() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A FAILED Slice on the first cube, and its workload, which the slice controller retries."""
    failed = [slice_("default-wl-sub-0", ["c1-0"], reason="FAILED")]
    retrying = workload(
        "wl-sub",
        "Retry",
        [{"type": "TPUSliceFailure", "status": "True", "reason": "RuntimeFailure", "message": "x"}],
        "Slices are in states: 1 FAILED. Errors: default-wl-sub-0: hardware failure",
    )
    return failed, retrying


def evicted_workload() -> dict[str, Any]:
    """A workload Kueue evicted for its admission check after its Slices failed to form; its Slices are gone."""
    return workload(
        "wl-big",
        "Pending",
        [
            {"type": "Evicted", "status": "True", "reason": "AdmissionCheck", "message": "At least one ..."},
            {"type": "TPUSliceFailure", "status": "True", "reason": "FormationTimeout", "message": "stale"},
        ],
    )


def test_a_failed_slice_on_a_healthy_sub_block(stack: Path) -> None:
    failed, wl = failed_slice()
    code, out, _ = run(stack, reservation_file(sub_blocks()), state(slice_list=failed, workloads=[wl]), "--json",
                       preview=no_preview)  # fmt: skip
    data = json.loads(out)
    cube = data["cubes"][0]
    assert code == 1
    assert cube["slices"] == [{"name": "default-wl-sub-0", "state": "FAILED", "owner": "default/wl-sub"}]
    assert cube["workloads"] == [{"name": "default/wl-sub", "state": "retrying", "reason": "RuntimeFailure"}]
    assert cube["action"] == "move to sb-3: a Slice on it is FAILED"


def test_evicted_workloads_whose_slices_are_gone_are_reported_apart(stack: Path) -> None:
    evicted = evicted_workload()
    other = workload("wl-preempted", "Pending", [{"type": "Evicted", "status": "True", "reason": "Preempted"}])
    code, out, _ = run(stack, reservation_file(sub_blocks()), state(slice_list=[], workloads=[evicted, other]))
    assert code == 0  # Kueue requeued it and the controller retries: watched, not an action
    last = out.splitlines()[4]
    assert last.split()[:5] == ["-", "-", "-", "-", "-"] and "1 evicted" in last and "watch" in last
    assert "workload default/wl-big (evicted: FormationTimeout) (its Slices are gone)" in out
    assert "wl-preempted" not in out  # preemption is Kueue's business, not a slice failure


def test_a_rejected_admission_check_is_an_action(stack: Path) -> None:
    rejected = workload("wl-bad", "Rejected", msg="ConfigurationFailure")
    code, out, _ = run(stack, reservation_file(sub_blocks()), state(workloads=[rejected]))
    assert code == 1 and "reactivate the rejected workloads" in out


@pytest.mark.parametrize(
    ("res", "cluster", "message"),
    [
        ("{", None, "cannot read reservation data from"),
        (None, "[", "cannot read the cluster state from"),
        (None, json.dumps({"nodes": 3}), "the cluster state's nodes"),
        (json.dumps({"getReservation": {}}), None, "tpu.reservation.name = 'tpu7x-reservation': no such"),
    ],
)  # fmt: skip
def test_unreadable_input_is_one_line_and_exit_2(stack: Path, res: str | None, cluster: str | None, message: str):
    code, out, err = run(stack, res or reservation_file(sub_blocks()), cluster or state())
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_arguments_exit_2(stack: Path) -> None:
    err = io.StringIO()
    assert cli.main(["--stack", "dev", "--dir", str(stack), *set_arguments("dev")], io.StringIO(), err) == 2
    assert "give --reservation FILE, or --live" in err.getvalue()
    with pytest.raises(SystemExit) as exc:
        cli.main(["--stack", "dev", "--bogus"], io.StringIO(), io.StringIO())
    assert exc.value.code == 2


# ---------------------------------------------------------------------------------------------
# Live: a fake Compute API (an injected session) and a fake Kubernetes API server


@dataclass
class FakeResponse:
    status_code: int
    body: dict[str, Any]

    def json(self) -> dict[str, Any]:
        return self.body


@dataclass
class FakeCompute:
    """The Compute REST answers: `get` of a block or sub-block wraps it in `resource`, `list` in `items`."""

    subs: dict[str, dict[str, Any]]
    seen: list[str] = field(default_factory=list)

    def get(self, url: str, params: Any = None, timeout: float = 0) -> FakeResponse:
        self.seen.append(url)
        base = f"{health_reads.COMPUTE}/projects/{PROJECT_ID}/zones/us-central1-ai1a/reservations/{RES}"
        if url == base:
            return FakeResponse(200, {"name": RES, "selfLink": base})
        if url == f"{base}/reservationBlocks":
            return FakeResponse(200, {"items": [{"name": BLOCK}]})
        if url == f"{base}/reservationBlocks/{BLOCK}":
            return FakeResponse(200, {"resource": {"name": BLOCK}})
        if url == f"{base}/reservationBlocks/{BLOCK}/reservationSubBlocks":
            return FakeResponse(200, {"items": [{"name": n} for n in self.subs]})
        prefix = f"{base}/reservationBlocks/{BLOCK}/reservationSubBlocks/"
        if url.startswith(prefix):
            return FakeResponse(200, {"resource": self.subs[url.removeprefix(prefix)]})
        if url.startswith(health_reads.CONTAINER):
            on = zip(POOLS, ("sb-1", "sb-2"), strict=True)
            pools = [{"name": p, "config": {"reservationAffinity": affinity(s)}} for p, s in on]
            return FakeResponse(200, {"name": "tpu-cluster", "nodePools": pools})
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


@dataclass
class FakeApiServer:
    """Discovery, the TPU nodes, the Slices and the Workloads; only with the bearer token."""

    cluster: dict[str, Any]
    seen: list[str] = field(default_factory=list)

    def reply(self, path: str, query: dict[str, list[str]]) -> dict[str, Any] | None:
        def group(name: str, version: str) -> dict[str, Any]:
            v = {"groupVersion": f"{name}/{version}", "version": version}
            return {"name": name, "versions": [v], "preferredVersion": v}

        if path == "/apis":
            groups = [group(slices.SLICE_GROUP, "v1beta1"), group(health_reads.KUEUE_GROUP, "v1beta2")]
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        if path == "/api/v1/nodes":
            self.seen.append(query["labelSelector"][0])
            return {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": self.cluster["nodes"]["items"]}
        if path == "/apis/accelerator.gke.io/v1beta1/slices":
            return {"kind": "SliceList", "items": self.cluster["slices"]}
        if path == "/apis/kueue.x-k8s.io/v1beta2/workloads":
            return {"kind": "WorkloadList", "items": self.cluster["workloads"]}
        return None

    def serve(self) -> tuple[ThreadingHTTPServer, str]:
        server = fakes.serve_api(fakes.replying(self.reply), TOKEN)
        return server, fakes.address(server)


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(cluster: dict[str, Any], token: str = TOKEN) -> tuple[Path, FakeApiServer]:
        api = FakeApiServer(cluster)
        server, address = api.serve()
        servers.append(server)
        return fakes.write_kubeconfig(tmp_path / "kubeconfig", f"http://{address}", token), api

    yield start
    for server in servers:
        server.shutdown()


def test_live_reads_the_compute_api_and_the_kubernetes_api(stack: Path, kube: Any, monkeypatch: Any) -> None:
    compute = FakeCompute({n: rest_sub_block(n, in_use=16 if n != "sb-3" else 0) for n in ("sb-1", "sb-2", "sb-3")})
    compute.subs["sb-1"] = rest_sub_block("sb-1", "DEGRADED", 16)
    monkeypatch.setattr(health_reads, "adc_session", lambda: compute)
    kubeconfig, api = kube(state("DEGRADED"))
    out, err = io.StringIO(), io.StringIO()
    argv = ["--stack", "dev", "--dir", str(stack), *set_arguments("dev"), "--live", "--kubeconfig", str(kubeconfig)]
    code = cli.main([*argv, "--json"], out, err, run_preview=no_preview)
    assert (code, err.getvalue()) == (1, "")
    data = json.loads(out.getvalue())
    assert data["proposal"]["value"] == ["sb-3", "sb-2"]
    assert data["cubes"][0]["slices"][0]["name"] == "default-wl-sub-0"
    assert api.seen == ["cloud.google.com/gke-nodepool in (tpu7-pool-1,tpu7-pool-2)"]
    assert data["source"].endswith("read from the Compute API")


def test_live_without_the_credential_is_one_line(stack: Path, kube: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(health_reads, "adc_session", lambda: FakeCompute({"sb-1": rest_sub_block("sb-1")}))
    kubeconfig, _ = kube(state(), token="wrong")
    (stack / "res.json").write_text(json.dumps(reservation_file(sub_blocks())))
    err = io.StringIO()
    argv = ["--stack", "dev", "--dir", str(stack), *set_arguments("dev"), "--live", "--kubeconfig", str(kubeconfig)]
    assert cli.main([*argv, "--reservation", str(stack / "res.json")], io.StringIO(), err) == 2
    assert err.getvalue() == "error: could not read the cluster: HTTP 401 Unauthorized\n"


def test_a_refused_compute_read_names_the_answer() -> None:
    class Refusing(FakeCompute):
        def get(self, url: str, params: Any = None, timeout: float = 0) -> FakeResponse:
            return FakeResponse(403, {"error": {"message": "Required 'compute.reservations.get' permission"}})

    with pytest.raises(health_reads.ReadError, match=r"HTTP 403 Required 'compute\.reservations\.get' permission"):
        health_reads.reservation_data(
            Refusing({}), project="p", zone="z", reservation="r", block="b", cluster=("p", "l", "c")
        )


def test_partition_states_other_than_healthy_count_as_degraded() -> None:
    labels = [{"cloud.google.com/gke-tpu-partition-4x4x4-state": "DEGRADED"}, {"other": "x"}]
    assert model.partition_summary(labels) == ("4x4x4 DEGRADED on 1 of 2 nodes", 1)
    assert model.partition_summary([]) == ("no nodes", 0)
    odd = copy.deepcopy(labels)
    odd[0]["cloud.google.com/gke-tpu-partition-4x4x4-state"] = "UNKNOWN"
    assert model.partition_summary(odd)[1] == 1


def test_the_gke_kubeconfig_is_the_programs_own() -> None:
    """--gke reaches the cluster as the program's provider does (components/cluster.py kubeconfig)."""
    raw = {
        "name": "tpu-cluster",
        "endpoint": "203.0.113.7",
        "masterAuth": {"clusterCaCertificate": "Q0E="},
        "controlPlaneEndpointsConfig": {"dnsEndpointConfig": {"endpoint": "gke-abc.us-central1.gke.goog"}},
    }

    class Session(FakeCompute):
        def get(self, url: str, params: Any = None, timeout: float = 0) -> FakeResponse:
            self.seen.append(url)
            return FakeResponse(200, raw)

    session = Session({})
    dns = health_reads.gke_kubeconfig(session, project="p", location="us-central1", name="tpu-cluster", dns=True)
    assert dns["clusters"][0]["cluster"] == {"server": "https://gke-abc.us-central1.gke.goog"}
    assert dns["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    ip = health_reads.gke_kubeconfig(session, project="p", location="us-central1", name="tpu-cluster", dns=False)
    assert ip["clusters"][0]["cluster"] == {"server": "https://203.0.113.7", "certificate-authority-data": "Q0E="}
    assert session.seen[0] == f"{health_reads.CONTAINER}/projects/p/locations/us-central1/clusters/tpu-cluster"
    raw.pop("controlPlaneEndpointsConfig")
    with pytest.raises(health_reads.ReadError, match="has no DNS-based endpoint"):
        health_reads.gke_kubeconfig(session, project="p", location="us-central1", name="tpu-cluster", dns=True)


def test_write_replaces_an_existing_sub_blocks_entry_in_place(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.x.yaml"
    head = "config:\n  gcp:project: p  # mine\n  gke-tpu-slicing:tpu:\n    cubes: 2\n    # pinned by hand\n"
    tail = "    reservation:\n      name: r\n"
    path.write_text(head + "    subBlocks:\n      - sb-1\n      - sb-2\n" + tail)
    cli.write_sub_blocks(path, ["sb-3", "sb-2"])
    assert path.read_text() == head + "    subBlocks: [sb-3, sb-2]\n" + tail  # every other line, comments too, kept
    bare = tmp_path / "Pulumi.y.yaml"
    bare.write_text("config:\n  gcp:project: p\n")
    with pytest.raises(cli.HealthError, match=r"no `gke-tpu-slicing:tpu:` map .* set it by hand: \[sb-3\]"):
        cli.write_sub_blocks(bare, ["sb-3"])


# ---------------------------------------------------------------------------------------------
# The slice controller's gates (components/model/addons/slice_controller.py)


def controller_deployment(args: list[str]) -> dict[str, Any]:
    """The Deployment as xpk slice/config/manager/manager.yaml@250d4b3c renders it (namespace from kustomize)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "slice-controller-controller-manager", "namespace": "slice-controller-system"},
        "spec": {"template": {"spec": {"containers": [{"name": "manager", "command": ["/manager"], "args": args}]}}},
    }


def test_the_gates_go_onto_the_controllers_manager_container_only() -> None:
    from components.model.addons import slice_controller as sc

    base = ["--leader-elect", "--feature-gates=Old=true", "--default-slice-health-node-affinity=HEALTHY_AND_DEGRADED"]
    out = sc.with_feature_gates(controller_deployment(base), list(sc.FEATURE_GATES))
    assert out is not None
    (container,) = out["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "--leader-elect",
        "--default-slice-health-node-affinity=HEALTHY_AND_DEGRADED",
        "--feature-gates=FailOnUntoleratedDegradedSlice=true,UseRetryMechanismForSliceCreation=true",
    ]
    other = controller_deployment(base)
    other["metadata"]["name"] = "kueue-controller-manager"
    assert sc.with_feature_gates(other, ["FailOnUntoleratedDegradedSlice"]) is None
    assert sc.with_feature_gates(controller_deployment(base), []) is None


def test_only_the_gates_the_controller_has_are_accepted() -> None:
    from tests.harness import assert_rejected

    assert_rejected(
        {"gke-tpu-slicing:addons": {"sliceController": {"featureGates": ["FailOnDegraded"]}}},
        ["gke-tpu-slicing:addons.sliceController.featureGates", "FailOnUntoleratedDegradedSlice"],
    )


def test_the_transform_changes_the_controllers_deployment_and_nothing_else() -> None:
    import pulumi

    from components.addons import _feature_gates_transform

    transform = _feature_gates_transform(["UseRetryMechanismForSliceCreation"])
    opts = pulumi.ResourceOptions()
    deployment = controller_deployment(["--leader-elect"])
    result = transform(pulumi.ResourceTransformArgs(True, "kubernetes:apps/v1:Deployment", "d", deployment, opts))
    assert result is not None and result.opts is opts
    (container,) = result.props["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["--leader-elect", "--feature-gates=UseRetryMechanismForSliceCreation=true"]
    service = {"metadata": deployment["metadata"]}
    assert transform(pulumi.ResourceTransformArgs(True, "kubernetes:core/v1:Service", "s", service, opts)) is None


def test_a_cube_not_created_yet_is_watched_not_moved(stack: Path) -> None:
    """The second pool does not exist yet: the preview would put it on the first healthy free sub-block."""
    code, out, _ = run(stack, reservation_file(sub_blocks(3), on=("sb-1",)), state(), "--json")
    data = json.loads(out)
    assert code == 0 and data["proposal"] is None
    assert (data["cubes"][1]["status"], data["cubes"][1]["subBlock"]) == ("watch", "sb-3")
    assert data["cubes"][1]["action"] == "not running yet: the next `pulumi up` creates it"


DOC = ROOT / "docs" / "health.md"
DOC_BLOCK = re.compile(
    r"(```\n\$ python -m components health --stack dev (.*?)\n)(.*?)(\n\$ echo \$\?\n)(\d)(\n```)", re.S
)


def doc_cases() -> list[tuple[dict[str, Any] | None, dict[str, Any]]]:
    """The inputs of docs/health.md's reports, in page order (None: the unreadable reservation file)."""
    failed, retrying = failed_slice()
    evicted = evicted_workload()
    return [
        (reservation_file(sub_blocks()), state()),
        (reservation_file(sub_blocks(3, sb_1=DEGRADED)), state("DEGRADED")),
        (reservation_file(sub_blocks(2, sb_1=DEGRADED)), state("DEGRADED")),
        (reservation_file(sub_blocks(3, sb_2=MAINTENANCE)), state()),
        (reservation_file(sub_blocks()), state(slice_list=failed, workloads=[retrying])),
        (reservation_file(sub_blocks()), state(slice_list=[], workloads=[evicted])),
        (None, state()),
    ]


def doc_reports(tmp: Path) -> str:
    """docs/health.md with each report as the command prints it now."""
    text = DOC.read_text()
    found = list(DOC_BLOCK.finditer(text))
    assert len(found) == len(doc_cases()), "docs/health.md: one report per case"
    for match, (res, cluster) in reversed(list(zip(found, doc_cases(), strict=True))):
        extra = [
            f for f in match.group(2).split() if f.startswith("--") and f not in ("--reservation", "--cluster-state")
        ]
        if res is None:  # the unreadable reservation file: the report is the error line
            code, _, shown = run(tmp, "{", cluster, *extra, res_file="bad.json")
        else:
            code, shown, _ = run(tmp, res, cluster, *extra)
        shown = shown.replace(str(tmp) + "/", "").strip()
        report = match.group(1) + shown + match.group(4) + str(code) + match.group(6)
        text = text[: match.start()] + report + text[match.end() :]
    return text


def test_the_reports_in_the_docs_are_what_the_command_prints(stack: Path) -> None:
    assert doc_reports(stack) == DOC.read_text(), "docs/health.md is stale: run `python -m tests.test_health --write`"


if __name__ == "__main__":  # python -m tests.test_health --write: rewrites the reports in docs/health.md
    import sys
    import tempfile

    assert sys.argv[1:] == ["--write"], "usage: python -m tests.test_health --write"
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
            shutil.copy(ROOT / name, Path(tmp) / name)
        DOC.write_text(doc_reports(Path(tmp)))
    print(f"wrote {DOC.relative_to(ROOT)}")
