"""The readiness hold (``NOMINATION_HOLD``, issue 25): a planned Node registers with
``nodewright.io/nominating=<NodeClaim>:NoSchedule``, the pods planned for it are given the toleration of that taint
alone (pinned), and the hold is lifted once the pods planned for its provisioning batch are placed, through the
controller manager.

Without pinning, a pod whose own Node still boots is placed by kube-scheduler's scoring on a Node of its batch that
is already schedulable, in room planned for others (docs/benchmarks.md, issue 25).
"""

from __future__ import annotations

import logging

import pytest

from nodewright.api import labels as L
from nodewright.controllers.nomination import HOLD_MAX, HOLD_UNREADY_MAX, PIN_RULE, hold_toleration
from nodewright.kube import resources as r
from nodewright.kube.errors import ConflictError, KubeError
from nodewright.kube.objects import condition_true, name_of

from .conftest import nomination_manager as _manager
from .conftest import planned_and_registered as _planned_and_registered

NODE = "ip-10-0-0-1.ec2.internal"


def _taints(cluster) -> list[str]:
    return [t["key"] for t in cluster.get(r.NODES, NODE)["spec"].get("taints") or []]


def _nominated(cluster, name: str) -> str | None:
    return (cluster.get(r.PODS, name, "default").get("status") or {}).get("nominatedNodeName")


def _ready(cluster, node: str = NODE) -> None:
    cluster.patch_status(r.NODES, node, {"conditions": [{"type": "Ready", "status": "True"}]})


def _holds(cluster, pod: str) -> list[str]:
    """The hold taints (their values) ``pod`` tolerates."""
    return [t["value"] for t in cluster.get(r.PODS, pod, "default")["spec"].get("tolerations") or []
            if t.get("key") == L.NOMINATING_TAINT_KEY]


def test_the_pods_are_pinned_to_their_held_node_which_is_released_once_they_are_placed(ctx, cluster, clock) -> None:
    manager = _manager(ctx, nomination_hold=True)
    claim = _planned_and_registered(manager, cluster, clock)
    (taint,) = cluster.get(r.NODES, NODE)["spec"]["taints"]  # registration: unregistered off, the hold on
    assert taint == {"key": L.NOMINATING_TAINT_KEY, "value": name_of(claim), "effect": "NoSchedule"}
    assert [_nominated(cluster, f"web-{i}") for i in range(2)] == [NODE, NODE]
    assert _holds(cluster, "web-0") == []  # nomination passes before registration added the hold
    clock.advance(0.25)
    manager.step()
    for i in range(2):  # the next pass: the toleration of this Node's hold, and of no other
        (toleration,) = cluster.get(r.PODS, f"web-{i}", "default")["spec"]["tolerations"]
        assert toleration == hold_toleration(taint) == {
            "key": L.NOMINATING_TAINT_KEY, "operator": "Equal", "value": name_of(claim), "effect": "NoSchedule"}
    _ready(cluster)
    clock.advance(1.0)
    manager.step()
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]  # Ready, its pods not placed yet: held
    assert not condition_true(cluster.get(r.NODECLAIMS, name_of(claim)), L.CONDITION_INITIALIZED)
    cluster.bind_pod("default", "web-0", NODE)  # kube-scheduler: the held Node admits the pods it pins
    clock.advance(1.0)
    manager.step()
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]  # web-1 still to be placed
    cluster.bind_pod("default", "web-1", NODE)
    clock.advance(1.0)
    manager.step()
    assert _taints(cluster) == []
    clock.advance(1.0)
    manager.step()
    assert condition_true(cluster.get(r.NODECLAIMS, name_of(claim)), L.CONDITION_INITIALIZED)
    assert _holds(cluster, "web-0") == [name_of(claim)]  # a toleration cannot be removed: it stays, harmless


def test_the_hold_is_bounded_when_a_pod_keeps_another_nomination(ctx, cluster, clock) -> None:
    manager = _manager(ctx, nomination_hold=True)
    _planned_and_registered(manager, cluster, clock)
    # Preemption nominated web-1 elsewhere: never overwritten, so the Node's pods never all carry ours.
    cluster.patch_status(r.PODS, "web-1", {"nominatedNodeName": "ip-10-0-0-9.ec2.internal"}, "default")
    _ready(cluster)
    clock.advance(1.0)
    manager.step()  # boot taints gone: the bound starts
    held = []
    for _ in range(int(HOLD_MAX) + 1):
        held.append(L.NOMINATING_TAINT_KEY in _taints(cluster))
        clock.advance(1.0)
        manager.step()
    assert held == [True] * int(HOLD_MAX) + [False]  # lifted HOLD_MAX s after its boot taints went


def test_a_restarted_controller_releases_a_ready_node_at_once_and_a_booting_one_after_its_bound(
        ctx, cluster, clock) -> None:
    first = _manager(ctx, nomination_hold=True)
    _planned_and_registered(first, cluster, clock)
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]
    second = _manager(ctx, nomination_hold=True)  # a new process: no plan in memory
    clock.advance(1.0)
    second.step()
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]  # not Ready yet
    clock.advance(HOLD_UNREADY_MAX)
    second.step()
    assert _taints(cluster) == []  # never Ready: a DaemonSet it needs might not tolerate the hold


def test_a_restarted_controller_releases_a_ready_node(ctx, cluster, clock) -> None:
    _planned_and_registered(_manager(ctx, nomination_hold=True), cluster, clock)
    _ready(cluster)
    clock.advance(1.0)
    _manager(ctx, nomination_hold=True).step()
    assert _taints(cluster) == []


def test_the_hold_is_on_by_default(ctx, cluster, clock) -> None:
    _planned_and_registered(_manager(ctx), cluster, clock)
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]


def test_no_hold_when_turned_off(ctx, cluster, clock) -> None:
    _planned_and_registered(_manager(ctx, nomination_hold=False), cluster, clock)
    assert _taints(cluster) == []


def test_the_hold_works_when_nomination_is_forbidden(ctx, cluster, clock, caplog) -> None:
    caplog.set_level(logging.ERROR, logger="nodewright.controllers")
    real = cluster.patch_status

    def forbidden(kind, *args, **kwargs):
        if kind == r.PODS:
            raise KubeError('pods "web-0" is forbidden: cannot patch resource "pods/status"', 403)
        return real(kind, *args, **kwargs)

    cluster.patch_status = forbidden
    manager = _manager(ctx, nomination_hold=True)
    _planned_and_registered(manager, cluster, clock)
    clock.advance(0.25)
    manager.step()
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]  # pinning needs no nomination
    assert _holds(cluster, "web-0") and _holds(cluster, "web-1")
    assert _nominated(cluster, "web-0") is None


def test_the_hold_works_without_nomination(ctx, cluster, clock) -> None:
    # NOMINATE_PODS=false (or an API server older than 1.34, where nominations are not kept): the pods are pinned by
    # their tolerations alone, and the Node is released once they are placed.
    manager = _manager(ctx, nominate_pods=False, nomination_hold=True)
    claim = _planned_and_registered(manager, cluster, clock)
    clock.advance(0.25)
    manager.step()
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]
    assert [_holds(cluster, f"web-{i}") for i in range(2)] == [[name_of(claim)]] * 2
    assert [_nominated(cluster, f"web-{i}") for i in range(2)] == [None, None]
    _ready(cluster)
    for i in range(2):
        cluster.bind_pod("default", f"web-{i}", NODE)
    clock.advance(1.0)
    manager.step()
    assert _taints(cluster) == []


def _two_claims(ctx, cluster, clock):
    """Two NodeClaims of one provisioning pass (host ports: one pod per node), launched, no Node yet."""
    from .conftest import pending_pod
    manager = _manager(ctx, nomination_hold=True)
    for i in range(2):
        pod = pending_pod(f"web-{i}", cpu="2", memory="4Gi")
        pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        cluster.create(r.PODS, pod)
    manager.step()
    clock.advance(1.0)
    manager.step()
    claims = sorted(cluster.list(r.NODECLAIMS), key=name_of)
    assert len(claims) == 2
    return manager, claims


def _held(cluster, node: str) -> bool:
    return L.NOMINATING_TAINT_KEY in [t["key"] for t in cluster.get(r.NODES, node)["spec"].get("taints") or []]


def test_a_batch_is_released_once_every_pod_of_it_is_placed(ctx, cluster, clock) -> None:
    # The first Node turns Ready and its pod binds there (pinned), but it stays held while the other pod of its batch
    # waits for a Node still to come: released, its spare room would take that pod by kube-scheduler's scoring.
    from .conftest import node_for
    manager, claims = _two_claims(ctx, cluster, clock)
    nodes = [f"ip-10-0-0-{i + 1}.ec2.internal" for i in range(2)]
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claims[0])), nodes[0], ready=False))
    clock.advance(1.0)
    manager.step()
    clock.advance(0.25)
    manager.step()
    first = next(f"web-{i}" for i in range(2) if _nominated(cluster, f"web-{i}") == nodes[0])
    second = next(f"web-{i}" for i in range(2) if f"web-{i}" != first)
    assert (_holds(cluster, first), _holds(cluster, second)) == ([name_of(claims[0])], [])
    _ready(cluster, nodes[0])
    cluster.bind_pod("default", first, nodes[0])
    clock.advance(1.0)
    manager.step()
    assert _held(cluster, nodes[0])  # Ready, its pod placed; the other NodeClaim has no Node yet
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claims[1])), nodes[1], ready=False))
    clock.advance(1.0)
    manager.step()
    clock.advance(0.25)
    manager.step()
    assert _holds(cluster, second) == [name_of(claims[1])]
    _ready(cluster, nodes[1])
    clock.advance(1.0)
    manager.step()
    assert _held(cluster, nodes[0]) and _held(cluster, nodes[1])  # the second pod is still to be placed
    cluster.bind_pod("default", second, nodes[1])
    clock.advance(1.0)
    manager.step()
    assert not _held(cluster, nodes[0]) and not _held(cluster, nodes[1])  # released in one pass


def test_a_batch_waits_no_longer_than_the_bound(ctx, cluster, clock) -> None:
    from .conftest import node_for
    manager, claims = _two_claims(ctx, cluster, clock)
    node = "ip-10-0-0-1.ec2.internal"
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claims[0])), node, ready=True))
    held = []
    for _ in range(int(HOLD_MAX) + 2):  # the other NodeClaim never gets a Node
        clock.advance(1.0)
        manager.step()
        held.append(_held(cluster, node))
    assert held[0] and not held[-1]


def _pin_refused(cluster, err: KubeError, times: int = 1000) -> list[str]:
    """Make the pods' spec writes fail with ``err`` (``times`` times); returns the pods tried."""
    real = cluster.patch
    tried: list[str] = []

    def refusing(kind, name, body, namespace=None):
        if kind is r.PODS and "tolerations" in (body.get("spec") or {}) and len(tried) < times:
            tried.append(name)
            raise err
        return real(kind, name, body, namespace)

    cluster.patch = refusing
    return tried


def test_a_forbidden_pin_lifts_the_hold_with_one_error_and_one_event(ctx, cluster, clock, caplog) -> None:
    caplog.set_level(logging.ERROR, logger="nodewright.controllers")
    manager = _manager(ctx, nomination_hold=True)
    _planned_and_registered(manager, cluster, clock)
    _pin_refused(cluster, KubeError('pods "web-0" is forbidden: cannot patch resource "pods"', 403))
    for _ in range(3):
        clock.advance(0.25)
        manager.step()
    assert _taints(cluster) == []  # lifted at once: the pods cannot be pinned
    assert [_nominated(cluster, f"web-{i}") for i in range(2)] == [NODE, NODE]  # nomination goes on
    errors = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.ERROR]
    assert len(errors) == 1 and PIN_RULE in errors[0]
    events = [e for e in cluster.events if e["reason"] == "FailedNomination"]
    assert len(events) == 1 and PIN_RULE in events[0]["message"]


def test_a_conflicting_pin_is_retried_after_its_backoff(ctx, cluster, clock) -> None:
    manager = _manager(ctx, nomination_hold=True)
    _planned_and_registered(manager, cluster, clock)
    tried = _pin_refused(cluster, ConflictError("the object has been modified", 409), times=2)
    clock.advance(0.25)
    manager.step()
    assert sorted(tried) == ["web-0", "web-1"] and _holds(cluster, "web-0") == []
    clock.advance(0.25)
    manager.step()
    assert len(tried) == 2  # backing off: no second write 0.25 s later
    clock.advance(1.0)
    manager.step()
    assert len(tried) == 2 and _holds(cluster, "web-0") == _holds(cluster, "web-1") != []
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]


@pytest.mark.parametrize("err", [
    KubeError("Pod is invalid: spec: Forbidden: pod updates may not change fields", 422),
    KubeError('admission webhook "validation.gatekeeper.sh" denied the request: [no-extra-tolerations]', 403),
    KubeError("pods \"web-0\" is forbidden: ValidatingAdmissionPolicy 'no-tolerations' with binding 'b' denied "
              "request: tolerations are fixed", 403),
], ids=["invalid", "webhook", "admission-policy"])
def test_a_pod_that_cannot_be_pinned_is_not_waited_for(ctx, cluster, clock, caplog, err) -> None:
    caplog.set_level(logging.WARNING, logger="nodewright.controllers")
    manager = _manager(ctx, nomination_hold=True)
    _planned_and_registered(manager, cluster, clock)
    _pin_refused(cluster, err, times=1)
    clock.advance(0.25)
    manager.step()
    (refused,) = [f"web-{i}" for i in range(2) if not _holds(cluster, f"web-{i}")]
    other = next(f"web-{i}" for i in range(2) if f"web-{i}" != refused)
    assert any("was refused" in rec.getMessage() for rec in caplog.records)
    _ready(cluster)
    cluster.bind_pod("default", other, NODE)
    clock.advance(1.0)
    manager.step()
    assert _taints(cluster) == []  # the pinned pod is placed; the other one cannot be waited for
    assert not any(rec.levelno == logging.ERROR for rec in caplog.records)  # one pod's refusal, not RBAC's
