"""A Kubernetes object declared from a manifest dict, for kinds whose fields are not all under `spec`.

`kubernetes.apiextensions.CustomResource` only carries `metadata` and `spec`; Kueue's
WorkloadPriorityClass keeps `value` and `description` at the top level. This registers the same
resource type (`kubernetes:<apiVersion>:<kind>`) with the manifest as its inputs, so the object
Pulumi sends is exactly the manifest the conformance tests validate.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pulumi

# The provider plugin version to run these objects with: the installed pulumi-kubernetes SDK's, as its own
# resources request (read through the public package metadata; the pins are plain releases, so no
# PEP 440 -> semver conversion is needed).
K8S_PROVIDER_VERSION = metadata.version("pulumi_kubernetes")


class KubernetesObject(pulumi.CustomResource):
    metadata: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=K8S_PROVIDER_VERSION))
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, dict(manifest), opts)

    @property
    def object_name(self) -> pulumi.Output[str]:
        """The object's name as an Output, so whatever names it also depends on it."""
        return self.metadata.apply(lambda m: m["name"])
