"""Replace-on-change (ForceNew) properties of every Google Cloud type the program registers, or will.

pulumi-gcp bridges terraform-provider-google-beta one to one: a ForceNew attribute of the Terraform
schema is a replace-on-change property of the Pulumi resource (snake_case -> camelCase; a list or set
without MaxItems 1 gets a plural name: `guest_accelerator` -> `guestAccelerators`).

Pin: pulumi-gcp 10.2.0 (requirements.txt; pulumi_gcp/pulumi-plugin.json of the installed package).
pulumi-gcp's own repository pins the provider as its `upstream` git submodule; its last 9.x tag
(v9.35.0) pins 3dc173a39774 = v7.45.0, and the 10.x major bridges the provider's 8.x major: the
installed 10.2.0 SDK no longer has `google_beyondcorp_app_connection`, `_app_connector` and
`_app_gateway`, which the provider removed in 8.0.0 (website/docs/guides/version_8_upgrade.html.markdown
L137-147). The facts are read from the provider at commit 93c65b2d60fe (branch release-8.0.0, the
newest 8.x source available offline): gcp_force_new.py is generated from its schema files
(`python -m tests.provider_schema --write`), with every ForceNew attribute but the few that
tests/provider_schema.py EXCLUDED leaves out, each with its reason; tests/test_diff_gcp.py checks it
against the sources and every path against the installed SDK's property names.
BLOCK: ForceNew on a block; SDKv2 compares its item count (adding or removing it replaces; a change
inside it follows the inner field's own ForceNew).
"""

from __future__ import annotations

from components.model.diff.facts import ALWAYS, DISABLED, GROW, PRESENCE, REJECT, REPLACE, SHRINK, Fact
from components.model.diff.gcp_force_new import FORCE_NEW as _FORCE_NEW

TPGB = "hashicorp/terraform-provider-google-beta@93c65b2d60fe google-beta/"

# The conditional replacements: a CustomizeDiff, not a schema flag, so not in the generated table below
# (tests/test_diff_gcp.py checks that each attribute exists). Cited at the CustomizeDiff's line.
_CONDITIONAL: dict[str, tuple[tuple[str, tuple[tuple, ...]], ...]] = {
    "gcp:compute/subnetwork:Subnetwork": (
        (
            "services/compute/resource_compute_subnetwork.go",
            (("ipCidrRange", 512, SHRINK),),  # customdiff.ForceNewIfChange("ip_cidr_range", IsShrinkageIpCidr), L63-80
        ),
    ),
    "gcp:container/cluster:Cluster": (
        (
            "services/container/resource_container_cluster.go",
            (
                ("enableL4IlbSubsetting", 259, DISABLED),  # ForceNewIfChange(..., isBeenEnabled), L228-239
                ("enableFqdnNetworkPolicy", 260, DISABLED),
            ),
        ),
    ),
}


def _facts() -> dict[str, tuple[Fact, ...]]:
    out: dict[str, tuple[Fact, ...]] = {}
    for type_, groups in _FORCE_NEW.items():
        facts: list[Fact] = []
        for file, entries in groups + _CONDITIONAL.get(type_, ()):
            for path, line, *condition in entries:
                when = condition[0] if condition else ALWAYS
                rule = {ALWAYS: "ForceNew", PRESENCE: "ForceNew block"}.get(when, f"ForceNew when {when}")
                facts.append(Fact(path, REPLACE, f"{TPGB}{file}:{line}", rule, when))
        out[type_] = tuple(facts)
    return out


FORCE_NEW: dict[str, tuple[Fact, ...]] = _facts()

# Updates the provider sends and the API refuses (no ForceNew: `pulumi up` fails on them halfway).
# A subnet whose range grows is updated through expandIpCidrRange (resource_compute_subnetwork.go L1259-1269),
# which GCE does not support for proxy-only subnets: "This command doesn't work for secondary subnets or for
# subnets that are used exclusively for load balancer proxies" (the API method's documented behaviour, in
# `gcloud compute networks subnets expand-ip-range`'s reference).
EXPAND_IP_RANGE = "https://cloud.google.com/sdk/gcloud/reference/compute/networks/subnets/expand-ip-range"
PROXY_PURPOSES = ("REGIONAL_MANAGED_PROXY", "GLOBAL_MANAGED_PROXY", "INTERNAL_HTTPS_LOAD_BALANCER")
API_REFUSALS: dict[str, tuple[Fact, ...]] = {
    "gcp:compute/subnetwork:Subnetwork": (
        Fact(
            "ipCidrRange",
            REJECT,
            f"{TPGB}services/compute/resource_compute_subnetwork.go:1269 expandIpCidrRange; {EXPAND_IP_RANGE}",
            "a proxy-only subnet's range cannot be expanded",
            GROW,
            guard="purpose",
            guard_values=PROXY_PURPOSES,
        ),
    ),
}
# In-place updates the resource code relies on (an attribute not in FORCE_NEW is updated by the resource's Update):
# RouterNat: PATCH of the router (services/compute/resource_compute_router_nat.go:1317, log_config included);
# Firewall: source_ranges and allow (services/compute/resource_compute_firewall.go:819).
# What the engine reads per Google Cloud type: the replace-on-change facts, then the refusals.
FACTS: dict[str, tuple[Fact, ...]] = {t: FORCE_NEW[t] + API_REFUSALS.get(t, ()) for t in FORCE_NEW}
