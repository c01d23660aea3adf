"""Nomination (issue 25): the plan published as ``status.nominatedNodeName``, through the controller manager.

Every test drives :class:`ControllerManager` (provisioning, lifecycle, nomination ...) over the in-memory
cluster: pods are planned onto a NodeClaim, the cloud launches it, a kubelet-like Node registers (still tainted
``karpenter.sh/unregistered``), and the next pass nominates the pods to that Node.
"""

from __future__ import annotations

import logging

from nodewright.controllers.provisioning import Nomination
from nodewright.kube import resources as r
from nodewright.kube.errors import ConflictError, KubeError
from nodewright.kube.objects import name_of

from .conftest import node_for, nomination_manager, pending_pod
from .conftest import planned_and_registered as _planned_and_registered


def _manager(ctx, **options):
    """Nomination alone (``NOMINATION_HOLD=false``): the readiness hold, on by default, has its own tests
    (test_nomination_hold.py)."""
    return nomination_manager(ctx, **{"nomination_hold": False, **options})


NODE = "ip-10-0-0-1.ec2.internal"




def _nominated(cluster, name: str) -> str | None:
    return (cluster.get(r.PODS, name, "default").get("status") or {}).get("nominatedNodeName")


def test_pods_are_nominated_to_their_node_once_it_registers(ctx, cluster, clock) -> None:
    manager = _manager(ctx)
    taints_when_nominated = []
    real = cluster.patch_status

    def watched(kind, name, status, namespace=None, resource_version=None):
        if kind == r.PODS:
            node = cluster.get(r.NODES, NODE)
            taints_when_nominated.append([t["key"] for t in node["spec"].get("taints") or []])
        return real(kind, name, status, namespace, resource_version=resource_version)

    cluster.patch_status = watched
    for i in range(2):
        cluster.create(r.PODS, pending_pod(f"web-{i}"))
    manager.step()
    clock.advance(1.0)
    manager.step()
    assert _nominated(cluster, "web-0") is None  # a NodeClaim without a Node: nothing to name yet
    (claim,) = cluster.list(r.NODECLAIMS)
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claim)), ready=False))
    clock.advance(1.0)
    manager.step()
    # Nominated while the Node still carried karpenter.sh/unregistered; lifecycle removed it in the same pass.
    assert taints_when_nominated == [["karpenter.sh/unregistered"]] * 2
    assert "karpenter.sh/unregistered" not in [t["key"] for t in cluster.get(r.NODES, NODE)["spec"].get("taints") or []]
    assert [_nominated(cluster, f"web-{i}") for i in range(2)] == [NODE, NODE]
    assert manager.nomination.ours == {"default/web-0": NODE, "default/web-1": NODE}
    # Idempotent: a further pass writes nothing.
    rv = cluster.get(r.PODS, "web-0", "default")["metadata"]["resourceVersion"]
    clock.advance(1.0)
    manager.step()
    assert cluster.get(r.PODS, "web-0", "default")["metadata"]["resourceVersion"] == rv


def test_stale_nominations_are_cleared(ctx, cluster, clock) -> None:
    manager = _manager(ctx)
    _planned_and_registered(manager, cluster, clock, pods=3)
    assert [_nominated(cluster, f"web-{i}") for i in range(3)] == [NODE] * 3
    # web-0 bound elsewhere, web-1 deleted, web-2 re-planned by a later batch onto another NodeClaim.
    cluster.bind_pod("default", "web-0", "other-node")
    cluster.delete(r.PODS, "web-1", "default")
    manager.provisioner.nominations["default/web-2"] = Nomination("later-claim", True, clock())
    clock.advance(1.0)
    manager.step()
    assert _nominated(cluster, "web-0") is None
    assert _nominated(cluster, "web-2") is None
    assert manager.nomination.ours == {}


def test_nomination_is_cleared_when_the_node_goes(ctx, cluster, clock) -> None:
    manager = _manager(ctx)
    _planned_and_registered(manager, cluster, clock, pods=1)
    assert _nominated(cluster, "web-0") == NODE
    cluster.patch(r.NODES, NODE, {"metadata": {"finalizers": None}})
    cluster.delete(r.NODES, NODE)
    clock.advance(1.0)
    manager.step()
    assert _nominated(cluster, "web-0") is None


def test_a_nomination_someone_else_made_is_left_alone(ctx, cluster, clock) -> None:
    manager = _manager(ctx)
    cluster.create(r.PODS, {**pending_pod("web-0"), "status": {
        **pending_pod("web-0")["status"], "nominatedNodeName": "preemption-target"}})
    manager.step()
    clock.advance(1.0)
    manager.step()
    (claim,) = cluster.list(r.NODECLAIMS)
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claim)), ready=False))
    clock.advance(1.0)
    manager.step()
    assert _nominated(cluster, "web-0") == "preemption-target"


def test_setting_turns_nomination_off(ctx, cluster, clock) -> None:
    manager = _manager(ctx, nominate_pods=False)
    _planned_and_registered(manager, cluster, clock)
    assert _nominated(cluster, "web-0") is None and manager.nomination.ours == {}


def test_api_server_older_than_1_34_is_detected_once(ctx, cluster, clock, caplog) -> None:
    caplog.set_level(logging.INFO, logger="nodewright.controllers")
    cluster.version = "v1.33.4-eks-5f2d1a3"
    asked = []
    real = cluster.server_version
    cluster.server_version = lambda: asked.append(1) or real()
    manager = _manager(ctx)
    _planned_and_registered(manager, cluster, clock)
    for _ in range(3):
        clock.advance(1.0)
        manager.step()
    assert _nominated(cluster, "web-0") is None
    lines = [rec.getMessage() for rec in caplog.records if "older than 1.34" in rec.getMessage()]
    assert lines == ["API server v1.33.4-eks-5f2d1a3 is older than 1.34: kube-scheduler there clears nominations "
                     "it did not make (KEP-5278), so pods are not nominated to their planned nodes"]
    assert asked == [1]


def test_403_gives_one_error_and_one_event_and_provisioning_goes_on(ctx, cluster, clock, caplog) -> None:
    caplog.set_level(logging.INFO, logger="nodewright.controllers")
    attempts = []

    def forbidden(kind, name, status, namespace=None, resource_version=None):
        attempts.append(name)
        raise KubeError(f'pods "{name}" is forbidden: cannot patch resource "pods/status"', 403)

    real = cluster.patch_status
    cluster.patch_status = lambda kind, *a, **k: forbidden(kind, *a, **k) if kind == r.PODS else real(kind, *a, **k)
    manager = _manager(ctx)
    _planned_and_registered(manager, cluster, clock)
    for i in range(3):  # a later batch still provisions
        cluster.create(r.PODS, pending_pod(f"api-{i}", cpu="1500m"))
    for _ in range(5):
        clock.advance(1.0)
        manager.step()
    assert len(cluster.list(r.NODECLAIMS)) > 1
    errors = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.ERROR]
    assert len(errors) == 1
    assert 'lacks the rule apiGroups: [""], resources: ["pods/status"], verbs: ["patch"]' in errors[0]
    events = [e for e in cluster.events if e["reason"] == "FailedNomination"]
    assert len(events) == 1 and events[0]["type"] == "Warning" and "pods/status" in events[0]["message"]
    assert attempts == ["web-0"]  # paused after the refusal, not retried each pass


def test_409_is_retried_with_backoff_never_in_a_loop(ctx, cluster, clock) -> None:
    """Clearing a stale nomination of ours is conditional on the pod's resourceVersion; a 409 is retried under the
    shared backoff, one attempt per pass at most."""
    attempts: list[float] = []
    real = cluster.patch_status

    def conflicted(kind, name, status, namespace=None, resource_version=None):
        if kind == r.PODS and name == "web-0" and status == {"nominatedNodeName": None} and len(attempts) < 3:
            assert resource_version is not None
            attempts.append(clock())
            raise ConflictError(f'Operation cannot be fulfilled on pods "{name}": the object has been modified')
        return real(kind, name, status, namespace, resource_version=resource_version)

    manager = _manager(ctx)
    _planned_and_registered(manager, cluster, clock, pods=1)
    assert _nominated(cluster, "web-0") == NODE
    cluster.patch_status = conflicted
    cluster.patch(r.NODES, NODE, {"metadata": {"finalizers": None}})
    cluster.delete(r.NODES, NODE)  # the node went: our nomination is stale
    clock.advance(1.0)
    manager.step()
    assert len(attempts) == 1 and _nominated(cluster, "web-0") == NODE
    for _ in range(40):
        clock.advance(0.25)
        manager.step()
    gaps = [round(b - a, 2) for a, b in zip(attempts, attempts[1:], strict=False)]
    assert gaps == [1.0, 2.0]  # the shared Backoff: 1 s, then 2 s; one attempt per pass at most
    assert _nominated(cluster, "web-0") is None


def test_setting_a_nomination_is_not_conditional_clearing_one_is(ctx, cluster, clock) -> None:
    """kube-scheduler writes each pending pod's status at every failed attempt (a new PodScheduled message), so a
    nomination written with the resourceVersion seen milliseconds before failed with 409 -- and waited 1-2 s
    without a nomination -- exactly while the planned node turned Ready (measured on kube-scheduler v1.36)."""
    writes: list[tuple[object, object]] = []
    real = cluster.patch_status

    def recorded(kind, name, status, namespace=None, resource_version=None):
        if kind == r.PODS:
            writes.append((status["nominatedNodeName"], resource_version))
        return real(kind, name, status, namespace, resource_version=resource_version)

    cluster.patch_status = recorded
    manager = _manager(ctx)
    _planned_and_registered(manager, cluster, clock, pods=1)
    cluster.bind_pod("default", "web-0", "other-node")
    clock.advance(1.0)
    manager.step()
    assert writes[0] == (NODE, None)
    assert writes[1][0] is None and writes[1][1] is not None


def test_stale_resource_version_is_a_409_in_the_in_memory_cluster(cluster) -> None:
    pod = cluster.create(r.PODS, pending_pod("web-0"))
    cluster.patch(r.PODS, "web-0", {"metadata": {"labels": {"x": "y"}}}, "default")
    try:
        cluster.patch_status(r.PODS, "web-0", {"nominatedNodeName": NODE}, "default",
                             resource_version=pod["metadata"]["resourceVersion"])
    except ConflictError:
        pass
    else:
        raise AssertionError("expected a 409")


def test_server_versions_are_read_as_kubernetes_prints_them() -> None:
    from nodewright.controllers.nomination import parse_minor

    assert parse_minor("v1.36.0") == (1, 36)
    assert parse_minor("v1.33.5-eks-1234abc") == (1, 33)
    assert parse_minor("v0.0.0-master+$Format:%H$") is None  # a source build: unknown, nomination stays on
    assert parse_minor("garbage") is None


def test_recovery_replans_at_once_when_the_planned_node_filled_up(ctx, cluster, clock) -> None:
    """kube-scheduler put another pod on the planned Node: the planned pod is re-planned in the next batch (not
    after the 60 s nomination grace) and its stale nomination is cleared (issue 25, recovery)."""
    from nodewright.api import labels as L
    from nodewright.kube.objects import condition_true

    manager = _manager(ctx)
    cluster.create(r.PODS, pending_pod("web-0", cpu="1500m"))
    manager.step()
    clock.advance(1.0)
    manager.step()
    (claim,) = cluster.list(r.NODECLAIMS)
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claim)), ready=True))
    for _ in range(3):
        clock.advance(1.0)
        manager.step()
    assert condition_true(cluster.get(r.NODECLAIMS, name_of(claim)), L.CONDITION_INITIALIZED)
    assert _nominated(cluster, "web-0") == NODE
    intruder = pending_pod("intruder", cpu="1500m")
    intruder["spec"]["nodeName"] = NODE
    intruder["status"] = {"phase": "Running"}
    cluster.create(r.PODS, intruder)  # kube-scheduler placed another pod in the planned room
    started = clock()
    for _ in range(3):
        clock.advance(1.0)
        manager.step()
    claims = cluster.list(r.NODECLAIMS)
    assert len(claims) == 2 and clock() - started <= 3.0
    assert manager.provisioner.nominations["default/web-0"].target != name_of(claim)
    assert _nominated(cluster, "web-0") is None  # the new NodeClaim has no Node yet


def test_a_nomination_kube_scheduler_cleared_is_set_again_and_only_so_often(ctx, cluster, clock) -> None:
    """A failed attempt while the node boots clears the nomination (kube-scheduler's preemption step); without a
    pod watch the pass that sees the clear waits for the scheduler's wave to end (QUIET) and a later pass sets it
    again, so it is in place when the last boot taint comes off -- and after MAX_RENOMINATIONS clears the pod is
    left to the scheduler (no endless tug of war)."""
    from nodewright.controllers.nomination import MAX_RENOMINATIONS, QUIET

    manager = _manager(ctx)
    _planned_and_registered(manager, cluster, clock, pods=1)
    assert _nominated(cluster, "web-0") == NODE

    def cleared_then_two_passes() -> None:
        cluster.patch_status(r.PODS, "web-0", {"nominatedNodeName": None}, "default")
        clock.advance(1.0)
        manager.step()
        assert _nominated(cluster, "web-0") is None  # the wave may still run
        clock.advance(QUIET)
        manager.step()

    assert manager.nomination.renomination_due() is None
    cluster.patch_status(r.PODS, "web-0", {"nominatedNodeName": None}, "default")
    clock.advance(1.0)
    manager.step()
    # When a caller without a pod watch that passes less often (scenario replay) should pass again.
    assert manager.nomination.renomination_due() == clock() + QUIET
    clock.advance(QUIET)
    manager.step()
    assert _nominated(cluster, "web-0") == NODE  # set again while the node still boots
    assert manager.nomination.renomination_due() is None
    for _ in range(MAX_RENOMINATIONS - 1):
        cleared_then_two_passes()
        assert _nominated(cluster, "web-0") == NODE
    cleared_then_two_passes()
    assert _nominated(cluster, "web-0") is None  # the bound: left to kube-scheduler


class _PodInformer:
    """The one part of an informer the nomination controller uses: ``add_handler``."""

    def __init__(self) -> None:
        self.handlers: list = []

    def add_handler(self, handler) -> None:
        self.handlers.append(handler)


class _Timers:
    """Stands in for threading.Timer: records (seconds, callback) and runs nothing by itself."""

    def __init__(self) -> None:
        self.armed: list[float] = []
        self.callback = None

    def __call__(self, seconds, callback):
        self.armed.append(round(seconds, 3))
        self.callback = callback
        timers = self

        class _Timer:
            daemon = False

            def start(self) -> None:
                pass

        del timers
        return _Timer()


def test_the_pod_watch_sets_cleared_nominations_again_once_the_schedulers_wave_is_over(ctx, cluster, clock,
                                                                                        monkeypatch) -> None:
    """kube-scheduler clears a nomination at a failed attempt, and each clear re-queues the other pending pods,
    whose attempts clear theirs (a wave, milliseconds per attempt). The pod watch notes each clear; the timer sets
    them all again QUIET s after the last one, not at the next pass and not in the middle of the wave (where each
    re-set was cleared again at once: pods retried every ~60 ms on kube-scheduler v1.36)."""
    from nodewright.controllers.nomination import MAX_RENOMINATIONS, QUIET, WATCH_ACTIVE

    informer = _PodInformer()
    monkeypatch.setattr(cluster, "informers", {r.PODS: informer}, raising=False)
    manager = _manager(ctx)
    timers = _Timers()
    manager.nomination.timer_factory = timers
    _planned_and_registered(manager, cluster, clock, pods=2)
    assert [_nominated(cluster, f"web-{i}") for i in range(2)] == [NODE, NODE] and len(informer.handlers) == 1
    (on_pod,) = informer.handlers
    on_pod("MODIFIED", cluster.patch_status(r.PODS, "web-0", {"nominatedNodeName": None}, "default"))
    clock.advance(0.1)
    on_pod("MODIFIED", cluster.patch_status(r.PODS, "web-1", {"nominatedNodeName": None}, "default"))
    assert timers.armed == [QUIET]  # one timer for the wave
    assert [_nominated(cluster, f"web-{i}") for i in range(2)] == [None, None]  # nothing written mid-wave
    clock.advance(QUIET - 0.1)
    timers.callback()  # fired QUIET after the first clear: the second was 0.1 s later, so wait the rest
    assert timers.armed == [QUIET, 0.1] and _nominated(cluster, "web-0") is None
    clock.advance(0.1)
    timers.callback()
    assert [_nominated(cluster, f"web-{i}") for i in range(2)] == [NODE, NODE]
    assert manager.nomination.cleared == {"default/web-0": 1, "default/web-1": 1}
    on_pod("MODIFIED", cluster.get(r.PODS, "web-0", "default"))  # its own write: nothing to do
    assert len(timers.armed) == 2
    # A pod bound before the timer fires is not nominated again.
    on_pod("MODIFIED", cluster.patch_status(r.PODS, "web-0", {"nominatedNodeName": None}, "default"))
    cluster.bind_pod("default", "web-0", NODE)
    clock.advance(QUIET)
    timers.callback()
    assert _nominated(cluster, "web-0") is None and manager.nomination.cleared["default/web-0"] == 1
    # The bound holds on this path too.
    manager.nomination.cleared["default/web-1"] = MAX_RENOMINATIONS
    on_pod("MODIFIED", cluster.patch_status(r.PODS, "web-1", {"nominatedNodeName": None}, "default"))
    clock.advance(QUIET)
    timers.callback()
    assert _nominated(cluster, "web-1") is None
    # No pass for a while (this replica stopped leading): the watch stays quiet.
    manager.nomination.cleared["default/web-1"] = 0
    clock.advance(WATCH_ACTIVE + 1)
    armed = len(timers.armed)
    on_pod("MODIFIED", cluster.get(r.PODS, "web-1", "default"))
    assert len(timers.armed) == armed


def test_a_pod_bound_meanwhile_is_not_retried_nor_warned_about(ctx, cluster, clock, caplog) -> None:
    """Setting a nomination carries no precondition, so a pod bound since the cache showed it unbound gets the API
    server's 422 ("may not be set on pods that are already bound to a node", measured on v1.36): nothing to do."""
    caplog.set_level(logging.INFO, logger="nodewright.controllers")
    real, attempts = cluster.patch_status, []

    def bound_meanwhile(kind, name, status, namespace=None, resource_version=None):
        if kind == r.PODS and status.get("nominatedNodeName"):
            attempts.append(name)
            raise KubeError(f'Pod "{name}" is invalid: status.nominatedNodeName: Forbidden: may not be set on pods '
                            "that are already bound to a node", 422)
        return real(kind, name, status, namespace, resource_version=resource_version)

    cluster.patch_status = bound_meanwhile
    manager = _manager(ctx)
    _planned_and_registered(manager, cluster, clock, pods=1)
    for _ in range(3):
        clock.advance(1.0)
        manager.step()
    assert attempts == ["web-0"] * 4  # each pass sees it unbound again (the fake never binds it); no backoff
    assert not [rec for rec in caplog.records if rec.levelno >= logging.WARNING and "web-0" in rec.getMessage()]
