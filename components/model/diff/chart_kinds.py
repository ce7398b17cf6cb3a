"""Kinds only the add-on and router charts apply (rendered by components/cli/charts.py): what changes replace.

pulumi-kubernetes' replace-on-change list (facts.PULUMI_KUBERNETES provider/pkg/provider/diff.go `forceNew`, L45-83)
names no field of these groups: `apiextensions.k8s.io`, `admissionregistration.k8s.io`, `apiregistration.k8s.io` and
GKE's `networking.gke.io` are absent from it, so beyond another name or namespace (`metadataForceNewProperties`,
kept for every kind by components/model/diff/kubernetes.py METADATA) each object updates in place: a CRD's new
schema, a webhook's new namespace selector, an APIService's new service. GKE's HealthCheckPolicy and
GCPBackendPolicy have no public CRD to read transition rules from; none is assumed.
"""

from __future__ import annotations

from components.model.diff.facts import Fact

CHART_KINDS: dict[str, tuple[Fact, ...]] = {
    "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition": (),
    "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration": (),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration": (),
    "kubernetes:apiregistration.k8s.io/v1:APIService": (),
    "kubernetes:networking.gke.io/v1:HealthCheckPolicy": (),
    "kubernetes:networking.gke.io/v1:GCPBackendPolicy": (),
}
