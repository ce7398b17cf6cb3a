"""`python -m components health` from files: one row per cube, failed Slices, evicted and rejected workloads,
unreadable input; the reports in docs/health.md are what it prints for these cases."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from components.cli import health as cli
from components.model.observability import health as model
from tests.fakes import slice_
from tests.health_fixtures import (
    DEGRADED,
    MAINTENANCE,
    STATE_LABEL,
    command,
    copy_stack,
    no_preview,
    report,
    reservation,
    run,
    state,
    workload,
)
from tests.stack_config import ROOT

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


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    return copy_stack(tmp_path)


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


def test_a_failed_slice_on_a_healthy_sub_block(stack: Path) -> None:
    code, data = report(stack, reservation(), state(slice_list=FAILED, workloads=[RETRYING]), preview=no_preview)
    cube = data["cubes"][0]
    assert code == 1
    assert cube["slices"] == [{"name": "default-wl-sub-0", "state": "FAILED", "owner": "default/wl-sub"}]
    assert cube["workloads"] == [{"name": "default/wl-sub", "state": "retrying", "reason": "RuntimeFailure"}]
    assert cube["action"] == "move to sb-3: a Slice on it is FAILED"


def test_evicted_workloads_whose_slices_are_gone_are_reported_apart(stack: Path) -> None:
    # Preempted, its quota not released yet (Kueue resets the check to Pending on any eviction): not pending either.
    preempted = [
        {"type": "Evicted", "status": "True", "reason": "Preempted"},
        {"type": "QuotaReserved", "status": "True"},
    ]
    other = workload("wl-preempted", "Pending", preempted, "Reset to Pending after eviction. Previously: Ready")
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


def test_a_workload_kueue_deactivated_for_a_rejected_check_is_still_an_action(stack: Path) -> None:
    """Kueue turns a Rejected check around at once: it deactivates the Workload (spec.active false), evicts it with
    reason DeactivatedDueToAdmissionCheck and resets the check to Pending (kueue v0.17.4
    pkg/controller/core/workload_controller.go:754, :385, :458-483; pkg/workload/workload.go:1878 ReasonWithCause;
    pkg/workload/admissionchecks.go:89 resetChecksOnEviction). That settled state is what the check reads."""
    evicted = {"type": "Evicted", "status": "True", "reason": "DeactivatedDueToAdmissionCheck", "message": "x"}
    deactivated = workload("wl-bad", "Pending", [evicted], "Reset to Pending after eviction. Previously: Rejected")
    deactivated["spec"] = {"active": False}
    code, out, _ = run(stack, reservation(), state(slice_list=[], workloads=[deactivated]))
    assert code == 1 and "reactivate the rejected workloads" in out
    assert "workload default/wl-bad (rejected: DeactivatedDueToAdmissionCheck)" in out
    deactivated["spec"] = {"active": True}  # reactivated by its owner: Kueue requeues it, nothing left to do
    code, out, _ = run(stack, reservation(), state(slice_list=[], workloads=[deactivated]))
    assert code == 0 and "wl-bad" not in out


def test_a_workload_whose_slices_are_still_being_created_is_not_called_requeued(stack: Path) -> None:
    """Admitted, its slice check Pending while the controller creates its Slices (xpk workload_controller.go
    buildAdmissionCheckMessage "Waiting for Slices to be created"): nothing failed, nothing was requeued."""
    reserved = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}]
    new = workload("wl-new", "Pending", reserved, "Waiting for Slices to be created")
    code, out, _ = run(stack, reservation(), state(slice_list=[], workloads=[new]))
    assert code == 0
    assert "workload default/wl-new (pending: Waiting for Slices to be created) (no Slice of it yet)" in out
    assert "its Slices are gone" not in out and "requeued" not in out
    forming = [slice_("default-wl-new-0", "2x2x2", ["c1-0"], "ACTIVATING", owner="default/wl-new")]
    code, data = report(stack, reservation(), state(slice_list=forming, workloads=[new]))
    assert code == 0 and data["cubes"][0]["action"] == "watch: Slices are forming or being dismantled"


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
        (json.dumps({"getReservation": {}}), None, "reservation tpu7x-reservation (project my-tpu-project) is in none"),
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
