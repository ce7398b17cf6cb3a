"""The ids of `python -m components import-file`: the providers' documented import formats (quoted with their
sources, checked against the installed pulumi-gcp docs) and the names the program declares."""

from __future__ import annotations

import inspect
import re
import sys

import pulumi_gcp as gcp
import pytest

from components.model import import_ids as ids
from tests.harness import Run
from tests.import_file_runs import dev_file


def documented_formats(resource: type) -> list[str]:
    """The id formats in the "## Import" section of an installed pulumi-gcp resource's docstring."""
    # the docs sit on the @overload constructors, so read the module's source
    doc = inspect.getsource(sys.modules[resource.__module__])
    section = doc.split("## Import", 1)[1].split(":param", 1)[0]
    return re.findall(r"^\s*\* `([^`]+)`$", section, re.MULTILINE)


# Types whose pulumi-gcp 10.2.0 docstring lists the accepted formats.
DOCSTRING_TYPES = {
    "gcp:projects/service:Service": gcp.projects.Service,
    "gcp:compute/previewFeature:PreviewFeature": gcp.compute.PreviewFeature,
    "gcp:compute/network:Network": gcp.compute.Network,
    "gcp:compute/subnetwork:Subnetwork": gcp.compute.Subnetwork,
    "gcp:compute/firewall:Firewall": gcp.compute.Firewall,
    "gcp:container/cluster:Cluster": gcp.container.Cluster,
    "gcp:container/nodePool:NodePool": gcp.container.NodePool,
    "gcp:compute/resourcePolicy:ResourcePolicy": gcp.compute.ResourcePolicy,
}
CLUSTER_SCOPED = {"Namespace", "Topology", "ResourceFlavor", "AdmissionCheck", "ClusterQueue", "WorkloadPriorityClass"}


def test_kubernetes_ids_name_a_namespace_exactly_for_namespaced_kinds() -> None:
    for spec in dev_file()["resources"]:
        if spec["type"].startswith("kubernetes:"):
            namespaced = spec["type"].rsplit(":", 1)[1] not in CLUSTER_SCOPED
            assert re.fullmatch(r"[a-z0-9-]+/[a-z0-9.-]+" if namespaced else r"[a-z0-9.-]+", spec["id"]), spec


def test_every_id_names_what_the_program_declares(dev: Run) -> None:
    """Ids are read from the registered inputs; a node pool's names its cluster through the cluster's id."""
    specs = dev_file()["resources"]
    assert not [s["id"] for s in specs if "<" in s.get("id", "")], "an id holds an unresolved value"
    cluster = dev.get("gcp:container/cluster:Cluster", "cluster-gke").plain()
    pool = next(s for s in specs if s["name"] == "cluster-system")
    system = dev.get("gcp:container/nodePool:NodePool", "cluster-system").plain()
    assert pool["id"] == f"{cluster['project']}/{cluster['location']}/{cluster['name']}/{system['name']}"


# One documented example per type: the type's format, fed the documentation's placeholders (or its example
# values), gives back the documentation's string.
def braces(*fields: str) -> dict[str, str]:
    """Each field fed the documentation's placeholder of its own name."""
    return {f: f"{{{{{f}}}}}" for f in fields}


EXAMPLES = [
    # pulumi-gcp projects.Service "## Import"
    (
        "gcp:projects/service:Service",
        {"project": "{{project_id}}", "service": "{{service}}"},
        "{{project_id}}/{{service}}",
    ),
    (
        "gcp:compute/previewFeature:PreviewFeature",
        braces("project", "name"),
        "projects/{{project}}/global/previewFeatures/{{name}}",
    ),
    ("gcp:compute/network:Network", braces("project", "name"), "projects/{{project}}/global/networks/{{name}}"),
    (
        "gcp:compute/subnetwork:Subnetwork",
        braces("project", "region", "name"),
        "projects/{{project}}/regions/{{region}}/subnetworks/{{name}}",
    ),
    ("gcp:compute/firewall:Firewall", braces("project", "name"), "projects/{{project}}/global/firewalls/{{name}}"),
    # terraform-provider-google website/docs/r/google_service_account.html.markdown, "Import":
    # `terraform import google_service_account.my_sa
    #   projects/my-project/serviceAccounts/my-sa@my-project.iam.gserviceaccount.com`
    (
        "gcp:serviceaccount/account:Account",
        {"project": "my-project", "accountId": "my-sa"},
        "projects/my-project/serviceAccounts/my-sa@my-project.iam.gserviceaccount.com",
    ),
    # terraform-provider-google website/docs/r/google_project_iam.html.markdown, "Import":
    # `terraform import google_project_iam_member.my_project "your-project-id roles/viewer user:foo@example.com"`
    (
        "gcp:projects/iAMMember:IAMMember",
        {"project": "your-project-id", "role": "roles/viewer", "member": "user:foo@example.com"},
        "your-project-id roles/viewer user:foo@example.com",
    ),
    (
        "gcp:container/cluster:Cluster",
        {"project": "{{project_id}}", "location": "{{location}}", "name": "{{cluster_id}}"},
        "projects/{{project_id}}/locations/{{location}}/clusters/{{cluster_id}}",
    ),
    (
        "gcp:container/nodePool:NodePool",
        {
            "project": "{{project_id}}",
            "location": "{{location}}",
            "cluster@name": "{{cluster_id}}",
            "name": "{{pool_id}}",
        },
        "{{project_id}}/{{location}}/{{cluster_id}}/{{pool_id}}",
    ),
    (
        "gcp:compute/resourcePolicy:ResourcePolicy",
        braces("project", "region", "name"),
        "projects/{{project}}/regions/{{region}}/resourcePolicies/{{name}}",
    ),
    # pulumi-gcp storage.BucketIAMMember "## Import" (terraform google_storage_bucket_iam):
    # `terraform import google_storage_bucket_iam_member.editor
    #   "b/{{bucket}} roles/storage.objectViewer user:jane@example.com"`
    (
        "gcp:storage/bucketIAMMember:BucketIAMMember",
        {"bucket": "{{bucket}}", "role": "roles/storage.objectViewer", "member": "user:jane@example.com"},
        "b/{{bucket}} roles/storage.objectViewer user:jane@example.com",
    ),
    # pulumi-kubernetes reads ids with parseFqName (provider/pkg/provider/util.go): "namespace/name", or "name"
    ("kubernetes:apps/v1:Deployment", {"metadata.namespace": "default", "metadata.name": "my-app"}, "default/my-app"),
    ("kubernetes:core/v1:Namespace", {"metadata.name": "kueue-system"}, "kueue-system"),
]


@pytest.mark.parametrize(("type_", "parts", "documented"), EXAMPLES, ids=[e[2] for e in EXAMPLES])
def test_documented_example(type_: str, parts: dict[str, str], documented: str) -> None:
    assert {e[0] for e in EXAMPLES} >= set(ids.IMPORT_IDS)
    template = ids.import_format(type_, namespaced="metadata.namespace" in parts)
    assert template is not None and set(ids.fields(template)) == set(parts)
    assert ids.import_id(template, parts.__getitem__) == documented


@pytest.mark.parametrize("type_", sorted(DOCSTRING_TYPES))
def test_quoted_templates_are_the_installed_docs(type_: str) -> None:
    """The templates quoted above are the ones the installed pulumi-gcp documents, listed first."""
    quoted = {e[2] for e in EXAMPLES}
    assert documented_formats(DOCSTRING_TYPES[type_])[0] in quoted
