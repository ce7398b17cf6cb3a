"""What the change preview reads back as the providers store it (components/model/diff/readback.py)."""

from __future__ import annotations

import copy
import json

from components.cli.snapshot import records
from components.model.diff import engine, readback
from tests.harness import stack_run


def test_every_read_back_rule_cites_its_source_and_names_a_modelled_type() -> None:
    for rule in readback.RULES:
        assert rule.source and rule.fact, rule
        assert rule.type == "kubernetes:*" or engine.facts_of(rule.type) is not None, rule.type


def test_the_dashboard_suppression_is_the_providers() -> None:
    """removeComputedKeys drops what the API added, not what it dropped: a default value sent is a diff."""
    equal = readback.SUPPRESSORS[(readback.DASHBOARD, "dashboardJson")]
    config = json.dumps({"displayName": "d", "tiles": [{"xPos": 0, "width": 6}]})
    assert not equal(json.dumps({"displayName": "d", "tiles": [{"width": 6}], "etag": "e"}), config)
    assert equal(json.dumps({"displayName": "d", "tiles": [{"xPos": 0, "width": 6}], "etag": "e"}), config)
    stored = {"type": readback.DASHBOARD, "name": "x", "inputs": {"dashboardJson": config}}
    (after,) = readback.read_back([stored])
    assert "xPos" not in after["inputs"]["dashboardJson"] and '"etag"' in after["inputs"]["dashboardJson"]


def test_the_read_back_model_catches_what_a_pool_must_declare() -> None:
    """What the TPU pools declare is exactly what GKE stores: sending a placement type, or not ignoring the SMT
    block GKE reports, is a change on every second run (a replacement, for the ForceNew SMT block)."""
    pool = next(r for r in stack_run("dev").registrations if r.name == "capacity-tpu7-pool-1")
    policy = next(r for r in stack_run("dev").registrations if r.type == readback.POLICY)
    base = records([policy, pool])
    assert {c.action for c in engine.diff(readback.read_back(base), base, readback.SUPPRESSORS).changes} == {"same"}
    typed = copy.deepcopy(base)
    typed[1]["inputs"]["placementPolicy"]["type"] = "COMPACT"
    (_, change) = engine.diff(readback.read_back(typed), typed, readback.SUPPRESSORS).changes
    assert change.action == engine.UPDATE and change.properties == ["placementPolicy.type"]
    unignored = copy.deepcopy(base)
    unignored[1]["options"]["ignoreChanges"] = []
    (_, change) = engine.diff(readback.read_back(unignored), unignored, readback.SUPPRESSORS).changes
    assert change.action == engine.REPLACE and change.delete_first
    assert "nodeConfig.advancedMachineFeatures: ForceNew block" in change.reason
