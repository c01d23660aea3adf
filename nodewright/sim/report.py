"""What a simulation run measures: the timeline, pod scheduling latencies, disruptions and the summary.

:class:`Recorder` listens to the in-memory cluster (pod creation and binding, NodeClaim disruption reasons)
and samples the cluster every ``sample_interval`` seconds. Definitions:

* pod schedule latency: seconds from a pod's creation to its binding to a node (DaemonSet pods excluded,
  pods deleted while pending excluded);
* ``pending_pods``: pods not bound, not terminating, not finished (DaemonSet pods excluded);
* ``running_pods``: pods in phase ``Running``;
* ``nodes``: Node objects (registered, Ready or not yet: what ``kubectl get nodes`` lists); ``nodes_by_pool``
  the same by ``karpenter.sh/nodepool`` label ('' if none); ``ready_nodes``: those with ``Ready=True``. A node
  registers at ~75% of its launch latency and turns Ready at 100%, so ``nodes`` rises before ``ready_nodes``;
* ``first_node_registered_s`` / ``first_node_ready_s``: exact seconds (not sampled) at which the first Node
  object appeared / first turned Ready -- the first timeline entry with ``nodes`` / ``ready_nodes`` > 0 is the
  first sample at or after them;
* ``pods_scheduled``: pod objects bound to a node during the run (DaemonSet pods excluded). Every pod counts
  once, including Job pods that have since finished and pods created to replace evicted or lost ones, so it
  exceeds the workloads' final replica counts by the Job pods and by ``pods_evicted + pods_lost_with_node``
  (when the replacements got bound);
* ``pods_evicted``: bound pods removed through the eviction API (drains before consolidation, spot
  interruption or expiry; the Cluster Autoscaler's scale-down); ``pods_lost_with_node``: bound, unfinished
  pods deleted by the pod garbage collector because their Node disappeared without a drain (an interrupted
  instance the autoscaler did not drain);
* ``cost_per_hour``: prices of live EC2 instances (USD/hour, booting ones included: they are billed);
* ``cpu_utilization``: requested cpu of bound pods / allocatable cpu of Ready nodes (0 without nodes);
* ``node_hours``, ``cost_usd``: billed instance seconds / 3600 and their cost, exact to the second;
* ``disruptions_by_reason``: NodeClaims deleted by a disruption (``Empty``, ``Underutilized``, ``Drifted``,
  ``Expired``, ``Interrupted``, ...), or nodes the Cluster Autoscaler removed;
* ``repair_reboots`` / ``repair_blocked`` (only when there were any): instances node repair rebooted, Nodes whose
  repair the safety limit held (``nodeUnhealthy`` scenario events, gate ``NodeRepair``).
* ``disruptions_blocked`` (only when there were any): node -> the last ``DisruptionBlocked`` reason the
  disruption controller reported on it (a pod two PodDisruptionBudgets select, a pod no node can take again).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.simulated import SimulatedEC2
from nodewright.kube import resources as r
from nodewright.kube.cluster import Clock
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import Obj, condition, condition_true, is_deleting, labels_of
from nodewright.kube.resources import ResourceKind
from nodewright.quantities import parse_quantity
from nodewright.state.models import models_for
from nodewright.state.pods import is_daemonset_pod, node_name, pod_key


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated ``q``-th percentile (0-100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Sample:
    """One timeline entry (``t`` in seconds since the start)."""

    t: float
    pending_pods: int
    running_pods: int
    nodes: int
    ready_nodes: int
    nodes_by_pool: dict[str, int]
    cost_per_hour: float
    cpu_utilization: float

    def to_dict(self) -> dict[str, Any]:
        """JSON shape of the entry."""
        return {"t": self.t, "pending_pods": self.pending_pods, "running_pods": self.running_pods,
                "nodes": self.nodes, "ready_nodes": self.ready_nodes, "nodes_by_pool": dict(sorted(self.nodes_by_pool.items())),
                "cost_per_hour": round(self.cost_per_hour, 6), "cpu_utilization": round(self.cpu_utilization, 4)}


def _cpu(value: Any) -> int:
    try:
        return parse_quantity(value, "cpu") if value is not None else 0
    except Exception:  # a malformed node quantity must not break reporting
        return 0


@dataclass
class Recorder:
    """Collects the measurements of one run (see module docstring).

    Args:
        cluster: the cluster to observe (a listener is registered).
        ec2: the simulated EC2 (billing).
        clock: epoch seconds now.
        start: epoch seconds of t=0.
    """

    cluster: InMemoryCluster
    ec2: SimulatedEC2
    clock: Clock
    start: float
    timeline: list[Sample] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    disruptions: Counter[str] = field(default_factory=Counter)
    created: dict[str, float] = field(default_factory=dict)
    first_ready: float | None = None
    first_registered: float | None = None
    evicted: int = 0
    lost_with_node: int = 0
    max_nodes: int = 0
    _nodes: set[str] = field(default_factory=set)
    _disrupted: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.cluster.add_listener(self._on_change)
        self._models = models_for(self.cluster)

    def _on_change(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        if kind == r.PODS:
            self._on_pod(event, obj)
        elif kind == r.NODES:
            name = str((obj.get("metadata") or {}).get("name"))
            if event == "DELETED":
                self._nodes.discard(name)
            else:
                self._nodes.add(name)
                self.max_nodes = max(self.max_nodes, len(self._nodes))
                if self.first_registered is None:
                    self.first_registered = self.clock() - self.start
                if self.first_ready is None and condition_true(obj, "Ready"):
                    self.first_ready = self.clock() - self.start
        elif kind == r.NODECLAIMS and event != "DELETED":
            reason = condition(obj, L.CONDITION_DISRUPTION_REASON)
            name = str((obj.get("metadata") or {}).get("name"))
            if reason and reason.get("status") == "True" and name not in self._disrupted:
                self._disrupted.add(name)
                self.disruptions[str(reason.get("reason") or "Unknown")] += 1

    def _on_pod(self, event: str, obj: Obj) -> None:
        if is_daemonset_pod(obj):
            return
        key = pod_key(obj)
        if event == "ADDED":
            if node_name(obj):
                self.latencies.append(0.0)
            else:
                self.created[key] = self.clock()
        elif event == "DELETED":
            self.created.pop(key, None)
            self._count_disrupted(obj)
        elif node_name(obj) and key in self.created:
            self.latencies.append(self.clock() - self.created.pop(key))

    def _count_disrupted(self, pod: Obj) -> None:
        bound = node_name(pod)
        if not bound or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        meta = pod.get("metadata") or {}
        evictions = self.cluster.evictions
        # The in-memory API records an eviction just before it deletes the pod.
        if evictions and evictions[-1] == (str(meta.get("namespace") or "default"), str(meta.get("name"))):
            self.evicted += 1
        elif bound not in self._nodes:  # the Node's DELETED event comes before its pods' (pod GC)
            self.lost_with_node += 1

    def disruption(self, reason: str, count: int = 1) -> None:
        """Count a disruption done outside NodeClaims (the Cluster Autoscaler baseline)."""
        self.disruptions[reason] += count

    # --- sampling ----------------------------------------------------------------------------------------

    def _facts(self, pod: Obj) -> tuple[bool, int]:
        """(DaemonSet pod, cpu request in millicores), through the cluster's conversion cache."""
        converted = self._models.pod(pod)
        if converted is None:
            return is_daemonset_pod(pod), 0
        return converted.is_daemonset, converted.requests.get("cpu", 0)

    def sample(self, now: float) -> Sample:
        """Measure the cluster now and append to :attr:`timeline`."""
        pending = running = 0
        requested = 0
        for pod in self.cluster.list(r.PODS):
            status = pod.get("status") or {}
            phase = status.get("phase")
            if phase in ("Succeeded", "Failed"):
                continue
            daemon, cpu = self._facts(pod)
            if not (pod.get("spec") or {}).get("nodeName"):
                if not daemon and not is_deleting(pod):
                    pending += 1
                continue
            if phase == "Running":
                running += 1
            requested += cpu
        by_pool: Counter[str] = Counter()
        allocatable = ready = 0
        nodes = self.cluster.list(r.NODES)
        for node in nodes:
            by_pool[labels_of(node).get(L.NODEPOOL, "")] += 1
            if condition_true(node, "Ready"):
                ready += 1
                allocatable += _cpu(((node.get("status") or {}).get("allocatable") or {}).get("cpu"))
        sample = Sample(round(now - self.start, 3), pending, running, len(nodes), ready, dict(by_pool),
                        self.ec2.cost_per_hour(), requested / allocatable if allocatable else 0.0)
        self.timeline.append(sample)
        return sample

    # --- summary -----------------------------------------------------------------------------------------

    def summary(self, now: float) -> dict[str, Any]:
        """The run's summary (keys in the module docstring; seconds, USD)."""
        seconds = sum(i.billed_seconds(now) for i in self.ec2.instances.values())
        cost = sum(i.price * i.billed_seconds(now) for i in self.ec2.instances.values()) / 3600.0
        final = self.timeline[-1] if self.timeline else None

        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        return {
            "pod_schedule_latency_p50_s": rounded(percentile(self.latencies, 50)),
            "pod_schedule_latency_p95_s": rounded(percentile(self.latencies, 95)),
            "pod_schedule_latency_max_s": rounded(max(self.latencies) if self.latencies else None),
            "pods_scheduled": len(self.latencies),
            "pods_evicted": self.evicted,
            "pods_lost_with_node": self.lost_with_node,
            "first_node_registered_s": rounded(self.first_registered),
            "first_node_ready_s": rounded(self.first_ready),
            "max_nodes": self.max_nodes,
            "final_nodes": final.nodes if final else 0,
            "nodes_launched": len(self.ec2.instances),
            "node_hours": round(seconds / 3600.0, 4),
            "cost_usd": round(cost, 4),
            "unscheduled_pods_at_end": final.pending_pods if final else 0,
            "disruptions_by_reason": dict(sorted(self.disruptions.items())),
            **self._blocked(),
            **self._repair(),
        }

    def _repair(self) -> dict[str, Any]:
        """Node repair's own lines, only when it did something: ``repair_reboots`` (instances rebooted, AWS gate
        RebootForRepair) and ``repair_blocked`` (Nodes the 20% safety limit held, from ``NodeRepairBlocked``)."""
        out: dict[str, Any] = {}
        if self.ec2.reboots:
            out["repair_reboots"] = len(self.ec2.reboots)
        held = sorted({str(e["name"]) for e in self.cluster.events
                       if e["reason"] == "NodeRepairBlocked" and e["kind"] == "Node"})
        if held:
            out["repair_blocked"] = held
        return out
    def pending_seconds(self, now: float) -> float:
        """Seconds pods spent pending, summed over pods (creation to binding; pods still pending count until
        ``now``; DaemonSet pods left out, as in the latencies)."""
        return sum(self.latencies) + sum(now - created for created in self.created.values())

    def _blocked(self) -> dict[str, dict[str, str]]:
        """``{"disruptions_blocked": {node: reason}}`` from the cluster's ``DisruptionBlocked`` Events, or ``{}``."""
        blocked = {str(e["name"]): str(e["message"]) for e in self.cluster.events if e["reason"] == "DisruptionBlocked"}
        return {"disruptions_blocked": dict(sorted(blocked.items()))} if blocked else {}
