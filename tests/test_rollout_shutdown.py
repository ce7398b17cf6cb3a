"""The old set's pods stop cleanly: vLLM is the leader's PID 1 with a grace period no shorter than the gateway's
request timeout, and the worker's shell, as PID 1, stops Ray on SIGTERM."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.graph_queries import ROLES, lws, templates
from tests.harness import LWS, Run, ok, run_program
from tests.stack_config import P


def test_vllm_is_the_leaders_pid_1_and_gets_the_grace_period(dev: Run) -> None:
    for role in ROLES:
        obj = lws(dev, role)
        leader = templates(obj)["leader"]["spec"]
        (vllm,) = [c for c in leader["containers"] if c["name"] == "vllm-leader"]
        assert vllm["command"][:2] == ["sh", "-c"]
        last = [line for line in vllm["command"][2].splitlines() if line.strip()][-1]
        assert shlex.split(last)[:3] == ["exec", "vllm", "serve"]
        # Both templates: the leader's vLLM needs its Ray workers until its last request.
        for part in ("leader", "worker"):
            assert templates(obj)[part]["spec"]["terminationGracePeriodSeconds"] == 360


def test_the_grace_period_is_a_setting_no_shorter_than_the_gateways_request_timeout() -> None:
    run = ok({f"{P}:serving": {"terminationGracePeriodSeconds": 900}})
    assert templates(lws(run, "decode"))["worker"]["spec"]["terminationGracePeriodSeconds"] == 900
    short = run_program({f"{P}:serving": {"terminationGracePeriodSeconds": 299}})
    assert short.error is not None and short.registrations == []
    assert f"{P}:serving.terminationGracePeriodSeconds = 299: at least 300 seconds" in str(short.error)


def test_the_lws_delete_waits_out_a_grace_period_longer_than_the_providers_window(dev: Run) -> None:
    """A foreground delete waits for the pods, each up to its grace period: past pulumi-kubernetes' 10-minute delete
    wait, `destroy` and a rollout's delete of the old set would fail while pods still finish requests. The default
    grace period fits that window, so the default stacks set no timeout (nothing changes for them)."""
    for role in ROLES:
        assert dev.get(LWS, f"serving-{role}").options["customTimeouts"] == {}
    run = ok({f"{P}:serving": {"terminationGracePeriodSeconds": 900}})
    for role in ROLES:
        timeouts = run.get(LWS, f"serving-{role}").options["customTimeouts"]
        assert set(timeouts) == {"delete"} and timeouts["delete"].endswith("s")
        assert int(timeouts["delete"][:-1]) > 900


HELPER = "/workspace/vllm/examples/online_serving/multi-node-serving.sh"


def _fake_worker(tmp_path: Path, dev: Run) -> tuple[str, dict[str, str]]:
    """The decode worker's `sh -c` script as Kubernetes runs it, with the vLLM helper and `ray` faked: the helper
    blocks as `ray start --block` does, `ray stop` is recorded."""
    (worker,) = templates(lws(dev, "decode"))["worker"]["spec"]["containers"]
    assert worker["command"][:2] == ["sh", "-c"]
    helper, ray = tmp_path / "multi-node-serving.sh", tmp_path / "bin" / "ray"
    ray.parent.mkdir()
    helper.write_text(f"#!/bin/sh\necho started > {tmp_path}/started\nsleep 600\n")
    ray.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/ray.log\n')
    ray.chmod(0o755)
    # Kubernetes expands $(VAR) in a command before the shell runs.
    script = worker["command"][2].replace(HELPER, str(helper)).replace("$(LWS_LEADER_ADDRESS)", "10.0.0.1")
    return script, {**os.environ, "PATH": f"{ray.parent}:{os.environ['PATH']}"}


def _sigterm_stops_ray(tmp_path: Path, dev: Run, prefix: list[str], pid_1: Callable[[int], int]) -> None:
    """Runs the fake worker under `prefix`, sends SIGTERM to the pid `pid_1` finds (from the started process's pid)
    once the helper runs, and checks that the shell stopped Ray and exited 0 within seconds."""
    script, env = _fake_worker(tmp_path, dev)
    proc = subprocess.Popen([*prefix, "sh", "-c", script], env=env)
    try:
        for _ in range(200):
            if (tmp_path / "started").exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        os.kill(pid_1(proc.pid), 15)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
    assert (tmp_path / "ray.log").read_text().split() == ["stop"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_the_workers_shell_handles_sigterm_and_stops_ray(dev: Run, tmp_path: Path) -> None:
    """The worker's shell is the container's PID 1, and a PID 1 receives only the signals it has a handler for
    (pid_namespaces(7)): the kernel drops SIGTERM otherwise, and the kubelet kills the pod at the end of the grace
    period. So the shell must catch SIGTERM (its SigCgt mask in /proc, the kernel's own test) and, on it, stop
    Ray and exit."""

    def handled(pid: int) -> int:
        caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)$", Path(f"/proc/{pid}/status").read_text(), re.M)[1], 16)
        assert caught & (1 << (15 - 1)), "the worker's shell has no SIGTERM handler: as PID 1 it ignores SIGTERM"
        return pid

    _sigterm_stops_ray(tmp_path, dev, [], handled)


def test_the_worker_stops_on_sigterm_as_pid_1(dev: Run, tmp_path: Path) -> None:
    """The same as the kubelet sees it: the script as PID 1 of a PID namespace of its own (`unshare`, root only),
    SIGTERM sent from outside it, as the container runtime does; it must end within seconds, not the grace period."""
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("unshare --pid needs root")

    def namespaced(pid: int) -> int:
        (child,) = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        assert re.search(r"^NSpid:\s+\d+\s+1$", Path(f"/proc/{child}/status").read_text(), re.M)  # PID 1 in there
        return int(child)

    _sigterm_stops_ray(tmp_path, dev, ["unshare", "--pid", "--fork", "--kill-child"], namespaced)
