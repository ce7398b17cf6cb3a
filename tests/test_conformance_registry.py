"""The pinned CRDs are all indexed, pinned at their projects' tags and made strict (every object node closed, the
published schema untouched); a synthetic CRD shows each transform of tests/strict_schema.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests import conformance, schema_checks, upstream
from tests.conformance import SchemaRegistry, validate

# Every (apiVersion, kind) the pinned CRDs serve: the conformance test relies on all of them being indexed.
PINNED = [
    (f"{group}/{version}", kind)
    for group, versions, kinds in (
        ("gateway.networking.k8s.io", "v1 v1beta1", "Gateway GatewayClass HTTPRoute"),
        ("inference.networking.k8s.io", "v1", "InferencePool"),
        ("inference.networking.x-k8s.io", "v1alpha2", "InferenceObjective"),
        ("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        ("kueue.x-k8s.io", "v1beta1 v1beta2", "AdmissionCheck ClusterQueue Cohort LocalQueue ResourceFlavor Topology"),
        ("kueue.x-k8s.io", "v1beta1 v1beta2", "WorkloadPriorityClass"),
        ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"),
        ("monitoring.googleapis.com", "v1 v1alpha1", "ClusterPodMonitoring PodMonitoring"),
    )
    for version in versions.split()
    for kind in kinds.split()
]

UPSTREAM = {  # project -> (repository, pinned tag, CRD folder), as tests/conformance.py lists them
    "kueue": ("kueue", "v0.17.4", "config/components/crd/bases"),
    "jobset": ("jobset", "v0.11.1", "config/components/crd/bases"),
    "lws": ("lws", "v0.8.0", "config/crd/bases"),
    "gaie": ("gateway-api-inference-extension", "v1.5.0", "config/crd/bases"),
    "gateway-api": ("gateway-api", "v1.4.1", "config/crd/standard"),
}


@pytest.fixture(scope="module")
def registry() -> SchemaRegistry:
    return conformance.require_registry()


# --------------------------------------------------------------------------------------------- the registry


def test_registry_indexes_every_served_version_of_the_pinned_crds(registry: SchemaRegistry) -> None:
    assert registry.kinds() == sorted(PINNED)


@pytest.mark.parametrize(("api_version", "kind"), PINNED, ids=[f"{a}/{k}" for a, k in PINNED])
def test_every_pinned_kind_rejects_unknown_fields_at_the_root_and_in_metadata(
    registry: SchemaRegistry, api_version: str, kind: str
) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "nmae": "typo"}, "bogus": 1}
    errors = validate(obj, registry)
    assert '$.bogus: unknown field "bogus"' in errors
    assert '$.metadata.nmae: unknown field "nmae"' in errors


def test_every_object_node_of_every_strict_schema_is_closed(registry: SchemaRegistry) -> None:
    """No node reachable through properties/items/additionalProperties leaves the field set open."""
    open_nodes: list[str] = []

    def walk(node: Any, where: str) -> None:
        if not isinstance(node, dict):
            return
        if "pattern" in node:
            re.compile(node["pattern"])
        closed = "additionalProperties" in node or node.get("x-kubernetes-preserve-unknown-fields")
        if (node.get("type") == "object" or "properties" in node) and not closed:
            open_nodes.append(where)
        for name, sub in node.get("properties", {}).items():
            walk(sub, f"{where}.{name}")
        walk(node.get("items"), f"{where}[]")
        walk(node.get("additionalProperties"), f"{where}{{}}")

    for api_version, kind in registry.kinds():
        schema = registry.strict_schema(api_version, kind)
        assert schema["properties"]["metadata"] == {"$ref": schema_checks.OBJECT_META_REF}
        walk(schema, f"{api_version}/{kind}")
    assert open_nodes == []


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("kueue.x-k8s.io/v1beta2", "Topology"),
        ("kueue.x-k8s.io/v1beta2", "AdmissionCheck"),  # its Go pattern ^(?i)... needs translating for Python
        ("gateway.networking.k8s.io/v1", "Gateway"),  # oneOf/anyOf/not overlays, ipv4/ipv6 formats
        ("inference.networking.k8s.io/v1", "InferencePool"),
    ],
)
def test_strict_schemas_are_valid_json_schemas(registry: SchemaRegistry, api_version: str, kind: str) -> None:
    """Metaschema-checked (incl. every pattern compiling); the big JobSet/LWS/HTTPRoute ones would take seconds."""
    Draft202012Validator.check_schema(registry.strict_schema(api_version, kind))


def test_go_inline_flags_are_moved_for_python(registry: SchemaRegistry) -> None:
    check = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "prov"}}
    check["spec"] = {"controllerName": "kueue.x-k8s.io/provisioning-request"}
    check["spec"]["parameters"] = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "p"}
    assert validate(check, registry) == []
    check["spec"]["parameters"]["kind"] = "Not-A-Kind-"
    (error,) = validate(check, registry)
    assert error.startswith("$.spec.parameters.kind: 'Not-A-Kind-' does not match '(?i)^[a-z]")


def test_the_published_schema_is_left_untouched(registry: SchemaRegistry) -> None:
    published = registry.schema("kueue.x-k8s.io/v1beta2", "Topology")
    assert "additionalProperties" not in published["properties"]["spec"]
    strict = registry.strict_schema("kueue.x-k8s.io/v1beta2", "Topology")
    assert strict["properties"]["spec"]["additionalProperties"] is False


# --------------------------------------------------------------------------------------------- schema transforms

SYNTHETIC = """
apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-crd}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v2
    served: false
    storage: false
    schema: {openAPIV3Schema: {type: object}}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            properties:
              port: {type: string, x-kubernetes-int-or-string: true}
              note: {type: string, nullable: true}
              size: {type: integer, format: int64}
              raw: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {known: {type: object}}}
              empty: {type: object}
              tags: {type: array, items: {type: string}, x-kubernetes-list-type: set}
              embedded:
                type: object
                x-kubernetes-embedded-resource: true
                properties: {spec: {type: object, properties: {a: {type: string}}}}
"""


@pytest.fixture()
def synthetic(tmp_path: Path) -> SchemaRegistry:
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "anything-at-all.yml").write_text(SYNTHETIC)
    (tmp_path / "README.md").write_text("not a CRD")
    return SchemaRegistry(tmp_path)


def _widget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def test_registry_reads_multi_document_files_by_content_and_only_served_versions(synthetic: SchemaRegistry) -> None:
    assert synthetic.kinds() == [("example.com/v1", "Widget")]
    assert validate({**_widget(), "apiVersion": "example.com/v2"}, registry=synthetic)[0].startswith(
        "$: no schema for example.com/v2/Widget"
    )


def test_synthetic_transforms(synthetic: SchemaRegistry) -> None:
    def errors(**spec: Any) -> list[str]:
        return validate(_widget(**spec), registry=synthetic)

    assert errors(port=80, note=None, size=2**40, tags=["a", "b"], empty={}) == []
    assert errors(port="http", raw={"anything": {"goes": [1]}, "known": {}}) == []
    assert errors(port=True)[0].startswith("$.spec.port: True is not valid under any of the given schemas")
    assert errors(size=2**63) == ["$.spec.size: 9223372036854775808 is not a 'int64'"]
    assert errors(empty={"x": 1}) == ['$.spec.empty.x: unknown field "x"']  # pruned by the API server
    assert errors(raw={"known": {"x": 1}}) == ['$.spec.raw.known.x: unknown field "x"']
    assert errors(tags=["a", "a"]) == ["$.spec.tags[1]: duplicate item 'a' in a set list (same as [0])"]
    embedded = {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "t", "labelz": {}}, "spec": {"a": "b"}}
    assert errors(embedded=embedded) == ['$.spec.embedded.metadata.labelz: unknown field "labelz"']
    assert errors(embedded={"spec": {"b": 1}}) == [
        "$.spec.embedded: 'apiVersion' is a required property",
        "$.spec.embedded: 'kind' is a required property",
        '$.spec.embedded.spec.b: unknown field "b"',
    ]


def test_conflicting_definitions_of_a_kind_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(SYNTHETIC)
    (tmp_path / "b.yaml").write_text(SYNTHETIC.replace("format: int64", "format: int32"))
    with pytest.raises(ValueError, match=r"example\.com/v1/Widget is defined differently"):
        SchemaRegistry(tmp_path)


# --------------------------------------------------------------------------------------------- upstream URLs


def test_every_crd_is_pinned_at_its_controller_gen_name_and_tag(registry: SchemaRegistry) -> None:
    """Each CRD file's pinned URL is its project's ``<group>_<plural>.yaml`` at the tag its name carries."""
    urls = {entry.path: entry.url for entry in upstream.load()}
    checked = 0
    for gvk in registry.kinds():
        source = registry.source(*gvk)
        relative = f"{source.parent.name}/{source.name}"
        if not relative.startswith("crds/"):
            continue  # schemas/monitoring: prometheus-engine keeps them in charts/operator/crds, checked below
        crd = registry.crd(*gvk)
        repo, tag, folder = UPSTREAM[source.name.split("-v")[0]]
        name = f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"  # controller-gen's file name
        assert (
            urls[f"schemas/{relative}"]
            == f"https://raw.githubusercontent.com/kubernetes-sigs/{repo}/{tag}/{folder}/{name}"
        )
        checked += 1
    assert checked == len(PINNED) - 4
    monitoring = [url for path, url in urls.items() if path.startswith("schemas/monitoring/")]
    assert monitoring and all(
        url.startswith(
            "https://raw.githubusercontent.com/GoogleCloudPlatform/prometheus-engine/v0.17.2/charts/operator/crds/"
        )
        for url in monitoring
    )
