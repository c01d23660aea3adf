"""Karpenter's per-pod provisioning times, measured from the provisioner's memory (not pod creation).

Source: kubernetes-sigs/karpenter v1.14 ``pkg/controllers/metrics/pod`` and the cluster state's scheduling
decision marks. Times are epoch seconds from ``Context.clock``; a controller restart resets them, as Karpenter's.

* ``karpenter_pods_scheduling_decision_duration_seconds``: from the first pass the provisioner saw a pod
  pending until its first scheduling decision (placed, unschedulable or ignored as unreadable);
* ``karpenter_pods_provisioning_scheduling_undecided_time_seconds{name, namespace}``: now minus first seen,
  while a pending pod has no decision yet;
* from the first decision that placed a pod (on a new NodeClaim or an existing/in-flight node):
  ``..._provisioning_bound_duration_seconds`` until its ``PodScheduled`` condition turned True and
  ``..._provisioning_startup_duration_seconds`` until it ran (``Ready``, else ``startTime``); while it waits,
  ``..._provisioning_unbound_time_seconds`` / ``..._provisioning_unstarted_time_seconds{name, namespace}``.

Gauges are evaluated at scrape time; a pod that disappears loses its series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from nodewright.controllers.state_metrics import bound_time, started_time
from nodewright.kube.objects import Obj
from nodewright.metrics import Metrics
from nodewright.state.cluster import ClusterState
from nodewright.state.pods import node_name, pod_key


class PodProvisioningTimes:
    """The provisioner's per-pod decision and provisioning times (see module docstring).

    Args:
        metrics: where to record.
        clock: epoch seconds now.
    """

    def __init__(self, metrics: Metrics, clock: Callable[[], float]) -> None:
        self.metrics = metrics
        self.clock = clock
        self._seen: dict[str, float] = {}  # pending pod without a decision -> first seen
        self._placed: dict[str, float] = {}  # placed pod not yet running -> first placement
        self._bound: set[str] = set()  # placed pods already bound
        self._failed: set[str] = set()  # pending pods whose decision was "cannot place" (not undecided)
        self._labels: dict[str, tuple[str, str]] = {}

    def _gauge(self, gauge_name: str, key: str, since: float) -> None:
        clock = self.clock
        getattr(self.metrics, gauge_name).labels(*self._labels[key]).set_function(lambda: max(0.0, clock() - since))

    def _drop(self, gauge_name: str, key: str) -> None:
        labels = self._labels.get(key)
        if labels is not None:
            try:
                getattr(self.metrics, gauge_name).remove(*labels)
            except KeyError:
                pass

    def seen(self, pending: Iterable[Obj], now: float) -> None:
        """Note the pending pods of a pass; pods no longer pending without a decision are forgotten."""
        keys = set()
        for pod in pending:
            key = pod_key(pod)
            keys.add(key)
            if key in self._seen or key in self._placed or key in self._failed:
                continue
            self._seen[key] = now
            self._labels[key] = (str((pod.get("metadata") or {}).get("name") or ""),
                                 str((pod.get("metadata") or {}).get("namespace") or "default"))
            self._gauge("pods_provisioning_undecided_time", key, now)
        for key in [k for k in self._seen if k not in keys]:
            self._drop("pods_provisioning_undecided_time", key)
            del self._seen[key]
        self._failed &= keys
        for key in [k for k in self._labels if k not in keys and k not in self._placed]:
            del self._labels[key]

    def decided(self, placed: Iterable[str], failed: Iterable[str], now: float) -> None:
        """Record a scheduling run's decisions: ``placed`` and ``failed`` pod keys."""
        for key, ok in [*((k, True) for k in placed), *((k, False) for k in failed)]:
            first = self._seen.pop(key, None)
            if first is not None:
                self.metrics.pods_scheduling_decision_duration.observe(max(0.0, now - first))
                self._drop("pods_provisioning_undecided_time", key)
            if not ok:
                self._failed.add(key)
            elif key not in self._placed and key in self._labels:
                self._failed.discard(key)
                self._placed[key] = now
                self._gauge("pods_provisioning_unbound_time", key, now)
                self._gauge("pods_provisioning_unstarted_time", key, now)

    def observe(self, state: ClusterState) -> None:
        """Observe bind and start of the placed pods in ``state`` (once each); forget pods that are gone."""
        now = self.clock()
        for key, placed_at in list(self._placed.items()):
            pod = state.pods.get(key)
            if pod is not None and key not in self._bound and node_name(pod):
                self._bound.add(key)
                self._drop("pods_provisioning_unbound_time", key)
                bound = bound_time(pod)
                self.metrics.pods_provisioning_bound_duration.observe(
                    max(0.0, (bound if bound is not None else now) - placed_at))
            started = started_time(pod) if pod is not None else None
            if started is not None:
                self.metrics.pods_provisioning_startup_duration.observe(max(0.0, started - placed_at))
            if pod is None or started is not None:
                self._drop("pods_provisioning_unbound_time", key)
                self._drop("pods_provisioning_unstarted_time", key)
                del self._placed[key]
                self._bound.discard(key)
