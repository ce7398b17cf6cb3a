"""KEDA: its chart's values, and the TriggerAuthentication and ScaledObject of a burst slot (pure data).

KEDA v2.20.2; sources: kedacore/keda@68a5b502 (tag v2.20.2), its chart kedacore/charts@cbb9bb8c (tag v2.20.2,
pinned in tests/upstream_files.toml) and kedacore/keda-docs@a55c5d34 content/docs/2.20.

A burst slot is a LeaderWorkerSet of one group scaled between 0 and 1 by its ScaledObject:

* 0 -> 1 and 1 -> 0 are KEDA's operator's own writes to the target's `/scale` subresource: active with 0 replicas,
  it sets `max(minReplicaCount, 1)`; inactive for `cooldownPeriod` seconds since the last active poll, it sets
  `minReplicaCount` (pkg/scaling/executor/scale_scaledobjects.go:63-73, 98-101, 187-238, 296-308). A target's
  current count is read from its `spec.replicas`, else from `/scale` (pkg/scaling/resolver/scale_resolvers.go:
  832-850). LeaderWorkerSet serves `/scale` on `spec.replicas` (lws v0.8.0 CRD: `subresources.scale`).
* Between 1 and N replicas the HPA KEDA creates decides, reading KEDA's external metrics API (keda-docs
  concepts/scaling-deployments.md:195-196). For a slot that HPA has minReplicas = maxReplicas = 1
  (apis/keda/v1alpha1/scaledobject_types.go:303-317): it never changes the count, so no slot needs KEDA's metrics
  API server, and the program does not install it (below).
* A failing query with no `fallback` leaves the count as it is (scale_scaledobjects.go:93-97): a slot that is on
  stays on while Managed Prometheus cannot be read.
* The operator adds `finalizer.keda.sh` to every ScaledObject and TriggerAuthentication and only it removes it
  (controllers/keda/scaledobject_finalizer.go:34-36, 76-82; controllers/keda/util/finalizer.go:18): deleting one
  after KEDA is gone waits forever, and so does deleting KEDA's CRDs under it. Every KEDA object the program declares
  depends on the KEDA chart, so `pulumi destroy` deletes them first (components/keda.py).
* Pulumi owns the slot's `spec.replicas` only at creation: the LeaderWorkerSet is declared at 0 with
  `ignore_changes=[SCALED_FIELD]`. Under server-side apply, an ignored field another manager owns is left out of the
  patch, and one Pulumi still owns keeps the live value (pulumi/pulumi-kubernetes@94977969
  provider/pkg/await/await.go:716-800, handleSSAIgnoreFields); a `/scale` update records its writer as the
  manager of the custom resource's `spec.replicas` (kubernetes/apiextensions-apiserver@1aa2717a
  pkg/registry/customresource/etcd.go:312-366). A create or replacement writes the declared 0.
"""

from __future__ import annotations

from typing import Any

from components.model.config.addons_settings import KedaAddon
from components.model.keys import HOSTNAME_LABEL, LWS_API, LWS_GROUP, METADATA_SERVER_LABEL

KEDA_API = "keda.sh/v1alpha1"
OPERATOR_KSA = "keda-operator"
"""The operator's Kubernetes service account (the chart's `serviceAccount.operator.name`), whose Workload Identity
principal reads Managed Prometheus: the operator runs the scalers (keda-docs operate/cluster.md:194, "The gRPC
Metrics Service is part of the KEDA Operator deployment and serves ... metrics from the scalers")."""
METRICS_READER_ROLE = "roles/monitoring.viewer"
"""The role KEDA's docs grant for querying Managed Prometheus (keda-docs scalers/prometheus.md:105-106) and Google's
query docs name (https://cloud.google.com/stackdriver/docs/managed-prometheus/query-api-ui), on the stack's project:
read-only on Cloud Monitoring (docs/permissions.md says what else it reads)."""
PROMETHEUS_API = "https://monitoring.googleapis.com/v1/projects/{project}/location/global/prometheus"
"""Managed Prometheus' Prometheus HTTP API, as KEDA's own e2e test queries it (kedacore/keda@68a5b502
tests/scalers/gcp/gcp_prometheus_workload_identity/gcp_prometheus_workload_identity_test.go:73)."""
SCALED_FIELD = "spec.replicas"
"""The slot LeaderWorkerSet's field KEDA writes through `/scale`: Pulumi's `ignore_changes` on it."""
SLOT_REPLICAS = (0, 1)
"""A slot's min and max replicas: the range KEDA's operator alone scales (the module docstring)."""
# The chart's Deployment selectors (`app: <operator.name>`, `app: <webhooks.name>`, values.yaml defaults).
OPERATOR_APP, WEBHOOKS_APP = "keda-operator", "keda-admission-webhooks"
# The operator's Prometheus metrics (its scalers' errors and activity, kedacore/keda@68a5b502
# pkg/metricscollector/prommetrics.go:35-88): plain HTTP on the container port named `metrics` once
# `prometheus.operator.enabled` (templates/manager/deployment.yaml:104-106, 144-148; without it the operator binds
# none, cmd/operator/main.go:191-193). The program's PodMonitoring of it is this job.
OPERATOR_METRICS_PORT, OPERATOR_JOB = "metrics", "keda-operator"
# LeaderWorkerSets are the one kind KEDA scales here: the chart renders `<kind>/scale` read-write and `<kind>` get
# for each entry, where `kind` is the RBAC resource name (charts templates/manager/clusterrole.yaml:69-90).
SCALED_REF_KINDS = ({"apiGroup": LWS_GROUP, "kind": "leaderworkersets"},)


def prometheus_server(project: str) -> str:
    """The `serverAddress` of a Prometheus trigger that reads the project's Managed Prometheus."""
    return PROMETHEUS_API.format(project=project)


def _spread(app: str) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": HOSTNAME_LABEL,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": app}},
        }
    ]


def keda_chart_values(keda: KedaAddon, scraped: bool) -> dict[str, Any]:
    """The values the program sets on KEDA's chart beside the operator's resources (components/addons.py
    chart_values puts those at `resources.operator`); `scraped`: Managed Prometheus scrapes the operator's metrics
    (`prometheus.operator.enabled`, OPERATOR_METRICS_PORT). Why each, in the chart's terms:

    * `metricsServer.enabled: false`: no `v1beta1.external.metrics.k8s.io` APIService (templates/metrics-server/
      apiservice.yaml:1). A slot's HPA never scales (the module docstring); with an aggregated API registered, its
      outage would fail API discovery cluster-wide, and namespace deletion with it (kubernetes/kubernetes
      pkg/controller/namespace/deletion/namespaced_resources_deleter.go deleteAllContent: a discovery error fails
      the pass, which is retried), and a cluster has one provider of that API (keda-docs operate/cluster.md:69),
      which another adapter may hold (GoogleCloudPlatform/k8s-stackdriver@673c7dd8 custom-metrics-stackdriver-
      adapter/deploy/production/adapter_new_resource_model.yaml:171-183 registers it).
      `certificates.operator.apiServicePatching.enabled: false` stops the operator from patching that absent
      APIService's CA (templates/manager/deployment.yaml:90-92; kedacore/keda pkg/certificates/
      certificate_manager.go:61-70).
    * The admission webhook keeps the chart's `failurePolicy: Ignore` (values.yaml:253) on rules that match only
      KEDA's own kinds, CREATE and UPDATE (templates/webhooks/validatingconfiguration.yaml): while no webhook pod
      serves, KEDA objects are admitted on their CRD schema alone and nothing else in the cluster waits for KEDA.
    * `replicas` operators with leader election (`--leader-elect`, templates/manager/deployment.yaml:81; two is
      what KEDA supports, keda-docs operate/cluster.md:70: one active, one standing by) and as many webhook pods,
      each Deployment under the chart's PodDisruptionBudget (`minAvailable: 1`) and spread over the system nodes;
      one replica gets neither (a budget of 1 of 1 would block every drain).
    * RBAC narrowed: `rbac.scaledRefKinds` names LeaderWorkerSets instead of the chart's `*`/`*` (read of every
      resource, Secrets included, and `*/scale` writes: values.yaml:339-341), and
      `permissions.operator.restrict.secret` drops the operator's cluster-wide Secret list/watch for its own
      namespace's (templates/manager/clusterrole.yaml:51-65, minimal-rbac.yaml:36-64): the slots' trigger
      authenticates with the pod's identity and reads no Secret.
    * The operator's pods select nodes with the GKE metadata server (`operator.nodeSelector`), where Workload
      Identity gives them their service account's identity rather than the node's: the selector the chart adds
      for `podIdentity.gcp.enabled` (templates/manager/deployment.yaml:243-245), without that switch's other effect,
      an empty `annotations:` on the operator's ServiceAccount (templates/manager/serviceaccount.yaml:11-43).
    * `image.pullPolicy: IfNotPresent`: the chart's `Always` (values.yaml:45) makes every restart depend on
      ghcr.io for a tag that never moves.
    """
    resources = keda.controller_resources.manifest()
    values: dict[str, Any] = {
        "operator": {"replicaCount": keda.replicas, "nodeSelector": {METADATA_SERVER_LABEL: "true"}},
        "webhooks": {"replicaCount": keda.replicas},
        "metricsServer": {"enabled": False},
        "certificates": {"operator": {"apiServicePatching": {"enabled": False}}},
        "rbac": {"scaledRefKinds": [dict(kind) for kind in SCALED_REF_KINDS]},
        "permissions": {"operator": {"restrict": {"secret": True}}},
        "image": {"pullPolicy": "IfNotPresent"},
        "resources": {"webhooks": resources},
    }
    if scraped:  # read by the burst slots' alerts; the chart's own PodMonitor and ServiceMonitor stay off
        values["prometheus"] = {"operator": {"enabled": True}}
    if keda.replicas >= 2:
        values["podDisruptionBudget"] = {"operator": {"minAvailable": 1}, "webhooks": {"minAvailable": 1}}
        values["topologySpreadConstraints"] = {"operator": _spread(OPERATOR_APP), "webhooks": _spread(WEBHOOKS_APP)}
    return values


def trigger_authentication(name: str, namespace: str) -> dict[str, Any]:
    """A TriggerAuthentication that authenticates a trigger with the KEDA operator's own Workload Identity
    (kedacore/keda@68a5b502 gcp_prometheus_workload_identity_test.go:44-51): the Prometheus scaler then asks Google's
    default credentials for a token of scope monitoring.read (pkg/scalers/gcp/gcp_common.go:17, 28-31, 59-62;
    pkg/scalers/prometheus_scaler.go:124-132)."""
    return {
        "apiVersion": KEDA_API,
        "kind": "TriggerAuthentication",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podIdentity": {"provider": "gcp"}},
    }


def prometheus_scaled_object(
    name: str,
    namespace: str,
    *,
    target: str,
    project: str,
    query: str,
    activation_threshold: float,
    cooldown_seconds: int,
    authentication: str,
    polling_interval_seconds: int,
) -> dict[str, Any]:
    """The ScaledObject that turns the slot LeaderWorkerSet `target` on (1 group) while `query` on the project's
    Managed Prometheus is above `activation_threshold`, and off (0) `cooldown_seconds` after it last was.

    `query` must return one sample (a one-element vector or a scalar): more is an error, and an empty result reads as
    0 (prometheus_scaler.go:264-275, `ignoreNullValues` defaults to true). Active means value > activationThreshold
    (:319). `threshold` is the HPA's target above one replica, never used at max 1; the scaler requires it (:52) and
    the HPA refuses a target of 0, so it is 1. `authentication` names a TriggerAuthentication of `namespace`
    (trigger_authentication). Polling every `polling_interval_seconds`.
    """
    low, high = SLOT_REPLICAS
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "name": target},
            "minReplicaCount": low,
            "maxReplicaCount": high,
            "pollingInterval": polling_interval_seconds,
            "cooldownPeriod": cooldown_seconds,
            "triggers": [
                {
                    "type": "prometheus",
                    "authenticationRef": {"name": authentication},
                    "metadata": {
                        "serverAddress": prometheus_server(project),
                        "query": query,
                        "threshold": "1",
                        "activationThreshold": repr(float(activation_threshold)),
                    },
                }
            ],
        },
    }
