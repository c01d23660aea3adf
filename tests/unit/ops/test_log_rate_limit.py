"""Repeated log lines are rate-limited per cause (issue 32 item 6), and an API error no controller handled leaves
the manager as one line, not a traceback (item 2)."""

from __future__ import annotations

import logging

import pytest

from nodewright.controllers.common import Context
from nodewright.controllers.manager import ControllerManager
from nodewright.kube.errors import KubeError
from nodewright.kube.memory import InMemoryCluster
from nodewright.logging import LIMITER, RateLimiter, warn_limited

log = logging.getLogger("nodewright.test")


def test_one_line_per_cause_per_interval_then_the_count(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nodewright.test")
    now = [100.0]
    limiter = RateLimiter(interval=30.0, clock=lambda: now[0])
    for kind in ("pods", "nodes", "nodeclaims", "leases"):  # one cut connection: every informer fails at once
        warn_limited(log, "list/watch failed 0", "list/watch of %s failed", kind, limiter=limiter)
    warn_limited(log, "leader election 503", "lease renewal failed", limiter=limiter)  # another cause: written
    now[0] += 29.9
    assert not warn_limited(log, "list/watch failed 0", "list/watch of %s failed", "pods", limiter=limiter)
    now[0] += 0.1
    assert warn_limited(log, "list/watch failed 0", "list/watch of %s failed", "nodes", limiter=limiter)
    lines = [(rec.getMessage(), getattr(rec, "repeated", 0)) for rec in caplog.records]
    assert lines == [("list/watch of pods failed", 0), ("lease renewal failed", 0),
                     ("list/watch of nodes failed (4 similar in the last 30s)", 4)]
    assert limiter.held_back("list/watch failed 0") == 0


def test_an_unhandled_api_error_is_one_line_per_interval_without_a_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nodewright.controllers")
    LIMITER.reset()
    clock = lambda: 0.0  # noqa: E731
    manager = ControllerManager(Context(InMemoryCluster(clock), None, clock))  # type: ignore[arg-type]

    def refused(_state: object) -> None:
        raise KubeError("HTTP 503 ServiceUnavailable: etcdserver: leader changed", 503)

    manager.gc.reconcile = refused  # type: ignore[method-assign]
    for _ in range(10):  # an API outage: every pass fails the same way
        manager.step()
    lines = [rec for rec in caplog.records if "garbagecollection" in rec.getMessage()]
    assert [rec.getMessage() for rec in lines] == [
        "controller garbagecollection: KubeError: HTTP 503 ServiceUnavailable: etcdserver: leader changed "
        "(retrying next pass)"]
    assert lines[0].levelno == logging.WARNING and not any(rec.exc_info for rec in caplog.records)
    # Still a failed pass for controller-runtime's metrics (Karpenter's controllers dashboard reads them).
    metrics = manager.ctx.metrics
    assert metrics.value("controller_runtime_reconcile_total",
                         {"controller": "garbagecollection", "result": "error"}) == 10
    assert metrics.value("controller_runtime_reconcile_errors_total", {"controller": "garbagecollection"}) == 10


def test_an_api_outage_is_one_lease_warning_per_interval(caplog: pytest.LogCaptureFixture,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 6: every retry of the Lease during an outage (10 per second at a 0.1 s retry period) used to print
    one warning; now the first, then the count."""
    from nodewright.kube.leaderelection import LeaderElector, LeaseConfig

    class Down(InMemoryCluster):
        def get(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
            raise KubeError("HTTP 503 ServiceUnavailable: apiserver is shutting down", 503)

    caplog.set_level(logging.INFO, logger="nodewright.kube")
    LIMITER.reset()
    now = [0.0]
    monkeypatch.setattr(LIMITER, "clock", lambda: now[0])  # the limiter on the test's clock too
    elector = LeaderElector(Down(lambda: now[0]), "a", LeaseConfig(retry_period=0.1), lambda: now[0])
    for _ in range(50):  # 5 s of retries
        assert elector.step() is False
        now[0] += 0.1
    lines = [rec.getMessage() for rec in caplog.records if rec.getMessage().startswith("leader election")]
    assert lines == ["leader election: lease kube-system/nodewright-leader-election: "
                     "HTTP 503 ServiceUnavailable: apiserver is shutting down"]
    assert LIMITER.held_back("leader election 503") == 49
    now[0] += 30.0
    elector.step()
    assert caplog.records[-1].getMessage().endswith("(49 similar in the last 30s)")
