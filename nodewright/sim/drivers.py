"""Node autoscalers under simulation: nodewright's own controllers, driven on the simulated clock.

:class:`NodewrightDriver` runs the **same** controllers as ``nodewright run``: a
:class:`~nodewright.controllers.manager.ControllerManager` (provisioning, nomination, lifecycle, termination,
interruption, garbage collection, NodePool status) plus the disruption controller (emptiness, consolidation,
drift, expiration), over the world's in-memory cluster and a
:class:`~nodewright.cloud.simulated.SimulatedCloudProvider`. Spot interruption warnings reach the
interruption controller through a :class:`~nodewright.cloud.simulated.SimulatedInterruptionQueue`.

Stepping: the controllers' timing (batch windows of 1 s, disruption polls of 10 s, the 15 s validation
delay) is honoured by stepping one second after anything they react to moved -- a pod turned
``Unschedulable``, a Node or NodeClaim changed (also by the previous step: drains and launches take several
passes) -- and every :data:`QUIET_SECONDS` (10 s, Karpenter's disruption poll) otherwise. The world wakes the loop for its own events
(EC2 transitions, pod starts, job ends, autoscaler syncs) in between. Nominations kube-scheduler cleared are set
again by the nomination controller's pass ``QUIET`` (0.25 s) after the last clear, as ``nodewright run``'s 0.25 s
passes would (the in-memory cluster has no pod watch); no pass runs between a Node's Ready and its not-ready taint's
lift 11 ms later.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Protocol

from nodewright.api import labels as L
from nodewright.api.durations import to_seconds
from nodewright.cloud.overlay import OverlayStore
from nodewright.cloud.simulated import SimInstance, SimulatedCloudProvider, SimulatedInterruptionQueue
from nodewright.controllers.common import Context
from nodewright.controllers.manager import ControllerManager, ControllerOptions
from nodewright.controllers.provisioning import launch_pricing_hook
from nodewright.kube import resources as r
from nodewright.kube.cluster import Cluster
from nodewright.kube.objects import Obj, condition_true, is_deleting, name_of, parse_time
from nodewright.kube.resources import ResourceKind
from nodewright.metrics import Metrics
from nodewright.pricing import PricingPolicy
from nodewright.settings import (
    feature_gates,
    min_values_policy,
    parse_aws_feature_gates,
    preference_policy,
    scheduler_config,
)
from nodewright.settings import nominate_pods as load_nominate_pods
from nodewright.settings import nomination_hold as load_nomination_hold
from nodewright.sim.kubelet import NOT_READY_LIFT_SECONDS
from nodewright.sim.plans import PlanTracker
from nodewright.sim.scenario import has_capacity_buffers
from nodewright.sim.world import World
from nodewright.state.cluster import ClusterState, snapshot
from nodewright.state.models import models_for
from nodewright.state.pods import is_unschedulable, node_name

#: Seconds between controller steps when nothing moves (Karpenter's disruption poll period).
QUIET_SECONDS = 10.0
#: Longest a settled cluster goes without a disruption decision (Karpenter re-checks a consolidated cluster
#: after 5 minutes too).
SETTLED_MAX_SECONDS = 300.0


class Driver(Protocol):
    """A node autoscaler the runner can step."""

    name: str

    def should_step(self, now: float) -> bool:
        """Whether :meth:`step` has anything to do at ``now``."""
        ...

    def step(self, now: float) -> None:
        """Act at ``now``."""
        ...

    def next_wake(self, now: float) -> float:
        """Epoch seconds it wants to act next."""
        ...


def _seconds(value: object) -> float | None:
    """A Karpenter duration (``"30s"``, ``"720h"``) in seconds; None for ``Never``, absent or invalid."""
    if not isinstance(value, str):
        return None
    try:
        seconds = to_seconds(value)
    except ValueError:
        return None
    return float(seconds) if seconds is not None else None


class _Idle:
    """Stands in for the disruption controller during a pass it would spend deciding nothing."""

    @staticmethod
    def reconcile(state: ClusterState | None = None) -> None:
        return None


_IDLE = _Idle()


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
        options: controller tunables (Karpenter's defaults, NodePool status every 5 minutes, and
            ``MIN_VALUES_POLICY``, ``PREFERENCE_POLICY`` and ``FEATURE_GATES`` from the environment as
            ``nodewright run`` reads them, when None).
        nominate_pods: publish the plan as ``status.nominatedNodeName`` (None: ``NOMINATE_PODS``, default true).
        nomination_hold: the readiness hold (None: ``NOMINATION_HOLD``, default true).

    Attributes:
        passes_skipped: disruption passes left out because they provably had nothing to do.
        plans: whether kube-scheduler kept the provisioner's plan (:class:`~nodewright.sim.plans.PlanTracker`).
        steps: controller steps run.
    """

    name = "nodewright"

    def __init__(self, world: World, options: ControllerOptions | None = None,
                 pricing: PricingPolicy | None = None, nominate_pods: bool | None = None,
                 capacity_buffer: bool | None = None, nomination_hold: bool | None = None) -> None:
        self.world = world
        self.queue = SimulatedInterruptionQueue()
        gates = feature_gates(os.environ)  # FEATURE_GATES as `nodewright run` reads it
        models_for(world.cluster).use_scheduler_config(scheduler_config(os.environ))  # default topology spread
        self.cloud = SimulatedCloudProvider(world.ec2, world.scenario.region, world.scenario.zones,
                                            lambda name: world.cluster.get(r.EC2NODECLASSES, name),
                                            models_for(world.cluster).kubelet,
                                            reserved_capacity=gates.reserved_capacity)
        self.cloud.out_of_capacity = world.out_of_capacity  # the scenario's insufficientCapacity events
        self.ctx = Context(world.cluster, self.cloud, world.clock, Metrics(), f"sim-{world.scenario.name}",
                           overlays=OverlayStore(gates.node_overlay))
        self.snapshots = CachedSnapshots(world)
        # NodePool status only feeds metrics and status fields nobody reads in a simulation: every 5 minutes.
        # Node repair as `nodewright run` reads its gates (FEATURE_GATES NodeRepair, AWS_FEATURE_GATES RebootForRepair).
        aws_gates = parse_aws_feature_gates(os.environ.get("AWS_FEATURE_GATES", ""))
        opts = options or ControllerOptions(status_period=300.0, min_values_policy=min_values_policy(os.environ),
                                            preference_policy=preference_policy(os.environ),
                                            node_repair=gates.node_repair,
                                            reboot_for_repair=aws_gates.reboot_for_repair,
                                            spot_to_spot_consolidation=gates.spot_to_spot_consolidation,
                                            static_capacity=gates.static_capacity)
        # Nomination (issue 25): as `nodewright run` reads NOMINATE_PODS, unless the caller decides (--compare-nomination).
        nominate = load_nominate_pods(os.environ) if nominate_pods is None else nominate_pods
        hold = load_nomination_hold(os.environ) if nomination_hold is None else nomination_hold
        opts = dataclasses.replace(opts, nominate_pods=nominate, nomination_hold=hold)
        # The CapacityBuffer gate: on when the scenario declares a CapacityBuffer, unless the caller decides (the
        # replay's run without buffers).
        buffers = has_capacity_buffers(world.scenario) if capacity_buffer is None else capacity_buffer
        opts = dataclasses.replace(opts, capacity_buffer=buffers)
        if pricing is not None:  # simulate --scenario --pricing: provisioning and launches on effective prices
            opts = dataclasses.replace(opts, pricing_policy=lambda: pricing)
            self.cloud.launch_pricing = launch_pricing_hook(lambda: pricing, world.cluster)
        self.manager = ControllerManager(self.ctx, opts, self.queue, snapshotter=self.snapshots)
        if capacity_buffer is False:  # a deliberate run without buffers: no "buffers ignored" warning
            self.manager.buffers.warned_disabled = True
        self.disruption = self.manager.disruption
        self.plans = PlanTracker(world, self.manager.provisioner)
        self.busy = False  # something the controllers react to changed since the last step
        self._recheck = False
        self.revision = 0  # count of pod / node / NodeClaim changes
        self._stepped_revision = -1
        self._due = world.start
        self._settled: tuple[int, float] | None = None  # (revision, until) while decisions cannot change
        # Work in progress that needs passes even when nothing changes (retries, timeouts, batch re-runs).
        self._unschedulable: set[str] = set()
        self._unready: set[str] = set()
        self._deleting: set[tuple[str, str]] = set()
        self._last_pod_event: dict[str, float] = {}  # node name -> epoch seconds a pod was bound or removed
        self._bound_hosts: dict[str, tuple[str]] = {}  # pod key -> (node,) it is bound to
        self.passes_skipped = 0
        self.steps = 0
        world.on_interruption = self._on_interruption
        world.cluster.add_listener(self._on_change)

    # --- watching the cluster ----------------------------------------------------------------------------

    def _on_change(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        if kind not in (r.NODES, r.NODECLAIMS, r.PODS):
            return
        self.revision += 1
        name = str((obj.get("metadata") or {}).get("name"))
        key = (kind.kind, name if kind != r.PODS else f"{(obj.get('metadata') or {}).get('namespace')}/{name}")
        gone = event == "DELETED"
        if is_deleting(obj) and not gone:
            self._deleting.add(key)
        else:
            self._deleting.discard(key)
        if kind == r.PODS:
            host = node_name(obj)
            if host and (event != "MODIFIED" or host not in self._bound_hosts.get(key[1], ())):
                self._last_pod_event[host] = self.world.clock()
            if host and not gone:
                self._bound_hosts[key[1]] = (host,)
            elif gone:
                self._bound_hosts.pop(key[1], None)
            if not gone and not host and is_unschedulable(obj):
                self._unschedulable.add(key[1])
                self.busy = True
            else:
                self._unschedulable.discard(key[1])
            return
        self.busy = True
        if kind == r.NODECLAIMS:
            if gone or condition_true(obj, L.CONDITION_READY):
                self._unready.discard(name)
            else:
                self._unready.add(name)

    def _on_interruption(self, instance: SimInstance) -> None:
        self.queue.spot_interruption(instance.id)
        self._due = self.world.clock()  # the interruption controller polls its queue in the next pass

    # --- stepping ----------------------------------------------------------------------------------------

    def should_step(self, now: float) -> bool:
        """Whether a controller pass is needed now: the cluster changed since the last one, or one is due.

        Not while a Node that just turned Ready still waits for its not-ready taint to be lifted
        (:data:`~nodewright.sim.kubelet.NOT_READY_LIFT_SECONDS`, the node lifecycle controller): the controllers'
        work queues and batch windows take longer than those milliseconds, so the pass the Ready update triggers sees
        the lift too (a pass in between would be an artifact of stepping at the very instant of each event).
        """
        lift = self.world.kubelet.next_lift()
        if lift is not None and lift - now <= NOT_READY_LIFT_SECONDS:
            return False
        return self.revision != self._stepped_revision or now >= self._due

    def step(self, now: float) -> None:
        """One :meth:`ControllerManager.step`; the disruption pass is left out while it provably has nothing to do.

        The disruption controller's decision (:func:`nodewright.disruption.decide`) is a pure function of the
        cluster view and the time; the view changes only when pods, nodes or NodeClaims change, or when a
        node's ``consolidateAfter`` or ``expireAfter`` elapses. After a pass that decided nothing, and until
        one of those happens, another pass would decide nothing again (and track no pod event), so it is
        skipped -- as Karpenter skips a "consolidated" cluster. At least every :data:`SETTLED_MAX_SECONDS` it
        runs anyway (disruption budget windows open and close on a schedule).
        """
        settled = (self._settled is not None and self._settled[0] == self.revision and now < self._settled[1]
                   and self.disruption.command is None)
        if settled:
            self.manager.disruption = _IDLE  # type: ignore[assignment]
            self.passes_skipped += 1
        # A change seen before this pass (pods just marked Unschedulable) needs a second look a second later:
        # the provisioner's batch closes after 1 s without new pods.
        self._recheck = self.busy
        self.busy = False
        try:
            self.manager.step()
        finally:
            self.manager.disruption = self.disruption
        self.plans.observe()
        self.steps += 1
        if not settled:
            if self.disruption.last_decision_at == now and self.disruption.command is None:
                self._settled = (self.revision, self._next_eligible(now))
            else:
                self._settled = None
        self._stepped_revision = self.revision
        self._due = self._next_due(now)

    def _next_due(self, now: float) -> float:
        due = self._next_due_controllers(now)
        repair = self.manager.repair
        if repair is not None:  # a toleration ends without any change in the cluster
            repair_due = repair.next_due(self.snapshots(self.world.cluster), now)
            if repair_due is not None:
                due = min(due, max(now + 1.0, repair_due))
        refill = self.manager.buffers.next_due(now)  # CapacityBuffers refill their room on their own period
        if refill is not None:
            due = min(due, max(now + 1.0, refill))
        # Nominations kube-scheduler cleared are set again QUIET (0.25 s) after its last clear, as `nodewright run`'s
        # 0.25 s passes (and its pod watch) do: a pass then, not at the next 1 s step.
        renominate = self.manager.nomination.renomination_due()
        return due if renominate is None or renominate <= now else min(due, renominate)

    def _next_due_controllers(self, now: float) -> float:
        if self.busy or self._recheck:
            return now + 1.0  # the pass itself changed something: drains, launches take several passes
        command = self.disruption.command
        if command is not None and command.phase == "validating":
            return min(now + QUIET_SECONDS, max(now + 1.0, command.decided_at + self.disruption.validation_delay))
        if self._unschedulable or self._unready or self._deleting or command is not None:
            return now + QUIET_SECONDS
        if self._settled is not None:
            return max(now + QUIET_SECONDS, self._settled[1])  # nothing in progress: wait for a timer
        return now + QUIET_SECONDS

    def _next_eligible(self, now: float) -> float:
        """When a node's consolidateAfter or expireAfter next elapses (at most ``now + SETTLED_MAX_SECONDS``).

        Read from the cluster (NodeClaim creation and ``expireAfter``, the NodePool's ``consolidateAfter``) and
        from the pod events this driver saw per node -- the same moments the disruption controller records,
        since it runs in the pass right after every change.
        """
        until = now + SETTLED_MAX_SECONDS
        state = self.snapshots(self.world.cluster)
        for node in state.nodes.values():
            claim = state.nodeclaim_for(node)
            if claim is None:
                continue
            meta = claim.get("metadata") or {}
            created = parse_time(meta.get("creationTimestamp")) or now
            pool = state.nodepools.get(str((meta.get("labels") or {}).get(L.NODEPOOL, ""))) or {}
            after = _seconds(((pool.get("spec") or {}).get("disruption") or {}).get("consolidateAfter"))
            expire = _seconds((claim.get("spec") or {}).get("expireAfter"))
            quiet_since = self._last_pod_event.get(name_of(node), created)
            for deadline in (quiet_since + after if after is not None else None,
                             created + expire if expire is not None else None):
                if deadline is not None and deadline > now:
                    until = min(until, deadline)
        return until

    def next_wake(self, now: float) -> float:
        """Epoch seconds of the next pass the controllers need without any change."""
        return self._due if self._due > now else now + 1.0
