"""Every stack file, run whole under the mock runtime: what holds in every environment, what differs on purpose.

Stack files are discovered by glob, so a new `Pulumi.<name>.yaml` is checked without touching this file.
Placeholders are filled from tests/harness.py PLACEHOLDER_VALUES; unfilled, each one is refused by name.
"""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from typing import Any

import pytest
import yaml

from components.cli.plan import stack_config
from components.model.config.checks import MTU_MAX, PLACEHOLDER_RE
from components.model.config.settings import ConfigError, load
from components.model.tpu.geometry import Topology, system
from tests.graph_queries import inputs_of, tpu_pools
from tests.harness import CLUSTER, JOBSET, LWS, POOL, Mocks, Run, contains_secret, is_secret, ok, run_program
from tests.stack_config import CLOCK, ROOT, STACKS, P, placeholders, stack_file_config, stack_settings

POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
NETWORK = "gcp:compute/network:Network"
ACCOUNT = "gcp:serviceaccount/account:Account"
REMOTE = ("kubernetes:helm.sh/v4:Chart", "kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup")


def stack_value(stack: str, section: str, path: str, default: Any = None) -> Any:
    """A value as the stack file (merged with Pulumi.yaml) sets it, or `default` when unset."""
    node: Any = stack_file_config(stack).get(f"{P}:{section}", {})
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


@pytest.fixture(scope="module", params=STACKS)
def stack(request: pytest.FixtureRequest) -> tuple[str, Run]:
    run = run_program(stack=request.param, secrets={f"{P}:hfToken": "hf_stack_test_token"})
    assert run.error is None, f"{request.param}: {run.error}"
    return request.param, run


def test_the_three_environments_exist() -> None:
    assert {"dev", "staging", "prod"} <= set(STACKS)


# ---------------------------------------------------------------------------------------------
# Invariants: true in every environment


def test_tpu_network_uses_the_largest_mtu(stack: tuple[str, Run]) -> None:
    _, run = stack
    (network,) = run.of_type(NETWORK)
    assert network.inputs["mtu"] == MTU_MAX == 8896


def test_every_tpu_pool_is_reservation_bound_and_placed_by_the_workload_policy(stack: tuple[str, Run]) -> None:
    name, run = stack
    (policy,) = run.of_type(POLICY)
    assert policy.inputs["workloadPolicy"]["type"] == "HIGH_THROUGHPUT"
    pools = tpu_pools(run)
    assert len(pools) == stack_value(name, "tpu", "cubes", 2) > 0
    machine = pools[0].inputs["nodeConfig"]["machineType"]
    vms = system(machine).vms(Topology.parse(stack_value(name, "tpu", "cubeTopology", "4x4x4")))
    for pool in pools:
        affinity = pool.inputs["nodeConfig"]["reservationAffinity"]
        assert affinity["consumeReservationType"] == "SPECIFIC_RESERVATION", pool.name
        assert affinity["values"] and all(v.startswith("projects/") for v in affinity["values"])
        assert pool.inputs["placementPolicy"] == {
            "type": "",  # what GKE stores for a workload-policy placement
            "policyName": policy.inputs["name"],
            "tpuTopology": stack_value(name, "tpu", "cubeTopology", "4x4x4"),
        }
        assert "/reservationSubBlocks/" in affinity["values"][0], "one sub-block per pool"
        assert policy.urn in pool.property_dependencies["placementPolicy"], "placed by the policy's Output"
        assert pool.inputs["nodeCount"] == vms


def test_every_node_runs_as_the_dedicated_service_account(stack: tuple[str, Run]) -> None:
    _, run = stack
    (account,) = run.of_type(ACCOUNT)
    email = f"{account.inputs['accountId']}@{account.inputs['project']}.iam.gserviceaccount.com"
    configs = [p.inputs["nodeConfig"] for p in run.of_type(POOL)]
    assert len(configs) >= 2  # the system pool and the TPU pools
    # ...and the default pool GKE creates before the provider removes it: the cluster's own node_config.
    configs.append(run.get(CLUSTER, "cluster-gke").inputs["nodeConfig"])
    for node_config in configs:
        assert node_config["serviceAccount"] == email
        assert node_config["oauthScopes"] == ["https://www.googleapis.com/auth/cloud-platform"]
        assert not node_config["serviceAccount"].endswith("-compute@developer.gserviceaccount.com")
    assert account.inputs["accountId"] == run.get(CLUSTER, "cluster-gke").inputs["name"] + "-nodes"
    # Least privilege: the one role GKE's nodes need, granted before any pool starts.
    (binding,) = [m for m in run.of_type("gcp:projects/iAMMember:IAMMember") if m.inputs["member"].endswith(email)]
    assert (binding.inputs["role"], binding.inputs["member"]) == (
        "roles/container.defaultNodeServiceAccount",
        f"serviceAccount:{email}",
    )
    for pool in run.of_type(POOL):
        assert run.depends_on(pool, binding), pool.name


def test_every_kubernetes_object_goes_through_the_explicit_provider(stack: tuple[str, Run]) -> None:
    _, run = stack
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    objects = [r for r in run.registrations if r.custom and r.type.startswith("kubernetes:")]
    assert objects, "no Kubernetes objects"
    for reg in objects:
        assert reg.provider.startswith(provider.urn + "::"), f"{reg.type} {reg.name}: {reg.provider!r}"
    # Charts and fetched manifests are components: they hand the provider to the objects they render.
    remote = [r for r in run.registrations if r.type in REMOTE]
    assert remote
    for reg in remote:
        assert reg.remote and reg.providers["kubernetes"].startswith(provider.urn + "::"), reg.name


def test_secrets_stay_secret(stack: tuple[str, Run]) -> None:
    _, run = stack
    assert "kubeconfig" in run.secret_outputs
    assert is_secret(run.of_type("pulumi:providers:kubernetes")[0].inputs["kubeconfig"])
    if stack_value(stack[0], "serving", "enabled", True):
        (secret,) = [s for s in run.of_type("kubernetes:core/v1:Secret") if s.name.startswith("serving-")]
        assert contains_secret(secret.inputs)
    for reg in run.registrations:
        text = repr(reg.inputs)
        assert "hf_stack_test_token" not in text or contains_secret(reg.inputs), f"{reg.type} {reg.name}"


def test_protection_follows_one_key_on_exactly_the_expensive_resources(stack: tuple[str, Run]) -> None:
    name, run = stack
    protect = stack_value(name, "cluster", "protect", False)
    expensive = [run.get(CLUSTER, "cluster-gke"), *run.of_type(POOL), *run.of_type(POLICY)]
    assert {r.name: r.protect for r in expensive} == dict.fromkeys((r.name for r in expensive), protect)
    cheap = [r for r in run.registrations if r.custom and r not in expensive]
    assert [r.name for r in cheap if r.protect] == []


def test_a_maintenance_exclusion_is_set(stack: tuple[str, Run]) -> None:
    name, run = stack
    if name == "dev":  # torn down freely; a fixed window would expire (docs/stacks.md, "Placeholders")
        assert "maintenancePolicy" not in run.get(CLUSTER, "cluster-gke").inputs
        return
    policy = run.get(CLUSTER, "cluster-gke").inputs["maintenancePolicy"]
    (exclusion,) = policy["maintenanceExclusions"]
    # No end date that a later day passes: GKE ends it at the minor version's end of support, and the
    # provider reads no end time back with that behaviour (so none may be sent).
    assert exclusion["exclusionOptions"]["endTimeBehavior"] == "UNTIL_END_OF_SUPPORT"
    assert exclusion["exclusionOptions"]["scope"] in ("NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")
    assert "endTime" not in exclusion


def test_every_stack_file_is_valid_a_year_from_now(stack: tuple[str, Run]) -> None:
    """The program's clock a year ahead: no date in a stack file expires (the first would have on 2027-02-26)."""
    name, today = stack
    later = ok(stack=name, secrets={f"{P}:hfToken": "hf_stack_test_token"}, now=CLOCK + timedelta(days=366))
    # ...and registers exactly what it registers today (registration order is not deterministic).
    assert inputs_of(later) == inputs_of(today)


def test_a_recorded_run_is_a_private_copy_of_what_a_fresh_run_registers() -> None:
    """run_program answers a configuration it ran from the session's recording (tests/harness.py)."""
    first, again, fresh = run_program(), run_program(), run_program(fresh=True)
    assert first is not again and first.registrations[0] is not again.registrations[0]
    first.registrations[0].inputs["changed"] = True
    assert "changed" not in again.registrations[0].inputs and "changed" not in run_program().registrations[0].inputs
    assert inputs_of(again) == inputs_of(fresh)
    assert (again.outputs, again.secret_outputs, again.logs) == (fresh.outputs, fresh.secret_outputs, fresh.logs)
    # Fakes of the same state share a recording too: the caller's fakes hear the calls the run made.
    fakes = [Mocks(cluster_hash="0a0a0a0a0a0a"), Mocks(cluster_hash="0a0a0a0a0a0a")]
    runs = [run_program(mocks=m) for m in fakes]
    assert runs[1].mocks is fakes[1] and fakes[1].reservation.calls == fakes[0].reservation.calls != []
    assert [c.token for c in fakes[1].calls] == [c.token for c in fakes[0].calls]


# The one reader of the stack's name: it addresses the stack itself (a read of its own previous outputs,
# components/preflight.py read_deployed_serving), and returns the name without looking at it.
OWN_REFERENCE = ROOT / "components" / "preflight.py"


def test_no_code_branches_on_the_stack_name() -> None:
    """Differences live in stack files only: nothing reads the stack's name or names an environment."""
    reader = next(
        n
        for n in ast.walk(ast.parse(OWN_REFERENCE.read_text()))
        if isinstance(n, ast.FunctionDef) and n.name == "own_stack_reference"
    )
    offenders = []
    for path in [ROOT / "__main__.py", *sorted((ROOT / "components").rglob("*.py"))]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "get_stack(" in line and path == OWN_REFERENCE and reader.lineno <= number <= (reader.end_lineno or 0):
                continue
            # `plan --stack` defaulting to dev picks a file to read; it is not a branch on the name.
            if "get_stack(" in line or (re.search(r"""["'](dev|staging|prod)["']""", line) and "--stack" not in line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
    # ... and that reader hands the name on untouched: no comparison with it.
    source = ast.get_source_segment(OWN_REFERENCE.read_text(), reader)
    assert source is not None and "get_stack(" in source, "the reader moved: point OWN_REFERENCE at it"
    assert not re.search(r"\bstack\s*(==|!=|\bin\b)", source), source


# ---------------------------------------------------------------------------------------------
# Differences on purpose


def test_dev_is_the_codelab_sized_stack() -> None:
    run = run_program(stack="dev")
    assert len(tpu_pools(run)) == 2
    # serving and the sub-slicing demo; the super-slicing demo is the tour's own step (docs/stacks.md)
    assert [j.name for j in run.of_type(JOBSET)] == ["subslicing-jobset"]
    # Each role's floor and its 2 burst slots, which preempt the demo for their slices under load.
    assert sorted(w.name for w in run.of_type(LWS)) == [
        *(f"burst-{role}-{k}" for role in ("decode", "prefill") for k in (1, 2)),
        "serving-decode",
        "serving-prefill",
    ]
    cluster = run.get(CLUSTER, "cluster-gke")
    assert cluster.inputs["deletionProtection"] is False and cluster.protect is False


@pytest.mark.parametrize("name", ["staging", "prod"])
def test_staging_and_prod_serve_only_and_are_protected(name: str) -> None:
    run = ok(stack=name)
    assert run.of_type(JOBSET) == [], "no demo JobSets competing for the cubes"
    assert sorted(w.name for w in run.of_type(LWS) if w.name.startswith("serving-")) == [
        "serving-decode",
        "serving-prefill",
    ]
    cluster = run.get(CLUSTER, "cluster-gke")
    assert cluster.inputs["deletionProtection"] is True
    assert cluster.protect and all(p.protect for p in run.of_type(POOL))
    assert len(tpu_pools(run)) > stack_value("dev", "tpu", "cubes")
    # Serving's sub-slices run on a version GKE documents for them (dev keeps the codelab's, with a warning).
    assert [msg for level, msg in run.logs if level == "warn" and "cluster.version" in msg] == []


def test_elastic_serving_is_on_in_dev_and_staging_and_off_in_prod_until_measured() -> None:
    """dev: the tour (slots preempt the demo); staging: prod's floors scaled to its cubes, where the pacing soaks and
    the model's load time is measured; prod: fixed groups until then (docs/stacks.md)."""
    slots = {name: stack_settings(name).burst_slots() for name in ("dev", "staging", "prod")}
    assert slots == {"dev": {"prefill": 2, "decode": 2}, "staging": {"prefill": 4, "decode": 4}, "prod": {}}
    assert [name for name in slots if stack_settings(name).addons.keda.enabled] == ["dev", "staging"]


def test_no_stack_file_sets_a_key_twice() -> None:
    """YAML's last duplicate wins where Python reads a stack file, and the Pulumi CLI refuses it: a section added
    twice (`gke-tpu-slicing:addons` for KEDA beside the pinned versions) would lose the first one's keys here."""

    class Strict(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
            assert len(keys) == len(set(keys)), f"{node.start_mark}: {sorted(k for k in keys if keys.count(k) > 1)}"
            return super().construct_mapping(node, deep=deep)

    for name in STACKS:
        yaml.load((ROOT / f"Pulumi.{name}.yaml").read_text(), Loader=Strict)
    bad = "config:\n  a: {b: 1}\n  a: {c: 2}\n"
    with pytest.raises(AssertionError, match="'a'"):
        yaml.load(bad, Loader=Strict)


def test_staging_runs_what_prod_runs() -> None:
    """Promotion tries in staging exactly the versions prod will get."""
    for section, path in [("cluster", "version"), ("cluster", "releaseChannel"), ("serving", "image")]:
        assert stack_value("staging", section, path) == stack_value("prod", section, path), f"{section}.{path}"


def test_prod_has_at_least_the_capacity_of_staging() -> None:
    assert stack_value("prod", "tpu", "cubes") >= stack_value("staging", "tpu", "cubes")


# ---------------------------------------------------------------------------------------------
# Placeholders


@pytest.mark.parametrize("name", STACKS)
def test_each_placeholder_is_refused_by_name_before_anything_is_registered(name: str) -> None:
    raw = stack_config(ROOT, name)
    expected = placeholders(raw, "")
    assert "gcp:project" in expected, "every stack's project is the owner's to fill in"
    run = run_program(stack=name, filled=False)
    assert run.error is not None and run.registrations == []
    lines = str(run.error).splitlines()[1:]
    assert [line.strip().split(" = ", 1)[0] for line in lines] == expected
    assert all("a placeholder left in the stack file" in line for line in lines)


def test_placeholders_are_refused_wherever_they_are_and_other_problems_still_reported() -> None:
    raw = {
        "tpu": {"reservation": {"name": "<REPLACE-ME: reservation>"}},
        "cluster": {
            "controlPlane": {"authorizedNetworks": [{"cidrBlock": "10.0.0.0/8"}, {"cidrBlock": "<REPLACE-ME>"}]}
        },
        "hfToken": "<REPLACE-ME: token hf_abc>",
        "zone": "nowhere",
        "serving": {"weightsBucket": "my-weights"},
        "observability": {"alerts": False},
    }
    with pytest.raises(ConfigError) as err:
        load(raw, "<REPLACE-ME: project>")
    lines = str(err.value).splitlines()
    assert lines[0] == "invalid stack configuration (5 problems):"
    keys = [line.strip().split(" = ", 1)[0] for line in lines[1:]]
    assert keys == [
        "gcp:project",
        f"{P}:tpu.reservation.name",
        f"{P}:cluster.controlPlane.authorizedNetworks[1].cidrBlock",
        f"{P}:hfToken",
        f"{P}:zone",
    ]
    assert "token hf_abc" not in str(err.value), "a secret key's value is never echoed"
    assert "pulumi config set --path 'tpu.reservation.name' <value>" in str(err.value)
    assert PLACEHOLDER_RE.search("<REPLACE-ME>") and not PLACEHOLDER_RE.search("REPLACE-ME")
