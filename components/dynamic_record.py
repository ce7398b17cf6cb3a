"""The provider of a record kept in Pulumi's state only, whose `check` refuses a change at preview.

Both records (components/kueue_guard.py `ImmutableFields`, components/teardown.py `PoolReplacements`) call no
API: creating one stores its inputs, an update stores the new ones, and nothing is ever replaced. The engine
calls `check` with the previous inputs during `pulumi preview` (and the preview of `pulumi up`), before any
change, so a refusal there stops the whole update.

Each subclass is pickled by reference into the stack's state (`__provider`: its module and class name), so a
subclass keeps its module and name; this base may move freely.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ResourceProvider, UpdateResult


class RecordProvider(ResourceProvider):
    """State only: `refusals` is what `check` refuses; a change of the inputs is an update, never a replacement."""

    record_id: ClassVar[str]  # the one resource's id
    # A failure per refused change (a function of the previous and the new inputs; none on the first run).
    refusals: Callable[[dict[str, Any], dict[str, Any]], list[CheckFailure]]

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return CheckResult(news, self.refusals(olds, news))

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=self.record_id, outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # `__provider` is the pickled provider: a code change is no change of the record.
        changed = {k: v for k, v in olds.items() if k != "__provider"} != {
            k: v for k, v in news.items() if k != "__provider"
        }
        return DiffResult(changes=changed, replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=news)
