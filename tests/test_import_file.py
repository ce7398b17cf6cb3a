"""`python -m components import-file` agrees with the program's own mock run: every resource it registers is in the
file with its exact type, logical name and parent, or on the documented not-imported list; bad input stops it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cli import adoption
from components.cli.plan import secret_keys, stack_config
from components.model import import_ids as ids
from tests.harness import PROJECT_NUMBER, Registration, Run, run_program
from tests.import_file_runs import cli, dev_file, import_json
from tests.stack_config import ROOT, fill_placeholders, merge, set_arguments

P = "gke-tpu-slicing"
STACK_ROOT = "pulumi:pulumi:Stack"
# The keys of Pulumi's bulk-import file (importFile / importSpec in pulumi/pulumi
# pkg/cmd/pulumi/operations/import.go).
FILE_KEYS = {"nameTable", "resources", "providerInputs"}
SPEC_KEYS = {"type", "name", "id", "parent", "provider", "version", "pluginDownloadUrl", "properties", "component"}
SPEC_KEYS |= {"remote", "logicalName"}


def stack_dir(tmp_path: Path, name: str, config: dict[str, Any]) -> Path:
    """A copy of the project file beside one stack file, for stacks the repository does not ship."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}))
    return tmp_path


def dev_config() -> dict[str, Any]:
    return fill_placeholders(yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"])


# ---------------------------------------------------------------------------------------------
# Agreement with the program


def engine_urn(run: Run, reg: Registration) -> str:
    """The URN the engine gives a registration: parents' types chained with `$`, the root stack left out
    (generateURN in pulumi/pulumi pkg/resource/deploy). The mock monitor abbreviates this, so rebuild it."""
    chain = [reg.type]
    parent = parent_of(run, reg)
    while parent is not None:
        chain.insert(0, parent.type)
        parent = parent_of(run, parent)
    return f"{reg.urn.split('::', 1)[0]}::{P}::{'$'.join(chain)}::{reg.name}"


def parent_of(run: Run, reg: Registration) -> Registration | None:
    """The parent registration; None for a child of the stack (the harness does not record the stack)."""
    if not reg.parent or f"::{STACK_ROOT}::{P}-" in reg.parent:
        return None
    return run.by_urn(reg.parent)


def parent_name(run: Run, reg: Registration) -> str | None:
    parent = parent_of(run, reg)
    return None if parent is None else parent.name


def check_agreement(
    run: Run, data: dict[str, Any], project_number: str | None, stack: str = "dev", directory: Path = ROOT
) -> None:
    assert set(data) <= FILE_KEYS
    specs = data["resources"]
    for spec in specs:
        assert set(spec) <= SPEC_KEYS, spec
    assert len({s["name"] for s in specs}) == len(specs), "names in an import file must be unique"
    customs = {(s["type"], s["name"]): s for s in specs if not s.get("component")}
    components = {s["name"]: s for s in specs if s.get("component")}
    plan = _plan(stack, directory, project_number)
    skipped = {(s.name, s.type) for s in plan.skipped}
    new_components = {s.name for s in plan.skipped if s.type in adoption.NEW_COMPONENTS}

    urns = import_urns(data, run.registrations[0].urn.split("::", 1)[0])
    matched = set()
    for reg in run.registrations:
        if reg.type.startswith(f"{P}:"):
            continue  # our own components: checked through their children below
        key = (reg.type, reg.name)
        if key in customs:
            spec = customs[key]
            matched.add(key)
            # the URN `pulumi import` gives it is the program's: the same parent chain and logical name
            assert urns[spec["name"]] == engine_urn(run, reg), key
            assert spec.get("id"), key
            if reg.type.startswith("kubernetes:"):
                provider = run.by_urn(reg.provider.rsplit("::", 1)[0])
                assert data["nameTable"][spec["provider"]] == engine_urn(run, provider)
            else:
                assert "provider" not in spec  # gcp resources use the default provider, as the program does
            continue
        if parent_name(run, reg) in new_components:
            assert key not in customs, key
            continue  # a component the scripts never made: `pulumi up` creates all of it
        assert (reg.name, reg.type) in skipped, (
            f"{reg.type} {reg.name!r} is registered by the program but unknown to import-file: import it "
            "(components/cli/adoption.py) or list it as not imported, with the reason"
        )
        assert reg.type in adoption.NOT_IMPORTED_TYPES or reg.type.startswith("gcp:storage/bucketIAMMember")
    assert set(customs) == matched, f"in the file but not registered: {set(customs) - matched}"
    # every component the file creates is one the program registers, at the same URN
    assert {urns[name] for name in components} <= {engine_urn(run, r) for r in run.registrations}


def import_urns(data: dict[str, Any], stack_urn: str) -> dict[str, str]:
    """The URN `pulumi import` gives each name of the file: its parent's qualified type, `$`, its type, its
    logical name (parseImportFile in pulumi/pulumi pkg/cmd/pulumi/operations/import.go)."""
    urns = dict(data.get("nameTable", {}))
    for _ in data["resources"]:
        for s in data["resources"]:
            parent = s.get("parent")
            if parent is None or parent in urns:
                qualified = f"{urns[parent].split('::')[2]}${s['type']}" if parent else s["type"]
                urns[s["name"]] = f"{stack_urn}::{P}::{qualified}::{s.get('logicalName', s['name'])}"
    assert {s["name"] for s in data["resources"]} <= set(urns), "a parent the file never names"
    return urns


def _plan(stack: str, directory: Path, project_number: str | None) -> adoption.Adoption:
    config = fill_placeholders(stack_config(directory, stack))
    return adoption.adoption(config, stack, secret_keys(directory, stack), project_number)


def test_a_type_without_an_import_format_stops_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(ids.IMPORT_IDS, "gcp:compute/firewall:Firewall")
    with pytest.raises(ValueError, match="no import-id format for gcp:compute/firewall:Firewall"):
        _plan("dev", ROOT, None)


def test_the_file_names_every_resource_the_program_registers(dev: Run) -> None:
    data = dev_file()
    check_agreement(dev, data, PROJECT_NUMBER)
    # the dev stack has every kind of resource this command imports
    assert {*ids.IMPORT_IDS, "kubernetes:core/v1:Namespace"} <= {s["type"] for s in data["resources"]}


def agreed_file(tmp_path: Path, run: Run, stack: str, config: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The import file of a stack file the repository does not ship, checked against `run`; and all it printed."""
    assert run.error is None, run.error
    directory = stack_dir(tmp_path, stack, config)
    code, out, err = cli("--stack", stack, "--dir", str(directory), "--project-number", PROJECT_NUMBER)
    assert code == 0, err
    # the harness names the stack "dev"; URNs carry the stack name, so compare with the dev URNs
    data = json.loads(out)
    data["nameTable"] = {
        k: v.replace(f"urn:pulumi:{stack}::", "urn:pulumi:dev::") for k, v in data.get("nameTable", {}).items()
    }
    check_agreement(run, data, PROJECT_NUMBER, stack, directory)
    return data, out + err


def test_the_hf_token_secret_is_imported_by_name_only(tmp_path: Path) -> None:
    token = "hf_never_printed"
    run = run_program(secrets={f"{P}:hfToken": token})
    data, printed = agreed_file(tmp_path, run, "dev", {**dev_config(), f"{P}:hfToken": {"secure": "v1:AAAA"}})
    assert token not in printed
    secret = next(s for s in data["resources"] if s["type"] == "kubernetes:core/v1:Secret")
    assert secret["id"] == "llm-d-pd-disaggregation/llm-d-hf-token"


def test_without_the_project_number_the_bucket_members_are_left_to_up(dev: Run) -> None:
    data = import_json("--stack", "dev")
    check_agreement(dev, data, None)
    assert not [s for s in data["resources"] if s["type"] == "gcp:storage/bucketIAMMember:BucketIAMMember"]
    code, out, _ = cli("--stack", "dev", "--explain")
    assert code == 0 and "serving-weights-objectviewer" in out and "--project-number" in out


@pytest.mark.parametrize(
    "overrides",
    [
        {f"{P}:serving": {"enabled": False}, f"{P}:demos": {"superslicing": {"enabled": False}}},
        {f"{P}:tpu": {"cubes": 4, "poolPrefix": "cube"}, f"{P}:network": {"prefix": "other"}},
        {f"{P}:serving": {"weightsDownload": {"enabled": True}}},
    ],
    ids=["demos-only", "four-cubes-renamed", "weights-download"],
)
def test_other_settings_move_the_file_with_the_program(tmp_path: Path, overrides: dict[str, Any]) -> None:
    agreed_file(tmp_path, run_program(overrides), "alt", merge(dev_config(), overrides))


def test_the_two_parts_split_the_file_and_refer_to_each_other_by_urn(dev: Run) -> None:
    cloud = import_json("--stack", "dev", "--part", "cloud", "--project-number", PROJECT_NUMBER)
    kube = import_json("--stack", "dev", "--part", "kubernetes", "--project-number", PROJECT_NUMBER)
    assert "nameTable" not in cloud  # nothing it needs is in the stack yet
    assert not [s for s in cloud["resources"] if s["type"].startswith("kubernetes:")]
    assert all(s["type"].startswith("kubernetes:") or s.get("component") for s in kube["resources"])
    customs = [s for s in dev_file()["resources"] if not s.get("component")]
    split = [s for s in cloud["resources"] + kube["resources"] if not s.get("component")]
    assert sorted(map(json.dumps, split)) == sorted(map(json.dumps, customs))
    # serving holds bucket IAM (cloud part) and Kubernetes objects: the second part names it by URN
    assert kube["nameTable"]["serving"] == engine_urn(dev, dev.get(f"{P}:serving:Serving", "serving"))
    assert "serving" in {s["name"] for s in cloud["resources"] if s.get("component")}
    check_agreement(
        dev, {"nameTable": kube["nameTable"], "resources": cloud["resources"] + kube["resources"]}, PROJECT_NUMBER
    )


def test_a_file_naming_the_provider_says_it_must_be_in_the_stack_first() -> None:
    # Since pulumi v3.231.0 an import creates a named provider missing from the stack, with no inputs (pkg/resource/
    # deploy/import.go registerProviders): the objects would be read from the ambient kubeconfig's cluster.
    for part, names in (("all", True), ("kubernetes", True), ("cloud", False)):
        code, _, err = cli("--stack", "dev", "--part", part)
        assert code == 0 and ("--part cloud" in err and "--targets" in err) == names, (part, err)


def test_targets_are_the_provider_and_what_was_skipped_as_the_program_registers_them(dev: Run) -> None:
    code, out, _ = cli("--stack", "dev", "--targets")
    assert code == 0
    assert out.split() == [f"--target={engine_urn(dev, dev.get('pulumi:providers:kubernetes', 'cluster-k8s'))}"]
    # a deployment made with the reference scripts has no node identity and no `system` pool
    scripts = ("identity-nodes", "identity-container.defaultNodeServiceAccount", "cluster-system")
    code, out, _ = cli("--stack", "dev", "--targets", *(f"--skip={name}" for name in scripts))
    assert code == 0
    cloud = import_json("--stack", "dev", "--part", "cloud", *(f"--skip={name}" for name in scripts))
    # the targeted update creates the skipped account under its parent, which the import made
    assert {"type": f"{P}:identity:NodeIdentity", "name": "identity", "component": True} in cloud["resources"]
    expected = {
        engine_urn(dev, reg)
        for reg in dev.registrations
        if reg.name in scripts or reg.type == "pulumi:providers:kubernetes"
    }
    assert {line.removeprefix("--target=") for line in out.split()} == expected


def test_skipped_names_leave_the_file_and_join_the_explanation(dev: Run) -> None:
    data = import_json("--stack", "dev", "--skip", "subslicing-jobset", "--skip", "cluster-system")
    names = {s["name"] for s in data["resources"]}
    assert "subslicing-jobset" not in names and "cluster-system" not in names
    # the component stays: `pulumi up` creates the skipped JobSet under it
    assert {"type": f"{P}:workloads:SlicingJobSet", "name": "subslicing", "component": True} in data["resources"]
    code, out, _ = cli("--stack", "dev", "--explain", "--skip", "cluster-system")
    assert code == 0 and "cluster-system (gcp:container/nodePool:NodePool)" in out and "--skip" in out


def test_explain_lists_every_skipped_resource_with_a_reason(dev: Run) -> None:
    code, out, _ = cli("--stack", "dev", "--explain", "--project-number", PROJECT_NUMBER)
    assert code == 0

    def in_new_component(reg: Registration) -> bool:  # listed as its component, which `pulumi up` creates whole
        parent = parent_of(dev, reg)
        return parent is not None and (parent.type in adoption.NEW_COMPONENTS or in_new_component(parent))

    for reg in dev.registrations:
        if reg.type in adoption.NOT_IMPORTED_TYPES and not in_new_component(reg):
            assert f"{reg.name} ({reg.type})" in out
    for reg in dev.registrations:
        if reg.type in adoption.NEW_COMPONENTS:
            assert f"{reg.name} ({reg.type})" in out


# ---------------------------------------------------------------------------------------------
# Bad input: the messages of `pulumi preview`, nothing on stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--stack", "nope"], ["no stack named 'nope'"]),
        (["--stack", "dev", "--skip", "cluster-sytem"], ["cluster-sytem", "cluster-system"]),
        (["--stack", "dev", "--project-number", "my-project"], ["--project-number"]),
    ],
    ids=["unknown-stack", "unknown-skip", "bad-project-number"],
)
def test_bad_arguments_are_named_with_nothing_on_stdout(args: list[str], fragments: list[str]) -> None:
    code, out, err = cli(*args)
    assert code == 2 and out == ""
    assert all(f in err for f in fragments), err


@pytest.mark.parametrize(
    "bad",
    [
        {f"{P}:network": {"proxySubnetCidr": "10.10.4.0/26"}, f"{P}:tpu": {"cubes": -1}},
        {f"{P}:demos": {"superslicing": {"enabled": True, "topology": "4x4x12"}}},
    ],
    ids=["invalid-config", "impossible-plan"],
)
def test_a_configuration_the_program_refuses_gets_the_preview_message(tmp_path: Path, bad: dict[str, Any]) -> None:
    run = run_program(bad)
    assert run.error is not None and run.registrations == []
    directory = stack_dir(tmp_path, "bad", merge(dev_config(), bad))
    code, out, err = cli("--stack", "bad", "--dir", str(directory))
    assert code == 1 and out == ""
    assert err == f"error: {run.error}\n"


def test_an_error_of_the_program_itself_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    failed = adoption.execute(dev_config(), stack="dev")
    failed.error = Exception("a component refused")
    monkeypatch.setattr(adoption, "execute", lambda *a, **k: failed)
    code, out, err = cli("--stack", "dev")
    assert (code, out, err) == (1, "", "error: a component refused\n")


def test_private_nodes_egress_is_left_to_up_as_a_new_component() -> None:
    # Staging has private nodes: its Cloud Router and NAT are new (the scripts made public nodes), so the
    # file leaves the whole Egress component to `pulumi up` and still names every other resource.
    run = run_program(stack="staging")
    assert run.error is None, run.error
    assert run.of_type("gcp:compute/routerNat:RouterNat"), "staging's nodes are private"
    data = import_json("--stack", "staging", "--project-number", PROJECT_NUMBER, *set_arguments("staging"))
    check_agreement(run, data, PROJECT_NUMBER, stack="staging")
    assert not {s["type"] for s in data["resources"]} & {"gcp:compute/router:Router", "gcp:compute/routerNat:RouterNat"}
