"""The package's schema as the engine reads it (GetSchema), in the stable text form committed beside it."""

import json

from components.package.provider import PackageProvider


def schema() -> dict:
    return json.loads(PackageProvider().schema or "{}")


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"
