"""Observability: Managed Prometheus scrape objects, a Cloud Monitoring dashboard and alert policies.

The cluster runs Google Cloud Managed Service for Prometheus (`monitoring_config.managed_prometheus`); this
feeds it and shows it. What the alerts watch is pure data in `components/model/observability/monitoring.py`, the
dashboard's layout in `components/model/observability/dashboard.py`; this module declares them, in the same graph as
what they watch.

Resource types (for importers): `kubernetes:monitoring.googleapis.com/v1:PodMonitoring`,
`kubernetes:core/v1:ServiceAccount`, `kubernetes:core/v1:Secret`, `kubernetes:rbac.authorization.k8s.io/v1:
{ClusterRoleBinding,Role,RoleBinding}`, `gcp:monitoring/dashboard:Dashboard`,
`gcp:monitoring/alertPolicy:AlertPolicy`.
"""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.component import Component
from components.kubernetes_object import KubernetesObject
from components.model.keys import SERVICE_ACCOUNT_NAME_ANNOTATION
from components.model.observability import monitoring, slice_alerts

GMP_API = "monitoring.googleapis.com/v1"
TOKEN_KEY = "token"


def dashboard_url(project: str, dashboard_id: str) -> str:
    """The console page of a custom dashboard: the last segment of `projects/<p>/dashboards/<id>` (the API's
    name, and the provider's id: https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards/get)."""
    short_id = dashboard_id.rsplit("/", 1)[-1]
    return f"https://console.cloud.google.com/monitoring/dashboards/builder/{short_id}?project={project}"


def pod_monitoring(
    name: pulumi.Input[str], namespace: pulumi.Input[str], selector: dict[str, str], endpoint: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": GMP_API,
        "kind": "PodMonitoring",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": dict(selector)}, "endpoints": [endpoint]},
    }


def kueue_pod_monitoring(
    release: str, namespace: pulumi.Input[str], secret: pulumi.Input[str], interval: str
) -> dict[str, Any]:
    endpoint = {
        "port": monitoring.KUEUE_METRICS_PORT,
        "scheme": "https",
        "path": "/metrics",
        "interval": interval,
        # The controller's serving certificate is self-signed (no cert-manager); the chart's own ServiceMonitor
        # sets the same (values.yaml metrics.serviceMonitor.tlsConfig.insecureSkipVerify: true).
        "tls": {"insecureSkipVerify": True},
        "authorization": bearer(secret),
    }
    return pod_monitoring(monitoring.KUEUE_JOB, namespace, monitoring.kueue_selector(release), endpoint)


def bearer(secret: pulumi.Input[str]) -> dict[str, Any]:
    """A scrape's authorization: the token in the Secret named `secret`."""
    return {"type": "Bearer", "credentials": {"secret": {"name": secret, "key": TOKEN_KEY}}}


def _role_ref(kind: str, name: pulumi.Input[str]) -> dict[str, Any]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


class KueueScrape(TypedDict):
    release: str
    """Kueue's Helm release (its fullname names the chart's metrics-reader ClusterRole)."""
    namespace: pulumi.Input[str]
    """Kueue's namespace, where its scraper's account and token go."""
    chart: k8s.helm.v4.Chart
    """Kueue's chart: the binding to its ClusterRole and the scrape object wait for it."""


class RouterScrape(TypedDict):
    chart: k8s.helm.v4.Chart
    """The router's chart: its scrape object selects the chart's pods."""
    job: str
    """The endpoint picker's Managed Prometheus job."""
    selector: dict[str, str]
    """The labels of the endpoint picker's pods."""
    service_account: str
    """The endpoint picker's service account, granted the token reviews its /metrics checks."""


class PodScrape(TypedDict):
    job: str
    """The Managed Prometheus job (the PodMonitoring's name)."""
    selector: dict[str, str]
    """The labels selecting exactly the pods scraped."""
    port: str
    """The named port the pods serve /metrics on, over plain HTTP."""
    target_labels: NotRequired[dict[str, Any]]
    """The PodMonitoring's `targetLabels` (pod labels copied into every series); none: GMP's default."""
    namespace: NotRequired[pulumi.Input[str]]
    """The pods' namespace; none: the workload namespace."""
    after: NotRequired[list[Any]]
    """What the scrape object waits for (a chart that declares the pods and their port)."""


class Scrapes(TypedDict):
    interval: str
    """How often Managed Prometheus scrapes."""
    kueue: KueueScrape
    """Kueue's controller."""
    workload_namespace: pulumi.Input[str]
    """The namespace of the router and the model servers."""
    router: NotRequired[RouterScrape]
    """The router's endpoint picker, with serving."""
    vllm_leaders: dict[str, PodScrape]
    """The vLLM leaders of each serving role."""
    keda: NotRequired[PodScrape]
    """KEDA's operator, with burst slots (its query errors and which slots it wants on)."""


class _Alert(TypedDict):
    key: str
    """A short stable name (the policy's resource name derives from it)."""
    display_name: str
    """The policy's and its condition's display name."""
    severity: str
    """The policy's severity."""
    documentation: str
    """The policy's documentation (Markdown)."""


class MetricAlert(_Alert):
    query: str
    """The PromQL condition."""
    seconds: int
    """How long the condition holds before the policy fires."""
    after: NotRequired[list[Any]]
    """What the policy is created after, its clock starting then (the program's own LeaderWorkerSet objects, of a
    type a schema cannot name)."""


class LogAlert(_Alert):
    filter: str
    """The log filter that fires it, notified at most once per slice_alerts.RATE_LIMIT."""


class ObservabilityArgs(TypedDict):
    project: str
    """The project of the dashboard and the alert policies."""
    cluster_name: str
    """The cluster the policies watch (their `cluster` label)."""
    notification_channels: list[str]
    """The channels every alert policy notifies."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    scrapes: NotRequired[Scrapes]
    """The Managed Prometheus scrape objects; none: nothing is scraped."""
    dashboard_json: NotRequired[str]
    """The Cloud Monitoring dashboard; none: no dashboard."""
    metric_alerts: list[MetricAlert]
    """The PromQL alert policies."""
    log_alerts: list[LogAlert]
    """The log-based alert policies."""
    monitoring_api: NotRequired[gcp.projects.Service]
    """The Monitoring API the dashboard and the policies wait for."""


class Observability(Component):
    """Scrape objects for Kueue, the router's endpoint picker and the vLLM leaders, the dashboard, the alerts."""

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:observability:Observability", name, opts)
        self._args = args
        provider = args["provider"]
        # The dashboard and the policies are calls to the Monitoring API alone (their queries name metrics, not
        # resources): waiting for every API and the AI-zones feature only delayed them (docs/benchmarks.md).
        monitoring_api = args.get("monitoring_api")
        after_api = self.child(depends_on=[monitoring_api]) if monitoring_api is not None else None
        self.pod_monitorings: dict[str, KubernetesObject] = {}
        self.alert_policies: dict[str, gcp.monitoring.AlertPolicy] = {}
        self.dashboard: gcp.monitoring.Dashboard | None = None
        self.dashboard_url: pulumi.Output[str] | None = None
        scrapes = args.get("scrapes")
        if scrapes is not None:
            namespace, interval = scrapes["workload_namespace"], scrapes["interval"]
            self._scrape_kueue(name, scrapes["kueue"], interval, provider)
            router = scrapes.get("router")
            if router is not None:
                self._scrape_router(name, router, interval, provider, namespace)
            plain = {f"{role}-leaders": scrape for role, scrape in scrapes["vllm_leaders"].items()}
            for key, scrape in {**plain, **({"keda-operator": scrapes["keda"]} if "keda" in scrapes else {})}.items():
                endpoint = {"port": scrape["port"], "path": "/metrics", "interval": interval}
                where = scrape.get("namespace", namespace)
                monitor = pod_monitoring(scrape["job"], where, scrape["selector"], endpoint)
                if "target_labels" in scrape:
                    monitor["spec"]["targetLabels"] = scrape["target_labels"]
                self.pod_monitorings[key.removesuffix("-leaders")] = KubernetesObject(
                    f"{name}-{key}", monitor, self.child(provider=provider, depends_on=scrape.get("after", []))
                )
        project = args["project"]
        dashboard_json = args.get("dashboard_json")
        if dashboard_json is not None:
            self.dashboard = gcp.monitoring.Dashboard(
                f"{name}-dashboard", project=project, dashboard_json=dashboard_json, opts=after_api
            )
            self.dashboard_url = self.dashboard.id.apply(lambda i: dashboard_url(project, i))
        for rule in args["metric_alerts"]:
            self._alert_policy(
                name,
                rule,
                {
                    "condition_prometheus_query_language": {
                        "query": rule["query"],
                        "duration": f"{rule['seconds']}s",
                        "evaluation_interval": "60s",
                        # The policy is created before the first scrape: its metrics do not exist yet.
                        "disable_metric_validation": True,
                    }
                },
                pulumi.ResourceOptions.merge(after_api, pulumi.ResourceOptions(depends_on=rule.get("after") or [])),
            )
        for log_rule in args["log_alerts"]:
            self._alert_policy(
                name,
                log_rule,
                {"condition_matched_log": {"filter": log_rule["filter"]}},
                after_api,
                alert_strategy={
                    "notification_rate_limit": {"period": slice_alerts.RATE_LIMIT},
                    "auto_close": slice_alerts.AUTO_CLOSE,
                },
            )
        self.register_outputs(
            {
                "podMonitorings": [pm.object_name for pm in self.pod_monitorings.values()],
                "dashboardUrl": self.dashboard_url,
                "alertPolicies": [p.name for p in self.alert_policies.values()],
            }
        )

    def _alert_policy(
        self, name: str, rule: _Alert, condition: dict[str, Any], opts: pulumi.ResourceOptions | None, **extra: Any
    ) -> None:
        """One alert policy of one condition, to the stack's notification channels."""
        self.alert_policies[rule["key"]] = gcp.monitoring.AlertPolicy(
            f"{name}-{rule['key']}",
            project=self._args["project"],
            display_name=rule["display_name"],
            combiner="OR",
            severity=rule["severity"],
            conditions=[{"display_name": rule["display_name"], **condition}],
            documentation={"content": rule["documentation"], "mime_type": "text/markdown"},
            notification_channels=list(self._args["notification_channels"]),
            # Which deployment the policy watches, when several share a project (a GKE cluster name is
            # already a valid label value: lowercase letters, digits and hyphens, at most 40 characters).
            user_labels={"cluster": self._args["cluster_name"]},
            opts=opts,
            **extra,
        )

    def _scrape_kueue(self, name: str, kueue: KueueScrape, interval: str, provider: k8s.Provider) -> None:
        """Kueue's /metrics wants a bearer token allowed GET /metrics: a service account with the chart's
        metrics-reader ClusterRole, its token Secret, and read access to that Secret for GMP's collector (the
        pattern of GAIE's epplib `_gke.yaml` at v1.5.0 and llm-d's routerlib `_gke.yaml`)."""
        namespace = kueue["namespace"]
        # Only what needs the chart waits for it: the binding to its ClusterRole (the API server checks a binding
        # against the role it names, https://kubernetes.io/docs/reference/access-authn-authz/rbac/
        # "Restrictions on role binding creation or update") and the scrape object (its pods). The account, its
        # token and the token's Role need the namespace alone.
        in_namespace = self.child(provider=provider)
        sa, self.kueue_token, token_read, collector = self._scrape_token(
            f"{name}-kueue", monitoring.KUEUE_METRICS_SA, namespace, in_namespace
        )
        self.kueue_rbac = [
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-kueue-metrics-reader",
                metadata={"name": f"{monitoring.KUEUE_METRICS_SA}-metrics-reader"},
                role_ref=_role_ref("ClusterRole", monitoring.kueue_metrics_reader(kueue["release"])),
                subjects=[{"kind": "ServiceAccount", "name": sa.metadata.name, "namespace": namespace}],
                opts=self.child(provider=provider, depends_on=[kueue["chart"]]),
            ),
            token_read,
            collector,
        ]
        self.pod_monitorings["kueue"] = KubernetesObject(
            f"{name}-kueue",
            kueue_pod_monitoring(kueue["release"], namespace, self.kueue_token.metadata.name, interval),
            self.child(provider=provider, depends_on=[kueue["chart"], *self.kueue_rbac]),
        )

    def _scrape_token(
        self, prefix: str, sa_name: str, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
    ) -> tuple[k8s.core.v1.ServiceAccount, k8s.core.v1.Secret, k8s.rbac.v1.Role, k8s.rbac.v1.RoleBinding]:
        """A scraper's service account, its token Secret, and read access to that Secret for GMP's collector (which
        sends the token as the scrape's bearer token); each needs the namespace alone."""
        sa = k8s.core.v1.ServiceAccount(
            f"{prefix}-scraper", metadata={"name": sa_name, "namespace": namespace}, opts=opts
        )
        token_name = f"{sa_name}-token"
        # After the account (its name as an Output): the token controller fills the token of an existing account
        # only (https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#token-controller).
        token = k8s.core.v1.Secret(
            f"{prefix}-scraper-token",
            metadata={
                "name": token_name,
                "namespace": namespace,
                "annotations": {SERVICE_ACCOUNT_NAME_ANNOTATION: sa.metadata.name},
            },
            type="kubernetes.io/service-account-token",
            opts=opts,
        )
        # Names the Secret by the same string, not its Output: a Role may name objects that do not exist yet.
        token_read = k8s.rbac.v1.Role(
            f"{prefix}-token-read",
            metadata={"name": f"{sa_name}-token-read", "namespace": namespace},
            rules=[
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "verbs": ["get", "list", "watch"],
                    "resourceNames": [token_name],
                }
            ],
            opts=opts,
        )
        gmp_namespace, gmp_sa = monitoring.GMP_COLLECTOR
        # After its Role (the name as an Output): the API server checks a binding against the role it names.
        collector = k8s.rbac.v1.RoleBinding(
            f"{prefix}-token-read-collector",
            metadata={"name": f"{gmp_namespace}:{gmp_sa}:{sa_name}-token-read", "namespace": namespace},
            role_ref=_role_ref("Role", token_read.metadata.name),
            subjects=[{"kind": "ServiceAccount", "name": gmp_sa, "namespace": gmp_namespace}],
            opts=opts,
        )
        return sa, token, token_read, collector

    def _scrape_router(
        self, name: str, router: RouterScrape, interval: str, provider: k8s.Provider, namespace: pulumi.Input[str]
    ) -> None:
        """The endpoint picker's /metrics wants a bearer token allowed GET /metrics: what the router chart's
        `_gke.yaml` would declare, declared here so that the token Secret waits for its account (the chart creates
        both in parallel, and the token controller deletes a token Secret whose account does not exist yet:
        kubernetes pkg/controller/serviceaccount/tokens_controller.go syncSecret, "Service account does not exist,
        deleting token"). Nothing waits for the chart but the scrape object (it selects the chart's pods)."""
        in_namespace = self.child(provider=provider)
        sa_name = monitoring.EPP_METRICS_SA
        sa, self.epp_token, token_read, collector = self._scrape_token(f"{name}-epp", sa_name, namespace, in_namespace)
        # The chart's reader role is gone with its monitoring block: this one is the same rule (routerlib _gke.yaml).
        reader = k8s.rbac.v1.ClusterRole(
            f"{name}-epp-metrics-reader",
            metadata={"name": f"{sa_name}-metrics-reader"},
            rules=[{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
            opts=in_namespace,
        )
        # The picker checks each scrape's token with the API server; without the chart's monitoring block its
        # account lacks that right, so it is granted here (a new name: the chart's role is deleted only at the end).
        auth = k8s.rbac.v1.ClusterRole(
            f"{name}-epp-auth",
            metadata={"name": f"{router['service_account']}-metrics-auth"},
            rules=[dict(rule) for rule in monitoring.EPP_AUTH_RULES],
            opts=in_namespace,
        )
        self.epp_rbac = [
            auth,
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-epp-auth",
                metadata={"name": f"{router['service_account']}-metrics-auth"},
                role_ref=_role_ref("ClusterRole", auth.metadata.name),
                subjects=[{"kind": "ServiceAccount", "name": router["service_account"], "namespace": namespace}],
                opts=in_namespace,
            ),
            reader,
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-epp-metrics-reader",
                metadata={"name": f"{sa_name}-metrics-reader"},
                role_ref=_role_ref("ClusterRole", reader.metadata.name),
                subjects=[{"kind": "ServiceAccount", "name": sa.metadata.name, "namespace": namespace}],
                opts=in_namespace,
            ),
            token_read,
            collector,
        ]
        endpoint = {
            "port": monitoring.EPP_METRICS_PORT,
            "scheme": "http",
            "path": "/metrics",
            "interval": interval,
            "authorization": bearer(self.epp_token.metadata.name),
        }
        self.pod_monitorings["epp"] = KubernetesObject(
            f"{name}-epp",
            pod_monitoring(router["job"], namespace, router["selector"], endpoint),
            self.child(provider=provider, depends_on=[router["chart"], *self.epp_rbac]),
        )
