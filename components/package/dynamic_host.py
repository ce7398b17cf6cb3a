"""The package's dynamic resources made importable by the consumer's dynamic provider host (docs/package.md).

The stack's three dynamic resources (the teardown gates, the pools' replacement record, the Kueue guard) store their
provider pickled (`serialize_provider`: dill, pulumi/dynamic/dynamic.py) as a reference into this repository's
modules: `components.teardown SliceGateProvider`, ... Pulumi runs them in its Python dynamic provider host, which the
engine starts in the *consumer's* project directory, where `components` is not importable, so every preview stopped
with `No module named 'components'` unless the consumer set PYTHONPATH to a checkout.

In the plugin's process only (`carry_the_checkout`, called by its entry point), each of those providers is pickled
as the same reference preceded by a bootstrap: unpickling first puts this checkout's root on `sys.path` (and, for the
same Python version, the plugin virtualenv's packages after the host's own), then looks the class up as before
(pickle evaluates in order). The checkout is where the engine runs the plugin from, so the host, started by the same
engine, finds it. The program's own resources are untouched: nothing is registered in its process, so their
providers are pickled exactly as before and existing stacks unpickle them as before.
"""

import builtins
import copyreg
import operator
import sys
import sysconfig
from pathlib import Path
from typing import Any

from components.kueue_guard import ImmutableFieldsProvider
from components.teardown import PoolReplacementsProvider, SliceGateProvider

ROOT = str(Path(__file__).resolve().parents[2])
PROVIDERS = (SliceGateProvider, PoolReplacementsProvider, ImmutableFieldsProvider)

BOOTSTRAP = """import sys
if {root!r} not in sys.path:
    sys.path.insert(0, {root!r})
if sys.version_info[:2] == {version!r} and {site!r} not in sys.path:
    sys.path.append({site!r})
"""


class _Call:
    """Pickled as `fn(*args)`: unpickling calls it; nothing of this class is needed by the host."""

    def __init__(self, fn: Any, *args: Any) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.fn, self.args

    def __call__(self) -> None:  # pickle requires a reduce's function to be callable
        raise TypeError("a pickling stand-in")


def bootstrap_source() -> str:
    purelib = sysconfig.get_paths()["purelib"]
    return BOOTSTRAP.format(root=ROOT, version=tuple(sys.version_info[:2]), site=purelib)


def _reduce(provider: Any) -> tuple[Any, ...]:
    # (exec(bootstrap), cls)[1]: the class reference is resolved only after the bootstrap ran; then cls().
    cls = _Call(operator.getitem, (_Call(builtins.exec, bootstrap_source()), type(provider)), 1)
    return (cls, (), provider.__dict__ or None)


def carry_the_checkout() -> None:
    """In the plugin's process: the dynamic providers pickle with the bootstrap (see the module's docstring)."""
    for provider in PROVIDERS:
        copyreg.pickle(provider, _reduce)
