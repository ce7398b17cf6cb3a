"""Network forensics: VPC flow logs on the TPU subnet and Cloud NAT logging of every translation, per stack.

Provider facts (terraform-provider-google-beta@93c65b2d60, google-beta/services/compute/): a subnetwork's `log_config`
and a NAT's `log_config` are Optional, not ForceNew, and update in place (resource_compute_subnetwork.go:631-694 and
1441-1509; resource_compute_router_nat.go:407-427 and 1234-1239); the flow-log fields read back as the API stores
them (flattenComputeSubnetworkLogConfig, :2064-2092), so the program sends all four.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.model.diff.gcp import FORCE_NEW
from tests import upstream
from tests.harness import Run, assert_rejected, run_program
from tests.preview import change, preview
from tests.stack_config import P

SUBNET = "gcp:compute/subnetwork:Subnetwork"
NAT = "gcp:compute/routerNat:RouterNat"
FLOW_LOGS = {
    "aggregationInterval": "INTERVAL_5_MIN",
    "flowSampling": 1.0,
    "metadata": "INCLUDE_ALL_METADATA",
    "filterExpr": "true",
}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_stack_logs_the_tpu_subnets_flows_and_every_nat_translation(stack: str) -> None:
    run = run_program(stack=stack)
    assert run.error is None, run.error
    assert run.get(SUBNET, "network-tpu").inputs["logConfig"] == FLOW_LOGS
    # GCE takes no flow logs on a proxy-only subnet (its logConfig description; expandComputeSubnetworkLogConfig
    # sends nothing for one): its Envoys' flows show on the TPU subnet's side.
    assert "logConfig" not in run.get(SUBNET, "network-proxy").inputs
    (nat,) = run.of_type(NAT)
    assert nat.inputs["logConfig"] == {"enable": True, "filter": "ALL"}


def test_each_stack_chooses_its_flow_logs_and_nat_log_filter() -> None:
    quiet = {"flowLogs": {"enabled": False}, "natLogs": "ERRORS_ONLY"}
    run = run_program({f"{P}:network": quiet})
    assert run.error is None, run.error
    # No block: the provider sends `enable: false` and reads none back (L2258-2273, L2071-2074).
    assert "logConfig" not in run.get(SUBNET, "network-tpu").inputs
    (nat,) = run.of_type(NAT)
    assert nat.inputs["logConfig"] == {"enable": True, "filter": "ERRORS_ONLY"}
    coarse = run_program({f"{P}:network": {"flowLogs": {"aggregationInterval": "INTERVAL_15_MIN", "sampling": 0.5}}})
    assert coarse.get(SUBNET, "network-tpu").inputs["logConfig"] == {
        **FLOW_LOGS,
        "aggregationInterval": "INTERVAL_15_MIN",
        "flowSampling": 0.5,
    }


@pytest.mark.parametrize(
    ("network", "fragments"),
    [
        ({"flowLogs": {"sampling": 0}}, ["network.flowLogs.sampling = 0", "enabled: false"]),
        ({"flowLogs": {"sampling": 1.5}}, ["network.flowLogs.sampling = 1.5"]),
        ({"flowLogs": {"aggregationInterval": "INTERVAL_2_MIN"}}, ["network.flowLogs.aggregationInterval"]),
        ({"natLogs": "NONE"}, ["network.natLogs = 'NONE'"]),
    ],
)
def test_values_gce_would_refuse_are_refused_by_name(network: dict, fragments: list[str]) -> None:
    assert_rejected({f"{P}:network": network}, fragments, prefix="invalid stack configuration (1 problem)")


def test_neither_log_config_is_force_new_in_the_provider_source() -> None:
    # The generated table (tests/provider_schema.py) holds every ForceNew attribute; it has no logConfig for either.
    for type_ in (SUBNET, NAT):
        assert not [f for f in FORCE_NEW[type_] if f.path.startswith("logConfig")], type_
    # ...and the blocks themselves say so: no ForceNew between `"log_config": {` and the next top-level attribute.
    compute = "provider-sources/terraform-provider-google-beta-93c65b2d60/google-beta/services/compute"
    root = upstream.require(compute)
    blocks = (("resource_compute_subnetwork.go", '"params"'), ("resource_compute_router_nat.go", '"max_ports'))
    for file, stop in blocks:
        text = Path(root, compute, file).read_text()
        block = text[text.index('"log_config": {') : text.index(stop, text.index('"log_config": {'))]
        assert "ForceNew" not in block, file
        assert re.search(r"if d\.HasChange\(\"log_config\"\)|logConfigProp", text), file


def test_diff_updates_the_subnet_and_the_nat_in_place() -> None:
    code, result = preview("dev", "--change", "network.flowLogs.enabled=false")
    assert code == 0
    assert [(c["name"], c["action"]) for c in result["changes"] if c["action"] != "same"] == [("network-tpu", "update")]
    assert change(result, "network-tpu")["properties"] == ["logConfig"]
    code, result = preview("dev", "--change", "network.natLogs=ERRORS_ONLY")
    assert code == 0
    changed = [(c["name"], c["action"], c["properties"]) for c in result["changes"] if c["action"] != "same"]
    assert changed == [("network-egress-nat", "update", ["logConfig.filter"])]


def test_the_second_run_sees_no_change_in_either_log_config(dev: Run) -> None:
    code, result = preview("dev", "--second-run")
    assert code == 0
    for name in ("network-tpu", "network-egress-nat"):
        assert change(result, name)["action"] == "same", change(result, name)
