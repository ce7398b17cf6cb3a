"""`python -m components reference [--write | --check]`: the configuration reference, from the settings model.

Prints docs/configuration.md with its generated block (the reference table, between the BEGIN and END
markers) as the settings model's fields make it (components/model/config/reference.py); the prose around the
block is written by hand. `--write` updates the file and Pulumi.yaml's key list, `--check` exits 1 when
either is out of date (what the test checks). Exit 2 for usage errors (no markers in a file).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from components.model.config.reference import page, project_file

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
PROJECT_FILE = ROOT / "Pulumi.yaml"


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m components reference",
        description="Print (or write, or check) docs/configuration.md, generated from the settings model.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help=f"replace {DOC.relative_to(ROOT)}")
    what.add_argument("--check", action="store_true", help=f"exit 1 when {DOC.relative_to(ROOT)} is out of date")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    current = DOC.read_text(encoding="utf-8") if DOC.is_file() else ""
    project = PROJECT_FILE.read_text(encoding="utf-8") if PROJECT_FILE.is_file() else ""
    try:
        text, project_text = page(current), project_file(project)
    except ValueError as e:
        print(f"error: {e}", file=err)
        return 2
    if args.write:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text, encoding="utf-8")
        PROJECT_FILE.write_text(project_text, encoding="utf-8")
        print(f"wrote {DOC.relative_to(ROOT)}, {PROJECT_FILE.relative_to(ROOT)}", file=out)
        return 0
    if args.check:
        pairs = ((DOC, current, text), (PROJECT_FILE, project, project_text))
        stale = [str(path.relative_to(ROOT)) for path, old, new in pairs if old != new]
        if stale:
            print(f"error: {', '.join(stale)} out of date: run `python -m components reference --write`", file=err)
            return 1
        return 0
    out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
