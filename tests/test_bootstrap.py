"""The bootstrap (components/bootstrap.py, `python -m components bootstrap`) under Pulumi's mock runtime: everything a
stack's first preview and `up` need exists, the CI accounts trust only their GitHub environment, the preview account
only reads, the deploy account acts as the node service account alone and grants only the roles the stack grants."""

from __future__ import annotations

import argparse
import io
import re
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from components import bootstrap as boot
from components.bootstrap import Bootstrap, BootstrapArgs
from components.cli import bootstrap as cli
from tests.harness import Registration, declare, run_program, stack_run
from tests.stack_config import OPT_IN_ADDONS, STACKS

POOL = "projects/123456789012/locations/global/workloadIdentityPools/github"
ARGS: BootstrapArgs = {
    "project": "my-tpu-project",
    "region": "us-central1",
    "state_bucket": "my-state",
    "weights_bucket": "gemma3-weights",
    "stacks": ["dev", "staging"],
    "cluster_name": "qwen-serving-cluster",
    "ci": {"repository": "my-org/gke-tpu-slicing", "pool": POOL},
}
ACCOUNT = "gcp:serviceaccount/account:Account"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
BUCKET = "gcp:storage/bucket:Bucket"
KEY = "gcp:kms/cryptoKey:CryptoKey"


@cache
def registrations(**changes: Any) -> tuple[Registration, ...]:
    """What the bootstrap registers with ARGS changed; a change to None leaves the key out."""
    args = {k: v for k, v in {**ARGS, **changes}.items() if v is not None}
    return tuple(declare(lambda: Bootstrap("bootstrap", args) and None))  # type: ignore[arg-type]


def of(regs: tuple[Registration, ...], typ: str) -> list[Registration]:
    return [r for r in regs if r.type == typ]


def by_name(regs: tuple[Registration, ...], name: str) -> Registration:
    (reg,) = [r for r in regs if r.name == name]
    return reg


def granted(regs: tuple[Registration, ...], member: str) -> list[tuple[str, Registration]]:
    """(role, binding) of every IAM binding to `member`."""
    return [(r.inputs["role"], r) for r in regs if r.type.endswith("IAMMember") and r.inputs.get("member") == member]


def email(kind: str, stack: str) -> str:
    return f"serviceAccount:pulumi-{kind}-{stack}@{ARGS['project']}.iam.gserviceaccount.com"


# --------------------------------------------------------------------------------------------- before the first up


def test_the_state_and_weights_buckets_are_private_regional_and_kept() -> None:
    regs = registrations()
    state, weights = by_name(regs, "bootstrap-state"), by_name(regs, "bootstrap-weights")
    assert state.inputs["name"] == "my-state" and weights.inputs["name"] == "gemma3-weights"
    assert state.inputs["versioning"] == {"enabled": True}  # every checkpoint an update overwrites can be restored
    assert "versioning" not in weights.inputs
    for bucket in (state, weights):
        # The provider upper-cases `location` (StateFunc); the TPUs' region either way.
        assert bucket.inputs["location"].upper() == "US-CENTRAL1"
        assert bucket.inputs["uniformBucketLevelAccess"] is True
        assert bucket.inputs["publicAccessPrevention"] == "enforced"
        assert bucket.options["retainOnDelete"] is True and "forceDestroy" not in bucket.inputs
    # An existing weights bucket is not created again.
    assert [b.name for b in of(registrations(weights_bucket=None), BUCKET)] == ["bootstrap-state"]


def test_the_state_bucket_name_is_derived_without_the_project_id() -> None:
    name = boot.state_bucket_name("my-tpu-project")
    assert name != boot.state_bucket_name("other-project") and "my-tpu-project" not in name
    assert re.fullmatch(r"[a-z0-9-]{3,63}", name)
    assert boot.state_url(name) == f"gs://{name}/gke-tpu-slicing"


def test_the_apis_and_ai_zones_a_first_preview_reads_are_on() -> None:
    regs = registrations()
    services = {r.inputs["service"] for r in of(regs, "gcp:projects/service:Service")}
    # getEngineVersions (GKE), the reservation reads and the feature (Compute), the keys (KMS), the buckets.
    assert {"container.googleapis.com", "compute.googleapis.com", "cloudkms.googleapis.com"} <= services
    for service in of(regs, "gcp:projects/service:Service"):
        assert service.inputs["disableOnDestroy"] is False
    (feature,) = of(regs, "gcp:compute/previewFeature:PreviewFeature")
    assert (feature.inputs["name"], feature.inputs["activationStatus"]) == ("ai-zones-visibility", "ENABLED")
    compute = by_name(regs, "bootstrap-project-compute")
    assert compute.urn in feature.dependencies


def test_one_rotating_kms_key_per_stack_kept_on_destroy() -> None:
    regs = registrations()
    keys = {k.inputs["name"]: k for k in of(regs, KEY)}
    assert set(keys) == {"dev", "staging"}
    ring = by_name(regs, "bootstrap-keys")
    assert ring.inputs["name"] == boot.KEY_RING and ring.options["retainOnDelete"] is True
    for key in keys.values():
        assert key.inputs["purpose"] == "ENCRYPT_DECRYPT" and key.inputs["rotationPeriod"] == "7776000s"
        assert key.options["retainOnDelete"] is True  # destroyed key material loses every secret it encrypted
    assert boot.secrets_provider_url("p", "us-central1", "prod") == (
        "gcpkms://projects/p/locations/us-central1/keyRings/gke-tpu-slicing/cryptoKeys/prod"
    )


def test_the_node_service_account_is_the_one_the_stack_adopts() -> None:
    regs = registrations()
    ours = by_name(regs, "bootstrap-nodes").inputs
    for stack in STACKS:
        (theirs,) = stack_run(stack).of_type(ACCOUNT)
        assert (theirs.inputs["accountId"], theirs.inputs["displayName"]) == (ours["accountId"], ours["displayName"])
        # The stack adopts the account the bootstrap made, and leaves it (and its grants) on destroy.
        assert theirs.inputs["createIgnoreAlreadyExists"] is True
        assert theirs.inputs["deletionPolicy"] == "ABANDON"
    assert ours["createIgnoreAlreadyExists"] is True


# --------------------------------------------------------------------------------------------- the CI accounts


def test_each_ci_account_trusts_only_its_github_environment() -> None:
    regs = registrations()
    trusts = {
        r.name: r.inputs["member"] for r in of(regs, SA_MEMBER) if r.inputs["role"] == "roles/iam.workloadIdentityUser"
    }
    subject = f"principal://iam.googleapis.com/{POOL}/subject/repo:my-org/gke-tpu-slicing:environment:"
    assert trusts == {
        **{f"bootstrap-preview-{s}-github": f"{subject}preview-{s}" for s in ARGS["stacks"]},
        **{f"bootstrap-deploy-{s}-github": f"{subject}{s}" for s in ARGS["stacks"]},
    }
    # No account trusts a whole repository (principalSet), i.e. any branch's workflow.
    assert not [r for r in regs if "principalSet" in str(r.inputs)]
    # Without CI arguments: no accounts, no grants.
    solo = registrations(ci=None)
    assert [r.inputs["accountId"] for r in of(solo, ACCOUNT)] == ["qwen-serving-cluster-nodes"]
    assert not [r for r in solo if r.type.endswith("IAMMember")]


def test_the_preview_account_reads_only_what_a_preview_reads() -> None:
    regs = registrations()
    (role,) = of(regs, "gcp:projects/iAMCustomRole:IAMCustomRole")
    permissions = role.inputs["permissions"]
    # docs/permissions.md, the preview account's custom role.
    assert set(permissions) == {
        "resourcemanager.projects.get",
        "container.clusters.get",
        "container.clusters.connect",
        "compute.reservations.get",
        "compute.reservationBlocks.get",
        "compute.reservationBlocks.list",
        "compute.reservationSubBlocks.get",
        "compute.reservationSubBlocks.list",
    }
    # Reads: no verb that changes anything, nothing of container.developer's namespaced objects.
    verbs = {p.rsplit(".", 1)[1] for p in permissions}
    assert verbs <= {"get", "list", "connect"}, verbs
    assert not [p for p in permissions if p.startswith("container.") and not p.startswith("container.clusters.")]
    # On the project, a listing would reach every bucket's object names, the other environments' state included.
    assert not [p for p in permissions if p.startswith("storage.")]
    lister = "roles/storage.legacyBucketReader"
    for stack in ARGS["stacks"]:
        roles = {r: b for r, b in granted(regs, email("preview", stack))}
        assert set(roles) == {role.name, "roles/storage.objectViewer", "roles/cloudkms.cryptoKeyDecrypter", lister}
        # The state read on the state bucket only, the listing on the weights bucket only; its own stack's key only.
        assert roles["roles/storage.objectViewer"].inputs["bucket"] == "my-state"
        assert roles[lister].inputs["bucket"] == "gemma3-weights"
        assert roles[lister].property_dependencies["bucket"] == [by_name(regs, "bootstrap-weights").urn]
        key = roles["roles/cloudkms.cryptoKeyDecrypter"]
        assert key.property_dependencies["cryptoKeyId"] == [by_name(regs, f"bootstrap-key-{stack}").urn]
    # A weights bucket the bootstrap does not make gets no grant from it (docs/permissions.md: granted by hand).
    assert lister not in {r for r, _ in granted(registrations(weights_bucket=None), email("preview", "dev"))}


def test_the_preview_permissions_cover_every_read_the_program_makes() -> None:
    """Every invoke of every stack file's run is in the preview role, or reads nothing the role could grant: GKE's
    getServerConfig (no permission in GKE's API permission table) and the state (the state bucket's grant)."""
    invokes = {c.token for stack in STACKS for c in stack_run(stack).mocks.calls}
    covered = {g.on for g in (*boot.PREVIEW_PERMISSIONS, boot.PREVIEW_WEIGHTS)}
    covered |= {f"gcp:compute/{t}:{t}" for t in ("getReservation", "getReservationBlock")}
    no_role = {"gcp:container/getEngineVersions:getEngineVersions", "pulumi:pulumi:readStackOutputs"}
    assert invokes - covered - no_role == set()


def test_the_deploy_account_acts_as_the_node_account_alone_and_grants_only_the_stacks_roles() -> None:
    regs = registrations()
    node = by_name(regs, "bootstrap-nodes")
    for stack in ARGS["stacks"]:
        roles = granted(regs, email("deploy", stack))
        project_roles = {r for r, b in roles if b.type == PROJECT_MEMBER}
        assert project_roles == {g.name for g in boot.DEPLOY_PROJECT_ROLES} | {"roles/resourcemanager.projectIamAdmin"}
        # Never on the project: acting as any account (the Compute Engine default one is Editor) or administering
        # accounts (which includes granting that).
        assert not project_roles & {"roles/iam.serviceAccountUser", "roles/iam.serviceAccountAdmin", "roles/owner"}
        (user,) = [b for r, b in roles if r == "roles/iam.serviceAccountUser"]
        assert user.type == SA_MEMBER and user.property_dependencies["serviceAccountId"] == [node.urn]
        (admin,) = [b for r, b in roles if r == "roles/resourcemanager.projectIamAdmin"]
        # The node account's role and KEDA's read of Managed Prometheus (docs/permissions.md, the deploy account).
        assert admin.inputs["condition"]["expression"] == (
            "api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', [])"
            ".hasOnly(['roles/container.defaultNodeServiceAccount', 'roles/monitoring.viewer'])"
        )


def test_the_deploy_account_may_grant_every_project_role_the_stack_grants() -> None:
    # A new project-level grant in the program fails here until the deploy account's condition allows it.
    runs = {stack: stack_run(stack) for stack in STACKS} | {"dev+opt-in": run_program(OPT_IN_ADDONS)}
    for stack, run in runs.items():
        roles = {r.inputs["role"] for r in run.of_type(PROJECT_MEMBER)}
        assert roles and roles <= set(boot.GRANTABLE_PROJECT_ROLES), (stack, roles)


# --------------------------------------------------------------------------------------------- the command


class FakeStack:
    def __init__(self, name: str, log: list[tuple[Any, ...]]) -> None:
        self.name, self.log = name, log

    def set_config(self, key: str, value: Any, path: bool = False) -> None:
        self.log.append(("config", self.name, key, value.value, path))

    def up(self, on_output: Any) -> None:
        self.log.append(("up", self.name))


class FakeAutomation:
    """The Automation API calls the command makes: an inline bootstrap stack, then each stack in the new state."""

    class StackNotFoundError(Exception):
        pass

    def __init__(self, existing: set[str]) -> None:
        self.existing, self.log = existing, []
        self.LocalWorkspaceOptions = lambda **kw: SimpleNamespace(**{"secrets_provider": None, **kw})
        self.ProjectSettings = self.ProjectBackend = lambda **kw: SimpleNamespace(**kw)
        self.ConfigValue = lambda value: SimpleNamespace(value=value)

    def create_or_select_stack(self, stack_name: str, project_name: str, program: Any, opts: Any) -> FakeStack:
        self.log.append(("bootstrap", stack_name, project_name, opts.env_vars, opts.project_settings.backend.url))
        return FakeStack(stack_name, self.log)

    def select_stack(self, stack_name: str, work_dir: str, opts: Any) -> FakeStack:
        if stack_name not in self.existing:
            raise self.StackNotFoundError(stack_name)
        self.log.append(("select", stack_name, opts.env_vars["PULUMI_BACKEND_URL"]))
        return FakeStack(stack_name, self.log)

    def create_stack(self, stack_name: str, work_dir: str, opts: Any) -> FakeStack:
        self.log.append(("create", stack_name, opts.env_vars["PULUMI_BACKEND_URL"], opts.secrets_provider))
        return FakeStack(stack_name, self.log)


def test_the_command_creates_each_stack_in_the_new_state_with_its_kms_key(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(cli, "HOME", tmp_path / "home")
    (tmp_path / "Pulumi.staging.yaml").write_text(yaml.safe_dump({"encryptionsalt": "v1:abc", "config": {}}))
    auto, out = FakeAutomation(existing={"staging"}), io.StringIO()
    argv = ["--project", "p1", "--region", "us-central1", "--stack", "dev", "--stack", "staging"]
    argv += ["--weights-bucket", "w1", "--reservation", "r1"]
    assert cli.run(cli.parser().parse_args(argv), auto, out, root=tmp_path) == 0
    state = boot.state_url(boot.state_bucket_name("p1"))
    kms = boot.secrets_provider_url("p1", "us-central1", "dev")
    assert auto.log[:2] == [
        ("bootstrap", "p1", boot.PROJECT, {"PULUMI_CONFIG_PASSPHRASE": ""}, f"file://{cli.HOME}"),
        ("config", "p1", "gcp:project", "p1", False),
    ]
    assert ("create", "dev", state, kms) in auto.log and ("select", "staging", state) in auto.log
    for stack in ("dev", "staging"):
        assert ("config", stack, "gke-tpu-slicing:serving.weightsBucket", "w1", True) in auto.log
        assert ("config", stack, "gke-tpu-slicing:tpu.reservation.name", "r1", True) in auto.log
    text = out.getvalue()
    assert f"pulumi login {state}" in text
    # The existing passphrase stack is left alone, and the command that moves it is printed.
    staging_kms = boot.secrets_provider_url("p1", "us-central1", "staging")
    assert f"pulumi stack change-secrets-provider --stack staging '{staging_kms}'" in text
    assert "--stack dev" not in text.split("another secrets provider", 1)[1]


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--github-repo", "o/r"], "go together"),
        (
            ["--github-repo", "o/r", "--workload-identity-pool", "pools/github"],
            "--workload-identity-pool 'pools/github'",
        ),
        (["--github-repo", "o", "--workload-identity-pool", POOL], "--github-repo 'o': owner/name"),
    ],
)
def test_bad_ci_flags_are_refused_together(extra: list[str], fragment: str) -> None:
    ns = cli.parser().parse_args(["--project", "p", "--region", "us-central1", *extra])
    with pytest.raises(SystemExit, match=re.escape(fragment)):
        cli.bootstrap_args(ns)


def test_defaults_come_from_the_settings_model() -> None:
    args = cli.bootstrap_args(cli.parser().parse_args(["--project", "p", "--region", "us-central1"]))
    assert args["stacks"] == ["dev"] and "ci" not in args and "weights_bucket" not in args
    assert args["state_bucket"] == boot.state_bucket_name("p")
    (account,) = stack_run("dev").of_type(ACCOUNT)
    assert boot.node_service_account_id(args["cluster_name"]) == account.inputs["accountId"]
    assert isinstance(cli.parser().parse_args(["--project", "p", "--region", "r"]), argparse.Namespace)
