"""The capacity checks of the stack settings: whether the system pool holds every controller and the TPU subnet every
node at the stack's peak, each read by the root model's CROSS_CHECKS table (components/model/config/root_settings.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import TYPE_CHECKING

from components.model.addons import slice_controller
from components.model.config.checks import (
    GIB,
    SYSTEM_PODS_CPU_MILLIS,
    SYSTEM_PODS_MEMORY,
    SettingError,
    cpu_millis,
    memory_bytes,
    node_allocatable,
)

# The primary range's takers beside the nodes: Google Cloud reserves 4 addresses in each
# (https://cloud.google.com/vpc/docs/subnets#unusable-ip-addresses-in-every-subnet). A regional cluster without
# node locations runs each pool in 3 zones (https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters).
# The system pool sets no upgrade_settings: GKE's surge default adds maxSurge=1 node beside the old ones
# (https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies#surge); TPU pools' surge
# is not counted (a cube's reservation holds no spare VM). The control plane's private endpoint goes in the node
# subnet (components/model/diff/gcp.py), and so does an internal Gateway's forwarding rule: the proxy-only subnet
# is the VPC's only other one, and it takes none.
RESERVED_ADDRESSES, REGIONAL_ZONES, SURGE_NODES = 4, 3, 1

if TYPE_CHECKING:
    from components.model.config.root_settings import Settings


class CapacityChecks:
    """The capacity `_check_*` methods of `Settings` (a mixin: they read the settings' sections)."""

    def system_pool_room(self: Settings, extra: Sequence[tuple[int, int, int]] = ()) -> tuple[int, int, int, int]:
        """(CPU millis, memory bytes) the controllers request (the charts', the picker's, the slice controller's), and
        what the system pool holds for them with one zone down; `extra`: more pods as (count, CPU millis, memory bytes).

        One zone's nodes are left out (REGIONAL_ZONES - 1 zones counted): a zone's outage, or its node being
        re-created, leaves room to reschedule every controller; each node first loses GKE's own pods.
        """
        cpu, mem = node_allocatable(self.cluster.system_machine_type)
        nodes = self.cluster.system_node_count * (REGIONAL_ZONES - 1)
        counts = {f"addons.{k}.controllerResources": a.pod_count() for k, a in self.addons.helm_addons().items()}
        pods = [
            (counts.get(key, 1), cpu_millis(res.requests.cpu or "0"), memory_bytes(res.requests.memory or "0"))
            for key, res in self.system_pool_pods().items()
        ]
        # The slice controller's manager pods, whose requests its manifest fixes.
        slice_cpu, slice_memory = slice_controller.MANAGER_REQUESTS
        pods.append((self.addons.slice_controller.replicas, cpu_millis(slice_cpu), memory_bytes(slice_memory)))
        total_cpu = sum(n * c for n, c, _ in (*pods, *extra))
        total_mem = sum(n * m for n, _, m in (*pods, *extra))
        return total_cpu, total_mem, (cpu - SYSTEM_PODS_CPU_MILLIS) * nodes, (mem - SYSTEM_PODS_MEMORY) * nodes

    def _check_system_pool_fit(self: Settings) -> list[SettingError]:
        """Controllers sized beyond the system pool stay Pending: refuse that at preview time."""
        cpu, mem = node_allocatable(self.cluster.system_machine_type)
        cpu, mem = cpu - SYSTEM_PODS_CPU_MILLIS, mem - SYSTEM_PODS_MEMORY
        errors = []
        for key, res in self.system_pool_pods().items():
            if cpu_millis(res.requests.cpu or "0") > cpu or memory_bytes(res.requests.memory or "0") > mem:
                errors.append(
                    SettingError(
                        f"{key}.requests",
                        res.requests.model_dump(exclude_none=True),
                        f"at most {cpu}m CPU and {mem / GIB:.1f}Gi memory, what one "
                        f"{self.cluster.system_machine_type} system node has left for pods",
                    )
                )
        slice_cpu = cpu_millis(slice_controller.MANAGER_REQUESTS[0])
        slice_memory = memory_bytes(slice_controller.MANAGER_REQUESTS[1])
        if slice_cpu > cpu or slice_memory > mem:  # fixed by its manifest: the machine type is what can change
            errors.append(
                SettingError(
                    "cluster.systemMachineType",
                    self.cluster.system_machine_type,
                    f"a machine whose node has room for the slice controller's manager pod ({slice_cpu}m CPU, "
                    f"{slice_memory / GIB:.1f}Gi, fixed by its manifest): one {self.cluster.system_machine_type} "
                    f"node has {cpu}m CPU and {mem / GIB:.1f}Gi left for pods",
                )
            )
        total_cpu, total_mem, room_cpu, room_mem = self.system_pool_room()
        per_zone, up = self.cluster.system_node_count, REGIONAL_ZONES - 1
        if not errors and (total_cpu > room_cpu or total_mem > room_mem):
            errors.append(
                SettingError(
                    "cluster.systemMachineType",
                    self.cluster.system_machine_type,
                    f"room for the controllers' requests ({total_cpu}m CPU, {total_mem / GIB:.1f}Gi) with one of the "
                    f"regional cluster's {REGIONAL_ZONES} zones down: cluster.systemNodeCount={per_zone} node(s) per "
                    f"zone x {up} zones leave {room_cpu}m CPU and {room_mem / GIB:.1f}Gi; use a larger machine or "
                    "more nodes, or smaller controller requests",
                )
            )
        return errors

    def _check_subnet_fit(self: Settings) -> list[SettingError]:
        """The TPU subnet's primary range holds an address for every node at the stack's peak: GKE fails to create
        or upgrade nodes in a range with none left. Pods and Services take the secondary ranges GKE adds."""
        tpu, cube, per_zone = self.tpu, self.tpu.cube, self.cluster.system_node_count
        takers = [  # (addresses, what takes them)
            (tpu.cubes * cube.vms, f"TPU VMs (tpu.cubes={tpu.cubes} x {cube.vms} VMs of a {tpu.cube_topology} cube)"),
            (
                per_zone * REGIONAL_ZONES,
                f"system nodes (cluster.systemNodeCount={per_zone} x the {REGIONAL_ZONES} zones of a regional cluster)",
            ),
            (SURGE_NODES, "surge node of a system pool upgrade"),
            (1, "control-plane private endpoint"),
            (int(self.serving.enabled and not self.serving.gateway.external), "internal Gateway address"),
            (RESERVED_ADDRESSES, "addresses Google Cloud reserves in every primary range"),
        ]
        needed, block = sum(n for n, _ in takers), ipaddress.ip_network(self.network.tpu_subnet_cidr)
        if block.num_addresses >= needed:
            return []
        why = ", ".join(f"{n} {what}" for n, what in takers if n)
        return [
            SettingError(
                "network.tpuSubnetCidr",
                self.network.tpu_subnet_cidr,
                f"a block of at least {needed} addresses (/{min(29, 32 - (needed - 1).bit_length())} or larger), "
                f"not {block.num_addresses}: its primary range holds {why}",
            )
        ]
