"""The model's weights where the serving pods read them: the snapshot from `serving.modelPath`, the preview's listing
of it, the leaders' check before vLLM starts, and the docs' preparation steps."""

from __future__ import annotations

import re
import shlex
import urllib.error
from typing import Any

import pytest

from components.model.serving import weights
from tests.graph_queries import lws, vllm_leader
from tests.harness import Mocks, Run, assert_rejected, ok, run_program, warnings_of
from tests.stack_config import P
from tests.weights_fixtures import JOB, ON, defaults, dev_serving, script

# ------------------------------------------------------------------------------------------------ the layout


def test_the_snapshot_is_read_from_model_path_and_model() -> None:
    s = defaults()
    snap = weights.snapshot("bbb", s.model, s.model_path)
    assert snap is not None
    assert (snap.repo, snap.cache, snap.prefix) == (s.model, "models--Qwen--Qwen3.5-397B-A17B-FP8", s.model_path)
    assert re.fullmatch(r"[0-9a-f]{40}", snap.revision) and s.model_path.endswith(snap.revision)
    # A folder in front is fine; another model's folder or a branch name is not a pinned snapshot of this one.
    assert weights.snapshot("bbb", s.model, f"hf/{s.model_path}") is not None
    assert weights.snapshot("bbb", "Qwen/Other", s.model_path) is None
    assert weights.snapshot("bbb", s.model, "models--Qwen--Qwen3.5-397B-A17B-FP8/snapshots/main") is None


def test_the_download_needs_the_cache_layout_and_names_the_key() -> None:
    assert_rejected(
        {f"{P}:serving": {"weightsDownload": {"enabled": True}, "modelPath": "weights/qwen"}},
        [f"{P}:serving.modelPath = 'weights/qwen'", "models--Qwen--Qwen3.5-397B-A17B-FP8/snapshots/<40-hex revision>"],
    )
    # Without the download any object path is still accepted (the bucket may hold the files elsewhere).
    ok({f"{P}:serving": {"modelPath": "weights/qwen"}})


def test_the_listing_problem_names_the_place_and_what_is_missing() -> None:
    prefix = "models--a--b/snapshots/" + "0" * 40
    assert weights.listing_problem("bkt", prefix, []) == f"gs://bkt/{prefix}/ holds no objects"
    only_config = weights.listing_problem("bkt", prefix, [f"{prefix}/config.json"])
    assert only_config == f"gs://bkt/{prefix}/ holds 1 objects, no *.safetensors"
    # A shard in a sibling folder is not in the snapshot.
    other = weights.listing_problem("bkt", prefix, [f"{prefix}/config.json", f"{prefix}x/model.safetensors"])
    assert other is not None
    assert weights.listing_problem("bkt", prefix, [f"{prefix}/config.json", f"{prefix}/m-1.safetensors"]) is None


# ------------------------------------------------------------------------------------------------ at preview


@pytest.mark.parametrize("cached", [[], ["config.json", "model-1.safetensors"]], ids=["empty", "one level too high"])
def test_an_empty_or_wrong_prefix_stops_the_preview_naming_bucket_and_prefix(cached: list[str]) -> None:
    bucket, path = dev_serving()
    # one level too high: the files were copied without snapshots/<revision>
    cache = path.split("/snapshots/")[0]
    run = run_program(mocks=Mocks(weights={bucket: [f"{cache}/{name}" for name in cached]}))
    assert run.error is not None and not run.registrations
    message = str(run.error)
    assert f"gs://{bucket}/{path}/ holds no objects" in message
    assert weights.PREPARE_DOC in message and "serving.weightsDownload.enabled true" in message


def test_a_filled_prefix_passes_and_the_listing_asks_for_that_prefix() -> None:
    bucket, path = dev_serving()
    mocks = Mocks(weights={bucket: [f"{path}/config.json", f"{path}/model-00001-of-00002.safetensors"]})
    ok(mocks=mocks)
    (call,) = [c for c in mocks.calls if c.token == "gcp:storage/getBucketObjects:getBucketObjects"]
    assert call.args == {"bucket": bucket, "prefix": f"{path}/"}


def test_a_refused_read_warns_and_does_not_block() -> None:
    # Whoever runs the preview may not list the bucket (403, which Cloud Storage answers whether or not it exists):
    # the leaders check again.
    bucket, path = dev_serving()
    run = ok(mocks=Mocks(weights={bucket: None}))
    (warning,) = [m for m in warnings_of(run) if "could not list" in m]
    assert f"gs://{bucket}/{path}/" in warning and "Error 403" in warning


@pytest.mark.parametrize("download", [False, True], ids=["copied by hand", "downloaded by the Job"])
def test_a_missing_bucket_stops_the_preview_with_the_command_that_creates_it(download: bool) -> None:
    # The download Job and the readers' IAM bindings need the bucket as much as the leaders do.
    bucket, path = dev_serving()
    run = run_program(ON if download else None, mocks=Mocks(weights={}))
    assert run.error is not None and not run.registrations
    message = str(run.error)
    assert message.startswith(f"{P}:serving.weightsBucket = {bucket!r}: no such bucket"), message
    (command,) = [line.strip() for line in message.splitlines() if line.strip().startswith("gcloud ")]
    # In the TPUs' region (dev's zone us-central1-ai1a), the stack's project, IAM-only, never public.
    assert shlex.split(command) == [
        "gcloud", "storage", "buckets", "create", f"gs://{bucket}", "--project=my-tpu-project",
        "--location=us-central1", "--uniform-bucket-level-access", "--public-access-prevention",
    ]  # fmt: skip
    assert f"gs://{bucket}/{path}/" in message and weights.PREPARE_DOC in message


def test_an_empty_prefix_is_fine_when_the_job_fills_it() -> None:
    bucket, _ = dev_serving()
    run = ok(ON, mocks=Mocks(weights={bucket: []}))
    assert run.of_type(JOB)


# ------------------------------------------------------------------------------------------------ the leader's check


def test_the_leader_checks_the_snapshot_before_vllm_starts(dev: Run) -> None:
    container = vllm_leader(lws(dev, "prefill"))
    command = container["command"][2]
    check = f"python3 -c {shlex.quote(weights.CHECK_SCRIPT.read_text())} || exit 1\n"
    assert command.startswith(check) and "exec vllm serve" in command[len(check) :]
    bucket, path = dev_serving()
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["WEIGHTS_BUCKET"], env["WEIGHTS_PREFIX"]) == (bucket, path)


class FakeGcs:
    """The metadata server's token and the objects list, as the check script asks for them."""

    def __init__(self, names: list[str] | None = None, error: int | None = None, flaky: int = 0) -> None:
        self.names, self.error, self.flaky, self.urls = names or [], error, flaky, []

    def __call__(self, url: str, headers: dict[str, str]) -> dict[str, Any]:
        self.urls.append(url)
        if "metadata.google.internal" in url:
            assert headers == {"Metadata-Flavor": "Google"}
            return {"access_token": "t"}
        assert headers == {"Authorization": "Bearer t"}
        if self.flaky:
            self.flaky -= 1
            raise OSError("connection refused")
        if self.error:
            raise urllib.error.HTTPError(url, self.error, "no", {}, None)  # type: ignore[arg-type]
        return {"items": [{"name": n} for n in self.names]} if self.names else {}


@pytest.mark.parametrize(
    ("fake", "expected"),
    [
        (FakeGcs([]), "gs://bkt/m/snapshots/r/ holds no objects; copy the snapshot there"),
        (FakeGcs(["m/snapshots/r/config.json"]), "holds 1 objects but no *.safetensors"),
        (FakeGcs(error=404), "gs://bkt/m/snapshots/r/: the bucket does not exist"),
    ],
)
def test_the_check_exits_with_one_line_naming_the_place(
    fake: FakeGcs, expected: str, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    check = script(weights.CHECK_SCRIPT)
    check.TERMINATION_LOG = str(tmp_path / "termination-log")
    with pytest.raises(SystemExit) as exited:
        check.check("bkt", "m/snapshots/r/", fake, sleep=lambda _: None)
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err
    assert expected in (tmp_path / "termination-log").read_text()


def test_the_check_waits_for_a_new_read_binding_as_the_download_job_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    """The pods' read binding is created seconds before the LeaderWorkerSets and reaches Workload Identity minutes
    later: a refusal is final only after the download Job's own wait, not at the first answer."""
    check, download = script(weights.CHECK_SCRIPT), script(weights.DOWNLOAD_SCRIPT)
    check.TERMINATION_LOG = str(tmp_path / "termination-log")
    assert (check.IAM_WAIT_S, check.IAM_POLL_S) == (download.IAM_WAIT_S, download.IAM_POLL_S)
    slept: list[float] = []
    late = FakeGcs(["m/config.json", "m/a.safetensors"], error=403)
    calls = iter(range(100))

    def granted_after_three_refusals(url: str, headers: dict[str, str]) -> dict[str, Any]:
        if "storage.googleapis.com" in url and next(calls) >= 3:
            late.error = None
        return late(url, headers)

    check.check("bkt", "m/", granted_after_three_refusals, sleep=slept.append)
    assert slept == [check.IAM_POLL_S] * 3 and "1 shards" in capsys.readouterr().out
    slept.clear()
    with pytest.raises(SystemExit) as exited:
        check.check("bkt", "m/snapshots/r/", FakeGcs(error=403), sleep=slept.append)
    assert exited.value.code == 1 and sum(slept) == check.IAM_WAIT_S
    last = capsys.readouterr().err.splitlines()[-1]
    assert "gs://bkt/m/snapshots/r/: this pod's service account may not list the bucket (HTTP 403" in last
    assert last in (tmp_path / "termination-log").read_text()


def test_the_check_passes_a_servable_snapshot_and_lets_vllm_try_when_nothing_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    check = script(weights.CHECK_SCRIPT)
    good = FakeGcs(["m/config.json", "m/model-1.safetensors", "m/model-2.safetensors"])
    check.check("bkt", "m/", good, sleep=lambda _: None)
    assert "prefix=m%2F" in good.urls[-1]
    assert "2 shards" in capsys.readouterr().out
    # A metadata server that never answers is not proof the weights are missing: vLLM starts as before.
    silent = FakeGcs(flaky=100)
    check.check("bkt", "m/", silent, sleep=lambda _: None)
    assert "starting vLLM anyway" in capsys.readouterr().err
    # One refused connection, then the answer: the check retries.
    check.check("bkt", "m/", FakeGcs(["m/config.json", "m/a.safetensors"], flaky=1), sleep=lambda _: None)


# ------------------------------------------------------------------------------------------------ the docs


def test_the_docs_give_the_derived_prefix_size_and_bounds() -> None:
    root = weights.SCRIPTS.parent
    page, readme = (root / "docs" / "serving.md").read_text(), (root / "README.md").read_text()
    s = defaults()
    snap = weights.snapshot("MY_WEIGHTS_BUCKET", s.model, s.model_path)
    assert snap is not None
    assert f"{snap.uri}/" in page and f"REV={snap.revision}" in page
    assert f'hf download {s.model} --revision "$REV"' in page
    assert "gcloud storage cp -r './qwen-snapshot/*' " + f'"gs://$BUCKET/{snap.cache}/snapshots/$REV/"' in page
    assert f'gcloud storage ls -l "gs://$BUCKET/{snap.cache}/snapshots/$REV/"' in page
    assert f"about **{weights.facts(s.model).gigabytes} GB**" in page
    assert f"at most {weights.deadline_seconds(s.model):,} s" in page
    assert f"with {weights.BACKOFF_LIMIT} retries" in page
    assert f"about {weights.typical_download_seconds(s.model):,} s" in page
    assert f"{snap.cache}/snapshots/<revision>/" in readme and "(docs/serving.md#prepare-the-weights" in readme
    # The quick start prepares the weights before it runs `pulumi up`.
    assert readme.index("Prepare the weights") < readme.index("pulumi up\n```")
