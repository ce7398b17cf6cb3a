"""Before vLLM starts: is the model's snapshot in the bucket? Run by the leader pod (python3 -c), stdlib only.

Lists gs://$WEIGHTS_BUCKET/$WEIGHTS_PREFIX/ with the pod's own identity (the GKE metadata server's token,
https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity#metadata_server) through the Cloud
Storage JSON API (https://cloud.google.com/storage/docs/json_api/v1/objects/list). A definite answer that the
snapshot is not there (no bucket, no config.json or no *.safetensors) exits 1 with one line naming the place; an
answer that never comes (the metadata server still starting) lets vLLM try, as before. A refusal (401/403) is
final only after the wait the download Job allows a new binding (manifests/weights_download.py IAM_WAIT_S, where
the propagation delay is cited): the pods' read binding is created seconds before them.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TOKEN_URL = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
LIST_URL = "https://storage.googleapis.com/storage/v1/b/{bucket}/o?{query}"
ATTEMPTS = 6
# As long as the download Job waits for its own binding (manifests/weights_download.py: the source is cited there).
IAM_WAIT_S = 600
IAM_POLL_S = 30
TERMINATION_LOG = "/dev/termination-log"


def fail(message):
    line = f"weights check: {message}"
    print(line, file=sys.stderr, flush=True)
    try:  # what `kubectl describe pod` shows as the container's last state
        with open(TERMINATION_LOG, "w") as log:
            log.write(line)
    except OSError:
        pass
    sys.exit(1)


def get(url, headers):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
        return json.load(answer)


def names(bucket, prefix, urlopen_get=get):
    token = urlopen_get(TOKEN_URL, {"Metadata-Flavor": "Google"})["access_token"]
    query = urllib.parse.urlencode({"prefix": prefix, "fields": "items(name),nextPageToken", "maxResults": 1000})
    answer = urlopen_get(LIST_URL.format(bucket=bucket, query=query), {"Authorization": f"Bearer {token}"})
    return [item["name"] for item in answer.get("items", [])]


def check(bucket, prefix, urlopen_get=get, sleep=time.sleep):
    where = f"gs://{bucket}/{prefix}"
    fix = "copy the snapshot there (docs/serving.md#prepare-the-weights) or set serving.weightsDownload.enabled"
    attempt = waited = 0
    while True:
        try:
            listed = names(bucket, prefix, urlopen_get)
            break
        except urllib.error.HTTPError as err:
            if err.code == 404:
                fail(f"{where}: the bucket does not exist; {fix}")
            if err.code in (401, 403):
                if waited >= IAM_WAIT_S:
                    fail(
                        f"{where}: this pod's service account may not list the bucket (HTTP {err.code}, still after "
                        f"{waited} s for a new binding to propagate)"
                    )
                if not waited:
                    print(f"weights check: {where}: HTTP {err.code}; waiting up to {IAM_WAIT_S} s", file=sys.stderr)
                sleep(IAM_POLL_S)
                waited += IAM_POLL_S
                continue
            attempt += 1
            if attempt == ATTEMPTS:
                print(f"weights check: {where} not listed (HTTP {err.code}); starting vLLM anyway", file=sys.stderr)
                return
        except (OSError, ValueError, KeyError) as err:
            attempt += 1
            if attempt == ATTEMPTS:
                print(f"weights check: {where} not listed ({err}); starting vLLM anyway", file=sys.stderr)
                return
        sleep(10)
    files = [n[len(prefix) :] for n in listed]
    missing = [
        m
        for m, ok in (
            ("config.json", "config.json" in files),
            ("*.safetensors", any(f.endswith(".safetensors") for f in files)),
        )
        if not ok
    ]
    if missing:
        held = f"{len(files)} objects but no {' and no '.join(missing)}" if files else "no objects"
        fail(f"{where} holds {held}; {fix}")
    print(f"weights check: {where} holds config.json and {sum(f.endswith('.safetensors') for f in files)} shards")


if __name__ == "__main__":
    check(os.environ["WEIGHTS_BUCKET"], os.environ["WEIGHTS_PREFIX"].rstrip("/") + "/")
