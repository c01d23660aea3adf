"""Crash-safe disruption (issue 32): a restart at any step of a command, or a write the API server refuses, ends
with the command completed or fully rolled back; stale disrupted taints are removed; nothing escapes as a
traceback. The restart is a new :class:`DisruptionController` on the same in-memory cluster (memory lost)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.controllers.common import Context
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.orchestration import COMMAND_ANNOTATION, REPLACEMENT_ANNOTATION, leaving
from nodewright.controllers.provisioning import Provisioner
from nodewright.controllers.termination import Terminator, has_disrupted_taint
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import annotations_of, is_deleting, name_of
from nodewright.logging import LIMITER
from nodewright.metrics import Metrics
from nodewright.state.cluster import snapshot

from .test_controller import NODEPOOL, Clock, Cloud, add_node, set_ready


class Crash(BaseException):
    """kill -9: nothing after the failing call runs (BaseException: no controller handler catches it)."""


class FaultyCluster:
    """The in-memory cluster with a fault rule on writes: ``rule(verb, plural, name)`` returns an exception to
    raise before the write happens, or None."""

    def __init__(self, inner: InMemoryCluster) -> None:
        self.inner = inner
        self.rule: Callable[[str, str, str], BaseException | None] = lambda verb, plural, name: None
        #: Like ``rule``, raised after the write went through (its reply was lost: a timeout, a 5xx after commit).
        self.lost: Callable[[str, str, str], BaseException | None] = lambda verb, plural, name: None
        self.writes: list[tuple[str, str, str]] = []

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def _check(self, verb: str, kind: r.ResourceKind, name: str) -> None:
        err = self.rule(verb, kind.plural, name)
        if err is not None:
            raise err
        self.writes.append((verb, kind.plural, name))

    def create(self, kind: r.ResourceKind, obj: Any) -> Any:
        self._check("create", kind, (obj.get("metadata") or {}).get("name") or "")
        created = self.inner.create(kind, obj)
        err = self.lost("create", kind.plural, name_of(created))
        if err is not None:
            raise err
        return created

    def patch(self, kind: r.ResourceKind, name: str, patch: Any, namespace: str | None = None) -> Any:
        self._check("patch", kind, name)
        return self.inner.patch(kind, name, patch, namespace)

    def patch_status(self, kind: r.ResourceKind, name: str, status: Any, namespace: str | None = None) -> Any:
        self._check("patch_status", kind, name)
        return self.inner.patch_status(kind, name, status, namespace)

    def delete(self, kind: r.ResourceKind, name: str, namespace: str | None = None) -> None:
        self._check("delete", kind, name)
        self.inner.delete(kind, name, namespace)


@pytest.fixture
def world() -> tuple[FaultyCluster, Clock, Callable[[], DisruptionController]]:
    clock, cloud = Clock(), Cloud()
    inner = InMemoryCluster(clock, seed=3)
    inner.create(r.NODEPOOLS, NODEPOOL)
    cluster = FaultyCluster(inner)
    for i in range(3):
        add_node(inner, f"n{i}", "c.medium", [500])

    def controller() -> DisruptionController:
        ctx = Context(cluster, cloud, clock, Metrics(), "demo")  # type: ignore[arg-type]
        return DisruptionController(ctx, Terminator(ctx))

    LIMITER.reset()
    return cluster, clock, controller


def tainted(cluster: FaultyCluster) -> list[str]:
    return sorted(name_of(n) for n in cluster.inner.list(r.NODES) if has_disrupted_taint(n))


def recorded(cluster: FaultyCluster) -> list[str]:
    return sorted(name_of(c) for c in cluster.inner.list(r.NODECLAIMS) if COMMAND_ANNOTATION in annotations_of(c))


def replacements(cluster: FaultyCluster) -> list[dict[str, Any]]:
    return [c for c in cluster.inner.list(r.NODECLAIMS) if REPLACEMENT_ANNOTATION in annotations_of(c)]


def deleting(cluster: FaultyCluster) -> list[str]:
    return sorted(name_of(c) for c in cluster.inner.list(r.NODECLAIMS) if is_deleting(c))


def decide_and_validate(controller: DisruptionController, clock: Clock) -> None:
    """Decide (3 c.medium into 1 c.small) and reach the pass that executes, 15 s later."""
    assert controller.reconcile() is None and controller.command is not None
    clock.now += 15


def launched(controller: Callable[[], DisruptionController], clock: Clock) -> tuple[DisruptionController, Any]:
    """A controller whose command launched its one replacement (waiting for it to be Ready)."""
    ctl = controller()
    decide_and_validate(ctl, clock)
    ctl.reconcile()
    return ctl, ctl.ctx.cluster.inner.get(r.NODECLAIMS, ctl.command.replacements[0])


def crash_on(cluster: FaultyCluster, verb: str, plural: str, nth: int = 1) -> None:
    seen = [0]

    def rule(v: str, p: str, _name: str) -> BaseException | None:
        if (v, p) == (verb, plural):
            seen[0] += 1
            if seen[0] == nth:
                cluster.rule = lambda *_: None  # the process is gone: later writes are the new leader's
                return Crash()
        return None

    cluster.rule = rule


def test_restart_while_tainting_rolls_back(world: Any) -> None:
    cluster, clock, controller = world
    first = controller()
    decide_and_validate(first, clock)
    crash_on(cluster, "patch", "nodes", nth=2)  # the second candidate's taint: n0 tainted, n1/n2 not
    with pytest.raises(Crash):
        first.reconcile()
    assert tainted(cluster) == ["n0"] and recorded(cluster) == ["n0-claim", "n1-claim", "n2-claim"]
    second = controller()
    assert second.reconcile() is None
    assert tainted(cluster) == [] and recorded(cluster) == [] and replacements(cluster) == []
    assert deleting(cluster) == []
    assert second.command is None or second.command.phase == "validating"  # a new decision, validated 15 s on
    assert [e["reason"] for e in cluster.inner.events if e["reason"] == "DisruptionFailed"] == ["DisruptionFailed"]


def test_restart_while_the_replacement_launches_rolls_back(world: Any) -> None:
    cluster, clock, controller = world
    first = controller()
    decide_and_validate(first, clock)
    crash_on(cluster, "create", "nodeclaims")
    with pytest.raises(Crash):
        first.reconcile()
    assert tainted(cluster) == ["n0", "n1", "n2"] and replacements(cluster) == []
    # Meanwhile the provisioner counts their pods as leaving: a command holds the taint.
    state = snapshot(cluster.inner)
    assert all(leaving(n, state) for n in state.nodes.values())
    controller().reconcile()
    assert tainted(cluster) == [] and recorded(cluster) == [] and deleting(cluster) == []


def test_restart_with_the_replacement_launched_resumes_waits_ready_and_deletes(world: Any) -> None:
    cluster, clock, controller = world
    first, replacement = launched(controller, clock)
    assert replacements(cluster) == [replacement]
    assert first.command is not None and first.command.phase == "waiting"
    second = controller()  # the first one is gone
    clock.now += 5
    assert second.reconcile() is None
    assert second.command is not None and second.command.replacements == [name_of(replacement)]
    assert tainted(cluster) == ["n0", "n1", "n2"] and deleting(cluster) == []
    set_ready(cluster.inner, name_of(replacement))
    second.reconcile()
    assert deleting(cluster) == ["n0-claim", "n1-claim", "n2-claim"] and second.command is None
    assert second.ctx.metrics.value("karpenter_voluntary_disruption_decisions_total",
                                    {"decision": "replace", "reason": "underutilized",
                                     "consolidation_type": "multi"}) == 1


def test_restart_with_the_replacement_launched_rolls_back_after_the_replacement_timeout(world: Any) -> None:
    cluster, clock, controller = world
    first, replacement = launched(controller, clock)
    assert replacements(cluster) == [replacement]
    second = controller()
    second.reconcile()
    clock.now += 601  # replacement_timeout counts from the replacement's creation, not from the restart
    second.reconcile()
    assert tainted(cluster) == [] and recorded(cluster) == []
    assert deleting(cluster) == [name_of(replacement)]  # the replacement that never became Ready, not a candidate


def test_restart_while_deleting_the_candidates_completes(world: Any) -> None:
    cluster, clock, controller = world
    first, replacement = launched(controller, clock)
    assert replacements(cluster) == [replacement]
    set_ready(cluster.inner, name_of(replacement))
    crash_on(cluster, "delete", "nodeclaims", nth=2)  # n0-claim deleted, then the process dies
    with pytest.raises(Crash):
        first.reconcile()
    assert deleting(cluster) == ["n0-claim"]
    controller().reconcile()
    assert deleting(cluster) == ["n0-claim", "n1-claim", "n2-claim"]
    assert tainted(cluster) == ["n0", "n1", "n2"]  # the termination path drains them


def test_stale_taint_without_a_command_is_removed_and_its_pods_are_not_leaving(world: Any) -> None:
    cluster, clock, controller = world
    cluster.inner.patch(r.NODES, "n1", {"spec": {"taints": [{"key": L.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}]}})
    cluster.inner.patch_status(r.NODECLAIMS, "n1-claim", {"conditions": [
        {"type": "Ready", "status": "True"},
        {"type": L.CONDITION_DISRUPTION_REASON, "status": "True", "reason": "Underutilized"}]})
    state = snapshot(cluster.inner)
    assert not leaving(state.nodes["n1"], state)
    provisioner = Provisioner(Context(cluster.inner, Cloud(), clock, Metrics(), "demo"))  # type: ignore[arg-type]
    assert provisioner.pending_pods(state, clock.now) == []  # nothing launched for the pod of n1
    cluster.inner.patch(r.NODECLAIMS, "n1-claim", {"metadata": {"annotations": {COMMAND_ANNOTATION: "{}"}}})
    state = snapshot(cluster.inner)  # an annotation that is not a command does not hold the taint either
    assert provisioner.pending_pods(state, clock.now) == []
    controller().reconcile()
    assert tainted(cluster) == []
    conditions = cluster.inner.get(r.NODECLAIMS, "n1-claim")["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Ready"]


@pytest.mark.parametrize("status", [409, 429, 500, 503])
def test_refused_taint_rolls_back_the_tainted_candidates_in_one_line_and_retries_after_the_backoff(
        world: Any, caplog: pytest.LogCaptureFixture, status: int) -> None:
    caplog.set_level(logging.INFO, logger="nodewright.controllers")
    cluster, clock, controller = world
    ctl = controller()
    decide_and_validate(ctl, clock)
    cluster.rule = lambda verb, plural, name: KubeError("refused", status) if (verb, plural, name) == (
        "patch", "nodes", "n1") and has_disrupted_taint(cluster.inner.get(r.NODES, "n0")) else None
    assert ctl.reconcile() is None  # nothing escapes
    assert tainted(cluster) == [] and recorded(cluster) == [] and ctl.command is None
    failed = [rec for rec in caplog.records if "failed" in rec.getMessage() and rec.levelno == logging.WARNING]
    assert len(failed) == 1 and not any(rec.exc_info for rec in caplog.records)
    assert "executing failed: refused (retrying in 1s)" in failed[0].getMessage()
    events = [e for e in cluster.inner.events if e["reason"] == "DisruptionFailed"]
    assert events[0]["type"] == "Warning" and f"({status})" in events[0]["message"]
    cluster.rule = lambda *_: None
    clock.now += 10
    ctl.reconcile()
    clock.now += 15
    ctl.reconcile()  # decided and executed again
    assert tainted(cluster) == ["n0", "n1", "n2"] and len(replacements(cluster)) == 1


def test_refused_untaint_keeps_the_record_and_rolls_back_after_the_backoff(world: Any) -> None:
    cluster, clock, controller = world
    ctl = controller()
    decide_and_validate(ctl, clock)
    cluster.rule = lambda verb, plural, name: KubeError("boom", 500) if (verb, plural) == ("create", "nodeclaims") \
        or (verb, plural, name) == ("patch", "nodes", "n2") and has_disrupted_taint(cluster.inner.get(r.NODES, "n2")) \
        else None
    ctl.reconcile()  # the replacement is refused, then the roll-back's untaint of n2
    assert tainted(cluster) == ["n2"] and recorded(cluster) == ["n0-claim", "n1-claim", "n2-claim"]
    state = snapshot(cluster.inner)
    assert leaving(state.nodes["n2"], state)  # still held by its recorded command
    cluster.rule = lambda *_: None
    ctl.reconcile()  # backing off (1 s): nothing
    assert tainted(cluster) == ["n2"]
    clock.now += 2
    ctl.reconcile()
    assert tainted(cluster) == [] and recorded(cluster) == [] and deleting(cluster) == []


def test_refused_candidate_delete_completes_after_the_backoff(world: Any) -> None:
    cluster, clock, controller = world
    ctl, replacement = launched(controller, clock)
    set_ready(cluster.inner, name_of(replacement))
    cluster.rule = lambda verb, plural, name: KubeError("busy", 503) if (verb, plural, name) == (
        "delete", "nodeclaims", "n1-claim") else None
    assert ctl.reconcile() is None
    assert deleting(cluster) == ["n0-claim"]
    cluster.rule = lambda *_: None
    clock.now += 2
    ctl.reconcile()
    assert deleting(cluster) == ["n0-claim", "n1-claim", "n2-claim"]


def test_restart_while_recording_before_any_taint_rolls_back(world: Any) -> None:
    """Killed between the record writes: one candidate recorded, nothing tainted yet."""
    cluster, clock, controller = world
    first = controller()
    decide_and_validate(first, clock)
    crash_on(cluster, "patch", "nodeclaims", nth=2)
    with pytest.raises(Crash):
        first.reconcile()
    assert recorded(cluster) == ["n0-claim"] and tainted(cluster) == []
    controller().reconcile()
    assert recorded(cluster) == [] and tainted(cluster) == [] and replacements(cluster) == []
    assert deleting(cluster) == []


def test_restart_with_the_replacement_ready_before_any_delete_completes(world: Any) -> None:
    """Killed when the replacement was Ready, at the first candidate's delete (before it was written)."""
    cluster, clock, controller = world
    first, replacement = launched(controller, clock)
    set_ready(cluster.inner, name_of(replacement))
    crash_on(cluster, "delete", "nodeclaims", nth=1)
    with pytest.raises(Crash):
        first.reconcile()
    assert deleting(cluster) == [] and tainted(cluster) == ["n0", "n1", "n2"]
    second = controller()
    assert second.reconcile() is None
    assert deleting(cluster) == ["n0-claim", "n1-claim", "n2-claim"] and second.command is None
    assert not is_deleting(cluster.inner.get(r.NODECLAIMS, name_of(replacement)))


@pytest.mark.parametrize(("verb", "plural", "nth", "ends"), [
    ("patch", "nodes", 2, "rolled back"),        # tainting: n0 tainted, then killed
    ("delete", "nodeclaims", 1, "rolled back"),  # every candidate tainted, none deleted yet
    ("delete", "nodeclaims", 2, "completed"),    # deleting: e0 deleted, then killed
])
def test_restart_of_an_emptiness_command_at_each_step(verb: str, plural: str, nth: int, ends: str) -> None:
    """A command without replacements (two empty nodes deleted): tainted -> deleting. Before any delete a new
    leader rolls it back (the nodes stay, untainted, for a fresh decision); once deleting has begun it deletes
    the rest."""
    clock, cloud = Clock(), Cloud()
    inner = InMemoryCluster(clock, seed=3)
    inner.create(r.NODEPOOLS, NODEPOOL)
    cluster = FaultyCluster(inner)
    for i in range(2):
        add_node(inner, f"e{i}", "c.medium", [])
    LIMITER.reset()

    def controller() -> DisruptionController:
        ctx = Context(cluster, cloud, clock, Metrics(), "demo")  # type: ignore[arg-type]
        return DisruptionController(ctx, Terminator(ctx))

    first = controller()
    decide_and_validate(first, clock)
    assert first.command is not None and first.command.decision is not None
    assert not first.command.decision.replacements
    crash_on(cluster, verb, plural, nth=nth)
    with pytest.raises(Crash):
        first.reconcile()
    controller().reconcile()
    if ends == "rolled back":
        assert tainted(cluster) == [] and recorded(cluster) == [] and deleting(cluster) == []
    else:
        assert deleting(cluster) == ["e0-claim", "e1-claim"] and tainted(cluster) == ["e0", "e1"]


def test_a_replacement_created_though_its_reply_was_lost_is_deleted_by_the_roll_back(world: Any) -> None:
    """The API server wrote the replacement, then its answer was an error (a 500 after the commit, a timeout):
    the roll-back deletes it by the name the record planned, so no extra node launches for a command undone."""
    cluster, clock, controller = world
    ctl = controller()
    decide_and_validate(ctl, clock)
    cluster.lost = lambda verb, plural, name: KubeError("etcdserver: request timed out", 500) if (
        verb, plural) == ("create", "nodeclaims") else None
    assert ctl.reconcile() is None
    cluster.lost = lambda *_: None
    assert tainted(cluster) == [] and recorded(cluster) == []
    assert len(replacements(cluster)) == 1 and all(is_deleting(c) for c in replacements(cluster))
