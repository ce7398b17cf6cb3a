"""`python -m components bootstrap`: what a project holds before a stack's first preview, once per project.

Runs components/bootstrap.py as a Pulumi program of its own through the Automation API, on a local backend: its
state cannot live in the state bucket it creates. That state names buckets, keys and accounts only (no secret), so its
stack's passphrase is empty (pulumi/pulumi pkg/secrets/passphrase/manager.go:380 takes a set, empty
PULUMI_CONFIG_PASSPHRASE). Then each `--stack` is created in the new state bucket with its Cloud KMS key as its secrets
provider (an existing stack is left as it is: the command that moves it is printed), and the values given are set in
its stack file. Run again with other values, it changes what changed and nothing else.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import yaml

from components.bootstrap import (
    PROJECT,
    Bootstrap,
    BootstrapArgs,
    CiArgs,
    secrets_provider_url,
    state_bucket_name,
    state_url,
)
from components.model.config.checks import PROJECT as STACK_PROJECT
from components.model.config.cluster_settings import ClusterSettings

ROOT = Path(__file__).resolve().parents[2]
# The bootstrap's project directory and local backend, one per user: the same every run and every clone.
HOME = Path("~/.gke-tpu-slicing/bootstrap")
POOL = re.compile(r"^projects/\d+/locations/global/workloadIdentityPools/[a-z0-9-]+$")
REPOSITORY = re.compile(r"^[\w.-]+/[\w.-]+$")
DEFAULT_STACK = "dev"  # --stack's default: the quick start's one stack


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m components bootstrap",
        description="create what a project needs before a stack's first preview: the APIs, the AI-zones feature, "
        "a versioned state bucket, the weights bucket, one Cloud KMS key per stack and the node service account; "
        "then create each stack in that state with its key as secrets provider",
    )
    p.add_argument("--project", required=True, help="the Google Cloud project of the stacks")
    p.add_argument("--region", required=True, help="the TPUs' region (us-central1): buckets and keys are kept there")
    p.add_argument("--stack", action="append", dest="stacks", help="a stack whose state lives here (default: dev)")
    p.add_argument("--weights-bucket", help="the model weights' bucket to create (omit when it exists)")
    p.add_argument("--reservation", help="set tpu.reservation.name in the stacks' files")
    p.add_argument("--state-bucket", help="the state bucket's name (default: pulumi-state-<hash of the project>)")
    p.add_argument("--cluster-name", help="the stacks' cluster.name, when their files set one")
    p.add_argument("--github-repo", help="owner/name: create each stack's CI accounts for this repository's jobs")
    p.add_argument("--workload-identity-pool", help="projects/<number>/locations/global/workloadIdentityPools/<id>")
    return p


def bootstrap_args(ns: argparse.Namespace) -> BootstrapArgs:
    """The program's arguments, or SystemExit naming every bad flag."""
    problems = []
    ci: CiArgs | None = None
    if bool(ns.github_repo) != bool(ns.workload_identity_pool):
        problems.append("--github-repo and --workload-identity-pool go together (the CI accounts need both)")
    elif ns.github_repo:
        if not REPOSITORY.match(ns.github_repo):
            problems.append(f"--github-repo {ns.github_repo!r}: owner/name")
        if not POOL.match(ns.workload_identity_pool):
            problems.append(f"--workload-identity-pool {ns.workload_identity_pool!r}: {POOL.pattern}")
        ci = {"repository": ns.github_repo, "pool": ns.workload_identity_pool}
    if problems:
        raise SystemExit("python -m components bootstrap: " + "; ".join(problems))
    args: BootstrapArgs = {
        "project": ns.project,
        "region": ns.region,
        "state_bucket": ns.state_bucket or state_bucket_name(ns.project),
        "stacks": ns.stacks or [DEFAULT_STACK],
        "cluster_name": ns.cluster_name or str(ClusterSettings.model_fields["name"].default),
    }
    if ns.weights_bucket:
        args["weights_bucket"] = ns.weights_bucket
    if ci is not None:
        args["ci"] = ci
    return args


def stack_values(ns: argparse.Namespace) -> dict[str, str]:
    """The stack-file values the flags name (config path -> value)."""
    values = {"gcp:project": ns.project}
    if ns.weights_bucket:
        values[f"{STACK_PROJECT}:serving.weightsBucket"] = ns.weights_bucket
    if ns.reservation:
        values[f"{STACK_PROJECT}:tpu.reservation.name"] = ns.reservation
    return values


def secrets_provider_of(stack: str, root: Path = ROOT) -> str | None:
    """The secrets provider a committed stack file names (None: none yet, or the default passphrase)."""
    path = root / f"Pulumi.{stack}.yaml"
    return (yaml.safe_load(path.read_text()) or {}).get("secretsprovider") if path.exists() else None


def run(ns: argparse.Namespace, auto: ModuleType, out: TextIO, root: Path = ROOT) -> int:
    args = bootstrap_args(ns)
    home = HOME.expanduser()
    home.mkdir(parents=True, exist_ok=True)
    program: Callable[[], None] = lambda: Bootstrap("bootstrap", args) and None  # noqa: E731
    workspace = auto.LocalWorkspaceOptions(
        work_dir=str(home),
        project_settings=auto.ProjectSettings(
            name=PROJECT, runtime="python", backend=auto.ProjectBackend(url=f"file://{HOME}")
        ),
        env_vars={"PULUMI_CONFIG_PASSPHRASE": ""},
        secrets_provider="passphrase",
    )
    boot = auto.create_or_select_stack(
        stack_name=args["project"], project_name=PROJECT, program=program, opts=workspace
    )
    boot.set_config("gcp:project", auto.ConfigValue(args["project"]))
    boot.up(on_output=lambda line: print(line, file=out))
    backend = state_url(args["state_bucket"])
    moves = []
    for stack in args["stacks"]:
        kms = secrets_provider_url(args["project"], args["region"], stack)
        opts = auto.LocalWorkspaceOptions(work_dir=str(root), env_vars={"PULUMI_BACKEND_URL": backend})
        try:
            target = auto.select_stack(stack_name=stack, work_dir=str(root), opts=opts)
            if secrets_provider_of(stack, root) != kms:
                moves.append(f"pulumi stack change-secrets-provider --stack {stack} '{kms}'")
        except auto.StackNotFoundError:
            # `pulumi stack init --secrets-provider`: writes the provider and its encrypted data key in the stack file.
            opts.secrets_provider = kms
            target = auto.create_stack(stack_name=stack, work_dir=str(root), opts=opts)
        for key, value in stack_values(ns).items():
            target.set_config(key, auto.ConfigValue(value), path=True)
    print(next_steps(backend, moves), file=out)
    return 0


def next_steps(backend: str, moves: Sequence[str]) -> str:
    lines = ["", "bootstrap done. Point the Pulumi CLI at the stacks' state:", f"  pulumi login {backend}"]
    if moves:
        lines += ["These stacks keep another secrets provider; move each to its Cloud KMS key, then commit its file:"]
        lines += [f"  {m}" for m in moves]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, auto: Any = None) -> int:
    ns = parser().parse_args(argv)
    if auto is None:
        from pulumi import automation as auto
    return run(ns, auto, stdout or sys.stdout)
