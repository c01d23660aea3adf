"""An in-memory EC2: instances with launch phases, termination, spot interruptions and per-second billing.

This is the "AWS side" of the simulator. :class:`SimulatedEC2` keeps every instance it ever launched with
the times it reaches ``running``, kubelet registration and ``Ready`` (from a
:class:`~nodewright.cloud.simulated.latency.LatencyDistribution`), and a queue of timed transitions the
simulation loop drains with :meth:`SimulatedEC2.due`. Spot interruptions follow EC2's behaviour: an
"EC2 Spot Instance Interruption Warning" two minutes before the instance is terminated
(Amazon EC2 User Guide, "Spot Instance interruption notices").

Billing is per second from the fleet call until termination, at the offering's price (USD/hour).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.cloud.simulated.latency import LatencyDistribution, LaunchPhases
from nodewright.kube.cluster import Clock

#: Seconds between a spot interruption warning and the instance's termination (EC2: two minutes).
SPOT_INTERRUPTION_WARNING_SECONDS = 120.0

# Transition kinds returned by SimulatedEC2.due().
RUNNING = "running"
REGISTERED = "registered"
READY = "ready"
INTERRUPTION_WARNING = "interruption-warning"
TERMINATED = "terminated"


@dataclass(slots=True)
class SimInstance:
    """One simulated EC2 instance.

    Attributes:
        id: ``i-`` followed by 17 hex digits.
        instance_type: the launched type (specs, labels, allocatable).
        offering: zone, capacity type and price (USD/hour).
        launched_at: epoch seconds of the fleet call (billing starts).
        phases: seconds after launch of running / registered / Ready.
        tags: EC2 tags (``karpenter.sh/nodeclaim``, ``karpenter.sh/nodepool``, ...).
        node_labels, node_taints: what the kubelet registers the Node with.
        startup_taints: taints an agent on the node removes once it is Ready (NodeClaim ``startupTaints``).
        image_id: AMI id.
        state: ``pending``, ``running``, ``terminated``.
        terminated_at: epoch seconds of termination (billing stops), or None.
        interrupt_at: epoch seconds of a pending spot interruption, or None.
        node_name: the Node's name once registered ('' before).
    """

    id: str
    instance_type: InstanceType
    offering: Offering
    launched_at: float
    phases: LaunchPhases
    tags: dict[str, str] = field(default_factory=dict)
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: list[dict[str, str]] = field(default_factory=list)
    startup_taints: list[dict[str, str]] = field(default_factory=list)
    image_id: str = "ami-0sim0000000000000"
    state: str = "pending"
    terminated_at: float | None = None
    interrupt_at: float | None = None
    node_name: str = ""

    @property
    def price(self) -> float:
        """USD per hour."""
        return self.offering.price

    @property
    def zone(self) -> str:
        """Availability zone."""
        return self.offering.zone

    @property
    def capacity_type(self) -> str:
        """``spot`` or ``on-demand``."""
        return self.offering.capacity_type

    @property
    def alive(self) -> bool:
        """Not terminated (still billed)."""
        return self.terminated_at is None

    def billed_seconds(self, now: float) -> float:
        """Seconds billed up to ``now``."""
        end = self.terminated_at if self.terminated_at is not None else now
        return max(0.0, min(end, now) - self.launched_at)


class SimulatedEC2:
    """Instances and their timed transitions.

    Args:
        clock: epoch seconds now.
        rng: seeded random source for latencies.
        latency: default launch latency distribution.
    """

    def __init__(self, clock: Clock, rng: random.Random, latency: LatencyDistribution) -> None:
        self.clock = clock
        self.rng = rng
        self.latency = latency
        self.instances: dict[str, SimInstance] = {}
        self._events: list[tuple[float, int, str, str]] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        #: (time, instance id) of every ``reboot`` asked for, in order (node repair with ``RebootForRepair``).
        self.reboots: list[tuple[float, str]] = []

    # --- API ---------------------------------------------------------------------------------------------

    def run_instance(
        self,
        instance_type: InstanceType,
        offering: Offering,
        *,
        tags: dict[str, str] | None = None,
        node_labels: dict[str, str] | None = None,
        node_taints: list[dict[str, str]] | None = None,
        startup_taints: list[dict[str, str]] | None = None,
        latency: LatencyDistribution | None = None,
    ) -> SimInstance:
        """Launch one instance now (the ``CreateFleet``/ASG call); its phases are scheduled."""
        now = self.clock()
        phases = (latency or self.latency).phases(self.rng)
        instance = SimInstance(
            id=f"i-{next(self._ids):017x}", instance_type=instance_type, offering=offering, launched_at=now,
            phases=phases, tags=dict(tags or {}), node_labels=dict(node_labels or {}),
            node_taints=list(node_taints or []), startup_taints=list(startup_taints or []),
        )
        self.instances[instance.id] = instance
        self._push(now + phases.running, RUNNING, instance.id)
        self._push(now + phases.registered, REGISTERED, instance.id)
        self._push(now + phases.ready, READY, instance.id)
        return instance

    def terminate(self, instance_id: str) -> bool:
        """Terminate now (``TerminateInstances``); False when unknown or already terminated."""
        instance = self.instances.get(instance_id)
        if instance is None or not instance.alive:
            return False
        instance.state = "terminated"
        instance.terminated_at = self.clock()
        return True

    def reboot(self, instance_id: str) -> bool:
        """Reboot in place (``RebootInstances``): recorded in :attr:`reboots`; the instance keeps running. False when
        unknown or terminated."""
        instance = self.instances.get(instance_id)
        if instance is None or not instance.alive:
            return False
        self.reboots.append((self.clock(), instance_id))
        return True

    def interrupt(self, instance_id: str) -> bool:
        """Issue a spot interruption: a warning now, termination two minutes later.

        Returns:
            False when the instance is unknown, not spot, terminated or already being interrupted.
        """
        instance = self.instances.get(instance_id)
        if instance is None or not instance.alive or instance.capacity_type != "spot" or instance.interrupt_at:
            return False
        now = self.clock()
        instance.interrupt_at = now + SPOT_INTERRUPTION_WARNING_SECONDS
        self._push(now, INTERRUPTION_WARNING, instance_id)
        self._push(instance.interrupt_at, TERMINATED, instance_id)
        return True

    def live(self) -> list[SimInstance]:
        """Instances not terminated, in launch order."""
        return [i for i in self.instances.values() if i.alive]

    def find_by_tag(self, key: str, value: str) -> SimInstance | None:
        """The live instance carrying tag ``key=value``, if any."""
        return next((i for i in self.instances.values() if i.alive and i.tags.get(key) == value), None)

    def cost_per_hour(self) -> float:
        """Sum of the prices of live instances, USD/hour."""
        return sum(i.price for i in self.instances.values() if i.alive)

    # --- time --------------------------------------------------------------------------------------------

    def _push(self, at: float, kind: str, instance_id: str) -> None:
        heapq.heappush(self._events, (at, next(self._seq), kind, instance_id))

    def next_event_time(self) -> float | None:
        """Epoch seconds of the next scheduled transition, or None."""
        return self._events[0][0] if self._events else None

    def due(self, now: float) -> Iterator[tuple[str, SimInstance]]:
        """Pop every transition at or before ``now`` in time order: ``(kind, instance)``.

        Transitions of an instance terminated meanwhile are dropped (a terminated instance neither boots nor
        gets interrupted). A ``terminated`` transition terminates the instance at its scheduled time.
        """
        while self._events and self._events[0][0] <= now:
            at, _, kind, instance_id = heapq.heappop(self._events)
            instance = self.instances[instance_id]
            if not instance.alive:
                continue
            if kind == RUNNING:
                instance.state = "running"
            elif kind == TERMINATED:
                instance.state = "terminated"
                instance.terminated_at = at
            yield kind, instance
