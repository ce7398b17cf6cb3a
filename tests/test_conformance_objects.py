"""Objects of every kind fail exactly where they break (a typo at any depth, a wrong type, a duplicate key, every
error reported) against the pinned CRDs and Kubernetes 1.36, so the conformance test cannot be vacuous."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
import yaml

from components.model.diff import paths
from tests import conformance, upstream
from tests.conformance import SchemaRegistry, validate


@pytest.fixture(scope="module")
def registry() -> SchemaRegistry:
    return conformance.require_registry()


# --------------------------------------------------------------------------------------------- fixtures (objects)

# One valid object of each kind (parsed from YAML, so the types are YAML's: "4" a string, 4 an integer).
TOPOLOGY, CLUSTER_QUEUE, JOBSET, LWS, GATEWAY, NAMESPACE, SECRET, SERVICE = yaml.safe_load_all("""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: tpu-topology, labels: {app.kubernetes.io/part-of: gke-tpu-slicing}}
spec:
  levels:
  - nodeLabel: cloud.google.com/gce-topology-block
  - nodeLabel: cloud.google.com/gke-tpu-slice-4x4-id
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: tpu-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [google.com/tpu, memory]
    flavors:
    - name: tpu-v6e-4x4
      resources: [{name: google.com/tpu, nominalQuota: 64}, {name: memory, nominalQuota: 1Ti}]
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: tpu-lq}
  annotations: {alpha.jobset.sigs.k8s.io/exclusive-topology: cloud.google.com/gke-nodepool}
spec:
  failurePolicy: {maxRestarts: 3}
  replicatedJobs:
  - name: slice
    replicas: 2
    template:
      spec:
        parallelism: 4
        completions: 4
        backoffLimit: 0
        template:
          metadata: {labels: {app: train}}
          spec:
            restartPolicy: Never
            nodeSelector: {cloud.google.com/gke-tpu-accelerator: tpu-v6e-slice, cloud.google.com/gke-tpu-topology: 4x4}
            containers:
            - name: main
              image: us-docker.pkg.dev/example/train:1
              imagePullPolicy: IfNotPresent
              command: [python, -m, train]
              env: [{name: JAX_PLATFORMS, value: tpu}]
              ports: [{containerPort: 8471, name: tpu}]
              resources: {requests: {google.com/tpu: 4}, limits: {google.com/tpu: "4", memory: 16Gi}}
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: serve, namespace: team-a}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 4
    workerTemplate: {spec: {containers: [{name: worker, image: "vllm/vllm-tpu:latest"}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: inference, namespace: team-a}
spec:
  gatewayClassName: gke-l7-regional-internal-managed
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
{apiVersion: v1, kind: Namespace, metadata: {name: team-a, labels: {team: a}}}
---
{apiVersion: v1, kind: Secret, metadata: {name: token, namespace: team-a}}
---
apiVersion: v1
kind: Service
metadata: {name: serve, namespace: team-a}
spec: {selector: {app: serve}, ports: [{name: http, port: 80, targetPort: 8000}]}
""")
POD_SPEC = JOBSET["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def _with(obj: dict[str, Any], edits: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` with each path set to its value."""
    out = copy.deepcopy(obj)
    for path, value in edits.items():
        paths.assign(out, paths.parse(path), value)
    return out


# --------------------------------------------------------------------------------------------- objects

POD = "spec.replicatedJobs[0].template.spec.template"
CONTAINER = f"{POD}.spec.containers[0]"
QUOTA = "spec.resourceGroups[0].flavors[0].resources"
RJ = JOBSET["spec"]["replicatedJobs"][0]
# (object, its errors in order): an error ending in "..." is a prefix. Valid objects of every kind pass; a typo at
# any depth, a wrong type, a missing required field and a duplicate key of a map list each fail, all reported.
OBJECTS = {
    "topology": (TOPOLOGY, []),
    "topology unknown spec field": (_with(TOPOLOGY, {"spec.levelz": []}), ['$.spec.levelz: unknown field "levelz"']),
    "topology unknown level field": (
        _with(TOPOLOGY, {"spec.levels[1].nodeLabell": "x"}),
        ['$.spec.levels[1].nodeLabell: unknown field "nodeLabell"'],
    ),
    "topology missing levels": ({**TOPOLOGY, "spec": {}}, ["$.spec: 'levels' is a required property"]),
    "cluster queue, int and string quantities": (CLUSTER_QUEUE, []),
    "array": (
        _with(CLUSTER_QUEUE, {"spec.resourceGroups": "all"}),
        ["$.spec.resourceGroups: 'all' is not of type 'array'"],
    ),
    "object": (
        _with(CLUSTER_QUEUE, {"spec.namespaceSelector": "all"}),
        ["$.spec.namespaceSelector: 'all' is not of type 'object'"],
    ),
    "int-or-string": (
        _with(CLUSTER_QUEUE, {f"{QUOTA}[0].nominalQuota": True}),
        [f"$.{QUOTA}[0].nominalQuota: True is not valid under any..."],
    ),
    "quantity-pattern": (
        _with(CLUSTER_QUEUE, {f"{QUOTA}[1].nominalQuota": "lots"}),
        [f"$.{QUOTA}[1].nominalQuota: 'lots' does not match..."],
    ),
    "duplicate map-list key": (
        _with(CLUSTER_QUEUE, {f"{QUOTA}[1].name": "google.com/tpu"}),
        [f"$.{QUOTA}[1]: duplicate entry name='google.com/tpu' in a map list (same key as [0])"],
    ),
    "jobset with nested job and pod templates": (JOBSET, []),
    "jobset deep typo": (
        _with(JOBSET, {f"{CONTAINER}.imagePullPolicyy": "Always"}),
        [f'$.{CONTAINER}.imagePullPolicyy: unknown field "imagePullPolicyy"'],
    ),
    "jobset, every error": (
        _with(
            JOBSET,
            {
                f"{POD}.spec.nodeSelectorr": {},
                f"{POD}.metadata.labels": {"app": 7},
                "spec.replicatedJobs[0].replicas": "two",
            },
        ),
        [
            "$.spec.replicatedJobs[0].replicas: 'two' is not of type 'integer'",
            "$.spec.replicatedJobs[0].template.spec.template.metadata.labels.app: 7 is not of type 'string'",
            '$.spec.replicatedJobs[0].template.spec.template.spec.nodeSelectorr: unknown field "nodeSelectorr"',
        ],
    ),
    # Pulumi carries numbers as doubles: 2.0 is the integer 2.
    "integral float": (_with(JOBSET, {"spec.replicatedJobs[0].replicas": 2.0}), []),
    "int32 range": (
        _with(JOBSET, {"spec.replicatedJobs[0].replicas": 2**31}),
        ["$.spec.replicatedJobs[0].replicas: 2147483648 is not a 'int32'"],
    ),
    "duplicate replicated job": (
        _with(JOBSET, {"spec.replicatedJobs": [RJ, RJ]}),
        ["$.spec.replicatedJobs[1]: duplicate entry name='slice' in a map list (same key as [0])"],
    ),
    "lws": (LWS, []),
    "lws worker typo": (
        _with(LWS, {"spec.leaderWorkerTemplate.workerTemplate.spec.hostNetwrok": True}),
        ['$.spec.leaderWorkerTemplate.workerTemplate.spec.hostNetwrok: unknown field "hostNetwrok"'],
    ),
    # spec.addresses[] has a oneOf whose branches name only some fields: they must not be closed.
    "gateway": (GATEWAY, []),
    "gateway hostname address": (
        _with(GATEWAY, {"spec.addresses": [{"type": "Hostname", "value": "gw.example.com"}]}),
        [],
    ),
    "gateway ip address": (_with(GATEWAY, {"spec.addresses": [{"type": "IPAddress", "value": "10.0.0.7"}]}), []),
    "gateway bad ip": (
        _with(GATEWAY, {"spec.addresses": [{"type": "IPAddress", "value": "10.0.0.700"}]}),
        ["$.spec.addresses[0]:..."],
    ),
    "gateway address typo": (
        _with(GATEWAY, {"spec.addresses": [{"type": "Hostname", "valeu": "gw.example.com"}]}),
        ['$.spec.addresses[0].valeu: unknown field "valeu"'],
    ),
    "gateway bad listener": (
        _with(GATEWAY, {"spec.listeners[0].port": "eighty"}),
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
    errors = validate(obj, registry)
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
    errors = validate({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}, registry)
    assert len(errors) == 1 and errors[0].startswith(f"$: no schema for {api_version}/{kind} ("), errors


@pytest.mark.parametrize("obj", [{}, {"kind": "Namespace"}, {"apiVersion": "v1", "kind": 3}, []])
def test_malformed_objects_fail(registry: SchemaRegistry, obj: Any) -> None:
    assert len(validate(obj, registry)) == 1


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
    assert validate(deployment, registry) == []
    containers = deployment["spec"]["template"]["spec"]["containers"]
    containers.append({**containers[0], "imagePullPolicyy": "Always"})
    assert validate(deployment, registry) == [
        "$.spec.template.spec.containers[1]: duplicate entry name='main' in a map list (same key as [0])",
        '$.spec.template.spec.containers[1].imagePullPolicyy: unknown field "imagePullPolicyy"',
    ]


def test_a_pinned_crd_validates_as_a_builtin_customresourcedefinition(registry: SchemaRegistry) -> None:
    crd = copy.deepcopy(registry.crd("kueue.x-k8s.io/v1beta2", "Topology"))
    assert validate(crd, registry) == []
    crd["spec"]["scopee"] = "Cluster"
    assert validate(crd, registry) == ['$.spec.scopee: unknown field "scopee"']


@pytest.mark.parametrize("builtin", [True, False], ids=["ConfigMap", "Topology"])
def test_non_string_label_values_fail(registry: SchemaRegistry, builtin: bool) -> None:
    obj = (
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
        if builtin
        else copy.deepcopy(TOPOLOGY)
    )
    obj["metadata"]["labels"] = {"ok": "yes", "replicas": 4}
    obj["metadata"]["annotations"] = {"enabled": True}
    errors = validate(obj, registry)
    assert [e.split(":")[0] for e in errors] == ["$.metadata.annotations.enabled", "$.metadata.labels.replicas"]


@pytest.mark.parametrize(
    ("target_port", "valid"),
    [(8000, True), ("http", True), (8000.0, True), (True, False), ([80], False), ({"port": 80}, False)],
)
def test_int_or_string_accepts_an_int_or_a_string_only(registry: SchemaRegistry, target_port: Any, valid: bool) -> None:
    errors = validate(_with(SERVICE, {"spec.ports[0].targetPort": target_port}), registry)
    assert [e.startswith("$.spec.ports[0].targetPort: ") for e in errors] == ([] if valid else [True]), errors


def test_module_level_validate_uses_the_upstream_root(registry: SchemaRegistry, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(upstream.ROOT_ENV, str(registry.directories[0].parent.parent))
    assert validate(TOPOLOGY) == []
    monkeypatch.setenv(upstream.ROOT_ENV, str(tmp_path))  # an empty root: no CRDs
    assert validate(NAMESPACE) == []
    (error,) = validate(TOPOLOGY)
    assert error.startswith("$: no schema for kueue.x-k8s.io/v1beta2/Topology") and upstream.FETCH_COMMAND in error
