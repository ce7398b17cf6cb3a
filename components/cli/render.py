"""`python -m components render --stack NAME --out DIR`: what a stack would apply, as files, offline.

The real program under Pulumi's mock runtime (components/cli/mockrun.py); the files are listed in DIR/RENDER.md.
Values only the cloud knows appear as markers (`<network-main.id>`); the output is byte-identical from run to run,
so a pull request can carry it. Exit status: 0 rendered, 1 the program refused the configuration, 2 usage errors
(arguments, a missing stack file, an output directory that is not a previous render).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from components.cli import charts as helm_charts
from components.cli.mockrun import Registration, execute, lookup
from components.cli.plan import (
    StackFileError,
    add_stack_arguments,
    all_secret_keys,
    config_error,
    fail,
    parse_args,
    read_stack,
)
from components.cli.render_format import (
    REDACTED,
    RESERVED,
    SECRET,
    CDumper,
    dump,
    manifest,
    object_path,
    portable,
    redact,
    short,
)
from components.cli.snapshot import error_text
from components.model.config.checks import redact_text

# What the tests and other commands use from here: the render's own names, and how it writes an object.
__all__ = ["INDEX", "REDACTED", "RESERVED", "RenderError", "main", "portable", "redact", "render"]

INDEX = "RENDER.md"
# Components whose objects the Kubernetes provider renders at run time from a source it fetches.
REMOTE = {
    "kubernetes:helm.sh/v4:Chart": "Helm chart",
    "kubernetes:yaml/v2:ConfigFile": "manifest fetched by URL",
    "kubernetes:yaml/v2:ConfigGroup": "vendored manifests (their objects under charts/)",
}
# The properties a reviewer looks at first, per Google Cloud type (google-cloud.yaml has all of them).
KEY_PROPERTIES = {
    "gcp:projects/service:Service": "service disableOnDestroy",
    "gcp:compute/previewFeature:PreviewFeature": "name activationStatus",
    "gcp:compute/network:Network": "name mtu routingMode autoCreateSubnetworks",
    "gcp:compute/subnetwork:Subnetwork": "name region ipCidrRange purpose role",
    "gcp:compute/firewall:Firewall": "name direction sourceRanges allows",
    "gcp:compute/router:Router": "name region",
    "gcp:compute/routerNat:RouterNat": "name natIpAllocateOption sourceSubnetworkIpRangesToNat subnetworks",
    "gcp:serviceaccount/account:Account": "accountId",
    "gcp:projects/iAMMember:IAMMember": "role member",
    "gcp:container/cluster:Cluster": "name location minMasterVersion releaseChannel.channel privateClusterConfig "
    "masterAuthorizedNetworksConfig deletionProtection maintenancePolicy.maintenanceExclusions "
    "nodeConfig.serviceAccount",
    "gcp:container/nodePool:NodePool": "name nodeLocations nodeCount nodeConfig.machineType nodeConfig.serviceAccount "
    "nodeConfig.reservationAffinity placementPolicy.policyName",
    "gcp:compute/resourcePolicy:ResourcePolicy": "name region workloadPolicy",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "bucket role member",
}


class RenderError(Exception):
    """The program refused the stack's configuration (the message `pulumi preview` would print)."""


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text.replace("|", "\\|")


@dataclass
class Rendered:
    files: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def _kubernetes_files(registrations: list[Registration]) -> dict[str, str]:
    files: dict[str, str] = {}
    for reg in registrations:
        obj = manifest(reg)
        # A Patch resource names the object it patches: its file is named after its own type (`...Patch`).
        kind = reg.type.rsplit(":", 1)[-1] if reg.type.endswith("Patch") else ""
        path = object_path(obj, kind=kind, unnamed=f"{reg.name}-<autonamed>")
        if path in files:
            raise ValueError(f"two objects render to {path}")
        header = f"# {reg.type} {reg.name!r} via provider {short(reg.provider)!r}, parent {short(reg.parent)!r}\n"
        files[path] = header + dump(obj)
    return files


def chart_files(registrations: list[Registration]) -> tuple[dict[str, str], dict[str, int], list[str]]:
    """The files of every chart's objects, their count per chart resource, and the warnings (what to run)."""
    files: dict[str, str] = {}
    counts: dict[str, int] = {}
    warnings: list[str] = []
    for release in helm_charts.releases(registrations, redact):
        try:
            rendered = helm_charts.render_release(release)
        except helm_charts.ChartUnavailable as e:
            # Once per cause: without Helm's engine every chart says the same.
            if (warning := f"chart objects not rendered: {e}") not in warnings:
                warnings.append(warning)
            continue
        except Exception as e:  # the engine refused the chart with these values (HelmRenderError)
            what = f"{release.chart} {release.version}"
            raise RenderError(f"{release.resource}: Helm refused to render {what}: {e}") from e
        ignored = helm_charts.ignored_values(release)
        if ignored:
            raise RenderError(
                f"{release.resource}: chart {release.chart} {release.version} never reads "
                + ", ".join(f"values.{key}" for key in ignored)
                + " (a misspelt key, or one this chart version does not have): remove or fix it"
            )
        counts[release.resource] = len(rendered.objects)
        header = (
            f"# object of Helm chart {release.chart} {release.version}, release {release.name!r}, "
            f"resource {release.resource!r}\n"
        )
        for obj in rendered.objects:
            path = object_path(obj, f"charts/{portable(release.resource)}")
            if path in files:
                raise ValueError(f"two objects render to {path}")
            files[path] = header + dump(redact(obj), CDumper)
    return files, counts, warnings


def group_files(registrations: list[Registration]) -> dict[str, str]:
    """The objects the program hands a ConfigGroup (the inference extension's vendored CRDs), one file each."""
    files: dict[str, str] = {}
    for reg in registrations:
        if reg.type != "kubernetes:yaml/v2:ConfigGroup":
            continue
        header = f"# object of ConfigGroup {reg.name!r} (vendored, manifests/vendored/)\n"
        for obj in redact(reg.inputs).get("objs") or []:
            files[object_path(obj, f"charts/{portable(reg.name)}")] = header + dump(obj, CDumper)
    return files


def _not_rendered(registrations: list[Registration]) -> str:
    items = []
    for reg in sorted(registrations, key=lambda r: r.name):
        inputs = redact(reg.inputs)
        item: dict[str, Any] = {"resource": reg.name, "what": REMOTE[reg.type], "type": reg.type}
        item.update({k: v for k, v in inputs.items() if k != "skipAwait"})
        if "objs" in item:  # written under charts/ (group_files)
            item["objs"] = [f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}" for o in item["objs"]]
        items.append(item)
    note = (
        "# Not rendered offline: the Kubernetes provider pulls these Helm charts and fetches these manifests\n"
        "# when `pulumi preview`/`up` runs against the cluster, so their objects exist only there. What the\n"
        "# program decides about them (chart ref, version, namespace, values, source) is listed here.\n"
    )
    return note + dump(items)


def _google_cloud(registrations: list[Registration]) -> tuple[str, str]:
    regs = sorted(registrations, key=lambda r: (r.type, r.name))
    rows = ["| resource | type | project | protect | key properties |", "|---|---|---|---|---|"]
    full: dict[str, Any] = {}
    for reg in regs:
        inputs = redact(reg.inputs)
        keys = KEY_PROPERTIES.get(reg.type, "").split() or [
            k for k, v in sorted(inputs.items()) if not isinstance(v, dict)
        ]
        props = "; ".join(f"{k}={_cell(lookup(inputs, k))}" for k in keys if lookup(inputs, k) is not None)
        kind = reg.type.rsplit(":", 1)[-1]
        rows.append(f"| `{reg.name}` | {kind} | {inputs.get('project', '')} | {reg.protect} | {props} |")
        full[reg.name] = {"type": reg.type, "protect": reg.protect, "inputs": inputs}
    table = "# Google Cloud resources\n\n" + "\n".join(rows) + "\n"
    return table, dump(full)


def render(config: dict[str, Any], stack: str, secrets: Sequence[str] = ()) -> Rendered:
    """Every file of the render, by relative path. Raises RenderError when the program refuses the config."""
    run = execute(config, stack=stack, secret_keys=list(secrets))
    if run.error is not None:
        raise RenderError(redact_text(error_text(run.error)))
    kubernetes = [r for r in run.registrations if r.custom and r.type.startswith("kubernetes:")]
    remote = [r for r in run.registrations if r.type in REMOTE]
    gcp = [r for r in run.registrations if r.custom and r.type.startswith("gcp:")]
    providers = sorted(
        (r for r in run.registrations if r.type.startswith("pulumi:providers:kubernetes")), key=lambda r: r.name
    )
    out = Rendered()
    out.files.update(_kubernetes_files(kubernetes))
    out.files["not-rendered.yaml"] = _not_rendered(remote)
    inner, per_chart, chart_warnings = chart_files(run.registrations)
    inner |= group_files(run.registrations)
    out.files.update(inner)
    out.files["google-cloud.md"], out.files["google-cloud.yaml"] = _google_cloud(gcp)
    out.counts = {
        "kubernetes": len(kubernetes),
        "chart objects": len(inner),
        "not rendered": len(remote),
        "google cloud": len(gcp),
    }
    info = [msg for level, msg in run.logs if level == "info"]
    out.warnings = [msg for level, msg in run.logs if level == "warn"] + chart_warnings
    lines = [
        f"# Offline render of stack `{stack}`",
        "",
        "Generated by `python -m components render` under Pulumi's mock runtime: no cloud, no Pulumi CLI.",
        "Values only the cloud knows appear as markers such as `<network-main.id>`; secrets as "
        f"`{SECRET}`, Secret data as `{REDACTED}`.",
        "",
        f"* `kubernetes/`: {len(kubernetes)} objects the program applies, one file each, by namespace "
        "(`_cluster` = cluster-scoped)",
        f"* `charts/`: {len(inner)} objects inside the Helm charts, rendered offline with Helm's engine from the "
        "pinned chart sources, and the inference extension's vendored CRDs: "
        + (", ".join(f"`{name}` {n}" for name, n in sorted(per_chart.items())) or "none (see the warnings)"),
        f"* `not-rendered.yaml`: {len(remote)} charts (what the program sets on them; their objects are under "
        "`charts/`) and fetched manifests the provider renders at run time (not rendered offline)",
        f"* `google-cloud.md` (table) and `google-cloud.yaml` (all inputs): {len(gcp)} Google Cloud resources",
        "",
        "Kubernetes provider(s): "
        + ", ".join(f"`{p.name}` (clusterIdentifier `{redact(p.inputs).get('clusterIdentifier')}`)" for p in providers),
        "",
        "## Program output",
        "",
        "```",
        *("\n".join(info) or "(none)").splitlines(),
        "```",
        "",
        "## Files",
        "",
        *(f"* `{path}`" for path in sorted(out.files)),
    ]
    out.files[INDEX] = "\n".join(lines) + "\n"
    return out


def write(files: dict[str, str], out: Path) -> None:
    """Replaces `out` with exactly these files (a previous render is removed, so stale objects go too)."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / INDEX).is_file())):
        raise StackFileError(f"{out} exists and is not a previous render (no {INDEX}): choose another --out")
    staging = out.with_name(f".{out.name}.render-tmp")
    if staging.exists():
        shutil.rmtree(staging)
    for rel, text in sorted(files.items()):
        path = staging / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m components render",
        description="Render every Kubernetes manifest a stack would apply, and a table of its Google Cloud "
        "resources, into a directory. Offline: Pulumi's mock runtime, no cloud, no Pulumi CLI.",
    )
    add_stack_arguments(parser, stack_required=True)
    parser.add_argument("--out", required=True, type=Path, help="output directory (replaced if a previous render)")
    args = parse_args(parser, argv, "render")
    try:
        config = read_stack(args.dir, args.stack, args.set)
        secrets = all_secret_keys(args.dir, args.stack, args.set)  # a token given with --set is still a secret
    except StackFileError as e:
        return fail(err, e)
    try:
        result = render(config, args.stack, sorted(secrets))
    except RenderError as e:
        return fail(err, config_error(str(e), config), 1)
    for warning in result.warnings:
        print(f"warning: {warning}", file=err)
    try:
        write(result.files, args.out)
    except StackFileError as e:
        return fail(err, e)
    counts = ", ".join(f"{n} {what}" for what, n in result.counts.items())
    print(f"stack {args.stack}: rendered {counts} into {args.out}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
