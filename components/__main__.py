"""`python -m components <command> ...`: the program's commands; all but `bootstrap` run without the Pulumi CLI.

Each command is a module with `main(argv) -> int` that parses its own arguments (`argv` without
the command word). Add one with a line in COMMANDS; a module is imported only when its command runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS: dict[str, tuple[str, str]] = {
    "bootstrap": (
        "components.cli.bootstrap",
        "create what a project needs before a stack's first preview (state bucket, keys, APIs), once per project",
    ),
    "plan": ("components.cli.plan", "print the TPU capacity plan of a stack file (no Pulumi, no cloud)"),
    "render": ("components.cli.render", "render a stack's Kubernetes manifests and Google Cloud resources offline"),
    "import-file": (
        "components.cli.import_file",
        "print a `pulumi import --file` file adopting a deployment the reference scripts made",
    ),
    "diff": ("components.cli.diff", "preview what a change, a pull request or a second run does, offline"),
    "health": (
        "components.cli.health",
        "check each TPU cube's sub-block, partitions, Slices and evicted workloads; propose tpu.subBlocks",
    ),
    "verify": ("components.cli.verify", "check a live deployment through its Gateway (completions + chat)"),
    "reference": ("components.cli.reference", "print or --write docs/configuration.md from the settings model"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        module = importlib.import_module(COMMANDS[args[0]][0])
        return int(module.main(args[1:]))
    parser = argparse.ArgumentParser(
        prog="python -m components",
        description="commands:\n" + "\n".join(f"  {name:11} {text}" for name, (_, text) in COMMANDS.items()),
        epilog="Run `python -m components <command> --help` for a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=COMMANDS)
    parser.parse_args(args)  # --help exits 0; a missing or unknown command exits 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
