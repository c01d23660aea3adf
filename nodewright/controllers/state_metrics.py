"""Metrics computed from the cluster state once per pass: node allocatable gauges and pod startup latency.

Karpenter's ``metrics.node`` and ``metrics.pod`` controllers, over one :class:`ClusterState` snapshot:

* ``karpenter_nodes_allocatable{node_name, nodepool, instance_type, capacity_type, zone, region, arch, os,
  phase, managed, resource_type}``: ``status.allocatable`` of every Node (cpu in cores, memory and
  ephemeral_storage in bytes, pods as a count). Label sets of deleted nodes, or of labels/resources a node
  no longer has, are removed. A node whose ``resourceVersion`` did not change is not recomputed.
* ``karpenter_pods_startup_duration_seconds``: for a pod this controller saw ``Pending`` (or first saw after
  its first pass, already ``Running``), once, when it is ``Running``: its ``Ready`` condition's
  ``lastTransitionTime`` (else ``status.startTime``, else now) minus its ``creationTimestamp``. Pods already
  running when the controller starts are not counted, as Karpenter's pod metrics controller does not.

The simulator's snapshotter hands back the same :class:`ClusterState` while nothing changed; such a pass
returns at once, so an idle pass costs one identity check.
"""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.controllers.common import Context, log
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import Obj, labels_of, meta, parse_time
from nodewright.metrics import NODE_METRIC_LABELS
from nodewright.quantities import CPU, parse_quantity
from nodewright.state.cluster import ClusterState, snapshot

LabelValues = tuple[str, ...]


def resource_type_label(resource: str) -> str:
    """Karpenter's ``resource_type`` value: lower case, ``-`` -> ``_`` (``ephemeral-storage`` ->
    ``ephemeral_storage``)."""
    return resource.lower().replace("-", "_")


def node_samples(node: Obj) -> list[tuple[LabelValues, float]]:
    """``(label values, value)`` per allocatable resource of ``node``, label values in the order of
    ``Metrics.nodes_allocatable``'s label names. cpu in cores, every other resource in its base unit;
    unparseable quantities are left out (logged)."""
    labels = labels_of(node)
    status = node.get("status") or {}
    base = (*(str(labels.get(key, "")) for key in NODE_METRIC_LABELS),
            str(meta(node).get("name") or ""), str(status.get("phase") or ""),
            "true" if L.NODEPOOL in labels else "false")
    samples: list[tuple[LabelValues, float]] = []
    for resource, raw in (status.get("allocatable") or {}).items():
        try:
            amount = parse_quantity(raw, str(resource))
        except NodewrightValidationError as err:
            log.warning("node %s: allocatable %s: %s", base[len(NODE_METRIC_LABELS)], resource, err)
            continue
        value = amount / 1000.0 if resource == CPU else float(amount)
        samples.append(((*base, resource_type_label(str(resource))), value))
    return samples


def startup_seconds(pod: Obj, now: float) -> float | None:
    """Seconds from ``creationTimestamp`` until the pod ran (``Ready`` became True, else ``startTime``,
    else ``now``); None without a creation time."""
    created = parse_time(meta(pod).get("creationTimestamp"))
    if created is None:
        return None
    status = pod.get("status") or {}
    ran = None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            ran = parse_time(cond.get("lastTransitionTime"))
    ran = ran if ran is not None else parse_time(status.get("startTime"))
    return max(0.0, (ran if ran is not None else now) - created)


class StateMetricsController:
    """Keeps the node gauges and the pod startup histogram of ``ctx.metrics`` in step with the cluster.

    Args:
        ctx: dependencies (metrics and clock are used).
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._last: ClusterState | None = None
        self._nodes: dict[str, tuple[str, list[LabelValues]]] = {}  # node -> (resourceVersion, label sets)
        self._pending: set[str] = set()  # pod keys seen Pending in the last pass
        self._known: set[str] | None = None  # pod keys of the last pass; None before the first one

    def reconcile(self, state: ClusterState | None = None) -> None:
        """Update the node gauges and observe pod startups from one snapshot (no-op on the same snapshot)."""
        state = state if state is not None else snapshot(self.ctx.cluster)
        if state is self._last:
            return
        self._last = state
        self._update_nodes(state)
        self._observe_pod_startups(state)

    def _update_nodes(self, state: ClusterState) -> None:
        gauge = self.ctx.metrics.nodes_allocatable
        current: dict[str, tuple[str, list[LabelValues]]] = {}
        for name, node in state.nodes.items():
            version = str(meta(node).get("resourceVersion") or "")
            cached = self._nodes.get(name)
            if cached is not None and version and cached[0] == version:
                current[name] = cached
                continue
            samples = node_samples(node)
            for values, value in samples:
                gauge.labels(*values).set(value)
            keep = {values for values, _ in samples}
            for values in cached[1] if cached else ():
                if values not in keep:  # a label or resource changed: drop the stale series
                    gauge.remove(*values)
            current[name] = (version, list(keep))
        for name in self._nodes.keys() - current.keys():
            for values in self._nodes[name][1]:
                gauge.remove(*values)
        self._nodes = current

    def _observe_pod_startups(self, state: ClusterState) -> None:
        # Only pods pending last pass or new since then can start: a pod never returns to Pending, so the
        # Python loop covers those few and the set differences over all pod keys run in C.
        histogram = self.ctx.metrics.pods_startup_duration
        now = self.ctx.clock()
        keys = state.pods.keys()
        first = self._known is None
        new = set(keys) if self._known is None else keys - self._known
        still_pending: set[str] = set()
        for key in self._pending | new:
            pod = state.pods.get(key)
            phase = (pod.get("status") or {}).get("phase") if pod is not None else None
            if phase == "Pending":
                still_pending.add(key)
            elif phase == "Running" and pod is not None and not first:
                seconds = startup_seconds(pod, now)
                if seconds is not None:
                    histogram.observe(seconds)
        self._pending = still_pending
        self._known = set(keys)
