"""Every independent problem of a configuration in one error, and rules between keys that the per-key table
(tests/test_reference.py) cannot show with one value."""

from __future__ import annotations

from typing import Any

import pytest

from components.model.config.settings import load
from tests.harness import assert_rejected
from tests.stack_config import BASE, CLOCK, PROJECT_ID, REQUIRED_KEYS, P, merge, problems, with_value


def ok(raw: dict[str, Any], project: str = "my-tpu-project") -> None:
    load(merge(REQUIRED_KEYS, raw), project, now=CLOCK)


def test_cross_checks_still_run_beside_an_invalid_key_they_do_not_read() -> None:
    # network.mtu is invalid; the priority check reads kueue, tpu, demos and serving only.
    found = problems({**BASE, "network": {"mtu": 1}, "serving": {"prefill": {"priority": "urgent"}}})
    assert len(found) == 2, found
    assert found[0].startswith(f"{P}:network.mtu = 1:")
    assert found[1].startswith(f"{P}:serving.prefill.priority = 'urgent': one of kueue.priorities")


def test_a_cross_check_that_reads_an_invalid_key_is_not_guessed() -> None:
    # kueue.priorities is invalid, so whether 'urgent' is a priority cannot be said: one problem only.
    found = problems({**BASE, "kueue": {"priorities": {"Bad": 1}}, "serving": {"prefill": {"priority": "urgent"}}})
    assert len(found) == 1 and found[0].startswith(f"{P}:kueue.priorities = "), found


def test_every_problem_of_one_section_and_between_sections() -> None:
    raw: dict[str, Any] = {
        "tpu": {"cubeTopology": "4x4x2", "poolPrefix": "p" * 38, "cubes": 10, "reservation": {"consumeType": "ANY"}},
        "serving": {"prefill": {"tensorParallelSize": 8, "name": "p" * 40}, "decode": {"priority": "urgent"}},
        "demos": {"subslicing": {"name": "s" * 45, "replicas": 11}},
    }
    found = problems(raw)
    keys = [line.split(" ", 1)[0].rstrip(":") for line in found]
    # tpu's three problems; the serving and demo checks read tpu: not run.
    assert keys == [f"{P}:tpu.cubeTopology", f"{P}:tpu.reservation.consumeType", f"{P}:tpu.poolPrefix"], found
    # Once tpu is valid, the serving and demo problems all show at once.
    raw["tpu"] = BASE["tpu"]
    found = problems(raw)
    keys = sorted(line.split(" ", 1)[0] for line in found)
    assert keys == sorted(
        [
            f"{P}:serving.decode.priority",
            f"{P}:serving.prefill.tensorParallelSize",
            f"{P}:serving.prefill.name",
            f"{P}:demos.subslicing.name",
        ]
    ), found


def test_the_longest_jobset_pod_name_bounds_the_demo_name_with_its_replicas_and_pods() -> None:
    # JobSet makes every Job Indexed and refuses <name>-job-jax-<job>-<pod>-abcde past 63 (2x2x2: 2 pods per Job).
    name = "s" * 45
    ok({**BASE, "demos": {"subslicing": {"name": name, "replicas": 10}}})
    found = problems({**BASE, "demos": {"subslicing": {"name": name, "replicas": 11}}})
    assert f"{P}:demos.subslicing.name = '{name}': at most 44 characters here" in found[0], found
    assert f"'{name}-job-jax-10-1-abcde' would be 64" in found[0]
    found = problems({**BASE, "demos": {"superslicing": {"name": "s" * 45}}})  # 4x4x8: pods 0..31
    assert f"{P}:demos.superslicing.name = '{'s' * 45}': at most 44 characters here" in found[0], found


def test_the_last_pool_name_bounds_the_pool_prefix_with_the_cube_count() -> None:
    prefix = "p" * 38
    ok({"tpu": {**BASE["tpu"], "poolPrefix": prefix, "cubes": 9}})
    found = problems({"tpu": {**BASE["tpu"], "poolPrefix": prefix, "cubes": 10}})
    assert found[0].startswith(f"{P}:tpu.poolPrefix = '{prefix}': at most 37 characters with tpu.cubes = 10")
    assert f"'{prefix}-10'" in found[0]


def test_requests_above_limits_are_refused_for_each_resource() -> None:
    res = {"requests": {"cpu": "3", "memory": "5Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    found = problems({**BASE, "addons": {"jobset": {"controllerResources": res}}})
    assert found == [
        f"{P}:addons.jobset.controllerResources.requests.cpu = '3': at most limits.cpu (2)",
        f"{P}:addons.jobset.controllerResources.requests.memory = '5Gi': at most limits.memory (4Gi)",
    ]


def test_quantities_are_compared_by_value_across_units() -> None:
    res = {"requests": {"cpu": "1500m", "memory": "1G"}, "limits": {"cpu": "1.5", "memory": "1e9"}}
    ok({**BASE, "addons": {"jobset": {"controllerResources": res}}})


def test_vllm_pods_must_fit_one_tpu_vm() -> None:
    found = problems({**BASE, "serving": {"decode": {"resources": {"cpu": "230", "memory": "1000Gi"}}}})
    assert [line.split(" = ")[0] for line in found] == [
        f"{P}:serving.decode.resources.cpu",
        f"{P}:serving.decode.resources.memory",
    ], found
    assert "224 vCPUs" in found[0] and "960 GiB" in found[1]


def test_vllm_batched_tokens_at_least_sequences() -> None:
    found = problems({**BASE, "serving": {"maxNumSeqs": 1024, "maxNumBatchedTokens": 1000}})
    assert found == [
        f"{P}:serving.maxNumBatchedTokens = 1000: at least serving.maxNumSeqs (1024): vLLM refuses fewer batched "
        "tokens than sequences in a batch"
    ]


# Values at the edges of a key's grammar, beyond the one refused and one accepted value of its Rule
# (tests/test_reference.py): None = accepted, else a fragment of the problem, which names the key.
@pytest.mark.parametrize(
    ("path", "value", "refused"),
    [
        *(("observability.scrapeInterval", v, None) for v in ["1m30s", "1500ms", "2h", "1w", "1d12h", "90s"]),
        *(("observability.scrapeInterval", v, "") for v in ["1m 30s", "30", "1.5m", "30s1m", "0s", "1y", ""]),
        ("serving.image", "vllm/vllm-tpu:nightly", None),  # Docker Hub short form
        ("serving.image", "ubuntu", None),  # no tag: the runtime pulls :latest
        *(
            ("serving.image", v, None)
            for v in ["localhost:5000/a/b", "[::1]:5000/a/b:t", "Registry.Example.COM/a__b/c-d.e:TAG_1.0"]
        ),
        ("serving.image", "gcr.io/p/i@sha256:" + "a" * 64, None),
        *(
            ("serving.image", v, "")
            for v in ["vllm/vLLM", "vllm/vllm:", "vllm/vllm:-tag", "a/b@sha256:abc", "a//b", "-a/b", "a/b:" + "t" * 129]
        ),
        ("serving.image", "a/b@md5:" + "a" * 32, ""),
        # Compute API reference, reservationBlocks.get: "Name should conform to RFC1035 or be a resource ID";
        # RFC 1035 names are 1-63 characters, [a-z]([-a-z0-9]*[a-z0-9])?.
        *(("tpu.reservation.name", v, None) for v in ["tpu7x-reservation", "a" * 63]),
        ("tpu.reservation.name", "1234567890123456789", None),  # a resource ID (uint64)
        *(("tpu.reservation.name", v, "RFC 1035") for v in ["a" * 64, "Tpu7x", "tpu7x-", "7x-reservation"]),
        *(("tpu.reservation.block", v, None) for v in ["block-0", ""]),
        ("tpu.reservation.block", "block_0", "RFC 1035"),
        ("tpu.reservation.block", "99999999999999999999", "RFC 1035"),  # above uint64
    ],
)
def test_values_at_the_edges_of_a_keys_grammar(path: str, value: str, refused: str | None) -> None:
    raw, _ = with_value(path, value, {})
    if refused is None:
        load(raw, PROJECT_ID, now=CLOCK)
    else:
        (line,) = problems(raw)
        assert line.startswith(f"{P}:{path} = ") and refused in line, line


def test_unknown_keys_hint_the_close_or_misplaced_key_without_the_value() -> None:
    found = problems({**BASE, "serving": {"imgae": "x", "hfToken": "y"}, "tpuu": {}})
    assert f"{P}:serving.imgae: unknown key; did you mean {P}:serving.image?" in found[0]
    assert f"{P}:serving.hfToken: unknown key; did you mean {P}:hfToken?" in found[1]
    assert found[2].startswith(f"{P}:tpuu: unknown key; did you mean {P}:tpu?")


def test_a_flat_nested_key_names_path_and_is_not_read() -> None:
    found = problems({**BASE, "tpu.cubes": "4"})
    assert found == [
        f"{P}:tpu.cubes: a nested key set without --path (Pulumi stored one flat key named 'tpu.cubes', which the "
        "program does not read); run `pulumi config rm tpu.cubes`, then `pulumi config set --path 'tpu.cubes' <value>`"
    ]


BAD_CONFIG = [
    ("typo", {f"{P}:netwrok": {"mtu": 8896}}, ["gke-tpu-slicing:netwrok", "unknown key", "network"]),
    ("nested typo", {f"{P}:network": {"mtuu": 8896}}, ["network.mtuu", "unknown key", "mtu"]),
    ("wrong type", {f"{P}:tpu": {"cubes": "two"}}, ["tpu.cubes", "'two'", "integer"]),
    ("zone", {f"{P}:zone": "uscentral1"}, ["gke-tpu-slicing:zone", "'uscentral1'", "<region>-<suffix>"]),
    ("not a CIDR", {f"{P}:network": {"tpuSubnetCidr": "10.10.0.0/33"}}, ["network.tpuSubnetCidr", "CIDR"]),
    (
        "overlapping CIDRs",
        {f"{P}:network": {"proxySubnetCidr": "10.10.4.0/26"}},
        ["network.proxySubnetCidr", "10.10.4.0/26", "overlap", "10.10.0.0/18"],
    ),
    ("MTU too high", {f"{P}:network": {"mtu": 9000}}, ["network.mtu", "9000", "1300", "8896"]),
    ("MTU too low", {f"{P}:network": {"mtu": 576}}, ["network.mtu", "576", "1300", "8896"]),
    ("machine type", {f"{P}:tpu": {"machineType": "tpu9-standard-8t"}}, ["tpu.machineType", "tpu7x-standard-4t"]),
    ("not AxBxC", {f"{P}:tpu": {"cubeTopology": "4x4x"}}, ["tpu.cubeTopology", "'4x4x'", "AxBxC"]),
    ("negative cubes", {f"{P}:tpu": {"cubes": -1}}, ["tpu.cubes", "-1", "greater than or equal to 0"]),
    ("no reservation", {f"{P}:tpu": {"reservation": {"name": None}}}, ["tpu.reservation.name", "required"]),
    (
        "maintenance window backwards",
        {f"{P}:cluster": {"maintenanceExclusion": {"start": "2026-12-29T00:00:00Z", "end": "2026-12-01T00:00:00Z"}}},
        ["cluster.maintenanceExclusion.end", "2026-12-01", "after start"],
    ),
    (
        "version before the slice controller",
        {f"{P}:cluster": {"version": "1.35.1-gke.1000000"}},
        ["cluster.version", "1.35.1-gke.1000000", "1.35.2-gke.1842000", "use-gke-dynamic-slicing"],
    ),
    ("not a GKE version", {f"{P}:cluster": {"version": "latest"}}, ["cluster.version", "'latest'"]),
    (
        "PROVISION_ONLY without SPECIFIC",
        {f"{P}:tpu": {"reservation": {"consumeType": "ANY"}}},
        ["tpu.reservation.consumeType", "'ANY'", "PROVISION_ONLY", "SPECIFIC"],
    ),
    (
        "system pool too small for the controllers",
        {
            f"{P}:cluster": {"systemMachineType": "n2-standard-4"},
            f"{P}:addons": {"kueue": {"replicas": 6}},
            f"{P}:serving": {"router": {"eppResources": {"requests": {"cpu": "2"}}}},
        },
        # 12400m (Kueue's six replicas count six times, JobSet's, LWS's, KEDA's and the slice controller's two twice)
        # against 2 x 2920m: the zones left when one is down
        ["cluster.systemMachineType", "n2-standard-4", "12400m CPU", "one of the regional cluster's 3 zones down"],
    ),
    (
        "one controller bigger than a node",
        {f"{P}:addons": {"lws": {"controllerResources": {"requests": {"cpu": "64"}}}}},
        ["addons.lws.controllerResources.requests", '"cpu": "64"', "n2-standard-8"],
    ),
    (
        # Three n1-highcpu-8 nodes a zone hold the controllers' total (the picker made smaller), but none has the
        # 4 GiB of one slice controller manager pod.
        "slice controller bigger than a node",
        {
            f"{P}:cluster": {"systemMachineType": "n1-highcpu-8", "systemNodeCount": 3},
            f"{P}:serving": {
                "router": {"eppResources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}}
            },
        },
        ["cluster.systemMachineType", "n1-highcpu-8", "slice controller's manager pod (2000m CPU, 4.0Gi"],
    ),
    (
        "demo shape fits no partition",
        {f"{P}:demos": {"subslicing": {"topology": "2x4x2"}}},
        ["demos.subslicing.topology", "2x4x2", "2x2x4"],
    ),
    (
        "unknown priority",
        {f"{P}:demos": {"superslicing": {"enabled": True, "priority": "urgent"}}},
        ["demos.superslicing.priority", "low-priority-1000"],
    ),
    ("unpinned chart", {f"{P}:addons": {"jobset": {"version": "latest"}}}, ["addons.jobset.version", "'latest'"]),
    (
        "unpinned manifest",
        {f"{P}:addons": {"sliceController": {"manifestUrl": "https://example.com/main/x.yaml"}}},
        ["addons.sliceController.manifestUrl", "pinned"],
    ),
]


@pytest.mark.parametrize(("case", "overrides", "expected"), BAD_CONFIG, ids=[c[0] for c in BAD_CONFIG])
def test_bad_config_fails_before_any_resource(case: str, overrides: dict, expected: list[str]) -> None:
    assert_rejected(overrides, expected, prefix="invalid stack configuration (1 problem)")


def test_the_tpu_subnet_holds_an_address_for_every_node_at_the_peak() -> None:
    # 8 cubes x 16 VMs of a 4x4x4 cube + 3 system nodes (1 per zone) + 1 surge node + the private endpoint + the
    # internal Gateway + 4 reserved = 138 addresses: a /25 (128) is refused, a /24 (256) is the smallest that fits.
    tpu = {"tpu": {**BASE["tpu"], "cubes": 8}}
    assert problems({**tpu, "network": {"tpuSubnetCidr": "10.10.0.0/25"}}) == [
        f"{P}:network.tpuSubnetCidr = '10.10.0.0/25': a block of at least 138 addresses (/24 or larger), not 128: "
        "its primary range holds 128 TPU VMs (tpu.cubes=8 x 16 VMs of a 4x4x4 cube), 3 system nodes "
        "(cluster.systemNodeCount=1 x the 3 zones of a regional cluster), 1 surge node of a system pool upgrade, "
        "1 control-plane private endpoint, 1 internal Gateway address, 4 addresses Google Cloud reserves in every "
        "primary range"
    ]
    ok({**tpu, "network": {"tpuSubnetCidr": "10.10.0.0/24"}})
    # No TPU pools, no Gateway: 4 x 3 system nodes + 1 + 1 + 4 = 18 do not fit a /28; 3 x 3 + 6 = 15 do.
    small = {
        "zone": "us-central1-ai1a",  # no cubes: no reservation to read it from
        "tpu": {**BASE["tpu"], "cubes": 0},
        "serving": {"enabled": False},
        "network": {"tpuSubnetCidr": "10.10.0.0/28"},
    }
    (found,) = problems({**small, "cluster": {"systemNodeCount": 4}})
    assert "at least 18 addresses (/27 or larger), not 16" in found and "TPU VMs" not in found, found
    ok({**small, "cluster": {"systemNodeCount": 3}})
