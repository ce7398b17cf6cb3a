"""`python -m components render`: every object the program applies, offline, byte-identical from run to run."""

from __future__ import annotations

import filecmp
import os
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from components.cli.plan import secret_keys
from components.cli.render import INDEX, REDACTED, RESERVED, portable
from components.cli.render import main as render_main
from tests.harness import Run, normalize, ok, run_program, unwrap
from tests.stack_config import ROOT, P, set_arguments

TOKEN = "hf_render_test_token"


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The dev stack rendered twice: in this process, and as `python -m components render` in another
    process with another hash seed (so set or dict ordering that varies between processes shows)."""
    base = tmp_path_factory.mktemp("render")
    args = ["--stack", "dev", *set_arguments("dev"), "--set", f"hfToken={TOKEN}"]
    assert render_main(["render", "--out", str(base / "a"), *args]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "components", "render", "--out", str(base / "b"), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stack dev: rendered "), done.stdout
    assert TOKEN not in done.stdout + done.stderr
    return base / "a", base / "b"


@pytest.fixture(scope="module")
def program() -> Run:
    return ok(secrets={f"{P}:hfToken": TOKEN})


def test_two_renders_are_byte_identical(rendered: tuple[Path, Path]) -> None:
    a, b = rendered
    assert files_of(a) == files_of(b)
    assert filecmp.dircmp(a, b).diff_files == []


def test_every_kubernetes_object_is_one_file_with_the_programs_manifest(
    rendered: tuple[Path, Path], program: Run
) -> None:
    a, _ = rendered
    objects = [r for r in program.registrations if r.custom and r.type.startswith("kubernetes:")]
    files = sorted((a / "kubernetes").rglob("*.yaml"))
    assert len(files) == len(objects)
    by_identity = {}
    for path in files:
        obj = yaml.safe_load(path.read_text())
        meta = obj["metadata"]
        # A Patch resource patches an object of `kind`; its file is named after its type (`<kind>Patch`).
        kind = obj["kind"] + ("Patch" if path.read_text().split(" ", 2)[1].endswith("Patch") else "")
        by_identity[(kind, meta.get("namespace"), meta["name"])] = obj
        assert path.parent.name == meta.get("namespace", "_cluster")
        assert unquote(path.name) == f"{kind.lower()}-{meta['name']}.yaml", "the file name decodes to the object"
    for reg in objects:
        expected = normalize(unwrap(reg.inputs))
        meta = expected["metadata"]
        kind = expected["kind"] + ("Patch" if reg.type.endswith("Patch") else "")
        got = by_identity[(kind, meta.get("namespace"), meta["name"])]
        if expected["kind"] == "Secret" and "stringData" in expected:
            assert set(got["stringData"]) == set(expected["stringData"])
            assert set(got["stringData"].values()) == {REDACTED}
            continue
        # No Kubernetes object carries a value only the cloud knows, so the files are the manifests exactly.
        assert got == expected, f"{expected['kind']} {meta['name']}"


def test_secrets_never_reach_the_files(rendered: tuple[Path, Path]) -> None:
    a, _ = rendered
    for path, data in files_of(a).items():
        assert TOKEN.encode() not in data, path


def test_charts_are_listed_not_rendered(rendered: tuple[Path, Path], program: Run) -> None:
    a, _ = rendered
    text = (a / "not-rendered.yaml").read_text()
    assert text.startswith("# Not rendered offline")
    listed = {item["resource"]: item for item in yaml.safe_load(text)}
    charts = program.of_type("kubernetes:helm.sh/v4:Chart")
    assert len(charts) == 5  # JobSet, Kueue, LWS, KEDA, the router
    for chart in charts:
        item = listed[chart.name]
        assert (item["chart"], item["version"], item["namespace"]) == (
            chart.inputs["chart"],
            chart.inputs["version"],
            chart.inputs["namespace"],
        )
        assert item["values"] == normalize(unwrap(chart.inputs["values"]))
    assert listed["slice-controller-manifest"]["file"].startswith("https://")
    # The inference extension's CRDs are vendored: listed by name here, each written under charts/.
    crds = listed["inference-extension-crds"]["objs"]
    assert crds == ["CustomResourceDefinition/inferencepoolimports.inference.networking.x-k8s.io"]
    assert (a / "charts/inference-extension-crds/_cluster").is_dir()
    written = [p.name for p in (a / "charts/inference-extension-crds/_cluster").iterdir()]
    assert written and all(name.startswith("customresourcedefinition-") for name in written), written


def test_google_cloud_table_has_every_resource(rendered: tuple[Path, Path], program: Run) -> None:
    a, _ = rendered
    table = (a / "google-cloud.md").read_text().splitlines()
    gcp = [r for r in program.registrations if r.custom and r.type.startswith("gcp:")]
    rows = [line for line in table if line.startswith("| `")]
    assert sorted(row.split("`")[1] for row in rows) == sorted(r.name for r in gcp)
    pool = next(row for row in rows if row.startswith("| `capacity-tpu7-pool-1`"))
    assert "SPECIFIC_RESERVATION" in pool and "nodeCount=16" in pool
    full = yaml.safe_load((a / "google-cloud.yaml").read_text())
    assert full["network-main"]["inputs"]["mtu"] == 8896
    assert full["cluster-gke"]["inputs"]["network"] == "<network-main.id>", "cloud-only values are markers"
    index = (a / INDEX).read_text()
    assert "TPU plan: 2 x 4x4x4 cubes" in index and "not rendered offline" in index


def test_invalid_config_fails_like_preview_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    bad = ["--set", "network.proxySubnetCidr=10.10.4.0/26"]
    assert render_main(["--stack", "dev", "--out", str(out), *set_arguments("dev"), *bad]) == 1
    err = capsys.readouterr().err
    preview = run_program({f"{P}:network": {"proxySubnetCidr": "10.10.4.0/26"}})
    assert err == f"error: {preview.error}\n"
    assert not out.exists()
    # A placeholder left in: the same refusal, by name.
    assert render_main(["--stack", "staging", "--out", str(out)]) == 1
    assert "gcp:project = '<REPLACE-ME" in capsys.readouterr().err
    assert not out.exists()
    assert render_main(["--stack", "nosuchstack", "--out", str(out)]) == 2
    assert not out.exists()


def test_refuses_to_overwrite_a_directory_that_is_not_a_render(tmp_path: Path) -> None:
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert render_main(["--stack", "dev", "--out", str(out), *set_arguments("dev")]) == 2
    assert files_of(out) == {"notes.txt": b"keep me"}


def test_rerender_removes_stale_files(rendered: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = rendered
    out = tmp_path / "again"
    out.mkdir()
    (out / INDEX).write_text("previous render")
    (out / "kubernetes").mkdir()
    (out / "kubernetes" / "stale.yaml").write_text("kind: Gone\n")
    args = ["--stack", "dev", *set_arguments("dev"), "--set", f"hfToken={TOKEN}"]
    assert render_main(["--out", str(out), *args]) == 0
    assert files_of(out) == files_of(a)


def test_encrypted_stack_values_are_secret_keys(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.enc.yaml").write_text(
        yaml.safe_dump({"config": {"gcp:project": "p-123456", f"{P}:hfToken": {"secure": "v1:abc"}}})
    )
    assert secret_keys(tmp_path, "enc") == [f"{P}:hfToken"]


# ---------------------------------------------------------------------------------------------------
# Portable file names: a committed render must check out on Windows and macOS too


def windows_problem(component: str) -> str | None:
    """Why Windows would refuse `component` as a file or directory name (Microsoft, "Naming Files, Paths, and
    Namespaces"), or None. Written from the rules, not from `portable`."""
    if re.search(r'[<>:"/\\|?*\x00-\x1f]', component):
        return "a forbidden character"
    if component.endswith((".", " ")):
        return "a trailing dot or space"
    stem = component.split(".", 1)[0].lower()
    if re.fullmatch(r"con|prn|aux|nul|(com|lpt)[1-9\u00b9\u00b2\u00b3]", stem):
        return "a device name"
    return None


def test_every_rendered_path_is_portable_and_unique_ignoring_case(rendered: tuple[Path, Path]) -> None:
    a, _ = rendered
    paths = [PurePosixPath(p.relative_to(a).as_posix()) for p in a.rglob("*")]
    for path in paths:
        for part in path.parts:
            assert windows_problem(part) is None, (str(path), windows_problem(part))
    assert len({str(p).lower() for p in paths}) == len(paths)
    # The RBAC object Managed Prometheus's collector reads the Kueue scrape token with: `:` in its name.
    binding = "rolebinding-gmp-system%3Acollector%3Akueue-metrics-scraper-token-read.yaml"
    assert any(p.name == binding for p in paths), sorted(p.name for p in paths if p.name.startswith("rolebinding"))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("llm-d-pd-disaggregation", "llm-d-pd-disaggregation"),  # DNS names stay as they are
        ("gmp-system:collector:x", "gmp-system%3Acollector%3Ax"),
        ('a<b>c"d|e?f*g\\h/i', "a%3Cb%3Ec%22d%7Ce%3Ff%2Ag%5Ch%2Fi"),
        ("ends.", "ends%2E"),
        ("ends ", "ends%20"),
        ("con", "%63on"),
        ("nul.yaml", "%6Eul.yaml"),
        ("lpt9", "%6Cpt9"),
        ("console", "console"),
        ("Admin", "%41dmin"),  # differs from "admin" where case is ignored
        ("_cluster", "%5Fcluster"),  # never the directory of cluster-scoped objects
        ("100%", "100%25"),
        ("", "%"),
    ],
)
def test_portable_names(name: str, expected: str) -> None:
    assert portable(name) == expected
    assert windows_problem(portable(name)) is None


def test_the_device_names_are_microsofts_list() -> None:
    assert {"con", "prn", "aux", "nul", "com1", "com9", "lpt1", "lpt9"} <= RESERVED
    assert all(re.fullmatch(r"con|prn|aux|nul|(com|lpt)[1-9]", n) for n in RESERVED) and len(RESERVED) == 22


@given(st.text(max_size=40))
def test_portable_is_accepted_by_windows_and_reversible_ignoring_case(name: str) -> None:
    out = portable(name)
    assert windows_problem(out) is None and re.fullmatch(r"[a-z0-9.%A-F-]+", out)
    # Lowercased (a case-insensitive file system), the escapes still decode to the name: never two names, one file.
    assert unquote(out.lower(), errors="strict") == name or (name == "" and out == "%")
