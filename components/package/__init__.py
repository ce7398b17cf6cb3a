"""The stack as a Pulumi package any Pulumi language can use (docs/package.md); `plugin/` hosts it.

No `from __future__ import annotations` in this package: the SDK's schema inference reads the annotations as
objects (tests/test_package_sdk_traps.py checks every module).
"""

NAME = "gke-tpu-slicing"
# The package's version, in its schema and the SDKs generated from it (docs/package.md, "Versions").
VERSION = "0.1.0"
