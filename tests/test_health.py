"""`python -m components health`: each case the hourly check meets, from files and from fake APIs.

The Slices, node labels and Workloads are shaped as the slice controller (xpk `slice/` at 250d4b3c) and Kueue
v0.17.4 write them: the `cloud.google.com/gke-tpu-partition-<shape>-state` labels (core/constants.go), the
Slice's Ready condition reason (MMIGHealthStatus*), the Workload's `TPUSliceFailure` condition and its
admission check state (workload_controller.go updateWorkloadStatus), Kueue's `Evicted` condition with
reason `AdmissionCheck` (pkg/controller/core/workload_controller.go:767).
"""

from __future__ import annotations

import io
import json
import re
import shutil
from dataclasses import dataclass, field
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
from tests.fakes import KUBE_TOKEN, serve_kube, slice_
from tests.harness import PROJECT_ID, ROOT, set_arguments

RES, BLOCK = "tpu7x-reservation", "block-0"
POOLS = ("tpu7-pool-1", "tpu7-pool-2")
STATE_LABEL = "cloud.google.com/gke-tpu-partition-{}-state"


def affinity(sub: str) -> dict[str, Any]:
    path = f"projects/{PROJECT_ID}/reservations/{RES}/reservationBlocks/{BLOCK}/reservationSubBlocks/{sub}"
    return {"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
            "values": [path]}  # fmt: skip


DEGRADED = {"healthInfos": [{"healthStatus": "DEGRADED", "healthyHostCount": 14, "degradedHostCount": 2}]}
MAINTENANCE = {"reservationSubBlockMaintenances": [{"maintenancePendingCount": 3, "maintenanceOngoingCount": 0}]}


def reservation(count: int = 3, on: tuple[str, ...] = ("sb-1", "sb-2"), **changes: dict[str, Any]) -> dict[str, Any]:
    """The `plan --reservation` format: `count` healthy sub-blocks, sb-1 and sb-2 full with the running pools' VMs,
    then `sb_<i>=patch`; pool i runs on on[i]."""
    subs = {f"sb-{i}": healthy_sub_block(f"sb-{i}") | {"inUseCount": 16 if i < 3 else 0} for i in range(1, count + 1)}
    for name, patch in changes.items():
        subs[name.replace("_", "-")] |= patch
    pools = [
        {"name": pool, "nodeConfigs": [{"reservationAffinities": [affinity(sb)]}]}
        for pool, sb in zip(POOLS, on, strict=False)
    ]
    return {
        "getReservation": {"name": RES, "selfLink": f"https://compute/{RES}", "blockNames": [BLOCK]},
        "getReservationBlock": {"name": BLOCK, "subBlockNames": list(subs)},
        "getReservationSubBlock": list(subs.values()),
        "getCluster": {"name": "tpu-cluster", "nodePools": pools},
    }


def node(pool: str, i: int, state: str = "HEALTHY") -> dict[str, Any]:
    cube = pool[-1]
    labels = {
        keys.NODE_POOL_LABEL: pool,
        keys.partition_label("4x4x4"): f"cube-{cube}",
        keys.partition_label("2x2x2"): f"c{cube}-{i // 2}",
        **{STATE_LABEL.format(shape): state if i == 0 else "HEALTHY" for shape in ("4x4x4", "2x2x2")},
    }
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gke-{pool}-{i}", "labels": labels}}


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
    default = [
        slice_("default-wl-sub-0", "2x2x2", ["c1-0"], owner="default/wl-sub"),
        slice_("default-wl-other-0", "2x2x2", ["c2-0"], owner="default/wl-other"),
    ]
    return {
        "nodes": {"kind": "NodeList", "items": nodes},  # as `kubectl get -o json` / the API answers
        "slices": slice_list if slice_list is not None else default,
        "workloads": workloads if workloads is not None else [workload("wl-sub"), workload("wl-other")],
    }


# A FAILED Slice on the first cube, and its workload, which the slice controller retries.
FAILED = [slice_("default-wl-sub-0", "2x2x2", ["c1-0"], "FAILED", owner="default/wl-sub")]
RETRYING = workload(
    "wl-sub",
    "Retry",
    [{"type": "TPUSliceFailure", "status": "True", "reason": "RuntimeFailure", "message": "x"}],
    "Slices are in states: 1 FAILED. Errors: default-wl-sub-0: hardware failure",
)
# A workload Kueue evicted for its admission check after its Slices failed to form; its Slices are gone.
EVICTED = workload(
    "wl-big",
    "Pending",
    [
        {"type": "Evicted", "status": "True", "reason": "AdmissionCheck", "message": "At least one ..."},
        {"type": "TPUSliceFailure", "status": "True", "reason": "FormationTimeout", "message": "stale"},
    ],
)


def copy_stack(tmp: Path) -> Path:
    """A copy of the project's files, so `--write` can be tried on the dev stack file."""
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, tmp / name)
    return tmp


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    return copy_stack(tmp_path)


def command(tmp: Path, *extra: str) -> list[str]:
    return ["--stack", "dev", "--dir", str(tmp), *set_arguments("dev"), *extra]


def run(
    tmp: Path, res: dict | str, cluster: dict | str, *extra: str, preview: Any = None, res_file: str = "res.json"
) -> tuple[int, str, str]:
    """The command on these files (a str is written as it is, unreadable JSON included)."""
    (tmp / res_file).write_text(res if isinstance(res, str) else json.dumps(res))
    (tmp / "state.json").write_text(cluster if isinstance(cluster, str) else json.dumps(cluster))
    out, err = io.StringIO(), io.StringIO()
    argv = command(tmp, "--reservation", str(tmp / res_file), "--cluster-state", str(tmp / "state.json"), *extra)
    code = cli.main(argv, out, err, **({"run_preview": preview} if preview is not None else {}))
    return code, out.getvalue(), err.getvalue()


def report(tmp: Path, res: dict, cluster: dict, *extra: str, preview: Any = None) -> tuple[int, dict[str, Any]]:
    """The command's --json report, which it writes alone (nothing on stderr)."""
    code, out, err = run(tmp, res, cluster, "--json", *extra, preview=preview)
    assert err == ""
    return code, json.loads(out)


def no_preview(*_args: Any) -> None: ...


def test_all_healthy_exits_0_with_one_row_per_cube(stack: Path) -> None:
    code, out, err = run(stack, reservation(), state())
    assert (code, err) == (0, "")
    table = out.splitlines()
    heading = ["CUBE", "SUB-BLOCK", "HEALTH", "PARTITIONS", "SLICES", "WORKLOADS", "AFFECTED", "ACTION"]
    assert table[1].split() == heading
    assert table[2].split()[:4] == ["0", "tpu7-pool-1", "sb-1", "HEALTHY"]
    assert "16 nodes HEALTHY" in table[2] and "1 ACTIVE" in table[2] and table[2].endswith("none")
    assert table[3].split()[:3] == ["1", "tpu7-pool-2", "sb-2"]
    assert out.rstrip().endswith("healthy: nothing to do")


def test_a_degraded_sub_block_under_a_running_pool_with_a_spare_proposes_the_move(stack: Path) -> None:
    code, data = report(stack, reservation(sb_1=DEGRADED), state("DEGRADED"), preview=no_preview)
    assert code == 1
    assert data["proposal"] == {"key": "gke-tpu-slicing:tpu.subBlocks", "value": ["sb-3", "sb-2"]}
    cube = data["cubes"][0]
    assert (cube["status"], cube["moveTo"], cube["degradedNodes"]) == ("action", "sb-3", 1)
    assert cube["action"].startswith("move to sb-3: its sub-block is health DEGRADED")
    assert data["cubes"][1]["status"] == "ok"
    assert [w["name"] for w in cube["workloads"]] == [] and cube["slices"][0]["owner"] == "default/wl-sub"


def test_the_move_is_previewed_by_the_change_preview_and_written_only_when_asked(stack: Path) -> None:
    before = (stack / "Pulumi.dev.yaml").read_text()
    code, out, _ = run(stack, reservation(sb_1=DEGRADED), state("DEGRADED"))
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
    run(stack, reservation(sb_1=DEGRADED), state("DEGRADED"), "--write", preview=no_preview)
    written = (stack / "Pulumi.dev.yaml").read_text()
    assert yaml.safe_load(written)["config"]["gke-tpu-slicing:tpu"]["subBlocks"] == ["sb-3", "sb-2"]
    # Every comment and every other line stays.
    assert [line for line in written.splitlines() if "subBlocks" not in line] == before.splitlines()


NO_WORKLOADS = ("--set", "demos.subslicing.enabled=false", "--set", "serving.enabled=false")


def test_a_move_under_running_workloads_is_a_move_after_draining_as_the_preview_refuses_it(stack: Path) -> None:
    """The change preview refuses a pool's replacement while the stack runs queued workloads (teardown.py
    replacement_refusals): the report says so, names the keys to turn off, and the three deployments in order."""
    code, data = report(stack, reservation(sb_1=DEGRADED), state("DEGRADED"))
    assert code == 1 and data["preview"]["rejected"] is True
    rejected = [c for c in data["preview"]["changes"] if c["action"] == "rejected"]
    assert [c["name"] for c in rejected] == ["teardown-pool-replacements"]
    assert data["nextAction"] == "move after draining"
    assert data["drainFirst"] == ["demos.subslicing.enabled", "serving.enabled"]  # dev runs no super-slicing demo
    off, move, on = data["steps"]
    assert "demos.subslicing.enabled: false, serving.enabled: false in Pulumi.dev.yaml" in off and "pulumi up" in off
    assert "tpu.subBlocks: [sb-3, sb-2]" in move
    assert "serving.enabled: true" in on
    _, text, _ = run(stack, reservation(sb_1=DEGRADED), state("DEGRADED"))
    assert "next step: move after draining" in text and "  1. turn the workloads off" in text
    # With the workloads off (step 1 deployed), the same move is a plain move, and the preview lets it through.
    code, data = report(stack, reservation(sb_1=DEGRADED), state("DEGRADED"), *NO_WORKLOADS)
    assert code == 1 and data["preview"]["rejected"] is False
    assert (data["nextAction"], data["drainFirst"], len(data["steps"])) == ("move", [], 1)
    # Nothing to move, or nothing a move fixes: no steps.
    assert report(stack, reservation(), state())[1]["nextAction"] == "none"
    no_spare = report(stack, reservation(2, sb_1=DEGRADED), state("DEGRADED"))[1]
    assert (no_spare["nextAction"], no_spare["steps"]) == ("other", [])


def test_a_move_of_a_protected_pool_is_a_move_after_unprotecting(stack: Path) -> None:
    """Staging and prod protect their pools (cluster.protect): Pulumi refuses the replacement the move is, so the
    steps turn protection off first and on again at the end, with the workloads when they run."""
    res, protect = reservation(sb_1=DEGRADED), ("--set", "cluster.protect=true")
    code, data = report(stack, res, state("DEGRADED"), *protect, *NO_WORKLOADS)
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
    data = report(stack, res, state("DEGRADED"), *protect)[1]
    assert data["nextAction"] == "move after draining"
    assert "demos.subslicing.enabled: false, serving.enabled: false, cluster.protect: false" in data["steps"][0]
    # The change preview of the move with step 1 deployed lets it through.
    data = report(stack, res, state("DEGRADED"), *NO_WORKLOADS)[1]
    assert data["preview"]["rejected"] is False and data["nextAction"] == "move"


def test_the_same_with_no_spare_says_so_and_what_else_helps(stack: Path) -> None:
    code, out, err = run(stack, reservation(2, sb_1=DEGRADED), state("DEGRADED"), preview=no_preview)
    assert (code, err) == (1, "")
    assert "no healthy free sub-block in block block-0 to move it to: its sub-block is health DEGRADED" in out
    assert "lower gke-tpu-slicing:tpu.cubes (fewer cubes), add capacity in another block" in out
    assert "proposed change" not in out
    # A spare used by something else is no spare.
    code, out, _ = run(stack, reservation(sb_1=DEGRADED, sb_3={"inUseCount": 4}), state(), preview=no_preview)
    assert code == 1 and "no healthy free sub-block" in out


def test_pending_maintenance_proposes_moving_before_it_starts(stack: Path) -> None:
    code, data = report(stack, reservation(sb_2=MAINTENANCE), state(), preview=no_preview)
    assert code == 1
    assert data["cubes"][1]["health"] == "HEALTHY, maintenance pending (3)"
    assert "without live migration the slices on it stop" in data["cubes"][1]["action"]
    assert data["proposal"]["value"] == ["sb-1", "sb-3"]


def test_a_failed_slice_on_a_healthy_sub_block(stack: Path) -> None:
    code, data = report(stack, reservation(), state(slice_list=FAILED, workloads=[RETRYING]), preview=no_preview)
    cube = data["cubes"][0]
    assert code == 1
    assert cube["slices"] == [{"name": "default-wl-sub-0", "state": "FAILED", "owner": "default/wl-sub"}]
    assert cube["workloads"] == [{"name": "default/wl-sub", "state": "retrying", "reason": "RuntimeFailure"}]
    assert cube["action"] == "move to sb-3: a Slice on it is FAILED"


def test_evicted_workloads_whose_slices_are_gone_are_reported_apart(stack: Path) -> None:
    other = workload("wl-preempted", "Pending", [{"type": "Evicted", "status": "True", "reason": "Preempted"}])
    code, out, _ = run(stack, reservation(), state(slice_list=[], workloads=[EVICTED, other]))
    assert code == 0  # Kueue requeued it and the controller retries: watched, not an action
    last = out.splitlines()[4]
    assert last.split()[:5] == ["-", "-", "-", "-", "-"] and "1 evicted" in last and "watch" in last
    assert "workload default/wl-big (evicted: FormationTimeout) (its Slices are gone)" in out
    assert "wl-preempted" not in out  # preemption is Kueue's business, not a slice failure


def test_a_rejected_admission_check_is_an_action(stack: Path) -> None:
    code, out, _ = run(
        stack, reservation(), state(workloads=[workload("wl-bad", "Rejected", msg="ConfigurationFailure")])
    )
    assert code == 1 and "reactivate the rejected workloads" in out


def test_a_cube_not_created_yet_is_watched_not_moved(stack: Path) -> None:
    """The second pool does not exist yet: the preview would put it on the first healthy free sub-block."""
    code, data = report(stack, reservation(on=("sb-1",)), state())
    assert code == 0 and data["proposal"] is None
    assert (data["cubes"][1]["status"], data["cubes"][1]["subBlock"]) == ("watch", "sb-3")
    assert data["cubes"][1]["action"] == "not running yet: the next `pulumi up` creates it"


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
    code, out, err = run(stack, res or reservation(), cluster or state())
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_arguments_exit_2(stack: Path) -> None:
    err = io.StringIO()
    assert cli.main(command(stack), io.StringIO(), err) == 2
    assert "give --reservation FILE, or --live" in err.getvalue()
    with pytest.raises(SystemExit) as exc:
        cli.main(["--stack", "dev", "--bogus"], io.StringIO(), io.StringIO())
    assert exc.value.code == 2


def test_partition_states_other_than_healthy_count_as_degraded() -> None:
    labels = [{STATE_LABEL.format("4x4x4"): "DEGRADED"}, {"other": "x"}]
    assert model.partition_summary(labels) == ("4x4x4 DEGRADED on 1 of 2 nodes", 1)
    assert model.partition_summary([]) == ("no nodes", 0)
    assert model.partition_summary([{STATE_LABEL.format("4x4x4"): "UNKNOWN"}, {"other": "x"}])[1] == 1


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
# Live: a fake Compute API (an injected session) and a fake Kubernetes API server


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
    compute = FakeCompute(
        {n: rest_sub_block(n, in_use=16) for n in ("sb-1", "sb-2")} | {"sb-3": rest_sub_block("sb-3")}
    )
    compute.subs["sb-1"] = rest_sub_block("sb-1", "DEGRADED", 16)
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


# ---------------------------------------------------------------------------------------------
# The reports in docs/health.md

DOC = ROOT / "docs" / "health.md"
DOC_BLOCK = re.compile(
    r"(```\n\$ python -m components health --stack dev (.*?)\n)(.*?)(\n\$ echo \$\?\n)(\d)(\n```)", re.S
)


def doc_cases() -> list[tuple[dict[str, Any] | None, dict[str, Any]]]:
    """The inputs of docs/health.md's reports, in page order (None: the unreadable reservation file)."""
    return [
        (reservation(), state()),
        (reservation(sb_1=DEGRADED), state("DEGRADED")),
        (reservation(2, sb_1=DEGRADED), state("DEGRADED")),
        (reservation(sb_2=MAINTENANCE), state()),
        (reservation(), state(slice_list=FAILED, workloads=[RETRYING])),
        (reservation(), state(slice_list=[], workloads=[EVICTED])),
        (None, state()),
    ]


def doc_reports(tmp: Path) -> str:
    """docs/health.md with each report as the command prints it now."""
    text = DOC.read_text()
    found = list(DOC_BLOCK.finditer(text))
    assert len(found) == len(doc_cases()), "docs/health.md: one report per case"
    for match, (res, cluster) in reversed(list(zip(found, doc_cases(), strict=True))):
        flags = match.group(2).split()
        extra = [f for f in flags if f.startswith("--") and f not in ("--reservation", "--cluster-state")]
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
        DOC.write_text(doc_reports(copy_stack(Path(tmp))))
    print(f"wrote {DOC.relative_to(ROOT)}")
