"""The package's building blocks (components/package/blocks.py): their schema, and `construct` under Pulumi's mocks
with the dev stack's values registering what the program's own components register, and their one-line errors."""

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from pulumi.errors import InputPropertiesError

from components.cli.mockrun import contains_secret, execute, normalize, unwrap
from components.model.config.checks import PROJECT
from components.package import NAME
from components.package.blocks import SliceQueues
from components.package.provider import PackageProvider
from components.package.schema import schema
from tests.harness import Mocks, run_program
from tests.package_schema import TOKEN, args_of, schema_problems, wire
from tests.stack_config import CLOCK, FIXED_SERVING, ROOT, merge, stack_file_config

CAPACITY = ("gcp:compute/resourcePolicy:ResourcePolicy", "gcp:container/nodePool:NodePool")
GATES = ("pulumi-python:dynamic/teardown:SliceGate", "pulumi-python:dynamic/teardown:PoolReplacements")
QUEUES = (
    "kubernetes:core/v1:Namespace",
    "pulumi-python:dynamic/queues:ImmutableFields",
    *(
        f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}"
        for kind in ("Topology", "ResourceFlavor", "AdmissionCheck", "ClusterQueue", "LocalQueue")
    ),
    "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass",
)


def test_the_capacity_blocks_resource_inputs_are_inputs_and_its_shape_plain() -> None:
    inputs = schema()["resources"][f"{NAME}:index:TpuCapacity"]["inputProperties"]
    assert {k for k, p in inputs.items() if not p.get("plain")} == {"cluster", "nodeServiceAccount", "kubeconfig"}
    assert inputs["tpu"]["$ref"].endswith(":TpuSettings")  # the program's `tpu` keys, the stack's own type


def _by_type(run: Any, types: tuple[str, ...], prefix: str = "", only: str = "") -> dict[str, list[Any]]:
    """Each type's registrations' inputs, sorted by name without `prefix` (the block's own naming); `only`: the
    names that start with it (the program's component of that name, not another of the same types)."""
    out: dict[str, list[Any]] = {}
    for r in sorted(run.registrations, key=lambda r: r.name):
        if r.type in types and r.name.startswith(only):
            out.setdefault(r.type, []).append(
                (r.name.removeprefix(prefix), normalize(unwrap(r.inputs)), {k: v for k, v in r.options.items()})
            )
    return out


def _construct(block: str, inputs: dict[str, Any], name: str = "b", existing: bool = False, token: str = "") -> Any:
    """`construct` of a block; `existing`: through the caller's Kubernetes provider of that name."""
    provider = PackageProvider()

    def program() -> None:
        opts = pulumi.ResourceOptions()
        if existing:
            opts = pulumi.ResourceOptions(providers={"kubernetes": k8s.Provider("existing", kubeconfig="{}")})
        args = {**wire(inputs), "hfToken": pulumi.Output.secret(token)} if token else wire(inputs)
        provider.construct(name, f"{NAME}:index:{block}", args, opts)

    return execute(stack_file_config("dev"), stack="dev", mocks=Mocks(), now=CLOCK, program=program)


def _names_and_inputs(by_type: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return {t: [(n, i) for n, i, _ in v] for t, v in by_type.items()}


def _without_collectors(by_type: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The NetworkPolicies' rules for Managed Prometheus' collectors left out (the program's scraping)."""
    policy = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
    out = dict(by_type)
    out[policy] = [
        (n, {**i, "spec": {**i["spec"], "ingress": [r for r in i["spec"]["ingress"] if "gmp-system" not in str(r)]}}, o)
        for n, i, o in by_type[policy]
    ]
    return out


def _through_existing(run: Any) -> None:
    """Every Kubernetes object of `run` goes through the caller's provider."""
    existing = next(r for r in run.registrations if r.name == "existing")
    in_cluster = [r for r in run.registrations if r.type.startswith("kubernetes:") and r.custom and r is not existing]
    assert in_cluster and all(r.provider.startswith(existing.urn) for r in in_cluster)


def _dev() -> tuple[dict[str, Any], Any]:
    """Dev's values and program, serving at a fixed size: the blocks have no burst slots (KEDA and the scrapes their
    signal reads are the whole program's)."""
    return args_of(merge(stack_file_config("dev"), FIXED_SERVING)), run_program(FIXED_SERVING)


def test_the_capacity_block_registers_the_programs_pools_policy_and_gates() -> None:
    values, program = _dev()
    assert program.error is None, program.error
    pool = next(r for r in program.registrations if r.type == CAPACITY[1])
    gate = next(r for r in program.registrations if r.type == GATES[0])
    inputs = {
        "project": values["project"],
        "zone": values.get("zone", "us-central1-ai1a"),
        "tpu": values["tpu"],
        # The values the program's cluster has under the same mocks: equivalent inputs.
        "cluster": pool.plain("cluster"),
        "nodeServiceAccount": pool.plain("nodeConfig")["serviceAccount"],
        "kubeconfig": pulumi.Output.secret(gate.plain("kubeconfig")),
        **{k: v for k, v in values.get("cluster", {}).items() if k in ("privateNodes", "protect")},
        "workloads": ["demos.subslicing.enabled", "serving.enabled"],
    }
    run = _construct("TpuCapacity", inputs, name="capacity")
    assert run.error is None, run.error
    mine = _by_type(run, CAPACITY)
    assert mine == _by_type(program, CAPACITY, only="capacity-") and len(mine[CAPACITY[1]]) == values["tpu"]["cubes"]
    mine, theirs = _by_type(run, GATES, "capacity-"), _by_type(program, GATES)
    assert set(mine) == set(GATES)
    assert mine[GATES[0]] == theirs[GATES[0]]  # one gate per pool, the same inputs
    (replacements,) = mine[GATES[1]]
    assert replacements[1]["workloads"] == inputs["workloads"]  # the caller's workloads, not the program's
    (block,) = [r for r in run.registrations if r.type == f"{NAME}:index:TpuCapacity"]
    outputs = run.component_outputs[block.urn]
    assert outputs["nodePools"] and set(outputs) == {"workloadPolicy", "nodePools", "cubeSubBlocks"}


def test_the_queues_block_registers_the_programs_kueue_objects_through_the_callers_provider() -> None:
    values, program = _dev()
    tpu = {k: values["tpu"][k] for k in ("machineType", "cubeTopology", "cubes") if k in values["tpu"]}
    tpu.setdefault("cubes", 2)
    run = _construct(
        "SliceQueues", {"tpu": tpu, "kueue": values.get("kueue", {}), "queuedWorkloads": 3}, "queues", True
    )
    assert run.error is None, run.error
    mine, theirs = _by_type(run, QUEUES), _by_type(program, QUEUES, only="queues-")
    guard = QUEUES[1]
    assert mine.pop(guard)[0][1]["queuedWorkloads"] == 3 and theirs.pop(guard)
    assert _names_and_inputs(mine) == _names_and_inputs(theirs)
    _through_existing(run)


@pytest.mark.parametrize(
    ("block", "inputs", "expected"),
    [
        (
            "TpuCapacity",
            {
                "project": "my-proj",
                "zone": "nowhere",
                "tpu": {"cubes": -1},
                "cluster": "c",
                "nodeServiceAccount": "sa",
                "kubeconfig": "k",
                "drainTimeoutSeconds": -5,
            },
            {"zone", "tpu.cubes", "drainTimeoutSeconds"},
        ),
        ("SliceQueues", {"tpu": {"cubes": 1, "cubeTopology": "3x3x3"}, "kueue": {"priorities": {}}}, None),
        (
            "Serving",
            {
                "project": "my-proj",
                "zone": "us-central1-ai1a",
                "clusterName": "Bad_Name",
                "tpu": {"cubes": 2},
                "serving": {"maxNumSeqs": -1, "weightsBucket": "my-weights"},
            },
            {"clusterName", "serving.maxNumSeqs"},
        ),
        (  # burst slots need KEDA and the scrapes: refused by the block's own input, not a key it lacks
            "Serving",
            {
                "project": "my-proj",
                "zone": "us-central1-ai1a",
                "clusterName": "c",
                "tpu": {"cubes": 2},
                "serving": {
                    "weightsBucket": "my-weights",
                    "decode": {"autoscaling": {"enabled": True, "maxGroups": 6}},
                },
            },
            {"serving.decode.autoscaling.enabled"},
        ),
    ],
)
def test_bad_block_inputs_get_one_line_errors_naming_the_input_before_any_resource(
    block: str, inputs: dict[str, Any], expected: set[str] | None
) -> None:
    run = _construct(block, inputs)
    assert isinstance(run.error, InputPropertiesError), run.error
    assert run.registrations == []
    errors = run.error.errors or []
    paths = {e["property_path"] for e in errors}
    assert paths >= (expected or {"tpu.cubeTopology", "kueue.priorities"})
    for e in errors:
        assert "\n" not in e["reason"] and e["reason"].startswith(f"{PROJECT}:{e['property_path']} = "), e


def test_the_serving_block_registers_the_programs_serving_stack_through_the_callers_provider() -> None:
    """The adapter (components/package/serving_block.py serving_settings) gives the program's Serving the same
    values: every resource it declares has the program's inputs, with the caller's Kubernetes provider."""
    values, program = _dev()
    tpu = {k: values["tpu"][k] for k in ("machineType", "cubeTopology", "cubes") if k in values["tpu"]}
    inputs = {
        "project": values["project"],
        "zone": values.get("zone", "us-central1-ai1a"),
        "clusterName": values.get("cluster", {}).get("name", "qwen-serving-cluster"),
        "tpu": tpu,
        "serving": values["serving"],
        "kueue": values.get("kueue", {}),
    }
    run = _construct("Serving", inputs, "serving", True)
    assert run.error is None, run.error
    (serving,) = [r for r in program.registrations if r.type == "gke-tpu-slicing:serving:Serving"]
    types = tuple({r.type for r in program.registrations if r.parent == serving.urn})
    assert len(types) >= 6
    mine, theirs = _by_type(run, types, only="serving-"), _by_type(program, types, only="serving-")
    # The block scrapes nothing (its observability is off), so its NetworkPolicies admit no collectors.
    assert "gmp-system" not in str(_names_and_inputs(mine)) and "gmp-system" in str(_names_and_inputs(theirs))
    assert _names_and_inputs(mine) == _names_and_inputs(_without_collectors(theirs))
    _through_existing(run)
    (block,) = [r for r in run.registrations if r.type == f"{NAME}:index:Serving"]
    assert set(run.component_outputs[block.urn]) >= {"gatewayName", "verifyCommand", "servingShape"}


def test_the_existing_cluster_example_declares_a_block_with_inputs_the_schema_accepts() -> None:
    root = ROOT / "examples" / "yaml-existing-cluster"
    program = yaml.safe_load((root / "Pulumi.yaml").read_text())
    assert program["runtime"] == "yaml" and NAME in program["packages"] and (root / "README.md").exists()
    (queues,) = [r for r in program["resources"].values() if r["type"] == f"{NAME}:SliceQueues"]
    assert schema_problems(queues["properties"], f"{NAME}:index:SliceQueues") == []
    block = schema()["resources"][f"{NAME}:index:SliceQueues"]
    assert set(program["outputs"].values()) <= {f"${{queues.{k}}}" for k in block["properties"]}
    # Its values pass the block's validation, and its provider is the one it declares.
    args = {"tpu": queues["properties"]["tpu"], "kueue": queues["properties"]["kueue"]}
    assert SliceQueues.input_problems(args) == []  # type: ignore[arg-type]
    assert queues["options"]["providers"]["kubernetes"] == "${cluster}"


def test_the_serving_blocks_token_stays_a_secret() -> None:
    values, _ = _dev()
    inputs = {
        "project": values["project"],
        "zone": "us-central1-ai1a",
        "clusterName": "qwen-serving-cluster",
        "tpu": {"cubes": values["tpu"].get("cubes", 2)},
        "serving": values["serving"],
    }
    run = _construct("Serving", inputs, "serving", True, token=TOKEN)
    assert run.error is None, run.error
    secrets = [r for r in run.registrations if r.type == "kubernetes:core/v1:Secret"]
    assert secrets and all(contains_secret(r.inputs["stringData"]) for r in secrets)
    assert not any(TOKEN in json.dumps(unwrap(r.inputs)) for r in run.registrations if not contains_secret(r.inputs))
