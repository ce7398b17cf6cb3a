"""`python -m components import-file --stack dev`: adopt a deployment the reference scripts already made.

Prints a file for `pulumi import --file` (`{"nameTable": {name: URN}, "resources": [{type, name, logicalName, id,
parent, provider, component, version}]}`) naming every importable resource the stack declares: the program's logical
names (components/cli/adoption.py), the parent components (created empty, `component: true`) and ids in each
provider's import format (components/model/import_ids.py). Two parts, because `pulumi import` cannot import a provider
and a Kubernetes object must name one already in the stack (pulumi/pulumi pkg/resource/deploy/import.go looks it up in
the existing state; since v3.231.0 it creates a missing one, unconfigured): `--part cloud`, `pulumi up $(...
--targets)` (records the Kubernetes provider), `--part kubernetes`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Literal, TextIO

from components.cli.adoption import GCP_VERSION, Adoption, adoption, skip
from components.cli.plan import (
    StackFileError,
    add_stack_arguments,
    all_secret_keys,
    config_error,
    fail,
    load_config,
    read_stack,
    read_yaml,
)
from components.model.config.settings import PROJECT, ConfigError
from components.model.tpu import planner

Part = Literal["cloud", "kubernetes", "all"]


def targets(plan: Adoption, stack: str, project: str = PROJECT) -> list[str]:
    """`pulumi up` targets that put the Kubernetes provider into the stack: the provider, and the Google
    Cloud resources left out with --skip (they are what the provider waits for: the system pool, and
    through it the node identity); a targeted update refuses to create a resource whose dependencies
    are neither in the stack nor targeted."""
    urns = [provider_urn(plan, stack, project)]
    for s in plan.skipped:
        if s.on_request and s.type.startswith("gcp:"):
            urns.append(urn(plan, stack, project, s.type, s.name, s.parent))
    return [f"--target={u}" for u in urns]


def urn(plan: Adoption, stack: str, project: str, type_: str, name: str, parent: str | None) -> str:
    """The URN the engine gives a resource: its parents' types, then its own, joined by `$`; the stack is left
    out (generateURN in pulumi/pulumi pkg/resource/deploy/deployment.go)."""
    for component in chain(plan, parent):
        type_ = f"{plan.components[component].type}${type_}"
    return f"urn:pulumi:{stack}::{project}::{type_}::{name}"


def chain(plan: Adoption, parent: str | None) -> Iterator[str]:
    """A component's name in the file, then its parents', up to the stack."""
    while parent is not None:
        yield parent
        parent = plan.components[parent].parent


def provider_urn(plan: Adoption, stack: str, project: str = PROJECT) -> str:
    name, parent = plan.provider
    return urn(plan, stack, project, "pulumi:providers:kubernetes", name, parent)


def import_file(plan: Adoption, stack: str, part: Part = "all", project: str = PROJECT) -> dict[str, Any]:
    """The bulk-import JSON for one part: components first (parents must be known), then resources."""

    def in_part(kubernetes: bool) -> bool:
        return part == "all" or kubernetes == (part == "kubernetes")

    wanted = [e for e in plan.entries if in_part(e.kubernetes)]
    # A component is created by the part that holds its children, including children left out with
    # --skip: `pulumi up` (or the targeted step) creates those under a parent that must exist.
    members = [(e.parent, e.kubernetes) for e in plan.entries] + [
        (s.parent, s.type.startswith("kubernetes:")) for s in plan.skipped if s.on_request and s.parent
    ]
    # Components the cloud part already created are referred to by URN in the kubernetes part.
    in_cloud = {c for parent, kubernetes in members if not kubernetes for c in chain(plan, parent)}
    name_table: dict[str, str] = {}
    resources: list[dict[str, Any]] = []
    for name in dict.fromkeys(c for parent, k in members if in_part(k) for c in chain(plan, parent)):
        component = plan.components[name]
        if part == "kubernetes" and name in in_cloud:
            name_table[name] = urn(plan, stack, project, component.type, component.logical_name, component.parent)
            continue
        spec = {"type": component.type, "name": name, "component": True}
        if component.logical_name != name:
            spec["logicalName"] = component.logical_name
        resources.append({**spec, "parent": component.parent} if component.parent else spec)
    if any(e.kubernetes for e in wanted):
        name_table[plan.provider[0]] = provider_urn(plan, stack, project)
    for e in wanted:
        spec: dict[str, Any] = {"type": e.type, "name": e.name, "id": e.id, "parent": e.parent}
        if e.kubernetes:
            spec["provider"] = plan.provider[0]
        else:
            # The program registers gcp resources with this SDK's version; the same default provider
            # (default_<version>) keeps `pulumi preview` from seeing a provider change.
            spec["version"] = GCP_VERSION
        resources.append(spec)
    return {"nameTable": name_table, "resources": resources} if name_table else {"resources": resources}


def explain(plan: Adoption, stack: str, project: str = PROJECT) -> str:
    lines = [
        f"stack {stack}: {len(plan.entries)} resources to import "
        f"({sum(not e.kubernetes for e in plan.entries)} Google Cloud, {sum(e.kubernetes for e in plan.entries)} "
        f"Kubernetes) under {len(plan.components)} components; {len(plan.skipped)} left to `pulumi up`:"
    ]
    for s in plan.skipped:
        lines += [f"  {s.name} ({s.type})", f"      why: {s.reason}", f"      after the import: {s.after_import}"]
    lines += [
        "Between the cloud and kubernetes parts, `pulumi up` these targets (`--targets` prints them):",
        *(f"  {target}" for target in targets(plan, stack, project)),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Exit 0 with the file on stdout; 1 for invalid configuration or an impossible plan; 2 for usage."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m components import-file",
        description="Print a `pulumi import --file` file that adopts a deployment made with the reference "
        "scripts: every resource of the stack, with the program's logical names and the providers' import ids.",
    )
    add_stack_arguments(parser)
    parser.add_argument(
        "--part",
        choices=("cloud", "kubernetes", "all"),
        default="all",
        help="cloud: Google Cloud resources; kubernetes: objects through the cluster's provider (needs the "
        "provider in the stack); all: both, the provider in the stack too (default)",
    )
    parser.add_argument(
        "--project-number",
        help="the project's number, for the weights bucket's IAM members (their member names it); "
        "without it those are left to `pulumi up`",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--explain", action="store_true", help="print what is left to `pulumi up` and why, not the file")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="NAME",
        help="leave this logical name out (the deployment does not have it); repeatable",
    )
    what.add_argument(
        "--targets",
        action="store_true",
        help="print the `pulumi up --target=URN` arguments that record the Kubernetes provider, not the file",
    )
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.project_number is not None and not re.fullmatch(r"[1-9][0-9]{5,19}", args.project_number):
        return fail(err, f"--project-number {args.project_number!r}: the project's number, digits only")
    stack_file = args.dir / f"Pulumi.{args.stack}.yaml"
    if not stack_file.is_file():
        return fail(err, f"no stack named '{args.stack}' found: {stack_file} does not exist")
    config: dict[str, Any] = {}
    try:
        project = read_yaml(args.dir / "Pulumi.yaml").get("name", PROJECT)
        config = read_stack(args.dir, args.stack, args.set)
        settings = load_config(config, args.dir, args.stack, args.set)
    except StackFileError as e:
        return fail(err, e)
    except ConfigError as e:
        return fail(err, config_error(str(e), config), 1)
    # `pulumi preview` stops on a plan the reservation can never hold; so does this.
    capacity = planner.plan(settings)
    if capacity.errors:
        return fail(err, capacity.error_message(), 1)
    try:
        secrets = sorted(all_secret_keys(args.dir, args.stack, args.set))
        plan = skip(adoption(config, args.stack, secrets, args.project_number), args.skip)
    except ValueError as e:
        return fail(err, e)
    except RuntimeError as e:  # the program refused what the checks above let through
        return fail(err, e, 1)
    if args.targets:
        print("\n".join(targets(plan, args.stack, project)), file=out)
    elif args.explain:
        print(explain(plan, args.stack, project), file=out)
    else:
        data = import_file(plan, args.stack, args.part, project)
        print(json.dumps(data, indent=2), file=out)
        if "nameTable" in data and plan.provider[0] in data["nameTable"]:
            # A newer `pulumi import` creates a named provider missing from the stack, with no configuration.
            print(
                f"note: the Kubernetes objects name the provider {plan.provider[0]}, which must be in the stack "
                "before this import: on a new stack, import --part cloud, then `pulumi up $(... --targets)`",
                file=err,
            )
        print(
            f"{len(plan.skipped)} resources are left to `pulumi up` (run with --explain for the list and reasons)",
            file=err,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
