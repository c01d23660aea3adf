"""A malformed ``nodewright.io/*`` NodePool annotation never loses the pool: the provisioner keeps launching for
it at full packing, and the NodePool status says what is wrong (ValidationSucceeded=False, an Event)."""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.controllers.nodepool_status import NodePoolStatusController
from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.kube import resources as r
from nodewright.kube.objects import condition

from .conftest import pending_pod

TU = "nodewright.io/target-utilization"
WANT = 'want a number in (0, 1] like "0.8", or a percentage in (0%, 100%] like "80%"'


def _annotate(cluster: Any, value: str | None) -> None:
    cluster.patch(r.NODEPOOLS, "general", {"metadata": {"annotations": {TU: value}}})


def _launch(ctx: Any, cluster: Any, clock: Any) -> list[str]:
    """Instance-type candidates of the one NodeClaim the real scheduler launches for three 500m/512Mi pods."""
    for i in range(3):
        cluster.create(r.PODS, pending_pod(f"web-{i}"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0))
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    (claim,) = cluster.list(r.NODECLAIMS)
    return next(q["values"] for q in claim["spec"]["requirements"] if q["key"] == L.INSTANCE_TYPE)


@pytest.mark.parametrize("value", ["0", "1.5", "abc", "", "120%"])
def test_malformed_target_still_provisions_at_full_packing(ctx, cluster, clock, value: str) -> None:
    _annotate(cluster, value)
    assert _launch(ctx, cluster, clock) == ["c5.large", "m5.large", "m5.xlarge"]  # as without the annotation


def test_valid_target_sizes_the_node_up(ctx, cluster, clock) -> None:
    _annotate(cluster, "50%")
    # 1500m of pods may use only half of allocatable: c5.large/m5.large (1930m) are too small.
    assert _launch(ctx, cluster, clock) == ["m5.xlarge"]


def test_status_condition_event_and_target(ctx, cluster, clock) -> None:
    status = NodePoolStatusController(ctx)
    _annotate(cluster, "120%")
    status.reconcile(force=True)
    pool = cluster.get(r.NODEPOOLS, "general")
    valid = condition(pool, L.CONDITION_VALIDATION_SUCCEEDED)
    message = f'metadata.annotations[{TU}]: "120%" is not accepted; {WANT}'
    assert (valid["status"], valid["reason"], valid["message"]) == ("False", "InvalidAnnotation", message)
    assert condition(pool, L.CONDITION_READY)["status"] == "True"  # the pool keeps working
    assert pool["status"]["targetUtilization"] == "1"
    events = [e for e in cluster.events if e["reason"] == "InvalidAnnotation"]
    assert [(e["type"], e["kind"], e["name"], e["message"]) for e in events] == [
        ("Warning", "NodePool", "general",
         f"{message}; the NodePool keeps provisioning with the default for that annotation")]
    clock.advance(30)
    status.reconcile(force=True)  # same problem: no second Event
    assert len([e for e in cluster.events if e["reason"] == "InvalidAnnotation"]) == 1
    _annotate(cluster, "0.75")
    status.reconcile(force=True)
    pool = cluster.get(r.NODEPOOLS, "general")
    valid = condition(pool, L.CONDITION_VALIDATION_SUCCEEDED)
    assert (valid["status"], valid["reason"], valid["message"]) == ("True", "ValidationSucceeded", "")
    assert pool["status"]["targetUtilization"] == "0.75"


def test_unknown_key_is_reported_too(ctx, cluster, clock) -> None:
    cluster.patch(r.NODEPOOLS, "general", {"metadata": {"annotations": {"nodewright.io/target-utilisation": "0.8"}}})
    NodePoolStatusController(ctx).reconcile(force=True)
    valid = condition(cluster.get(r.NODEPOOLS, "general"), L.CONDITION_VALIDATION_SUCCEEDED)
    assert valid["reason"] == "InvalidAnnotation"
    assert valid["message"].startswith("metadata.annotations[nodewright.io/target-utilisation]: unknown nodewright.io")
