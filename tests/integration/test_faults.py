"""The fault campaign (issue 32), short version: a few seeded runs of :func:`.faults.run_campaign`, each asserting
every invariant of :data:`.faults.INVARIANTS`. ``scripts/fault_campaign.py`` runs the long version (more seeds)
through this same test and prints the table (``NODEWRIGHT_FAULT_RUNS``, ``NODEWRIGHT_FAULT_REPORT``).

Also here: one cut connection gives one "list/watch failed" line, not one per informer (item 6)."""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

import pytest

from nodewright.kube import resources as r
from nodewright.logging import LIMITER

from .faults import INVARIANTS, Crash, run_campaign
from .harness import Replica, apply_pool, pending_pod, wait_for

RUNS = int(os.environ.get("NODEWRIGHT_FAULT_RUNS", "3"))
FIRST_SEED = int(os.environ.get("NODEWRIGHT_FAULT_FIRST_SEED", "1"))
REPORT = os.environ.get("NODEWRIGHT_FAULT_REPORT", "")


@pytest.fixture
def killable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed leader's thread ends with :class:`Crash`: that is the test's kill -9, not a controller traceback."""
    default = threading.excepthook

    def hook(args: Any) -> None:
        if args.exc_type is not Crash:
            default(args)

    monkeypatch.setattr(threading, "excepthook", hook)


@pytest.mark.timeout(330)
@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + RUNS))
def test_fault_campaign_run_keeps_every_invariant(seed, kube, account, core, custom, replicas, killable,
                                                  caplog, monkeypatch) -> None:
    caplog.set_level(logging.INFO, logger="nodewright")
    if os.environ.get("NODEWRIGHT_FAULT_WITHOUT_RECOVERY"):  # the baseline: no queue rebuild, no taint cleanup
        from nodewright.controllers import provisioning
        from nodewright.controllers.common import has_disrupted_taint
        from nodewright.controllers.disruption import DisruptionController
        from nodewright.kube.objects import is_deleting

        monkeypatch.setattr(DisruptionController, "_recover", lambda self, state, now: None)
        monkeypatch.setattr(provisioning, "leaving", lambda node, state: is_deleting(node) or has_disrupted_taint(node))
    result = run_campaign(seed, kube, account, core, custom, caplog.records, replicas)
    if REPORT:
        with open(REPORT, "a", encoding="utf-8") as out:
            out.write(json.dumps({"seed": seed, "injected": dict(result.injected), "crashes": result.crashes,
                                  "violations": result.violations, "invariants": len(INVARIANTS),
                                  "recovery_seconds": round(result.recovery_seconds, 2),
                                  "launches": result.launches, "max_cpu": result.max_cpu,
                                  "found": dict(result.found),
                                  "streams_cut": result.streams_cut}) + "\n")
    if os.environ.get("NODEWRIGHT_FAULT_DEBUG"):
        for rec in caplog.records:
            if rec.name.startswith("nodewright.controllers") or rec.levelno >= logging.WARNING:
                print(f"{rec.levelname} {rec.getMessage()}")
        print(json.dumps({"requests": kube.emulator.calls.get(("patch", "nodes"))}, default=str))
    assert sum(result.injected.values()) > 0
    assert result.violations == []


def test_one_cut_connection_logs_one_list_watch_line_with_a_count(kube, account, core, custom, replicas,
                                                                  caplog, monkeypatch) -> None:
    """Issue 32 item 6: every informer's watch fails at once (~15 kinds); one line per cause per interval."""
    caplog.set_level(logging.INFO, logger="nodewright")
    LIMITER.reset()
    # The limiter's interval never ends here: however slowly a loaded machine lets the informers fail, they all
    # fail within it (the verdict must not depend on the machine's speed).
    monkeypatch.setattr(LIMITER, "clock", lambda: 0.0)
    replica = Replica(kube, account, "a").start()
    replicas.append(replica)
    apply_pool(custom)
    informers = replica.runtime.cluster.informers  # type: ignore[attr-defined]
    # Bounds, not speed targets (a loaded 2-core machine starts ~20 informers slowly).
    wait_for(lambda: kube.emulator.live_watches() >= len(informers), 60, "every informer's watch")
    assert kube.break_watches() >= len(informers)
    wait_for(lambda: sum(i.stats["errors"] for i in informers.values()) >= len(informers), 60,
             "every informer to fail once")
    pending_pod(core, "web-0")
    wait_for(lambda: kube.emulator.snapshot("nodeclaims"), 60, "a NodeClaim once the watches resume")
    lines = [rec.getMessage() for rec in caplog.records if rec.getMessage().startswith("list/watch of ")]
    assert len(informers) >= 9 and len(lines) == 1, lines
    # Every broken watch hands its connection back at once: a pool smaller than the informers said
    # "Connection pool is full, discarding connection" for each one over its size (urllib3, 7-8 lines per cut).
    assert [rec.getMessage() for rec in caplog.records if "Connection pool is full" in rec.getMessage()] == []
    assert LIMITER.held_back("list/watch failed 0") == len(informers) - 1  # counted, said with the next line
    assert r.PODS in informers
