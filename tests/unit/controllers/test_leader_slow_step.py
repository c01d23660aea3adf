"""The Lease is renewed by its own timer while a controller pass takes 15 s: the standby never takes over
while the leader still acts. Time is a fake clock; the election thread's timer is stepped by the test."""

from __future__ import annotations

import threading
from collections.abc import Callable

from nodewright.kube import resources as r
from nodewright.kube.leaderelection import LeaderElector, LeaseConfig
from nodewright.kube.memory import InMemoryCluster
from nodewright.runtime import Runtime
from nodewright.settings import Settings

from .fakes import FakeClock, FakeCloudProvider

SETTINGS = Settings(cluster_name="demo", aws_region="us-east-1", lease_duration=10.0, renew_deadline=7.0,
                    retry_period=2.0)
CONFIG = LeaseConfig(SETTINGS.leader_election_namespace, SETTINGS.leader_election_name, 10.0, 7.0, 2.0)


class SteppedTimer:
    """The election thread's ``wait``: it returns only when the test fires the timer (:meth:`fire`)."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.cond = threading.Condition()
        self.permits = 0
        self.waits = 0
        self.closed = False

    def __call__(self, _seconds: float) -> bool:
        with self.cond:
            self.waits += 1
            self.cond.notify_all()
            assert self.cond.wait_for(lambda: self.permits > 0 or self.closed, timeout=30)
            if self.permits:
                self.permits -= 1
            return self.closed or self.stop.is_set()

    def wait_idle(self, waits: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.waits >= waits, timeout=30), "election thread did not run"

    def fire(self) -> None:
        """One retry period elapsed: the election thread runs one attempt and comes back to wait."""
        with self.cond:
            target = self.waits + 1
            self.permits += 1
            self.cond.notify_all()
        self.wait_idle(target)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


def _run_slow_pass(fire_timer: bool) -> tuple[list[bool], list[bool], dict]:
    """Leader ``a`` runs one 15 s controller pass while standby ``b`` tries every second.

    Returns whether ``b`` led and whether ``a`` was still allowed to act, per simulated second, and the Lease.
    """
    clock = FakeClock()
    cluster = InMemoryCluster(clock)
    stop = threading.Event()
    timer = SteppedTimer(stop)
    standby = LeaderElector(cluster, "b", CONFIG, clock)
    standby_led: list[bool] = []
    leader_acts: list[bool] = []
    runtime: Runtime

    def slow_pass(keep_going: Callable[[], bool] | None = None) -> None:
        assert keep_going is not None
        for second in range(1, 16):
            clock.advance(1.0)
            if fire_timer and second % 2 == 0:
                timer.fire()  # the election thread's 2 s timer, independent of this pass
            standby.step()
            standby_led.append(standby.is_leader)
            leader_acts.append(keep_going())
        stop.set()

    def main_loop_pause(_seconds: float) -> None:
        if stop.is_set():
            timer.close()
            return
        timer.wait_idle(1)  # the election thread made its first attempt (and acquired the Lease)

    runtime = Runtime(cluster, FakeCloudProvider(clock), SETTINGS, clock=clock, identity="a", host="127.0.0.1",
                      stop=stop, sleep=main_loop_pause, election_wait=timer)
    runtime.manager.step = slow_pass  # type: ignore[method-assign]
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    return standby_led, leader_acts, cluster.get(r.LEASES, CONFIG.name, CONFIG.namespace)


def test_lease_renewed_by_its_own_timer_during_a_15s_pass() -> None:
    standby_led, leader_acts, lease = _run_slow_pass(fire_timer=True)
    assert len(standby_led) == 15
    assert not any(standby_led), "the standby took over while the leader was still acting"
    assert all(leader_acts)
    assert lease["metadata"]["name"] == "nodewright-leader-election"
    assert lease["spec"]["holderIdentity"] == ""  # released on the way out: the standby may take it at once


def test_without_renewals_the_leader_stops_acting_before_the_standby_takes_over() -> None:
    # Negative control: the same pass with the election timer stalled (what a renewal done only between
    # passes amounts to). The leader stops acting at its 7 s renew deadline; the standby leads after the lease.
    standby_led, leader_acts, _ = _run_slow_pass(fire_timer=False)
    first_standby = standby_led.index(True) + 1
    last_act = len(leader_acts) - leader_acts[::-1].index(True)
    assert last_act == 6 and first_standby == 11  # standby first saw the record at 1 s, +10 s lease
    assert last_act < first_standby
