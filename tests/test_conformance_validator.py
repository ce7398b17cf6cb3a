"""The strict validator of tests/conformance.py rejects what it must, so the conformance test cannot be vacuous.

The pinned CRDs come from the upstream root of tests/upstream.py (``../shared`` in CI, else the cache that
``python -m tests.upstream fetch`` fills).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from jsonschema import Draft202012Validator

from components.model.diff import paths
from tests import conformance, upstream
from tests.conformance import SchemaRegistry, validate

# Every (apiVersion, kind) the pinned CRDs serve: the conformance test relies on all of them being indexed.
PINNED = [
    *[
        (f"gateway.networking.k8s.io/{v}", k)
        for v in ("v1", "v1beta1")
        for k in ("Gateway", "GatewayClass", "HTTPRoute")
    ],
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    *[
        (f"kueue.x-k8s.io/{version}", kind)
        for version in ("v1beta1", "v1beta2")
        for kind in (
            "AdmissionCheck",
            "ClusterQueue",
            "Cohort",
            "LocalQueue",
            "ResourceFlavor",
            "Topology",
            "WorkloadPriorityClass",
        )
    ],
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    *[
        (f"monitoring.googleapis.com/{version}", kind)
        for version in ("v1", "v1alpha1")
        for kind in ("ClusterPodMonitoring", "PodMonitoring")
    ],
]

UPSTREAM = {  # project -> (repository, pinned tag, CRD folder), as the module docstring must list them
    "kueue": ("kueue", "v0.17.4", "config/components/crd/bases"),
    "jobset": ("jobset", "v0.11.1", "config/components/crd/bases"),
    "lws": ("lws", "v0.8.0", "config/crd/bases"),
    "gaie": ("gateway-api-inference-extension", "v1.5.0", "config/crd/bases"),
    "gateway-api": ("gateway-api", "v1.4.1", "config/crd/standard"),
}


@pytest.fixture(scope="module")
def registry() -> SchemaRegistry:
    return conformance.require_registry()


def _errors(registry: SchemaRegistry, obj: dict[str, Any]) -> list[str]:
    return validate(obj, registry=registry)


# --------------------------------------------------------------------------------------------- fixtures (objects)

TOPOLOGY = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Topology",
    "metadata": {"name": "tpu-topology", "labels": {"app.kubernetes.io/part-of": "gke-tpu-slicing"}},
    "spec": {
        "levels": [
            {"nodeLabel": "cloud.google.com/gce-topology-block"},
            {"nodeLabel": "cloud.google.com/gke-tpu-slice-4x4-id"},
            {"nodeLabel": "kubernetes.io/hostname"},
        ]
    },
}

CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "tpu-cq"},
    "spec": {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["google.com/tpu", "memory"],
                "flavors": [
                    {
                        "name": "tpu-v6e-4x4",
                        "resources": [
                            {"name": "google.com/tpu", "nominalQuota": 64},
                            {"name": "memory", "nominalQuota": "1Ti"},
                        ],
                    }
                ],
            }
        ],
    },
}

POD_SPEC = {
    "restartPolicy": "Never",
    "nodeSelector": {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
    },
    "containers": [
        {
            "name": "main",
            "image": "us-docker.pkg.dev/example/train:1",
            "imagePullPolicy": "IfNotPresent",
            "command": ["python", "-m", "train"],
            "env": [{"name": "JAX_PLATFORMS", "value": "tpu"}],
            "ports": [{"containerPort": 8471, "name": "tpu"}],
            "resources": {"requests": {"google.com/tpu": 4}, "limits": {"google.com/tpu": "4", "memory": "16Gi"}},
        }
    ],
}

JOBSET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {
        "name": "train",
        "namespace": "team-a",
        "labels": {"kueue.x-k8s.io/queue-name": "tpu-lq"},
        "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"},
    },
    "spec": {
        "failurePolicy": {"maxRestarts": 3},
        "replicatedJobs": [
            {
                "name": "slice",
                "replicas": 2,
                "template": {
                    "spec": {
                        "parallelism": 4,
                        "completions": 4,
                        "backoffLimit": 0,
                        "template": {"metadata": {"labels": {"app": "train"}}, "spec": copy.deepcopy(POD_SPEC)},
                    }
                },
            }
        ],
    },
}

LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "serve", "namespace": "team-a"},
    "spec": {
        "replicas": 1,
        "leaderWorkerTemplate": {
            "size": 4,
            "workerTemplate": {"spec": {"containers": [{"name": "worker", "image": "vllm/vllm-tpu:latest"}]}},
        },
    },
}

GATEWAY = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "Gateway",
    "metadata": {"name": "inference", "namespace": "team-a"},
    "spec": {
        "gatewayClassName": "gke-l7-regional-internal-managed",
        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
    },
}

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "team-a"}}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "serve", "namespace": "team-a"},
    "spec": {"selector": {"app": "serve"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]},
}


def _with(obj: dict[str, Any], path: str, key: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    paths.assign(out, paths.parse(f"{path}.{key}"), value)
    return out


# --------------------------------------------------------------------------------------------- the registry


def test_registry_indexes_every_served_version_of_the_pinned_crds(registry: SchemaRegistry) -> None:
    assert registry.kinds() == sorted(PINNED)


@pytest.mark.parametrize(("api_version", "kind"), PINNED, ids=[f"{a}/{k}" for a, k in PINNED])
def test_every_pinned_kind_rejects_unknown_fields_at_the_root_and_in_metadata(
    registry: SchemaRegistry, api_version: str, kind: str
) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "nmae": "typo"}, "bogus": 1}
    errors = _errors(registry, obj)
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
        assert schema["properties"]["metadata"] == {"$ref": conformance.OBJECT_META_REF}
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
    assert _errors(registry, check) == []
    check["spec"]["parameters"]["kind"] = "Not-A-Kind-"
    (error,) = _errors(registry, check)
    assert error.startswith("$.spec.parameters.kind: 'Not-A-Kind-' does not match '(?i)^[a-z]")


def test_the_published_schema_is_left_untouched(registry: SchemaRegistry) -> None:
    published = registry.schema("kueue.x-k8s.io/v1beta2", "Topology")
    assert "additionalProperties" not in published["properties"]["spec"]
    strict = registry.strict_schema("kueue.x-k8s.io/v1beta2", "Topology")
    assert strict["properties"]["spec"]["additionalProperties"] is False


# --------------------------------------------------------------------------------------------- objects

CONTAINER = "spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
QUOTA = "spec.resourceGroups[0].flavors[0].resources"
RJ = JOBSET["spec"]["replicatedJobs"][0]
# (object, its errors in order): an error ending in "..." is a prefix. Valid objects of every kind pass; a typo at
# any depth, a wrong type, a missing required field and a duplicate key of a map list each fail, all reported.
OBJECTS = {
    "topology": (TOPOLOGY, []),
    "topology unknown spec field": (_with(TOPOLOGY, "spec", "levelz", []), ['$.spec.levelz: unknown field "levelz"']),
    "topology unknown level field": (
        _with(TOPOLOGY, "spec.levels[1]", "nodeLabell", "x"),
        ['$.spec.levels[1].nodeLabell: unknown field "nodeLabell"'],
    ),
    "topology missing levels": ({**TOPOLOGY, "spec": {}}, ["$.spec: 'levels' is a required property"]),
    "cluster queue, int and string quantities": (CLUSTER_QUEUE, []),
    "array": (
        _with(CLUSTER_QUEUE, "spec", "resourceGroups", "all"),
        ["$.spec.resourceGroups: 'all' is not of type 'array'"],
    ),
    "object": (
        _with(CLUSTER_QUEUE, "spec", "namespaceSelector", "all"),
        ["$.spec.namespaceSelector: 'all' is not of type 'object'"],
    ),
    "int-or-string": (
        _with(CLUSTER_QUEUE, f"{QUOTA}[0]", "nominalQuota", True),
        [f"$.{QUOTA}[0].nominalQuota: True is not valid under any..."],
    ),
    "quantity-pattern": (
        _with(CLUSTER_QUEUE, f"{QUOTA}[1]", "nominalQuota", "lots"),
        [f"$.{QUOTA}[1].nominalQuota: 'lots' does not match..."],
    ),
    "duplicate map-list key": (
        _with(CLUSTER_QUEUE, f"{QUOTA}[1]", "name", "google.com/tpu"),
        [f"$.{QUOTA}[1]: duplicate entry name='google.com/tpu' in a map list (same key as [0])"],
    ),
    "jobset with nested job and pod templates": (JOBSET, []),
    "jobset deep typo": (
        _with(JOBSET, CONTAINER, "imagePullPolicyy", "Always"),
        [f'$.{CONTAINER}.imagePullPolicyy: unknown field "imagePullPolicyy"'],
    ),
    "jobset, every error": (
        _with(
            _with(
                _with(JOBSET, "spec.replicatedJobs[0].template.spec.template.spec", "nodeSelectorr", {}),
                "spec.replicatedJobs[0].template.spec.template.metadata",
                "labels",
                {"app": 7},
            ),
            "spec.replicatedJobs[0]",
            "replicas",
            "two",
        ),
        [
            "$.spec.replicatedJobs[0].replicas: 'two' is not of type 'integer'",
            "$.spec.replicatedJobs[0].template.spec.template.metadata.labels.app: 7 is not of type 'string'",
            '$.spec.replicatedJobs[0].template.spec.template.spec.nodeSelectorr: unknown field "nodeSelectorr"',
        ],
    ),
    # Pulumi carries numbers as doubles: 2.0 is the integer 2.
    "integral float": (_with(JOBSET, "spec.replicatedJobs[0]", "replicas", 2.0), []),
    "int32 range": (
        _with(JOBSET, "spec.replicatedJobs[0]", "replicas", 2**31),
        ["$.spec.replicatedJobs[0].replicas: 2147483648 is not a 'int32'"],
    ),
    "duplicate replicated job": (
        _with(JOBSET, "spec", "replicatedJobs", [RJ, RJ]),
        ["$.spec.replicatedJobs[1]: duplicate entry name='slice' in a map list (same key as [0])"],
    ),
    "lws": (LWS, []),
    "lws worker typo": (
        _with(LWS, "spec.leaderWorkerTemplate.workerTemplate.spec", "hostNetwrok", True),
        ['$.spec.leaderWorkerTemplate.workerTemplate.spec.hostNetwrok: unknown field "hostNetwrok"'],
    ),
    # spec.addresses[] has a oneOf whose branches name only some fields: they must not be closed.
    "gateway": (GATEWAY, []),
    "gateway hostname address": (
        _with(GATEWAY, "spec", "addresses", [{"type": "Hostname", "value": "gw.example.com"}]),
        [],
    ),
    "gateway ip address": (_with(GATEWAY, "spec", "addresses", [{"type": "IPAddress", "value": "10.0.0.7"}]), []),
    "gateway bad ip": (
        _with(GATEWAY, "spec", "addresses", [{"type": "IPAddress", "value": "10.0.0.700"}]),
        ["$.spec.addresses[0]:..."],
    ),
    "gateway address typo": (
        _with(GATEWAY, "spec", "addresses", [{"type": "Hostname", "valeu": "gw.example.com"}]),
        ['$.spec.addresses[0].valeu: unknown field "valeu"'],
    ),
    "gateway bad listener": (
        _with(GATEWAY, "spec.listeners[0]", "port", "eighty"),
        ["$.spec.listeners[0].port: 'eighty' is not of type 'integer'"],
    ),
    "namespace": (NAMESPACE, []),
    "secret": ({**SECRET, "data": {"token": "dA=="}}, []),
    "secret not base64": (
        {**SECRET, "data": {"token": "not base64!"}},
        ["$.data.token: 'not base64!' is not a 'byte'"],
    ),
    "secret typo": (
        {**SECRET, "stringData": {"token": "t"}, "strngData": {"token": "t"}},
        ['$.strngData: unknown field "strngData"'],
    ),
}


@pytest.mark.parametrize(("obj", "expected"), OBJECTS.values(), ids=OBJECTS.keys())
def test_objects_fail_exactly_where_they_break(registry: SchemaRegistry, obj: dict, expected: list[str]) -> None:
    errors = _errors(registry, obj)
    assert len(errors) == len(expected), errors
    for error, want in zip(errors, expected, strict=True):
        assert error.startswith(want[:-3]) if want.endswith("...") else error == want, errors


def test_the_builtin_schemas_are_kubernetes_validates(registry: SchemaRegistry) -> None:
    assert kubernetes_validate.validate(NAMESPACE, "1.36.0", strict=True) == "1.36"
    with pytest.raises(kubernetes_validate.ValidationError):  # the package agrees, on the same schema
        kubernetes_validate.validate(OBJECTS["secret typo"][0], "1.36.0", strict=True)


# --------------------------------------------------------------------------------------------- dispatch, built-ins


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("example.com/v1", "Widget"), ("kueue.x-k8s.io/v1beta2", "Workload"), ("apps.example.com/v1", "Deployment")],
)
def test_unknown_kind_fails(registry: SchemaRegistry, api_version: str, kind: str) -> None:
    errors = _errors(registry, {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}})
    assert len(errors) == 1 and errors[0].startswith(f"$: no schema for {api_version}/{kind} ("), errors


@pytest.mark.parametrize("obj", [{}, {"kind": "Namespace"}, {"apiVersion": "v1", "kind": 3}, []])
def test_malformed_objects_fail(registry: SchemaRegistry, obj: Any) -> None:
    assert len(_errors(registry, obj)) == 1


def test_builtin_deployment_with_a_deep_typo_and_duplicate_containers_fails(registry: SchemaRegistry) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "epp", "namespace": "team-a"},
        "spec": {
            "selector": {"matchLabels": {"app": "epp"}},
            "template": {"metadata": {"labels": {"app": "epp"}}, "spec": copy.deepcopy(POD_SPEC)},
        },
    }
    assert _errors(registry, deployment) == []
    containers = deployment["spec"]["template"]["spec"]["containers"]
    containers.append({**containers[0], "imagePullPolicyy": "Always"})
    assert _errors(registry, deployment) == [
        "$.spec.template.spec.containers[1]: duplicate entry name='main' in a map list (same key as [0])",
        '$.spec.template.spec.containers[1].imagePullPolicyy: unknown field "imagePullPolicyy"',
    ]


def test_a_pinned_crd_validates_as_a_builtin_customresourcedefinition(registry: SchemaRegistry) -> None:
    crd = copy.deepcopy(registry.crd("kueue.x-k8s.io/v1beta2", "Topology"))
    assert _errors(registry, crd) == []
    crd["spec"]["scopee"] = "Cluster"
    assert _errors(registry, crd) == ['$.spec.scopee: unknown field "scopee"']


@pytest.mark.parametrize("builtin", [True, False], ids=["ConfigMap", "Topology"])
def test_non_string_label_values_fail(registry: SchemaRegistry, builtin: bool) -> None:
    obj = (
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
        if builtin
        else copy.deepcopy(TOPOLOGY)
    )
    obj["metadata"]["labels"] = {"ok": "yes", "replicas": 4}
    obj["metadata"]["annotations"] = {"enabled": True}
    errors = _errors(registry, obj)
    assert [e.split(":")[0] for e in errors] == ["$.metadata.annotations.enabled", "$.metadata.labels.replicas"]


@pytest.mark.parametrize(
    ("target_port", "valid"),
    [(8000, True), ("http", True), (8000.0, True), (True, False), ([80], False), ({"port": 80}, False)],
)
def test_int_or_string_accepts_an_int_or_a_string_only(registry: SchemaRegistry, target_port: Any, valid: bool) -> None:
    errors = _errors(registry, _with(SERVICE, "spec.ports[0]", "targetPort", target_port))
    assert [e.startswith("$.spec.ports[0].targetPort: ") for e in errors] == ([] if valid else [True]), errors


def test_module_level_validate_uses_the_upstream_root(registry: SchemaRegistry, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(upstream.ROOT_ENV, str(registry.directories[0].parent.parent))
    assert validate(TOPOLOGY) == []
    monkeypatch.setenv(upstream.ROOT_ENV, str(tmp_path))  # an empty root: no CRDs
    assert validate(NAMESPACE) == []
    (error,) = validate(TOPOLOGY)
    assert error.startswith("$: no schema for kueue.x-k8s.io/v1beta2/Topology") and upstream.FETCH_COMMAND in error


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
