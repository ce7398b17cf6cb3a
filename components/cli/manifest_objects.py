"""The change preview inside a manifest the provider fetches at `up`: the objects the program writes into, as records.

pulumi-kubernetes registers each object of a `yaml.v2.ConfigFile` as its child named `<ConfigFile resource>:
<namespace>/<name>` (`<resource>:<name>` when cluster-scoped; provider/pkg/provider/yaml/v2 `Register`), and the
program's transforms change some of them as they are registered (components/addons.py). Offline nothing fetches the
manifest, so the component that holds the ConfigFile registers what its transforms write, each object reduced to
its identity and the program's fields (its `programWrites` input, components/component.py), and each becomes a
record under the ConfigFile, compared by its kind's rules (components/model/diff/kubernetes.py). A run that does not
carry them (a base revision from before they were recorded) leaves them out on both sides, and a note says so.
"""

from __future__ import annotations

from typing import Any

from components.cli.chart_diff import object_record
from components.component import PROGRAM_WRITES

CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
WHY = (
    "the fields the program writes into this object of the manifest fetched at `up` (its transforms, "
    "components/addons.py); `webhooks[0]` stands for every webhook of the configuration"
)


def expand(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[str]]:
    """`records` with the modelled objects after each ConfigFile, and the URNs of the ConfigFiles modelled."""
    writes = {r["urn"]: (r.get("inputs") or {}).get(PROGRAM_WRITES) for r in records if not r.get("custom")}
    out: list[dict[str, Any]] = []
    files: set[str] = set()
    for record in records:
        out.append(record)
        objects = writes.get(record.get("parent") or "") if record["type"] == CONFIG_FILE else None
        if objects is not None:
            files.add(record["urn"])
            out += [object_record(record, obj) for obj in objects]
    return out, files


def expand_both(
    old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str], set[str]]:
    """Both runs expanded; a ConfigFile's objects kept only where both runs model them, the notes, and the URNs of
    those ConfigFiles."""
    old_out, old_files = expand(old)
    new_out, new_files = expand(new)
    one_sided = old_files ^ new_files

    def keep(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in records if r.get("parent") not in one_sided]

    names = {r["urn"]: r["name"] for r in (*old, *new)}
    notes = [
        f"{names[urn]}: the objects the program writes into this manifest are not compared: only one run records "
        "them (a base revision from before they were recorded)"
        for urn in sorted(one_sided)
    ]
    return keep(old_out), keep(new_out), notes, old_files & new_files
