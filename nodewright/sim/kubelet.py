"""The node side of the simulated cluster: kubelets registering Nodes, pods starting, instances vanishing.

:class:`SimulatedKubelet` turns the timed transitions of :class:`~nodewright.cloud.simulated.SimulatedEC2`
into cluster objects:

* ``registered``: the kubelet creates the Node (name ``ip-10-x-y-z.<region>.compute.internal``, the
  instance's labels and registration taints, capacity/allocatable of its type, ``Ready=False`` with
  ``node.kubernetes.io/not-ready:NoSchedule``); extended resources (GPUs, Neuron, EFA) read ``0`` until their
  device plugins start, as on a real node;
* ``ready``: ``Ready=True``; the NodeClaim's startup taints are removed (as the CNI and the agents owning startup
  taints would) and the device plugins report the extended resources. The ``node.kubernetes.io/not-ready`` taint
  stays on: the node lifecycle controller of kube-controller-manager lifts it :data:`NOT_READY_LIFT_SECONDS` later
  (:meth:`SimulatedKubelet.lift_not_ready_taints`), a second Node update. So a Node turning Ready is two events for
  kube-scheduler, as in a real cluster: the Ready update, at which every pending pod retried still fails on the
  taint (and loses its nomination, :mod:`nodewright.sim.kubescheduler`), then the taint lift;
* ``interruption-warning``: handed to a callback (nodewright: the interruption queue);
* ``terminated``: the instance is gone; the cloud node-lifecycle controller deletes its Node (which drains
  through the termination finalizer if nodewright put one there).

Pods bound to a node turn ``Running`` ``start_delay`` seconds after binding (image pull and start).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.provider import make_provider_id
from nodewright.cloud.simulated import SimInstance, SimulatedEC2
from nodewright.cloud.simulated.ec2 import INTERRUPTION_WARNING, READY, REGISTERED, TERMINATED
from nodewright.kube import resources as r
from nodewright.kube.cluster import Clock
from nodewright.kube.errors import NotFoundError
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import Obj, condition_true, format_time, is_deleting, meta, name_of
from nodewright.kube.resources import ResourceKind
from nodewright.quantities import format_resource_list
from nodewright.state.pods import node_name

NOT_READY_TAINT = {"key": L.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}
#: Seconds from a Node's ``Ready=True`` to the node lifecycle controller lifting its not-ready taint (11 ms in the
#: real control plane's log of docs/benchmarks.md, case-18 of run n).
NOT_READY_LIFT_SECONDS = 0.011


def node_name_for(index: int, region: str) -> str:
    """EC2's private DNS name style for the ``index``-th instance (``ip-10-0-0-5.ec2.internal``)."""
    a, rest = divmod(index, 65536)
    b, c = divmod(rest, 256)
    suffix = "ec2.internal" if region == "us-east-1" else f"{region}.compute.internal"
    return f"ip-10-{a}-{b}-{c}.{suffix}"


#: What the kubelet itself reports at registration; other resources come from device plugins later.
_KUBELET_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


def _without_devices(resources: Mapping[str, int]) -> dict[str, int]:
    """``resources`` with every extended resource at 0 (a registering node before its device plugins run)."""
    return {k: (v if k in _KUBELET_RESOURCES or k.startswith("hugepages-") else 0) for k, v in resources.items()}


def _ready_condition(status: str, now: float, reason: str) -> dict[str, Any]:
    stamp = format_time(now)
    return {"type": "Ready", "status": status, "reason": reason, "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp}


class SimulatedKubelet:
    """Nodes and pod starts (see module docstring).

    Args:
        cluster: the in-memory cluster.
        ec2: the simulated EC2 whose transitions drive Nodes.
        clock: epoch seconds now.
        region: for node names and the region label.
        start_delay: seconds from binding to ``Running``.
        on_interruption: called with the instance on a spot interruption warning.
    """

    def __init__(self, cluster: InMemoryCluster, ec2: SimulatedEC2, clock: Clock, region: str,
                 start_delay: float, on_interruption: Callable[[SimInstance], None] | None = None) -> None:
        self.cluster = cluster
        self.ec2 = ec2
        self.clock = clock
        self.region = region
        self.start_delay = start_delay
        self.on_interruption = on_interruption
        self._names = 0
        self._starts: list[tuple[float, str, str]] = []  # (time, namespace, name)
        #: epoch seconds each Node turned Ready (node name -> time).
        self.ready_at: dict[str, float] = {}
        self._lifts: list[tuple[float, str]] = []  # (time, node name): not-ready taints to lift
        cluster.add_listener(self._on_change)

    # --- pods --------------------------------------------------------------------------------------------

    def _on_change(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        if kind != r.PODS or event == "DELETED" or not node_name(obj):
            return
        if (obj.get("status") or {}).get("phase") == "Pending" and not is_deleting(obj):
            when = self.clock() + self.start_delay
            heapq.heappush(self._starts, (when, str(meta(obj).get("namespace") or "default"), name_of(obj)))

    def start_pods(self, now: float) -> int:
        """Mark pods Running whose start time has come; returns how many started."""
        started = 0
        while self._starts and self._starts[0][0] <= now:
            _, namespace, name = heapq.heappop(self._starts)
            pod = self.cluster.get(r.PODS, name, namespace)
            if pod is None or is_deleting(pod) or (pod.get("status") or {}).get("phase") != "Pending":
                continue
            conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
            conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": format_time(now)})
            self.cluster.patch_status(r.PODS, name, {"phase": "Running", "conditions": conditions,
                                                     "startTime": format_time(now)}, namespace)
            started += 1
        return started

    def next_start(self) -> float | None:
        """Epoch seconds of the next pod start, or None."""
        return self._starts[0][0] if self._starts else None

    # --- nodes -------------------------------------------------------------------------------------------

    def apply_transitions(self, now: float) -> list[tuple[str, SimInstance]]:
        """Process every EC2 transition due at ``now``; returns them."""
        done = []
        for kind, instance in self.ec2.due(now):
            if kind == REGISTERED:
                self._register(instance, now)
            elif kind == READY:
                self._ready(instance, now)
            elif kind == INTERRUPTION_WARNING and self.on_interruption is not None:
                self.on_interruption(instance)
            elif kind == TERMINATED:
                self._gone(instance)
            done.append((kind, instance))
        return done

    def _register(self, instance: SimInstance, now: float) -> None:
        name = node_name_for(self._names + 5, self.region)
        self._names += 1
        instance.node_name = name
        labels = {**instance.node_labels, L.HOSTNAME: name, L.REGION: self.region}
        taints = [dict(t) for t in instance.node_taints] + [dict(NOT_READY_TAINT)]
        it = instance.instance_type
        capacity, allocatable = _without_devices(it.capacity), _without_devices(it.allocatable())
        self.cluster.create(r.NODES, {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": make_provider_id(instance.zone, instance.id), "taints": taints},
            "status": {"capacity": format_resource_list(capacity), "allocatable": format_resource_list(allocatable),
                       "conditions": [_ready_condition("False", now, "KubeletNotReady")],
                       "nodeInfo": {"kubeletVersion": "v1.31.0-eks", "architecture": labels.get(L.ARCH, "")}},
        })

    def _ready(self, instance: SimInstance, now: float) -> None:
        node = self.cluster.get(r.NODES, instance.node_name) if instance.node_name else None
        if node is None or is_deleting(node):
            return
        startup = {(t.get("key"), t.get("effect")) for t in instance.startup_taints}
        taints = [t for t in (node.get("spec") or {}).get("taints") or []
                  if (t.get("key"), t.get("effect")) not in startup]
        self.cluster.patch(r.NODES, name_of(node), {"spec": {"taints": taints}})
        it = instance.instance_type
        self.cluster.patch_status(r.NODES, name_of(node), {
            "conditions": [_ready_condition("True", now, "KubeletReady")],
            "capacity": format_resource_list(it.capacity), "allocatable": format_resource_list(it.allocatable())})
        self.ready_at[name_of(node)] = now
        heapq.heappush(self._lifts, (now + NOT_READY_LIFT_SECONDS, name_of(node)))

    def lift_not_ready_taints(self, now: float) -> int:
        """The node lifecycle controller: remove ``node.kubernetes.io/not-ready`` from the Nodes Ready for
        :data:`NOT_READY_LIFT_SECONDS` (still Ready, not being deleted); returns how many were lifted."""
        lifted = 0
        while self._lifts and self._lifts[0][0] <= now:
            _, name = heapq.heappop(self._lifts)
            node = self.cluster.get(r.NODES, name)
            if node is None or is_deleting(node) or not condition_true(node, "Ready"):
                continue
            taints = (node.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != L.NOT_READY_TAINT_KEY]
            if len(kept) != len(taints):
                self.cluster.patch(r.NODES, name, {"spec": {"taints": kept}})
                lifted += 1
        return lifted

    def next_lift(self) -> float | None:
        """Epoch seconds of the next not-ready taint lift, or None."""
        return self._lifts[0][0] if self._lifts else None

    def _gone(self, instance: SimInstance) -> None:
        if not instance.node_name:
            return
        node = self.cluster.get(r.NODES, instance.node_name)
        if node is None:
            return
        self.cluster.patch_status(r.NODES, instance.node_name,
                                  {"conditions": [_ready_condition("Unknown", self.clock(), "NodeStatusUnknown")]})
        try:
            self.cluster.delete(r.NODES, instance.node_name)
        except NotFoundError:
            pass
