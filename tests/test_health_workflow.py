"""The hourly health workflow (.github/workflows/health.yml): what it may do, with which token, and that it
proposes changes through a pull request only. actionlint (in .ci/run) checks that it is valid."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"


def workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def uses(job: dict[str, Any]) -> list[str]:
    return [s["uses"] for s in job["steps"] if "uses" in s]


def test_it_runs_every_hour_for_every_stack() -> None:
    wf = workflow("health.yml")
    (cron,) = wf[True]["schedule"]  # YAML 1.1 reads the key `on` as True
    minute, hour, *rest = cron["cron"].split()
    assert minute.isdigit() and hour == "*" and rest == ["*", "*", "*"]
    stacks = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml"))
    for job in wf["jobs"].values():
        assert sorted(job["strategy"]["matrix"]["stack"]) == stacks


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
    assert 'if [ "$rc" != 1 ]' in script
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
