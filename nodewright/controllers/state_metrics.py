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

* ``karpenter_nodes_total_{pod,daemon}_{requests,limits}``, ``karpenter_nodes_system_overhead`` (capacity -
  allocatable), ``karpenter_nodes_current_lifetime_seconds``, with the node labels above; and
  ``karpenter_cluster_utilization_percent{resource_type}`` (requests of pods on nodes / allocatable of all
  nodes x 100). Pod requests are the kube-scheduler's effective requests
  (:func:`nodewright.scheduling.pods.effective_requests`), limits Karpenter's ``resources.PodLimits``
  (:func:`nodewright.scheduling.pods.effective_limits`); terminal pods are left out. Per-pod values are
  cached by object identity, so an unchanged pod is not parsed again.

The simulator's snapshotter hands back the same :class:`ClusterState` while nothing changed; such a pass
returns at once, so an idle pass costs one identity check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nodewright.api import labels as L
from nodewright.controllers.common import Context, log
from nodewright.controllers.condition_metrics import status_rows
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import Obj, labels_of, meta, parse_time
from nodewright.metrics import NODE_METRIC_LABELS
from nodewright.quantities import CPU, Resources, add, parse_quantity, parse_resource_list
from nodewright.scheduling.pods import effective_limits, effective_requests
from nodewright.state.cluster import ClusterState, snapshot
from nodewright.state.pods import is_daemonset_pod, is_terminal, node_name, pod_key

LabelValues = tuple[str, ...]


def resource_type_label(resource: str) -> str:
    """Karpenter's ``resource_type`` value: lower case, ``-`` -> ``_`` (``ephemeral-storage`` ->
    ``ephemeral_storage``)."""
    return resource.lower().replace("-", "_")


def node_samples(node: Obj) -> list[tuple[LabelValues, float]]:
    """``(label values, value)`` per allocatable resource of ``node``, label values in the order of
    ``Metrics.nodes_allocatable``'s label names. cpu in cores, every other resource in its base unit;
    unparseable quantities are left out (logged)."""
    status = node.get("status") or {}
    base = node_label_values(node)
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


def node_label_values(node: Obj) -> LabelValues:
    """Label values of a node's per-node series, in the order of :data:`nodewright.metrics.NODE_LABEL_NAMES`."""
    labels = labels_of(node)
    return (*(str(labels.get(key, "")) for key in NODE_METRIC_LABELS), str(meta(node).get("name") or ""),
            str((node.get("status") or {}).get("phase") or ""), "true" if L.NODEPOOL in labels else "false")


def _resources(resource_list: Any) -> Resources:
    try:
        return parse_resource_list(resource_list)
    except NodewrightValidationError:
        return {}


#: Metrics attributes of per-node resource totals (``nodes_current_lifetime`` is kept beside them).
_TOTAL_GAUGES = ("nodes_total_pod_requests", "nodes_total_pod_limits", "nodes_total_daemon_requests",
                 "nodes_total_daemon_limits", "nodes_system_overhead")


@dataclass(frozen=True)
class _NodeTotals:
    """One node's exported totals: ``signature`` (the node object and its pod objects) decides reuse;
    snapshots share unchanged objects, so the comparison is by identity in the common case."""

    signature: tuple[Any, ...]
    base: LabelValues
    series: dict[str, dict[LabelValues, float]]
    created: float | None
    requested: Resources
    allocatable: Resources


def bound_time(pod: Obj) -> float | None:
    """Epoch seconds the pod was bound (its ``PodScheduled`` condition turned True), or None."""
    scheduled = None
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            scheduled = parse_time(cond.get("lastTransitionTime"))
    return scheduled


def started_time(pod: Obj) -> float | None:
    """Epoch seconds the pod ran (``Ready`` became True, else ``status.startTime``), or None."""
    status = pod.get("status") or {}
    ran = None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            ran = parse_time(cond.get("lastTransitionTime"))
    return ran if ran is not None else parse_time(status.get("startTime"))


def bound_seconds(pod: Obj, now: float) -> float | None:
    """Seconds from ``creationTimestamp`` until the pod was bound (:func:`bound_time`, else ``now``); None
    without a creation time."""
    created = parse_time(meta(pod).get("creationTimestamp"))
    if created is None:
        return None
    scheduled = bound_time(pod)
    return max(0.0, (scheduled if scheduled is not None else now) - created)


def startup_seconds(pod: Obj, now: float) -> float | None:
    """Seconds from ``creationTimestamp`` until the pod ran (:func:`started_time`, else ``now``); None without
    a creation time."""
    created = parse_time(meta(pod).get("creationTimestamp"))
    if created is None:
        return None
    ran = started_time(pod)
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
        self._pod_totals: dict[str, tuple[Obj, bool, Resources, Resources]] = {}  # key -> (pod, daemon, req, lim)
        self._node_totals: dict[str, _NodeTotals] = {}  # node -> its exported totals
        self._unstarted: dict[str, LabelValues] = {}  # pod key -> labels of its unstarted-time series
        self._unbound: dict[str, LabelValues] = {}  # pod key -> labels of its unbound-time series

    def reconcile(self, state: ClusterState | None = None) -> None:
        """Update the node gauges and observe pod startups from one snapshot (no-op on the same snapshot)."""
        state = state if state is not None else snapshot(self.ctx.cluster)
        if state is self._last:
            return
        self._last = state
        status = self.ctx.metrics.nodeclaim_status
        status.conditions, status.terminating = status_rows(state.nodeclaims.values())
        status.clock = self.ctx.clock
        self._update_nodes(state)
        self._update_totals(state)
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

    def _pod_resources(self, key: str, pod: Obj) -> tuple[bool, Resources, Resources]:
        cached = self._pod_totals.get(key)
        if cached is not None and cached[0] is pod:
            return cached[1], cached[2], cached[3]
        try:
            spec = pod.get("spec") or {}
            requests, limits = effective_requests(spec), effective_limits(spec)
        except NodewrightValidationError as err:
            log.warning("pod %s: %s", key, err)
            requests, limits = {}, {}
        entry = (pod, is_daemonset_pod(pod), requests, limits)
        self._pod_totals[key] = entry
        return entry[1], entry[2], entry[3]

    def _update_totals(self, state: ClusterState) -> None:
        metrics = self.ctx.metrics
        requested: Resources = {}
        allocatable: Resources = {}
        current: dict[str, _NodeTotals] = {}
        for name, node in state.nodes.items():
            on_node = state.pods_on(name)
            signature = (node, *on_node)  # tuple == compares by identity first: cheap when unchanged
            cached = self._node_totals.get(name)
            if cached is not None and cached.signature == signature:
                totals = cached  # same node object and the same pod objects: nothing to recompute or set
            else:
                pods = [p for p in on_node if not is_terminal(p)]
                totals = self._node_totals_of(node, pods, [pod_key(p) for p in pods], signature)
                self._export(totals, cached)
            current[name] = totals
            requested = add(requested, totals.requested)
            allocatable = add(allocatable, totals.allocatable)
        for name in self._node_totals.keys() - current.keys():
            self._export(None, self._node_totals[name])
        self._node_totals = current
        for key in self._pod_totals.keys() - state.pods.keys():
            del self._pod_totals[key]
        for resource, amount in allocatable.items():
            if amount > 0:
                metrics.cluster_utilization.labels(resource_type_label(resource)).set(
                    100.0 * requested.get(resource, 0) / amount)

    def _node_totals_of(self, node: Obj, pods: list[Obj], keys: list[str],
                        signature: tuple[Any, ...]) -> _NodeTotals:
        base = node_label_values(node)
        sums: dict[str, Resources] = {gauge: {} for gauge in _TOTAL_GAUGES}
        requested: Resources = {}
        for key, pod in zip(keys, pods, strict=True):
            daemon, requests, limits = self._pod_resources(key, pod)
            kind = "daemon" if daemon else "pod"
            sums[f"nodes_total_{kind}_requests"] = add(sums[f"nodes_total_{kind}_requests"], requests)
            sums[f"nodes_total_{kind}_limits"] = add(sums[f"nodes_total_{kind}_limits"], limits)
            requested = add(requested, requests)
        status = node.get("status") or {}
        allocatable = _resources(status.get("allocatable"))
        capacity = _resources(status.get("capacity"))
        sums["nodes_system_overhead"] = {k: capacity[k] - allocatable.get(k, 0) for k in capacity}
        series = {gauge: {(*base, resource_type_label(resource)): amount / 1000.0 if resource == CPU else float(amount)
                          for resource, amount in resources.items()}
                  for gauge, resources in sums.items()}
        created = parse_time(meta(node).get("creationTimestamp"))
        return _NodeTotals(signature, base, series, created, requested, allocatable)

    def _export(self, new: _NodeTotals | None, old: _NodeTotals | None) -> None:
        """Set ``new``'s series and remove those of ``old`` that ``new`` no longer has."""
        metrics = self.ctx.metrics
        for gauge_name in _TOTAL_GAUGES:
            gauge = getattr(metrics, gauge_name)
            values = new.series[gauge_name] if new else {}
            before = old.series[gauge_name] if old else {}
            for labels, value in values.items():
                if before.get(labels) != value:  # ~40 labels per series: setting is the expensive part
                    gauge.labels(*labels).set(value)
            for gone in (old.series[gauge_name].keys() - values.keys()) if old else ():
                gauge.remove(*gone)
        lifetime = metrics.nodes_current_lifetime
        if old is not None and old.created is not None and (new is None or new.base != old.base):
            lifetime.remove(*old.base)
        if new is not None and new.created is not None and (old is None or old.base != new.base
                                                            or old.created != new.created):
            created, clock = new.created, self.ctx.clock
            lifetime.labels(*new.base).set_function(lambda: max(0.0, clock() - created))  # evaluated at scrape

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
            self._observe_waiting(key, pod, phase == "Pending", counted=not first)
            if phase == "Pending":
                still_pending.add(key)
            elif phase == "Running" and pod is not None and not first:
                seconds = startup_seconds(pod, now)
                if seconds is not None:
                    histogram.observe(seconds)
        self._pending = still_pending
        self._known = set(keys)

    def _observe_waiting(self, key: str, pod: Obj | None, pending: bool, counted: bool) -> None:
        """``karpenter_pods_unstarted_time_seconds`` / ``_unbound_time_seconds`` ({name, namespace}, now minus
        creation, evaluated at scrape time) while a pod is Pending / has no node; ``_bound_duration_seconds``
        once when a pod this controller saw (``counted``: not on its first pass) gets its node."""
        metrics = self.ctx.metrics
        created = parse_time(meta(pod).get("creationTimestamp")) if pod is not None else None
        bound = pod is not None and bool(node_name(pod))
        if pending and pod is not None and created is not None:
            labels = (str(meta(pod).get("name") or ""), str(meta(pod).get("namespace") or "default"))
            clock = self.ctx.clock
            if key not in self._unstarted:
                self._unstarted[key] = labels
                metrics.pods_unstarted_time.labels(*labels).set_function(lambda: max(0.0, clock() - created))
            if not bound and key not in self._unbound:
                self._unbound[key] = labels
                metrics.pods_unbound_time.labels(*labels).set_function(lambda: max(0.0, clock() - created))
        elif key in self._unstarted:
            metrics.pods_unstarted_time.remove(*self._unstarted.pop(key))
        if (bound or pod is None) and key in self._unbound:
            metrics.pods_unbound_time.remove(*self._unbound.pop(key))
            if pod is not None and counted:
                seconds = bound_seconds(pod, self.ctx.clock())
                if seconds is not None:
                    metrics.pods_bound_duration.observe(seconds)
