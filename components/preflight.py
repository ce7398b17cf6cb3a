"""Reads the stack's configuration into Settings, before any resource exists."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
import pulumi_gcp as gcp
import yaml

from components import placement
from components import reservation_reads as reservation
from components.model.commands import create_bucket_command
from components.model.config import gke_versions
from components.model.config.checks import gke_version_tuple
from components.model.config.settings import PROJECT, ConfigError, Settings, load
from components.model.serving import weights
from components.model.serving.deployed import (
    READ_STACK_OUTPUTS,
    SERVING_SHAPE_OUTPUT,
    DeployedRole,
    parse_serving_shape,
)
from components.model.tpu import planner
from components.model.tpu.reservation import Assignment

PROJECT_FILE = Path(__file__).resolve().parent.parent / "Pulumi.yaml"


def required_cli() -> str:
    """The CLI version range Pulumi.yaml declares (`requiredPulumiVersion`), the one place it is written."""
    return str(yaml.safe_load(PROJECT_FILE.read_text())["requiredPulumiVersion"])


def require_cli() -> None:
    """Stops a CLI outside the declared range, including CLIs too old to read `requiredPulumiVersion`."""
    pulumi.require_pulumi_version(required_cli())


def _project_config() -> dict[str, Any]:
    """Every `gke-tpu-slicing:*` key that is set, typos included (Pulumi has no public listing)."""
    merged: dict[str, Any] = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{PROJECT}:"
    return {key[len(prefix) :]: value for key, value in merged.items() if key.startswith(prefix)}


def clock() -> datetime:
    """The time date checks run against (tests pin it)."""
    return datetime.now(UTC)


# The offline commands' mode (components/cli/mockrun.py sets it with the symbolic mocks): a config key of its own
# namespace, not a stack setting, so only those runs set it and `pulumi up` never reads markers as answers.
OFFLINE_CONFIG = ("gke-tpu-slicing-offline", "mocks")


def offline_run() -> bool:
    """True in the offline commands' runs: the cloud's reads answer markers, so nothing is asked or checked."""
    namespace, key = OFFLINE_CONFIG
    return bool(pulumi.Config(namespace).get_bool(key))


def load_settings() -> Settings:
    raw = _project_config()
    project = pulumi.Config("gcp").get("project")
    secret_keys = frozenset(k for k in raw if runtime_config.is_config_secret(f"{PROJECT}:{k}"))
    try:
        settings = load(raw, project, secret_keys, now=clock())
    except ConfigError as err:
        # One message, then stop: nothing has been registered yet.
        raise pulumi.RunError(str(err)) from None
    for warning in settings.warnings():
        pulumi.log.warn(warning)
    return settings


def _engine_versions(settings: Settings, prefix: str | None) -> dict[str, Any]:
    """GKE's answer for the cluster's region (the data source reads `getServerConfig`), snake_case keys."""
    try:
        result = gcp.container.get_engine_versions(
            location=settings.region, project=settings.project, version_prefix=prefix
        )
    except Exception as err:  # the invoke's own error: no credentials, the API not enabled yet, ...
        raise pulumi.RunError(
            f"could not read the GKE versions offered in {settings.region} (project {settings.project}) to resolve "
            f"{PROJECT}:cluster.version = {settings.cluster.version!r}: {err}. The Kubernetes Engine API must be "
            "enabled in the project before the first preview (python -m components bootstrap enables it, or: "
            f"gcloud services enable container.googleapis.com --project={settings.project})."
        ) from None
    return {
        key: getattr(result, key) for key in ("id", "release_channel_default_version", "release_channel_latest_version")
    }


def resolve_cluster_version(settings: Settings, offline: bool = False) -> str:
    """`cluster.version` as the version GKE offers now, checked against GKE's documented floors.

    Runs before any resource is registered (a synchronous invoke), so a version the channel does not
    offer stops the preview with one error naming the key, instead of failing the cluster's creation
    minutes in. A later change of the answer (a new patch on Rapid) only changes the cluster's
    `min_master_version`, which never replaces anything (components/cluster.py). Under a running cluster the
    version sent is never older than the one its control plane runs (gke_versions.to_send). `offline` (offline_run):
    GKE is not asked; the cluster shows an exact version as given, anything else as a marker.
    """
    c = settings.cluster
    spec = c.version_spec
    if offline:
        resolution = gke_versions.offline(spec, c.release_channel)
        pulumi.log.warn(
            f"{PROJECT}:cluster.version = {c.version!r}: GKE's version list was not read (offline run): "
            f"{resolution.note}; the cluster shows {resolution.version}"
        )
        return resolution.version
    answer = _engine_versions(settings, spec.invoke_prefix)
    floor, why = settings.version_floor()

    def resolve(suggestion: dict[str, Any] | None = None) -> gke_versions.Resolution:
        return gke_versions.resolve(
            spec,
            answer,
            channel=c.release_channel,
            location=settings.region,
            floor=floor,
            floor_reason=why,
            suggestion=suggestion,
        )

    try:
        try:
            resolution = resolve()
        except gke_versions.VersionError:
            if spec.kind != "exact":
                raise
            # A second question only to word the error: the newest version of that minor the channel offers.
            resolution = resolve(_engine_versions(settings, ".".join(spec.value.split(".")[:2]) + "."))
    except gke_versions.VersionError as err:
        problem = f"{PROJECT}:cluster.version = {c.version!r}: {err.allowed}"
        running = running_master_version(settings) if err.not_offered else None
        if running is not None and gke_version_tuple(running) >= gke_version_tuple(floor):
            # The channel moved on under a running cluster, which GKE upgrades itself. Its running version is
            # sent: a full version it already meets, so the provider asks for nothing (never the spec as given:
            # a bare 1.36 or 1.36.0 ranks above every 1.36.0-gke.N in the provider's version library, and GKE
            # answers 400 "No valid versions with the prefix"). Only a new environment or a rebuild is refused.
            pulumi.log.warn(
                f"{problem}. The running cluster is not affected (GKE upgrades Rapid clusters itself; its version "
                f"{running} is sent as the minimum, which it already meets), but a rebuild or a new environment "
                "from this configuration would be refused: choose a version the channel offers"
            )
            return running
        raise pulumi.RunError(f"invalid stack configuration (1 problem):\n  {problem}") from None
    pulumi.log.info(
        f"{PROJECT}:cluster.version = {c.version!r} resolves to {resolution.version} "
        f"({c.release_channel} channel, {settings.region})"
    )
    conflict = exclusion_conflict(settings, resolution.version)
    if conflict:
        pulumi.log.warn(conflict)
    past = c.maintenance_exclusion and spec.kind == "default"
    past = past and c.maintenance_exclusion.past_support(gke_versions.minor_of(resolution.version))
    if past:  # a prefix or an exact version: Settings.warnings() said it already
        pulumi.log.warn(past)
    running = running_master_version(settings)
    version = gke_versions.to_send(resolution.version, running)
    if version != resolution.version:
        pulumi.log.info(
            f"the cluster's control plane already runs {running}, newer than {resolution.version} (GKE upgraded "
            f"it): {running} is sent as its minimum version, so `pulumi up` never asks GKE to go back"
        )
    assert version is not None
    return version


def running_master_version(settings: Settings) -> str | None:
    """The version the stack's control plane runs now (`get_cluster`'s live `master_version`), None on a fresh
    stack (no cluster yet, or the Kubernetes Engine API not enabled: components/reservation_reads.py read_cluster)."""
    try:
        cluster = reservation.read_cluster(settings)
    except Exception as err:
        raise pulumi.RunError(
            f"could not read cluster {settings.cluster.name} (the version its control plane runs, so that "
            f"`pulumi up` never asks for an older one): {err}"
        ) from None
    return (getattr(cluster, "master_version", None) or None) if cluster is not None else None


def exclusion_conflict(settings: Settings, version: str) -> str | None:
    """A maintenance exclusion that `cluster.version` undoes: what `pulumi up` would upgrade during it.

    The resolved version is the cluster's `min_master_version`, and the provider requests an upgrade to it
    whenever the control plane runs an older one (components/cluster.py). Maintenance exclusions hold
    automatic upgrades only, not requested ones (https://cloud.google.com/kubernetes-engine/docs/concepts/
    maintenance-windows-and-exclusions). So a NO_UPGRADES exclusion is undone by any non-exact version (a new
    patch), and a NO_MINOR_* one by `default` (the channel's default moves to new minor versions).
    """
    c = settings.cluster
    exclusion, spec = c.maintenance_exclusion, c.version_spec
    if exclusion is None or spec.kind == "exact":
        return None
    if exclusion.scope == "NO_UPGRADES":
        what = "a newer patch" if spec.kind == "prefix" else "a newer patch or minor version"
    elif spec.kind == "default":
        what = "a new minor version"
    else:
        return None
    return (
        f"{PROJECT}:cluster.version = {c.version!r} with cluster.maintenanceExclusion scope {exclusion.scope}: "
        f"it resolves at every preview (now {version}) and `pulumi up` upgrades the control plane to it when "
        f"it runs an older one, during the exclusion too (exclusions hold automatic upgrades only), so an up "
        f"can start an upgrade to {what}; use a prefix of the minor version the cluster runs"
        + (" with a NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES exclusion" if spec.kind == "prefix" else "")
        + ", or run `pulumi up` only outside the exclusion"
    )


WEIGHTS_LIST = "gcp:storage/getBucketObjects:getBucketObjects"
# What the listing answers for a bucket that does not exist: the data source returns the API's error as
# "Error retrieving bucket objects: googleapi: Error 404: ..." (hashicorp/terraform-provider-google-beta@93c65b2d60
# google-beta/services/storage/data_source_google_storage_bucket_objects.go:112-114), and Cloud Storage answers
# objects.list on a missing bucket 404 "The specified bucket does not exist."; a caller without
# storage.objects.list gets 403 whether or not the bucket exists
# (https://cloud.google.com/storage/docs/json_api/v1/status-codes), so only this 404 is a definite "no bucket".
NO_SUCH_BUCKET = "The specified bucket does not exist"


def check_weights(settings: Settings) -> None:
    """Is the snapshot `serving.modelPath` names in the weights bucket? Read at preview, before anything is registered.

    Without it the leaders would try to load the model for the whole startup budget. A bucket that does not exist
    stops here with the command that creates it (the download Job and the readers' IAM bindings need it too); an empty
    or wrong prefix stops with the place and both fixes, unless the download Job fills it; a refused or failed read
    only warns (the account running the preview may not read the bucket: the leaders check again before vLLM starts).
    """
    s = settings.serving
    if not s.enabled or s.weights_bucket is None:
        return
    prefix = s.model_path.rstrip("/") + "/"
    where = f"gs://{s.weights_bucket}/{prefix}"
    try:
        listed = gcp.storage.get_bucket_objects(bucket=s.weights_bucket, prefix=prefix).bucket_objects or []
    except Exception as err:  # the invoke's own error: no access, no such bucket, no credentials
        text = err.details() if callable(getattr(err, "details", None)) else str(err)
        if "Error 404" in str(text) and NO_SUCH_BUCKET in str(text):
            raise pulumi.RunError(
                f"{PROJECT}:serving.weightsBucket = {s.weights_bucket!r}: no such bucket (Cloud Storage answered 404, "
                f"{NO_SUCH_BUCKET}). Create it in the TPUs' region ({settings.region}), with uniform bucket-level "
                f"access and public access prevention:\n  "
                f"{create_bucket_command(s.weights_bucket, settings.project, settings.region)}\n"
                f"then copy the model into {where} ({weights.PREPARE_DOC}), or let the stack download it: "
                "pulumi config set --path serving.weightsDownload.enabled true"
            ) from None
        reason = ([line.strip("\t* ") for line in str(text).splitlines() if line.strip()] or [type(err).__name__])[-1]
        pulumi.log.warn(
            f"could not list {where} to check the model's weights ({reason}); the serving leaders check it before "
            "vLLM starts"
        )
        return
    problem = weights.listing_problem(s.weights_bucket, s.model_path, [o.name for o in listed])
    if problem is None:
        return
    if s.weights_download.enabled:
        pulumi.log.info(f"{problem}: the weights download Job fills it before the serving pods start")
        return
    raise pulumi.RunError(
        f"{PROJECT}:serving.weightsBucket/serving.modelPath: {problem}, so vLLM could not load "
        f"{s.model}. Copy the snapshot there ({weights.PREPARE_DOC}), or let the stack download it: "
        f"pulumi config set --path serving.weightsDownload.enabled true"
    )


def place_capacity(settings: Settings, offline: bool = False) -> placement.Placed:
    """The zone and block where the stack leaves them to the reservation, and each cube's sub-block
    (components/placement.py, components/reservation_reads.py); says what it read.

    A missing reservation or block, an unreadable one, or cubes without a usable sub-block stop the
    preview here, before any resource is registered.
    """
    try:
        placed = placement.place(settings, offline=offline)
    except reservation.ReservationError as err:
        raise pulumi.RunError(str(err)) from None
    if placed.chosen:
        pins = [f"pulumi config set zone {placed.settings.zone}"] if settings.zone is None else []
        if settings.tpu.reservation.block is None:
            pins.append(f"pulumi config set --path tpu.reservation.block '{placed.settings.tpu.reservation.block}'")
        if offline:  # stand-ins, as GKE's version list offline: said as a warning
            pulumi.log.warn("placement: " + "; ".join(placed.chosen))
        else:
            pin = f" (to keep these whatever the reservation holds later: {'; '.join(pins)})"
            pulumi.log.info("placement: " + "; ".join(placed.chosen) + pin)
    if placed.sub_blocks.errors:
        raise pulumi.RunError(placed.sub_blocks.error_message())
    return placed


# The diy backends' one organization (pulumi/pulumi pkg/backend/diy/state.go: `Organization: "organization"`).
DIY_ORGANIZATION = "organization"


def own_stack_reference() -> str:
    """The name under which this stack's backend finds the stack itself.

    Pulumi Cloud takes only `<org>/<project>/<stack>` (pulumi/pulumi pkg/backend/httpstate/backend.go
    `httpstateBackendClient.GetStackOutputs`); a diy backend (file://, gs://) initialised before CLI v3.61 takes only
    a bare stack name (pkg/backend/diy/store.go `legacyReferenceStore.ParseReference`: tokens.ParseStackName), and a
    project-scoped one a bare name too, with the current project (`projectReferenceStore.ParseReference`, case 1).
    """
    org, project, stack = pulumi.get_organization(), pulumi.get_project(), pulumi.get_stack()
    return stack if org in (None, DIY_ORGANIZATION) else f"{org}/{project}/{stack}"


def read_deployed_serving(settings: Settings) -> dict[str, DeployedRole]:
    """The serving roles as the stack's previous update exported them (components/model/serving/deployed.py).

    Read synchronously (the plan it feeds decides deleteBeforeReplace, which cannot wait for an Output) with the
    builtin provider's `pulumi:pulumi:readStackOutputs` through the public `pulumi.runtime.invoke`, as the Node
    SDK's StackReference does (sdk/nodejs stackReference.ts `invokeSync`). From pulumi/pulumi's source (v3.259.0+,
    1b5949891b; the SDK is 3.272.0): invokes run in previews and updates alike; the builtin provider answers
    (pkg/resource/deploy/builtins.go `readStackReference`) through the backend client both backends hand the engine
    (pkg/backend/diy/backend.go, pkg/backend/httpstate/backend.go `BackendClient:`), which reads the stack's latest
    checkpoint (pkg/backend/backend.go `backendClient.GetStackOutputs`, as `pulumi stack output`; diy:
    pkg/backend/diy/state.go `getSnapshotStackOutputs`, nothing before a first deployment; Cloud:
    pkg/backend/httpstate/state.go) and returns the root stack's outputs (pkg/resource/stack/deployment.go
    `DeserializeStackOutputs`). During this update those are still the previous ones: the root stack is a same step
    (step.go `SameStep.Apply`), and new outputs are written when the deployment ends (step_executor.go
    `executeRegisterResourceOutputs`, `finalizingStackOutputs`), over the old ones after a failed update too.
    """
    if not settings.serving.enabled:
        return {}
    name = own_stack_reference()
    try:
        answer = pulumi.runtime.invoke(READ_STACK_OUTPUTS, {"name": name}).value or {}
    except Exception as err:  # the backend refused the read: plan as on a first update, and say so
        pulumi.log.warn(
            f"could not read the {SERVING_SHAPE_OUTPUT} output of stack {name} ({' '.join(str(err).split())}): "
            "serving rolls are planned from the settings alone, as on a stack's first update"
        )
        return {}
    value = (answer.get("outputs") or {}).get(SERVING_SHAPE_OUTPUT)
    roles, warnings = parse_serving_shape(value, settings.tpu.cube)
    for warning in warnings:
        pulumi.log.warn(warning)
    return roles


def plan_capacity(
    settings: Settings, sub_blocks: Assignment | None = None, deployed: dict[str, DeployedRole] | None = None
) -> planner.Plan:
    """Places every enabled workload's slices into the cubes before anything is created.

    A request the reservation can never hold stops the preview here; a contended mix is a warning
    naming who will wait or be preempted, with the plan as a table. Cubes on unusable sub-blocks
    do not count. Serving rolls from its `deployed` shape (read_deployed_serving).
    """
    plan = planner.plan(settings, sub_blocks, deployed)
    if plan.errors:
        raise pulumi.RunError(plan.error_message())
    for warning in plan.warnings:
        pulumi.log.warn(warning)
    pulumi.log.info(plan.table())
    return plan


def as_runtime_config(stack_config: dict[str, Any]) -> dict[str, str]:
    """Stack-file config (YAML values) in the string form the Pulumi runtime hands to programs."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_config.items()}
