"""Node autoscalers under simulation: nodewright's own controllers, driven on the simulated clock.

:class:`NodewrightDriver` runs the **same** controllers as ``nodewright run``: a
:class:`~nodewright.controllers.manager.ControllerManager` (provisioning, lifecycle, termination,
interruption, garbage collection, NodePool status) plus the disruption controller (emptiness, consolidation,
drift, expiration), over the world's in-memory cluster and a
:class:`~nodewright.cloud.simulated.SimulatedCloudProvider`. Spot interruption warnings reach the
interruption controller through a :class:`~nodewright.cloud.simulated.SimulatedInterruptionQueue`.

Stepping: the controllers' timing (batch windows of 1 s, disruption polls of 10 s, the 15 s validation
delay) is honoured by stepping every second while anything relevant is moving -- a pod turned
``Unschedulable``, a Node or NodeClaim changed, within the last :data:`HOT_SECONDS` -- and every
``poll_period`` (10 s, Karpenter's disruption poll) otherwise. The world wakes the loop for its own events
(EC2 transitions, pod starts, job ends, autoscaler syncs) in between.
"""

from __future__ import annotations

import math
from typing import Protocol

from nodewright.cloud.simulated import SimInstance, SimulatedCloudProvider, SimulatedInterruptionQueue
from nodewright.controllers.common import Context, log
from nodewright.controllers.manager import ControllerManager, ControllerOptions
from nodewright.kube import resources as r
from nodewright.kube.cluster import Cluster, Obj
from nodewright.kube.resources import ResourceKind
from nodewright.metrics import Metrics
from nodewright.sim.world import World
from nodewright.state.cluster import ClusterState, snapshot
from nodewright.state.pods import is_unschedulable, node_name

#: Seconds after a relevant change during which the controllers are stepped every second.
HOT_SECONDS = 12.0
#: Seconds between controller steps when nothing moves (Karpenter's disruption poll period).
QUIET_SECONDS = 10.0


class Driver(Protocol):
    """A node autoscaler the runner can step."""

    name: str

    def step(self, now: float) -> None:
        """Act at ``now``."""
        ...

    def next_wake(self, now: float) -> float:
        """Epoch seconds it wants to act next."""
        ...


class CachedSnapshots:
    """A snapshotter for :class:`ControllerManager`: one :func:`snapshot` per cluster revision.

    A controller that wrote nothing leaves the snapshot valid for the next one; ``ClusterState`` is never
    mutated by the controllers (they write through the cluster), so sharing it is safe.
    """

    def __init__(self, world: World) -> None:
        self.revision = 0
        self._state: ClusterState | None = None
        self._at = -1
        world.cluster.add_listener(self._bump)

    def _bump(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        self.revision += 1

    def __call__(self, cluster: Cluster) -> ClusterState:
        if self._state is None or self._at != self.revision:
            self._state = snapshot(cluster)
            self._at = self.revision
        return self._state


class NodewrightDriver:
    """nodewright's controllers on the simulated clock (see module docstring).

    Args:
        world: the simulated cluster.
        options: controller tunables (Karpenter's defaults when None).
    """

    name = "nodewright"

    def __init__(self, world: World, options: ControllerOptions | None = None) -> None:
        self.world = world
        self.queue = SimulatedInterruptionQueue()
        self.cloud = SimulatedCloudProvider(world.ec2, world.scenario.region, world.scenario.zones,
                                            lambda name: world.cluster.get(r.EC2NODECLASSES, name))
        self.cloud.out_of_capacity = world.out_of_capacity
        self.ctx = Context(world.cluster, self.cloud, world.clock, Metrics(), f"sim-{world.scenario.name}")
        self.snapshots = CachedSnapshots(world)
        self.manager = ControllerManager(self.ctx, options, self.queue, snapshotter=self.snapshots)
        # The disruption controller joins the manager's step once it is wired there; until then it runs here.
        self.disruption = getattr(self.manager, "disruption", None)
        self._own_disruption = self.disruption is None
        if self.disruption is None:
            from nodewright.controllers.disruption import DisruptionController

            self.disruption = DisruptionController(self.ctx, self.manager.terminator)
        self.hot_until = -math.inf
        world.on_interruption = self._on_interruption
        world.cluster.add_listener(self._on_change)

    def _on_change(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        if kind in (r.NODES, r.NODECLAIMS) or (
                kind == r.PODS and event == "MODIFIED" and not node_name(obj) and is_unschedulable(obj)):
            self.hot_until = self.world.clock() + HOT_SECONDS

    def _on_interruption(self, instance: SimInstance) -> None:
        self.queue.spot_interruption(instance.id)
        # As the AWS provider does: the interrupted spot offering is not retried for a while.
        self.cloud.mark_unavailable(instance.instance_type.name, instance.zone, instance.capacity_type)

    def step(self, now: float) -> None:
        """One :meth:`ControllerManager.step` (plus the disruption controller when the manager lacks it)."""
        self.manager.step()
        if self._own_disruption and self.disruption is not None:
            try:
                self.disruption.reconcile(self.snapshots(self.world.cluster))
            except Exception:  # as in ControllerManager.step: a failing controller must not stop the run
                log.exception("controller disruption failed")

    def next_wake(self, now: float) -> float:
        """Every second while hot, else at the next disruption poll or validation deadline."""
        if now < self.hot_until:
            return now + 1.0
        wake = now + QUIET_SECONDS
        command = getattr(self.disruption, "command", None)
        if command is not None and getattr(command, "phase", "") == "validating":
            deadline = command.decided_at + getattr(self.disruption, "validation_delay", 15.0)
            if deadline > now:
                wake = min(wake, deadline)
        return wake
