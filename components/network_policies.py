"""The workload namespace's NetworkPolicies: ingress denied by default, then exactly what serving and the JobSets need.

GKE Dataplane V2 always enforces NetworkPolicy (https://cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2,
"Security"). Every rule is keyed on labels that a role's pods carry whatever LeaderWorkerSet made them (the model
labels, the LWS worker index, the JobSet name key), never on an object's name: a burst LeaderWorkerSet built by the
same builder is covered without a rule of its own.

What a NetworkPolicy cannot say, and what the rules do instead:
* A peer selector has fixed values, so no rule can pair a pod with the pods of its own LWS group or JobSet (their
  group key and JobSet name differ per group). Ray's ports are dynamic, and multi-host JAX picks its own: a role's pods
  reach every pod of the same role, and a JobSet's pods every JobSet pod of the namespace, on any port.
* The KV transfer runs from decode to prefill (the puller connects: vllm-project/tpu-inference@18ed6153
  tpu_inference/distributed/tpu_connector.py `_maybe_build_kv_connection`, `_maybe_build_notif_socket`), to the
  transfer server's port, the side channel, and bulk-transport listeners the producer binds on ephemeral ports
  (`start_transfer_server(..., [f"{host_ip}:0"] ...)`; the connecting side connects to them:
  tensorflow/tensorflow@0866b7a7 third_party/xla/xla/python/transfer/socket_bulk_transport.cc InitBulkTransport,
  socket-server.cc Connect). A range would need `endPort`, which a plugin without it narrows to one port silently
  (kubernetes/website@a799505a content/en/docs/concepts/services-networking/network-policies.md, "Targeting a range
  of ports"): decode reaches prefill on any port.
* The kubelet's probes need no rule: traffic from a pod's own node is always allowed (the same page, "What you can't
  do with network policies": pods cannot "block access from their resident node"; Cilium, which Dataplane V2 runs,
  allows the local host to reach its endpoints when it runs in Kubernetes, cilium/cilium@8e7499ee
  pkg/option/config.go AllowLocalhostAuto).
"""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from components.component import Component
from components.kubernetes_object import KubernetesObject
from components.model.keys import JOBSET_NAME_LABEL
from components.vllm_containers import ROLES, ROUTER_PORT, ModelServerArgs
from components.vllm_leaderworkersets import leader_metrics_target, model_labels

API = "networking.k8s.io/v1"
# Google's health-check probers, and the Google Front Ends of a global external load balancer with zonal NEG
# backends (the same ranges): https://cloud.google.com/load-balancing/docs/firewall-rules, "minimum required ingress
# allow firewall rules"; https://cloud.google.com/load-balancing/docs/health-check-concepts#ip-ranges.
GOOGLE_PROBE_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
# The router chart's endpoint picker (llm-d/llm-d-router@71f4f099 config/charts/routerlib): ext-proc for the load
# balancer (values.yaml router.epp.extProcPort), gRPC health (templates/_deployment.yaml grpcHealthPort, 9003 unless
# set; the GKE Gateway health-checks the picker there, templates/_gke.yaml), /metrics (_deployment.yaml, `metrics`).
EPP_EXT_PROC_PORT, EPP_HEALTH_PORT, EPP_METRICS_PORT = 9002, 9003, 9090
# Managed Prometheus' collectors: a DaemonSet in gmp-system, on the pod network (no hostNetwork), selected by this
# label (GoogleCloudPlatform/prometheus-engine@2ffde4ec charts/operator/templates/collector.yaml,
# templates/_helpers.tpl:114-116 `prometheus-engine.collector.selectorLabels`).
GMP_COLLECTORS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gmp-system"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "collector"}},
}


def policy(name: str, namespace: Any, target: dict[str, Any], ingress: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        # No rule at all (not an empty list, which the API server stores as absent): deny every connection.
        "spec": {"podSelector": target, "policyTypes": ["Ingress"], **({"ingress": ingress} if ingress else {})},
    }


def tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": p} for p in ports]


def pods(labels: dict[str, str]) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": dict(labels)}}


DEFAULT_DENY = "default-deny-ingress"


def namespace_policies(namespace: Any) -> dict[str, dict[str, Any]]:
    """Every pod of the namespace denies ingress unless a policy allows it; JobSet pods reach JobSet pods."""
    jobset_pods = {"matchExpressions": [{"key": JOBSET_NAME_LABEL, "operator": "Exists"}]}
    return {
        DEFAULT_DENY: policy(DEFAULT_DENY, namespace, {}, []),
        "jobset-pods": policy("jobset-pods", namespace, jobset_pods, [{"from": [{"podSelector": jobset_pods}]}]),
    }


class ServingNetwork(TypedDict):
    proxy_subnet_cidr: NotRequired[str]
    """The proxy-only subnet the Gateway's proxies connect from (regional classes); none: Google's front ends."""
    epp_selector: dict[str, str]
    """The labels of the router chart's endpoint picker pods."""
    scraped: bool
    """Whether Managed Prometheus scrapes the leaders and the picker."""


def serving_policies(model: ModelServerArgs, network: ServingNetwork, namespace: Any) -> dict[str, dict[str, Any]]:
    """Each role's pods reach their role (Ray), decode reaches prefill (KV transfer, the sidecar's prefill request);
    the load balancer and the picker reach the leaders on the pool's port, and the collectors their metrics port; the
    load balancer reaches the picker."""
    guide = model["guide"]
    balancer = [
        *([{"ipBlock": {"cidr": network["proxy_subnet_cidr"]}}] if "proxy_subnet_cidr" in network else []),
        *({"ipBlock": {"cidr": r}} for r in GOOGLE_PROBE_RANGES),
    ]
    scraped = network["scraped"]
    prefill, decode = model_labels(model, "prefill"), model_labels(model, "decode")
    out = {
        f"{guide}-prefill": policy(f"{guide}-prefill", namespace, {"matchLabels": prefill}, [
            {"from": [pods(prefill), pods(decode)]}
        ]),
        f"{guide}-decode": policy(f"{guide}-decode", namespace, {"matchLabels": decode}, [{"from": [pods(decode)]}]),
        f"{guide}-epp": policy(f"{guide}-epp", namespace, {"matchLabels": dict(network["epp_selector"])}, [
            {"from": balancer, "ports": tcp(EPP_EXT_PROC_PORT, EPP_HEALTH_PORT)},
            *([{"from": [GMP_COLLECTORS], "ports": tcp(EPP_METRICS_PORT)}] if scraped else []),
        ]),
    }  # fmt: skip
    for role in ROLES:
        leaders, _ = leader_metrics_target(model, role)
        out[f"{guide}-{role}-leaders"] = policy(f"{guide}-{role}-leaders", namespace, {"matchLabels": leaders}, [
            {"from": [*balancer, pods(network["epp_selector"])], "ports": tcp(ROUTER_PORT)},
            *([{"from": [GMP_COLLECTORS], "ports": tcp(ROLES[role].vllm_port)}] if scraped else []),
        ])  # fmt: skip
    return out


class NamespacePoliciesArgs(TypedDict):
    namespace: pulumi.Input[str]
    """The workload namespace."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""


class NamespacePolicies(Component):
    """The workload namespace's default-deny ingress and its JobSets' rule.

    `opts.depends_on`: serving's policies; with the JobSets' rule, declared first, the deny never precedes what it
    must let through on a running stack (and `destroy` deletes it first). A spec change updates a policy in place
    (pulumi-kubernetes forces a replacement only on metadata.name and namespace for NetworkPolicy,
    provider/pkg/provider/diff.go); deleting one waits for nothing (no finalizer).
    """

    def __init__(self, name: str, args: NamespacePoliciesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:queues:NamespacePolicies", name, opts)
        manifests = namespace_policies(args["namespace"])
        deny = manifests.pop(DEFAULT_DENY)
        self.policies = {
            key: KubernetesObject(f"{name}-{key}", manifest, self.child(provider=args["provider"]))
            for key, manifest in manifests.items()
        }
        # The deny after the namespace's own allow rules too: running JobSets keep their connections meanwhile.
        after = self.child(provider=args["provider"], depends_on=list(self.policies.values()))
        self.policies[DEFAULT_DENY] = KubernetesObject(f"{name}-{DEFAULT_DENY}", deny, after)
        self.register_outputs({"policies": list(self.policies)})
