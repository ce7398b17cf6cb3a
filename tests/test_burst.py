"""Elastic serving's settings and model: the bounds refused before anything is registered, the derived burst
priority, the slots' names and the pacing derived from the settings that hold its parts
(components/model/config/autoscaling_settings.py, components/model/serving/burst.py)."""

from __future__ import annotations

import pytest
import yaml

from components.model.config.checks import LWS_NAME_MAX
from components.model.serving import burst
from components.model.serving.burst import BurstPriorityError, burst_priority, pacing, slot_names
from tests import upstream
from tests.planner_fixtures import both, elastic, settings
from tests.stack_config import BASE, P, problems

PRIORITIES = {"low-priority-1000": 1000, "medium-priority-2000": 2000, "high-priority-3000": 3000}


# --- the priority -------------------------------------------------------------------------------------------------


def test_the_burst_priority_lies_strictly_between_the_floors_and_what_runs_below_them() -> None:
    p = burst_priority(PRIORITIES, ["high-priority-3000", "high-priority-3000"])
    assert (p.name, p.value) == ("burst-priority-2500", 2500)
    # Below the lowest floor: a role at medium makes the floors' bound 2000, and only low runs below it.
    assert burst_priority(PRIORITIES, ["high-priority-3000", "medium-priority-2000"]).value == 1500
    # Nothing below the floors: just under them.
    assert burst_priority({"only": 7}, ["only"]).value == 6
    # A gap of 2 is the narrowest that has a value strictly inside.
    assert burst_priority({"a": 10, "b": 12}, ["b"]).value == 11


def test_no_room_between_the_floors_and_the_next_priority_is_refused_naming_kueue_priorities() -> None:
    with pytest.raises(BurstPriorityError, match="leave a gap of at least 2"):
        burst_priority({"a": 2999, "b": 3000}, ["b"])
    priorities = {**PRIORITIES, "medium-priority-2000": 2999}
    found = problems({**BASE, "kueue": {"priorities": priorities}, **elastic("decode", 6)})
    assert len(found) == 1 and found[0].startswith(f"{P}:kueue.priorities = "), found
    assert "between the serving floors' priority (3000) and the next one below it (2999)" in found[0]


def test_a_configured_class_cannot_take_the_derived_name_with_another_value() -> None:
    with pytest.raises(BurstPriorityError, match="burst-priority-2500 is the burst slots' derived"):
        burst_priority({**PRIORITIES, "burst-priority-2500": 100}, ["high-priority-3000"])
    # The same name with the same value is the same class.
    same = {**PRIORITIES, "burst-priority-2500": 2500}
    assert burst_priority(same, ["high-priority-3000"]).value == 2750  # 2500 now runs below the floors


def test_without_autoscaling_there_is_no_burst_priority_and_no_slot() -> None:
    s = settings()
    assert s.burst_slots() == {} and s.burst_priority() is None
    assert settings(elastic("decode", 6), {"serving": {"enabled": False}}).burst_slots() == {}


# --- the bounds ---------------------------------------------------------------------------------------------------


def test_max_groups_is_required_and_above_the_floor_when_autoscaling_is_on() -> None:
    found = problems({**BASE, **elastic("decode", None)})
    assert found == [
        f"{P}:serving.decode.autoscaling.maxGroups is not set: required with autoscaling.enabled: the role's groups "
        "at most, more than its replicas (4); the groups above the replicas are its burst slots"
    ]
    found = problems({**BASE, **elastic("prefill", 4)})
    assert len(found) == 1 and found[0].startswith(f"{P}:serving.prefill.autoscaling.maxGroups = 4: more than")
    # Off, maxGroups is only kept: no bound applies.
    assert settings({"serving": {"decode": {"autoscaling": {"maxGroups": 2}}}}).burst_slots() == {}


def test_each_roles_slots_fit_the_quota_left_by_what_a_slot_cannot_preempt() -> None:
    # 2 cubes = 128 chips; the floors hold 4 + 4 groups of 8 chips; the demos run below the burst priority.
    assert settings(elastic("decode", 12)).burst_slots() == {"decode": 8}
    found = problems({**BASE, **elastic("decode", 13)})
    assert len(found) == 1, found
    assert found[0].startswith(f"{P}:serving.decode.autoscaling.maxGroups = 13: at most 12: the TPU quota (128 chips")
    assert "(serving.prefill 32, serving.decode 32)" in found[0]
    # A demo at the floors' priority is room a slot cannot take: 48 chips fewer, 6 slots fewer.
    demo_high = {"demos": {"subslicing": {"priority": "high-priority-3000"}}}
    found = problems({**BASE, **demo_high, **elastic("decode", 7)})
    assert len(found) == 1 and "at most 6:" in found[0] and "demos.subslicing 48" in found[0], found
    # An explicit quota bounds instead of the cubes.
    found = problems({**BASE, "kueue": {"tpuQuota": 80}, **elastic("decode", 7)})
    assert len(found) == 1 and "at most 6: the TPU quota (80 chips, kueue.tpuQuota)" in found[0], found


def test_both_roles_slots_together_fit_the_quota() -> None:
    assert settings(both(8, 8)).burst_slots() == {"prefill": 4, "decode": 4}
    found = problems({**BASE, **both(8, 9)})
    assert len(found) == 1, found
    assert found[0].startswith(f"{P}:serving.decode.autoscaling.maxGroups = 9: both roles' burst slots together")


def test_autoscaling_without_keda_or_the_scrapes_its_signal_reads_is_refused_in_one_error() -> None:
    no_keda = {"addons": {"keda": {"enabled": False}}}
    found = problems({**BASE, **both(6, 6), **no_keda, "observability": {"scraping": False}})
    assert found == [
        f"{P}:addons.keda.enabled = false: true while serving.prefill.autoscaling.enabled and "
        "serving.decode.autoscaling.enabled are true: KEDA's operator turns the burst slots on and off (or set "
        "autoscaling.enabled to false)",
        f"{P}:observability.scraping = false: true while serving.prefill.autoscaling.enabled and "
        "serving.decode.autoscaling.enabled are true: the burst slots' signal is the scraped vLLM and router metrics",
    ]
    found = problems({**BASE, **elastic("decode", 6), "observability": {"enabled": False}})
    assert [f.split(" = ")[0] for f in found] == [f"{P}:observability.enabled"]
    # Off, or with serving off, neither is needed.
    settings({"serving": {"enabled": False}}, elastic("decode", 6), no_keda)
    settings({"serving": {"decode": {"autoscaling": {"maxGroups": 6}}}})


def test_model_load_within_the_startup_budget() -> None:
    found = problems({**BASE, "serving": {"modelLoadSeconds": 14401}})
    assert found == [
        f"{P}:serving.modelLoadSeconds = 14401: at most serving.startupTimeoutSeconds (14400): a leader still loading "
        "past its startup budget is restarted by the kubelet"
    ]


# --- names --------------------------------------------------------------------------------------------------------


def test_slot_names_are_as_long_as_the_floors_distinct_and_roll_with_the_floor() -> None:
    name = "kueue-vllm-prefill-model-streamer"  # the default, the longest the 39-character bound leaves
    names = slot_names(name, "ab12c", 8, "burst-priority-2500")
    assert len(set(names)) == 8 and f"{name}-ab12c" not in names
    assert all(len(n) == len(name) + 6 <= LWS_NAME_MAX and n.startswith(f"{name}-") for n in names)
    assert slot_names(name, "ab12c", 8, "burst-priority-2500") == names  # stable
    assert set(slot_names(name, "ab12d", 8, "burst-priority-2500")).isdisjoint(names)  # a new floor revision
    assert set(slot_names(name, "ab12c", 8, "burst-priority-2750")).isdisjoint(names)  # a new burst priority
    assert slot_names(name, "ab12c", 3, "burst-priority-2500") == names[:3]  # more slots add names


def test_a_slot_revision_that_collides_is_hashed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    real = burst.slot_revision
    monkeypatch.setattr(
        burst, "slot_revision", lambda floor, slot, p: "aaaaa" if "#" not in floor else real(floor, slot, p)
    )
    names = burst.slot_names("n", "aaaaa", 2, "p")
    assert "n-aaaaa" not in names and len(set(names)) == 2


# --- pacing -------------------------------------------------------------------------------------------------------


def test_the_cooldown_covers_the_grace_period_formation_and_load_and_follows_them() -> None:
    p = pacing(settings())
    assert p.slot_start_seconds == burst.SLICE_ACTIVATION_TIMEOUT_S + 1200
    assert p.cooldown_seconds == 360 + p.slot_start_seconds
    q = pacing(settings({"serving": {"terminationGracePeriodSeconds": 600, "modelLoadSeconds": 3000}}))
    assert q.cooldown_seconds == 600 + burst.SLICE_ACTIVATION_TIMEOUT_S + 3000


def test_the_chain_and_the_rearm_follow_the_scrape_interval() -> None:
    p = pacing(settings())  # 30 s
    assert (p.polling_seconds, p.fresh_seconds, p.chain_hold_seconds) == (30, 60, 90)
    # A draining leader reads 0 for at most the grace period (360 s) plus two scrapes; the rearm outlasts that
    # window (and the Slices' release, 60 + 120 s), so a restarted slot's window holds none of its earlier run.
    assert (p.loading_window_seconds, p.rearm_seconds) == (420, 420)
    q = pacing(settings({"observability": {"scrapeInterval": "2m"}}))
    assert (q.polling_seconds, q.fresh_seconds, q.chain_hold_seconds) == (30, 240, 270)
    assert (q.loading_window_seconds, q.rearm_seconds) == (600, 600)


# --- facts the slots stand on, from the pinned upstream files -----------------------------------------------------

LWS_CRDS = (
    "charts/lws-v0.8.0/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    "charts/lws-v0.10.0/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
)


@pytest.mark.parametrize("path", LWS_CRDS)
def test_a_leaderworkerset_scales_through_its_scale_subresource_on_spec_replicas_down_to_zero(path: str) -> None:
    base = upstream.require(path)
    crd = yaml.safe_load((base / path).read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["storage"]]
    scale = version["subresources"]["scale"]
    assert (scale["specReplicasPath"], scale["statusReplicasPath"]) == (".spec.replicas", ".status.replicas")
    replicas = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]
    assert replicas["type"] == "integer" and replicas.get("minimum", 0) == 0  # 0 is valid: a slot that is off
    assert (
        "On scale down, the leader pod as well as the workers statefulset will be deleted." in replicas["description"]
    )
