"""docs/permissions.md covers everything the program declares and reads, in every stack.

The types come from recorded mock runs of every stack file (tests/harness.py), not from a list kept here: a new
resource type or invoke without a row of the table fails this test, naming it.
"""

from __future__ import annotations

import re
from functools import cache

import pytest

from components import reservation_reads
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


def test_the_stacks_page_grants_what_the_table_lists() -> None:
    # stacks.md's setup points here instead of keeping a second list of roles.
    stacks = (ROOT / "docs" / "stacks.md").read_text(encoding="utf-8")
    assert "(permissions.md)" in stacks
    summary = PAGE.read_text(encoding="utf-8").split("In short", 1)[1]
    deploy_roles = {r for row in rows() for r in re.findall(r"`(roles/[\w.]+)`", row[2])}
    assert deploy_roles - {"roles/browser", "roles/compute.viewer", "roles/storage.objectUser"} <= set(
        re.findall(r"`(roles/[\w.]+)`", summary)
    )


# Project-level reads that roles/viewer holds (each role's permissions are in roles/viewer's list,
# https://cloud.google.com/iam/docs/roles-permissions); the weights bucket's object listing is not among them:
# Viewer lists buckets only (https://cloud.google.com/storage/docs/access-control/iam-roles, basic roles).
IN_VIEWER = {"roles/serviceusage.serviceUsageViewer", "roles/browser", "roles/compute.viewer", "roles/container.viewer"}


def test_the_summary_grants_the_preview_account_what_the_table_lists() -> None:
    summary = PAGE.read_text(encoding="utf-8").split("In short", 1)[1].split("for `pulumi-preview`", 1)[1]
    preview_roles = {r for row in rows() for r in re.findall(r"`(roles/[\w.]+)`", row[3])}
    assert "roles/viewer" in summary
    assert preview_roles - IN_VIEWER <= set(re.findall(r"`(roles/[\w.]+)`", summary))
