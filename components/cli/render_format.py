"""How `render` writes an object: Pulumi secrets, unknowns and Secret data redacted, YAML as a human would write
it, and a file name every common file system accepts (components/cli/render.py writes the files).
"""

from __future__ import annotations

from typing import Any

import yaml

from components.cli.mockrun import Registration, is_secret, is_unknown, normalize, unwrap

REDACTED = "<redacted>"
SECRET = "<secret>"
UNKNOWN = "<unknown until apply>"


def redact(value: Any) -> Any:
    """Pulumi secrets become `<secret>`, unknowns a marker; integral floats integers again."""
    if is_secret(value):
        return SECRET
    if is_unknown(value):
        return UNKNOWN
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return normalize(value)


def manifest(reg: Registration) -> dict[str, Any]:
    """The object as sent, with Secret data keys kept and their values redacted (secret or not)."""
    inputs = dict(reg.inputs)
    if inputs.get("kind") == "Secret" and inputs.get("apiVersion") == "v1":
        for key in ("data", "stringData"):
            value = unwrap(inputs.get(key))
            if isinstance(value, dict):
                inputs[key] = dict.fromkeys(value, REDACTED)
    return redact(inputs)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (embedded configs, shell scripts) as literal blocks, as a human would write them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


# libyaml's emitter with the same representer, for the chart objects (megabytes of CRDs): a few times faster.
CDumper = type("CDumper", (getattr(yaml, "CSafeDumper", yaml.SafeDumper),), {})
CDumper.add_representer(str, _str)


def dump(value: Any, dumper: type = _Dumper) -> str:
    return yaml.dump(value, Dumper=dumper, sort_keys=True, default_flow_style=False, allow_unicode=True, width=120)


def short(urn: str) -> str:
    """The Pulumi name at the end of a URN (or provider reference `urn::id`)."""
    return urn.split("::")[3] if urn.count("::") >= 3 else urn


# Device names Windows refuses as a file or directory name, also before an extension (`nul.yaml`): Microsoft,
# "Naming Files, Paths, and Namespaces" (learn.microsoft.com/windows/win32/fileio/naming-a-file). The
# superscript variants it also lists (`COM¹`) cannot occur: `portable` escapes every non-ASCII character.
RESERVED = frozenset({"con", "prn", "aux", "nul", *(f"{p}{i}" for p in ("com", "lpt") for i in range(1, 10))})
# Kept as they are; everything else is percent-encoded. Lowercase only: Windows and macOS file systems ignore
# case, and `Role/Admin` and `Role/admin` are two RBAC objects. No `_`, so `_cluster` names no namespace.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")


def portable(name: str) -> str:
    """`name` as one path component every common file system accepts, distinct for distinct names.

    Most Kubernetes names are DNS names and stay as they are; RBAC objects (and a few other kinds) may be
    named with `:` (`gmp-system:collector:...`) and any character but `/` and `%`. Windows forbids
    `<>:"/\\|?*` and control characters, a trailing dot or space, and the device names, and git carries
    a committed render to every platform. So every character outside `[a-z0-9.-]` becomes `%XX` (its UTF-8
    bytes, as in a URL, `%` itself included), so do a trailing dot and the first letter of a device name.
    Decoding the escapes gives the name back: two names never share a file, not even where case is ignored.
    """
    out = [c if c in _PLAIN else "".join(f"%{b:02X}" for b in c.encode()) for c in name]
    if out and out[-1] == ".":
        out[-1] = "%2E"
    if "".join(out).split(".", 1)[0] in RESERVED:
        out[0] = f"%{ord(out[0]):02X}"  # a plain ASCII letter here
    return "".join(out) or "%"  # "" is no file name, and "%" alone is no escape: it stands for "" only


def object_path(obj: dict[str, Any], prefix: str = "kubernetes", kind: str = "", unnamed: str = "%") -> str:
    """`<prefix>/<namespace or _cluster>/<kind>-<name>.yaml`, every part portable (`kind`: the object's own when
    empty; `unnamed`: the name of an object without one)."""
    meta = obj.get("metadata") or {}
    namespace = portable(meta["namespace"]) if meta.get("namespace") else "_cluster"
    kind = portable((kind or str(obj["kind"])).lower())
    return f"{prefix}/{namespace}/{kind}-{portable(meta.get('name') or unnamed)}.yaml"
