"""Unknown inputs in the change preview (components/model/diff/unknowns.py) under `replaceOnChanges`."""

from __future__ import annotations

from components.model.diff import engine
from tests.preview import record, urn

CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"


def test_an_unknown_input_under_replace_on_changes_replaces_its_owner() -> None:
    """A create-first replacement (a new name): the dependent's annotation holds the replaced object's id, the same
    string in both runs, but unknown in the preview; `replaceOnChanges: [metadata]` then replaces the dependent."""
    cm = "kubernetes:core/v1:ConfigMap"
    old_cm, new_cm = record("cm", cm, {"metadata": {"name": "a"}}), record("cm", cm, {"metadata": {"name": "b"}})
    annotated = {"metadata": {"name": "cq", "annotations": {"x": "<cm.id>"}}}
    opts = {"replaceOnChanges": ["metadata"]}
    deps = {"metadata": [urn("cm", cm)]}
    old = [old_cm, record("cq", CQ, annotated, options=opts, property_dependencies=deps)]
    new = [new_cm, record("cq", CQ, annotated, options=opts, property_dependencies=deps)]
    result = engine.diff(old, new).by_name()
    assert (result["cm"].action, result["cm"].delete_first) == (engine.REPLACE, False)
    assert result["cq"].action == engine.REPLACE and "metadata: unknown, replaceOnChanges" in result["cq"].reason
    # without replaceOnChanges the unknown is an update
    new[1] = record("cq", CQ, annotated, property_dependencies=deps)
    assert engine.diff(old, new).by_name()["cq"].action == engine.UPDATE
