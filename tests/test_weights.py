"""The model's weights: the preview's listing of the snapshot, the leaders' check before vLLM, and the opt-in
download Job (its identity, its place in the graph, its program against fake endpoints)."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import shlex
import urllib.error
import urllib.parse
import urllib.request
from types import ModuleType
from typing import Any

import pytest
import yaml

from components.model.config.serving_settings import ServingSettings
from components.model.serving import weights
from tests.harness import (
    CHART,
    LWS,
    POOL,
    ROOT,
    Mocks,
    P,
    Run,
    assert_rejected,
    contains_secret,
    lws,
    ok,
    run_program,
    stack_file_config,
    tpu_pools,
    vllm_leader,
    warnings_of,
)

JOB = "kubernetes:batch/v1:Job"
MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
SECRET = "kubernetes:core/v1:Secret"
TOKEN = "hf_weights_test_token_5678"
ON = {f"{P}:serving": {"weightsDownload": {"enabled": True}}}


def defaults() -> ServingSettings:
    return ServingSettings(weights_bucket="bbb")


def dev_serving() -> tuple[str, str]:
    """The dev stack's weights bucket and (default) model path."""
    return stack_file_config("dev")[f"{P}:serving"]["weightsBucket"], defaults().model_path


def script(path: Any) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_download(**kwargs: Any) -> Run:
    return ok(ON, secrets={f"{P}:hfToken": TOKEN}, **kwargs)


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
    # The bucket is not readable (here: missing) for whoever runs the preview: the leaders check again.
    run = ok(mocks=Mocks(weights={}))
    bucket, path = dev_serving()
    (warning,) = [m for m in warnings_of(run) if "could not list" in m]
    assert f"gs://{bucket}/{path}/" in warning and "Error 404" in warning


def test_an_empty_prefix_is_fine_when_the_job_fills_it() -> None:
    bucket, _ = dev_serving()
    run = ok(ON, mocks=Mocks(weights={bucket: []}))
    assert run.of_type(JOB)


# ------------------------------------------------------------------------------------------------ the Job


def test_the_download_is_off_by_default(dev: Run) -> None:
    assert not dev.of_type(JOB)
    writers = [r for r in dev.of_type(MEMBER) if r.inputs["role"] == "roles/storage.objectUser"]
    assert not [r for r in writers if "weights" in r.name]


def test_the_job_is_bounded_sized_for_the_model_and_on_the_system_pool() -> None:
    run = with_download()
    job = run.get(JOB, "serving-weights-job").plain()
    spec = job["spec"]
    pod = spec["template"]["spec"]
    assert spec["backoffLimit"] == 3 and pod["restartPolicy"] == "Never"
    # The deadline is the model at 50 MB/s: 400 GB -> 8000 s; Pulumi waits that plus the start, not 10 minutes.
    assert spec["activeDeadlineSeconds"] == 8000 == weights.facts(defaults().model).gigabytes * 20
    assert int(job["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) == 8000 + 600
    assert "ttlSecondsAfterFinished" not in spec  # a Job the cluster deleted would come back on `up --refresh`
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": run.get(POOL, "cluster-system").plain()["name"]}
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    bucket, path = dev_serving()
    assert (env["WEIGHTS_BUCKET"], f"{env['WEIGHTS_CACHE']}/snapshots/{env['HF_REVISION']}") == (bucket, path)
    assert env["HF_REPO"] == defaults().model
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "llm-d-hf-token", "key": "HF_TOKEN"}}
    assert container["image"] == "docker.io/library/python:3.12.8-slim-bookworm"
    assert container["command"][:2] == ["python3", "-c"]
    assert container["resources"]["limits"]["ephemeral-storage"] == "1Gi"  # it streams: no disk for the model


def test_only_the_job_may_write_to_the_weights_bucket() -> None:
    run = with_download()
    bucket, _ = dev_serving()
    members = [r.plain() for r in run.of_type(MEMBER) if r.plain()["bucket"] == bucket]
    writers = [m for m in members if m["role"] not in ("roles/storage.bucketViewer", "roles/storage.objectViewer")]
    (writer,) = writers
    assert writer["role"] == "roles/storage.objectUser"
    assert writer["member"].endswith("/subject/ns/model-weights/sa/weights-writer")
    readers = {m["member"] for m in members if m is not writer}
    assert readers and all("/sa/gcs-fuse-ksa" in m for m in readers)
    job = run.get(JOB, "serving-weights-job").plain()
    assert job["metadata"]["namespace"] == "model-weights"
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "weights-writer"
    # Not the namespace the serving pods run in: no serving pod can name the writer's account.
    assert run.of_type(LWS)[0].plain()["metadata"]["namespace"] != "model-weights"


def test_the_job_waits_only_for_the_cluster_and_the_leaders_wait_for_it() -> None:
    run = with_download()
    job = run.get(JOB, "serving-weights-job")
    pools, charts = tpu_pools(run), run.of_type(CHART)
    assert pools and not any(run.depends_on(job, pool) for pool in pools)
    assert charts and not any(run.depends_on(job, chart) for chart in charts)
    assert run.depends_on(job, run.get(POOL, "cluster-system"))
    assert all(job.urn in reg.dependencies for reg in run.of_type(LWS))


def test_the_token_reaches_the_job_as_a_secret_only() -> None:
    run = with_download()
    secret = run.get(SECRET, "serving-weights-hf-token")
    assert contains_secret(secret.inputs) and secret.plain()["metadata"]["namespace"] == "model-weights"
    for reg in run.registrations:
        if TOKEN in json.dumps(reg.inputs, default=str):
            assert contains_secret(reg.inputs), f"{reg.type} {reg.name} holds the token in plain text"
    assert not any(TOKEN in m for _, m in run.logs)


def test_without_a_token_the_job_has_no_secret() -> None:
    run = ok(ON)
    pod = run.get(JOB, "serving-weights-job").plain()["spec"]["template"]["spec"]
    assert "HF_TOKEN" not in {e["name"] for e in pod["containers"][0]["env"]}
    assert not [r for r in run.of_type(SECRET) if r.name == "serving-weights-hf-token"]


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
        (FakeGcs(error=403), "gs://bkt/m/snapshots/r/: this pod's service account may not list the bucket"),
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


# ------------------------------------------------------------------------------------------------ the Job's program


class Answer(io.BytesIO):
    def __init__(self, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        super().__init__(body)
        self.headers = headers or {}

    def __enter__(self) -> Answer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class FakeEndpoints:
    """Hugging Face's tree and resolve endpoints and Cloud Storage's list, media and resumable uploads."""

    def __init__(self, files: dict[str, bytes], stored: dict[str, bytes] | None = None, denied: int = 0) -> None:
        self.files, self.stored, self.requests = files, dict(stored or {}), []
        self.sessions: dict[str, tuple[str, bytearray]] = {}
        self.denied = denied  # listings refused with 403 before access arrives

    def __call__(self, request: Any) -> Answer:
        url, method = request.full_url, request.get_method()
        self.requests.append((method, url))
        if "metadata.google.internal" in url:
            return Answer(json.dumps({"access_token": "t"}).encode())
        if self.denied and "/storage/v1/b/" in url:
            self.denied -= 1
            raise urllib.error.HTTPError(url, 403, "Forbidden", {}, None)  # type: ignore[arg-type]
        if "/api/models/" in url:
            tree = [{"type": "file", "path": p, "size": len(b)} for p, b in self.files.items()]
            return Answer(json.dumps([*tree, {"type": "directory", "path": "sub"}]).encode())
        if "/resolve/" in url:
            return Answer(self.files[url.split("/resolve/", 1)[1].split("/", 1)[1]])
        if "/storage/v1/b/" in url and method == "GET":
            prefix = re.search(r"prefix=([^&]+)", url)[1].replace("%2F", "/")  # type: ignore[index]
            items = [{"name": n, "size": str(len(b))} for n, b in self.stored.items() if n.startswith(prefix)]
            return Answer(json.dumps({"items": items}).encode())
        name = re.search(r"name=([^&]+)", url)
        if "uploadType=media" in url:
            self.stored[urllib.parse.unquote(name[1])] = request.data  # type: ignore[index]
            return Answer()
        if "uploadType=resumable" in url:
            session = f"https://session/{len(self.sessions)}"
            self.sessions[session] = (urllib.parse.unquote(name[1]), bytearray())  # type: ignore[index]
            return Answer(headers={"Location": session})
        target, data = self.sessions[url]
        start, end, total = map(int, re.match(r"bytes (\d+)-(\d+)/(\d+)", request.headers["Content-range"]).groups())
        assert start == len(data) and end - start + 1 == len(request.data)
        data += request.data
        if len(data) < total:
            raise urllib.error.HTTPError(url, 308, "Resume Incomplete", {}, None)  # type: ignore[arg-type]
        self.stored[target] = bytes(data)
        return Answer()


def test_the_job_streams_every_file_resumes_and_writes_the_marker_last(monkeypatch: pytest.MonkeyPatch) -> None:
    download = script(weights.DOWNLOAD_SCRIPT)
    monkeypatch.setattr(download, "CHUNK", 256 * 1024)
    big = bytes(range(256)) * 2500  # 640000 bytes: three chunks of a resumable upload
    files = {"config.json": b"{}", "model-00001.safetensors": big, "model-00002.safetensors": b"x" * 10}
    prefix = "models--a--b/snapshots/" + "f" * 40 + "/"
    # A retry: the second shard is already there at its size, the first was cut off (wrong size).
    fake = FakeEndpoints(
        files, {prefix + "model-00002.safetensors": b"x" * 10, prefix + "model-00001.safetensors": b"x"}
    )
    logs: list[str] = []
    assert download.run(download.Http(fake), "bkt", "a/b", "models--a--b", "f" * 40, log=logs.append) == 0
    assert {n: fake.stored[prefix + n] for n in files} == files
    assert fake.stored["models--a--b/refs/main"] == b"f" * 40
    uploads = [u for m, u in fake.requests if "upload/storage" in u]
    assert "model-00002" not in " ".join(uploads)  # skipped: already whole
    assert uploads[-1].endswith("name=" + urllib.parse.quote(prefix + ".complete", safe=""))
    assert sum("https://session/" in u for _, u in fake.requests) == 3
    # The next run finds the marker and does nothing but list.
    again = FakeEndpoints(files, fake.stored)
    download.run(download.Http(again), "bkt", "a/b", "models--a--b", "f" * 40, log=logs.append)
    assert [m for m, u in again.requests if "metadata" not in u] == ["GET"]
    assert "nothing to do" in logs[-1]


def test_the_job_waits_for_its_access_to_propagate_then_gives_up() -> None:
    download = script(weights.DOWNLOAD_SCRIPT)
    files = {"config.json": b"{}"}
    slept: list[float] = []
    late = FakeEndpoints(files, denied=2)
    download.run(download.Http(late), "bkt", "a/b", "models--a--b", "f" * 40, log=lambda _: None, sleep=slept.append)
    assert slept == [30, 30] and late.stored  # then it copied
    never = FakeEndpoints(files, denied=10**6)
    with pytest.raises(urllib.error.HTTPError):
        download.run(download.Http(never), "bkt", "a/b", "m", "f" * 40, log=lambda _: None, sleep=slept.append)
    assert sum(slept) == 60 + download.IAM_WAIT_S


def test_the_token_goes_to_hugging_face_only(monkeypatch: pytest.MonkeyPatch) -> None:
    download = script(weights.DOWNLOAD_SCRIPT)
    handler = download.KeepTokenHome()
    request = urllib.request.Request("https://huggingface.co/a/b/resolve/r/f", headers={"Authorization": "Bearer h"})
    cdn = handler.redirect_request(request, None, 302, "Found", {}, "https://cdn-lfs.hf.co/f?sig=1")
    assert cdn is not None and not cdn.has_header("Authorization")
    same = handler.redirect_request(request, None, 302, "Found", {}, "https://huggingface.co/a/b/resolve/r2/f")
    assert same is not None and same.has_header("Authorization")


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
    assert readme.index("Prepare the weights") < readme.index("pulumi preview && pulumi up")


def test_the_leaders_wait_starts_after_the_download_and_counts_loading_only(dev: Run) -> None:
    """The LWS is created once the Job is complete, its leaders-ready patch after the LWS: the patch's
    pulumi.com/timeoutSeconds (timed from the patch's own create) is the same with the download on or off, and
    docs/quotas.md says what the two waits add up to against the deploy workflow's limit."""
    patch_type = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSetPatch"
    timeout = "pulumi.com/timeoutSeconds"
    on, off = with_download(), dev
    job = on.get(JOB, "serving-weights-job")
    patches = on.of_type(patch_type)
    assert patches and all(on.depends_on(p, job) for p in patches)
    assert all(on.depends_on(reg, job) for reg in on.of_type(LWS))
    waits = {p.inputs["metadata"]["annotations"].get(timeout) for p in patches}
    assert waits == {p.inputs["metadata"]["annotations"].get(timeout) for p in off.of_type(patch_type)}
    job_wait = int(job.inputs["metadata"]["annotations"][timeout])
    rollout = max(int(w) for w in waits if w)
    page = (ROOT / "docs" / "quotas.md").read_text()
    assert f"at most {job_wait:,} s" in page
    assert f"about {job_wait + rollout:,} s" in page
    limit = yaml.safe_load((ROOT / ".github" / "workflows" / "up.yml").read_text())
    minutes = {job.get("timeout-minutes") for job in limit["jobs"].values()} - {None}
    assert minutes == {360} and "6 hours `up.yml` gives a stage" in page
    assert job_wait + rollout > 360 * 60  # why the page sends the first such `up` to tmux
