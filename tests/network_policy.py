"""Whether NetworkPolicies let a connection through, by the API's semantics (a library for the tests).

https://kubernetes.io/docs/concepts/services-networking/network-policies/ (kubernetes/website@a799505a): a pod some
policy selects for Ingress is isolated, and then accepts a connection only if one of those policies has a rule whose
`from` admits the source (no `from`: every source) and whose `ports` admit the port (none: every port). A peer with a
`podSelector` alone means pods of the policy's namespace, with a `namespaceSelector` pods of the matching namespaces,
and an `ipBlock` the addresses in its CIDR. Traffic from the pod's own node is not subject to policy at all.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from tests.graph_queries import label_selector_matches


@dataclass(frozen=True)
class Source:
    """Where a connection comes from: a pod (labels, namespace and its namespace's labels) or an address."""

    labels: dict[str, str] = field(default_factory=dict)
    namespace: str | None = None
    ip: str | None = None

    def namespace_labels(self) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": self.namespace} if self.namespace else {}


def _peer(peer: dict[str, Any], source: Source, namespace: str) -> bool:
    if "ipBlock" in peer:
        if source.ip is None:
            return False
        block, ip = peer["ipBlock"], ipaddress.ip_address(source.ip)
        inside = ip in ipaddress.ip_network(block["cidr"])
        return inside and not any(ip in ipaddress.ip_network(e) for e in block.get("except") or [])
    if source.namespace is None:
        return False
    if "namespaceSelector" in peer:
        in_namespace = label_selector_matches(peer["namespaceSelector"], source.namespace_labels())
    else:
        in_namespace = source.namespace == namespace
    return in_namespace and label_selector_matches(peer.get("podSelector") or {}, source.labels)


def allowed(policies: list[dict[str, Any]], namespace: str, target: dict[str, str], source: Source, port: int) -> bool:
    """Whether `source` may open a TCP connection to `port` of a pod with labels `target` in `namespace`."""
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == namespace
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and label_selector_matches(p["spec"]["podSelector"], target)
    ]
    if not selecting:
        return True
    for p in selecting:
        for rule in p["spec"].get("ingress") or []:
            peers = rule.get("from")
            if peers and not any(_peer(peer, source, namespace) for peer in peers):
                continue
            ports = rule.get("ports")
            if not ports or any(q.get("protocol", "TCP") == "TCP" and q.get("port") in (None, port) for q in ports):
                return True
    return False
