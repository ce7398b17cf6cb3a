"""What the program declares for a stack, as `pulumi import` needs it: read from its recorded run.

`adoption(config, stack)` runs the program under the offline mocks (components/cli/mockrun.py) and sorts
every registration: a type with an import-id format (components/model/import_ids.py) is imported under
its logical name and parent component, with the id read from its registered inputs; the rest is left to
`pulumi up`, with the reason from adoption_records.py. A type in neither table is an error, so a new
resource type cannot be passed over silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import pulumi

from components.cli.adoption_records import (
    K8S_PROVIDER,
    NEW_COMPONENTS,
    NOT_IMPORTED_TYPES,
    Adoption,
    Component,
    Entry,
    Skipped,
    skip,
)
from components.cli.mockrun import Registration, execute, lookup
from components.cli.mocks import SymbolicMocks
from components.model import import_ids as ids

__all__ = ["GCP_VERSION", "K8S_PROVIDER", "NEW_COMPONENTS", "NOT_IMPORTED_TYPES", "Adoption", "adoption", "skip"]

GCP_VERSION = version("pulumi_gcp")
OURS = "gke-tpu-slicing:"
# What the project-number lookup answers when --project-number is not given: an id naming it is left out.
NO_NUMBER = "<project number>"


class AdoptionMocks(SymbolicMocks):
    """The offline mocks, with the project number the user gave (workload identity members name it)."""

    def __init__(self, project_number: str | None) -> None:
        super().__init__()
        self.project_number = project_number or NO_NUMBER

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        if args.token == "gcp:organizations/getProject:getProject":
            return {"number": self.project_number, "projectId": args.args.get("projectId")}, []
        return super().call(args)


def adoption(
    config: dict[str, Any], stack: str, secret_keys: Sequence[str] = (), project_number: str | None = None
) -> Adoption:
    """Every resource the program registers for this stack config: importable entries and skipped ones.
    Raises RuntimeError when the program refuses the config, ValueError for a type no table knows."""
    run = execute(config, stack=stack, secret_keys=list(secret_keys), mocks=AdoptionMocks(project_number))
    if run.error is not None:
        raise RuntimeError(str(run.error))
    by_urn = {r.urn: r for r in run.registrations}
    out, unknown = Adoption(), []
    skipped_urns: set[str] = set()
    names: dict[str, str] = {}  # a component's URN -> its name in the file

    def component(reg: Registration | None) -> str | None:
        """The file's name of a parent component, recorded with its own parents."""
        if reg is None:
            return None
        if reg.urn not in names:
            parent = component(by_urn.get(reg.parent))
            name = reg.name if reg.name not in out.components else f"{reg.name}-{reg.type.rsplit(':', 1)[-1]}"
            names[reg.urn] = name
            out.components[name] = Component(reg.type, reg.name, parent)
        return names[reg.urn]

    def left(reg: Registration, why: str, after: str) -> None:
        up = by_urn.get(reg.parent)
        out.skipped.append(Skipped(reg.name, reg.type, why, after, up.name if up else None))
        skipped_urns.add(reg.urn)

    for reg in run.registrations:
        up = by_urn.get(reg.parent)
        if up is not None and up.urn in skipped_urns:
            skipped_urns.add(reg.urn)  # inside a component left to `pulumi up` whole
            continue
        inputs = reg.plain()
        if reg.type in NEW_COMPONENTS:
            left(reg, *NEW_COMPONENTS[reg.type])
            continue
        if reg.type == K8S_PROVIDER:
            out.provider = (reg.name, component(up))
        if reg.type in NOT_IMPORTED_TYPES:
            why, after = NOT_IMPORTED_TYPES[reg.type]
            left(reg, why, after.format_map({"name": inputs.get("name", reg.name)}))
            continue
        if reg.type.startswith(OURS):
            continue  # a component: in the file when a child is
        template = ids.import_format(reg.type, namespaced=bool(lookup(inputs, "metadata.namespace")))
        if template is None or not reg.custom:
            unknown.append(reg.type)
            continue
        # An id naming a resource `pulumi up` creates cannot be imported before it.
        created = [
            by_urn[u]
            for f in ids.fields(template)
            for u in reg.property_dependencies.get(f.split("@")[0].split(".")[0], [])
            if u in skipped_urns
        ]
        if created:
            left(
                reg,
                f"its id names {created[0].name}, which `pulumi up` creates",
                f"created by `pulumi up` after {created[0].name}",
            )
            continue

        def value(field: str, reg: Registration = reg, inputs: dict[str, Any] = inputs) -> str:
            key, _, of = field.partition("@")
            if of:
                (urn,) = reg.property_dependencies[key]
                return str(by_urn[urn].plain(of))
            return str(lookup(inputs, key))

        id_ = ids.import_id(template, value)
        if NO_NUMBER in id_:
            left(
                reg,
                "its member names the project number: pass --project-number "
                f"(gcloud projects describe {inputs.get('project') or config.get('gcp:project')} "
                "--format='value(projectNumber)')",
                "created by `pulumi up`; adding a member that is already bound leaves the policy as it is",
            )
            continue
        assert up is not None, reg.name  # every resource of the program is in a component
        out.entries.append(Entry(reg.type, reg.name, component(up), id_, kubernetes=reg.type.startswith("kubernetes:")))
    if unknown:
        raise ValueError(
            f"import-file knows no import-id format for {', '.join(sorted(set(unknown)))}: add one to "
            "components/model/import_ids.py, or list the type as not imported (components/cli/adoption_records.py)"
        )
    return out
