"""The GitHub workflows agree with the repository: every stack file is previewed and promoted in order, the
policy pack runs on both, the CLI matches the pinned SDK, and every setting they read is documented.

actionlint (in .ci/run) checks that the workflows are valid; these check that they do what docs/stacks.md says.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from itertools import pairwise
from typing import Any

import pytest
import yaml

from tests.harness import stack_run
from tests.stack_config import ROOT, STACKS, WORKFLOWS, workflow

PROMOTION = ["dev", "staging", "prod"]


def step(job: dict[str, Any], action: str) -> dict[str, Any]:
    """The job's first step that uses `action` (at any version)."""
    return next(s for s in job["steps"] if s.get("uses", "").startswith(f"{action}@"))


def pulumi_steps(wf: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        step["with"]
        for job in wf["jobs"].values()
        for step in job.get("steps", [])
        if step.get("uses", "").startswith("pulumi/actions@")
    ]


def test_every_stack_file_is_previewed_on_pull_requests() -> None:
    wf = workflow("cloud-preview.yml")
    assert wf[True] == {"pull_request": {"branches": ["main"]}}  # YAML 1.1 reads the key `on` as True
    preview = wf["jobs"]["preview"]
    assert set(STACKS) <= set(preview["strategy"]["matrix"]["stack"]) == set(PROMOTION)
    (action,) = pulumi_steps(wf)
    assert action["command"] == "preview"
    assert action["stack-name"] == "${{ matrix.stack }}"
    assert action["policyPacks"] == "policy"
    assert (action["diff"], action["comment-on-pr"], action["edit-pr-comment"]) == (True, True, True)
    assert preview["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}


def test_main_promotes_one_commit_through_dev_staging_prod() -> None:
    wf = workflow("deploy.yml")
    assert wf[True] == {"push": {"branches": ["main"]}}
    jobs = wf["jobs"]
    assert list(jobs) == PROMOTION
    assert set(STACKS) <= set(jobs)
    for before, stage in pairwise(PROMOTION):
        assert jobs[stage]["needs"] == before
    for stage, job in jobs.items():
        assert job["uses"] == "./.github/workflows/up.yml"
        assert job["with"] == {"stack": stage, "sha": "${{ github.sha }}"}
    up = workflow("up.yml")
    (job,) = up["jobs"].values()
    assert job["environment"] == "${{ inputs.stack }}"
    assert job["concurrency"] == {"group": "up-${{ inputs.stack }}", "cancel-in-progress": False}
    assert step(job, "actions/checkout")["with"]["ref"] == "${{ inputs.sha }}"
    (action,) = pulumi_steps(up)
    assert (action["command"], action["stack-name"], action["policyPacks"]) == ("up", "${{ inputs.stack }}", "policy")


def test_the_cli_is_the_release_of_the_pinned_sdk() -> None:
    pinned = re.search(r"^pulumi==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert pinned is not None
    for name in ("cloud-preview.yml", "up.yml"):
        assert {s["pulumi-version"] for s in pulumi_steps(workflow(name))} == {pinned.group(1)}, name


def test_no_job_gets_token_permissions_by_default() -> None:
    for path in WORKFLOWS.glob("*.yml"):
        assert yaml.safe_load(path.read_text())["permissions"] == {}, path.name


def test_every_setting_the_workflows_read_is_documented() -> None:
    used = {m for path in WORKFLOWS.glob("*.yml") for m in re.findall(r"\b(?:vars|secrets)\.(\w+)", path.read_text())}
    section = team_workflow_section()
    assert used == {"PULUMI_BACKEND_URL", *re.findall(r"`(GCP_\w+)`", section)}
    for name in used:
        assert f"`{name}`" in section, name


def team_workflow_section() -> str:
    page = (ROOT / "docs" / "stacks.md").read_text()
    return page[page.index("## Team workflow") :]


# --------------------------------------------------------------------------------------------- who gets credentials


def triggers(wf: dict[str, Any]) -> set[str]:
    return set(wf[True]) if isinstance(wf[True], dict) else {wf[True]}


def environments(name: str, job: dict[str, Any]) -> set[str]:
    """The GitHub environments a job runs in, its expressions resolved: the matrix's stacks, the callers' inputs."""
    env = job.get("environment")
    if env is None:
        return set()
    if "${{ matrix.stack }}" in env:
        return {env.replace("${{ matrix.stack }}", s) for s in job["strategy"]["matrix"]["stack"]}
    if "${{ inputs.stack }}" in env:  # a reusable workflow: the stacks its callers pass
        callers = [j for path in WORKFLOWS.glob("*.yml") for j in yaml.safe_load(path.read_text())["jobs"].values()]
        return {c["with"]["stack"] for c in callers if c.get("uses") == f"./.github/workflows/{name}"}
    return {env}


def settings_rows() -> list[tuple[set[str], str]]:
    """(environments, setting) of the docs' repository settings table: "environments `a`, `b` | variable `X`"."""
    rows = []
    for line in team_workflow_section().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| environment") and len(cells) == 3:
            rows.append((set(re.findall(r"`([\w-]+)`", cells[0])), f"{cells[1]} | {cells[2]}"))
    return rows


def setting(environment: str, what: str) -> list[str]:
    return [row for envs, row in settings_rows() if environment in envs and row.startswith(what)]


def all_jobs() -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    return [
        (path.name, wf, job_name, job)
        for path in sorted(WORKFLOWS.glob("*.yml"))
        for wf in [yaml.safe_load(path.read_text())]
        for job_name, job in wf["jobs"].items()
    ]


def test_no_workflow_holds_a_secret() -> None:
    # The stacks' secrets are decrypted with Cloud KMS keys through each environment's account: no passphrase, no key
    # file, in any job (a `pull_request` job runs the branch's own code, .ci/run included).
    for path in WORKFLOWS.glob("*.yml"):
        text = path.read_text()
        assert "secrets." not in text and "PULUMI_CONFIG_PASSPHRASE" not in text, path.name
        # pull_request_target runs with the base repository's secrets and write token, next to the branch's code.
        assert "pull_request_target" not in text, path.name


def test_every_job_with_cloud_credentials_runs_in_a_github_environment() -> None:
    """A job's cloud credentials come from an account that trusts one environment's token subject (the bootstrap
    declares that: tests/test_bootstrap.py), so a job without its environment gets nothing; and a job runs in an
    environment only past its protection rules, which live in the repository's settings, not in a branch."""
    seen = set()
    for name, wf, job_name, job in all_jobs():
        credentialed = job.get("permissions", {}).get("id-token") == "write" or any(
            s.get("uses", "").startswith("google-github-actions/auth@") for s in job.get("steps", [])
        )
        envs = environments(name, job)
        if job.get("uses"):  # a caller: its reusable workflow's job is checked on its own
            continue
        assert not credentialed or envs, f"{name} {job_name}: credentials outside a GitHub environment"
        for env in envs:
            seen.add(env)
            if "pull_request" in triggers(wf):
                # Reachable from any branch: a person approves each run.
                assert setting(env, "required reviewers"), f"{name} {job_name}: {env} needs required reviewers"
                assert env.startswith("preview-"), (name, env)
            else:
                # Reachable from main only: a branch's copy of a workflow that names it is refused.
                assert setting(env, "deployment branches | `main` only"), f"{name} {job_name}: {env}"
    assert seen == {"health", *PROMOTION, *(f"preview-{s}" for s in PROMOTION)}
    assert setting("prod", "required reviewers")


def test_the_jobs_that_run_every_pull_requests_code_hold_no_credentials() -> None:
    wf = workflow("preview.yml")
    for job_name, job in wf["jobs"].items():
        assert job["permissions"] == {"contents": "read"}, job_name
        assert "environment" not in job and "env" not in job, job_name
        assert "env" not in wf


def test_the_ci_accounts_trust_exactly_the_environments_their_jobs_run_in() -> None:
    from components.bootstrap import Bootstrap
    from tests.harness import declare

    pool = "projects/1/locations/global/workloadIdentityPools/github"
    args = {"project": "p", "region": "us-central1", "state_bucket": "s"}
    args |= {"stacks": PROMOTION, "cluster_name": "c", "ci": {"repository": "o/r", "pool": pool}}
    regs = declare(lambda: Bootstrap("bootstrap", args) and None)  # type: ignore[arg-type]
    trusted = {
        r.inputs["member"].rsplit(":environment:", 1)[1]
        for r in regs
        if r.type == "gcp:serviceaccount/iAMMember:IAMMember" and r.inputs["role"] == "roles/iam.workloadIdentityUser"
    }
    account_jobs = {
        env
        for name, _, _, job in all_jobs()
        for env in environments(name, job)
        if re.search(r"GCP_(PREVIEW|DEPLOY)_SERVICE_ACCOUNT", yaml.safe_dump(job))
    }
    assert trusted == account_jobs == {*PROMOTION, *(f"preview-{s}" for s in PROMOTION)}


# --------------------------------------------------------------------------------------------- offline diff


def test_every_stack_gets_an_offline_diff_against_the_pull_requests_base_without_credentials() -> None:
    wf = workflow("preview.yml")
    job = wf["jobs"]["offline-diff"]
    assert set(STACKS) <= set(job["strategy"]["matrix"]["stack"])
    # Fork-safe: a read-only token, no secrets, no cloud login, no Pulumi service.
    assert job["permissions"] == {"contents": "read"} and "env" not in job
    text = yaml.safe_dump(job)
    assert "secrets." not in text and "google-github-actions" not in text and "pulumi/actions" not in text
    assert step(job, "actions/checkout")["with"] == {"persist-credentials": False, "fetch-depth": 0}
    (run,) = [s for s in job["steps"] if "components diff" in s.get("run", "")]
    assert run["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    assert '--stack "$STACK"' in run["run"] and '--base "$BASE_SHA"' in run["run"]
    assert 'echo "$?" > "offline-diff/$STACK.rc"' in run["run"]
    upload = step(job, "actions/upload-artifact")
    assert upload["if"] == "always()" and upload["with"]["name"] == "offline-diff-${{ matrix.stack }}"
    # The check fails with the command's exit status: 1 when a change is rejected.
    assert job["steps"][-1]["run"] == 'exit "$(cat "offline-diff/$STACK.rc")"'
    # The job installs requirements-offline.txt (the program's and Helm's engine, so the charts' objects are compared
    # instead of ending `unknown`) and no test package: its placeholder filler must import nothing only the tests
    # install (else `fill` is empty and every stack's diff stops at its placeholders).
    (install,) = [s["run"] for s in job["steps"] if "pip install" in s.get("run", "")]
    assert install == "python -m pip install -r requirements-offline.txt -c constraints.txt"
    (filler,) = re.findall(r"python -c '([^']*)' \"\$STACK\"", run["run"])
    pins = {
        f: {line.split("==")[0].lower() for line in (ROOT / f).read_text().splitlines() if "==" in line}
        for f in ("requirements.txt", "requirements-offline.txt", "requirements-dev.txt")
    }
    pins["requirements-offline.txt"] |= pins["requirements.txt"]  # it includes requirements.txt (-r)
    block = (
        "import sys, importlib.metadata as md\n"
        f"dev = {sorted(pins['requirements-dev.txt'] - pins['requirements-offline.txt'])!r}\n"
        "for mod, dists in md.packages_distributions().items():\n"
        "    if all(d.lower().replace('_', '-') in dev for d in dists): sys.modules[mod] = None\n"
    )
    done = subprocess.run([sys.executable, "-c", block + filler, "dev"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("--set\n"), done.stderr


def test_one_comment_per_pull_request_is_posted_by_a_workflow_run_that_runs_no_pr_code() -> None:
    wf = workflow("preview-comment.yml")
    assert wf[True] == {"workflow_run": {"workflows": [workflow("preview.yml")["name"]], "types": ["completed"]}}
    assert wf["permissions"] == {}
    (job,) = wf["jobs"].values()
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    uses = [s.get("uses", "").split("@")[0] for s in job["steps"]]
    assert uses == ["actions/download-artifact", "actions/github-script"]  # no checkout, no run: step
    download = job["steps"][0]["with"]
    assert download["run-id"] == "${{ github.event.workflow_run.id }}" and download["pattern"] == "offline-diff-*"
    script = job["steps"][1]["with"]["script"]
    # One comment, found again by its marker and edited; only for the pull request the run was for.
    assert "updateComment" in script and "createComment" in script and "marker" in script
    assert "pr.head.sha !== process.env.HEAD_SHA" in script


def ci_stacks() -> set[str]:
    preview = workflow("cloud-preview.yml")["jobs"]["preview"]["strategy"]["matrix"]["stack"]
    return set(preview) | set(workflow("deploy.yml")["jobs"])


@pytest.mark.parametrize("stack", PROMOTION)
def test_ci_reaches_every_stack_it_deploys_through_the_dns_endpoint(stack: str) -> None:
    # GitHub-hosted runners have no fixed address, so no authorized network admits them: the program's
    # kubeconfig (which the workflows use: they write none of their own) targets the DNS-based endpoint, which
    # takes traffic from any network and checks IAM (container.clusters.connect) instead.
    assert stack in ci_stacks()
    run = stack_run(stack)
    cluster = run.get("gcp:container/cluster:Cluster", "cluster-gke").inputs
    assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    provider = run.get("pulumi:providers:kubernetes", "cluster-k8s")
    server = json.loads(provider.inputs["kubeconfig"]["value"])["clusters"][0]["cluster"]["server"]
    assert re.fullmatch(r"https://gke-[0-9a-f]+-\d+\.us-central1\.gke\.goog", server), server
    # the kubeconfig's credential plugin is installed in every job that runs the program
    for name in ("cloud-preview.yml", "up.yml"):
        jobs = [
            j
            for j in workflow(name)["jobs"].values()
            if any(s.get("uses", "").startswith("pulumi/") for s in j.get("steps", []))
        ]
        for job in jobs:
            gcloud = step(job, "google-github-actions/setup-gcloud")
            assert gcloud["with"]["install_components"] == "gke-gcloud-auth-plugin"


def test_one_virtualenv_name_everywhere_built_with_the_constraints() -> None:
    # Pulumi.yaml and the policy pack name `venv` (each relative to its own directory); the workflows, the quick
    # start and the offline page build those directories with the full pinned set, never `pulumi install`.
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    pack = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["options"]["virtualenv"] == pack["runtime"]["options"]["virtualenv"] == "venv"
    for name in ("cloud-preview.yml", "up.yml"):
        steps = [s.get("run", "") for j in workflow(name)["jobs"].values() for s in j.get("steps", [])]
        script = next(s for s in steps if "python -m venv venv" in s)
        assert "venv/bin/pip install -r requirements.txt -c constraints.txt" in script
        assert "policy/venv/bin/pip install -r policy/requirements.txt -c constraints.txt" in script
    build = "python3 -m venv venv && venv/bin/pip install -r requirements.txt -c constraints.txt"
    for page in ("README.md", "docs/offline.md", "docs/teardown.md"):
        text = (ROOT / page).read_text()
        # The offline page's venv is the same one with Helm's engine on top (requirements-offline.txt).
        assert (
            build.replace("requirements.txt", "requirements-offline.txt" if "offline" in page else "requirements.txt")
            in text
        ), page
        assert ".venv" not in text and "pulumi install &&" not in text, page
