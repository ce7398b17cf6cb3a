"""The provider-schema reader (tests/go_schema.py) on small Go sources, and tests/provider_schema.py --check/--write."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import provider_schema, upstream

GO = """package compute

// a comment with "quotes" and { braces }
var sharedSchema = map[string]*schema.Schema{
	"project": {
		Type:     schema.TypeString,
		Optional: true,
		ForceNew: true,
	},
}

func helperSchema() *schema.Resource {
	return &schema.Resource{
		Schema: map[string]*schema.Schema{
			"key": {Type: schema.TypeString, Required: true, ForceNew: true},
		},
	}
}

func ResourceThing() *schema.Resource {
	return &schema.Resource{
		Identity: &schema.ResourceIdentity{
			SchemaFunc: func() map[string]*schema.Schema {
				return map[string]*schema.Schema{"ignored": {Type: schema.TypeString, ForceNew: true}}
			},
		},
		Schema: tpgresource.MergeSchemas(sharedSchema, map[string]*schema.Schema{
			"node_affinity": {
				Type:        schema.TypeList,
				Optional:    true,
				Description: `a raw string with } and "`,
				Elem:        helperSchema(),
			},
			"config": {
				Type:     schema.TypeList,
				MaxItems: 1,
				ForceNew: true,
				Elem: &schema.Resource{
					Schema: map[string]*schema.Schema{
						"scopes": {Type: schema.TypeSet, Elem: &schema.Schema{Type: schema.TypeString}, ForceNew: true},
					},
				},
			},
			"policy": elsewhere.PolicySchema(),
		}),
	}
}
"""


@pytest.fixture
def thing(tmp_path: Path) -> provider_schema.Reader:
    (tmp_path / "services/compute").mkdir(parents=True)
    (tmp_path / "services/compute/resource_thing.go").write_text(GO)
    return provider_schema.Reader(tmp_path)


def test_the_reader_follows_vars_helpers_merges_and_nested_blocks(thing: provider_schema.Reader) -> None:
    attrs = {a.path: a for a in thing.resource("services/compute", "ResourceThing")}
    assert list(attrs) == ["project", "node_affinity", "node_affinity.key", "config", "config.scopes"]
    assert attrs["project"].force_new and attrs["project"].line == 8 and attrs["project"].key.endswith(":5")
    assert attrs["node_affinity.key"].line == 15 and attrs["node_affinity.key"].flags["Required"] == "true"
    assert attrs["config"].block and not attrs["config.scopes"].block and not attrs["node_affinity"].force_new


def test_the_reader_reports_what_it_cannot_evaluate(thing: provider_schema.Reader) -> None:
    thing.resource("services/compute", "ResourceThing")
    assert thing.problems == [
        "services/compute/resource_thing.go:44: attribute policy is not a schema literal: call elsewhere.PolicySchema"
    ]
    assert thing.file_attributes("services/compute/resource_thing.go").keys() == {
        "sharedSchema",
        "helperSchema",
        "ResourceThing",
    }


def test_pulumi_names_are_camel_case_and_plural_for_lists_without_max_items_1(thing: provider_schema.Reader) -> None:
    provider_schema.ROOTS["test:thing"] = (("services/compute", "ResourceThing"),)
    try:
        paths = list(provider_schema.type_attributes(thing, "test:thing"))
    finally:
        del provider_schema.ROOTS["test:thing"]
    assert paths == ["project", "nodeAffinities", "nodeAffinities.key", "config", "config.scopes"]


def test_check_prints_the_table_of_the_sources_and_write_fixes_a_wrong_line(
    monkeypatch, tmp_path: Path, capsys
) -> None:
    upstream.require(provider_schema.BASE)
    table = tmp_path / "gcp_force_new.py"
    good = provider_schema.TABLE.read_text()
    table.write_text(good.replace("accountId:93", "accountId:94"))
    monkeypatch.setattr(provider_schema, "TABLE", table)
    assert provider_schema.main(["--check"]) == 1
    assert "accountId:93" in capsys.readouterr().out
    assert provider_schema.main(["--write"]) == 0 and table.read_text() == good
    assert provider_schema.main(["--check"]) == 0
