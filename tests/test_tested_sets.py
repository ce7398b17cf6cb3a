"""Every tested set of add-on versions (components/model/addons/tested_sets.py), rendered and checked together.

Per set: the program runs with the set's versions; every chart is rendered by Helm's own engine from the pinned
sources; every chart object and every object the program declares passes the set's own CRDs (the ones its charts
install, its vendored inference extension release and that release's InferencePool CRD), strictly and through
their CEL rules; no value the program sets is ignored by a chart of the set; each controller renders the
resources the system-pool fit counts; each CRD has one owner; the program's objects of one set are read back by
the other set's CRDs (a rollback). The preview refuses what KNOWN_BREAKS lists and warns outside the sets.
"""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from components.cli import charts
from components.cli.chart_diff import CONFIG_GROUP
from components.cli.render import redact
from components.model.addons import tested_sets, vendored
from components.model.addons.tested_sets import TESTED_SETS, VersionSet
from components.model.config import checks
from tests import conformance, planner_fixtures, schema_checks, upstream
from tests.harness import Run, assert_rejected, normalize, ok
from tests.stack_config import ROOT, P

# What each set's InferencePool CRD is checked against (GKE installs it; the repository does not vendor it).
POOL_CRDS = {
    "v1.5.0": "schemas/crds/gaie-v1.5.0_inference.networking.k8s.io_inferencepools.yaml",
    "v1.6.0": "upstream-next/gaie-v1.6.0/crds/gaie-v1.6.0_inference.networking.k8s.io_inferencepools.yaml",
}
# GKE's own policies (networking.gke.io) have no public CRD to pin; every other kind is checked.
GKE_KINDS = {("networking.gke.io/v1", "HealthCheckPolicy"), ("networking.gke.io/v1", "GCPBackendPolicy")}
CHART_OF = {"kueue": "kueue-chart", "jobset": "jobset-chart", "lws": "lws-chart"}


def overrides(s: VersionSet) -> dict[str, Any]:
    v = s.versions
    addons = {k: {"version": v[k]} for k in ("kueue", "jobset", "lws")}
    addons["keda"] = {"enabled": True, "version": v["keda"]}  # rendered and checked with the set too
    return {
        f"{P}:addons": {**addons, "inferenceExtension": {"version": v["inferenceExtension"]}},
        f"{P}:serving": {"router": {"version": v["router"]}},
    }


@dataclass
class SetRun:
    set: VersionSet
    run: Run
    rendered: dict[str, charts.Rendered]
    registry: conformance.SchemaRegistry


@pytest.fixture(scope="module")
def set_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SetRun]:
    base = upstream.require("charts", *conformance.CRD_DIRS, "upstream-next")
    out = {}
    for s in TESTED_SETS:
        run = ok(overrides(s))
        rendered = {r.resource: charts.render_release(r) for r in charts.releases(run.registrations, redact)}
        crds = tmp_path_factory.mktemp(s.name)
        own = [o for r in rendered.values() for o in r.objects if o["kind"] == "CustomResourceDefinition"]
        own += vendored.objects(vendored.GAIE, s.versions["inferenceExtension"])
        (crds / "set.yaml").write_text(yaml.safe_dump_all(own))
        shutil.copy(base / POOL_CRDS[s.versions["inferenceExtension"]], crds / "inferencepools.yaml")
        for path in (base / "schemas/crds").glob("gateway-api-*"):
            shutil.copy(path, crds / path.name)
        registry = conformance.SchemaRegistry(crds, base / "schemas/monitoring")
        out[s.name] = SetRun(s, run, rendered, registry)
    return out


def program_objects(run: Run) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{r.type} {r.name}", normalize(r.plain()))
        for r in run.registrations
        if r.custom and r.type.startswith("kubernetes:")
    ]


def chart_objects(rendered: dict[str, charts.Rendered]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{name} {o['kind']}/{o['metadata'].get('name')}", o) for name, r in rendered.items() for o in r.objects]


# ------------------------------------------------------------------------------------------------ the table


def test_the_table_is_whole_and_the_defaults_are_its_newest_set() -> None:
    """Every set names a version for every column; the defaults are the newest set, which no warning flags; each
    version's chart sources are pinned (so it renders) and each inference extension release is vendored."""
    default = planner_fixtures.settings({"addons": {"keda": {"enabled": True}}})  # every column installed
    assert tested_sets.versions_of(default) == dict(tested_sets.newest().versions)
    assert [w for w in default.warnings() if "tested set" in w] == []
    pinned = {f.path.split("/")[1] for f in upstream.load() if f.path.startswith("charts/")}
    for s in TESTED_SETS:
        assert set(s.versions) == set(tested_sets.COLUMNS), s.name
        for addon in ("kueue", "jobset", "lws", "keda"):
            assert f"{addon}-v{s.versions[addon]}" in pinned, (s.name, addon)
        assert f"llm-d-router-{s.versions['router']}" in pinned
        assert s.versions["inferenceExtension"] in vendored.versions(vendored.GAIE)
        assert tested_sets.breaks(s.versions) == [], s.name
        assert checks.gke_version_tuple(s.gke_minimum) >= checks.gke_version_tuple(checks.MIN_SLICE_CONTROLLER_VERSION)
        assert s.evidence
    assert [s.name for s in TESTED_SETS] == sorted(s.name for s in TESTED_SETS)  # oldest first: the last is the newest


def test_the_upgrade_page_shows_the_table() -> None:
    """docs/upgrades.md's table is the program's: a set added or changed there and not here (or back) fails."""
    page = (ROOT / "docs" / "upgrades.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if re.match(r"\| \d{4}\.\d{2} \|", line)]
    assert rows == [
        "| " + " | ".join([s.name, *(s.versions[c] for c in tested_sets.COLUMNS), s.gke_minimum]) + " |"
        for s in TESTED_SETS
    ]


def test_staging_and_prod_pin_the_previous_set_until_promoted(staging: Run, prod: Run) -> None:
    previous = TESTED_SETS[-2]
    for run in (staging, prod):
        versions = {c.name.removesuffix("-chart"): c.inputs["version"] for c in run.of_type(charts.CHART)}
        assert {k: versions[k] for k in ("kueue", "jobset", "lws")} == {
            k: previous.versions[k] for k in ("kueue", "jobset", "lws")
        }
        assert versions["serving-router"] == previous.versions["router"]
        group = normalize(run.get(CONFIG_GROUP, "inference-extension-crds").inputs)
        assert group["objs"] == vendored.objects(vendored.GAIE, previous.versions["inferenceExtension"])


# 0.19.2-rc.0: a pre-release is before its release (semver), so it is without 0.19.2's fix.
@pytest.mark.parametrize("version", ["0.14.3", "0.15.0", "0.18.5", "0.18.6", "0.19.1", "0.19.2-rc.0", "0.19.2"])
def test_a_kueue_version_known_to_break_is_refused_at_preview(version: str) -> None:
    config = {f"{P}:addons": {"kueue": {"version": version}}}
    if version in ("0.14.3", "0.18.5", "0.19.1", "0.19.2-rc.0"):
        message = assert_rejected(config, ["addons.kueue.version", version])
        assert "kubernetes-sigs/kueue" in message  # the source of the break is named
    else:
        ok(config)


def test_a_combination_outside_the_sets_is_a_warning_naming_the_keys_that_differ() -> None:
    mixed = planner_fixtures.settings({"addons": {"kueue": {"version": "0.17.4"}}})
    (warning,) = [w for w in mixed.warnings() if "tested set" in w]
    assert warning.startswith("gke-tpu-slicing:addons.kueue.version = 0.17.4 (0.19.2 in the set)")
    assert "nearest is 2026.12" in warning
    # The previous set whole is a tested set: no warning.
    previous = {k: {"version": v} for k, v in TESTED_SETS[-2].versions.items() if k not in ("router",)}
    assert [w for w in planner_fixtures.settings({"addons": previous}).warnings() if "tested set" in w] == []


def test_a_set_that_needs_a_newer_gke_raises_the_version_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor of the cluster version is the highest of GKE's for dynamic slicing and the set's."""
    newer = VersionSet("2099.01", tested_sets.newest().versions, "1.37.1-gke.100", ("a row for this test",))
    monkeypatch.setattr(tested_sets, "TESTED_SETS", (*TESTED_SETS, newer))
    message = assert_rejected({f"{P}:cluster": {"version": "1.36"}}, ["cluster.version", "1.37.1-gke.100 or newer"])
    assert "tested set 2099.01" in message
    monkeypatch.setattr(tested_sets, "TESTED_SETS", TESTED_SETS)
    ok({f"{P}:cluster": {"version": "1.36"}})


# ------------------------------------------------------------------------------------- each set, rendered


@pytest.mark.parametrize("name", [s.name for s in TESTED_SETS])
def test_every_object_of_the_set_passes_the_sets_own_crds(name: str, set_runs: dict[str, SetRun]) -> None:
    sr = set_runs[name]
    named = [(n, o) for n, o in chart_objects(sr.rendered) + program_objects(sr.run)]
    unknown = {
        (o["apiVersion"], o["kind"])
        for _, o in named
        if (o["apiVersion"], o["kind"]) not in sr.registry
        and schema_checks.builtin_schema(o["apiVersion"], o["kind"]) is None
    }
    assert unknown == GKE_KINDS
    checked = [(n, o) for n, o in named if (o["apiVersion"], o["kind"]) not in GKE_KINDS]
    failures, rejected, _, passed = conformance.check(checked, sr.registry)
    assert (failures, rejected) == ({}, {})
    # Not vacuous: the kinds whose CRDs the set's charts install were checked, with their CEL rules.
    kinds = {o["kind"] for _, o in checked}
    assert {"Topology", "ClusterQueue", "LocalQueue", "JobSet", "LeaderWorkerSet", "InferencePool"} <= kinds
    assert {"Topology", "ClusterQueue", "ResourceFlavor"} <= passed
    kueue = sr.registry.crd("kueue.x-k8s.io/v1beta2", "Topology")
    assert kueue["metadata"]["annotations"]["controller-gen.kubebuilder.io/version"]  # the rendered chart's CRD
    assert len(checked) > 150


@pytest.mark.parametrize("name", [s.name for s in TESTED_SETS])
def test_each_set_reads_back_the_other_sets_objects(name: str, set_runs: dict[str, SetRun]) -> None:
    """A rollback: the objects the program declares under one set, after the CRDs went back (or forward) to the
    other set's, are still valid there, so no field the program sends is one only the newer CRDs know (the older
    API server would prune it and the older controller never see it)."""
    sr = set_runs[name]
    for other in set_runs.values():
        if other is sr:
            continue
        own = [(n, o) for n, o in program_objects(other.run) if (o["apiVersion"], o["kind"]) in sr.registry]
        failures, rejected, _, _ = conformance.check(own, sr.registry)
        assert (failures, rejected) == ({}, {}), other.set.name
        assert {"ClusterQueue", "JobSet", "LeaderWorkerSet"} <= {o["kind"] for _, o in own}


@pytest.mark.parametrize("name", [s.name for s in TESTED_SETS])
def test_no_value_the_program_sets_is_ignored_by_the_sets_charts(name: str, set_runs: dict[str, SetRun]) -> None:
    """Each value the program sets changes what the set's chart renders (a key a version renamed would be lost).
    The defaults' charts are tests/test_charts.py's; here the releases no other test renders."""
    sr = set_runs[name]
    default = {r.release.resource: r.release.version for r in set_runs[tested_sets.newest().name].rendered.values()}
    todo = [r.release for r in sr.rendered.values() if default[r.release.resource] != r.release.version]
    assert {r.resource: charts.ignored_values(r) for r in todo} == {r.resource: [] for r in todo}


@pytest.mark.parametrize("name", [s.name for s in TESTED_SETS])
def test_each_controller_renders_the_resources_and_replicas_the_fit_check_counts(
    name: str, set_runs: dict[str, SetRun]
) -> None:
    sr = set_runs[name]
    settings = planner_fixtures.settings({k.split(":", 1)[1]: v for k, v in overrides(sr.set).items()})
    counted = settings.system_pool_pods()
    for addon, resource in CHART_OF.items():
        (deploy,) = [o for o in sr.rendered[resource].objects if o["kind"] == "Deployment"]
        requests = {
            k: str(v) for k, v in deploy["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].items()
        }
        assert requests == counted[f"addons.{addon}.controllerResources"].manifest()["requests"], (name, addon)
        assert deploy["spec"]["replicas"] == settings.addons.helm_addons()[addon].pod_count()


@pytest.mark.parametrize("name", [s.name for s in TESTED_SETS])
def test_every_crd_has_one_owner_and_stays_a_child_of_its_chart(name: str, set_runs: dict[str, SetRun]) -> None:
    """`helm.v4.Chart` registers a chart's CRDs (Kueue's templates, JobSet's and LWS's crds/) as its own children
    unless `skipCrds`, which the program never sets: each CRD is updated with its chart and owned by one component.
    The inference extension's are the vendored group's; GKE's InferencePool CRD is no one's here."""
    sr = set_runs[name]
    owners: dict[str, list[str]] = {}
    for resource, r in sr.rendered.items():
        for o in r.objects:
            if o["kind"] == "CustomResourceDefinition":
                owners.setdefault(o["metadata"]["name"], []).append(resource)
    group = normalize(sr.run.get(CONFIG_GROUP, "inference-extension-crds").inputs)["objs"]
    for o in group:
        owners.setdefault(o["metadata"]["name"], []).append("inference-extension-crds")
    for _, o in program_objects(sr.run):
        if o["kind"] == "CustomResourceDefinition":
            owners.setdefault(o["metadata"]["name"], []).append("program")
    assert {crd: len(who) for crd, who in owners.items() if len(who) != 1} == {}
    assert "inferencepools.inference.networking.k8s.io" not in owners
    assert {c.name: c.inputs.get("skipCrds") for c in sr.run.of_type(charts.CHART) if c.inputs.get("skipCrds")} == {}
    by_chart = {crd: who[0] for crd, who in owners.items()}
    assert by_chart["workloads.kueue.x-k8s.io"] == "kueue-chart"
    assert by_chart["jobsets.jobset.x-k8s.io"] == "jobset-chart"
    assert by_chart["leaderworkersets.leaderworkerset.x-k8s.io"] == "lws-chart"


# ---------------------------------------------------------- Kueue 0.19's new checks on the program's objects


def slice_annotations(template: dict[str, Any], parallelism: int) -> dict[str, str]:
    """The slice controller's JobSet defaulting (AI-Hypercomputer/xpk@250d4b3c slice/internal/webhooks/defaults.go
    `annotatePodTemplateSpecWithTopology`, :86-110; topology.go :140-160 SliceSize): slice size = the pods of a
    sub-slice's Job, or a super-slice's pods per 4x4x4 cube (64 chips)."""
    topology = template["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"]
    dims = [int(d) for d in topology.split("x")]
    chips = dims[0] * dims[1] * dims[2]
    size = parallelism if chips < 64 else parallelism // (chips // 64)
    return {
        "kueue.x-k8s.io/podset-slice-required-topology": "sub-block or cube",
        "kueue.x-k8s.io/podset-slice-size": str(size),
    }


def tas_slice_size_problems(annotations: dict[str, str]) -> list[str]:
    """Kueue 0.19's TASValidateWorkloadSliceSize (on by default, pkg/features/kube_features.go:939-941), on the
    Workload Kueue builds from those annotations (kubernetes-sigs/kueue@v0.19.2 pkg/webhooks/workload_webhook.go
    validateTASSliceSize, :522-548)."""
    required = "kueue.x-k8s.io/podset-slice-required-topology" in annotations
    size = annotations.get("kueue.x-k8s.io/podset-slice-size")
    if required and (size is None or int(size) <= 0):
        return ["podSetSliceSize: must be set and greater than 0 with podSetSliceRequiredTopology"]
    if not required and size is not None:
        return ["podSetSliceSize: may not be set without podSetSliceRequiredTopology"]
    return []


def test_every_queued_object_passes_kueue_0_19s_slice_size_check_with_the_slice_controllers_defaults(
    codelab: Run,
) -> None:
    """Every demo JobSet (sub- and super-slicing, the codelab's mix) as the slice controller annotates it: a slice
    size above zero beside the slice topology. LeaderWorkerSets get only the required-topology annotation from it
    (xpk slice/internal/webhooks/leaderworkerset_webhook.go `annotatePodTemplateSpec`), no slice size: nothing to
    check. The slice controller refuses a TPU request that does not fill the slice exactly, which holds here too."""
    jobsets = codelab.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    assert len(jobsets) == 2
    for reg in jobsets:
        for rj in normalize(reg.plain("spec"))["replicatedJobs"]:
            job = rj["template"]["spec"]
            template = job["template"]
            annotations = slice_annotations(template, job["parallelism"])
            assert tas_slice_size_problems(annotations) == [], reg.name
            tpus = int(template["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"])
            topology = template["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"]
            chips = math.prod(int(d) for d in topology.split("x"))
            assert tpus * int(annotations["kueue.x-k8s.io/podset-slice-size"]) == min(chips, 64), reg.name
    for reg in codelab.of_type("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"):
        lwt = normalize(reg.plain("spec"))["leaderWorkerTemplate"]
        for template in (lwt["leaderTemplate"], lwt["workerTemplate"]):
            assert tas_slice_size_problems(template["metadata"].get("annotations") or {}) == [], reg.name
    # The check can fail: a slice size of 0 is refused.
    assert tas_slice_size_problems(
        {"kueue.x-k8s.io/podset-slice-required-topology": "x", "kueue.x-k8s.io/podset-slice-size": "0"}
    )


def test_a_group_size_change_is_a_new_leaderworkerset_never_an_update_kueue_0_19_refuses() -> None:
    """Kueue 0.19 refuses an update of a queued LeaderWorkerSet's group size (the change model has the fact); the
    program puts the size in the set's name, so a new size is a new set (tests/test_rollout.py has the names)."""
    from components.model.diff import engine
    from components.model.diff.facts import REJECT

    facts = [f for f in engine.facts_of("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet") or []]
    assert any(f.path == "spec.leaderWorkerTemplate.size" and f.effect == REJECT for f in facts)
    before = {
        r.name: normalize(r.plain("metadata"))["name"]
        for r in ok().of_type("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    }
    bigger = ok({f"{P}:serving": {"decode": {"topology": "2x2x4", "autoscaling": {"maxGroups": 5}}}})
    after = {
        r.name: normalize(r.plain("metadata"))["name"]
        for r in bigger.of_type("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    }
    assert after["serving-decode"] != before["serving-decode"] and after["serving-prefill"] == before["serving-prefill"]


# ------------------------------------------------------------------------- what a rollback cannot read back


def _properties(schema: Any, path: str = "") -> dict[str, tuple[str, ...]]:
    """Every property path of a schema (`[]` for list items, `{}` for map values) with its enum, if any."""
    out: dict[str, tuple[str, ...]] = {}
    if not isinstance(schema, dict):
        return out
    for key, sub in (schema.get("properties") or {}).items():
        out[f"{path}.{key}"] = tuple(sub.get("enum") or ())
        out |= _properties(sub, f"{path}.{key}")
    out |= _properties(schema.get("items"), f"{path}[]")
    out |= _properties(schema.get("additionalProperties"), path + "{}")
    return out


def _used(value: Any, path: str = "") -> dict[str, Any]:
    """Every path an object sets, with its value where it is a leaf."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out[f"{path}.{key}"] = sub
            out |= _used(sub, f"{path}.{key}")
        return out
    if isinstance(value, list):
        return {k: v for item in value for k, v in _used(item, f"{path}[]").items()}
    return {}


def test_no_object_of_the_newest_set_uses_what_only_its_crds_add(set_runs: dict[str, SetRun]) -> None:
    """What each newer CRD adds over the previous set's (new fields such as a pod's `schedulingGroup`, JobSet's
    `jobRestarts` status, new enum values such as JobSet's RestartJob actions and LWS's RecreateGroupAfterStart)
    is what an older controller cannot read back after a rollback. The program's objects use none of it, so a
    rollback loses nothing the program sends (docs/upgrades.md lists what the controllers may write there)."""
    old, new = (set_runs[s.name] for s in TESTED_SETS[-2:])
    additions: dict[tuple[str, str], set[str]] = {}
    for api_kind in {(o["apiVersion"], o["kind"]) for _, o in program_objects(new.run)}:
        if api_kind not in new.registry or api_kind not in old.registry:
            continue
        before, after = (_properties(r.schema(*api_kind)) for r in (old.registry, new.registry))
        added = {p for p in after if p not in before}
        added |= {f"{p}={v}" for p, values in after.items() if p in before for v in set(values) - set(before[p])}
        additions[api_kind] = added
    assert any(additions.values())  # the newer CRDs do add fields
    for name, obj in program_objects(new.run):
        added = additions.get((obj["apiVersion"], obj["kind"]), set())
        used = _used(obj)
        assert _hits(used, added) == [], name
    # The check can fail: a LeaderWorkerSet restarting its groups the way only LWS 0.10 knows.
    lws = next(o for _, o in program_objects(new.run) if o["kind"] == "LeaderWorkerSet")
    broken = {**lws, "spec": {**lws["spec"], "leaderWorkerTemplate": {**lws["spec"]["leaderWorkerTemplate"]}}}
    broken["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "RecreateGroupAfterStart"
    key = (lws["apiVersion"], lws["kind"])
    assert _hits(_used(broken), additions[key]) == [".spec.leaderWorkerTemplate.restartPolicy=RecreateGroupAfterStart"]


def _hits(used: dict[str, Any], added: set[str]) -> list[str]:
    return [p for p in used if p in added] + [f"{p}={v}" for p, v in used.items() if f"{p}={v}" in added]
