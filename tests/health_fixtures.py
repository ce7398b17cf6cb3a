"""What the health tests share: the reservation and cluster state of the dev stack's two cubes, healthy or
not, and `python -m components health` run on them from files."""

# The Slices, node labels and Workloads are shaped as the slice controller (xpk `slice/` at 250d4b3c) and Kueue
# v0.17.4 write them: the `cloud.google.com/gke-tpu-partition-<shape>-state` labels (core/constants.go), the
# Slice's Ready condition reason (MMIGHealthStatus*), the Workload's `TPUSliceFailure` condition and its
# admission check state (workload_controller.go updateWorkloadStatus), Kueue's `Evicted` condition with
# reason `AdmissionCheck` (pkg/controller/core/workload_controller.go:767).

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

from components.cli import health as cli
from components.cli.mocks import healthy_sub_block
from components.model import keys
from tests.fakes import slice_
from tests.stack_config import PROJECT_ID, ROOT, set_arguments

RES, BLOCK = "tpu7x-reservation", "block-0"
COMPUTE = "https://www.googleapis.com/compute/v1"
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
        "getReservation": {
            "name": RES,
            "selfLink": f"{COMPUTE}/projects/{PROJECT_ID}/zones/us-central1-ai1a/reservations/{RES}",
            "blockNames": [BLOCK],
        },
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


def copy_stack(tmp: Path) -> Path:
    """A copy of the project's files, so `--write` can be tried on the dev stack file."""
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, tmp / name)
    return tmp


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
