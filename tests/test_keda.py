"""KEDA (components/keda.py, components/model/addons/keda.py): off unless asked for; its chart as Helm's engine
renders it with the program's values (no external metrics API, webhooks that never hold anything up, RBAC on
LeaderWorkerSets only, two replicas under budgets); the operator's Workload Identity; and the TriggerAuthentication
and ScaledObject builders, checked against the CRDs of the pinned chart itself."""

from __future__ import annotations

import copy
import io
import json
import re
from typing import Any

import pytest
import yaml

from components.cli import charts, diff
from components.cli.render import redact
from components.model.addons import keda as model
from components.model.config.checks import ConfigError
from components.model.diff import kubernetes
from components.model.keys import METADATA_SERVER_LABEL
from tests import conformance, planner_fixtures, upstream
from tests.harness import CHART, PROJECT_NUMBER, Run, ok
from tests.stack_config import OPT_IN_ADDONS, P, dev_settings, set_arguments

KEDA = "gke-tpu-slicing:keda:Keda"
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
TRIGGER_AUTHENTICATION = f"kubernetes:{model.KEDA_API}:TriggerAuthentication"


@pytest.fixture(scope="module")
def keda_run() -> Run:
    return ok(OPT_IN_ADDONS)


def keda_release(run: Run) -> charts.Release:
    return next(r for r in charts.releases(run.registrations, redact) if r.resource == "keda-chart")


def rendered(release: charts.Release) -> list[dict[str, Any]]:
    upstream.require("charts")
    return charts.render_release(release).objects


@pytest.fixture(scope="module")
def objects(keda_run: Run) -> list[dict[str, Any]]:
    return rendered(keda_release(keda_run))


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def with_values(release: charts.Release, **changes: Any) -> charts.Release:
    values = copy.deepcopy(release.values)
    for key, value in changes.items():
        if value is None:
            values.pop(key)
        else:
            values[key] = value
    return charts.Release(**{**release.__dict__, "values": values})


@pytest.fixture(scope="module")
def crds(objects: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> conformance.SchemaRegistry:
    """KEDA's CRDs as its chart installs them: the pinned templates/crds rendered by Helm's engine (the plain copies
    in upstream-next/ are those templates with lines removed by hand, not upstream's files, so they are not used)."""
    directory = tmp_path_factory.mktemp("keda-crds")
    documents = list(of_kind(objects, "CustomResourceDefinition").values())
    (directory / "keda.yaml").write_text(yaml.safe_dump_all(documents))
    return conformance.SchemaRegistry(directory)


# ------------------------------------------------------------------------------------------------- the switch


def test_keda_is_installed_where_a_role_autoscales_and_nowhere_else(dev: Run, staging: Run, prod: Run) -> None:
    for run in (dev, staging):
        assert len(run.of_type(KEDA)) == 1 and run.get(CHART, "keda-chart")
    assert [r.name for r in prod.registrations if "keda" in r.name or r.type == KEDA] == []


def test_keda_is_the_pinned_chart_of_its_helm_repository(keda_run: Run) -> None:
    chart = keda_run.get(CHART, "keda-chart")
    inputs = chart.plain()
    assert (inputs["chart"], inputs["repositoryOpts"], inputs["version"]) == (
        "keda",
        {"repo": "https://kedacore.github.io/charts"},
        "2.20.2",
    )
    assert (inputs["name"], inputs["namespace"], inputs["skipAwait"]) == ("keda", "keda", False)
    # The offline render finds the pinned sources from the same inputs.
    assert keda_release(keda_run).chart in charts.SOURCES
    # Cloud Monitoring's API, which KEDA's queries call, is enabled even with no dashboard or alert.
    quiet = ok({**OPT_IN_ADDONS, f"{P}:observability": {"dashboard": False, "alerts": False}})
    services = {r.plain()["service"] for r in quiet.of_type("gcp:projects/service:Service")}
    assert "monitoring.googleapis.com" in services


def test_the_second_up_with_keda_changes_nothing() -> None:
    """Every KEDA object as the APIs store it (the change preview's read-back rules) against a second run."""
    upstream.require("charts")  # the chart's objects are compared one by one only when its sources render
    out, err = io.StringIO(), io.StringIO()
    on = ["--set", "addons.keda.enabled=true"]
    code = diff.main(["--stack", "dev", *set_arguments("dev"), *on, "--second-run", "--json"], out, err)
    assert code == 0, err.getvalue()
    changes = json.loads(out.getvalue())["changes"]
    assert [c["name"] for c in changes if c["action"] != "same"] == []
    assert len([c for c in changes if c["name"].startswith("keda")]) == 26  # the chart's 23 objects, chart, ns, role


# ---------------------------------------------------------------------------- what KEDA's outage can hold up


def test_no_external_metrics_api_and_webhooks_that_hold_nothing_up(
    keda_run: Run, objects: list[dict[str, Any]]
) -> None:
    assert of_kind(objects, "APIService") == {}
    (operator,) = of_kind(objects, "Deployment")["keda-operator"]["spec"]["template"]["spec"]["containers"]
    assert "--enable-apiservice-patching=false" in operator["args"]  # no CA to inject into an absent APIService
    (webhooks,) = of_kind(objects, "ValidatingWebhookConfiguration").values()
    assert of_kind(objects, "MutatingWebhookConfiguration") == {}
    for hook in webhooks["webhooks"]:
        assert hook["failurePolicy"] == "Ignore", hook["name"]
        for rule in hook["rules"]:
            assert set(rule["apiGroups"]) <= {"keda.sh", "eventing.keda.sh"}, hook["name"]
            assert set(rule["operations"]) <= {"CREATE", "UPDATE"}, hook["name"]  # never a delete
    # The chart's default registers the external metrics API: the value is what removes it.
    default = rendered(with_values(keda_release(keda_run), metricsServer=None))
    assert list(of_kind(default, "APIService")) == ["v1beta1.external.metrics.k8s.io"]


def test_a_slot_never_needs_the_hpa() -> None:
    """KEDA's HPA for a ScaledObject spans max(minReplicaCount, 1) to maxReplicaCount (kedacore/keda@68a5b502
    apis/keda/v1alpha1/scaledobject_types.go:303-317): for a slot, 1 to 1, which the operator's activation covers."""
    so = slot()
    low, high = so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]
    assert (low, high) == (0, 1)  # so the HPA's span is 1 to 1


# ------------------------------------------------------------------------------------------------------ RBAC


def rules_of(objects: list[dict[str, Any]], kind: str = "ClusterRole") -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (name, o["metadata"].get("namespace", ""), rule)
        for name, o in of_kind(objects, kind).items()
        for rule in o["rules"]
    ]


def test_rbac_reaches_leaderworkersets_and_no_secret_outside_kedas_namespace(
    keda_run: Run, objects: list[dict[str, Any]]
) -> None:
    cluster_rules = rules_of(objects)
    assert all("*" not in r["apiGroups"] and "*" not in r["resources"] for _, _, r in cluster_rules)
    assert [name for name, _, r in cluster_rules if "secrets" in r["resources"]] == []
    # Writes of `/scale`: LeaderWorkerSets, and the Deployments and StatefulSets the chart always grants.
    scaled = {
        (group, resource)
        for _, _, r in cluster_rules
        if "update" in r["verbs"]
        for group in r["apiGroups"]
        for resource in r["resources"]
        if resource.endswith("/scale")
    }
    assert scaled == {
        ("leaderworkerset.x-k8s.io", "leaderworkersets/scale"),
        ("apps", "deployments/scale"),
        ("apps", "statefulsets/scale"),
    }
    # The operator reads Secrets in its own namespace only (its certificate's, and what restrict.secret lists).
    secret_rules = [(name, ns) for name, ns, r in rules_of(objects, "Role") if "secrets" in r["resources"]]
    assert secret_rules and {ns for _, ns in secret_rules} == {"keda"}
    # The chart's own default: every resource readable, Secrets included, and `*/scale` writable.
    release = keda_release(keda_run)
    broad = rendered(with_values(release, rbac=None, permissions=None))
    broad_rules = [r for _, _, r in rules_of(broad)]
    assert {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]} in broad_rules
    assert any("secrets" in r["resources"] and "list" in r["verbs"] for r in broad_rules)


# -------------------------------------------------------------------------------------------- availability


@pytest.mark.parametrize("replicas", [2, 1])
def test_replicas_budgets_and_spread(keda_run: Run, replicas: int) -> None:
    run = keda_run if replicas == 2 else ok({f"{P}:addons": {"keda": {"enabled": True, "replicas": 1}}})
    objects = rendered(keda_release(run))
    deployments, budgets = of_kind(objects, "Deployment"), of_kind(objects, "PodDisruptionBudget")
    assert set(deployments) == {model.OPERATOR_APP, model.WEBHOOKS_APP}
    for name, deploy in deployments.items():
        spec = deploy["spec"]
        assert spec["replicas"] == replicas, name
        spread = spec["template"]["spec"].get("topologySpreadConstraints")
        if replicas == 1:  # a budget of 1 of 1 would block every drain
            assert name not in budgets and spread is None, name
            continue
        assert budgets[name]["spec"] == {"minAvailable": 1, "selector": spec["selector"]}, name
        (constraint,) = spread
        assert constraint["labelSelector"] == spec["selector"], name
        assert (constraint["topologyKey"], constraint["whenUnsatisfiable"]) == (
            "kubernetes.io/hostname",
            "ScheduleAnyway",
        )
    # Leader election: one operator scales, the other stands by.
    (operator,) = deployments[model.OPERATOR_APP]["spec"]["template"]["spec"]["containers"]
    assert "--leader-elect" in operator["args"]


def test_every_keda_pod_counts_in_the_system_pool_fit() -> None:
    def refused(replicas: int) -> int:
        keda = {
            "enabled": True,
            "replicas": replicas,
            "controllerResources": {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}},
        }
        with pytest.raises(ConfigError) as error:
            planner_fixtures.settings({"cluster": {"systemMachineType": "n2-standard-8"}, "addons": {"keda": keda}})
        (total,) = re.findall(r"room for the controllers' requests \((\d+)m CPU", str(error.value))
        return int(total)

    planner_fixtures.settings({"cluster": {"systemMachineType": "n2-standard-8"}})  # fits without KEDA
    assert refused(2) - refused(1) == 2 * 3000  # one more operator and one more webhook pod of 3 CPUs


# --------------------------------------------------------------------------------------- Workload Identity


def test_the_operators_service_account_alone_reads_managed_prometheus(
    keda_run: Run, objects: list[dict[str, Any]]
) -> None:
    member = keda_run.get(IAM_MEMBER, "keda-metrics-reader")
    pod = of_kind(objects, "Deployment")[model.OPERATOR_APP]["spec"]["template"]["spec"]
    ksa = pod["serviceAccountName"]
    assert ksa == model.OPERATOR_KSA and ksa in of_kind(objects, "ServiceAccount")
    project = dev_settings().project
    assert member.plain() == {
        "project": project,
        "role": "roles/monitoring.viewer",
        "member": f"principal://iam.googleapis.com/projects/{PROJECT_NUMBER}/locations/global/workloadIdentityPools/"
        f"{project}.svc.id.goog/subject/ns/keda/sa/{ksa}",
    }
    assert member.options.get("deleteBeforeReplace") is True
    # Only on nodes whose metadata server gives the pod its own identity, not the node's.
    assert pod["nodeSelector"][METADATA_SERVER_LABEL] == "true"
    # The principal follows KEDA's namespace.
    moved = ok({f"{P}:addons": {"keda": {"enabled": True, "namespace": "autoscaling"}}})
    assert "/subject/ns/autoscaling/sa/keda-operator" in moved.get(IAM_MEMBER, "keda-metrics-reader").plain()["member"]


# ------------------------------------------------------------------------------------- the wiring's blocks


def slot(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "target": "decode-burst-1",
        "project": "my-project-123",
        "query": 'sum(vllm:num_requests_waiting{role="decode"}) or vector(0)',
        "activation_threshold": 4,
        "cooldown_seconds": 900,
        "authentication": "managed-prometheus",
        "polling_interval_seconds": 30,
    }
    return model.prometheus_scaled_object("decode-burst-1", "llm-d-pd-disaggregation", **{**args, **changes})


def test_the_blocks_validate_strictly_against_the_pinned_crds(crds: conformance.SchemaRegistry) -> None:
    auth = model.trigger_authentication("managed-prometheus", "llm-d-pd-disaggregation")
    so = slot()
    failures, rejected, unevaluated, passed = conformance.check([("auth", auth), ("slot", so)], crds)
    assert (failures, rejected, unevaluated) == ({}, {}, {})
    assert passed == {"ScaledObject"}  # its one CEL rule ran and held
    # What KEDA's e2e test declares (gcp_prometheus_workload_identity_test.go:44-76), for a LeaderWorkerSet.
    assert auth["spec"] == {"podIdentity": {"provider": "gcp"}}
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["authenticationRef"] == {"name": "managed-prometheus"}
    assert trigger["metadata"]["serverAddress"] == (
        "https://monitoring.googleapis.com/v1/projects/my-project-123/location/global/prometheus"
    )
    assert (trigger["metadata"]["activationThreshold"], trigger["metadata"]["threshold"]) == ("4.0", "1")
    assert so["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": "decode-burst-1",
    }
    assert (so["spec"]["cooldownPeriod"], so["spec"]["pollingInterval"]) == (900, 30)


def test_the_crds_refuse_what_keda_would(crds: conformance.SchemaRegistry) -> None:
    """Guards against a pass by never checking: the same registry refuses a broken object of each kind."""
    upside_down = slot()
    upside_down["spec"]["minReplicaCount"] = 2
    misspelt = model.trigger_authentication("a", "n")
    misspelt["spec"]["podIdentity"]["providr"] = misspelt["spec"]["podIdentity"].pop("provider")
    negative = slot(cooldown_seconds=-1)
    failures, rejected, _, _ = conformance.check(
        [("upside-down", upside_down), ("misspelt", misspelt), ("negative", negative)], crds
    )
    assert set(rejected) == {"upside-down"}  # minReplicaCount must be less than or equal to maxReplicaCount
    assert set(failures) == {"misspelt", "negative"}


def test_the_change_preview_updates_keda_objects_in_place(crds: conformance.SchemaRegistry) -> None:
    """No transition rule (a rule reading `oldSelf`) in the CRDs KEDA's chart installs: the model's empty facts."""
    for kind in ("ScaledObject", "TriggerAuthentication"):
        assert "oldSelf" not in json.dumps(crds.crd(model.KEDA_API, kind)), kind
        assert kubernetes.FACTS[f"kubernetes:{model.KEDA_API}:{kind}"] == (), kind


def test_keda_objects_wait_for_the_chart_and_the_operators_access(dev: Run) -> None:
    """`pulumi destroy` deletes in reverse dependency order: an object that depends on the chart and the role goes
    first, while the operator that removes its finalizer.keda.sh still runs."""
    ready = {dev.get(CHART, "keda-chart").urn, dev.get(IAM_MEMBER, "keda-metrics-reader").urn}
    (provider,) = dev.of_type("pulumi:providers:kubernetes")
    objects = [*dev.of_type(f"kubernetes:{model.KEDA_API}:ScaledObject"), *dev.of_type(TRIGGER_AUTHENTICATION)]
    assert len(objects) == 5  # a ScaledObject per slot, one TriggerAuthentication
    for obj in objects:
        assert ready <= set(obj.dependencies) and obj.provider.startswith(provider.urn), obj.name
