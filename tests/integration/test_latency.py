"""Pending pod -> NodeClaim created, end to end, with Karpenter's default batch window (issue 19).

A controller replica runs with ``BATCH_IDLE_DURATION=1s`` / ``BATCH_MAX_DURATION=10s`` (Karpenter's defaults,
not the suite's fast 0.1 s) against the emulator and moto. The test times, from the client's side, the creation
of pending pods to the first NodeClaim the controller creates for them, for a first batch (an empty scheduling
cache) and a second one (the NodePool's compiled instance types reused), and reads the controller's own
``karpenter_scheduler_scheduling_duration_seconds`` for each. The numbers are reported in the terminal summary
(:func:`.harness.record_timing`), never asserted: a busy machine makes them slower, not wrong. What is asserted
is the outcome: one NodeClaim per batch, for the expected instance type.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from nodewright.api import labels as L

from .awsmoto import Account
from .emulator import EmulatorThread
from .harness import Replica, apply_pool, pending_pod, record_timing, wait_for

#: Karpenter's defaults (BATCH_IDLE_DURATION, BATCH_MAX_DURATION), seconds.
IDLE, MAXIMUM = 1.0, 10.0


@pytest.fixture
def replica(kube: EmulatorThread, account: Account) -> Iterator[Replica]:
    started = Replica(kube, account, "a", batch_idle_duration=IDLE, batch_max_duration=MAXIMUM).start()
    yield started
    if started.thread.is_alive():
        started.stop()


def _claims(kube: EmulatorThread) -> list[dict[str, Any]]:
    return kube.emulator.snapshot("nodeclaims")


def _scheduling_seconds(replica: Replica) -> tuple[float, float]:
    labels = {"controller": "provisioner"}
    return (replica.metric("karpenter_scheduler_scheduling_duration_seconds_sum", labels),
            replica.metric("karpenter_scheduler_scheduling_duration_seconds_count", labels))


def _batch(kube: EmulatorThread, core: k8s.CoreV1Api, replica: Replica, names: list[str], cpu: str,
           label: str) -> dict[str, Any]:
    """Create ``names`` pending, wait for the next NodeClaim, record the latency; returns the NodeClaim."""
    before = {c["metadata"]["name"] for c in _claims(kube)}
    spent, runs = _scheduling_seconds(replica)
    start = time.monotonic()
    for name in names:
        pending_pod(core, name, cpu=cpu)
    claim = wait_for(lambda: next((c for c in _claims(kube) if c["metadata"]["name"] not in before), None),
                     MAXIMUM + 20, f"a NodeClaim for {names}", interval=0.01)
    latency = time.monotonic() - start
    spent_after, runs_after = _scheduling_seconds(replica)
    record_timing(f"pending pod -> NodeClaim created, {label} ({len(names)} pod(s), batch window "
                  f"{IDLE:g} s idle / {MAXIMUM:g} s max)", latency)
    if runs_after > runs:
        record_timing(f"  of which scheduling ({label}, controller's histogram, mean of {runs_after - runs:g} run(s))",
                      (spent_after - spent) / (runs_after - runs))
    return claim


@pytest.mark.timeout(90)
def test_pending_pod_to_nodeclaim_latency_with_karpenters_batch_window(kube, account, replica, core,
                                                                       custom) -> None:
    apply_pool(custom)
    wait_for(lambda: replica.runtime.ready(), 10, "the replica ready")
    first = _batch(kube, core, replica, ["web-0", "web-1"], "500m", "first batch, cold cache")
    assert first["metadata"]["labels"][L.NODEPOOL] == "general"
    assert first["spec"]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi", "pods": "2"}
    # 3 vCPU fits neither c5.large nor m5.large, nor the first NodeClaim's room: a second NodeClaim.
    second = _batch(kube, core, replica, ["big-0"], "3", "next batch, warm cache")
    assert second["spec"]["resources"]["requests"] == {"cpu": "3", "memory": "512Mi", "pods": "1"}
    assert len(_claims(kube)) == 2
