"""The hourly health workflow (.github/workflows/health.yml): what it may do, with which token, and that it
proposes changes through a pull request only. actionlint (in .ci/run) checks that it is valid."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from components.model.observability import health
from tests.stack_config import STACKS, workflow


def uses(job: dict[str, Any]) -> list[str]:
    return [s["uses"] for s in job["steps"] if "uses" in s]


def test_it_runs_every_hour_for_every_stack() -> None:
    wf = workflow("health.yml")
    (cron,) = wf[True]["schedule"]  # YAML 1.1 reads the key `on` as True
    minute, hour, *rest = cron["cron"].split()
    assert minute.isdigit() and hour == "*" and rest == ["*", "*", "*"]
    for job in wf["jobs"].values():
        assert sorted(job["strategy"]["matrix"]["stack"]) == STACKS


def test_the_check_reads_with_federated_credentials_and_cannot_write() -> None:
    check = workflow("health.yml")["jobs"]["check"]
    assert check["permissions"] == {"contents": "read", "id-token": "write"}
    (auth,) = [s for s in check["steps"] if s.get("uses", "").startswith("google-github-actions/auth@")]
    assert auth["with"] == {
        "workload_identity_provider": "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}",
        "service_account": "${{ vars.GCP_HEALTH_SERVICE_ACCOUNT }}",
    }
    (run,) = [s["run"] for s in check["steps"] if "components health" in s.get("run", "")]
    assert '--stack "$STACK" --live --gke --write' in run and 'echo "$?" > health/rc' in run
    assert "pulumi" not in run.replace("Pulumi.$STACK.yaml", "")  # no `pulumi up`, nothing applied


def test_the_pull_request_job_holds_the_write_token_and_no_cloud_credentials() -> None:
    job = workflow("health.yml")["jobs"]["pull-request"]
    assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert job["needs"] == "check"
    assert not [u for u in uses(job) if u.startswith("google-github-actions/")]
    script = job["steps"][-1]["run"]
    # one pull request per stack, found again by its branch; closed when healthy; a failed check fails
    assert 'branch="health/$STACK"' in script and "gh pr list --head" in script
    assert "gh pr close" in script and "gh pr edit" in script and "gh pr create" in script
    assert 'if [ "$rc" != 0 ] && [ "$rc" != 1 ]' in script
    # it changes the stack file only
    assert re.findall(r"git commit [^\n]*", script) == [
        'git commit -qm "health: move $STACK\'s cubes off unhealthy sub-blocks (tpu.subBlocks)" "Pulumi.$STACK.yaml"'
    ]


def test_actions_are_pinned_as_the_other_workflows_pin_them() -> None:
    others = {
        u.split("@")[0]: u.split("@")[1]
        for name in ("preview.yml", "up.yml", "preview-comment.yml")
        for job in workflow(name)["jobs"].values()
        for u in uses(job)
    }
    for job in workflow("health.yml")["jobs"].values():
        for u in uses(job):
            action, ref = u.split("@")
            assert others.get(action) == ref, u


def _run_pull_request_step(
    tmp: Path, report: str, ref: str = "refs/heads/main", code: int = 0, open_pr: str = "", moved: bool = True
) -> str:
    """The pull-request job's script, run with stand-ins for `gh` and `git` (each call logged to calls.log): the
    body it would post ("" when it posts none). `open_pr`: what `gh pr list` finds; `moved`: the check job proposes
    a changed stack file."""
    step = next(s for s in workflow("health.yml")["jobs"]["pull-request"]["steps"] if "run" in s)
    bin_ = tmp / "bin"
    bin_.mkdir(parents=True)
    for tool in ("gh", "git"):  # `gh pr list` finds `open_pr`; every git command succeeds
        listed = f'[ "$1 $2" = "pr list" ] && echo "{open_pr}"\n' if tool == "gh" else ""
        (bin_ / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{tmp}/calls.log"\n{listed}exit 0\n')
        (bin_ / tool).chmod(0o755)
    (tmp / "health").mkdir()
    proposed = "config: {moved: true}\n" if moved else "config: {}\n"
    files = {"rc": "1\n", "report.txt": report, "Pulumi.dev.yaml": proposed}  # the check job's
    for name, text in files.items():
        (tmp / "health" / name).write_text(text)
    (tmp / "Pulumi.dev.yaml").write_text("config: {}\n")
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "STACK": "dev", "GH_TOKEN": "x", "GITHUB_REF": ref}
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp, env=env, capture_output=True, text=True)
    assert done.returncode == code, done.stdout + done.stderr
    (tmp / "stdout").write_text(done.stdout)
    body = tmp / "body.md"
    return body.read_text() if body.exists() else ""


def test_a_run_dispatched_on_another_branch_opens_and_closes_nothing(tmp_path: Path) -> None:
    """`workflow_dispatch` may run on any branch: a pull request cut from there would carry that branch's unmerged
    commits into main, and a healthy run there would close main's health pull request."""
    assert _run_pull_request_step(tmp_path / "a", f"next step: {health.MOVE}:\naction needed\n", "refs/heads/x") == ""
    assert not (tmp_path / "a" / "calls.log").exists()  # no git, no gh
    _run_pull_request_step(tmp_path / "b", f"next step: {health.MOVE}:\naction needed\n")  # on main it does
    assert "gh pr create" in (tmp_path / "b" / "calls.log").read_text()


def test_the_pull_request_says_do_not_merge_yet_when_the_move_needs_a_drain(tmp_path: Path) -> None:
    """The previews refuse the move while the stack runs queued workloads: the body says so first, matching the
    line the command prints (components/model/observability/health.py MOVE_AFTER_DRAINING)."""
    drain = f"proposed change: x\nnext step: {health.MOVE_AFTER_DRAINING}: the preview refuses ...\n  1. turn off\n"
    drain += "\naction needed\n"  # the report's last line (components/cli/health.py main)
    body = _run_pull_request_step(tmp_path / "a", drain)
    assert body.startswith("**Do not merge yet.**") and drain in body
    unprotect = f"next step: {health.MOVE_AFTER_UNPROTECTING}: Pulumi refuses ...\n\naction needed\n"
    assert _run_pull_request_step(tmp_path / "c", unprotect).startswith("**Do not merge yet.**")
    plain = _run_pull_request_step(tmp_path / "b", f"proposed change: x\nnext step: {health.MOVE}:\n\naction needed\n")
    assert "Do not merge yet" not in plain and plain.startswith("The hourly health check proposes")


def test_exit_1_without_the_report_is_a_check_that_could_not_run(tmp_path: Path) -> None:
    """Python exits 1 on an uncaught error too: that is no "action needed", and no pull request comes of it."""
    crash = "Traceback (most recent call last):\n  ...\nKeyError: 'name'\n"
    assert _run_pull_request_step(tmp_path, crash, code=1) == ""
    assert "could not run (exit 1, no report)" in (tmp_path / "stdout").read_text()
    assert not (tmp_path / "calls.log").exists()


def test_a_run_with_no_move_to_propose_closes_the_stale_proposal(tmp_path: Path) -> None:
    """An action no tpu.subBlocks change gives (no spare sub-block): the open pull request's move is an earlier
    run's, onto sub-blocks this run no longer finds usable, so it is closed, saying why, and the run fails."""
    report = "next step: no spare sub-block ...\n\naction needed\n"
    assert _run_pull_request_step(tmp_path / "a", report, code=1, open_pr="7", moved=False) == ""
    calls = (tmp_path / "a" / "calls.log").read_text()
    assert "gh pr close 7 --delete-branch --comment" in calls and "no longer" in calls
    assert "gh pr create" not in calls and "gh pr edit" not in calls
    _run_pull_request_step(tmp_path / "b", report, code=1, moved=False)  # nothing open: nothing to close
    assert "gh pr close" not in (tmp_path / "b" / "calls.log").read_text()
