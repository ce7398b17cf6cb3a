"""One program run as diff records: the recording of components/cli/mockrun.py as plain JSON data.

Also a script: `python components/cli/snapshot.py --root DIR --stack NAME [--set K=V ...]` runs the program
found in DIR (another git revision exported by `diff --base`) with DIR's own mock runner and stack reader,
and prints `{"records": [...], "error": null}` on stdout. It imports nothing of this tree but itself, so
it works against any revision that has `components/cli/mockrun.py` and `components/cli/plan.py`.

Secrets never leave as values: a secret becomes `{"<secret>": <sha256 of its value>}`, equal when the
value is, so a changed secret shows as a changed property and nothing else.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

# Pulumi's property wire format (sdk/go/common/resource/properties.go: SigKey, SecretSig).
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # pulumi.runtime.rpc.UNKNOWN
SECRET = "<secret>"


def plain(value: Any) -> Any:
    """JSON data: secrets as digests, unknowns as a marker, integral floats as integers."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            text = json.dumps(plain(value.get("value")), sort_keys=True)
            return {SECRET: hashlib.sha256(text.encode()).hexdigest()}
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is None or isinstance(value, bool | int | float | str):
        return "<unknown>" if value == UNKNOWN else value
    return f"<{type(value).__name__}>"  # e.g. pulumi.output.Unknown, an asset


def records(registrations: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "urn": r.urn,
            "type": r.type,
            "name": r.name,
            "custom": r.custom,
            "remote": getattr(r, "remote", False),
            "parent": r.parent,
            "provider": r.provider,
            "protect": r.protect,
            "inputs": plain(r.inputs),
            "property_dependencies": {k: list(v) for k, v in r.property_dependencies.items()},
            "options": plain(getattr(r, "options", {})),
            "aliases": plain(getattr(r, "aliases", [])),
        }
        for r in registrations
    ]


def error_text(error: BaseException) -> str:
    """What `pulumi preview` prints: a RunError's message alone, anything else with its type."""
    import pulumi

    return str(error) if isinstance(error, pulumi.RunError) else f"{type(error).__name__}: {error}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="snapshot.py")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--set", action="append", default=[])
    args = parser.parse_args(argv)
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here]  # no sibling shadows a module
    sys.path.insert(0, str(args.root.resolve()))
    for name in [m for m in sys.modules if m == "components" or m.startswith("components.")]:
        del sys.modules[name]  # this file's own tree must not shadow the one under --root
    from components.cli import mockrun, plan  # the revision under --root

    try:
        config = plan.read_stack(args.root, args.stack, args.set)
        secrets = set(plan.secret_keys(args.root, args.stack))
        secrets.update(k for k in config if k.endswith(":hfToken"))  # a token given with --set is a secret too
    except plan.StackFileError as err:
        json.dump({"records": [], "error": str(err), "kind": "stack"}, sys.stdout)
        return 0
    run = mockrun.execute(config, stack=args.stack, secret_keys=sorted(secrets))
    error = None if run.error is None else error_text(run.error)
    json.dump({"records": records(run.registrations), "error": error, "kind": "program"}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
