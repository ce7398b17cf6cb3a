"""What a chart's release script changes between its git tag and the package its registry or repository serves.

The add-on charts are rendered offline from their sources at the release tag (components/cli/charts.py). The
published packages are not those sources byte for byte: each project's release script rewrites the image
repository, tag and pull policy in `values.yaml` and `helm package --version --app-version` sets `Chart.yaml`'s
version and appVersion. `published` applies the same edits to the loaded files, so what is rendered is what
`helm.v4.Chart` pulls. Sources (main branch; the steps are the same at the pinned tags):

* Kueue: kubernetes-sigs/kueue@28842db0 hack/helm-chart-package.sh, steps "Update the image repo, tag and policy"
  and "Update the KueueViz images repo, tag and policy" (`registry.k8s.io/kueue` for a release tag), then
  `helm package --version ${GIT_TAG#v} --app-version ${GIT_TAG}`.
* JobSet: kubernetes-sigs/jobset@0bbedeab hack/helm-chart-package.sh, "Update the image repo, tag and policy"
  (`registry.k8s.io/jobset`), then `helm package --version ${GIT_TAG#v} --app-version ${GIT_TAG}`.
* LWS: kubernetes-sigs/lws@1137cb80 hack/push-chart.sh, "Update the image repo, tag and policy" and
  `helm package --version ${chart_version} --app-version ${chart_version}` with `chart_version` = the tag, its `v`
  kept; at v0.8.0 the image is under `image.manager` (charts/lws/values.yaml:12-17), where the script's
  `.image.*` paths point on main.
* llm-d router: llm-d/llm-d-router@04ee2866 hack/push-chart.sh: on a release tag, the endpoint picker's image
  in the gateway chart's own values (`router.epp.image.*`), then `helm package --version ${EXTRA_TAG}
  --app-version ${EXTRA_TAG}`. Its latency-predictor images take a tag the release workflow passes in
  (`LATENCY_PREDICTOR_TAG`) that the git tag does not record; they render only with
  `router.latencyPredictor.enabled`, which the program leaves off (tests/test_charts.py checks that no such
  container is rendered), so they are not edited here.
* KEDA: nothing. Its chart is published to the Helm repository kedacore.github.io/charts, whose package is committed
  at the tag (KEDA_PACKAGE): its values.yaml is the source's byte for byte, its Chart.yaml the source's version and
  appVersion `2.20.2`, no `v` (the image tags default to the appVersion, templates/manager/deployment.yaml).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

KEDA_PACKAGE = "kedacore/charts@cbb9bb8c docs/keda-2.20.2.tgz (index.yaml digest db60b1fa)"


@dataclass(frozen=True)
class ReleaseEdits:
    """One project's release-script edits: values paths set to a value (`{tag}` = the git tag), and the version form."""

    values: tuple[tuple[tuple[str, ...], str], ...]
    version_keeps_v: bool  # Chart.yaml `version`: the tag as is (LWS, router) or without its leading `v`
    source: str
    app_version_keeps_v: bool = True  # Chart.yaml `appVersion` likewise (KEDA's has none: its images are so tagged)


def _image(prefix: tuple[str, ...], repository: str, *, registry: str | None = None) -> tuple:
    repo = (
        (((*prefix, "registry"), registry), ((*prefix, "repository"), repository))
        if registry
        else (((*prefix, "repository"), repository),)
    )
    return (*repo, ((*prefix, "tag"), "{tag}"), ((*prefix, "pullPolicy"), "IfNotPresent"))


EDITS: dict[str, ReleaseEdits] = {
    "kueue": ReleaseEdits(
        values=(
            *_image(("controllerManager", "manager", "image"), "registry.k8s.io/kueue/kueue"),
            *_image(("kueueViz", "backend", "image"), "registry.k8s.io/kueue/kueueviz-backend"),
            *_image(("kueueViz", "frontend", "image"), "registry.k8s.io/kueue/kueueviz-frontend"),
        ),
        version_keeps_v=False,
        source="kubernetes-sigs/kueue@28842db0 hack/helm-chart-package.sh",
    ),
    "jobset": ReleaseEdits(
        values=_image(("image",), "registry.k8s.io/jobset/jobset"),
        version_keeps_v=False,
        source="kubernetes-sigs/jobset@0bbedeab hack/helm-chart-package.sh",
    ),
    "lws": ReleaseEdits(
        values=_image(("image", "manager"), "registry.k8s.io/lws/lws"),
        version_keeps_v=True,
        source="kubernetes-sigs/lws@1137cb80 hack/push-chart.sh",
    ),
    "llm-d-router-gateway": ReleaseEdits(
        values=_image(("router", "epp", "image"), "llm-d-router-endpoint-picker", registry="ghcr.io/llm-d"),
        version_keeps_v=True,
        source="llm-d/llm-d-router@04ee2866 hack/push-chart.sh",
    ),
    "keda": ReleaseEdits(values=(), version_keeps_v=False, source=KEDA_PACKAGE, app_version_keeps_v=False),
}


def _set(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = tree
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[path[-1]] = value


def published(
    chart: str, tag: str, values: dict[str, Any], metadata: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(values.yaml, Chart.yaml) of the package the registry serves for `chart` released from git tag `tag`.

    Pure: the inputs are not changed. `tag` is the git tag (`v0.17.4`); a chart without recorded edits is an error.
    """
    if chart not in EDITS:
        raise KeyError(f"no release edits recorded for chart {chart!r} (known: {', '.join(sorted(EDITS))})")
    if not tag.startswith("v"):
        raise ValueError(f"a release tag such as v0.17.4, not {tag!r}")
    edits = EDITS[chart]
    out_values, out_meta = copy.deepcopy(values), copy.deepcopy(metadata)
    for path, value in edits.values:
        _set(out_values, path, value.format(tag=tag))
    out_meta["version"] = tag if edits.version_keeps_v else tag.removeprefix("v")
    out_meta["appVersion"] = tag if edits.app_version_keeps_v else tag.removeprefix("v")
    return out_values, out_meta
