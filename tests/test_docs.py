"""The documentation holds together: every relative link in README.md and docs/*.md resolves (file and
`#anchor`, as GitHub renders headings), the README links every page, and no page refers a user to
something they do not have (the project's internal spec, its issue tracker numbers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.harness import stack_run
from tests.stack_config import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks (a `# comment` in a bash block is not a heading)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (github-slugger): the text, lowercased, punctuation dropped, spaces
    to hyphens. Inline code and links count by their text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    lines = prose(path.read_text())
    for line in lines:
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match[1])
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    # HTML anchors (`<a id="x"></a>`, as the change table gives each row): GitHub links #x to them too.
    out.update(re.findall(r'<a id="([^"]+)"></a>', "\n".join(lines)))
    return out


def links(path: Path) -> list[str]:
    # Inline code spans are not links: `[x](y)` written as code stays code.
    return [m[1] for line in prose(path.read_text()) for m in LINK.finditer(re.sub(r"`[^`]*`", "", line))]


def broken(path: Path, root: Path = ROOT) -> list[str]:
    """One line per link of `path` whose file or heading does not exist (names relative to `root`)."""
    out = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not checked offline
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            out.append(f"{path.relative_to(root)}: {target}: no file {file}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{path.relative_to(root)}: {target}: no heading #{anchor} in {dest.relative_to(root)}")
    return out


@pytest.mark.parametrize("path", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken(path) == []


def test_the_readme_links_every_page_and_the_link_checker_catches_a_broken_one(tmp_path: Path) -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md") if t.startswith("docs/")}
    assert linked == {p.resolve() for p in PAGES[1:]}
    (tmp_path / "a.md").write_text("# A page\n\n## Why `helm.v4.Chart`\n\n```bash\n# not a heading\n```\n")
    (tmp_path / "b.md").write_text(
        "[ok](a.md#why-helmv4chart) [gone](missing.md) [no anchor](a.md#not-a-heading) `[code](x.md)`\n"
    )
    problems = [p.split(": ", 1)[1] for p in broken(tmp_path / "b.md", tmp_path)]
    assert problems == ["missing.md: no file missing.md", "a.md#not-a-heading: no heading #not-a-heading in a.md"]


def test_slugs_follow_github() -> None:
    assert (
        slug("Team workflow: pull-request previews and promotion")
        == "team-workflow-pull-request-previews-and-promotion"
    )
    assert slug("Why `helm.v4.Chart`") == "why-helmv4chart"
    assert slug("`manifests/`") == "manifests"
    assert slug("Before the first command: Python and the placeholders") == (
        "before-the-first-command-python-and-the-placeholders"
    )


@pytest.mark.parametrize("path", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_no_page_refers_to_what_a_user_does_not_have(path: Path) -> None:
    text = path.read_text()
    assert not re.findall(r"\bSPEC\b", text), "the project's internal spec: say what it says instead"
    assert not re.findall(r"\bissues? #?\d+", text, flags=re.I), "an issue number of this project"


def test_the_codelab_page_maps_the_placement_policy_as_the_pools_send_it() -> None:
    """docs/codelab.md's row for `--placement-policy`: every `field="value"` it names is what each TPU pool's
    placementPolicy carries (a `type` of "", never COMPACT: components/tpu_node_pools.py placement_policy), and
    it names every field the pools send."""
    (row,) = [line for line in (ROOT / "docs" / "codelab.md").read_text().splitlines() if "--placement-policy" in line]
    mapped = row.split("|")[2]
    literals = dict(re.findall(r'(\w+)="([^"]*)"', mapped))
    fields = set(re.findall(r"\b(type|policy_name|tpu_topology)\b", mapped))
    pools = [r for r in stack_run("dev").of_type("gcp:container/nodePool:NodePool") if "placementPolicy" in r.inputs]
    assert pools
    for pool in pools:
        sent = pool.inputs["placementPolicy"]
        camel = {"type": "type", "policy_name": "policyName", "tpu_topology": "tpuTopology"}
        assert fields == {f for f, key in camel.items() if key in sent}, row
        assert {f: sent[camel[f]] for f in literals} == literals, row


def component_test_table() -> dict[str, tuple[list[str], str]]:
    """docs/tests.md's "Where a component's tests are": module -> (its test files, why they are not its own)."""
    rows: dict[str, tuple[list[str], str]] = {}
    for line in (ROOT / "docs" / "tests.md").read_text().splitlines():
        if line.startswith("| `components/"):
            module, tests = (cell.strip() for cell in line.strip("|").split("|"))
            files, _, why = tests.partition(":")
            rows[module.strip("`")] = ([f.strip().strip("`") for f in files.split(",")], why.strip())
    return rows


def test_every_component_module_has_its_tests_beside_it_or_says_where_they_are() -> None:
    modules = sorted(
        f"components/{p.name}" for p in (ROOT / "components").glob("*.py") if p.stem not in ("__init__", "__main__")
    )
    table = component_test_table()
    assert sorted(table) == modules, "docs/tests.md's table of where a component's tests are lists every module"
    for module, (files, why) in table.items():
        own = f"tests/test_{Path(module).stem}.py"
        if (ROOT / own).exists():  # its own file first, then only the modules it was split into
            parts = [f for f in files[1:] if not f.startswith(own.removesuffix(".py") + "_")]
            assert (files[0], parts, why) == (own, [], ""), f"{module}: its tests are {own} and its parts"
        else:
            assert why, f"{module} has no {own}: the table must say why its tests are in {files}"
        for name in files:
            assert (ROOT / name).is_file(), f"{module}: {name} does not exist"


def test_the_change_previews_test_files_are_named_after_its_modules() -> None:
    for path in sorted((ROOT / "tests").glob("test_diff_*.py")):
        module = ROOT / "components" / "model" / "diff" / f"{path.stem.removeprefix('test_diff_')}.py"
        assert module.is_file(), f"{path.name} names no module of components/model/diff/"


def test_the_codelab_differences_are_numbered_once() -> None:
    # Pages and code cite them by number ("difference 11"), so a number given twice points at two of them.
    numbers = [int(n) for n in re.findall(r"^(\d+)\. \*\*", (ROOT / "docs" / "codelab.md").read_text(), flags=re.M)]
    assert numbers == list(range(1, len(numbers) + 1))
