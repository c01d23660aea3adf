"""Fixtures shared by the scheduling tests."""

from __future__ import annotations

import pytest

from nodewright.scheduling import scheduler as scheduler_module


@pytest.fixture
def greedy_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the greedy passes ``schedule`` runs (a stage appended to :data:`~.scheduler.GREEDY`)."""
    runs: list[int] = []
    monkeypatch.setattr(scheduler_module, "GREEDY", (*scheduler_module.GREEDY, lambda _s: runs.append(1)))
    return runs
