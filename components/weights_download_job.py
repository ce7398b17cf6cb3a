"""The opt-in weights download (`serving.weightsDownload.enabled`): a Job on the system pool that fills the weights
bucket from Hugging Face at the snapshot `serving.modelPath` pins, with an identity of its own that may write
there; the serving LeaderWorkerSets wait for it.

It waits only for the cluster (the Kubernetes provider waits for the system pool), so the download runs while the
TPU pools are created. Everything lives in a namespace of its own: the writer's Kubernetes service account is not
one a serving pod can name, and the serving account keeps read access only (components/serving.py).

What the provider and the API do with the Job (cited in components/model/diff/kubernetes.py):
* create: the Job is awaited until `Complete` and fails at once on `Failed` (backoffLimit or the deadline), for at
  most `pulumi.com/timeoutSeconds` (default 10 minutes), so the annotation carries the Job's own deadline plus its
  start.
* a change of `spec.template` (immutable in batch/v1) replaces the Job, delete-first since its name stays: the new
  Job finds the marker and ends.
* the second run: a complete Job is left as it is (no `ttlSecondsAfterFinished`: a Job the cluster deleted by
  itself would be recreated by the next `up --refresh`; the pod holds no disk, so keeping it costs nothing).
* destroy: a foreground delete waits for the Job's pods; the objects in the bucket stay (the bucket is not the
  stack's).
"""

from typing import NotRequired, TypedDict

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.component import Component
from components.model.config.images import pull_policy
from components.model.keys import APP_NAME_LABEL, NODE_POOL_LABEL, TIMEOUT_ANNOTATION
from components.model.pod_security import NOBODY, RESTRICTED, container_context, namespace_labels, pod_context
from components.model.serving import weights

# The serving pods' token Secret name and key, here in the Job's namespace (the policy pack checks it by name).
from components.vllm_containers import HF_SECRET, hf_token_env
from components.vllm_leaderworkersets import hf_token_secret

NAMESPACE = "model-weights"
WRITER_KSA = "weights-writer"
JOB_NAME = "weights-download"
# objectUser: list, read, create and overwrite objects (a retried file is overwritten), no bucket or IAM changes
# (https://cloud.google.com/storage/docs/access-control/iam-roles). On this bucket only.
WRITER_ROLE = "roles/storage.objectUser"


class WeightsDownloadArgs(TypedDict):
    bucket: str
    """The weights bucket the Job fills."""
    model: str
    """The Hugging Face model (repo[@revision]) it downloads."""
    model_path: str
    """The prefix in the bucket the serving pods load the snapshot from."""
    image: str
    """The Job's image (a Python one)."""
    system_pool: str
    """The system node pool the Job runs on (up while the TPU pools are still being created)."""
    hf_token: NotRequired[pulumi.Input[str]]
    """The Hugging Face token (a secret), for gated models."""
    principal: pulumi.Input[str]
    """The Workload Identity principal of the Job's service account: the one identity that may write the bucket."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""


class WeightsDownload(Component):
    """The download Job, its namespace, service account, token Secret and write access to the weights bucket."""

    def __init__(self, name: str, args: WeightsDownloadArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gke-tpu-slicing:weights:WeightsDownload", name, opts)
        provider = args["provider"]
        snapshot = weights.snapshot(args["bucket"], args["model"], args["model_path"])
        assert snapshot is not None  # ServingSettings refuses another layout while the download is enabled
        in_cluster = self.child(provider=provider)
        # Its one pod passes `restricted` (model/pod_security.py): the strictest level, enforced.
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": NAMESPACE, "labels": namespace_labels(RESTRICTED)}, opts=in_cluster
        )
        namespace = self.namespace.metadata.name
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa", metadata={"name": WRITER_KSA, "namespace": namespace}, opts=in_cluster
        )
        self.hf_secret = hf_token_secret(name, args.get("hf_token"), namespace, in_cluster)
        # `principal` names this namespace's account: the one identity that may write to the weights bucket.
        self.writer = gcp.storage.BucketIAMMember(
            f"{name}-objectuser", bucket=snapshot.bucket, role=WRITER_ROLE, member=args["principal"], opts=self.child()
        )
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata={
                "name": JOB_NAME,
                "namespace": namespace,
                "annotations": {TIMEOUT_ANNOTATION: str(job_timeout_seconds(args["model"]))},
            },
            spec=job_spec(args, snapshot, self.service_account.metadata.name, self.hf_secret is not None),
            opts=self.child(provider=provider, depends_on=[self.writer]),
        )
        self.register_outputs({"job": self.job.metadata.name, "snapshot": snapshot.uri})


def job_timeout_seconds(model: str) -> int:
    """How long `up` waits for the Job: its own deadline plus scheduling and the image pull."""
    return weights.deadline_seconds(model) + weights.JOB_START_BUDGET_S


def job_spec(
    args: WeightsDownloadArgs, snapshot: weights.Snapshot, service_account: pulumi.Input[str], with_token: bool
) -> dict[str, object]:
    values = {"WEIGHTS_BUCKET": snapshot.bucket, "WEIGHTS_CACHE": snapshot.cache, "HF_REPO": snapshot.repo}
    values |= {"HF_REVISION": snapshot.revision, "PYTHONUNBUFFERED": "1"}
    env = [{"name": k, "value": v} for k, v in values.items()] + ([hf_token_env(HF_SECRET)] if with_token else [])
    container = {
        "name": "download",
        "image": args["image"],
        "imagePullPolicy": pull_policy(args["image"]),
        "command": ["python3", "-c", weights.DOWNLOAD_SCRIPT.read_text()],
        "env": env,
        # It streams: memory for one 64 MiB chunk in flight, no disk; one core drives one stream.
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
            "limits": {"memory": "2Gi", "ephemeral-storage": "1Gi"},
        },
        "securityContext": container_context(run_as_user=NOBODY),
    }
    return {
        # Each retry resumes where the last stopped; the deadline bounds them all together.
        "backoffLimit": weights.BACKOFF_LIMIT,
        "activeDeadlineSeconds": weights.deadline_seconds(args["model"]),
        "template": {
            "metadata": {"labels": {APP_NAME_LABEL: JOB_NAME}},
            "spec": {
                "serviceAccountName": service_account,
                "restartPolicy": "Never",
                # The system pool: up as soon as the cluster is, while the TPU pools are still being created.
                "nodeSelector": {NODE_POOL_LABEL: args["system_pool"]},
                "securityContext": pod_context(),
                "containers": [container],
            },
        },
    }
