"""The opt-in weights download (`serving.weightsDownload.enabled`): a Job on the system pool that fills the weights
bucket from Hugging Face at the snapshot `serving.modelPath` pins, with an identity of its own that may write
there; the serving LeaderWorkerSets wait for it.

It waits only for the cluster (the Kubernetes provider waits for the system pool), so the download runs while the
TPU pools are created. Everything lives in a namespace of its own: the writer's Kubernetes service account is not
one a serving pod can name, and the serving account keeps read access only (components/serving.py).

What the provider and the API do with the Job (pulumi/pulumi-kubernetes@94977969d):
* create: the Job is awaited until its `Complete` condition, and fails at once on `Failed` (backoffLimit or the
  deadline), provider/pkg/await/job.go L50-56; for at most `pulumi.com/timeoutSeconds` (default 10 minutes, L79 and
  L131), so the annotation carries the Job's own deadline plus its start.
* a change of `spec.template` (immutable in batch/v1) replaces the Job (provider/pkg/provider/diff.go:178,
  components/model/diff/kubernetes.py), delete-first since its name stays: the new Job finds the marker and ends.
* the second run: a complete Job is left as it is (no `ttlSecondsAfterFinished`: a Job the cluster deleted by
  itself would be recreated by the next `up --refresh`; the pod holds no disk, so keeping it costs nothing).
* destroy: a foreground delete (provider/pkg/await/await.go L964-967) waits for the Job's pods; the objects in the
  bucket stay (the bucket is not the stack's).
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.base import Component
from components.model import weights
from components.model.keys import APP_NAME_LABEL, NODE_POOL_LABEL, TIMEOUT_ANNOTATION
from components.model.settings import Settings

# The serving pods' token Secret name and key, here in the Job's namespace (the policy pack checks it by name).
from components.modelserver import HF_SECRET, HF_SECRET_KEY, hf_token_secret

NAMESPACE = "model-weights"
WRITER_KSA = "weights-writer"
JOB_NAME = "weights-download"
# objectUser: list, read, create and overwrite objects (a retried file is overwritten), no bucket or IAM changes
# (https://cloud.google.com/storage/docs/access-control/iam-roles). On this bucket only.
WRITER_ROLE = "roles/storage.objectUser"


class WeightsDownload(Component):
    """The download Job, its namespace, service account, token Secret and write access to the weights bucket."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        *,
        provider: k8s.Provider,
        principal: pulumi.Output[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gke-tpu-slicing:weights:WeightsDownload", name, opts)
        s = settings.serving
        snapshot = weights.snapshot(s.weights_bucket or "", s.model, s.model_path)
        assert snapshot is not None  # ServingSettings refuses another layout while the download is enabled
        in_cluster = self.child(provider=provider)
        self.namespace = k8s.core.v1.Namespace(f"{name}-namespace", metadata={"name": NAMESPACE}, opts=in_cluster)
        namespace = self.namespace.metadata.name
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa", metadata={"name": WRITER_KSA, "namespace": namespace}, opts=in_cluster
        )
        self.hf_secret = hf_token_secret(name, settings, namespace, in_cluster)
        # `principal` names this namespace's account: the one identity that may write to the weights bucket.
        self.writer = gcp.storage.BucketIAMMember(
            f"{name}-objectuser", bucket=snapshot.bucket, role=WRITER_ROLE, member=principal, opts=self.child()
        )
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata={
                "name": JOB_NAME,
                "namespace": namespace,
                "annotations": {TIMEOUT_ANNOTATION: str(job_timeout_seconds(settings))},
            },
            spec=job_spec(settings, snapshot, self.service_account.metadata.name, self.hf_secret is not None),
            opts=self.child(provider=provider, depends_on=[self.writer]),
        )
        self.register_outputs({"job": self.job.metadata.name, "snapshot": snapshot.uri})


def job_timeout_seconds(settings: Settings) -> int:
    """How long `up` waits for the Job: its own deadline plus scheduling and the image pull."""
    return weights.deadline_seconds(settings.serving.model) + weights.JOB_START_BUDGET_S


def job_spec(
    settings: Settings, snapshot: weights.Snapshot, service_account: pulumi.Input[str], with_token: bool
) -> dict[str, object]:
    s = settings.serving
    env: list[dict[str, object]] = [
        {"name": "WEIGHTS_BUCKET", "value": snapshot.bucket},
        {"name": "WEIGHTS_CACHE", "value": snapshot.cache},
        {"name": "HF_REPO", "value": snapshot.repo},
        {"name": "HF_REVISION", "value": snapshot.revision},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    if with_token:
        env.append({"name": HF_SECRET_KEY, "valueFrom": {"secretKeyRef": {"name": HF_SECRET, "key": HF_SECRET_KEY}}})
    container = {
        "name": "download",
        "image": s.weights_download.image,
        "command": ["python3", "-c", weights.DOWNLOAD_SCRIPT.read_text()],
        "env": env,
        # It streams: memory for one 64 MiB chunk in flight, no disk; one core drives one stream.
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
            "limits": {"memory": "2Gi", "ephemeral-storage": "1Gi"},
        },
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 65534},
    }
    return {
        # Each retry resumes where the last stopped; the deadline bounds them all together.
        "backoffLimit": weights.BACKOFF_LIMIT,
        "activeDeadlineSeconds": weights.deadline_seconds(s.model),
        "template": {
            "metadata": {"labels": {APP_NAME_LABEL: JOB_NAME}},
            "spec": {
                "serviceAccountName": service_account,
                "restartPolicy": "Never",
                # The system pool: up as soon as the cluster is, while the TPU pools are still being created.
                "nodeSelector": {NODE_POOL_LABEL: settings.cluster.system_pool_name},
                "containers": [container],
            },
        },
    }
