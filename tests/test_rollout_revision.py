"""The revision in each LWS's name: every field Kueue refuses to change in place renames the set, nothing else does,
the name fits Kueue's 39 characters, and it is the same under any interpreter hash seed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.model.serving.rollout import revision
from tests.harness import ROLES, P, Run, ok
from tests.rollout_fixtures import name


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_the_longest_configured_name_plus_its_revision_fits_kueues_39(role: str) -> None:
    # Kueue v0.17.4 site/content/en/docs/tasks/run/leaderworkerset.md, "Long LeaderWorkerSet names": the
    # pod-group-name label (63 characters) is the LWS name plus a group suffix, so "the effective LWS name
    # limit is 39 characters" (51 only with the alpha WorkloadIdentifierAnnotations gate).
    configured = f"x{role}".ljust(33, "y")
    got = name(ok({f"{P}:serving": {role: {"name": configured}}}), role)
    assert re.fullmatch(re.escape(configured) + r"-[0-9a-f]{5}", got) and len(got) == 39


NAMES_SCRIPT = """
import json
from components.cli.plan import settings_input
from components.model.config.settings import load
from components.graph_args import model_server_args, serving_role_args
from components.vllm_leaderworkersets import lws_object_name
from tests.harness import stack_file_config

settings = load(*settings_input(stack_file_config()))
model = model_server_args(settings)
role_args = {r: serving_role_args(settings, r, {}, create_first=True, wait_for=0) for r in ("prefill", "decode")}
print(json.dumps({role: lws_object_name(model, role, role_args[role]) for role in ("prefill", "decode")}))
"""


def test_the_lws_names_do_not_depend_on_the_interpreters_hash_seed(dev: Run) -> None:
    # A name that changed between two `pulumi up` runs of one configuration would replace both roles every time.
    # str hashes, set and dict orders vary with PYTHONHASHSEED (https://docs.python.org/3/using/cmdline.html
    # #envvar-PYTHONHASHSEED); the revision must not.
    registered = {role: name(dev, role) for role in ROLES}
    root = Path(__file__).resolve().parent.parent
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        out = subprocess.run(
            [sys.executable, "-c", NAMES_SCRIPT], cwd=root, env=env, capture_output=True, text=True, check=True
        )
        assert json.loads(out.stdout) == registered, f"PYTHONHASHSEED={seed}"


# Kueue v0.17.4 pkg/util/pod/pod.go, transcribed: SpecShape's keys, and ContainersShape's per container
# (resources.requests and ports). Its LWS webhook's ValidateUpdate refuses a change of any of them in place
# (pkg/controller/jobframework/validation.go ValidateImmutablePodGroupPodSpec), nothing else of the pod spec.
KUEUE_SPEC_SHAPE = {
    "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 1}]}],
    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 2}]}],
    "nodeSelector": {"k": "v"},
    "affinity": {"nodeAffinity": {}},
    "tolerations": [{"key": "t", "operator": "Exists"}],
    "runtimeClassName": "r",
    "priority": 1,
    "topologySpreadConstraints": [{"maxSkew": 1}],
    "overhead": {"cpu": "1"},
    "resourceClaims": [{"name": "x"}],
}
OUTSIDE_THE_SHAPE = {
    "serviceAccountName": "other",
    "terminationGracePeriodSeconds": 7,
    "volumes": [{"name": "v", "emptyDir": {}}],
    "priorityClassName": "p",
    "hostname": "h",
}
CONTAINER_OUTSIDE_THE_SHAPE = {
    "image": "other:1",
    "command": ["x"],
    "env": [{"name": "E", "value": "1"}],
    "readinessProbe": {"httpGet": {"path": "/", "port": 1}},
    "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
}


def _revision(spec: dict[str, Any]) -> str:
    return revision(leader_spec=spec, worker_spec=spec, size=2, replicas=4, queue="lq", priority="p")


@pytest.mark.parametrize("field", sorted(KUEUE_SPEC_SHAPE))
def test_every_field_kueue_refuses_to_change_in_place_renames_the_lws(field: str) -> None:
    base = {k: v for k, v in KUEUE_SPEC_SHAPE.items() if k != field}
    assert _revision(base) != _revision({**base, field: KUEUE_SPEC_SHAPE[field]})
    if field.endswith("ontainers"):  # within a container: its requests and its ports
        (c,) = KUEUE_SPEC_SHAPE[field]
        for changed in ({**c, "resources": {"requests": {"cpu": "2"}}}, {**c, "ports": [{"containerPort": 9}]}):
            assert _revision(KUEUE_SPEC_SHAPE) != _revision({**KUEUE_SPEC_SHAPE, field: [changed]})


def test_what_kueue_lets_change_in_place_keeps_the_name() -> None:
    rev = _revision(KUEUE_SPEC_SHAPE)
    for key, value in OUTSIDE_THE_SHAPE.items():
        assert _revision({**KUEUE_SPEC_SHAPE, key: value}) == rev, key
    for key, value in CONTAINER_OUTSIDE_THE_SHAPE.items():
        (c,) = KUEUE_SPEC_SHAPE["containers"]
        assert _revision({**KUEUE_SPEC_SHAPE, "containers": [{**c, key: value}]}) == rev, key
