"""Command lines the program prints for its users (stack outputs), built where every layer can use them.

The resources layer exports them and the command-line layer parses them, so they live here, below both:
`components/serving.py` must not import `components/cli/` (imports only run downward: cli -> resources -> model).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from components.model.config.settings import Settings


def credentials_command(
    cluster: str, location: str, project: str, *, dns_endpoint: bool, private_endpoint: bool
) -> str:
    """`gcloud container clusters get-credentials ...`: the kubeconfig context kubectl and `verify` use.

    Through the DNS-based endpoint when the stack turns it on (IAM-checked, reachable from any network:
    `--dns-endpoint`), else the private IP endpoint when there is no public one (`--internal-ip`, from the VPC),
    else the public IP endpoint (from an authorized network). Flags: `gcloud container clusters get-credentials
    --help` (https://cloud.google.com/sdk/gcloud/reference/container/clusters/get-credentials).
    """
    args = ["gcloud", "container", "clusters", "get-credentials", cluster, "--location", location]
    args += ["--project", project]
    if dns_endpoint:
        args.append("--dns-endpoint")
    elif private_endpoint:
        args.append("--internal-ip")
    return shlex.join(args)


def stack_credentials_command(settings: Settings) -> str:
    """The `credentialsCommand` stack output: the stack's cluster, region, project and control-plane endpoint."""
    cp, where = settings.cluster.control_plane, (settings.cluster.name, settings.region, settings.project)
    return credentials_command(*where, dns_endpoint=cp.dns_endpoint, private_endpoint=cp.private_endpoint)


def verify_command(
    gateway_name: str, namespace: str, model: str, *, pool: str, leaders: int, timeout: int, credentials: str = ""
) -> str:
    """`python -m components verify ...` for the `verifyCommand` stack output, shell-quoted.

    The flags are those `components/cli/verify.py` parses (its tests parse this string back); `credentials` is
    the get-credentials command `verify` names when it finds no usable kubeconfig.
    """
    args = ["python", "-m", "components", "verify"]
    args += ["--gateway-name", gateway_name, "--namespace", namespace, "--model", model]
    args += ["--pool", pool, "--leaders", str(leaders), "--timeout", str(timeout)]
    if credentials:
        args += ["--credentials-command", credentials]
    return shlex.join(args)


# https://cloud.google.com/sdk/gcloud/reference/storage/buckets/create: `--location` (a region keeps the bytes beside
# the TPUs that read them: no inter-region transfer), `--uniform-bucket-level-access` (IAM alone grants access, which
# is how the program grants its readers: components/serving.py), `--public-access-prevention` (never public).
BUCKET_DOC = "https://cloud.google.com/storage/docs/creating-buckets"


def create_bucket_command(bucket: str, project: str, region: str) -> str:
    """`gcloud storage buckets create gs://BUCKET --project=PROJECT ...`: a bucket in `region`, IAM-only access,
    never public."""
    args = ["gcloud", "storage", "buckets", "create", f"gs://{bucket}", f"--project={project}"]
    args += [f"--location={region}", "--uniform-bucket-level-access", "--public-access-prevention"]
    return shlex.join(args)
