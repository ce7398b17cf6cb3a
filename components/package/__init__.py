"""The stack as a Pulumi package any Pulumi language can use (docs/package.md).

The whole stack is one component, `TpuSlicingStack` (components/package/stack.py), whose inputs mirror the
settings (components/package/stack_args.py, generated from the models); the building blocks for an existing
cluster are `TpuCapacity`, `SliceQueues` (components/package/blocks.py) and `Serving`
(components/package/serving_block.py); the plugin that hosts them is `plugin/` at the repository's root.
No `from __future__ import annotations` in this package: the SDK's schema
inference reads the annotations as objects (tests/test_package.py checks every module).
"""

NAME = "gke-tpu-slicing"
# The package's version, in its schema and the SDKs generated from it (docs/package.md, "Versions").
VERSION = "0.1.0"
