"""``karpenter.sh/do-not-evict`` on a live pod (issue #26 item 4): Karpenter v1 ignores the v1alpha5 annotation;
nodewright keeps honouring it like ``karpenter.sh/do-not-disrupt`` (the safer reading, documented in
docs/karpenter-compatibility.md) and logs one warning line per pod, the first pass it sees it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from nodewright.controllers.common import Context
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.termination import Terminator
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics

from .test_controller import NODEPOOL, Clock, Cloud, add_node

WARNING = ('pod default/n0-p0 has karpenter.sh/do-not-evict: Karpenter v1 ignores it; nodewright honours it as '
           'karpenter.sh/do-not-disrupt (its node is not disrupted voluntarily); annotate the pod '
           'karpenter.sh/do-not-disrupt: "true" instead')


@pytest.fixture
def env() -> tuple[InMemoryCluster, DisruptionController]:
    clock, cloud = Clock(), Cloud()
    cluster = InMemoryCluster(clock, seed=3)
    cluster.create(r.NODEPOOLS, NODEPOOL)
    ctx = Context(cluster, cloud, clock, Metrics(), "demo")  # type: ignore[arg-type]
    add_node(cluster, "n0", "c.medium", [500], pod_annotations={"karpenter.sh/do-not-evict": "true"})
    for i in (1, 2):
        add_node(cluster, f"n{i}", "c.medium", [500])
    return cluster, DisruptionController(ctx, Terminator(ctx))


def test_do_not_evict_is_honoured_and_warned_once(env: Any, caplog: pytest.LogCaptureFixture) -> None:
    cluster, controller = env
    with caplog.at_level(logging.WARNING, logger="nodewright"):
        controller.reconcile()
        controller.reconcile()
    assert [r.getMessage() for r in caplog.records if "do-not-evict" in r.getMessage()] == [WARNING]
    assert controller.command is not None
    assert "n0" not in [c.name for c in controller.command.decision.candidates]
