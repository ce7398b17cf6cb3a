"""The configuration reference (docs/configuration.md, Pulumi.yaml's key list) and one test per key, all from
the settings model.

Keys come from walking the pydantic models (components/model/config/reference.py keys()), so a new key gets its
row and its tests without anyone listing it; what it still needs is its description and `Rule` on its field,
and the tests below fail naming it until it has them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.cli import reference as reference_cli
from components.model.config.reference import (
    BEGIN,
    END,
    KEYS_BEGIN,
    KEYS_END,
    config_key,
    keys,
    markdown,
    page,
    project_file,
)
from components.model.config.rules import Rule
from components.model.config.settings import SECRET_TOP_KEYS, ConfigError, load
from tests.stack_config import CLOCK, ROOT, with_value

DOC = ROOT / "docs" / "configuration.md"
CHANGES = ROOT / "docs" / "changes.md"
KEYS = {k.path: k for k in keys()}
MISSING = (
    "has no complete rule: give its field a description and a `Rule` in its Annotated type (allowed values, their "
    "source, the docs/changes.md anchor of what changing it does, one refused value and one legal edge value; "
    "components/model/config/rules.py), then run `python -m components reference --write`"
)


def rule_of(path: str) -> Rule:
    rule = KEYS[path].rule
    if not rule.complete:
        pytest.fail(f"configuration key {config_key(path)} {MISSING}")
    return rule


def test_every_key_has_a_description_and_a_rule() -> None:
    missing = [config_key(p) for p, k in KEYS.items() if not (k.rule.complete and k.description)]
    assert not missing, f"{len(missing)} key(s) {MISSING}: {', '.join(missing)}"
    for path, key in KEYS.items():
        assert re.fullmatch(r"[a-z0-9-]+", key.rule.change), f"{path}: change anchor {key.rule.change!r}"


def test_a_description_is_read_from_its_field() -> None:
    """What the Pulumi package's schema reads: the field's own description, one line."""
    from components.model.config.network_settings import NetworkSettings

    assert NetworkSettings.model_fields["mtu"].description == KEYS["network.mtu"].description
    assert all("\n" not in k.description for k in KEYS.values())


def test_change_anchors_exist_in_the_change_table() -> None:
    text = CHANGES.read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', text))
    missing = sorted({k.rule.change for k in KEYS.values()} - anchors)
    assert not missing, f"docs/changes.md has no <a id=...> row for: {', '.join(missing)}"


def test_the_reference_is_up_to_date() -> None:
    assert DOC.is_file(), "docs/configuration.md is missing"
    text = DOC.read_text(encoding="utf-8")
    assert text == page(text), (
        "docs/configuration.md is out of date with the settings model: run `python -m components reference --write`"
    )
    assert markdown() in text


def test_the_project_file_lists_the_keys_the_models_accept() -> None:
    text = (ROOT / "Pulumi.yaml").read_text(encoding="utf-8")
    assert text == project_file(text), (
        "Pulumi.yaml's key list is out of date: run `python -m components reference --write`"
    )
    listed = " ".join(text.split(KEYS_BEGIN, 1)[1].split(KEYS_END, 1)[0].replace("#", " ").split())
    # same keys: one brace
    assert "jobset/kueue/lws {chart, version, namespace, controllerResources, replicas}" in listed
    # A top-level scalar is set as a secret only when the model types it so: the zone and the digest rule are not.
    assert "hfToken (a secret: pulumi config set --secret hfToken <value>)" in listed
    assert "zone (pulumi config set zone <value>)" in listed
    assert "requireImageDigests (pulumi config set requireImageDigests <value>)" in listed


def test_the_reference_has_one_row_per_key() -> None:
    text = markdown()
    for path in KEYS:
        assert text.count(f"| `{path}` |") == 1, path


def test_reference_command_checks_and_exits_1_when_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "configuration.md"
    doc.write_text(f"# Prose by hand\n\n{BEGIN}\nold table\n{END}\n\n## More prose\n")
    project = tmp_path / "Pulumi.yaml"
    project.write_text((ROOT / "Pulumi.yaml").read_text())
    monkeypatch.setattr(reference_cli, "DOC", doc)
    monkeypatch.setattr(reference_cli, "PROJECT_FILE", project)
    monkeypatch.setattr(reference_cli, "ROOT", tmp_path)
    assert reference_cli.main(["--check"]) == 1
    assert reference_cli.main(["--write"]) == 0
    assert reference_cli.main(["--check"]) == 0
    text = doc.read_text()
    assert text.startswith("# Prose by hand\n") and text.endswith(f"{END}\n\n## More prose\n")
    assert markdown() in text and "old table" not in text
    doc.write_text("no markers\n")
    assert reference_cli.main(["--check"]) == 2  # nowhere to generate into: a usage error, the file untouched
    assert doc.read_text() == "no markers\n"


@pytest.mark.parametrize("path", list(KEYS))
def test_a_value_the_rule_forbids_is_refused_naming_the_key(path: str) -> None:
    rule = rule_of(path)
    context = rule.context if rule.refused_context is None else rule.refused_context
    raw, project = with_value(path, rule.refused, context)
    with pytest.raises(ConfigError) as err:
        load(raw, project, now=CLOCK)
    lines = str(err.value).splitlines()[1:]
    key = config_key(path)
    # The line of the problem names the key: as its subject, or as the other side of a rule between two keys.
    named = re.compile(rf"(^|[\s(]){re.escape(key if path == 'project' else path)}([\s:=)]|$)")
    subject = (f"{key} ", f"{key}:", f"{key}.", f"{key}[")  # the key, or an item of it
    assert any(line.strip().startswith(subject) or named.search(line) for line in lines), (
        f"{key} = {rule.refused!r} was refused without naming the key:\n{err.value}"
    )


@pytest.mark.parametrize("path", list(KEYS))
def test_a_legal_edge_value_is_accepted(path: str) -> None:
    rule = rule_of(path)
    raw, project = with_value(path, rule.accepted, rule.context)
    # As a Pulumi secret where the key is one (plain text is refused, see above).
    try:
        load(raw, project, SECRET_TOP_KEYS, now=CLOCK)
    except ConfigError as err:
        pytest.fail(f"{config_key(path)} = {rule.accepted!r} is legal but was refused:\n{err}")


def test_a_new_key_of_any_shape_is_picked_up_from_its_model() -> None:
    from typing import Literal

    from pydantic import Field, SecretStr

    from components.model.config import reference
    from components.model.config.checks import Model

    class Sub(Model):
        name: str = "a"

    class Section(Model):
        sub_blocks: list[Sub] = Field(default_factory=list)
        mode: Literal["a", "b"] = "a"
        token: SecretStr | None = None
        nested: Sub = Field(default_factory=dict)

    found = {k.path: k for k in reference._walk(Section, "tpu.", None, "")}
    assert list(found) == ["tpu.subBlocks", "tpu.mode", "tpu.token", "tpu.nested.name"]
    assert found["tpu.mode"].type == "one of `a`, `b`" and found["tpu.mode"].default == "`a`"
    assert found["tpu.token"].secret and not found["tpu.mode"].secret


def test_a_key_without_a_rule_is_listed_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.model.config import reference

    extra = reference.Key("serving.newKey", "string", "`x`", False, "", Rule("a string", refused=""))
    monkeypatch.setattr(reference, "keys", lambda: [*keys(), extra])
    assert "| `serving.newKey` |  | string | `x` | **no rule recorded** |" in reference.markdown()


def test_a_rule_takes_its_types_parts_then_its_sections() -> None:
    """The rule of a key is its type's (shared by every key of that type) under its own, its sections' beneath."""
    from typing import Annotated

    from pydantic import Field

    from components.model.config import reference
    from components.model.config.checks import Model
    from components.model.config.rules import FLAG, Flag

    class Sub(Model):
        on: Annotated[Flag, Rule(accepted=True)] = Field(False, description="on")

    class Section(Model):
        sub: Annotated[Sub, Rule(change="sub-row", source="a section's")] = Field(default_factory=dict)

    (key,) = reference._walk(Section, "", None, "")
    assert (key.rule.allowed, key.rule.source, key.rule.refused) == (FLAG.allowed, FLAG.source, FLAG.refused)
    assert (key.rule.accepted, key.rule.change) == (True, "sub-row")  # its own, then its section's
