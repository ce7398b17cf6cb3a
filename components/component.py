"""The one thing every component here shares: children inherit the component's `depends_on`.

Pulumi does not pass a component's explicit dependencies on to its children, so a child would not
wait for, say, the Compute API to be enabled. `Component.child()` adds them to every child.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi


def _as_list(depends_on: object) -> list[pulumi.Resource]:
    if depends_on is None:
        return []
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    return list(depends_on)  # type: ignore[call-overload]


# A component's input listing what its transforms write into objects a provider renders at run time (the change
# preview compares them as those objects: components/cli/manifest_objects.py).
PROGRAM_WRITES = "programWrites"


class Component(pulumi.ComponentResource):
    def __init__(
        self,
        type_token: str,
        name: str,
        opts: pulumi.ResourceOptions | None = None,
        props: dict[str, object] | None = None,
    ) -> None:
        super().__init__(type_token, name, props, opts)
        self._inherited = _as_list(opts.depends_on if opts else None)

    def child(self, depends_on: Sequence[pulumi.Resource] = (), **kwargs: object) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, depends_on=[*self._inherited, *depends_on], **kwargs)  # type: ignore[arg-type]
