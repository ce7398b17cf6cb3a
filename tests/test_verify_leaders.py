"""verify --pool: waiting for the InferencePool's leaders to be Ready before any request, against a fake pool
and the pods its selector finds, on a fake clock."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta, V1Pod, V1PodCondition, V1PodList, V1PodStatus

from components.cli import probe_pod, verify
from tests.fakes import Clock
from tests.stack_config import ROOT
from tests.verify_fixtures import CHAT, COMPLETIONS, MODEL, FakeCustomObjects, Stub, argv, serve


@pytest.fixture
def stub() -> Iterator[Stub]:
    yield from serve()


SELECTOR = {"llm-d.ai/guide": "pd-disaggregation", "leaderworkerset.sigs.k8s.io/worker-index": "0"}
POOL = {
    "apiVersion": "inference.networking.k8s.io/v1",
    "kind": "InferencePool",
    "spec": {"selector": {"matchLabels": SELECTOR}},
}
LABEL_SELECTOR = "leaderworkerset.sigs.k8s.io/worker-index=0,llm-d.ai/guide=pd-disaggregation"


def pod(role: str, ready: bool, slot: int | None = None) -> V1Pod:
    condition = V1PodCondition(type="Ready", status="True" if ready else "False")
    labels = {**SELECTOR, "llm-d.ai/role": role, **({"gke-tpu-slicing/burst-slot": str(slot)} if slot else {})}
    meta = V1ObjectMeta(name=f"{role}-0", labels=labels)
    return V1Pod(metadata=meta, status=V1PodStatus(conditions=[condition]))


class FakePods:
    """Answers each list with the next scripted pod list (the last one repeats)."""

    def __init__(self, *lists: list[V1Pod]) -> None:
        self.lists = list(lists)
        self.selectors: list[tuple[str, str]] = []

    def list_namespaced_pod(self, namespace: str, *, label_selector: str) -> V1PodList:
        self.selectors.append((namespace, label_selector))
        return V1PodList(items=self.lists.pop(0) if len(self.lists) > 1 else self.lists[0])


def waited(
    stub: Stub,
    extra: list[str],
    pods: FakePods,
    objects: FakeCustomObjects | None = None,
    base: list[str] | None = None,
) -> tuple[int, Clock]:
    """verify.main for pool pd against the fake pool and pods, on a fake clock: its exit code and the clock."""
    clock = Clock(1000.0)  # time.monotonic starts anywhere, not at 0
    args = argv(stub, "--pool", "pd", *extra) if base is None else base
    code = verify.main(args, api=objects or FakeCustomObjects(pool=POOL), pods=pods, sleep=clock.sleep, clock=clock)
    return code, clock


def test_main_waits_for_the_leaders_then_sends_the_requests(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    objects = FakeCustomObjects(pool=POOL)
    pods = FakePods(
        [pod("prefill", False), pod("decode", False)],
        [pod("prefill", True), pod("decode", False)],
        [pod("prefill", True), pod("decode", False)],
        [pod("prefill", True), pod("decode", True)],
    )
    code, clock = waited(stub, ["--leaders", "2", "--poll", "60", "--timeout", "3600"], pods, objects)

    assert code == 0
    assert objects.calls[0] == ("inference.networking.k8s.io", "v1", "ns", "inferencepools", "pd")
    assert pods.selectors[0] == ("ns", LABEL_SELECTOR)  # the pool's own selector, as a label selector string
    assert clock.sleeps == [60, 60, 60]
    progress = [line for line in capsys.readouterr().err.splitlines() if line.startswith("leaders ready")]
    assert progress == [  # one line per change, not per poll
        f"leaders ready: 0/2 (decode 0/1, prefill 0/1); waiting up to 3600s more (selector {LABEL_SELECTOR})",
        f"leaders ready: 1/2 (decode 0/1, prefill 1/1); waiting up to 3540s more (selector {LABEL_SELECTOR})",
        "leaders ready: 2/2 (decode 1/1, prefill 1/1): all Ready",
    ]
    assert stub.paths() == [COMPLETIONS, CHAT]  # only after the leaders were ready


def test_main_gives_up_after_the_timeout_without_sending_requests(
    stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    code, clock = waited(
        stub, ["--timeout", "100", "--poll", "30"], FakePods([pod("prefill", True), pod("decode", False)])
    )

    assert code == 1
    assert clock.sleeps == [30, 30, 30, 10]  # bounded by the timeout, not a whole poll past it
    err = capsys.readouterr().err
    assert "error: InferencePool ns/pd: leaders ready: 1/2 (decode 0/1, prefill 1/1) after 100s" in err
    assert stub.received == []


@pytest.mark.parametrize(
    ("leaders", "pods"),
    [
        (["--leaders", "8"], [pod("prefill", True), pod("decode", True)]),  # Kueue admits groups one by one
        ([], []),  # an empty pool is not ready
    ],
)
def test_leaders_that_do_not_exist_yet_keep_it_waiting(stub: Stub, leaders: list[str], pods: list[V1Pod]) -> None:
    code, _ = waited(stub, ["--timeout", "60", "--poll", "30", *leaders], FakePods(pods))
    assert code == 1 and stub.received == []


def test_a_burst_slot_loading_or_held_pending_does_not_keep_it_waiting(
    stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pool selects burst slots' leaders too: one loading, or gated after a preemption, never blocks a verify of
    the floors (`servingLeaders` counts the floors)."""
    floors = [pod("prefill", True), pod("decode", True)]
    code, _ = waited(
        stub, ["--leaders", "2", "--timeout", "60", "--poll", "30"], FakePods([*floors, pod("decode", False, 1)])
    )
    assert code == 0 and stub.paths() == [COMPLETIONS, CHAT]
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("leaders ready")]
    assert line == "leaders ready: 2/2 (decode 1/1, prefill 1/1); burst slots 0/1 (not waited for): all Ready"
    # A floor's leader still blocks, and a ready slot stands in for no floor.
    slow = [pod("prefill", True), pod("decode", False), pod("decode", True, 1)]
    code, _ = waited(stub, ["--leaders", "2", "--timeout", "60", "--poll", "30"], FakePods(slow))
    assert code == 1


def test_a_missing_pool_is_a_clear_error(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    code, clock = waited(stub, [], FakePods([]), FakeCustomObjects())
    assert code == 1
    assert "error: InferencePool ns/pd not found (inference.networking.k8s.io/v1)" in capsys.readouterr().err
    assert clock.sleeps == [] and stub.received == []


def test_stack_outputs_name_the_pool_and_the_leader_count(stub: Stub, tmp_path: Any) -> None:
    outputs = tmp_path / "outputs.json"
    names = {"gatewayName": "gw", "gatewayNamespace": "ns", "servedModelName": MODEL, "inferencePool": "pd"}
    outputs.write_text(json.dumps({**names, "servingLeaders": 2}))
    objects, pods = FakeCustomObjects(pool=POOL), FakePods([pod("prefill", True), pod("decode", True)])
    code, _ = waited(
        stub, [], pods, objects, base=["--stack-outputs", str(outputs), "--port", str(stub.port), "--direct"]
    )

    assert code == 0
    assert objects.calls[0][3:] == ("inferencepools", "pd") and pods.selectors
    assert verify.read_stack_outputs(str(outputs))["leaders"] == "2"


class RecordingCore(FakePods):
    """The CoreV1Api calls of verify's default path, each recorded as the RBAC (verb, resource, namespace) it needs
    (the client's read_* is `get`, list_* `list`; `_log` is the pods/log subresource)."""

    def __init__(self, *lists: list[V1Pod]) -> None:
        super().__init__(*lists)
        self.needs: set[tuple[str, str, str]] = set()

    def list_namespaced_pod(self, namespace: str, *, label_selector: str) -> V1PodList:
        self.needs.add(("list", "pods", namespace))
        return super().list_namespaced_pod(namespace, label_selector=label_selector)

    def create_namespaced_pod(self, namespace: str, body: Any) -> None:
        self.needs.add(("create", "pods", namespace))

    def read_namespaced_pod(self, name: str, namespace: str) -> V1Pod:
        self.needs.add(("get", "pods", namespace))
        return V1Pod(status=V1PodStatus(phase="Succeeded"))

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str) -> str:
        self.needs.add(("get", "pods/log", namespace))
        body = json.dumps({"choices": [{"text": "fine"}]})
        return "".join(f"{probe_pod.MARK} kind={k} attempts=1 status=200 seconds=1\n{body}\n{probe_pod.MARK} end\n"
                       for k in ("completions", "chat"))  # fmt: skip

    def delete_namespaced_pod(self, name: str, namespace: str, grace_period_seconds: int) -> None:
        self.needs.add(("delete", "pods", namespace))


def test_the_permissions_page_names_every_verb_verify_needs() -> None:
    """docs/permissions.md lists `verb resource` pairs per namespace, as `kubectl auth can-i` takes them."""
    objects, core = FakeCustomObjects(pool=POOL), RecordingCore([pod("prefill", True), pod("decode", True)])
    args = ["--namespace", "ns", "--model", MODEL, "--pool", "pd"]
    assert verify.main(args, api=objects, pods=core, sleep=lambda _s: None, clock=Clock()) == 0
    needs = core.needs | {("get", call[3], call[2]) for call in objects.calls}
    page = (ROOT / "docs" / "permissions.md").read_text(encoding="utf-8")
    paragraph = page[page.index("`verify` (after `pulumi up`") :].split("\n\n", 1)[0].replace("\n", " ")
    workload, default = paragraph.split(" in the workload namespace", 1)
    pairs = re.compile(r"`(get|list|create|delete) ([a-z/]+)`")
    named = {(*pair, "ns") for pair in pairs.findall(workload)}
    named |= {(*pair, probe_pod.PROBE_NAMESPACE) for pair in pairs.findall(default.split(" in `default`", 1)[0])}
    assert needs == named
