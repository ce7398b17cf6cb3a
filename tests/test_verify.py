"""`python -m components verify`: the Gateway's address from the cluster or the stack outputs, both endpoints
checked, exit codes and usage errors, and the verify command the program prints."""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from components.cli import verify
from components.cli.verify import GatewayNotReady, VerifyError
from components.cli.verify_reads import NoKubeconfig
from components.model.config.serving_settings import ServingSettings
from tests.verify_fixtures import (
    CHAT,
    COMPLETIONS,
    MODEL,
    READ_TIMEOUT,
    TWELVE,
    FakeCustomObjects,
    Step,
    Stub,
    argv,
    gateway_with,
    serve,
)


@pytest.fixture
def stub() -> Iterator[Stub]:
    yield from serve()


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCustomObjects:
    """What the api factory answers, recording the kubeconfig and context it was given."""
    api = FakeCustomObjects()

    def factory(kubeconfig: str | None = None, context: str | None = None) -> FakeCustomObjects:
        api.opened.append((kubeconfig, context))
        return api

    monkeypatch.setattr(verify, "custom_objects_api", factory)
    return api


def main(stub: Stub, args: list[str]) -> int:
    return verify.main(args, sleep=stub.sleeps.append)


# ---------------------------------------------------------------------------------------------
# gateway_address


def test_gateway_address_reads_the_first_status_address() -> None:
    api = FakeCustomObjects(gateway_with("10.128.0.7"))

    assert verify.gateway_address("llm-d-inference-gateway", "llm-d-pd", api) == "10.128.0.7"
    assert api.calls == [("gateway.networking.k8s.io", "v1", "llm-d-pd", "gateways", "llm-d-inference-gateway")]


@pytest.mark.parametrize(
    "gateway",
    [
        gateway_with(None),
        {"status": {}},
        {"status": {"addresses": []}},
        {"status": {"addresses": [{"type": "IPAddress", "value": ""}]}},
        {"status": None},
    ],
)
def test_gateway_without_an_address_is_a_clear_error(gateway: dict[str, Any]) -> None:
    with pytest.raises(GatewayNotReady, match=r"Gateway ns/gw has no address yet"):
        verify.gateway_address("gw", "ns", FakeCustomObjects(gateway))


def test_missing_gateway_and_api_errors_are_clear() -> None:
    with pytest.raises(VerifyError, match=r"Gateway ns/gw not found") as missing:
        verify.gateway_address("gw", "ns", FakeCustomObjects(error=ApiException(status=404, reason="Not Found")))
    assert not isinstance(missing.value, GatewayNotReady)
    with pytest.raises(VerifyError, match=r"cannot read Gateway ns/gw: HTTP 403 Forbidden"):
        verify.gateway_address("gw", "ns", FakeCustomObjects(error=ApiException(status=403, reason="Forbidden")))


def test_unloadable_kubeconfig_is_a_verify_error(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(NoKubeconfig, match=f"no usable kubeconfig in {tmp_path / 'missing'}"):
        verify.custom_objects_api(kubeconfig=str(tmp_path / "missing"))


# ---------------------------------------------------------------------------------------------
# main


def test_main_looks_up_the_gateway_and_checks_both_endpoints(
    stub: Stub, cluster: FakeCustomObjects, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(stub, [*argv(stub, "--gateway-name", "gw"), "--kubeconfig", "/tmp/kc", "--context", "ctx"]) == 0

    assert cluster.calls == [("gateway.networking.k8s.io", "v1", "ns", "gateways", "gw")]
    assert cluster.opened == [("/tmp/kc", "ctx")]
    assert stub.paths() == [COMPLETIONS, CHAT]
    assert [r.json()["model"] for r in stub.received] == [MODEL, MODEL]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"target {stub.url} (Gateway ns/gw, from this machine) model={MODEL}"
    assert lines[1].startswith("completions OK   status=200 attempts=1 latency_ms=")
    assert lines[2].startswith("chat        OK   status=200 attempts=1 latency_ms=")
    assert all(line.endswith(f"first_tokens={json.dumps(TWELVE)}") for line in lines[1:])


def test_main_reads_stack_outputs_from_a_file_or_stdin_and_flags_override_them(
    stub: Stub, cluster: FakeCustomObjects, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = tmp_path / "outputs.json"
    names = {"gatewayName": "llm-d-inference-gateway", "gatewayNamespace": "llm-d-pd", "servedModelName": "m/x"}
    outputs.write_text(json.dumps({**names, "clusterName": "c", "kubeconfig": "[secret]"}))
    assert main(stub, ["--stack-outputs", str(outputs), "--port", str(stub.port), "--direct"]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(names)))
    assert main(stub, ["--stack-outputs", "-", "--model", "from-flag", "--port", str(stub.port), "--direct"]) == 0

    assert cluster.calls == [("gateway.networking.k8s.io", "v1", "llm-d-pd", "gateways", "llm-d-inference-gateway")] * 2
    assert [r.json()["model"] for r in stub.received] == ["m/x", "m/x", "from-flag", "from-flag"]


def test_main_with_address_skips_the_cluster(stub: Stub, cluster: FakeCustomObjects) -> None:
    assert main(stub, ["--address", "127.0.0.1", "--port", str(stub.port), "--model", MODEL]) == 0
    assert (cluster.opened, cluster.calls) == ([], [])
    assert stub.paths() == [COMPLETIONS, CHAT]


@pytest.mark.usefixtures("cluster")
def test_main_timeout_exits_non_zero(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    stub.script(COMPLETIONS, Step(delay=5))
    stub.script(CHAT, Step(delay=5))
    timeouts = ["--attempts", "2", "--read-timeout", str(READ_TIMEOUT), "--connect-timeout", "1"]

    assert main(stub, argv(stub, *timeouts)) == 1

    out, err = capsys.readouterr()
    assert 'completions FAIL status=- attempts=2 latency_ms=- error="timeout' in out
    assert 'chat        FAIL status=- attempts=2 latency_ms=- error="timeout' in out
    assert "completions: attempt 1/2 failed: timeout" in err
    assert stub.sleeps == [1.0, 1.0]
    assert stub.paths() == [COMPLETIONS, COMPLETIONS, CHAT, CHAT]


@pytest.mark.parametrize(
    ("path", "body", "shown"),
    [
        (CHAT, b"not json", ["completions OK", "chat        FAIL status=200 attempts=2", "not JSON"]),
        (
            COMPLETIONS,
            b'{"id": "x", "object": "text_completion"}',
            ["chat        OK", "completions FAIL status=200 attempts=2", "no non-empty 'choices' list"],
        ),
    ],
)
@pytest.mark.usefixtures("cluster")
def test_main_malformed_answers_exit_non_zero(
    stub: Stub, capsys: pytest.CaptureFixture[str], path: str, body: bytes, shown: list[str]
) -> None:
    stub.script(path, Step(body=body))

    assert main(stub, argv(stub, "--attempts", "2")) == 1

    out = capsys.readouterr().out
    assert all(line in out for line in shown), out


def test_main_gateway_without_address_exits_non_zero(
    stub: Stub, cluster: FakeCustomObjects, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.objects["gateways"] = gateway_with(None)

    assert main(stub, ["--namespace", "ns", "--model", MODEL, "--port", str(stub.port)]) == 1

    assert "error: Gateway ns/llm-d-inference-gateway has no address yet" in capsys.readouterr().err
    assert stub.received == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--namespace", "ns"], "--model"),
        (["--model", MODEL], "--namespace"),
        (["--model", MODEL, "--namespace", "ns", "--attempts", "0"], "must be > 0"),
        (["--stack-outputs", "/nonexistent/outputs.json"], "cannot read stack outputs"),
        (["--address", "127.0.0.1", "--model", MODEL, "--pool", "pd"], "--pool needs the cluster"),
    ],
)
def test_main_usage_errors_exit_2(
    args: list[str], message: str, cluster: FakeCustomObjects, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        verify.main(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert (cluster.opened, cluster.calls) == ([], [])


# ---------------------------------------------------------------------------------------------
# The printed command and its URL


def test_command_is_shell_quoted() -> None:
    line = verify.command(
        "llm-d-inference-gateway", "llm-d-pd", "Qwen/Qwen3.5 397B; rm -rf /", pool="pd", leaders=8, timeout=14400
    )

    assert shlex.split(line) == [
        "python", "-m", "components", "verify",
        "--gateway-name", "llm-d-inference-gateway", "--namespace", "llm-d-pd",
        "--model", "Qwen/Qwen3.5 397B; rm -rf /",
        "--pool", "pd", "--leaders", "8", "--timeout", "14400",
    ]  # fmt: skip
    # and the command parses as this module's own arguments
    args = verify._parser().parse_args(shlex.split(line)[4:])
    assert (args.pool, args.leaders, args.timeout) == ("pd", 8, 14400.0)


def test_base_url() -> None:
    assert verify.base_url("10.0.0.5") == "http://10.0.0.5"
    assert verify.base_url("fd00::5", "https", 8443) == "https://[fd00::5]:8443"
    assert verify.base_url("gw.internal", port=80) == "http://gw.internal:80"


def test_the_help_names_every_stack_output_it_reads(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        verify.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert [key for key in verify.STACK_OUTPUT_KEYS.values() if key not in text] == []


def test_the_default_wait_is_the_leaders_startup_budget() -> None:
    # verify imports no settings (it runs from any shell); its default is serving.startupTimeoutSeconds' default.
    assert ServingSettings.model_fields["startup_timeout_seconds"].default == verify.DEFAULT_WAIT_S
