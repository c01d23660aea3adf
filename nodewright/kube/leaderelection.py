"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` package does it.

The holder renews ``spec.renewTime`` every ``retry_period``; a candidate takes the Lease over once it has
seen the same record unchanged for ``lease_duration`` seconds *by its own clock* (it never compares the
holder's timestamps with its clock, so clock skew between replicas does not matter). Writes use the Lease's
``resourceVersion`` so two candidates cannot both win. Releasing (graceful shutdown) clears
``holderIdentity`` so a standby takes over on its next attempt instead of waiting out the lease.

:meth:`LeaderElector.step` is synchronous and clock-driven (testable without threads).
:meth:`LeaderElector.run` calls it every ``retry_period`` on its own thread (:meth:`LeaderElector.start`), so
the Lease is renewed however long a controller pass takes: a 15 s pass must not let a standby take over
while the old leader is still acting (client-go's ``renew`` loop runs beside the controllers, too).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nodewright.kube import resources as r
from nodewright.kube.cluster import Clock, Cluster
from nodewright.kube.errors import AlreadyExistsError, ConflictError, KubeError
from nodewright.kube.objects import format_micro_time
from nodewright.logging import warn_limited

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseConfig:
    """Timing in seconds (client-go defaults are 15/10/2; ours are shorter so a standby takes over
    within 15 s of a crashed leader: ``lease_duration + retry_period`` = 12 s)."""

    namespace: str = "kube-system"
    name: str = "nodewright-leader-election"
    lease_duration: float = 10.0
    renew_deadline: float = 7.0
    retry_period: float = 2.0


class LeaderElector:
    """One candidate.

    Args:
        cluster: where the Lease lives (Leases are read from the server, not a cache).
        identity: this replica's unique id (pod name + random suffix).
        config: Lease name and timing.
        clock: epoch seconds.
    """

    def __init__(self, cluster: Cluster, identity: str, config: LeaseConfig, clock: Clock) -> None:
        self.cluster = cluster
        self.identity = identity
        self.config = config
        self.clock = clock
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_renew = float("-inf")
        self._leading = False
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        """True while the last successful renewal is within ``renew_deadline``."""
        return self._leading and self.clock() - self._last_renew < self.config.renew_deadline

    def _spec(self, now: float, transitions: int, acquire: bool, old: dict[str, Any]) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(round(self.config.lease_duration)),
            "acquireTime": format_micro_time(now) if acquire else old.get("acquireTime", format_micro_time(now)),
            "renewTime": format_micro_time(now),
            "leaseTransitions": transitions + (1 if acquire and old else 0),  # client-go: on every holder change
        }

    def step(self) -> bool:
        """Try to acquire or renew once; returns whether this replica leads now. Never raises."""
        now = self.clock()
        try:
            leading = self._try_acquire_or_renew(now)
        except KubeError as err:
            warn_limited(log, f"leader election {err.status}", "leader election: lease %s/%s: %s",
                         self.config.namespace, self.config.name, err, extra={"status": err.status})
            leading = False
        if leading:
            if not self._leading:
                log.info("acquired leader lease %s/%s", self.config.namespace, self.config.name,
                         extra={"identity": self.identity})
            self._leading = True
            self._last_renew = now
        elif self._leading and now - self._last_renew >= self.config.renew_deadline:
            log.warning("lost leader lease %s/%s", self.config.namespace, self.config.name)
            self._leading = False
        elif not self._leading:
            self._leading = False
        return self.is_leader

    def run(self, stop: threading.Event, wait: Callable[[float], bool] | None = None) -> None:
        """:meth:`step` every ``retry_period`` until ``stop`` is set (blocking).

        Args:
            stop: ends the loop; the Lease is not released here (the owner releases it once it stopped acting).
            wait: ``wait(seconds) -> stop requested``; default ``stop.wait`` (tests inject a stepped one).
        """
        wait = wait or stop.wait
        while not stop.is_set():
            self.step()
            if wait(self.config.retry_period):
                return

    def start(self, stop: threading.Event, wait: Callable[[float], bool] | None = None) -> threading.Thread:
        """:meth:`run` in a daemon thread named ``leader-election``; returns the thread."""
        self._thread = threading.Thread(target=self.run, args=(stop, wait), name="leader-election", daemon=True)
        self._thread.start()
        return self._thread

    def _try_acquire_or_renew(self, now: float) -> bool:
        lease = self.cluster.get(r.LEASES, self.config.name, self.config.namespace)
        if lease is None:
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": self._spec(now, 0, True, {}),
            }
            try:
                self.cluster.create(r.LEASES, body)
            except AlreadyExistsError:
                return False
            self._observe(body["spec"], now)
            return True
        spec = lease.get("spec") or {}
        self._observe(spec, now)
        holder = spec.get("holderIdentity") or ""
        expired = now - self._observed_at >= float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        if holder and holder != self.identity and not expired:
            return False
        acquire = holder != self.identity
        new_spec = self._spec(now, int(spec.get("leaseTransitions") or 0), acquire, spec)
        try:
            updated = self.cluster.replace(r.LEASES, {**lease, "spec": new_spec})
        except ConflictError:
            return False
        self._observe(updated.get("spec") or new_spec, now)
        return True

    def _observe(self, spec: dict[str, Any], now: float) -> None:
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed = record
            self._observed_at = now

    def release(self) -> None:
        """Give the Lease up (graceful shutdown) if this replica holds it. Never raises."""
        if not self._leading:
            return
        self._leading = False
        try:
            lease = self.cluster.get(r.LEASES, self.config.name, self.config.namespace)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = {**(lease.get("spec") or {}), "holderIdentity": "", "leaseDurationSeconds": 1,
                    "renewTime": format_micro_time(self.clock())}
            self.cluster.replace(r.LEASES, {**lease, "spec": spec})
            log.info("released leader lease %s/%s", self.config.namespace, self.config.name)
        except KubeError as err:
            log.warning("could not release the leader lease: %s", err)
