"""The creation-order graph does not get deeper as the reservation grows (benchmarks/graph.py's model).

Structural, not timed: a chain through the node pools (a pool waiting for another, an add-on waiting
for the pools) would add a step per cube and show here as a deeper graph at 8 cubes than at 1.
"""

from __future__ import annotations

import functools
import itertools

from benchmarks import graph, scenario, timings
from tests.harness import run_program


@functools.cache  # read-only use: one program run per size for the whole module
def creation_graph(cubes: int) -> dict[str, graph.Node]:
    run = run_program(scenario.overrides(cubes))
    assert run.error is None, run.error
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
        assert reaches(nodes, after.urn, before.urn), f"{after.label} does not wait for {before.label}"


def reaches(nodes: dict[str, graph.Node], start: str, target: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        urn = todo.pop()
        for pred in nodes[urn].waits_for:
            if pred == target:
                return True
            if pred not in seen and nodes[pred].component:
                seen.add(pred)
                todo.append(pred)
    return False


def test_network_waits_for_the_compute_api_only() -> None:
    """The AI-zones preview feature is for zonal resources: the VPC need not wait for it (it did once)."""
    nodes = creation_graph(1)
    network = next(n for n in nodes.values() if n.type == "gcp:compute/network:Network")
    waited = {nodes[u].label for u in network.waits_for if not nodes[u].component}
    assert waited == {"Service project-compute"}, waited
