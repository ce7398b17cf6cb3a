"""The weights download Job's program: a pinned Hugging Face snapshot into the weights bucket. Stdlib only.

Every file of $HF_REPO at $HF_REVISION streams from Hugging Face (`/resolve/<revision>/<file>`,
https://huggingface.co/docs/hub/api) straight into a Cloud Storage resumable upload
(https://cloud.google.com/storage/docs/performing-resumable-uploads) in 64 MiB chunks: no local disk, memory
for one chunk. Files already in the bucket at their size are skipped, so a retried pod resumes; the marker
<prefix>/.complete is written last, and a run that finds it does nothing. Also writes <cache>/refs/main
(Hugging Face's cache layout) so the bucket is a complete cache. Credentials: the Job's own service account
through the GKE metadata server; HF_TOKEN if set (gated or private repositories).
"""

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TOKEN_URL = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
GCS = "https://storage.googleapis.com"
HF = "https://huggingface.co"
# A multiple of 256 KiB, as every chunk but the last must be.
CHUNK = 64 * 1024 * 1024
MARKER = ".complete"
# A new writer binding takes minutes to reach Workload Identity (https://cloud.google.com/iam/docs/access-change-
# propagation): the first listing waits that long on 401/403 before the pod fails and the Job's retries start.
IAM_WAIT_S = 600
IAM_POLL_S = 30


class KeepTokenHome(urllib.request.HTTPRedirectHandler):
    """Hugging Face answers a file with a redirect to its CDN: the token goes to huggingface.co only."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            new.remove_header("Authorization")
        return new


class Http:
    """The two endpoints' requests; tests replace `open`."""

    def __init__(self, open_=None):
        opener = urllib.request.build_opener(KeepTokenHome)
        self.open = open_ or (lambda request: opener.open(request, timeout=300))

    def token(self):
        request = urllib.request.Request(TOKEN_URL, headers={"Metadata-Flavor": "Google"})
        with self.open(request) as answer:
            return json.load(answer)["access_token"]

    def gcs(self, method, url, data=None, headers=None):
        headers = {"Authorization": f"Bearer {self.token()}", **(headers or {})}
        return self.open(urllib.request.Request(url, data=data, headers=headers, method=method))


def quote(name):
    return urllib.parse.quote(name, safe="")


def hf_headers():
    token = os.environ.get("HF_TOKEN", "")
    return {"Authorization": f"Bearer {token}"} if token else {}


def repo_files(http, repo, revision):
    """(path, size) of every file of the repository at the revision (the Hub's tree API, paginated by Link)."""
    url = f"{HF}/api/models/{repo}/tree/{revision}?recursive=true"
    out = []
    while url:
        with http.open(urllib.request.Request(url, headers=hf_headers())) as answer:
            out += [(e["path"], e["size"]) for e in json.load(answer) if e.get("type") == "file"]
            link = answer.headers.get("Link") or ""
        url = next((p.split(";")[0].strip("<> ") for p in link.split(",") if 'rel="next"' in p), None)
    return out


def existing(http, bucket, prefix):
    """name -> size of the objects under prefix."""
    out, page = {}, None
    while True:
        query = {"prefix": prefix, "fields": "items(name,size),nextPageToken", **({"pageToken": page} if page else {})}
        with http.gcs("GET", f"{GCS}/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(query)}") as answer:
            listing = json.load(answer)
        out.update({i["name"]: int(i["size"]) for i in listing.get("items", [])})
        page = listing.get("nextPageToken")
        if not page:
            return out


def put_small(http, bucket, name, data):
    url = f"{GCS}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(name)}"
    with http.gcs("POST", url, data=data, headers={"Content-Type": "application/octet-stream"}):
        pass


def read_full(stream, size):
    parts, left = [], size
    while left:
        part = stream.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def copy(http, repo, revision, path, size, bucket, name):
    url = f"{HF}/{repo}/resolve/{revision}/{urllib.parse.quote(path)}"
    with http.open(urllib.request.Request(url, headers=hf_headers())) as source:
        if size <= CHUNK:
            data = read_full(source, size)
            if len(data) != size:  # http.client ends a read cut short without an error
                raise OSError(f"{path}: the download ended at byte {len(data)} of {size}")
            return put_small(http, bucket, name, data)
        start = f"{GCS}/upload/storage/v1/b/{bucket}/o?uploadType=resumable&name={quote(name)}"
        with http.gcs(
            "POST",
            start,
            data=b"{}",
            headers={"X-Upload-Content-Length": str(size), "Content-Type": "application/json"},
        ) as answer:
            session = answer.headers["Location"]
        sent = 0  # bytes Cloud Storage has persisted
        while sent < size:
            chunk = read_full(source, min(CHUNK, size - sent))
            if not chunk:
                raise OSError(f"{path}: the download ended at byte {sent} of {size}")
            end = sent + len(chunk)
            while sent < end:  # the part of the chunk not persisted yet
                sent = put_chunk(http, session, chunk[len(chunk) - (end - sent) :], sent, size)


def put_chunk(http, session, data, start, size):
    """PUTs bytes start.. of the upload; returns how many bytes of it Cloud Storage has persisted since.

    A 308 (more to come) says in its Range header (`bytes=0-N`, none when nothing is stored) how far it got,
    which may be short of what was sent: the rest is sent again.
    """
    headers = {"Content-Range": f"bytes {start}-{start + len(data) - 1}/{size}"}
    try:
        with http.gcs("PUT", session, data=data, headers=headers):
            return size  # 200 or 201: the object is complete
    except urllib.error.HTTPError as err:
        if err.code != 308:
            raise
        stored = (err.headers.get("Range") or "").rpartition("-")[2]
        persisted = int(stored) + 1 if stored.isdigit() else 0
    if persisted < start:  # it never forgets what it acknowledged; a session that does is broken
        raise OSError(f"upload session reports {persisted} bytes stored, {start} were acknowledged")
    return persisted


def existing_once_allowed(http, bucket, prefix, log, sleep=time.sleep):
    waited = 0
    while True:
        try:
            return existing(http, bucket, prefix)
        except urllib.error.HTTPError as err:
            if err.code not in (401, 403) or waited >= IAM_WAIT_S:
                raise
            log(f"gs://{bucket}/{prefix}: HTTP {err.code}, waiting for the writer's access to propagate")
            sleep(IAM_POLL_S)
            waited += IAM_POLL_S


def run(http, bucket, repo, cache, revision, log=print, sleep=time.sleep):
    prefix = f"{cache}/snapshots/{revision}/"
    have = existing_once_allowed(http, bucket, prefix, log, sleep)
    if prefix + MARKER in have:
        log(f"gs://{bucket}/{prefix} is complete ({MARKER} present): nothing to do")
        return 0
    files = repo_files(http, repo, revision)
    total = sum(size for _, size in files)
    log(f"{repo}@{revision}: {len(files)} files, {total / 1e9:.1f} GB into gs://{bucket}/{prefix}")
    done = 0
    for path, size in files:
        name = prefix + path
        if have.get(name) != size:
            begun = time.monotonic()
            copy(http, repo, revision, path, size, bucket, name)
            rate = size / max(time.monotonic() - begun, 1e-3) / 1e6
            log(f"{path}: {size / 1e9:.2f} GB at {rate:.0f} MB/s")
        done += size
        log(f"{done / max(total, 1):.0%} of {total / 1e9:.1f} GB")
    put_small(http, bucket, f"{cache}/refs/main", revision.encode())
    put_small(http, bucket, prefix + MARKER, revision.encode())  # last: the snapshot is whole
    log(f"gs://{bucket}/{prefix} is complete")
    return 0


if __name__ == "__main__":
    env = os.environ
    sys.exit(run(Http(), env["WEIGHTS_BUCKET"], env["HF_REPO"], env["WEIGHTS_CACHE"], env["HF_REVISION"]))
