"""The CEL rules of CRDs (``x-kubernetes-validations``), evaluated as kube-apiserver does (a library).

For an object and its CRD schema (``openAPIV3Schema``): 1. structural defaults are applied first; 2. every rule
runs with ``self`` bound to the value at its schema node, once per list item or map value, only where the value
is present; 3. transition rules (those reading ``oldSelf``) are skipped by `evaluate` (they only run on update):
`evaluate_update` runs them with ``oldSelf`` bound wherever old and new correlate (object properties, map values
by key, ``x-kubernetes-list-type: map`` items by their keys; items of atomic lists do not, as in the apiserver);
4. each rule is ``passed``, ``failed`` (the apiserver rejects the object with the rule's message;
``messageExpression`` only words the rejection), ``error`` (the evaluation failed, e.g. a field read without
``has()``: also a rejection) or ``unevaluated`` (a function this evaluator lacks, or one cel-python cannot
handle): neither a pass nor a failure; the conformance test lists them.

The evaluator is cel-python (``celpy``) with the conventions of https://kubernetes.io/docs/reference/using-api/cel/:
values are typed by their schema (``format: duration`` strings are durations, ``date``/``date-time``
timestamps, ``byte`` bytes, ``type: number`` doubles); objects with ``properties`` expose only
declared fields, under escaped names (``__dash__``, ``__dot__``, ``__slash__``, ``__underscores__``; a reserved
word such as ``namespace`` both as ``__namespace__`` and, since Kubernetes 1.32, as is: the JobSet CRD uses
``t.metadata.namespace``, the Managed Prometheus CRDs ``__namespace__``; kubernetes/kubernetes#122777). Of the
Kubernetes library, the functions the pinned CRDs call are added: ``split`` (cel-go's strings extension, as the
apiserver enables it) and ``isURL`` (k8s.io/apiserver/pkg/cel/library/urls.go: Go's ``url.ParseRequestURI``
succeeds).
"""

from __future__ import annotations

import base64
import copy
import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import celpy.celtypes as ct
from celpy.evaluation import CELEvalError, base_functions

# CEL's reserved words (cel-spec langdef.md), escaped as __word__ in field names by Kubernetes.
RESERVED = frozenset(
    {
        *("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if"),
        *("import", "let", "loop", "package", "namespace", "return", "var", "void", "while"),
    }
)
_ACCESSIBLE = re.compile(r"[a-zA-Z_./-][a-zA-Z0-9_./-]*")
MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter"})
_STRINGS = re.compile(r"""[rR]?('''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""", re.S)
_CALLS = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


# --------------------------------------------------------------------------------------------- Kubernetes library


def _split(text: Any, sep: Any, limit: Any = -1) -> ct.ListType:
    """cel-go ext.Strings ``split``: a negative limit splits everywhere, 0 gives [], n at most n parts."""
    text, sep, limit = str(text), str(sep), int(limit)
    if limit == 0:
        return ct.ListType([])
    if sep == "":
        parts = list(text) if limit < 0 else [*list(text[: limit - 1]), text[limit - 1 :]] if text else []
    else:
        parts = text.split(sep) if limit < 0 else text.split(sep, limit - 1)
    return ct.ListType([ct.StringType(p) for p in parts])


_HOST_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:[]<>\"")
_USERINFO_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:~!$&'()*+,;=%@")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def parse_request_uri_ok(raw: str) -> bool:
    """Whether Go's ``net/url.ParseRequestURI(raw)`` (Go 1.24) returns no error: the ``isURL`` of Kubernetes.

    Mirrors its checks: no control characters, not empty, a scheme (if any) that does not start with ``:``, an
    absolute path or a scheme, a valid ``//authority`` (userinfo, host characters, bracketed IPv6, numeric
    port) and valid percent-escapes in host and path.
    """
    if raw == "*":
        return True
    if not raw or any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        return False
    scheme, rest = "", raw
    for i, c in enumerate(raw):
        if c.isascii() and c.isalpha():
            continue
        if c.isascii() and (c.isdigit() or c in "+-."):
            if i == 0:
                break
            continue
        if c == ":":
            if i == 0:
                return False  # "missing protocol scheme"
            scheme, rest = raw[:i], raw[i + 1 :]
        break
    rest = rest[:-1] if rest.endswith("?") and rest.count("?") == 1 else rest.split("?", 1)[0]
    if not rest.startswith("/"):
        return bool(scheme)  # opaque ("mailto:x") with a scheme; "invalid URI for request" without
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        userinfo, at, host = authority.rpartition("@")
        if at and not set(userinfo) <= _USERINFO_OK:
            return False
        if not at:
            host = authority
        if host.startswith("["):
            end = host.find("]")
            if end < 0:
                return False  # "missing ']' in host"
            port = host[end + 1 :]
            if port and not re.fullmatch(r":\d*", port):
                return False
        elif ":" in host and not re.fullmatch(r":\d*", host[host.rindex(":") :]):
            return False  # "invalid port after host"
        if _BAD_ESCAPE.search(host) or any(c not in _HOST_OK and c != "%" and ord(c) < 0x80 for c in host):
            return False
    return not _BAD_ESCAPE.search(rest)


def _is_url(text: Any) -> ct.BoolType:
    return ct.BoolType(parse_request_uri_ok(str(text)))


def _heterogeneous(name: str, equal: bool) -> Callable[[Any, Any], Any]:
    """`==`/`!=` across types, as cel-go evaluates them (heterogeneous equality, the default since cel-go
    v0.10, which kube-apiserver uses): values of different types are unequal, not an error. cel-python
    raises "no such overload" instead, e.g. for `self != 0` on an int-or-string port that holds a name."""
    base = base_functions[name]

    def compare(a: Any, b: Any) -> Any:
        try:
            return base(a, b)
        except TypeError:
            return ct.BoolType(not equal)

    return compare


KUBERNETES_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "split": _split,
    "isURL": _is_url,
    "_==_": _heterogeneous("_==_", equal=True),
    "_!=_": _heterogeneous("_!=_", equal=False),
}
SUPPORTED = frozenset(base_functions) | MACROS | frozenset(KUBERNETES_FUNCTIONS)


# --------------------------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    """One ``x-kubernetes-validations`` entry at a schema location (``$.spec.levels[*]``)."""

    where: str
    rule: str
    message: str

    @property
    def transition(self) -> bool:
        return bool(re.search(r"\boldSelf\b", _STRINGS.sub("''", self.rule)))

    @property
    def unsupported(self) -> list[str]:
        """Functions the rule calls that this evaluator does not implement."""
        return sorted({f for f in _CALLS.findall(_STRINGS.sub("''", self.rule)) if f not in SUPPORTED})


@dataclass(frozen=True)
class Outcome:
    path: str  # where in the object, e.g. $.spec.levels
    rule: Rule
    status: str  # passed | failed | error | unevaluated
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.path}: {self.status}: {self.rule.message or self.rule.rule}"
        return f"{text} ({self.detail})" if self.detail else text


def _subschemas(schema: Mapping[str, Any], where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name, sub in (schema.get("properties") or {}).items():
        yield f"{where}.{name}", sub
    if isinstance(schema.get("items"), Mapping):
        yield f"{where}[*]", schema["items"]
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield f"{where}[*]", schema["additionalProperties"]


def rules(schema: Mapping[str, Any], where: str = "$") -> list[Rule]:
    """Every rule in a schema, in schema order."""
    found = [
        Rule(where, r["rule"], r.get("message", ""))
        for r in schema.get("x-kubernetes-validations") or []
        if "rule" in r
    ]
    for sub_where, sub in _subschemas(schema, where):
        found += rules(sub, sub_where)
    return found


# --------------------------------------------------------------------------------------------- defaulting


def apply_defaults(value: Any, schema: Mapping[str, Any]) -> Any:
    """A copy of ``value`` with the schema's ``default``s filled in, as the apiserver does before validating."""
    value = copy.deepcopy(value)
    _default(value, schema)
    return value


def _default(value: Any, schema: Mapping[str, Any]) -> None:
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if (name not in value or (value[name] is None and not sub.get("nullable"))) and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _default(value[name], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for item in value.values():
                _default(item, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _default(item, schema["items"])


# --------------------------------------------------------------------------------------------- CEL values


def escape(name: str) -> list[str]:
    """The CEL names of a property: [] when it is not accessible, two forms for a reserved word."""
    if not _ACCESSIBLE.fullmatch(name):
        return []
    if name in RESERVED:
        return [f"__{name}__", name]
    escaped = name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__")
    return [escaped.replace("/", "__slash__")]


def to_cel(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` as the CEL value the apiserver builds from it, typed by ``schema``."""
    if value is None:
        return None
    kind, fmt = schema.get("type"), schema.get("format")
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props:
            out = {}
            for name, item in value.items():
                if name in props:
                    for key in escape(name):
                        out[ct.StringType(key)] = to_cel(item, props[name])
                elif schema.get("x-kubernetes-preserve-unknown-fields"):
                    for key in escape(name):
                        out[ct.StringType(key)] = celpy.json_to_cel(item)
            return ct.MapType(out)
        if isinstance(extra, Mapping):
            return ct.MapType({ct.StringType(k): to_cel(v, extra) for k, v in value.items()})
        return celpy.json_to_cel(value)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
        return ct.ListType([to_cel(v, items) for v in value])
    if isinstance(value, bool):
        return ct.BoolType(value)
    if kind == "number" and isinstance(value, int | float):
        return ct.DoubleType(value)
    if isinstance(value, int):
        return ct.IntType(value)
    if isinstance(value, str) and kind == "string":
        if fmt == "duration":
            return ct.DurationType(value)
        if fmt in ("date", "date-time"):
            return ct.TimestampType(value)
        if fmt == "byte":
            return ct.BytesType(base64.b64decode(value))
    return celpy.json_to_cel(value)


# --------------------------------------------------------------------------------------------- evaluation

_ENV = celpy.Environment()


@functools.cache
def program(rule: str) -> Any:
    """The compiled rule (cached: the same rule runs on every list item); raises when cel-python cannot parse it."""
    return _ENV.program(_ENV.compile(rule), functions=KUBERNETES_FUNCTIONS)


def _evaluate(rule: Rule, path: str, value: Any, schema: Mapping[str, Any], old: Any = None) -> Outcome:
    missing = rule.unsupported
    if missing:
        return Outcome(path, rule, "unevaluated", f"calls {', '.join(missing)}, not implemented here")
    try:
        compiled = program(rule.rule)
    except Exception as err:  # celpy's parser errors: this library cannot read the rule, not the object's fault
        return Outcome(path, rule, "unevaluated", f"cel-python cannot compile it: {err}")
    try:
        self_value = to_cel(value, schema)
    except (ValueError, TypeError) as err:  # e.g. a duration string celpy cannot parse: our limit, not a verdict
        return Outcome(path, rule, "unevaluated", f"cannot convert the value to CEL: {err}")
    activation = {"self": self_value}
    if rule.transition:
        try:
            activation["oldSelf"] = to_cel(old, schema)
        except (ValueError, TypeError) as err:
            return Outcome(path, rule, "unevaluated", f"cannot convert the old value to CEL: {err}")
    try:
        result = compiled.evaluate(activation)
    except CELEvalError as err:
        return Outcome(path, rule, "error", str(err.args[0] if err.args else err))
    except Exception as err:  # a failure inside cel-python itself, not an evaluation error of the rule
        return Outcome(path, rule, "unevaluated", f"cel-python failed: {type(err).__name__}: {err}")
    if not isinstance(result, ct.BoolType):
        return Outcome(path, rule, "error", f"evaluated to {type(result).__name__} {result!r}, not a bool")
    return Outcome(path, rule, "passed" if result else "failed")


def _walk(new: Any, old: Any, schema: Mapping[str, Any], path: str, where: str, update: bool) -> Iterator[Outcome]:
    """The non-transition rules on create, the transition rules where old and new correlate on update (3. above)."""
    if new is None or (update and old is None):
        return
    for entry in schema.get("x-kubernetes-validations") or []:
        rule = Rule(where, entry["rule"], entry.get("message", ""))
        if rule.transition == update:
            yield _evaluate(rule, path, new, schema, old)
    before = old if isinstance(old, dict) else {}
    if isinstance(new, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in new:
                yield from _walk(new[name], before.get(name), sub, f"{path}.{name}", f"{where}.{name}", update)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key, item in new.items():
                yield from _walk(item, before.get(key), extra, f"{path}[{key!r}]", f"{where}[*]", update)
    elif isinstance(new, list) and isinstance(schema.get("items"), Mapping):
        if update and schema.get("x-kubernetes-list-type") != "map":
            return  # atomic lists and sets: items do not correlate
        keys = schema.get("x-kubernetes-list-map-keys") or []
        olds = old if isinstance(old, list) else []
        by_key = {tuple(item.get(k) for k in keys): item for item in olds if isinstance(item, dict)}
        for i, item in enumerate(new):
            match = by_key.get(tuple(item.get(k) for k in keys)) if isinstance(item, dict) else None
            yield from _walk(item, match, schema["items"], f"{path}[{i}]", f"{where}[*]", update)


# At the root, rules see only metadata.name and metadata.generateName (the apiserver's CEL type for ObjectMeta).
ROOT_METADATA = {"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}}}


def _root(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {**schema, "properties": {**(schema.get("properties") or {}), "metadata": ROOT_METADATA}}


def evaluate(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> list[Outcome]:
    """The outcome of every (non-transition) rule of ``schema`` on ``obj``, after defaulting."""
    return list(_walk(apply_defaults(dict(obj), schema), None, _root(schema), "$", "$", update=False))


def rejections(outcomes: list[Outcome]) -> list[str]:
    """What the apiserver would reject the object for: failed rules and evaluation errors."""
    return [str(o) for o in outcomes if o.status in ("failed", "error")]


def evaluate_update(old: Mapping[str, Any], new: Mapping[str, Any], schema: Mapping[str, Any]) -> list[Outcome]:
    """The outcome of every transition rule of ``schema`` on an update from ``old`` to ``new``, after defaulting."""
    before, after = apply_defaults(dict(old), schema), apply_defaults(dict(new), schema)
    return list(_walk(after, before, _root(schema), "$", "$", update=True))
