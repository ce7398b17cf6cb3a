"""The cross-key checks of elastic serving's settings (a mixin of `Settings`, read by the root model's CROSS_CHECKS
table like components/model/config/cross_checks.py): what the burst slots need, and the bounds the TPU quota sets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from components.model.config.checks import SettingError
from components.model.serving.burst import BurstPriorityError
from components.model.tpu import geometry

if TYPE_CHECKING:
    from components.model.config.root_settings import Settings


class BurstChecks:
    """The `_check_burst_*` methods of `Settings`."""

    def _check_burst_needs(self: Settings) -> list[SettingError]:
        """Burst slots need KEDA (its operator scales them) and the scrapes their signal reads: autoscaling without
        either would declare slots nothing ever turns on. Refused rather than derived: KEDA is a cluster-wide
        add-on with a role on the project, installed and removed by its own key."""
        slots = self.burst_slots()
        if not slots:
            return []
        which = " and ".join(f"serving.{role}.autoscaling.enabled" for role in slots)
        which += " are" if len(slots) > 1 else " is"
        out = []
        if not self.addons.keda.enabled:
            out.append(
                SettingError(
                    "addons.keda.enabled",
                    False,
                    f"true while {which} true: KEDA's operator turns the burst slots on and off (or set "
                    "autoscaling.enabled to false)",
                )
            )
        o = self.observability
        if not o.scrapes:
            key = "observability.scraping" if o.enabled else "observability.enabled"
            out.append(
                SettingError(
                    key,
                    False,
                    f"true while {which} true: the burst slots' signal is the scraped vLLM and router metrics",
                )
            )
        return out

    def _check_burst_bounds(self: Settings) -> list[SettingError]:
        """Burst slots the TPU quota could never admit are refused: each role's slots fit the quota left by every
        workload a slot cannot preempt (priority at or above the burst priority: the floors, and demos that high),
        and both roles' slots fit it together. The usable cubes' bound is the capacity plan's (components/model/tpu/
        elastic.py), which needs the reservation's sub-blocks."""
        slots = self.burst_slots()
        priorities = self.kueue.priorities
        topologies = self.workload_topologies()
        if not slots or any(p not in priorities for _, p in topologies.values()):
            return []  # an unknown priority is _check_workloads's
        try:
            burst = self.burst_priority()
            chips = {key: self.slice_of(t).chips for key, (t, _) in topologies.items()}
        except BurstPriorityError as err:
            return [SettingError("kueue.priorities", priorities, str(err))]
        except geometry.GeometryError:
            return []  # _check_workloads names the topology
        assert burst is not None
        cube = self.tpu.cube
        quota = self.tpu_quota()
        where = "kueue.tpuQuota" if self.kueue.tpu_quota is not None else f"tpu.cubes x {cube.chips}"
        groups = {f"demos.{key}": demo.replicas for key, demo in self.demos.jobsets().items()}
        groups |= {f"serving.{role}": spec.replicas for role, spec in self.serving.roles().items()}
        kept = {key: groups[key] * chips[key] for key, (_, p) in topologies.items() if priorities[p] >= burst.value}
        left = quota - sum(kept.values())
        held = ", ".join(f"{key} {n}" for key, n in kept.items())
        why = (
            f"the TPU quota ({quota} chips, {where}) less the {sum(kept.values())} chips a burst slot cannot preempt "
            f"({held})"
        )
        errors, wanted = [], 0
        for role, n in slots.items():
            spec, per = self.serving.roles()[role], chips[f"serving.{role}"]
            fit = max(0, left // per)
            wanted += n * per
            if n > fit:
                errors.append(
                    SettingError(
                        f"serving.{role}.autoscaling.maxGroups",
                        spec.replicas + n,
                        f"at most {spec.replicas + fit}: {why} leaves room for {fit} burst "
                        f"slot{'s' if fit != 1 else ''} of {spec.topology} ({per} chips each) above its "
                        f"{spec.replicas} groups; a slot beyond that could never be admitted",
                    )
                )
        if not errors and wanted > left:
            role = list(slots)[-1]
            others = ", ".join(f"serving.{r} {n} x {chips[f'serving.{r}']}" for r, n in slots.items())
            errors.append(
                SettingError(
                    f"serving.{role}.autoscaling.maxGroups",
                    self.serving.roles()[role].replicas + slots[role],
                    f"both roles' burst slots together ({others} = {wanted} chips) within {why}: {left} chips; lower "
                    "this or the other role's maxGroups",
                )
            )
        return errors
