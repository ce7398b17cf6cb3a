"""`python -m components import-file --stack dev`: adopt a deployment the reference scripts already made.

Prints, on stdout, a file for `pulumi import --file` (Pulumi's bulk-import format, `pulumi import --help`:
`{"nameTable": {name: URN}, "resources": [{type, name, id, parent, provider, component, version}]}`)
naming every resource the stack declares that can be imported: the logical names the program registers,
the parent components (created empty by the import, `component: true`), and ids in each provider's
documented import format (components/model/import_ids.py), all computed from the stack file.

Two parts, because `pulumi import` cannot import a provider: a Kubernetes object must name a provider
that is already in the stack (nameTable URN; pulumi/pulumi pkg/resource/deploy/import.go looks it up in
the existing state). So: `--part cloud`, then `pulumi up $(... --targets)` (records the Kubernetes
provider; no cloud call), then `--part kubernetes`. `--part all` (the default) is both in one
file, for a stack that already has the provider. `--explain` lists what is left to `pulumi up` and why.
Bad configuration stops with the same messages as `pulumi preview`, and nothing on stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal, TextIO

from components.cli.plan import ROOT, StackFileError, _read_yaml, settings_input, stack_config
from components.identity import NODE_ROLES
from components.model import import_ids as ids
from components.model import planner
from components.model.settings import PROJECT, ConfigError, Settings, load
from components.project import AI_ZONES_FEATURE, APIS
from components.queues import KUEUE_V1BETA1, KUEUE_V1BETA2
from components.serving import BUCKET_ROLES, FUSE_KSA, GATEWAY_API, HF_SECRET, LWS_API, ROLES
from components.workloads import JOBSET_API

Part = Literal["cloud", "kubernetes", "all"]
GCP_VERSION = version("pulumi_gcp")
CLUSTER_COMPONENT = "gke-tpu-slicing:cluster:Cluster"
# (logical name, type, parent component) of the one Kubernetes provider (components/cluster.py)
K8S_PROVIDER = ("cluster-k8s", "pulumi:providers:kubernetes", "cluster")
NAMESPACE = "kubernetes:core/v1:Namespace"


@dataclass(frozen=True)
class Entry:
    """One resource as the program registers it: type, logical name, parent component, import id."""

    type: str
    name: str
    parent: str
    id: str
    kubernetes: bool = False


@dataclass(frozen=True)
class Skipped:
    """A resource (or a whole family) the file leaves to `pulumi up`, with the reason and what `up` does."""

    name: str
    type: str
    reason: str
    after_import: str
    parent: str | None = None
    on_request: bool = False


@dataclass
class Adoption:
    entries: list[Entry] = field(default_factory=list)
    components: dict[str, str] = field(default_factory=dict)  # logical name -> component type
    skipped: list[Skipped] = field(default_factory=list)


# Resource types this command knows how to import, and types it leaves to `pulumi up` on purpose.
# tests/test_import_file.py fails on any type the program registers that is in neither.
NOT_IMPORTED_TYPES = {
    K8S_PROVIDER[1]: "`pulumi import` cannot import a provider; `pulumi up --target` records it (no cloud call)",
    "kubernetes:helm.sh/v4:Chart": "a chart's objects are named by the chart's render at run time, which needs "
    "the chart (not available offline); the chart component adopts them on `up`",
    "kubernetes:yaml/v2:ConfigFile": "its objects come from a manifest the provider downloads at run time",
    "kubernetes:kustomize/v2:Directory": "its objects come from a kustomization the provider fetches at run time",
}


def _kube(type_: str, name: str, parent: str, object_name: str, namespace: str | None = None) -> Entry:
    return Entry(type_, name, parent, ids.kubernetes_object(name=object_name, namespace=namespace), kubernetes=True)


def adoption(settings: Settings, project_number: str | None = None) -> Adoption:
    """Every resource the program declares for these settings: importable entries and skipped ones.

    The logical names mirror __main__.py and components/*.py; the test runs the program under the mock
    runtime and fails on any difference.
    """
    s, out = settings, Adoption()
    project, region = s.project, s.region
    c = out.components

    c["project"] = "gke-tpu-slicing:project:ProjectServices"
    for api in APIS:
        service = f"{api}.googleapis.com"
        out.entries.append(
            Entry(
                "gcp:projects/service:Service",
                f"project-{api}",
                "project",
                ids.project_service(project=project, service=service),
            )
        )
    out.entries.append(
        Entry(
            "gcp:compute/previewFeature:PreviewFeature",
            f"project-{AI_ZONES_FEATURE}",
            "project",
            ids.preview_feature(project=project, name=AI_ZONES_FEATURE),
        )
    )

    c["network"] = "gke-tpu-slicing:network:Network"
    net = s.network
    out.entries += [
        Entry(
            "gcp:compute/network:Network",
            "network-main",
            "network",
            ids.network(project=project, name=net.network_name),
        ),
        Entry(
            "gcp:compute/subnetwork:Subnetwork",
            "network-tpu",
            "network",
            ids.subnetwork(project=project, region=region, name=net.tpu_subnet_name),
        ),
        Entry(
            "gcp:compute/subnetwork:Subnetwork",
            "network-proxy",
            "network",
            ids.subnetwork(project=project, region=region, name=net.proxy_subnet_name),
        ),
        Entry(
            "gcp:compute/firewall:Firewall",
            "network-allow-internal",
            "network",
            ids.firewall(project=project, name=net.firewall_name),
        ),
    ]

    c["identity"] = "gke-tpu-slicing:identity:NodeIdentity"
    email = ids.service_account_email(project=project, account_id=s.node_service_account_id)
    out.entries.append(
        Entry(
            "gcp:serviceaccount/account:Account",
            "identity-nodes",
            "identity",
            ids.service_account(project=project, email=email),
        )
    )
    for role in NODE_ROLES:
        out.entries.append(
            Entry(
                "gcp:projects/iAMMember:IAMMember",
                f"identity-{role.rsplit('/', 1)[-1]}",
                "identity",
                ids.project_iam_member(project=project, role=role, member=f"serviceAccount:{email}"),
            )
        )

    c["cluster"] = CLUSTER_COMPONENT
    out.entries += [
        Entry(
            "gcp:container/cluster:Cluster",
            "cluster-gke",
            "cluster",
            ids.cluster(project=project, location=region, name=s.cluster.name),
        ),
        Entry(
            "gcp:container/nodePool:NodePool",
            "cluster-system",
            "cluster",
            ids.node_pool(project=project, location=region, cluster=s.cluster.name, name=s.cluster.system_pool_name),
        ),
    ]
    out.skipped.append(
        Skipped(
            K8S_PROVIDER[0],
            K8S_PROVIDER[1],
            NOT_IMPORTED_TYPES[K8S_PROVIDER[1]],
            "recorded in the stack by `pulumi up --target <provider URN>` between the two parts",
        )
    )

    c["capacity"] = "gke-tpu-slicing:capacity:TpuCapacity"
    tpu = s.tpu
    out.entries.append(
        Entry(
            "gcp:compute/resourcePolicy:ResourcePolicy",
            "capacity-policy",
            "capacity",
            ids.resource_policy(project=project, region=region, name=tpu.workload_policy_name),
        )
    )
    for i in range(tpu.cubes):
        pool = tpu.pool_name(i)
        out.entries.append(
            Entry(
                "gcp:container/nodePool:NodePool",
                f"capacity-{pool}",
                "capacity",
                ids.node_pool(project=project, location=region, cluster=s.cluster.name, name=pool),
            )
        )

    chart_after = (
        "created by the first `pulumi up`, run with PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true so that each "
        "object is applied over the existing one instead of failing with AlreadyExists"
    )
    for key, addon in s.addons.helm_addons().items():
        c[key] = "gke-tpu-slicing:addons:HelmAddon"
        out.entries.append(_kube(NAMESPACE, f"{key}-namespace", key, addon.namespace))
        out.skipped.append(
            Skipped(
                f"{key}-chart",
                "kubernetes:helm.sh/v4:Chart",
                NOT_IMPORTED_TYPES["kubernetes:helm.sh/v4:Chart"],
                chart_after,
            )
        )
    out.skipped += [
        Skipped(
            "slice-controller-manifest",
            "kubernetes:yaml/v2:ConfigFile",
            NOT_IMPORTED_TYPES["kubernetes:yaml/v2:ConfigFile"],
            chart_after,
        ),
        Skipped(
            "inference-extension-crds",
            "kubernetes:kustomize/v2:Directory",
            NOT_IMPORTED_TYPES["kubernetes:kustomize/v2:Directory"],
            chart_after,
        ),
    ]

    c["queues"] = "gke-tpu-slicing:queues:SliceQueues"
    q, ns = s.kueue, s.kueue.namespace
    out.entries += [
        _kube(NAMESPACE, "queues-namespace", "queues", ns),
        _kube(f"kubernetes:{KUEUE_V1BETA2}:Topology", "queues-topology", "queues", q.topology_name),
        _kube(f"kubernetes:{KUEUE_V1BETA2}:ResourceFlavor", "queues-flavor", "queues", q.flavor_name),
        _kube(f"kubernetes:{KUEUE_V1BETA2}:AdmissionCheck", "queues-admission-check", "queues", q.admission_check_name),
        _kube(f"kubernetes:{KUEUE_V1BETA2}:ClusterQueue", "queues-cluster-queue", "queues", q.cluster_queue),
        _kube(f"kubernetes:{KUEUE_V1BETA2}:LocalQueue", "queues-local-queue", "queues", q.local_queue, ns),
    ]
    for priority in q.priorities:
        out.entries.append(
            _kube(
                f"kubernetes:{KUEUE_V1BETA1}:WorkloadPriorityClass", f"queues-priority-{priority}", "queues", priority
            )
        )

    demos = {"subslicing": s.demos.subslicing, "superslicing": s.demos.superslicing}
    for key, demo in demos.items():
        if demo.enabled:
            c[key] = "gke-tpu-slicing:workloads:SlicingJobSet"
            out.entries.append(_kube(f"kubernetes:{JOBSET_API}:JobSet", f"{key}-jobset", key, demo.name, ns))

    if s.serving.enabled:
        c["serving"] = "gke-tpu-slicing:serving:Serving"
        if s.hf_token is not None:
            out.entries.append(_kube("kubernetes:core/v1:Secret", "serving-hf-token", "serving", HF_SECRET, ns))
        out.entries.append(_kube("kubernetes:core/v1:ServiceAccount", "serving-gcs-fuse-ksa", "serving", FUSE_KSA, ns))
        for role in BUCKET_ROLES:
            name = f"serving-weights-{role.rsplit('.', 1)[-1].lower()}"
            if project_number is None:
                out.skipped.append(
                    Skipped(
                        name,
                        "gcp:storage/bucketIAMMember:BucketIAMMember",
                        "its member names the project number: pass --project-number "
                        f"(gcloud projects describe {project} --format='value(projectNumber)')",
                        "created by `pulumi up`; adding a member that is already bound leaves the policy as it is",
                    )
                )
                continue
            member = ids.workload_identity_principal(
                project_number=project_number, workload_pool=s.workload_pool, namespace=ns, ksa=FUSE_KSA
            )
            out.entries.append(
                Entry(
                    "gcp:storage/bucketIAMMember:BucketIAMMember",
                    name,
                    "serving",
                    ids.bucket_iam_member(bucket=s.serving.weights_bucket, role=role, member=member),
                )
            )
        out.entries.append(
            _kube(f"kubernetes:{GATEWAY_API}:Gateway", "serving-gateway", "serving", s.serving.gateway.name, ns)
        )
        out.skipped.append(
            Skipped(
                "serving-router",
                "kubernetes:helm.sh/v4:Chart",
                NOT_IMPORTED_TYPES["kubernetes:helm.sh/v4:Chart"],
                chart_after,
            )
        )
        for role_name in ROLES:
            out.entries.append(
                _kube(
                    f"kubernetes:{LWS_API}:LeaderWorkerSet",
                    f"serving-{role_name}",
                    "serving",
                    s.lws_name(role_name),
                    ns,
                )
            )
    return out


def skip(plan: Adoption, names: Sequence[str]) -> Adoption:
    """Moves the named entries to the skipped list: objects the deployment does not have (the scripts
    make no node service account and no `system` pool; a finished demo JobSet may be gone)."""
    known = {e.name for e in plan.entries}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ValueError(f"--skip {', '.join(unknown)}: not in the file; one of: {', '.join(sorted(known))}")
    kept = [e for e in plan.entries if e.name not in names]
    dropped = [
        Skipped(e.name, e.type, "left out with --skip", "created by `pulumi up`", e.parent, on_request=True)
        for e in plan.entries
        if e.name in names
    ]
    return Adoption(kept, dict(plan.components), [*plan.skipped, *dropped])


def targets(plan: Adoption, stack: str, project: str = PROJECT) -> list[str]:
    """`pulumi up` targets that put the Kubernetes provider into the stack: the provider, and the Google
    Cloud resources left out with --skip (they are what the provider waits for: the system pool, and
    through it the node identity); a targeted update refuses to create a resource whose dependencies
    are neither in the stack nor targeted."""
    urns = [provider_urn(stack, project)]
    for s in plan.skipped:
        if s.on_request and s.type.startswith("gcp:"):
            parent_type = plan.components[s.parent] if s.parent else None
            urns.append(urn(stack, project, s.type, s.name, parent_type=parent_type))
    return [f"--target={u}" for u in urns]


def urn(stack: str, project: str, type_: str, name: str, parent_type: str | None = None) -> str:
    """The URN the engine gives a resource: its parent's qualified type, `$`, its own type; a child of the
    stack has no parent type (generateURN in pulumi/pulumi pkg/resource/deploy/deployment.go)."""
    qualified = f"{parent_type}${type_}" if parent_type else type_
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def provider_urn(stack: str, project: str = PROJECT) -> str:
    name, type_, _ = K8S_PROVIDER
    return urn(stack, project, type_, name, parent_type=CLUSTER_COMPONENT)


def import_file(plan: Adoption, stack: str, part: Part = "all", project: str = PROJECT) -> dict[str, Any]:
    """The bulk-import JSON for one part: components first (parents must be known), then resources."""
    wanted = [e for e in plan.entries if part == "all" or e.kubernetes == (part == "kubernetes")]
    # Components the cloud part already created are referred to by URN in the kubernetes part.
    in_cloud = {e.parent for e in plan.entries if not e.kubernetes}
    name_table: dict[str, str] = {}
    resources: list[dict[str, Any]] = []
    for parent in dict.fromkeys(e.parent for e in wanted):
        if part == "kubernetes" and parent in in_cloud:
            name_table[parent] = urn(stack, project, plan.components[parent], parent)
        else:
            resources.append({"type": plan.components[parent], "name": parent, "component": True})
    if any(e.kubernetes for e in wanted):
        name_table[K8S_PROVIDER[0]] = provider_urn(stack, project)
    for e in wanted:
        spec: dict[str, Any] = {"type": e.type, "name": e.name, "id": e.id, "parent": e.parent}
        if e.kubernetes:
            spec["provider"] = K8S_PROVIDER[0]
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
        f"Kubernetes) under {len(plan.components)} components; {len(plan.skipped)} left to `pulumi up`:",
    ]
    for s in plan.skipped:
        lines += [f"  {s.name} ({s.type})", f"      why: {s.reason}", f"      after the import: {s.after_import}"]
    lines += [
        "Between the cloud and kubernetes parts, `pulumi up` these targets (`--targets` prints them):",
        *(f"  {target}" for target in targets(plan, stack, project)),
    ]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components import-file",
        description="Print a `pulumi import --file` file that adopts a deployment made with the reference "
        "scripts: every resource of the stack, with the program's logical names and the providers' import ids.",
    )
    parser.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default: dev)")
    parser.add_argument(
        "--dir", type=Path, default=ROOT, help="directory holding Pulumi.yaml (default: the repository root)"
    )
    parser.add_argument(
        "--part",
        choices=("cloud", "kubernetes", "all"),
        default="all",
        help="cloud: Google Cloud resources; kubernetes: objects through the cluster's provider (needs the "
        "provider in the stack); all: both (default)",
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
    return parser


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Exit 0 with the file on stdout; 1 for invalid configuration or an impossible plan; 2 for usage."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.project_number is not None and not re.fullmatch(r"[1-9][0-9]{5,19}", args.project_number):
        print(f"error: --project-number {args.project_number!r}: the project's number, digits only", file=err)
        return 2
    stack_file = args.dir / f"Pulumi.{args.stack}.yaml"
    if not stack_file.is_file():
        print(f"error: no stack named '{args.stack}' found: {stack_file} does not exist", file=err)
        return 2
    try:
        project = _read_yaml(args.dir / "Pulumi.yaml").get("name", PROJECT)
        raw, gcp_project = settings_input(stack_config(args.dir, args.stack))
        settings = load(raw, gcp_project)
    except StackFileError as e:
        print(f"error: {e}", file=err)
        return 2
    except ConfigError as e:
        print(f"error: {e}", file=err)
        return 1
    # `pulumi preview` stops on a plan the reservation can never hold; so does this.
    capacity = planner.plan(settings)
    if capacity.errors:
        print(f"error: {capacity.error_message()}", file=err)
        return 1
    try:
        plan = skip(adoption(settings, args.project_number), args.skip)
    except ValueError as e:
        print(f"error: {e}", file=err)
        return 2
    if args.targets:
        print("\n".join(targets(plan, args.stack, project)), file=out)
    elif args.explain:
        print(explain(plan, args.stack, project), file=out)
    else:
        print(json.dumps(import_file(plan, args.stack, args.part, project), indent=2), file=out)
        print(
            f"{len(plan.skipped)} resources are left to `pulumi up` (run with --explain for the list and reasons)",
            file=err,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
