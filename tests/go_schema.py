"""A reader of terraform-plugin-sdk v2 schemas in Go source (no Go toolchain), for tests/provider_schema.py.

It tokenizes the Go text, matches brackets, and evaluates only what schema declarations are made of:
composite literals (`&schema.Resource{Schema: ...}`, `map[string]*schema.Schema{"name": {...}}`,
`&schema.Schema{...}`), package-level `var`s, calls of the package's own functions that `return` a schema
(`schemaNodeConfig()`), locals assigned in them, and `tpgresource.MergeSchemas(a, b)`. Anything else in a
schema position is reported as a problem (never skipped silently).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# ------------------------------------------------------------------------------------------------ tokens

_TOKEN = re.compile(
    r"""(?P<ws>\s+)|(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<raw>`[^`]*`)|(?P<str>"(?:\\.|[^"\\\n])*")"""
    r"""|(?P<rune>'(?:\\.|[^'\\\n])+')|(?P<num>\d[\w.]*)|(?P<ident>[A-Za-z_]\w*)"""
    r"""|(?P<op>:=|\.\.\.|&&|\|\||[-+*/%&|^<>=!]=?|<-|[{}()\[\],;:.~])""",
    re.S,
)
_OPEN = {"{": "}", "(": ")", "[": "]"}


@dataclass(frozen=True)
class Tok:
    kind: str
    text: str
    line: int


def tokenize(text: str) -> list[Tok]:
    out, pos, line = [], 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise SyntaxError(f"line {line}: cannot tokenize {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        if kind not in ("ws", "comment"):
            out.append(Tok(kind, m.group(), line))
        line += m.group().count("\n")
        pos = m.end()
    return out


def _matches(toks: list[Tok]) -> dict[int, int]:
    """Index of each opening bracket -> index of its closing one."""
    stack: list[int] = []
    out: dict[int, int] = {}
    for i, t in enumerate(toks):
        if t.kind == "op" and t.text in _OPEN:
            stack.append(i)
        elif t.kind == "op" and t.text in ")}]":
            j = stack.pop()
            if _OPEN[toks[j].text] != t.text:
                raise SyntaxError(f"line {t.line}: {t.text} closes {toks[j].text} of line {toks[j].line}")
            out[j] = i
    if stack:
        raise SyntaxError(f"line {toks[stack[-1]].line}: {toks[stack[-1]].text} never closed")
    return out


# ------------------------------------------------------------------------------------------ expressions


@dataclass
class Node:
    kind: str  # "composite" (type, items), "call" (name, args), "ref" (name), "lit", "opaque"
    name: str
    line: int
    file: str
    items: list[tuple[Node | None, Node]] = field(default_factory=list)  # composite: (key, value); call: args


class _File:
    def __init__(self, rel: str, text: str) -> None:
        self.rel = rel
        self.toks = tokenize(text)
        self.match = _matches(self.toks)
        self.opener = {c: o for o, c in self.match.items()}

    def end_of(self, i: int, stop: tuple[str, ...] = (",", ";")) -> int:
        """The index after the expression starting at i (at a depth-0 stop token or closing bracket)."""
        while i < len(self.toks):
            t = self.toks[i]
            if t.kind == "op" and t.text in _OPEN:
                i = self.match[i] + 1
                continue
            if t.kind == "op" and (t.text in ")}]" or t.text in stop):
                return i
            i += 1
        return i

    def value(self, i: int, j: int) -> Node:
        """The expression toks[i:j]."""
        toks, line = self.toks, self.toks[i].line
        if toks[i].text == "&":
            i += 1
        last = toks[j - 1]
        if last.text == "}" and last.kind == "op":
            k = self.opener[j - 1]
            head = toks[i:k]
            if all(t.kind == "ident" or t.text in ".*[]" for t in head) and not any(t.text == "func" for t in head):
                type_ = "".join(t.text for t in head)
                return Node("composite", type_, line, self.rel, self.elements(k + 1, j - 1))
        if last.text == ")" and last.kind == "op":
            k = self.opener[j - 1]
            head = toks[i:k]
            if head and all(t.kind == "ident" or t.text == "." for t in head):
                args = [value for _, value in self.elements(k + 1, j - 1)]
                return Node("call", "".join(t.text for t in head), line, self.rel, [(None, a) for a in args])
        if all(t.kind == "ident" or t.text == "." for t in toks[i:j]):
            return Node("ref", "".join(t.text for t in toks[i:j]), line, self.rel)
        if j - i == 1 and toks[i].kind in ("str", "raw", "num"):
            return Node("lit", toks[i].text.strip('"`'), line, self.rel)
        return Node("opaque", " ".join(t.text for t in toks[i:j])[:80], line, self.rel)

    def elements(self, i: int, j: int) -> list[tuple[Node | None, Node]]:
        out: list[tuple[Node | None, Node]] = []
        while i < j:
            e = self.end_of(i, (",", ":"))
            key: Node | None = None
            if e < j and self.toks[e].text == ":":
                key = self.value(i, e)
                i = e + 1
                e = self.end_of(i, (",",))
            out.append((key, self.value(i, e)))
            i = e + 1
        return out

    def declarations(self) -> Iterator[tuple[str, str, int, int]]:
        """("func"|"var", name, start, end) of each top-level declaration (no methods)."""
        toks, i = self.toks, 0
        while i < len(toks):
            t = toks[i]
            if t.text == "func":  # a function, or a method (its receiver first): find its body
                named = toks[i + 1].kind == "ident"
                k = i + 2 if named else self.match[i + 1] + 1
                while not (toks[k].text == "{" and toks[k - 1].text != "interface"):
                    k = self.match[k] + 1 if toks[k].text in "([" else k + 1
                if named:
                    yield "func", toks[i + 1].text, k + 1, self.match[k]
                i = self.match[k] + 1
            elif t.text == "var":
                specs = []
                if toks[i + 1].text == "(":  # var ( a = ...\n b = ... )
                    k, close = i + 2, self.match[i + 1]
                    while k < close:
                        e = self._spec_end(k, close)
                        specs.append((k, e))
                        k = e
                    i = close + 1
                else:
                    specs.append((i + 1, self._spec_end(i + 1, len(toks))))
                    i = specs[0][1]
                for s, e in specs:
                    eq = next((k for k in range(s, e) if toks[k].text == "="), None)
                    if eq is not None and toks[s].kind == "ident":
                        yield "var", toks[s].text, eq + 1, e
            elif t.kind == "op" and t.text in _OPEN:
                i = self.match[i] + 1
            else:
                i += 1

    def _spec_end(self, i: int, limit: int) -> int:
        """Go has no semicolons in the text: a var's value ends where its line ends outside brackets."""
        k = i
        while k < limit:
            t = self.toks[k]
            if t.text in _OPEN and t.kind == "op":
                k = self.match[k] + 1
                if k < limit and self.toks[k].line != self.toks[k - 1].line:
                    return k
                continue
            if k + 1 < limit and self.toks[k + 1].line != t.line and t.text not in (".", ",", "(", "&&", "||", "+"):
                return k + 1
            k += 1
        return limit

    def body(self, start: int, end: int) -> tuple[dict[str, Node], Node | None]:
        """The locals assigned at the top of a function body (`x := expr`) and its last top-level return."""
        toks, local, ret, i = self.toks, {}, None, start
        while i < end:
            t = toks[i]
            if t.kind == "op" and t.text in _OPEN:
                i = self.match[i] + 1
                continue
            if t.text == "return":
                ret = self.value(i + 1, self._spec_end(i + 1, end))
            elif t.kind == "ident" and i + 1 < end and toks[i + 1].text == ":=":
                local[t.text] = self.value(i + 2, self._spec_end(i + 2, end))
            i += 1
        return local, ret


# --------------------------------------------------------------------------------------------- schemas


@dataclass(frozen=True)
class Attr:
    path: str  # Terraform, dotted: "node_config.guest_accelerator.count"
    file: str  # of the schema literal (its flags), relative to google-beta/
    start: int  # the literal's first line
    key: str  # file:line of its name in the schema map (elsewhere when a helper returns the literal)
    flags: dict[str, str]  # field -> value text, e.g. {"Type": "schema.TypeList", "ForceNew": "true"}
    lines: dict[str, int]  # field -> line
    block: bool  # Elem is a schema.Resource

    @property
    def force_new(self) -> bool:
        return self.flags.get("ForceNew") == "true"

    @property
    def line(self) -> int:
        """The line the change preview cites: of `ForceNew: true` when there is one."""
        return self.lines["ForceNew"] if self.force_new else self.start

    @property
    def plural(self) -> bool:
        return self.flags.get("Type") in ("schema.TypeList", "schema.TypeSet") and self.flags.get("MaxItems") != "1"


class Package:
    """The declarations of one Go package directory, evaluated on demand."""

    def __init__(self, files: list[_File]) -> None:
        self.files = files
        self.decls = {name: (kind, f, s, e) for f in files for kind, name, s, e in f.declarations()}


class Reader:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.problems: list[str] = []
        by_dir: dict[str, list[_File]] = {}
        for path in sorted(base.rglob("*.go")):
            rel = path.relative_to(base).as_posix()
            try:
                by_dir.setdefault(str(Path(rel).parent), []).append(_File(rel, path.read_text()))
            except SyntaxError as err:
                self.problems.append(f"{rel}: {err}")
        self.packages: dict[str, Package] = {d: Package(fs) for d, fs in by_dir.items()}

    def _problem(self, node: Node, what: str) -> None:
        self.problems.append(f"{node.file}:{node.line}: {what}: {node.kind} {node.name}")

    def _resolve(self, pkg: str, node: Node, local: dict[str, Node]) -> tuple[str, Node, dict[str, Node]] | None:
        """Follow a ref or a call of the package's own function to the expression it stands for."""
        for _ in range(10):
            if node.kind == "ref" and node.name in local:
                node = local[node.name]
                continue
            name = node.name.split(".")[-1]
            target_pkg = pkg
            if "." in node.name:  # another package of ours: tpgiamresource.IamMemberBaseSchema
                qual = node.name.split(".")[0]
                target_pkg = next((p for p in self.packages if p.split("/")[-1] == qual), "")
            decl = self.packages.get(target_pkg, Package([])).decls.get(name) if target_pkg else None
            if node.kind not in ("ref", "call") or decl is None:
                return pkg, node, local
            kind, f, s, e = decl
            if kind == "var":
                pkg, node, local = target_pkg, f.value(s, e), {}
            else:
                local, ret = f.body(s, e)
                if ret is None:
                    return None
                pkg, node = target_pkg, ret
        return None

    def schema_map(self, pkg: str, node: Node, prefix: str, local: dict[str, Node]) -> list[Attr]:
        if node.kind == "call" and node.name.endswith("MergeSchemas"):
            return [a for _, arg in node.items for a in self.schema_map(pkg, arg, prefix, local)]
        resolved = self._resolve(pkg, node, local)
        if resolved is None:
            self._problem(node, "no return")
            return []
        pkg, node, local = resolved
        if node.kind == "call" and node.name.endswith("MergeSchemas"):
            return self.schema_map(pkg, node, prefix, local)
        if node.kind != "composite" or node.name != "map[string]*schema.Schema":
            self._problem(node, "not a schema map")
            return []
        out: list[Attr] = []
        for key, value in node.items:
            if key is None or key.kind != "lit":
                self._problem(value, "schema map entry without a string key")
                continue
            out += self.attribute(pkg, value, prefix + key.name, key, local)
        return out

    def attribute(self, pkg: str, node: Node, path: str, key: Node, local: dict[str, Node]) -> list[Attr]:
        resolved = self._resolve(pkg, node, local)
        if resolved is None or resolved[1].kind != "composite" or resolved[1].name not in ("", "schema.Schema"):
            self._problem(node, f"attribute {path} is not a schema literal")
            return []
        pkg, node, local = resolved
        fields = {k.name: (v, k.line) for k, v in node.items if k is not None}
        flags = {name: v.name for name, (v, _) in fields.items() if v.kind in ("ref", "lit")}
        lines = {name: line for name, (_, line) in fields.items()}
        nested: list[Attr] = []
        block = False
        if "Elem" in fields:
            elem = self._resolve(pkg, fields["Elem"][0], local)
            if elem is None or elem[1].kind != "composite":
                self._problem(fields["Elem"][0], f"Elem of {path}")
            elif elem[1].name == "schema.Resource":
                block = True
                inner = {k.name: v for k, v in elem[1].items if k is not None}
                nested = self.schema_map(elem[0], inner["Schema"], path + ".", elem[2])
            elif elem[1].name != "schema.Schema":
                self._problem(elem[1], f"Elem of {path}")
        return [Attr(path, node.file, node.line, f"{key.file}:{key.line}", flags, lines, block), *nested]

    def resource(self, pkg: str, name: str) -> list[Attr]:
        """The attributes of a declaration: a func returning a schema.Resource, or a var holding a schema map."""
        root = Node("ref", name, 0, pkg)
        resolved = self._resolve(pkg, root, {})
        if resolved is None or resolved[1].kind != "composite":
            self._problem(root, "not a declaration of a schema")
            return []
        pkg2, node, local = resolved
        if node.name == "schema.Resource":
            fields = {k.name: v for k, v in node.items if k is not None}
            return self.schema_map(pkg2, fields["Schema"], "", local)
        if node.name == "schema.Schema":  # a helper returning one attribute: its paths start with its name
            return self.attribute(pkg2, node, f"{name}()", node, local)
        return self.schema_map(pkg2, node, "", local)

    def file_attributes(self, rel: str) -> dict[str, list[Attr]]:
        """Every schema declared in one file (a func returning *schema.Resource or *schema.Schema, or a var
        holding a schema literal): declaration name -> its attributes. The reader's per-file view."""
        pkg = str(Path(rel).parent)
        out = {}
        for name, (kind, f, s, e) in self.packages[pkg].decls.items():
            if f.rel != rel:
                continue
            if kind == "func":
                schematic = "".join(t.text for t in f.toks[s - 6 : s - 1]).endswith(_SCHEMA_TYPES)
            else:
                value = f.value(s, e)
                schematic = value.kind == "composite" and value.name.endswith(_SCHEMA_TYPES)
            if schematic:
                out[name] = self.resource(pkg, name)
        return out


_SCHEMA_TYPES = ("schema.Resource", "schema.Schema")


@functools.cache
def reader(base: Path) -> Reader:
    return Reader(base)
