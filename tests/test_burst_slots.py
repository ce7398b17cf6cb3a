"""Elastic serving's objects (components/burst_slots.py): each slot its floor at 0 groups under the burst priority,
scaled by one ScaledObject of its own; no autoscaler on a multi-group set in any stack; every object valid against
the pinned CRDs; KEDA's writes left alone by the next `up`; a burst setting that moves no floor; slots covered by
the namespace's NetworkPolicies and selected by the pool and the leaders' scrape like the floors' leaders."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import burst_slots
from components.cli import charts, diff
from components.cli.mocks import FakeReservation, healthy_sub_block
from components.cli.render import redact
from components.model.addons.keda import KEDA_API, SCALED_FIELD, SLOT_REPLICAS
from components.model.diff import engine, paths
from components.model.keys import BURST_SLOT_LABEL, PRIORITY_LABEL, WORKER_INDEX_LABEL
from components.model.observability.burst_signals import SLOT_TARGET_LABEL, BurstSignals
from components.model.serving.burst import slot_names
from components.vllm_leaderworkersets import leader_selector
from tests import cel_rules, conformance, upstream
from tests.graph_queries import label_selector_matches, tpu_pools
from tests.harness import LWS, Mocks, Run, normalize, ok, preview
from tests.network_policy import Source, allowed
from tests.stack_config import CODELAB_MIX, FIXED_SERVING, P, dev_settings, merge, set_arguments

SCALED_OBJECT = f"kubernetes:{KEDA_API}:ScaledObject"
TRIGGER_AUTHENTICATION = f"kubernetes:{KEDA_API}:TriggerAuthentication"
PM = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
ROLES = ("prefill", "decode")


def slots_of(run: Run, role: str) -> list[Any]:
    return sorted((w for w in run.of_type(LWS) if w.name.startswith(f"burst-{role}-")), key=lambda w: w.name)


def obj(reg: Any) -> dict[str, Any]:
    return normalize(reg.plain())


def template_paths(label: str) -> list[str]:
    return [f'spec.leaderWorkerTemplate.{t}.metadata.labels["{label}"]' for t in ("leaderTemplate", "workerTemplate")]


# ------------------------------------------------------------------------------------------------ the slots


def test_each_slot_is_its_floor_at_0_groups_with_the_burst_priority_and_its_number(dev: Run) -> None:
    s = dev_settings()
    burst = s.burst_priority()
    assert burst is not None and s.burst_slots() == {"prefill": 2, "decode": 2}
    for role in ROLES:
        floor_reg = dev.get(LWS, f"serving-{role}")
        floor = obj(floor_reg)
        name, rev = s.lws_name(role), floor["metadata"]["name"].rsplit("-", 1)[1]
        slots = slots_of(dev, role)
        assert [obj(r)["metadata"]["name"] for r in slots] == slot_names(name, rev, 2, burst.name)
        for k, reg in enumerate(slots, start=1):
            slot = obj(reg)
            # Exactly these differ from the floor: the name, the priority, the slot's label, the groups.
            differ = {paths.show(p) for p in paths.changed(floor, slot)}
            label = f'metadata.labels["{BURST_SLOT_LABEL}"]'
            assert differ == {
                "metadata.name",
                f'metadata.labels["{PRIORITY_LABEL}"]',
                label,
                *template_paths(BURST_SLOT_LABEL),
                "spec.replicas",
            }
            assert slot["metadata"]["labels"][PRIORITY_LABEL] == burst.name and slot["spec"]["replicas"] == 0
            assert slot["metadata"]["labels"][BURST_SLOT_LABEL] == str(k)
            # KEDA owns the groups after the create; a new revision is created before the old one goes.
            assert reg.options["ignoreChanges"] == [SCALED_FIELD] and not reg.options["deleteBeforeReplace"]
            assert reg.options["customTimeouts"] == floor_reg.options["customTimeouts"]
            # It waits for what the floor waits for (the LWS controller, the Kueue objects, the pools, the gates).
            assert set(floor_reg.dependencies) - {floor_reg.parent} <= set(reg.dependencies), reg.name
    assert "ignoreChanges" not in {k for k, v in dev.get(LWS, "serving-decode").options.items() if v}


def test_one_scaledobject_per_slot_from_the_slots_own_query_and_pacing(dev: Run) -> None:
    s, signals = dev_settings(), BurstSignals(dev_settings())
    (auth,) = dev.of_type(TRIGGER_AUTHENTICATION)
    assert obj(auth)["spec"] == {"podIdentity": {"provider": "gcp"}}
    scalers = {r.name: r for r in dev.of_type(SCALED_OBJECT)}
    for role in ROLES:
        for k, slot in enumerate(slots_of(dev, role), start=1):
            so = obj(scalers[f"{slot.name}-scaler"])
            name = obj(slot)["metadata"]["name"]
            assert so["metadata"]["name"] == name and so["spec"]["scaleTargetRef"]["name"] == name
            (trigger,) = so["spec"]["triggers"]
            assert trigger["metadata"]["query"] == signals.slot_query(role, k)
            assert trigger["authenticationRef"] == {"name": obj(auth)["metadata"]["name"]}
            assert trigger["metadata"]["serverAddress"].endswith(f"/projects/{s.project}/location/global/prometheus")
            assert (so["spec"]["cooldownPeriod"], so["spec"]["pollingInterval"]) == (
                signals.pacing.cooldown_seconds,
                signals.pacing.polling_seconds,
            )
            assert "fallback" not in so["spec"]  # on an error KEDA holds the last scale; a fallback would turn all on
            assert dev.depends_on(scalers[f"{slot.name}-scaler"], slot)


# One run per stack file and per opt-in shape that has slots: nowhere may an autoscaler reach a multi-group set.
SHAPES = {
    "dev": {},
    "staging": None,
    "prod": None,
    "codelab": CODELAB_MIX,
    "decode only, larger slots": merge(
        FIXED_SERVING,
        {
            f"{P}:tpu": {"cubes": 4},
            f"{P}:addons": {"keda": {"enabled": True}},
            f"{P}:serving": {"decode": {"topology": "2x2x4", "replicas": 2, "autoscaling": {"enabled": True}}},
        },
    ),
}
SHAPES["decode only, larger slots"][f"{P}:serving"]["decode"]["autoscaling"]["maxGroups"] = 5


@pytest.mark.parametrize("shape", list(SHAPES))
def test_no_autoscaler_targets_a_multi_group_leaderworkerset(shape: str) -> None:
    """A set of several groups scaled down keeps the removed group's Slices while its other groups run (the slice
    controller waits for every pod of the set): only a slot, at most one group, is ever scaled."""
    run = ok(stack=shape) if SHAPES[shape] is None else ok(SHAPES[shape])
    sets = {obj(r)["metadata"]["name"]: obj(r) for r in run.of_type(LWS)}
    scalers = [obj(r) for r in run.of_type(SCALED_OBJECT)]
    slots = [lws for lws in sets.values() if BURST_SLOT_LABEL in lws["metadata"]["labels"]]
    targets = [so["spec"]["scaleTargetRef"] for so in scalers]
    assert sorted(t["name"] for t in targets) == sorted(lws["metadata"]["name"] for lws in slots)  # one each
    for so, target in zip(scalers, targets, strict=True):
        assert target["kind"] == "LeaderWorkerSet" and target["name"] in sets
        assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == SLOT_REPLICAS == (0, 1)
        assert sets[target["name"]]["spec"]["replicas"] <= 1
    assert all(lws["spec"]["replicas"] > 1 for lws in sets.values() if lws not in slots) or shape == "prod"
    assert not any(r.type.startswith("kubernetes:autoscaling/") for r in run.registrations)  # no HPA of our own
    expected = {"dev": 4, "staging": 8, "prod": 0, "codelab": 4, "decode only, larger slots": 3}[shape]
    assert len(slots) == expected


def test_the_burst_priority_class_exists_only_with_slots(dev: Run, prod: Run) -> None:
    classes = {
        obj(r)["metadata"]["name"]: obj(r)["value"]
        for r in dev.of_type("kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass")
    }
    assert classes["burst-priority-2500"] == 2500  # between the floors' 3000 and the demo's 2000
    assert [obj(r)["metadata"]["name"] for r in prod.registrations if "burst" in r.name] == []
    floor_labels = {obj(dev.get(LWS, f"serving-{role}"))["metadata"]["labels"][PRIORITY_LABEL] for role in ROLES}
    assert floor_labels == {"high-priority-3000"}


# ----------------------------------------------------------------------------------------- the pinned CRDs


def test_the_slots_pass_both_pinned_lws_crds_and_the_keda_objects_kedas_own(dev: Run, tmp_path: Path) -> None:
    """LWS v0.8.0 (staging and prod) and v0.10.0 (dev), strictly and through their CEL rules; the ScaledObjects
    and the TriggerAuthentication against the CRDs KEDA's chart installs, rendered by Helm's engine."""
    newer = "charts/lws-v0.10.0/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
    base = upstream.require("charts", newer, *conformance.CRD_DIRS)
    (release,) = [r for r in charts.releases(dev.registrations, redact) if r.resource == "keda-chart"]
    crds = [o for o in charts.render_release(release).objects if o["kind"] == "CustomResourceDefinition"]
    (tmp_path / "keda.yaml").write_text(yaml.safe_dump_all(crds))
    (tmp_path / "lws").mkdir()
    (tmp_path / "lws" / "lws.yaml").write_text((base / newer).read_text())
    slots = [(r.name, obj(r)) for role in ROLES for r in slots_of(dev, role)]
    keda = [(r.name, obj(r)) for r in [*dev.of_type(SCALED_OBJECT), *dev.of_type(TRIGGER_AUTHENTICATION)]]
    for registry in (conformance.require_registry(), conformance.SchemaRegistry(tmp_path / "lws")):
        failures, rejected, _, _ = conformance.check(slots, registry)
        assert (failures, rejected) == ({}, {})
    failures, rejected, _, passed = conformance.check(keda, conformance.SchemaRegistry(tmp_path))
    assert (failures, rejected) == ({}, {}) and "ScaledObject" in passed  # its CEL rule ran
    # Not vacuous: the same registries refuse a slot with negative groups and a ScaledObject above its maximum.
    broken = json.loads(json.dumps(slots[0][1]))
    broken["spec"]["replicas"] = -1
    assert conformance.validate(broken, conformance.SchemaRegistry(tmp_path / "lws")) != []
    inverted = json.loads(json.dumps(keda[0][1] if keda[0][1]["kind"] == "ScaledObject" else keda[1][1]))
    inverted["spec"]["minReplicaCount"] = 2
    schema = conformance.SchemaRegistry(tmp_path).schema(KEDA_API, "ScaledObject")
    assert cel_rules.rejections(cel_rules.evaluate(inverted, schema))


# ---------------------------------------------------------------------------------- what the next `up` does


def second_run(monkeypatch: pytest.MonkeyPatch | None = None) -> dict[str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = diff.main(["--stack", "dev", *set_arguments("dev"), "--second-run", "--json"], out, err)
    assert code == 0, err.getvalue()
    return {c["name"]: c["action"] for c in json.loads(out.getvalue())["changes"] if c["action"] != "same"}


def test_the_second_up_leaves_a_slot_kedas_turned_on_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The change model reads every slot back at 1 group (components/model/diff/readback.py, KEDA's write through
    /scale) against the program's 0: ignored, nothing changes. Without the ignore, the update would turn every
    slot off under its load."""
    assert second_run() == {}
    monkeypatch.setattr(burst_slots, "SCALED_FIELD", "metadata.annotations.unrelated")
    assert second_run() == {f"burst-{r}-{k}": "update" for r in ROLES for k in (1, 2)}


BURST_CHANGES = {
    "maxGroups": {"decode": {"autoscaling": {"maxGroups": 5}}},
    "target": {"decode": {"autoscaling": {"kvCacheUsage": 0.7}}},
    "backlog": {"prefill": {"autoscaling": {"backlogSeconds": 2.5}}},
    "model load": {"modelLoadSeconds": 1800},
    "off": {"decode": {"autoscaling": {"enabled": False}}},
}


@pytest.mark.parametrize("change", list(BURST_CHANGES))
def test_a_burst_setting_leaves_the_floors_and_their_patches_untouched(dev: Run, change: str) -> None:
    after = ok({f"{P}:serving": BURST_CHANGES[change]})
    result = preview(dev, after).by_name()
    for role in ROLES:
        assert result[f"serving-{role}"].action == engine.SAME, (change, result[f"serving-{role}"])
        (patch,) = [c for n, c in result.items() if n.startswith(f"serving-{role}-ready-")]
        assert patch.action == engine.SAME
    assert not [c for c in result.values() if c.action == engine.REJECTED]
    moved = {n for n, c in result.items() if c.action != engine.SAME}
    assert moved and all(n.startswith(("burst-", "observability-")) for n in moved), moved


def test_the_diff_command_shows_a_burst_change_on_the_slots_alone() -> None:
    """`python -m components diff --change`, as docs/changes.md's rows show it."""
    from tests.preview import preview as cli

    code, result = cli("dev", "--change", "serving.decode.autoscaling.maxGroups=5")
    actions = {c["name"]: c["action"] for c in result["changes"] if c["action"] != "same"}
    assert (code, actions) == (
        0,
        {"burst-decode-2": "delete", "burst-decode-2-scaler": "delete", "observability-dashboard": "update"},
    )


def test_a_new_floor_revision_replaces_its_slots_create_first_and_their_queries_read_either_revision(dev: Run) -> None:
    after = ok({f"{P}:serving": {"decode": {"replicas": 3}}})
    result = preview(dev, after).by_name()
    for k in (1, 2):
        slot, scaler = result[f"burst-decode-{k}"], result[f"burst-decode-{k}-scaler"]
        assert (slot.action, slot.delete_first) == (engine.REPLACE, False), slot
        assert scaler.action == engine.REPLACE, scaler
        assert obj(after.get(LWS, f"burst-decode-{k}"))["spec"]["replicas"] == 0
    assert result["burst-prefill-1"].action == engine.SAME
    # Slot k of the new revision reads slot k's leaders by number, whatever set made them: it turns on at its first
    # poll while the old one serves (components/model/observability/burst_signals.py).
    for reg in after.of_type(SCALED_OBJECT):
        query = obj(reg)["spec"]["triggers"][0]["metadata"]["query"]
        assert obj(reg)["metadata"]["name"] not in query and f'{SLOT_TARGET_LABEL}="' in query


# ------------------------------------------------------------------------- who reaches and selects a slot


def test_the_namespaces_network_policies_cover_the_slots_as_the_floors(dev: Run) -> None:
    """Without a rule of their own: every connection to or from a slot's pod is decided as for its floor's."""
    policies = [obj(r) for r in dev.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")]
    ns = dev_settings().kueue.namespace

    def pods(reg: Any) -> list[dict[str, str]]:
        lwt = obj(reg)["spec"]["leaderWorkerTemplate"]
        return [
            {**lwt[t]["metadata"]["labels"], WORKER_INDEX_LABEL: i}
            for t, i in (("leaderTemplate", "0"), ("workerTemplate", "1"))
        ]

    floors = {role: pods(dev.get(LWS, f"serving-{role}")) for role in ROLES}
    slots = {role: pods(slots_of(dev, role)[1]) for role in ROLES}
    others = [
        Source({"app.kubernetes.io/name": "collector"}, "gmp-system"),
        Source({"llm-d-router-gateway": "pd-disaggregation-epp"}, ns),
        Source(ip="35.191.3.4"),
        Source(ip="172.16.0.5"),
        Source({"app": "anything"}, ns),
        Source({"app": "anything"}, "default"),
    ]
    ports = (8000, 8200, 9100, 9600, 6379, 45000)
    checked = 0
    for role in ROLES:
        for floor_pod, slot_pod in zip(floors[role], slots[role], strict=True):
            peers = [*(Source(p, ns) for r in ROLES for p in floors[r]), *others]
            for source in peers:
                for port in ports:
                    assert allowed(policies, ns, slot_pod, source, port) == allowed(
                        policies, ns, floor_pod, source, port
                    ), (role, slot_pod, source, port)
                    checked += 1
            for other in ROLES:  # and the slot as a source, towards the floors of both roles
                for target in floors[other]:
                    for port in ports:
                        assert allowed(policies, ns, target, Source(slot_pod, ns), port) == allowed(
                            policies, ns, target, Source(floor_pod, ns), port
                        )
    assert checked >= 240  # 2 roles x 2 pods x 10 peers x 6 ports


def test_slot_leaders_join_the_pool_and_the_leaders_scrape_with_their_number(dev: Run, prod: Run) -> None:
    s = dev_settings()
    for role in ROLES:
        leader = obj(slots_of(dev, role)[0])["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]
        leader = {**leader, WORKER_INDEX_LABEL: "0"}
        assert label_selector_matches({"matchLabels": leader_selector(s.serving.guide)}, leader)
        pm = obj(dev.get(PM, f"observability-{role}-leaders"))
        assert label_selector_matches(pm["spec"]["selector"], leader)
        assert {"from": BURST_SLOT_LABEL, "to": SLOT_TARGET_LABEL} in pm["spec"]["targetLabels"]["fromPod"]
        # Without slots the scrape is as it was (existing stacks see no change).
        assert "targetLabels" not in obj(prod.get(PM, f"observability-{role}-leaders"))["spec"]


def test_keda_operators_metrics_are_scraped_for_the_alerts(dev: Run) -> None:
    pm = obj(dev.get(PM, "observability-keda-operator"))
    assert pm["metadata"]["namespace"] == "keda" and pm["spec"]["endpoints"][0]["port"] == "metrics"
    keda = dev.get("kubernetes:helm.sh/v4:Chart", "keda-chart")
    assert keda.inputs["values"]["prometheus"] == {"operator": {"enabled": True}}
    assert dev.depends_on(dev.get(PM, "observability-keda-operator"), keda)


def test_while_a_cube_is_unusable_slots_that_no_longer_fit_are_a_warning_not_a_refusal() -> None:
    """Refusing would hold up the preview of the very change that moves the cube (its sub-block warning)."""

    def four() -> FakeReservation:
        return FakeReservation({f"sb-{i}": healthy_sub_block(f"sb-{i}") for i in range(1, 5)})

    first = ok(mocks=Mocks(reservation=four()))
    degraded = four()  # both pools run, the sub-block under the first turns DEGRADED: one usable cube
    degraded.sub_blocks["sb-1"].update(
        inUseCount=16, healthInfos=[{"healthStatus": "DEGRADED", "degradedHostCount": 2}]
    )
    degraded.sub_blocks["sb-2"]["inUseCount"] = 16
    degraded.cluster_pools = [
        {
            "name": r.inputs["name"],
            "nodeConfigs": [{"reservationAffinities": [r.inputs["nodeConfig"]["reservationAffinity"]]}],
        }
        for r in tpu_pools(first)
    ]
    run = ok(mocks=Mocks(reservation=degraded))
    assert run.outputs["capacityPlan"]["totals"]["cubes"] == 1
    warnings = [m for level, m in run.logs if level == "warn"]
    assert any("find no 2x2x2 partition" in w and "on unusable sub-blocks" in w for w in warnings), warnings
