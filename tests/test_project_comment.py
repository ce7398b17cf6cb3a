"""The key list in Pulumi.yaml's comment is the keys the pydantic models accept, so it cannot drift again.

The comment is what a user reads to find a key; the models (`extra="forbid"`) are what the program accepts.
Every key the comment lists must be accepted, and every accepted key down to three levels
(`section.key.subkey`, e.g. `tpu.reservation.name`) must be listed; below that (the `cpu`/`memory` of a
`resources` map) the comment may stop. A failure says exactly what to add to, or remove from, which line.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from components.model.settings import Settings
from tests.harness import ROOT

DEPTH = 3  # levels the comment must list completely
Tree = dict[str, "Tree"]


def comment_tree(text: str) -> Tree:
    """The keys of the comment's key list (lines `  #   section {key, key {sub, ...}, a/b {...}}`).

    `a/b {...}` gives a and b the same keys; `(...)` is a remark, not a key.
    """
    lines = [line[len("  #") :] for line in text.splitlines() if re.match(r"  # {3,}\S", line)]
    body = " ".join(lines)
    while re.search(r"\([^()]*\)", body):
        body = re.sub(r"\([^()]*\)", " ", body)
    tokens = re.findall(r"[A-Za-z]\w*(?:/[A-Za-z]\w*)*|[{},]", body)
    tree, end = _items(tokens, 0)
    assert end == len(tokens), f"unbalanced braces in Pulumi.yaml's key list near {' '.join(tokens[end:][:5])}"
    return tree


def _items(tokens: list[str], i: int) -> tuple[Tree, int]:
    out: Tree = {}
    while i < len(tokens) and tokens[i] != "}":
        if tokens[i] in ",{":
            assert tokens[i] == ",", f"a '{{' without a key before it near {' '.join(tokens[i : i + 5])}"
            i += 1
            continue
        names, i = tokens[i].split("/"), i + 1
        sub: Tree = {}
        if i < len(tokens) and tokens[i] == "{":
            sub, i = _items(tokens, i + 1)
            assert i < len(tokens), "a '{' is never closed"
            i += 1
        for name in names:
            assert name not in out, f"{name} is listed twice"
            out[name] = sub
    return out, i


def _model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # `Model | None`
        return next((m for m in map(_model, typing.get_args(annotation)) if m), None)
    return None


def model_tree(model: type[BaseModel]) -> Tree:
    """The keys a model accepts (camelCase aliases, as a stack file writes them), nested models as subtrees."""
    out: Tree = {}
    for name, field in model.model_fields.items():
        sub = _model(field.annotation)
        out[field.alias or name] = model_tree(sub) if sub else {}
    return out


def paths(tree: Tree, prefix: str = "", depth: int | None = None) -> set[str]:
    out = set()
    for key, sub in tree.items():
        path = f"{prefix}{key}"
        out.add(path)
        if depth is None or depth > 1:
            out |= paths(sub, f"{path}.", None if depth is None else depth - 1)
    return out


def drift(comment: Tree, declared: set[str]) -> list[str]:
    """What to change in the comment, one line per key (empty when it matches the models)."""
    accepted = model_tree(Settings)
    accepted.pop("project")  # gcp:project, Pulumi's own key
    for key in declared:  # declared with a type under `config:` (zone), not in the comment
        accepted.pop(key, None)
    listed = paths(comment)
    problems = []
    for path in sorted(paths(accepted, depth=DEPTH) - listed):
        parent, _, key = path.rpartition(".")
        where = f"inside `{parent}`'s braces on the `#   {path.split('.')[0]}` line" if parent else "as a new line"
        problems.append(f"Pulumi.yaml's key comment lacks {path}: add `{key}` {where}")
    for path in sorted(listed - paths(accepted)):
        parent, _, key = path.rpartition(".")
        problems.append(
            f"Pulumi.yaml's key comment lists {path}, which the settings models refuse: remove `{key}`"
            + (f" from `{parent}`" if parent else "")
        )
    return problems


def _project_file() -> tuple[str, set[str]]:
    text = (ROOT / "Pulumi.yaml").read_text()
    declared = {k for k in yaml.safe_load(text)["config"] if ":" not in k}
    return text, declared


def test_the_comment_lists_exactly_the_keys_the_models_accept() -> None:
    text, declared = _project_file()
    assert declared == {"zone"}
    assert drift(comment_tree(text), declared) == []


def test_the_parser_reads_shared_braces_and_remarks() -> None:
    tree = comment_tree("  #   a {b/c {d}, e (a remark, with commas)}\n  #   f (secret)\n  # prose, not keys\n")
    assert tree == {"a": {"b": {"d": {}}, "c": {"d": {}}, "e": {}}, "f": {}}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "prefill/decode {name, replicas",
            "prefill/decode {replicas",
            [
                "Pulumi.yaml's key comment lacks serving.decode.name: add `name` inside `serving.decode`'s braces "
                "on the `#   serving` line",
                "Pulumi.yaml's key comment lacks serving.prefill.name: add `name` inside `serving.prefill`'s braces "
                "on the `#   serving` line",
            ],
        ),
        (
            "sliceController {manifestUrl, drainTimeoutSeconds, featureGates}",
            "sliceController {manifestUrl, drainTimeoutSeconds, featureGates, namespace}",
            [
                "Pulumi.yaml's key comment lists addons.sliceController.namespace, which the settings models "
                "refuse: remove `namespace` from `addons.sliceController`"
            ],
        ),
        (
            "#   demos     {",
            "#   demoz     {",
            [
                "Pulumi.yaml's key comment lacks demos: add `demos` as a new line",
                *(
                    f"Pulumi.yaml's key comment lacks demos.{p}: add `{p.rpartition('.')[2]}` inside "
                    f"`demos{'.' + p.rpartition('.')[0] if '.' in p else ''}`'s braces on the `#   demos` line"
                    for p in sorted(paths(model_tree(Settings)["demos"]))
                ),
                *(
                    f"Pulumi.yaml's key comment lists {p}, which the settings models refuse: remove "
                    f"`{p.rpartition('.')[2]}`" + (f" from `{p.rpartition('.')[0]}`" if "." in p else "")
                    for p in sorted(paths({"demoz": model_tree(Settings)["demos"]}))
                ),
            ],
        ),
    ],
    ids=["a new key not listed", "a key the models refuse", "a renamed section"],
)
def test_drift_says_what_to_change(old: str, new: str, expected: list[str]) -> None:
    text, declared = _project_file()
    assert old in text
    assert drift(comment_tree(text.replace(old, new)), declared) == expected
