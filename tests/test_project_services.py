"""The project's APIs (components/project_services.py): which are enabled, and what waits for them."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from tests.harness import Run, _sync_await, run_program


def test_apis_and_ai_zones_preview_feature(dev: Run) -> None:
    services = sorted(r.inputs["service"] for r in dev.of_type("gcp:projects/service:Service"))
    # monitoring: the observability section's dashboard and alert policies (on in the dev stack);
    # storage: serving's XLA cache bucket
    apis = ["container", "compute", "iam", "cloudresourcemanager", "file", "networkservices", "monitoring", "storage"]
    assert services == sorted(f"{api}.googleapis.com" for api in apis)
    assert all(r.inputs["disableOnDestroy"] is False for r in dev.of_type("gcp:projects/service:Service"))
    feature = dev.get("gcp:compute/previewFeature:PreviewFeature", "project-ai-zones-visibility")
    assert feature.inputs["name"] == "ai-zones-visibility"
    assert feature.inputs["activationStatus"] == "ENABLED"
    assert feature.inputs["rolloutOperation"] == {
        "rolloutInput": {"predefinedRolloutPlan": "ROLLOUT_PLAN_FAST_ROLLOUT"}
    }


def test_project_lookup_waits_for_the_resource_manager_api(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    invoke_output = pulumi.runtime.invoke_output

    def recording(token: str, props: Any, opts: Any = None, typ: Any = None, **kwargs: Any) -> Any:
        if token == "gcp:organizations/getProject:getProject":
            seen.append(opts)
        return invoke_output(token, props, opts, typ, **kwargs)

    monkeypatch.setattr(pulumi.runtime, "invoke_output", recording)
    run = run_program()
    assert run.error is None, run.error
    assert len(seen) == 2  # serving's Workload Identity members and KEDA's operator's
    crm = run.get("gcp:projects/service:Service", "project-cloudresourcemanager")
    assert crm.inputs["service"] == "cloudresourcemanager.googleapis.com"
    for opts in seen:
        assert opts is not None
        deps = opts.depends_on if isinstance(opts.depends_on, list) else [opts.depends_on]
        assert crm.urn in [_sync_await(d.urn.future()) for d in deps]
