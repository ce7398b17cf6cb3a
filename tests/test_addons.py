"""The add-on charts and manifests (components/addons.py): pinned charts, Kueue's manager configuration and
webhooks, replicas, what they wait for."""

from __future__ import annotations

import pytest
import yaml

from components.model.addons.kueue_config import INTEGRATIONS, KUEUE_CONFIG_VERSION
from tests import planner_fixtures, upstream
from tests.graph_queries import addon_charts, tpu_pools
from tests.harness import CHART, JOBSET, LWS, POOL, Run, assert_rejected, normalize, ok
from tests.stack_config import P


def kueue_values(run: Run) -> dict:
    return normalize(run.get(CHART, "kueue-chart").plain("values"))


def manager_config(run: Run) -> dict:
    return yaml.safe_load(kueue_values(run)["managerConfig"]["controllerManagerConfigYaml"])


def pinned_kueue_values() -> dict:
    return yaml.safe_load(upstream.path(f"schemas/charts/kueue-v{KUEUE_CONFIG_VERSION}/values.yaml").read_text())


def rendered_webhooks(config: dict) -> dict[str, tuple[str, dict]]:
    """(failurePolicy, namespaceSelector) of the pod-level webhooks as Kueue's chart renders them for `config`.

    kubernetes-sigs/kueue charts/kueue/templates/webhook/manifests.yaml@v0.17.4: mpod.kb.io (L265-281),
    mdeployment.kb.io (L84-100) and mstatefulset.kb.io fail closed only when their integration is listed,
    and take `managedJobsNamespaceSelector` when the configuration has one, else exclude kube-system and the
    release namespace; the job kinds' webhooks (mjobset.kb.io, mleaderworkerset.kb.io, ...) always fail closed
    and take the configuration's selector when set (`{{- if (hasKey $managerConfig ...) }}`), none otherwise.
    """
    default = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}
        ]
    }
    selector = config.get("managedJobsNamespaceSelector")
    frameworks = config["integrations"]["frameworks"]
    out = {}
    for name, framework in (("mpod", "pod"), ("mdeployment", "deployment"), ("mstatefulset", "statefulset")):
        out[name] = ("Fail" if framework in frameworks else "Ignore", selector or default)
    for name in ("mjob", "mjobset", "mleaderworkerset"):
        out[name] = ("Fail", selector or {})  # {} selects every namespace
    return out


def test_addon_charts_are_pinned_oci_charts(dev: Run) -> None:
    charts = {r.name: r.inputs for r in dev.of_type(CHART)}
    # The newest tested set (components/model/addons/tested_sets.py), dev's default.
    expected = {
        "jobset-chart": ("jobset", "oci://registry.k8s.io/jobset/charts/jobset", "0.12.0", "jobset-system"),
        "kueue-chart": ("kueue", "oci://registry.k8s.io/kueue/charts/kueue", "0.19.2", "kueue-system"),
        "lws-chart": ("lws", "oci://registry.k8s.io/lws/charts/lws", "0.10.0", "lws-system"),
    }
    for name, release in expected.items():
        c = charts[name]
        assert (c["name"], c["chart"], c["version"], c["namespace"]) == release
        assert c["skipAwait"] is False  # wait for the controllers (and webhooks) to be ready
    kueue_values = normalize(charts["kueue-chart"]["values"])
    # The manager configuration and the replicas: the tests below.
    assert set(kueue_values.pop("managerConfig")) == {"controllerManagerConfigYaml"}
    manager = kueue_values["controllerManager"]
    assert {k: manager.pop(k) for k in ("replicas", "podDisruptionBudget", "topologySpreadConstraints")}  # below
    assert kueue_values == {
        "controllerManager": {
            "manager": {
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "512Mi"}}
            }
        }
    }


def test_kueue_webhooks_fail_closed_only_in_the_workload_namespace(dev: Run) -> None:
    config = manager_config(dev)
    queued = sorted({w.plain("metadata")["namespace"] for w in dev.of_type(JOBSET) + dev.of_type(LWS)})
    assert queued == ["llm-d-pd-disaggregation"]  # every queued workload of the run, demos and serving
    webhooks = rendered_webhooks(config)
    only_queued = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": queued}]}
    assert webhooks["mpod"] == ("Fail", only_queued)  # LWS pods are never created unmanaged
    assert webhooks["mdeployment"][0] == webhooks["mstatefulset"][0] == "Ignore"
    assert all(sel == only_queued for _, sel in webhooks.values())
    # With the pinned default, the same webhooks covered every namespace but two.
    default = yaml.safe_load(pinned_kueue_values()["managerConfig"]["controllerManagerConfigYaml"])
    assert rendered_webhooks(default)["mpod"][1]["matchExpressions"][0]["operator"] == "NotIn"
    assert rendered_webhooks(default)["mdeployment"][0] == "Fail"
    # The selector follows the namespace setting.
    moved = manager_config(ok({f"{P}:kueue": {"namespace": "tpu-jobs"}}))
    assert moved["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"] == ["tpu-jobs"]


def test_kueue_manager_config_is_the_pinned_default_but_namespaces_integrations_and_metrics(dev: Run) -> None:
    default = yaml.safe_load(pinned_kueue_values()["managerConfig"]["controllerManagerConfigYaml"])
    ours = manager_config(dev)
    assert ours.pop("managedJobsNamespaceSelector")
    assert ours.pop("waitForPodsReady")  # the test below
    assert ours["metrics"].pop("enableClusterQueueResources") is True  # observability's quota series
    frameworks = ours["integrations"].pop("frameworks")
    assert frameworks == list(INTEGRATIONS)
    assert set(frameworks) < set(default["integrations"].pop("frameworks"))
    assert ours == default
    # Every integration kept has objects in the run (or is LWS's implicit pod integration).
    assert dev.of_type(JOBSET) and dev.of_type(LWS)
    # Leader election stays on: the replicas below elect one leader.
    assert ours["leaderElection"]["leaderElect"] is True


def leader_startup_budgets(run: Run) -> list[int]:
    """Seconds each serving leader's startup probe allows before the kubelet restarts it (as the LWS declares it)."""
    out = []
    for lws in run.of_type(LWS):
        leader = normalize(lws.plain("spec"))["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"]
        for probe in (c["startupProbe"] for c in leader if "startupProbe" in c):
            out.append(probe["initialDelaySeconds"] + probe["periodSeconds"] * probe["failureThreshold"])
    return out


@pytest.mark.parametrize("startup", [None, 20000])
def test_kueue_waits_for_a_loading_serving_group_longer_than_its_startup_probe(startup: int) -> None:
    """Kueue 0.19 turns waitForPodsReady on with a 30-minute timeout when the configuration is silent
    (components/model/addons/kueue_config.py cites it): a serving group loading for up to
    serving.startupTimeoutSeconds would be evicted and requeued forever. So the configuration says what it wants, on
    every version: both timeouts past every leader's startup budget (the slice, scheduling and image pull come on
    top), no blocked admissions, endless requeuing."""
    run = ok({f"{P}:serving": {"startupTimeoutSeconds": startup}} if startup else None)
    budgets = leader_startup_budgets(run)
    # every LeaderWorkerSet's leaders: both floors and dev's burst slots, built alike
    assert len(budgets) == len(run.of_type(LWS)) >= 2 and (startup is None or min(budgets) >= startup)
    block = manager_config(run)["waitForPodsReady"]  # present whatever the version: never Kueue's default
    assert int(str(block["timeout"]).removesuffix("s")) > max(budgets)
    assert block["recoveryTimeout"] == block["timeout"]  # a restarted group loads the model again
    assert block["blockAdmission"] is False
    assert block["requeuingStrategy"]["backoffLimitCount"] is None  # never deactivated for good


def pinned_chart_values(addon: str, version: str) -> dict:
    return yaml.safe_load(upstream.path(f"charts/{addon}-v{version}/values.yaml").read_text())


# The chart values each controller's replicas, budget and spread live under (None: the chart has no budget).
HA_KEYS = {
    "kueue": (("controllerManager",), "replicas", "podDisruptionBudget", "topologySpreadConstraints"),
    "jobset": (("controller",), "replicas", "podDisruptionBudget", "affinity"),
    "lws": ((), "replicaCount", None, "affinity"),
}


@pytest.mark.parametrize("addon", sorted(HA_KEYS))
def test_each_controller_runs_two_replicas_under_a_disruption_budget_spread_over_nodes(addon: str) -> None:
    """Issue: JobSet and LWS ran one replica each with fail-closed webhooks and no budget, so rescheduling that pod
    stopped every JobSet or LWS pod from being created. Every controller now runs two, with a budget of one and a
    spread; the chart's own keys where it has them (its pinned default: one replica, no budget)."""
    base, replicas_key, budget_key, spread_key = HA_KEYS[addon]
    version = {"kueue": "0.17.4", "jobset": "0.11.1", "lws": "0.8.0"}[addon]

    def block(values: dict) -> dict:
        for key in base:
            values = values[key]
        return values

    pinned = block(pinned_chart_values(addon, version))
    assert pinned[replicas_key] == 1 and spread_key in pinned
    run = ok()
    ours = block(normalize(run.get(CHART, f"{addon}-chart").plain("values")))
    assert ours[replicas_key] == 2
    budgets = [normalize(b.plain()) for b in run.of_type("kubernetes:policy/v1:PodDisruptionBudget")]
    mine = [b for b in budgets if b["metadata"]["namespace"] == f"{addon}-system"]
    if budget_key:  # the chart's own budget
        assert set(pinned[budget_key]) >= {"enabled", "minAvailable"} and pinned[budget_key]["enabled"] is False
        assert ours[budget_key] == {"enabled": True, "minAvailable": 1}
        assert mine == []
    else:  # the program's, in the chart's namespace
        (budget,) = mine
        assert budget["spec"]["minAvailable"] == 1
    assert ours[spread_key]  # tests/test_charts.py: it selects the rendered pods
    # One replica: no budget (minAvailable 1 of 1 would block every drain), no spread.
    single = ok({f"{P}:addons": {addon: {"replicas": 1}}})
    one = block(normalize(single.get(CHART, f"{addon}-chart").plain("values")))
    assert one[replicas_key] == 1 and spread_key not in one
    if budget_key:
        assert one[budget_key]["enabled"] is False
    assert [
        b.name for b in single.of_type("kubernetes:policy/v1:PodDisruptionBudget") if b.name.startswith(addon)
    ] == []
    assert_rejected({f"{P}:addons": {addon: {"replicas": 0}}}, [f"addons.{addon}.replicas"])


def test_the_system_pool_fit_counts_every_controller_replica() -> None:
    # n2-standard-32 nodes, two zones of them counted: one 28-CPU controller fits beside the others, two do not.
    big = {"requests": {"cpu": "28", "memory": "1Gi"}, "limits": {"cpu": "28", "memory": "1Gi"}}
    pool = {f"{P}:cluster": {"systemMachineType": "n2-standard-32"}}
    for addon in ("kueue", "jobset", "lws"):
        ok({**pool, f"{P}:addons": {addon: {"replicas": 1, "controllerResources": big}}})
        assert_rejected(
            {**pool, f"{P}:addons": {addon: {"replicas": 2, "controllerResources": big}}}, ["cluster.systemMachineType"]
        )


def test_addon_versions_and_resources_are_configurable() -> None:
    run = ok({f"{P}:addons": {"kueue": {"version": "0.17.5", "controllerResources": {"requests": {"cpu": "1"}}}}})
    chart = run.get(CHART, "kueue-chart").inputs
    assert chart["version"] == "0.17.5"
    assert chart["values"]["controllerManager"]["manager"]["resources"] == {"requests": {"cpu": "1"}}


def test_addons_depend_on_the_cluster_but_not_on_tpu_pools(dev: Run) -> None:
    cluster = dev.get("gcp:container/cluster:Cluster", "cluster-gke")
    system = dev.get(POOL, "cluster-system")
    for chart in addon_charts(dev) + dev.of_type("kubernetes:yaml/v2:ConfigFile"):
        assert dev.depends_on(chart, cluster) and dev.depends_on(chart, system), chart.name
        for pool in tpu_pools(dev):
            assert not dev.depends_on(chart, pool), f"{chart.name} waits for {pool.name}"


def test_a_partial_resources_block_is_checked_and_counted_with_the_charts_other_amounts() -> None:
    """Helm merges the values set over the chart's own key by key, so a block naming some amounts keeps the chart's
    others: requests.memory alone on Kueue renders beside the chart's limits.memory 512Mi, which the API server
    refuses (request above limit), and requests.cpu alone keeps the chart's 512Mi memory request on the system pool."""
    key = "addons.kueue.controllerResources.requests.memory"
    message = assert_rejected(
        {f"{P}:addons": {"kueue": {"controllerResources": {"requests": {"memory": "1Gi"}}}}}, [key]
    )
    assert "at most limits.memory (512Mi, the chart's default" in message and "set limits.memory too" in message
    assert_rejected(
        {f"{P}:addons": {"jobset": {"controllerResources": {"requests": {"cpu": "3"}}}}},
        ["addons.jobset.controllerResources.requests.cpu", "limits.cpu (2, "],
    )
    ok(
        {
            f"{P}:addons": {
                "kueue": {"controllerResources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}}
            }
        }
    )
    ok({f"{P}:addons": {"lws": {"controllerResources": {"requests": {"memory": "2Gi"}}}}})  # the chart has no limits

    settings = planner_fixtures.settings({"addons": {"kueue": {"controllerResources": {"requests": {"cpu": "1"}}}}})
    counted = settings.system_pool_pods()["addons.kueue.controllerResources"]
    assert counted.manifest() == {
        "requests": {"cpu": "1", "memory": "512Mi"},
        "limits": {"cpu": "2", "memory": "512Mi"},
    }
