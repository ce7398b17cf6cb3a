"""Serving's buckets and exposure: the weights are the user's and only read; the pods write only to an XLA cache
bucket the stack owns; no default bucket; serving stays off the internet unless a named key says otherwise."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.cli.plan import settings_input
from components.model.config.checks import ConfigError
from components.model.config.settings import load
from tests.graph_queries import lws, templates
from tests.harness import LWS, Run, assert_rejected, normalize, ok, run_program
from tests.stack_config import P, stack_file_config

BUCKET = "gcp:storage/bucket:Bucket"
MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"

# Predefined Cloud Storage roles that grant no object or bucket write
# (https://cloud.google.com/storage/docs/access-control/iam-roles: bucketViewer = storage.buckets.get/list,
# objectViewer = storage.objects.get/list, legacyObjectReader = storage.objects.get, legacyBucketReader =
# storage.buckets.get + storage.objects.list). objectUser, objectCreator, objectAdmin, admin, legacyBucketWriter and
# legacyBucketOwner all carry storage.objects.create or storage.objects.delete.
READ_ONLY_ROLES = {
    f"roles/storage.{r}" for r in ("bucketViewer", "objectViewer", "legacyObjectReader", "legacyBucketReader")
}


def members(run: Run) -> dict[str, set[str]]:
    """bucket -> roles the serving account holds on it."""
    out: dict[str, set[str]] = {}
    for reg in run.of_type(MEMBER):
        out.setdefault(reg.inputs["bucket"], set()).add(reg.inputs["role"])
    return out


def env(obj: dict[str, Any], container: str = "leader") -> dict[str, str]:
    spec = templates(obj)[container]["spec"]
    return {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}


# --------------------------------------------------------------------------------------------- the weights bucket


def test_no_stack_file_and_no_default_names_a_weights_bucket() -> None:
    for stack in ("dev", "staging", "prod"):
        raw, _ = settings_input(stack_file_config(stack, filled=False))
        assert "<REPLACE-ME" in raw["serving"]["weightsBucket"], stack
    # Serving on without a bucket: refused, naming the key.
    message = assert_rejected({f"{P}:serving": {"weightsBucket": None}}, [f"{P}:serving.weightsBucket is not set"])
    assert "required while serving.enabled is true" in message and "gemma3-weights" not in message
    # The dev stack's placeholder is one problem, not also "not set".
    run = run_program(filled=False)
    lines = [line for line in str(run.error).splitlines() if "weightsBucket" in line]
    assert len(lines) == 1 and "a placeholder left in the stack file" in lines[0], lines
    # Serving off: no bucket needed.
    off = ok({f"{P}:serving": {"enabled": False, "weightsBucket": None}})
    assert off.of_type(MEMBER) == [] and off.of_type(BUCKET) == []


@pytest.mark.parametrize(
    ("bucket", "fragment"),
    [
        ("gs://my-weights", "'my-weights'"),
        ("gs://my-weights/models", "'my-weights'"),
        ("ab", "3-63"),
        ("a" * 64, "3-63"),
        ("My-Weights", "lowercase"),
        ("-weights", "starting and ending with a letter or digit"),
        ("weights_", "starting and ending with a letter or digit"),
        ("192.168.5.4", "not an IP address"),
        ("goog-weights", '"goog"'),
        ("my-google-weights", '"google"'),
        ("my-g00gle-weights", '"google"'),
        ("a." + "b" * 64, "at most 63 between two"),
        ("weights bucket", "lowercase"),
    ],
)
def test_bad_bucket_names_are_refused_with_the_rules(bucket: str, fragment: str) -> None:
    message = assert_rejected({f"{P}:serving": {"weightsBucket": bucket}}, [f"{P}:serving.weightsBucket", fragment])
    assert "https://cloud.google.com/storage/docs/buckets#naming" in message
    # The cache bucket's key takes the same rules.
    assert_rejected({f"{P}:serving": {"xlaCacheBucket": bucket}}, [f"{P}:serving.xlaCacheBucket", fragment])


@pytest.mark.parametrize("bucket", ["abc", "a" * 63, "my_weights-2", "weights.example.com", "a." + "b" * 63])
def test_valid_bucket_names_are_accepted(bucket: str) -> None:
    settings = load(*settings_input(stack_file_config() | {f"{P}:serving": {"weightsBucket": bucket}}))
    assert settings.serving.weights_bucket == bucket


# --------------------------------------------------------------------------------------------- IAM and the cache


@pytest.fixture(scope="module", params=["dev", "staging", "prod"])
def each_stack(request: pytest.FixtureRequest) -> Run:
    return request.getfixturevalue(request.param)


def test_the_weights_are_only_read(each_stack: Run) -> None:
    granted = members(each_stack)
    assert granted["gemma3-weights"] == {"roles/storage.bucketViewer", "roles/storage.objectViewer"}
    assert granted["gemma3-weights"] <= READ_ONLY_ROLES
    for role in ("prefill", "decode"):
        obj = lws(each_stack, role)
        for container in ("leader", "worker"):
            # Nothing the pods write goes to the weights bucket.
            writes = [v for k, v in env(obj, container).items() if k.endswith("CACHE_PATH")]
            assert writes and all(not v.startswith("gs://gemma3-weights") for v in writes), writes


def test_another_weights_bucket_takes_the_read_grants_with_it() -> None:
    granted = members(ok({f"{P}:serving": {"weightsBucket": "other-weights"}}))
    assert granted["other-weights"] == {"roles/storage.bucketViewer", "roles/storage.objectViewer"}
    assert "gemma3-weights" not in granted


def test_the_cache_bucket_is_the_one_place_the_pods_write(each_stack: Run) -> None:
    (bucket,) = each_stack.of_type(BUCKET)
    inputs = bucket.inputs
    granted = members(each_stack)
    writable = {b for b, roles in granted.items() if roles - READ_ONLY_ROLES}
    assert writable == {inputs["name"]}
    assert granted[inputs["name"]] == {"roles/storage.bucketViewer", "roles/storage.objectUser"}
    for role in ("prefill", "decode"):
        obj = lws(each_stack, role)
        assert env(obj)["VLLM_XLA_CACHE_PATH"] == env(obj, "worker")["VLLM_XLA_CACHE_PATH"]
        assert env(obj)["VLLM_XLA_CACHE_PATH"] == f"gs://{inputs['name']}/xla_cache"
        # The pods start only once they may write the cache (and read the weights).
        for member in each_stack.of_type(MEMBER):
            assert each_stack.depends_on(each_stack.get(LWS, f"serving-{role}"), member), member.name
    # Each cache member names the bucket through its output, so it waits for the bucket.
    for member in each_stack.of_type(MEMBER):
        if member.inputs["bucket"] == inputs["name"]:
            assert bucket.urn in member.property_dependencies["bucket"], member.name


def test_the_cache_bucket_is_private_regional_and_disposable(dev: Run) -> None:
    bucket = dev.get(BUCKET, "serving-xla-cache")
    inputs = bucket.inputs
    assert inputs["uniformBucketLevelAccess"] is True
    assert inputs["publicAccessPrevention"] == "enforced"
    # The TPUs' region, as the API stores it (the provider's StateFunc upper-cases `location`).
    assert inputs["location"] == "US-CENTRAL1" == inputs["location"].upper()
    assert inputs["project"] == "my-tpu-project"
    # destroy deletes the cache's compiled programs with the bucket; no soft-deleted copies are billed for a week.
    assert inputs["forceDestroy"] is True
    assert inputs["softDeletePolicy"] == {"retentionDurationSeconds": 0}
    # A fixed name: a replacement (location or project, ForceNew) must delete the old bucket first.
    assert bucket.options.get("deleteBeforeReplace") is True
    # The Cloud Storage API is enabled before the bucket is created, and kept on destroy like every API.
    api = dev.get("gcp:projects/service:Service", "project-storage")
    assert api.inputs["service"] == "storage.googleapis.com" and api.inputs["disableOnDestroy"] is False
    assert api.urn in bucket.dependencies


def test_the_derived_cache_name_is_valid_unique_and_stable() -> None:
    def name(overrides: dict[str, Any]) -> str:  # the same on a second run: test_stacks (a year from now)
        return ok(overrides).get(BUCKET, "serving-xla-cache").inputs["name"]

    dev = name({})
    other_cluster = name({f"{P}:cluster": {"name": "another-cluster"}})
    other_project = name({"gcp:project": "another-tpu-project"})
    longest = name({"gcp:project": "p" * 30, f"{P}:cluster": {"name": "c" * 40}})
    assert len({dev, other_cluster, other_project, longest}) == 4
    for bucket in (dev, other_cluster, other_project, longest):
        assert 3 <= len(bucket) <= 63 and bucket.startswith("xla-cache-")
        # Bucket names are public: no project ID in them (https://cloud.google.com/storage/docs/buckets).
        assert "my-tpu-project" not in bucket and "another" not in bucket
    assert name({f"{P}:serving": {"xlaCacheBucket": "my-xla-cache"}}) == "my-xla-cache"


# --------------------------------------------------------------------------------------------- exposure


def test_serving_is_internal_by_default(dev: Run) -> None:
    gateway = normalize(dev.get(GATEWAY, "serving-gateway").plain())
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-rilb"
    # (dev's control plane is open on purpose, with a warning of its own: tests/test_cluster_control_plane.py)
    assert not [m for lvl, m in dev.logs if lvl == "warn" and "serving.gateway" in m]


EXTERNAL = ["gke-l7-regional-external-managed", "gke-l7-global-external-managed"]


@pytest.mark.parametrize("class_name", EXTERNAL)
def test_an_external_gateway_class_needs_the_named_opt_in(class_name: str) -> None:
    message = assert_rejected(
        {f"{P}:serving": {"gateway": {"className": class_name}}},
        [f"{P}:serving.gateway.className = '{class_name}'", "serving.gateway.exposeToInternet: true", "internet"],
    )
    assert "(1 problem)" in message
    run = ok({f"{P}:serving": {"gateway": {"className": class_name, "exposeToInternet": True}}})
    assert normalize(run.get(GATEWAY, "serving-gateway").plain())["spec"]["gatewayClassName"] == class_name
    (warning,) = [m for lvl, m in run.logs if lvl == "warn" and "serving.gateway" in m and "internet" in m]
    assert class_name in warning and "llm-d-inference-gateway" in warning and "Qwen/Qwen3.5-397B-A17B-FP8" in warning
    assert "port 80" in warning and "no authentication" in warning


@pytest.mark.parametrize(
    ("serving", "fragments"),
    [
        (
            {"gateway": {"className": "gke-l7-rilb-mc"}},
            ["serving.gateway.className = 'gke-l7-rilb-mc'", "single-cluster"],
        ),
        ({"gateway": {"className": "istio"}}, ["serving.gateway.className = 'istio'", "gke-l7-rilb (internal)"]),
        (
            {"gateway": {"className": "gke-l7-gxlb", "exposeToInternet": True}},
            ["serving.gateway.className = 'gke-l7-gxlb'", "classic load balancer", "endpoint picker"],
        ),
        (
            {"gateway": {"exposeToInternet": True}},
            ["serving.gateway.exposeToInternet = true", "internal class gke-l7-rilb"],
        ),
        (
            {"weightsBucket": "shared-bucket", "xlaCacheBucket": "shared-bucket"},
            ["serving.xlaCacheBucket = 'shared-bucket'", "other than serving.weightsBucket"],
        ),
    ],
    ids=["multi-cluster-class", "not-a-gke-class", "classic-balancer", "opt-in-on-internal", "cache-is-the-weights"],
)
def test_other_serving_settings_are_refused(serving: dict[str, Any], fragments: list[str]) -> None:
    assert_rejected({f"{P}:serving": serving}, [f"{P}:{f}" if f.startswith("serving") else f for f in fragments])


def test_a_disabled_serving_section_does_not_warn_about_exposure() -> None:
    raw, project = settings_input(stack_file_config())
    raw = copy.deepcopy(raw)
    raw["serving"] |= {"enabled": False, "gateway": {"className": EXTERNAL[0], "exposeToInternet": True}}
    assert [w for w in load(raw, project).warnings() if "serving" in w] == []
    raw["serving"]["gateway"] = {"className": EXTERNAL[0]}
    # The opt-in is checked even while serving is off: turning serving on later must not expose it silently.
    with pytest.raises(ConfigError, match="exposeToInternet"):
        load(raw, project)


def test_the_new_keys_report_their_problems_together() -> None:
    """No bucket, an external class without the opt-in, alerts to nobody: three lines of one error."""
    message = assert_rejected(
        {
            f"{P}:serving": {"weightsBucket": None, "gateway": {"className": EXTERNAL[0]}},
            f"{P}:observability": {"notifyNobody": None},
        },
        [
            f"{P}:serving.weightsBucket is not set",
            f"{P}:serving.gateway.className = '{EXTERNAL[0]}'",
            f"{P}:observability.notificationChannels = []",
        ],
    )
    assert message.startswith("invalid stack configuration (3 problems)")
