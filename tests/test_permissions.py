"""docs/permissions.md covers everything the program declares and reads, in every stack.

The types come from recorded mock runs of every stack file (tests/harness.py), not from a list kept here: a new
resource type or invoke without a row of the table fails this test, naming it.
"""

from __future__ import annotations

import re
from functools import cache

import pytest

from components import bootstrap, reservation_reads
from tests.harness import run_program
from tests.stack_config import OPT_IN_ADDONS, ROOT, STACKS

PAGE = ROOT / "docs" / "permissions.md"
TYPE = re.compile(r"`([a-z][\w.-]*:[\w./-]*:[A-Za-z]\w*)`")
ROLE = re.compile(r"`roles/[\w.]+`|`[a-z]+\.[a-zA-Z]+\.[a-zA-Z*]+`|\bnone\b|Kubernetes `get`|the same")


@cache
def rows() -> list[list[str]]:
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("| what | resource types and reads |") :].split("\n\n", 1)[0]
    lines = [line for line in table.splitlines()[2:] if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


@cache
def declared() -> dict[str, set[str]]:
    """Every resource type registered and every invoke made, by the stacks that declare them (and dev with the add-ons
    no stack file turns on yet)."""
    found: dict[str, set[str]] = {}
    runs = {stack: run_program(stack=stack) for stack in STACKS} | {"dev+opt-in": run_program(OPT_IN_ADDONS)}
    for stack, run in runs.items():
        assert run.error is None, (stack, run.error)
        for token in {r.type for r in run.registrations} | {c.token for c in run.mocks.calls}:
            found.setdefault(token, set()).add(stack)
    return found


def covering(token: str) -> list[str]:
    return [row[0] for row in rows() if token in TYPE.findall(row[1])]


def test_every_declared_type_and_read_has_exactly_one_row() -> None:
    missing = {t: sorted(s) for t, s in declared().items() if not covering(t)}
    assert not missing, f"docs/permissions.md has no row for {missing}: add what deploying it needs"
    twice = {t: covering(t) for t in declared() if len(covering(t)) > 1}
    assert not twice, twice


def test_no_row_names_a_type_the_program_does_not_declare() -> None:
    # A row for a type that is gone is a permission granted for nothing.
    listed = {t for row in rows() for t in TYPE.findall(row[1])}
    assert listed - declared().keys() == set()


@pytest.mark.parametrize("index", range(len(rows())), ids=lambda i: rows()[i][0][:40])
def test_each_row_names_roles_or_permissions_and_a_google_or_upstream_source(index: int) -> None:
    what, types, deploy, preview, source = rows()[index]
    assert TYPE.search(types), what
    assert ROLE.search(deploy) and ROLE.search(preview), (what, deploy, preview)
    assert re.search(r"\]\(https://(cloud\.google\.com|kubernetes\.io|www\.pulumi\.com)/", source), (what, source)


def test_the_xla_bucket_monitoring_and_the_reservation_reads_are_there() -> None:
    # The entries a first deployment was missing: bucket creation at project level, Monitoring, reservation reads.
    by_type = {t: row for row in rows() for t in TYPE.findall(row[1])}
    assert "on the project" in by_type["gcp:storage/bucket:Bucket"][2]
    assert "roles/monitoring.editor" in by_type["gcp:monitoring/alertPolicy:AlertPolicy"][2]
    # Every permission the reads need, as their error names them (components/reservation_reads.py).
    assert all(f"`{p}`" in by_type[reservation_reads.TOKENS["subBlock"]][2] for p in reservation_reads.PERMISSIONS)


def test_the_stacks_page_points_here_for_the_roles() -> None:
    # stacks.md's setup points here instead of keeping a second list of roles.
    stacks = (ROOT / "docs" / "stacks.md").read_text(encoding="utf-8")
    assert "(permissions.md#each-accounts-roles-and-why)" in stacks


# --------------------------------------------------------------------------------------------- each account


def account_table(account: str) -> dict[str, tuple[str, str]]:
    """role -> (where, why) of the page's table for `account` (the table after `<!-- account: deploy -->`)."""
    lines = PAGE.read_text(encoding="utf-8").split(f"<!-- account: {account} -->", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| role |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    out = {}
    for line in lines[start + 2 : end]:
        role, where, why = (c.strip() for c in line.strip("|").split(" | "))
        out[role.split("`")[1]] = (where, why)
    return out


def test_the_deploy_accounts_table_is_what_the_bootstrap_grants() -> None:
    table = account_table("deploy")
    project = {role for role, (where, _) in table.items() if where == "the project"}
    assert project == {g.name for g in bootstrap.DEPLOY_PROJECT_ROLES} | {"roles/resourcemanager.projectIamAdmin"}
    assert (
        bootstrap.grant_limit(bootstrap.GRANTABLE_PROJECT_ROLES)
        in (PAGE.read_text(encoding="utf-8").split("<!-- account: deploy -->")[1])
    )
    assert table["roles/iam.serviceAccountUser"][0] == "the node service account only"
    assert table["roles/cloudkms.cryptoKeyDecrypter"][0] == "the stack's key"
    assert all(why for _, why in table.values())


def test_the_preview_accounts_table_and_role_are_what_the_bootstrap_grants() -> None:
    table = account_table("preview")
    weights = bootstrap.PREVIEW_WEIGHTS.name
    assert set(table) == {bootstrap.PREVIEW_ROLE_ID, "roles/storage.objectViewer", weights, *KMS_AND_TRUST}
    assert table["roles/storage.objectViewer"][0] == "the environment's state bucket"
    assert table[weights][0].startswith("the weights bucket")
    text = PAGE.read_text(encoding="utf-8").split("<!-- preview permissions -->", 1)[1]
    bullets = text.split("\n\n")[1].splitlines()  # the intro line, then the list
    assert all(b.startswith("* `") for b in bullets), bullets
    listed = [p for b in bullets for p in re.findall(r"`([a-z]+\.[a-zA-Z]+\.[a-zA-Z]+)`", b.split(": ", 1)[0])]
    assert listed == [g.name for g in bootstrap.PREVIEW_PERMISSIONS]


KMS_AND_TRUST = {"roles/cloudkms.cryptoKeyDecrypter", "roles/iam.workloadIdentityUser"}


@pytest.mark.parametrize("page", ["docs/permissions.md", "docs/stacks.md", "docs/access.md", "docs/health.md"])
def test_service_account_user_is_granted_on_the_node_account_only(page: str) -> None:
    # On the project it lets its holder act as every account there, the Compute Engine default one (Editor) too.
    text = (ROOT / page).read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    prose = re.split(r"(?<=\.)\s", "\n".join(line for line in text.splitlines() if not line.startswith("|")))
    for part in rows + prose:
        if "roles/iam.serviceAccountUser" in part:
            assert "node service account" in part, part
            assert not re.search(r"serviceAccountUser`? on the (environment's |stack's )?project", part), part


def test_no_ci_account_is_given_container_developer() -> None:
    # It reads Secrets and creates pods: what a branch's code could do with the preview account's credentials.
    for account in ("deploy", "preview"):
        assert "roles/container.developer" not in account_table(account)
    assert "roles/container.developer" not in {g.name for g in bootstrap.PREVIEW_PERMISSIONS}


# --------------------------------------------------------------------------------------------- the DNS endpoint's roles

# Permissions of predefined GKE roles that the pages rely on, as Google's role reference lists them
# (https://cloud.google.com/iam/docs/roles-permissions/container; read offline from iann0036/iam-dataset@2073fa52ac
# gcp/roles/container.<role>.json, a copy of IAM's roles.get answers: `gcloud iam roles describe roles/<role>` shows
# the same). True: the role holds the permission.
CONNECT, SECRETS = "container.clusters.connect", "container.secrets.get"
ROLE_FACTS: dict[str, dict[str, bool]] = {
    "roles/container.clusterViewer": {CONNECT: True, SECRETS: False},
    "roles/container.viewer": {CONNECT: True, SECRETS: False},
    "roles/container.developer": {CONNECT: True, SECRETS: True},
    "roles/container.clusterAdmin": {CONNECT: True, SECRETS: False},
    "roles/container.admin": {CONNECT: True, SECRETS: True},
}


def test_the_roles_named_for_the_dns_endpoint_hold_connect() -> None:
    access = (ROOT / "docs" / "access.md").read_text(encoding="utf-8")
    sentence = access.split("the caller needs the `container.clusters.connect` permission", 1)[1].split("\n\n")[0]
    named = set(re.findall(r"`(roles/container\.\w+)`", sentence))
    assert named == {r for r, facts in ROLE_FACTS.items() if facts[CONNECT]}


def test_the_health_accounts_role_reaches_the_dns_endpoint_and_reads_no_secret() -> None:
    # The hourly check reaches every stack through the DNS-based endpoint (tests/test_workflows.py): its role must
    # hold connect, and being read-only, no Secret.
    health = (ROOT / "docs" / "health.md").read_text(encoding="utf-8")
    section = health.split("The health account reads only.", 1)[1].split("\n\n")[0]
    (role,) = set(re.findall(r"`(roles/container\.\w+)`", section))
    assert ROLE_FACTS[role] == {CONNECT: True, SECRETS: False}
    assert CONNECT in section
    summary = PAGE.read_text(encoding="utf-8").split("**`tpu-health`**", 1)[1].split("\n\n")[0]
    assert f"`{role}`" in summary and f"`{CONNECT}`" in summary
