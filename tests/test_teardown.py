"""The teardown gates (components/teardown.py): what their delete waits for, how it gives up, what they keep secret.

The Slices here are shaped as the slice controller writes them (xpk `slice/` at 250d4b3c: `spec.partitionIds`
from the `cloud.google.com/gke-tpu-partition-<shape>-id` node labels, the cube's 4x4x4 label for a super-slice,
the owner annotations of `internal/core/constants.go`); the order of deletes is in tests/test_day2.py.
"""

from __future__ import annotations

import base64

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from components.model import keys
from components.model.tpu import slices as model
from components.teardown import TIMEOUT_KEY, SliceGateProvider, wait_until_unused
from tests.harness import UNKNOWN, Run, assert_rejected, is_secret, run_program

P = "gke-tpu-slicing"
GATE = "pulumi-python:dynamic/teardown:SliceGate"


def node(pool: str, cube: str, sub: str) -> dict[str, str]:
    return {
        keys.NODE_POOL_LABEL: pool,
        keys.partition_label("4x4x4"): cube,
        keys.partition_label("2x2x2"): sub,
    }


POOL_A = [node("tpu7-pool-0", "cube-a", "a-0"), node("tpu7-pool-0", "cube-a", "a-1")]
POOL_B = [node("tpu7-pool-1", "cube-b", "b-0")]
NODES = {"tpu7-pool-0": POOL_A, "tpu7-pool-1": POOL_B}


def slice_(name: str, topology: str, ids: list[str], reason: str = "ACTIVE", deleting: bool = False) -> dict:
    meta: dict = {
        "name": name,
        "annotations": {keys.OWNER_NAMESPACE: "llm-d-pd-disaggregation", keys.OWNER_NAME: f"wl-{name}"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T08:00:00Z"
    return {
        "apiVersion": "accelerator.gke.io/v1beta1",
        "kind": "Slice",
        "metadata": meta,
        "spec": {"type": "tpu7x", "topology": topology, "partitionIds": ids},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": reason}]},
    }


def test_a_slice_uses_a_pool_through_the_partition_label_of_its_shape() -> None:
    sub = slice_("sub", "2x2x2", ["a-1"])
    sup = slice_("super", "4x4x8", ["cube-a", "cube-b"])
    elsewhere = slice_("other", "2x2x2", ["b-0"])
    assert [u.name for u in model.slices_using_pool([sub, sup, elsewhere], POOL_A)] == ["sub", "super"]
    assert [u.name for u in model.slices_using_pool([sub, sup, elsewhere], POOL_B)] == ["other", "super"]
    # A sub-slice ID is compared with its own shape's label only: "cube-a" as a 2x2x2 ID is not pool A's.
    assert model.slices_using_pool([slice_("odd", "2x2x2", ["cube-a"])], POOL_A) == []
    # A pool whose nodes are gone has no partitions left to hold a Slice.
    assert model.slices_using_pool([sub, sup], []) == []


def test_which_label_a_slice_names_follows_the_controllers_rule_not_the_nodes_labels() -> None:
    """xpk slice/internal/topology/topology.go@250d4b3c: 2x2x1, 2x2x2, 2x2x4, 2x4x4 are sub-slices (their own
    label, L81 SupportedSubsliceTopologies); every other shape, a whole cube included, names 4x4x4 IDs."""
    cubes_only = [{keys.NODE_POOL_LABEL: "p", keys.partition_label("4x4x4"): "x"}]
    # A 2x4x4 sub-slice never names a cube ID, even on nodes that carry no 2x4x4 label.
    assert model.slices_using_pool([slice_("sub", "2x4x4", ["x"])], cubes_only) == []
    assert [u.name for u in model.slices_using_pool([slice_("cube", "4x4x4", ["x"])], cubes_only)] == ["cube"]
    assert [u.name for u in model.slices_using_pool([slice_("sub", "2x2x2", ["a-0"])], POOL_A)] == ["sub"]


def test_a_deleted_slice_still_holds_its_pool_and_says_it_is_being_deleted() -> None:
    """The controller calls a Slice with a deletionTimestamp deleted (core.go GetSliceState) and releases its
    Workload; the object, and its partitions, stay until GKE has dismantled it."""
    gone = slice_("sub", "2x2x2", ["a-0"], reason="DEACTIVATING", deleting=True)
    (use,) = model.slices_using_pool([gone], POOL_A)
    assert use.state == "DEACTIVATING, deleting"
    bare = {**gone, "status": {}}
    assert model.slices_using_pool([bare], POOL_A)[0].state == "deleting"
    assert model.slices_using_pool([{**bare, "metadata": {"name": "new"}}], POOL_A)[0].state == "unknown"


class FakeCluster:
    """Slices that disappear after `polls` polls; a clock that advances with each sleep."""

    def __init__(self, slices: list[dict] | None, polls: int = 10**9) -> None:
        self.slices, self.polls, self.now, self.listed = slices, polls, 0.0, 0

    def list_slices(self) -> list[dict] | None:
        self.listed += 1
        return [] if self.slices is not None and self.listed > self.polls else self.slices

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def wait(cluster: FakeCluster, pool: str = "tpu7-pool-0", timeout: float = 1200.0) -> float:
    return wait_until_unused(
        pool, timeout, NODES.__getitem__, cluster.list_slices, clock=lambda: cluster.now, sleep=cluster.sleep
    )


def test_the_delete_waits_until_the_deactivating_slices_are_gone() -> None:
    cluster = FakeCluster([slice_("sub", "2x2x2", ["a-0"], reason="DEACTIVATING", deleting=True)], polls=3)
    assert wait(cluster) == 30.0  # three polls 10 s apart saw the Slice, the fourth did not
    assert cluster.listed == 4


def test_slices_of_other_pools_do_not_hold_a_pool() -> None:
    cluster = FakeCluster([slice_("other", "2x2x2", ["b-0"])])
    assert wait(cluster, "tpu7-pool-0") == 0.0
    with pytest.raises(RuntimeError):
        wait(FakeCluster([slice_("other", "2x2x2", ["b-0"])]), "tpu7-pool-1", timeout=60)


def test_without_the_slice_api_there_is_nothing_to_wait_for() -> None:
    assert wait(FakeCluster(None)) == 0.0


def test_the_wait_is_bounded_and_its_error_names_the_slices_their_workloads_and_the_key() -> None:
    cluster = FakeCluster([slice_("sub", "2x2x2", ["a-0"]), slice_("super", "4x4x8", ["cube-a", "cube-b"])])
    with pytest.raises(RuntimeError) as err:
        wait(cluster, timeout=45)
    message = str(err.value)
    assert message.startswith("node pool tpu7-pool-0: 2 TPU Slice(s) still use its nodes after 45s")
    assert "sub (ACTIVE, workload llm-d-pd-disaggregation/wl-sub)" in message
    assert "super (ACTIVE, workload llm-d-pd-disaggregation/wl-super)" in message
    assert "has not been deleted" in message and TIMEOUT_KEY in message
    assert cluster.now == 45.0  # the last sleep is cut to the deadline


def test_the_gate_is_replaced_delete_first_when_its_pool_or_cluster_may_change() -> None:
    provider = SliceGateProvider()
    olds = {"pool": "tpu7-pool-0", "cluster": "c", "kubeconfig": "k", "timeoutSeconds": 1200}
    same = provider.diff("id", olds, dict(olds))
    assert same.changes is False and same.replaces == []
    for key in ("pool", "cluster"):
        diff = provider.diff("id", olds, {**olds, key: UNKNOWN})
        assert diff.replaces == [key] and diff.delete_before_replace is True
    # A rotated kubeconfig or another timeout updates the gate in place: no wait runs.
    for key, value in (("kubeconfig", "k2"), ("timeoutSeconds", 60)):
        diff = provider.diff("id", olds, {**olds, key: value})
        assert diff.changes is True and diff.replaces == []


def test_the_pickled_provider_is_a_reference_and_holds_no_secret() -> None:
    """Pulumi stores the provider pickled in the gate's state: it names the class, importable from the project."""
    pickled = base64.b64decode(serialize_provider(SliceGateProvider()))
    assert b"components.teardown" in pickled and b"SliceGateProvider" in pickled
    assert type(dill.loads(pickled)) is SliceGateProvider


def test_one_gate_per_pool_with_the_kubeconfig_secret_end_to_end(dev: Run) -> None:
    gates = dev.of_type(GATE)
    pools = [r for r in dev.of_type("gcp:container/nodePool:NodePool") if r.name != "cluster-system"]
    assert sorted(g.plain("pool") for g in gates) == sorted(p.inputs["name"] for p in pools)
    for gate in gates:
        assert is_secret(gate.inputs["kubeconfig"])
        assert gate.options["additionalSecretOutputs"] == ["kubeconfig"]
        assert gate.plain("timeoutSeconds") == 1200
    run = run_program({f"{P}:addons": {"sliceController": {"drainTimeoutSeconds": 300}}})
    assert {g.plain("timeoutSeconds") for g in run.of_type(GATE)} == {300}
    off = {"subslicing": {"enabled": False}, "superslicing": {"enabled": False}}
    none = run_program({f"{P}:tpu": {"cubes": 0}, f"{P}:serving": {"enabled": False}, f"{P}:demos": off})
    assert none.error is None, none.error
    assert none.of_type(GATE) == [] and none.of_type("gcp:container/nodePool:NodePool")


def test_the_drain_timeout_must_be_positive() -> None:
    assert_rejected({f"{P}:addons": {"sliceController": {"drainTimeoutSeconds": 0}}}, ["drainTimeoutSeconds"])


class FakeApis:
    """Just enough of the kubernetes client for `cluster_listers`: what it asks, and what it gets."""

    def __init__(self, groups: list[str], preferred: str = "v1beta1", list_status: int | None = None) -> None:
        self.groups, self.preferred, self.list_status = groups, preferred, list_status
        self.calls: list[tuple] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from types import SimpleNamespace

        from kubernetes import client, config

        fake = self

        class Core:
            def __init__(self, _api: object) -> None: ...

            def list_node(self, label_selector: str) -> SimpleNamespace:
                fake.calls.append(("nodes", label_selector))
                return SimpleNamespace(items=[SimpleNamespace(metadata=SimpleNamespace(labels=POOL_A[0]))])

        class Apis:
            def __init__(self, _api: object) -> None: ...

            def get_api_versions(self) -> SimpleNamespace:
                groups = [
                    SimpleNamespace(name=g, preferred_version=SimpleNamespace(version=fake.preferred))
                    for g in fake.groups
                ]
                return SimpleNamespace(groups=groups)

        class Custom:
            def __init__(self, _api: object) -> None: ...

            def list_cluster_custom_object(self, group: str, version: str, plural: str) -> dict:
                fake.calls.append(("slices", group, version, plural))
                if fake.list_status:
                    raise client.exceptions.ApiException(status=fake.list_status)
                return {"items": [slice_("sub", "2x2x2", ["a-0"])]}

        def new_client(cfg: dict) -> SimpleNamespace:
            fake.calls.append(("config", cfg))
            return SimpleNamespace(configuration=SimpleNamespace(api_key={}, cert_file=None))

        monkeypatch.setattr(config, "new_client_from_config_dict", new_client)
        monkeypatch.setattr(client, "CoreV1Api", Core)
        monkeypatch.setattr(client, "ApisApi", Apis)
        monkeypatch.setattr(client, "CustomObjectsApi", Custom)


def test_the_listers_ask_for_the_pools_nodes_and_the_preferred_slice_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.teardown import cluster_listers

    fake = FakeApis(["apps", model.SLICE_GROUP], preferred="v1beta1")
    fake.install(monkeypatch)
    list_nodes, list_slices = cluster_listers("apiVersion: v1\nkind: Config\n")
    assert list_nodes("tpu7-pool-0") == [POOL_A[0]]
    assert [s["metadata"]["name"] for s in list_slices() or []] == ["sub"]
    assert fake.calls[0] == ("config", {"apiVersion": "v1", "kind": "Config"})
    assert ("nodes", "cloud.google.com/gke-nodepool=tpu7-pool-0") in fake.calls
    assert ("slices", "accelerator.gke.io", "v1beta1", "slices") in fake.calls
    # No Slice API (the add-on never enabled) and a CRD gone mid-way both mean: nothing to wait for.
    FakeApis(["apps"]).install(monkeypatch)
    assert cluster_listers("{}")[1]() is None
    FakeApis([model.SLICE_GROUP], list_status=404).install(monkeypatch)
    assert cluster_listers("{}")[1]() is None
    FakeApis([model.SLICE_GROUP], list_status=403).install(monkeypatch)
    with pytest.raises(Exception, match="403"):
        cluster_listers("{}")[1]()
