"""What the program declares for a stack's settings, as `pulumi import` needs it (issue 12).

`adoption(settings)` lists every resource the program registers: the importable ones with their type,
logical name, parent component and import id, and the ones left to `pulumi up` with the reason. The
logical names mirror __main__.py and components/*.py; tests/test_import_file.py runs the program under
the mock runtime and fails on any difference, and on any resource type this module does not know.
"""

from __future__ import annotations

from importlib.metadata import version

from components.cli.adoption_records import (
    CLUSTER_COMPONENT,
    K8S_PROVIDER,
    NAMESPACE,
    NEW_COMPONENTS,
    NOT_IMPORTED_TYPES,
    Adoption,
    Entry,
    Skipped,
    kube_entry,
    skip,
)
from components.identity import NODE_ROLES
from components.model import import_ids as ids
from components.model.settings import Settings
from components.modelserver import HF_SECRET, LWS_API, ROLES, lws_object_name, lws_revision
from components.project import AI_ZONES_FEATURE, apis
from components.queues import KUEUE_V1BETA2
from components.serving import CACHE_ROLES, FUSE_KSA, GATEWAY_API, WEIGHTS_ROLES, role_suffix
from components.workloads import JOBSET_API

# What import_file.py and the tests read from here, the catalogue's records among them.
__all__ = [
    "CLUSTER_COMPONENT",
    "GCP_VERSION",
    "K8S_PROVIDER",
    "NEW_COMPONENTS",
    "NOT_IMPORTED_TYPES",
    "Adoption",
    "adoption",
    "skip",
]

GCP_VERSION = version("pulumi_gcp")


def adoption(settings: Settings, project_number: str | None = None) -> Adoption:
    """Every resource the program declares for these settings: importable entries and skipped ones.

    The logical names mirror __main__.py and components/*.py; the test runs the program under the mock
    runtime and fails on any difference.
    """
    s, out = settings, Adoption()
    project, region = s.project, s.region
    c = out.components

    c["project"] = "gke-tpu-slicing:project:ProjectServices"
    for api in apis(s):
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

    if s.cluster.private_nodes:
        out.skipped.append(
            Skipped(
                "network-egress",
                "gke-tpu-slicing:network:Egress",
                NEW_COMPONENTS["gke-tpu-slicing:network:Egress"],
                "`pulumi up` creates the Cloud Router and Cloud NAT, then turns the nodes private in place",
                parent="network",
            )
        )

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
        out.entries.append(kube_entry(NAMESPACE, f"{key}-namespace", key, addon.namespace))
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
            "kubernetes:yaml/v2:ConfigGroup",
            NOT_IMPORTED_TYPES["kubernetes:yaml/v2:ConfigGroup"],
            chart_after,
        ),
    ]

    c["queues"] = "gke-tpu-slicing:queues:SliceQueues"
    q, ns = s.kueue, s.kueue.namespace
    out.entries += [
        kube_entry(NAMESPACE, "queues-namespace", "queues", ns),
        kube_entry(f"kubernetes:{KUEUE_V1BETA2}:Topology", "queues-topology", "queues", q.topology_name),
        kube_entry(f"kubernetes:{KUEUE_V1BETA2}:ResourceFlavor", "queues-flavor", "queues", q.flavor_name),
        kube_entry(
            f"kubernetes:{KUEUE_V1BETA2}:AdmissionCheck", "queues-admission-check", "queues", q.admission_check_name
        ),
        kube_entry(f"kubernetes:{KUEUE_V1BETA2}:ClusterQueue", "queues-cluster-queue", "queues", q.cluster_queue),
        kube_entry(f"kubernetes:{KUEUE_V1BETA2}:LocalQueue", "queues-local-queue", "queues", q.local_queue, ns),
    ]
    for priority in q.priorities:
        out.entries.append(
            kube_entry(
                f"kubernetes:{KUEUE_V1BETA2}:WorkloadPriorityClass", f"queues-priority-{priority}", "queues", priority
            )
        )
    out.skipped.append(
        Skipped(
            "queues-immutable-fields",
            "pulumi-python:dynamic/queues:ImmutableFields",
            NOT_IMPORTED_TYPES["pulumi-python:dynamic/queues:ImmutableFields"],
            "`pulumi up` records the current values; later changes of them are checked at preview",
            parent="queues",
        )
    )

    demos = {"subslicing": s.demos.subslicing, "superslicing": s.demos.superslicing}
    for key, demo in demos.items():
        if demo.enabled:
            c[key] = "gke-tpu-slicing:workloads:SlicingJobSet"
            out.entries.append(kube_entry(f"kubernetes:{JOBSET_API}:JobSet", f"{key}-jobset", key, demo.name, ns))

    if s.serving.enabled:
        c["serving"] = "gke-tpu-slicing:serving:Serving"
        if s.hf_token is not None:
            out.entries.append(kube_entry("kubernetes:core/v1:Secret", "serving-hf-token", "serving", HF_SECRET, ns))
        out.entries.append(
            kube_entry("kubernetes:core/v1:ServiceAccount", "serving-gcs-fuse-ksa", "serving", FUSE_KSA, ns)
        )
        out.skipped.append(
            Skipped(
                "serving-xla-cache",
                "gcp:storage/bucket:Bucket",
                NOT_IMPORTED_TYPES["gcp:storage/bucket:Bucket"],
                f"created by `pulumi up` as {s.xla_cache_bucket}",
            )
        )
        for role in CACHE_ROLES:
            out.skipped.append(
                Skipped(
                    f"serving-xla-cache-{role_suffix(role)}",
                    "gcp:storage/bucketIAMMember:BucketIAMMember",
                    "it grants on the new XLA cache bucket, which `pulumi up` creates",
                    "created by `pulumi up` after the bucket",
                )
            )
        for role in WEIGHTS_ROLES:
            name = f"serving-weights-{role_suffix(role)}"
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
            kube_entry(f"kubernetes:{GATEWAY_API}:Gateway", "serving-gateway", "serving", s.serving.gateway.name, ns)
        )
        out.skipped.append(
            Skipped(
                "serving-router",
                "kubernetes:helm.sh/v4:Chart",
                NOT_IMPORTED_TYPES["kubernetes:helm.sh/v4:Chart"],
                chart_after,
            )
        )
        if s.serving.weights_download.enabled:
            out.skipped.append(
                Skipped(
                    "serving-weights",
                    "gke-tpu-slicing:weights:WeightsDownload",
                    NEW_COMPONENTS["gke-tpu-slicing:weights:WeightsDownload"],
                    "`pulumi up` creates the Job (which finds a filled snapshot and ends), its namespace, account "
                    "and write access",
                )
            )
        for role_name in ROLES:
            out.entries.append(
                kube_entry(
                    f"kubernetes:{LWS_API}:LeaderWorkerSet",
                    f"serving-{role_name}",
                    "serving",
                    lws_object_name(s, role_name),
                    ns,
                )
            )
            out.skipped.append(
                Skipped(
                    f"serving-{role_name}-ready-{lws_revision(s, role_name)}",
                    f"kubernetes:{LWS_API}:LeaderWorkerSetPatch",
                    NOT_IMPORTED_TYPES[f"kubernetes:{LWS_API}:LeaderWorkerSetPatch"],
                    "`pulumi up` applies it and waits once for the set's ready groups (ready at once when they run)",
                    "serving",
                )
            )

    if s.tpu.cubes:
        out.skipped.append(
            Skipped(
                "teardown",
                "gke-tpu-slicing:teardown:SliceGates",
                NEW_COMPONENTS["gke-tpu-slicing:teardown:SliceGates"],
                "`pulumi up` creates one gate per TPU pool",
            )
        )
    if s.observability.enabled:
        out.skipped.append(
            Skipped(
                "observability",
                "gke-tpu-slicing:observability:Observability",
                NEW_COMPONENTS["gke-tpu-slicing:observability:Observability"],
                "`pulumi up` creates every resource of the component (scrape objects, dashboard, alert policies)",
            )
        )
    return out
