"""The offline commands fetch the pinned chart sources they need on first use, each file checked against its pinned
sha256, so a user's clone (no ../shared, an empty cache) renders what docs/offline.md shows. Nothing here reaches the
network: the files are served from ../shared by a fake opener, and a socket to anywhere but this machine fails."""

from __future__ import annotations

import io
import re
import shlex
import socket
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from components.cli import charts, upstream_files
from components.cli.render import main as render_main
from tests import upstream
from tests.stack_config import ROOT, dev_settings

OFFLINE_MD = ROOT / "docs" / "offline.md"


class Served:
    """An opener answering each pinned URL with the file ../shared holds for it (`tamper`: that path's bytes
    changed; `down`: no network), recording what was asked."""

    def __init__(self, source: Path, tamper: str | None = None, down: bool = False) -> None:
        self.source, self.tamper, self.down = source, tamper, down
        self.paths = {entry.url: entry.path for entry in upstream_files.load()}
        self.asked: list[str] = []

    def __call__(self, url: str, timeout: float | None = None) -> io.BytesIO:
        self.asked.append(url)
        if self.down:
            raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
        path = self.paths[url]
        data = (self.source / path).read_bytes()
        return io.BytesIO(data + b"\n# changed" if path == self.tamper else data)


@pytest.fixture
def first_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A user's clone on first use: no ../shared, no variable, an empty cache (returned), no network."""
    upstream.require("charts")  # what the fake opener serves
    monkeypatch.delenv(upstream_files.ROOT_ENV, raising=False)
    monkeypatch.setattr(upstream_files, "SHARED", tmp_path / "no-shared")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(charts, "_CACHE", {})
    real_connect = socket.socket.connect

    def local_only(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise OSError(f"network blocked in this test: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)
    return tmp_path / "cache" / "gke-tpu-slicing" / "upstream"


def _documented_render() -> tuple[list[str], str]:
    """The render command docs/offline.md shows (prod) and the summary line it prints."""
    page = OFFLINE_MD.read_text(encoding="utf-8")
    found = re.search(r"```\n\$ python -m components render ((?:.*\\\n)*.*)\n(?:warning: .*\n)*(stack .*)", page)
    assert found, "offline.md: the render example is missing"
    args, shown = found.groups()
    # The page writes the digests a reader fills in as sha256:<digest>; any well-formed one renders the same.
    return shlex.split(args.replace("\\\n", " ").replace("sha256:<digest>", f"sha256:{'0' * 64}")), shown


def test_render_fetches_what_it_needs_once_and_shows_the_documented_chart_objects(
    first_use: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = Served(upstream.root())
    monkeypatch.setattr(upstream_files, "OPENER", served)
    words, shown = _documented_render()
    argv = [w.replace("rendered/prod", str(tmp_path / "prod")) for w in words]

    def render() -> tuple[int, str, str]:
        code = render_main(argv)
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = render()
    assert code == 0, err
    assert shown.replace("rendered/prod", str(tmp_path / "prod")) in out, out  # the chart objects, as documented
    # The four charts prod installs, each fetched once, file by file, and only those.
    fetching = [line for line in err.splitlines() if line.startswith("fetching ")]
    assert len(fetching) == 4 and all(f"into {first_use} (each checked" in line for line in fetching), err
    wanted = [
        entry
        for folder in (
            "charts/jobset-v0.11.1",
            "charts/kueue-v0.17.4",
            "charts/lws-v0.8.0",
            "charts/llm-d-router-v0.10.0",
        )
        for entry in upstream_files.under(folder)
    ]
    assert sorted(served.asked) == sorted(entry.url for entry in wanted)  # each pinned file once
    assert upstream_files.problems(first_use, wanted) == {}
    # The second run reads the cache: nothing asked, nothing said.
    asked = len(served.asked)
    code, out_again, err_again = render()
    assert code == 0 and len(served.asked) == asked and "fetching" not in err_again
    assert shown.replace("rendered/prod", str(tmp_path / "prod")) in out_again


def _lws() -> charts.Release:
    a = dev_settings().addons.lws
    return charts.Release("lws-chart", a.chart, a.version, "lws", a.namespace)


def _lws_files() -> tuple[str, int]:
    """dev's LWS chart folder in the upstream root and how many files it pins."""
    folder = f"charts/lws-v{_lws().version}"
    return folder, len(upstream_files.under(folder))


def test_a_download_that_differs_from_its_pin_is_not_written_and_the_chart_is_not_rendered(
    first_use: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, count = _lws_files()
    tampered = f"{folder}/templates/manager/deployment.yaml"
    assert tampered in {entry.path for entry in upstream_files.under(folder)}
    monkeypatch.setattr(upstream_files, "OPENER", Served(upstream.root(), tamper=tampered))
    with pytest.raises(charts.ChartUnavailable) as refused:
        charts.source_dir(_lws())
    message = str(refused.value)
    source = f"oci://registry.k8s.io/lws/charts/lws {_lws().version}"
    assert f"1 of {count} source files of {source} are missing or altered in {first_use}" in message
    assert f"{tampered}: " in message and "not written" in message and "`python -m tests.upstream fetch`" in message
    assert not (first_use / tampered).exists()
    assert (first_use / folder / "Chart.yaml").is_file()  # the files that verified are kept


def test_with_no_network_the_first_failure_says_so_and_the_rest_are_not_tried(
    first_use: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = Served(upstream.root(), down=True)
    monkeypatch.setattr(upstream_files, "OPENER", served)
    _, count = _lws_files()
    with pytest.raises(charts.ChartUnavailable, match=rf"fetching them failed \({count} files; .*Temporary failure"):
        charts.source_dir(_lws())
    assert len(served.asked) == 1
