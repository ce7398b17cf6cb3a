"""The opt-in weights download Job: its bounds, identity and token, its place in the graph (the leaders wait for it),
and its program against fake Hugging Face and Cloud Storage endpoints."""

from __future__ import annotations

import io
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from types import ModuleType
from typing import Any

import pytest
import yaml

from components.model.config import images
from components.model.serving import weights
from tests.graph_queries import tpu_pools
from tests.harness import CHART, LWS, POOL, Run, contains_secret, ok
from tests.stack_config import ROOT, P
from tests.weights_fixtures import JOB, ON, defaults, dev_serving, script

MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
SECRET = "kubernetes:core/v1:Secret"
TOKEN = "hf_weights_test_token_5678"


def with_download(**kwargs: Any) -> Run:
    return ok(ON, secrets={f"{P}:hfToken": TOKEN}, **kwargs)


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
    assert container["image"] == images.PYTHON.reference == f"{images.PYTHON.image}@{images.PYTHON.digest}"
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

    def __init__(
        self, files: dict[str, bytes], stored: dict[str, bytes] | None = None, denied: int = 0, keeps: int = 0
    ) -> None:
        self.files, self.stored, self.requests = files, dict(stored or {}), []
        self.sessions: dict[str, tuple[str, bytearray]] = {}
        self.denied = denied  # listings refused with 403 before access arrives
        # With keeps > 0, an intermediate request is persisted only in part, as the 308's Range header then says:
        # Cloud Storage may persist less than a request sent.
        self.keeps = keeps

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
            kept = len(request.data) // 2 // self.keeps * self.keeps if self.keeps else 0
            if kept:  # half of what came, in whole `keeps` blocks: each request still stores something
                del data[start + kept :]
            persisted = {"Range": f"bytes=0-{len(data) - 1}"} if data else {}
            raise urllib.error.HTTPError(url, 308, "Resume Incomplete", persisted, None)  # type: ignore[arg-type]
        self.stored[target] = bytes(data)
        return Answer()


def copy(download: ModuleType, fake: FakeEndpoints, **kwargs: Any) -> int:
    """The Job's program copying repo a/b at revision f...f into bucket bkt through `fake`."""
    return download.run(download.Http(fake), "bkt", "a/b", "models--a--b", "f" * 40, **kwargs)


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
    assert copy(download, fake, log=logs.append) == 0
    assert {n: fake.stored[prefix + n] for n in files} == files
    assert fake.stored["models--a--b/refs/main"] == b"f" * 40
    uploads = [u for m, u in fake.requests if "upload/storage" in u]
    assert "model-00002" not in " ".join(uploads)  # skipped: already whole
    assert uploads[-1].endswith("name=" + urllib.parse.quote(prefix + ".complete", safe=""))
    assert sum("https://session/" in u for _, u in fake.requests) == 3
    # The next run finds the marker and does nothing but list.
    again = FakeEndpoints(files, fake.stored)
    copy(download, again, log=logs.append)
    assert [m for m, u in again.requests if "metadata" not in u] == ["GET"]
    assert "nothing to do" in logs[-1]


def test_the_job_resends_what_cloud_storage_did_not_persist(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 308 says in its Range header how much is stored; the next request starts there (googleapis/python-storage
    _media/_upload.py `_process_resumable_response` reads it the same way)."""
    download = script(weights.DOWNLOAD_SCRIPT)
    monkeypatch.setattr(download, "CHUNK", 256 * 1024)
    big = bytes(range(251)) * 4000  # 1004000 bytes: four chunks, each request persisted by half
    fake = FakeEndpoints({"config.json": b"{}", "model-00001.safetensors": big}, keeps=64 * 1024)

    assert copy(download, fake, log=lambda _: None) == 0

    assert fake.stored["models--a--b/snapshots/" + "f" * 40 + "/model-00001.safetensors"] == big
    assert sum("https://session/" in u for _, u in fake.requests) > 4  # some bytes went out twice


def test_a_file_cut_short_fails_the_pod_and_writes_no_marker() -> None:
    """A connection closed early ends urllib's read without an error (http.client returns fewer bytes): a small
    file stored short would be marked complete and break vLLM's load; the pod fails and its retry copies it."""
    download = script(weights.DOWNLOAD_SCRIPT)
    fake = FakeEndpoints({"config.json": b'{"model_type": "qwen"}', "model-00001.safetensors": b"x" * 10})
    resolve = fake.__call__

    def cut(request: Any) -> Answer:
        answer = resolve(request)
        return Answer(answer.getvalue()[:5]) if "config.json" in request.full_url else answer

    with pytest.raises(OSError, match=r"config\.json: the download ended at byte 5 of 22"):
        download.run(download.Http(cut), "bkt", "a/b", "models--a--b", "f" * 40, log=lambda _: None)
    assert not [name for name in fake.stored if name.endswith(download.MARKER)]
    assert not [name for name in fake.stored if name.endswith("config.json")]


def test_the_job_waits_for_its_access_to_propagate_then_gives_up() -> None:
    download = script(weights.DOWNLOAD_SCRIPT)
    files = {"config.json": b"{}"}
    slept: list[float] = []
    late = FakeEndpoints(files, denied=2)
    copy(download, late, log=lambda _: None, sleep=slept.append)
    assert slept == [30, 30] and late.stored  # then it copied
    never = FakeEndpoints(files, denied=10**6)
    with pytest.raises(urllib.error.HTTPError):
        copy(download, never, log=lambda _: None, sleep=slept.append)
    assert sum(slept) == 60 + download.IAM_WAIT_S


def test_the_token_goes_to_hugging_face_only() -> None:
    download = script(weights.DOWNLOAD_SCRIPT)
    handler = download.KeepTokenHome()
    request = urllib.request.Request("https://huggingface.co/a/b/resolve/r/f", headers={"Authorization": "Bearer h"})
    cdn = handler.redirect_request(request, None, 302, "Found", {}, "https://cdn-lfs.hf.co/f?sig=1")
    assert cdn is not None and not cdn.has_header("Authorization")
    same = handler.redirect_request(request, None, 302, "Found", {}, "https://huggingface.co/a/b/resolve/r2/f")
    assert same is not None and same.has_header("Authorization")


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
