"""The TPU node pools and their workload policy (components/tpu_node_pools.py): shapes, counts, ordering,
replacement."""

from __future__ import annotations

import pytest

from components.model.diff import engine
from tests.graph_queries import tpu_pools
from tests.harness import CLUSTER, POOL, Run, ok, preview, run_program
from tests.stack_config import FIXED_SERVING, P, merge

POLICY = ("gcp:compute/resourcePolicy:ResourcePolicy", "capacity-policy")
REPLACEMENTS = "pulumi-python:dynamic/teardown:PoolReplacements"


def test_workload_policy(dev: Run) -> None:
    policy = dev.get(*POLICY).inputs
    assert policy["name"] == "superslice-policy"
    assert policy["region"] == "us-central1"
    assert policy["workloadPolicy"] == {
        "type": "HIGH_THROUGHPUT",
        "acceleratorTopology": "4x4x4",
        "acceleratorTopologyMode": "PROVISION_ONLY",
    }


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_pools_send_the_topology_of_their_workload_policy_beside_its_name(stack: str) -> None:
    """Decided: `placement_policy.tpu_topology` is kept beside the workload policy's `policy_name`.

    * The API accepts the two together on tpu7x pools: vllm-project/ci-infra runs such pools
      (terraform/gcp_old/tpu-inference/k8s/workers.tf, `placement_policy { type = "", policy_name, tpu_topology }`)
      and its #547 confirmed against a live cluster that "a probe pool came up RUNNING and the API stored
      `policyName` and `tpuTopology` with no `type`".
    * xpk leaves `--tpu-topology` out when it uses a workload policy (AI-Hypercomputer/xpk main
      src/xpk/core/nodepool.py: "--tpu-topology should also not be passed when workload policy is used", from
      968cf324 "Stop using GPP if WP is used"): that commit drops `--placement-type=COMPACT`, which is exclusive
      with a workload policy, and the topology with it, naming no refusal of the topology by the API.
    * The provider's `tpu_topology` is Optional, not Computed (resource_container_node_pool.go lines 399-403)
      and read back as GKE stores it (line 1614): sent, it equals what GKE stores, so the second run is a no-op
      (test_reservation_stability.py, test_the_second_up_finds_no_difference_in_the_pools_forcenew_blocks).
    So it stays, and it is always the policy's own `accelerator_topology`, never a second value."""
    run = ok(stack=stack)
    (policy,) = run.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert tpu_pools(run)
    for pool in tpu_pools(run):
        placement = pool.inputs["placementPolicy"]
        assert placement["type"] == "" and placement["policyName"] == policy.inputs["name"]
        assert placement["tpuTopology"] == policy.inputs["workloadPolicy"]["acceleratorTopology"]


def test_tpu_node_pools(dev: Run) -> None:
    pools = sorted(tpu_pools(dev), key=lambda r: r.name)
    assert [p.inputs["name"] for p in pools] == ["tpu7-pool-1", "tpu7-pool-2"]
    # The harness's block: healthy free sub-blocks subblock-001..; the pools take the first ones in order.
    for pool, sub_block in zip(pools, ["subblock-001", "subblock-002"], strict=True):
        p = pool.inputs
        assert p["location"] == "us-central1"
        assert p["nodeLocations"] == ["us-central1-ai1a"]
        assert p["nodeCount"] == 16  # 4x4x4 = 64 chips / 4 chips per VM
        cfg = p["nodeConfig"]
        assert cfg["machineType"] == "tpu7x-standard-4t"
        assert cfg["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert cfg["reservationAffinity"] == {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [
                "projects/my-tpu-project/reservations/tpu7x-reservation/reservationBlocks/block-0/"
                f"reservationSubBlocks/{sub_block}"
            ],
        }
        assert cfg["labels"] == {"gke-tpu-slicing/reservation-sub-block": sub_block}


def test_node_pools_are_parallel_and_ordered_after_cluster_and_policy(dev: Run) -> None:
    cluster = dev.get(CLUSTER, "cluster-gke")
    policy = dev.get(*POLICY)
    p1, p2 = dev.get(POOL, "capacity-tpu7-pool-1"), dev.get(POOL, "capacity-tpu7-pool-2")
    for pool in (p1, p2):
        # Through Output references, so destroy deletes the pool before the policy and the cluster.
        assert cluster.urn in pool.property_dependencies["cluster"]
        assert policy.urn in pool.property_dependencies["placementPolicy"]
    assert not dev.depends_on(p1, p2)
    assert not dev.depends_on(p2, p1)


@pytest.mark.parametrize(
    ("cubes", "pools"), [(0, []), (1, ["tpu7-pool-1"]), (3, ["tpu7-pool-1", "tpu7-pool-2", "tpu7-pool-3"])]
)
def test_cube_count_sets_the_pools(cubes: int, pools: list[str]) -> None:
    overrides: dict = {f"{P}:tpu": {"cubes": cubes}}
    if cubes == 1:  # the 4x4x8 super-slice demo needs two cubes, dev's burst slots a second one too
        overrides = merge(FIXED_SERVING, {**overrides, f"{P}:demos": {"superslicing": {"enabled": False}}})
    if cubes == 0:  # no TPU pools: nothing to reserve, nothing to schedule
        overrides = {
            f"{P}:zone": "us-central1-ai1a",  # no reservation to read it from
            f"{P}:tpu": {"cubes": 0, "reservation": {"name": None}},
            f"{P}:demos": {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}},
            f"{P}:serving": {"enabled": False},
        }
    run = ok(overrides)
    assert sorted(r.inputs["name"] for r in tpu_pools(run)) == pools


def test_shared_reservation_without_block_and_other_cube_topology() -> None:
    run = ok(
        merge(
            FIXED_SERVING,  # two 2x4x4 cubes hold the floors and the demo, not dev's burst slots too
            {
                f"{P}:tpu": {"cubeTopology": "2x4x4", "reservation": {"project": "shared-resv-project", "block": ""}},
                f"{P}:demos": {"superslicing": {"enabled": False}},
            },
        )
    )
    pool = run.get(POOL, "capacity-tpu7-pool-1").inputs
    assert pool["nodeConfig"]["reservationAffinity"]["values"] == [
        "projects/shared-resv-project/reservations/tpu7x-reservation"
    ]
    assert pool["nodeCount"] == 8  # 2x4x4 = 32 chips / 4 per VM
    policy = run.get(*POLICY).inputs
    assert policy["workloadPolicy"]["acceleratorTopology"] == "2x4x4"


def test_another_reservation_replaces_the_tpu_pools_delete_first(dev: Run) -> None:
    other = run_program({f"{P}:tpu": {"reservation": {"name": "another-reservation"}}})
    changes = [c for c in preview(dev, other).changes if c.action != engine.SAME]
    # The record of the pools takes their new ids (the program's check refuses this while workloads run).
    record = [c for c in changes if c.type == REPLACEMENTS]
    assert [c.action for c in record] == [engine.UPDATE]
    moved = [c for c in changes if c.type != REPLACEMENTS]
    # the pools, and with each its teardown gate (the gate's provider replaces it when its pool is new)
    gates = {c.name for c in moved if c.type == "pulumi-python:dynamic/teardown:SliceGate"}
    assert {c.name for c in moved} - gates == {p.name for p in tpu_pools(dev)} and len(gates) == len(tpu_pools(dev))
    assert all(c.action == engine.REPLACE and c.delete_first for c in moved)


def test_pools_reference_the_policy_so_a_policy_replacement_replaces_them_first(dev: Run) -> None:
    # Pulumi deletes dependents whose referencing input is ForceNew (placement_policy; the reference:
    # test_node_pools_are_parallel_and_ordered_after_cluster_and_policy) before a delete-first replacement of what
    # they reference, and the model says so: a new accelerator topology mode replaces the policy and every pool.
    other = run_program({f"{P}:tpu": {"acceleratorTopologyMode": "AUTO_CONNECT"}})
    result = preview(dev, other).by_name()
    assert result["capacity-policy"].action == engine.REPLACE
    assert all(result[p.name].action == engine.REPLACE for p in tpu_pools(dev))


def test_a_new_workload_policy_name_replaces_the_policy_and_first_every_pool(dev: Run) -> None:
    # `name` is not ForceNew on the resource policy: the provider would PATCH a policy of the new name, which
    # does not exist (resource_compute_resource_policy.go L151-161, L876-891).
    other = run_program({f"{P}:tpu": {"workloadPolicyName": "other-policy"}})
    result = preview(dev, other).by_name()
    assert (result["capacity-policy"].action, result["capacity-policy"].delete_first) == (engine.REPLACE, True)
    assert all(result[p.name].action == engine.REPLACE for p in tpu_pools(dev))


def test_nothing_of_capacity_waits_for_the_slice_controller_nor_it_for_the_pools(dev: Run) -> None:
    """They are created while the add-ons install; only their gates wait for the slice controller."""
    slice_controller = dev.get("kubernetes:yaml/v2:ConfigFile", "slice-controller-manifest")
    in_cluster = [r for r in dev.registrations if r.type.startswith("kubernetes:")]
    for pool in tpu_pools(dev):
        assert not any(dev.depends_on(pool, r) for r in in_cluster), pool.name
        assert not dev.depends_on(slice_controller, pool)
    assert not dev.depends_on(dev.get(*POLICY), slice_controller)
