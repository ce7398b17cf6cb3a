"""Command lines the program prints for its users (stack outputs), built where every layer can use them.

The resources layer exports them and the command-line layer parses them, so they live here, below both:
`components/serving.py` must not import `components/cli/` (imports only run downward: cli -> resources -> model).
"""

from __future__ import annotations

import shlex


def verify_command(gateway_name: str, namespace: str, model: str, *, pool: str, leaders: int, timeout: int) -> str:
    """`python -m components verify ...` for the `verifyCommand` stack output, shell-quoted.

    The flags are those `components/cli/verify.py` parses (its tests parse this string back).
    """
    args = ["python", "-m", "components", "verify"]
    args += ["--gateway-name", gateway_name, "--namespace", namespace, "--model", model]
    args += ["--pool", pool, "--leaders", str(leaders), "--timeout", str(timeout)]
    return shlex.join(args)
