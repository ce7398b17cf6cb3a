"""The creation-order graph of a mock run, as the Pulumi engine orders a first `pulumi up`.

Edges (what a resource waits for before it is created), from the recorded RegisterResource requests:

* `dependencies`: explicit `depends_on` plus every resource whose Output is an input (the property
  dependencies are a subset). The Python SDK has already expanded them: a `depends_on` on a local
  component became its descendants (pulumi/runtime/rpc.py `_add_dependency`), a remote component
  (helm.v4.Chart, yaml.v2.ConfigFile, yaml.v2.ConfigGroup) stays one node whose registration
  returns only once its provider has created and awaited every child. The SDK awaits each one's
  URN, which resolves when the engine has finished creating it.
* `parent`: a child's registration awaits its parent's URN. A local component's URN resolves as
  soon as its own dependencies are done (it creates nothing), so the edge carries a component's
  `depends_on` down to its children at zero cost.
* `provider`: a resource using an explicit provider awaits the provider's registration, which
  waits for the provider's inputs (the kubeconfig: the cluster).

Local components cost nothing and are not counted in the depth; every other node (custom resources,
providers, remote components) is one step. The stack itself is not a node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Node:
    urn: str
    type: str
    name: str
    component: bool  # a local ComponentResource: a grouping, creates nothing
    inputs: dict[str, Any]
    waits_for: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        return f"{self.type.rsplit(':', 1)[-1]} {self.name}"


def provider_urn(reference: str) -> str:
    """A provider reference is `<urn>::<id>`."""
    return reference.rsplit("::", 1)[0] if reference else ""


def build(registrations: Iterable[Any]) -> dict[str, Node]:
    """Nodes keyed by URN from `tests.harness.Registration`s; edges to unregistered URNs (the stack) dropped."""
    nodes = {
        r.urn: Node(r.urn, r.type, r.name, component=not r.custom and not r.remote, inputs=r.inputs)
        for r in registrations
    }
    for r in registrations:
        edges = set(r.dependencies) | {u for urns in r.property_dependencies.values() for u in urns}
        edges |= {r.parent, provider_urn(r.provider)}
        nodes[r.urn].waits_for = {e for e in edges if e in nodes and e != r.urn}
    return nodes


def without_edges(nodes: dict[str, Node], drop: Callable[[Node, Node], bool]) -> dict[str, Node]:
    """A copy of the graph without the waits `drop(node, waited_for)` selects (a what-if; the program is unchanged)."""
    return {
        urn: Node(n.urn, n.type, n.name, n.component, n.inputs, {w for w in n.waits_for if not drop(n, nodes[w])})
        for urn, n in nodes.items()
    }


def waits_transitively(nodes: dict[str, Node], start: str, target: Callable[[Node], bool]) -> bool:
    """Whether `start` waits, directly or through any chain, for a node `target` selects."""
    seen: set[str] = set()
    todo = list(nodes[start].waits_for)
    while todo:
        urn = todo.pop()
        if urn in seen:
            continue
        seen.add(urn)
        if target(nodes[urn]):
            return True
        todo.extend(nodes[urn].waits_for)
    return False


def longest_path(nodes: dict[str, Node], weight: Callable[[Node], float]) -> tuple[float, list[Node]]:
    """The heaviest chain of waits (the critical path) and its total weight; iterative, so any depth works."""
    best: dict[str, tuple[float, str | None]] = {}

    def visit(start: str) -> None:
        stack = [(start, False)]
        while stack:
            urn, expanded = stack.pop()
            if urn in best:
                continue
            preds = nodes[urn].waits_for
            if not expanded:
                stack.append((urn, True))
                stack.extend((p, False) for p in preds if p not in best)
                continue
            prev = max(((best[p][0], p) for p in preds), default=(0.0, None))
            best[urn] = (prev[0] + weight(nodes[urn]), prev[1])

    for urn in nodes:
        visit(urn)
    # Among equally long chains the end with the first label, so runs of different sizes name the same one.
    end = min(best, key=lambda u: (-best[u][0], nodes[u].label))
    path: list[Node] = []
    cur: str | None = end
    while cur is not None:
        path.append(nodes[cur])
        cur = best[cur][1]
    path.reverse()
    return best[end][0], [n for n in path if weight(n) > 0 or not n.component]


def depth(nodes: dict[str, Node]) -> tuple[int, list[Node]]:
    """The most resources one must create one after another (components are free)."""
    total, path = longest_path(nodes, lambda n: 0.0 if n.component else 1.0)
    return int(total), [n for n in path if not n.component]


def steps(nodes: dict[str, Node]) -> list[Node]:
    """Every node that creates something (what a sequential script runs one by one)."""
    return [n for n in nodes.values() if not n.component]


def summary(path: Sequence[Node]) -> str:
    return " > ".join(n.label for n in path)
