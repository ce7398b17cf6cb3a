"""The creation-order graph does not get deeper as the reservation grows (benchmarks/graph.py's model).

Structural, not timed: a chain through the node pools (a pool waiting for another, an add-on waiting
for the pools) would add a step per cube and show here as a deeper graph at 8 cubes than at 1.
"""

from __future__ import annotations

import functools
import itertools

from benchmarks import evaluation, graph, scenario, timings
from tests.harness import ok


@functools.cache  # read-only use: one program run per size for the whole module
def creation_graph(cubes: int) -> dict[str, graph.Node]:
    run = ok(scenario.overrides(cubes))
    return graph.build(run.registrations)


def test_depth_is_the_same_for_one_and_eight_cubes() -> None:
    one, eight = creation_graph(1), creation_graph(8)
    pools = [n for n in eight.values() if n.type == "gcp:container/nodePool:NodePool" and n.name != "cluster-system"]
    assert len(pools) == 8  # the larger run really has more of what could be chained
    (d1, path1), (d8, path8) = graph.depth(one), graph.depth(eight)
    assert d1 == d8, f"1 cube: {graph.summary(path1)}\n8 cubes: {graph.summary(path8)}"
    # Equal depth could hide a chain of pools as long as the system pool's path: no chain holds two.
    chained, path = graph.longest_path(eight, lambda n: 1.0 if timings.is_tpu_pool(n) else 0.0)
    assert chained == 1, f"TPU pools one after another: {graph.summary(path)}"


def test_longest_path_counts_resources_not_components() -> None:
    nodes = creation_graph(1)
    depth, path = graph.depth(nodes)
    assert depth == len(path) and all(not n.component for n in path)
    # Each step waits for the one before it (directly or through free component nodes).
    for before, after in itertools.pairwise(path):
        assert before.label in non_component_waits(nodes, after), f"{after.label} does not wait for {before.label}"


def test_network_waits_for_the_compute_api_only() -> None:
    """The AI-zones preview feature is for zonal resources: the VPC need not wait for it (it did once)."""
    nodes = creation_graph(1)
    network = next(n for n in nodes.values() if n.type == "gcp:compute/network:Network")
    waited = {nodes[u].label for u in network.waits_for if not nodes[u].component}
    assert waited == {"Service project-compute"}, waited


def non_component_waits(nodes: dict[str, graph.Node], node: graph.Node) -> set[str]:
    """Labels of the resources `node` waits for directly (looking through free component nodes)."""
    out, seen, todo = set(), set(), list(node.waits_for)
    while todo:
        urn = todo.pop()
        if urn in seen:
            continue
        seen.add(urn)
        if nodes[urn].component:
            todo.extend(nodes[urn].waits_for)
        else:
            out.add(nodes[urn].label)
    return out


def test_dashboard_and_alerts_wait_for_the_monitoring_api_alone() -> None:
    """They are Monitoring API calls; they once waited for every API and the AI-zones feature too."""
    nodes = creation_graph(1)
    monitoring = [
        n
        for n in nodes.values()
        if n.type in ("gcp:monitoring/dashboard:Dashboard", "gcp:monitoring/alertPolicy:AlertPolicy")
    ]
    assert len(monitoring) >= 2
    for n in monitoring:
        # A startup-budget alert starts its clock with its role's set: created after it (monitoring.py).
        role = n.label.split("-")[1] if "leaders-not-ready-in-budget" in n.label else None
        extra = {f"LeaderWorkerSet serving-{role}"} if role else set()
        assert non_component_waits(nodes, n) == {"Service project-monitoring", *extra}, n.label


def test_kueue_scraping_waits_for_the_chart_only_where_it_must() -> None:
    """The binding to the chart's ClusterRole and the scrape object wait for the chart; the account, its token
    and the token's Role and RoleBinding need only the namespace, and the Role names the token by string."""
    nodes = creation_graph(1)
    by_label = {n.label: n for n in nodes.values() if not n.component}
    chart = by_label["Chart kueue-chart"].urn

    def waits(label: str, target: str) -> bool:
        return graph.waits_transitively(nodes, by_label[label].urn, lambda n: n.urn == target)

    early = [
        "ServiceAccount observability-kueue-scraper",
        "Secret observability-kueue-scraper-token",
        "Role observability-kueue-token-read",
        "RoleBinding observability-kueue-token-read-collector",
    ]
    for label in early:
        assert not waits(label, chart), f"{label} waits for the Kueue chart"
    assert waits("ClusterRoleBinding observability-kueue-metrics-reader", chart)
    assert waits("PodMonitoring observability-kueue", chart)
    # The orders the API server needs: the token after its account, the binding after its Role.
    assert waits(early[1], by_label[early[0]].urn) and waits(early[3], by_label[early[2]].urn)
    assert not waits(early[2], by_label[early[1]].urn), "the Role waits for the Secret it names"
    # So the scraping objects add at most three steps one after another (e.g. account > token > scrape object).
    chain, path = graph.longest_path(nodes, lambda n: 1.0 if n.name.startswith("observability-") else 0.0)
    assert chain == 3, graph.summary(path)


def test_every_resource_type_has_a_figure_in_the_time_model() -> None:
    steps = graph.steps(creation_graph(8))
    assert not {n.type for n in steps if timings.figure(n) is timings.UNKNOWN}


def test_the_pools_wait_for_nothing_in_the_cluster_so_the_critical_path_is_the_chain() -> None:
    """The pools once waited for the slice controller (so that destroy deleted them first): +301 s at 2 cubes.
    Their teardown gates carry that order now, so network -> cluster -> TPU pool -> workload is the critical path,
    within 5% of that chain (modeled figures of benchmarks/timings.py; structural, not timed)."""
    for cubes in (1, 8):
        nodes = creation_graph(cubes)
        pools = [n for n in nodes.values() if timings.is_tpu_pool(n)]
        assert len(pools) == cubes
        for pool in pools:
            assert not graph.waits_transitively(nodes, pool.urn, timings.in_cluster), pool.label
        critical, path = graph.longest_path(nodes, timings.seconds)
        floor, chain = timings.chain_floor(nodes)
        assert [n.type for n in chain[-3:-1]] == ["gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool"]
        assert chain[-1].type in timings.WORKLOADS
        assert floor <= critical <= 1.05 * floor, graph.summary(path)
        # The gate sits between the pool and the workloads, and costs its one modeled second.
        assert any(n.type == timings.SLICE_GATE for n in path), graph.summary(path)


def test_the_weights_download_overlaps_the_tpu_pools() -> None:
    """With the download on, the Job starts once the system pool is up, not after the TPU pools: the modeled
    time to ready is shorter than the same copy after the pools by the pools' lead over the system pool."""
    without, _ = graph.longest_path(creation_graph(2), timings.seconds)
    modeled = evaluation.with_download(2, without)["download"]
    path = modeled["criticalPath"]
    job = next(label for label in path if label.startswith("Job "))
    assert not any(label.startswith("NodePool capacity-") for label in path[: path.index(job)])
    # serving ends it: a set, then the patch that awaits its leaders, or the startup-budget alert created after the
    # set (2 s in the model against the patch's 1: the patch's wait for the leaders is left out of both)
    assert path[-2].startswith("LeaderWorkerSet ")
    assert path[-1].startswith(("LeaderWorkerSetPatch ", "AlertPolicy observability-decode-leaders-not-ready"))
    assert modeled["criticalSeconds"] > without  # the 400 GB copy is longer than a TPU pool's creation
    # The pools' lead over the system pool, less the seconds of the Job's namespace and account after it.
    lead = timings.TPU_POOL.seconds - timings.SYSTEM_POOL.seconds
    assert lead - 5 <= modeled["serialSeconds"] - modeled["criticalSeconds"] < lead
