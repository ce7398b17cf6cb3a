"""The smallest PromQL evaluator the burst slots' queries need, with Prometheus's semantics for that subset, so the
tests run the program's query strings themselves on synthetic series (no Prometheus here, nor in CI).

Covered (prometheus/prometheus promql/engine.go and functions.go, v2.44 as Managed Prometheus): number literals,
selectors with `=`/`!=`/`=~` matchers (the quoted `{"__name__"="m"}` form too), instant lookback of 5 minutes, range
selectors and subqueries (steps aligned to multiples of the resolution), every window closed at its start as in
Prometheus 2 (a sample exactly a range old is in it; Prometheus 3 opened them), which tests/test_burst_promql.py
checks against promtool, `sum`/`max`/`min`/`count` (with `by`),
`+ - * /` and comparisons (with `bool`) between vectors and scalars, `and`/`or` (with `on`), and the functions
`last_over_time`, `max_over_time`, `min_over_time`, `absent_over_time`, `present_over_time`, `increase` (without
extrapolation), `ceil`, `clamp_max`, `clamp_min`, `label_replace`, `vector`. Anything else is a parse error: a query
the evaluator does not know fails its test instead of being half-evaluated.

Vector matching ignores `__name__` (labels.Labels.HashWithoutLabels always skips it); arithmetic, comparisons with
`bool` and functions drop it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from lark import Lark, Token, Tree

LOOKBACK = 300.0  # seconds an instant selector looks back for a sample

GRAMMAR = r"""
?start: expr
?expr: or_e
?or_e: and_e | or_e "or" matching? and_e -> or_
?and_e: cmp_e | and_e "and" matching? cmp_e -> and_
?cmp_e: add_e | cmp_e CMP BOOL? add_e -> cmp
?add_e: mul_e | add_e ADD mul_e -> arith
?mul_e: post | mul_e MUL post -> arith
?post: atom | post "[" DURATION "]" -> range | post "[" DURATION ":" DURATION "]" -> subquery
?atom: NUMBER -> number
     | STRING -> string
     | AGG grouping? "(" expr ")" -> agg
     | NAME "(" [expr ("," expr)*] ")" -> call
     | NAME "{" [matcher ("," matcher)*] "}" -> selector
     | "{" [matcher ("," matcher)*] "}" -> selector
     | NAME -> selector
     | "(" expr ")"
matching: "on" "(" [NAME ("," NAME)*] ")"
grouping: "by" "(" [NAME ("," NAME)*] ")"
matcher: (NAME | STRING) MOP STRING
AGG.2: /(sum|max|min|count)(?![a-zA-Z0-9_:])/
BOOL.2: /bool(?![a-zA-Z0-9_:])/
CMP: "==" | "!=" | ">=" | "<=" | ">" | "<"
MOP: "=~" | "!=" | "="
ADD: "+" | "-"
MUL: "*" | "/"
DURATION: /[0-9]+[smh]/
NAME: /[a-zA-Z_:][a-zA-Z0-9_:]*/
STRING: /"[^"]*"/
NUMBER: /[0-9]+(\.[0-9]+)?/
%ignore /\s+/
"""
_PARSER = Lark(GRAMMAR, parser="lalr")


@lru_cache(maxsize=256)
def parse(text: str) -> Tree:
    return _PARSER.parse(text)


Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]


@dataclass
class Series:
    """Samples of every series, by label set (with `__name__`)."""

    samples: dict[Labels, list[tuple[float, float]]] = field(default_factory=dict)

    def add(self, labels: Mapping[str, str], t: float, value: float) -> None:
        self.samples.setdefault(frozenset(labels.items()), []).append((t, value))


def _seconds(text: str) -> float:
    return float(text[:-1]) * {"s": 1, "m": 60, "h": 3600}[text[-1]]


def _without_name(labels: Labels) -> Labels:
    return frozenset(kv for kv in labels if kv[0] != "__name__")


class Evaluator:
    def __init__(self, series: Series) -> None:
        self.series = series

    def query(self, text: str, t: float) -> Vector | float:
        return self._eval(parse(text), t)

    def scalar(self, text: str, t: float) -> float:
        """A query's one value, as KEDA reads it: exactly one series (else the scaler errs), or a scalar."""
        result = self.query(text, t)
        if isinstance(result, float):
            return result
        assert len(result) == 1, f"{len(result)} series: KEDA's Prometheus scaler refuses anything but one"
        return next(iter(result.values()))

    # -- selectors -------------------------------------------------------------------------------
    def _matchers(self, node: Tree) -> list[tuple[str, str, str]]:
        out = []
        name = next((c for c in node.children if isinstance(c, Token) and c.type == "NAME"), None)
        if name is not None:
            out.append(("__name__", "=", str(name)))
        for m in node.children:
            if isinstance(m, Tree) and m.data == "matcher":
                label, op, value = (str(c) for c in m.children)
                out.append((label.strip('"'), op, value.strip('"')))
        return out

    def _selected(self, node: Tree) -> list[Labels]:
        matchers = self._matchers(node)

        def ok(labels: Labels) -> bool:
            d = dict(labels)
            for label, op, value in matchers:
                have = d.get(label, "")
                if (op == "=" and have != value) or (op == "!=" and have == value):
                    return False
                if op == "=~" and not re.fullmatch(value, have):
                    return False
            return True

        return [labels for labels in self.series.samples if ok(labels)]

    def _instant(self, node: Tree, t: float) -> Vector:
        out: Vector = {}
        for labels in self._selected(node):
            recent = [v for ts, v in self.series.samples[labels] if t - LOOKBACK <= ts <= t]
            if recent:
                out[labels] = recent[-1]
        return out

    def _range(self, node: Tree, t: float) -> dict[Labels, list[tuple[float, float]]]:
        inner, duration = node.children
        span = _seconds(str(duration))
        if isinstance(inner, Tree) and inner.data == "selector":
            return {
                labels: kept
                for labels in self._selected(inner)
                if (kept := [(ts, v) for ts, v in self.series.samples[labels] if t - span <= ts <= t])
            }
        raise ValueError("a range of anything but a selector")

    def _subquery(self, node: Tree, t: float) -> dict[Labels, list[tuple[float, float]]]:
        inner, duration, step = node.children
        span, res = _seconds(str(duration)), _seconds(str(step))
        out: dict[Labels, list[tuple[float, float]]] = {}
        ts = math.floor(t / res) * res
        points = []
        while ts >= t - span:
            points.append(ts)
            ts -= res
        for ts in reversed(points):
            result = self._eval(inner, ts)
            assert isinstance(result, dict), "a subquery of a scalar"
            for labels, v in result.items():
                out.setdefault(labels, []).append((ts, v))
        return out

    # -- the tree --------------------------------------------------------------------------------
    def _eval(self, node: Tree | Token, t: float) -> Vector | float:
        assert isinstance(node, Tree), node
        kind = node.data
        if kind == "number":
            return float(node.children[0])
        if kind == "selector":
            return self._instant(node, t)
        if kind == "agg":
            return self._agg(node, t)
        if kind == "call":
            return self._call(node, t)
        if kind in ("arith", "cmp"):
            return self._binary(node, t)
        if kind in ("and_", "or_"):
            return self._set(node, t)
        raise ValueError(f"unsupported PromQL: {kind}")

    def _agg(self, node: Tree, t: float) -> Vector:
        op = str(node.children[0])
        by = next((c for c in node.children[1:-1] if isinstance(c, Tree) and c.data == "grouping"), None)
        keys = [str(c) for c in by.children if c is not None] if by else []
        vector = self._eval(node.children[-1], t)
        assert isinstance(vector, dict)
        groups: dict[Labels, list[float]] = {}
        for labels, v in vector.items():
            key = frozenset(kv for kv in labels if kv[0] in keys)
            groups.setdefault(key, []).append(v)
        fn: Callable[[list[float]], float] = {"sum": sum, "max": max, "min": min, "count": len}[op]  # type: ignore[assignment]
        return {key: float(fn(vs)) for key, vs in groups.items()}

    def _call(self, node: Tree, t: float) -> Vector:
        name, *args = node.children
        name = str(name)
        args = [a for a in args if a is not None]
        if name.endswith("_over_time") or name == "increase":
            arg = args[0]
            ranged = self._subquery(arg, t) if arg.data == "subquery" else self._range(arg, t)
            if name == "absent_over_time":
                if ranged:
                    return {}
                inner = arg.children[0]
                equal = frozenset(
                    (label, value) for label, op, value in self._matchers(inner) if op == "=" and label != "__name__"
                )
                return {equal: 1.0}
            fns: dict[str, Callable[[list[float]], float]] = {
                "last_over_time": lambda vs: vs[-1],
                "max_over_time": max,
                "min_over_time": min,
                "present_over_time": lambda vs: 1.0,
                "increase": lambda vs: vs[-1] - vs[0],
            }
            return {_without_name(labels): fns[name]([v for _, v in samples]) for labels, samples in ranged.items()}
        if name == "vector":
            value = self._eval(args[0], t)
            assert isinstance(value, float)
            return {frozenset(): value}
        vector = self._eval(args[0], t)
        assert isinstance(vector, dict)
        if name == "ceil":
            return {_without_name(k): float(math.ceil(v)) for k, v in vector.items()}
        if name in ("clamp_max", "clamp_min"):
            bound = self._eval(args[1], t)
            assert isinstance(bound, float)
            pick = min if name == "clamp_max" else max
            return {_without_name(k): pick(v, bound) for k, v in vector.items()}
        if name == "label_replace":
            dst, repl, src, regex = (str(a.children[0]).strip('"') for a in args[1:])
            out: Vector = {}
            for labels, v in vector.items():
                d = dict(labels)
                m = re.fullmatch(regex, d.get(src, ""))
                if m:
                    d[dst] = m.expand(repl.replace("$1", r"\1"))
                out[frozenset(d.items())] = v
            return out
        raise ValueError(f"unsupported function {name}")

    def _binary(self, node: Tree, t: float) -> Vector | float:
        lhs, op, *rest = node.children
        rhs = rest[-1]
        as_bool = any(isinstance(c, Token) and c.type == "BOOL" for c in rest[:-1])
        a, b, op = self._eval(lhs, t), self._eval(rhs, t), str(op)
        ops: dict[str, Callable[[float, float], float]] = {
            "+": lambda x, y: x + y,
            "-": lambda x, y: x - y,
            "*": lambda x, y: x * y,
            "/": lambda x, y: x / y if y else math.copysign(math.inf, x) if x else math.nan,
            "==": lambda x, y: float(x == y),
            "!=": lambda x, y: float(x != y),
            ">": lambda x, y: float(x > y),
            "<": lambda x, y: float(x < y),
            ">=": lambda x, y: float(x >= y),
            "<=": lambda x, y: float(x <= y),
        }
        fn = ops[op]
        comparison = node.data == "cmp"
        if isinstance(a, float) and isinstance(b, float):
            return fn(a, b)

        def one(x: float, y: float, keep: float) -> float | None:
            r = fn(x, y)
            if comparison and not as_bool:
                return keep if r else None
            return r

        if isinstance(b, float):
            assert isinstance(a, dict)
            out = {(_without_name(k) if not comparison or as_bool else k): one(v, b, v) for k, v in a.items()}
        elif isinstance(a, float):
            out = {(_without_name(k) if not comparison or as_bool else k): one(a, v, v) for k, v in b.items()}
        else:
            right = {_without_name(k): v for k, v in b.items()}
            assert len(right) == len(b), "many-to-one matching is not covered"
            out = {}
            for k, v in a.items():
                key = _without_name(k)
                if key in right:
                    out[key if not comparison or as_bool else k] = one(v, right[key], v)
        return {k: v for k, v in out.items() if v is not None}

    def _set(self, node: Tree, t: float) -> Vector:
        lhs, *mid, rhs = node.children
        matching = next((m for m in mid if isinstance(m, Tree) and m.data == "matching"), None)
        a, b = self._eval(lhs, t), self._eval(rhs, t)
        assert isinstance(a, dict) and isinstance(b, dict)
        if matching is not None:
            on = {str(c) for c in matching.children if c is not None}

            def sig(labels: Labels) -> Labels:
                return frozenset(kv for kv in labels if kv[0] in on)
        else:
            sig = _without_name
        right = {sig(k) for k in b}
        if node.data == "and_":
            return {k: v for k, v in a.items() if sig(k) in right}
        left = {sig(k) for k in a}
        return {**a, **{k: v for k, v in b.items() if sig(k) not in left}}
