"""The readiness hold (``NOMINATION_HOLD``, issue 25): a planned Node stays unschedulable after its boot taints
until the pods planned for it carry their nominations again, through the controller manager.

kube-scheduler clears a pending pod's nomination at each failed attempt; the attempts the Node's Ready update
starts fail while ``node.kubernetes.io/not-ready`` is still on, so without the hold the Node becomes schedulable
just after its pods lost their nominations (docs/benchmarks.md, issue 25).
"""

from __future__ import annotations

import logging

from nodewright.api import labels as L
from nodewright.controllers.nomination import HOLD_MAX, HOLD_UNREADY_MAX, QUIET
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError
from nodewright.kube.objects import condition_true, name_of

from .conftest import nomination_manager as _manager
from .conftest import planned_and_registered as _planned_and_registered

NODE = "ip-10-0-0-1.ec2.internal"


def _taints(cluster) -> list[str]:
    return [t["key"] for t in cluster.get(r.NODES, NODE)["spec"].get("taints") or []]


def _nominated(cluster, name: str) -> str | None:
    return (cluster.get(r.PODS, name, "default").get("status") or {}).get("nominatedNodeName")


def _ready(cluster) -> None:
    cluster.patch_status(r.NODES, NODE, {"conditions": [{"type": "Ready", "status": "True"}]})


def test_the_node_is_released_only_once_its_pods_carry_their_nominations_again(ctx, cluster, clock) -> None:
    manager = _manager(ctx, nomination_hold=True)
    claim = _planned_and_registered(manager, cluster, clock)
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]  # registration: unregistered off, the hold on
    assert [_nominated(cluster, f"web-{i}") for i in range(2)] == [NODE, NODE]
    clock.advance(1.0)
    manager.step()
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]  # not Ready: held
    # The Ready update's wave: kube-scheduler tried web-0 while the Node was still tainted and cleared its nomination.
    cluster.patch_status(r.PODS, "web-0", {"nominatedNodeName": None}, "default")
    _ready(cluster)
    clock.advance(0.05)
    manager.step()
    assert _taints(cluster) == [L.NOMINATING_TAINT_KEY]  # web-0 has no nomination: still held
    assert not condition_true(cluster.get(r.NODECLAIMS, name_of(claim)), L.CONDITION_INITIALIZED)
    clock.advance(QUIET)
    manager.step()  # the wave is over: web-0 nominated again, then the Node released
    assert [_nominated(cluster, f"web-{i}") for i in range(2)] == [NODE, NODE]
    assert _taints(cluster) == []
    clock.advance(1.0)
    manager.step()
    assert condition_true(cluster.get(r.NODECLAIMS, name_of(claim)), L.CONDITION_INITIALIZED)


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


def test_no_hold_by_default(ctx, cluster, clock) -> None:
    _planned_and_registered(_manager(ctx), cluster, clock)
    assert _taints(cluster) == []


def test_no_hold_when_nomination_is_forbidden(ctx, cluster, clock, caplog) -> None:
    caplog.set_level(logging.ERROR, logger="nodewright.controllers")
    real = cluster.patch_status

    def forbidden(kind, *args, **kwargs):
        if kind == r.PODS:
            raise KubeError('pods "web-0" is forbidden: cannot patch resource "pods/status"', 403)
        return real(kind, *args, **kwargs)

    cluster.patch_status = forbidden
    _planned_and_registered(_manager(ctx, nomination_hold=True), cluster, clock)
    assert _taints(cluster) == []  # the 403 came first in that pass: registration added no hold



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


def test_a_batch_turns_schedulable_together(ctx, cluster, clock) -> None:
    # The first Node turns Ready and its pod carries its nomination, but it stays held until the second Node is
    # ready to go too, so the second pod is not placed by kube-scheduler's scoring on the first Node (docs/benchmarks.md
    # run q).
    from .conftest import node_for
    manager, claims = _two_claims(ctx, cluster, clock)
    nodes = [f"ip-10-0-0-{i + 1}.ec2.internal" for i in range(2)]
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claims[0])), nodes[0], ready=False))
    clock.advance(1.0)
    manager.step()
    cluster.patch_status(r.NODES, nodes[0], {"conditions": [{"type": "Ready", "status": "True"}]})
    clock.advance(QUIET + 0.5)
    manager.step()
    assert _held(cluster, nodes[0])  # Ready, its pod nominated; the other NodeClaim has no Node yet
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claims[1])), nodes[1], ready=False))
    clock.advance(1.0)
    manager.step()
    assert _held(cluster, nodes[0]) and _held(cluster, nodes[1])  # the second Node registered, not Ready
    cluster.patch_status(r.NODES, nodes[1], {"conditions": [{"type": "Ready", "status": "True"}]})
    clock.advance(QUIET + 0.5)
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


def test_a_batch_is_released_placement_independent_nodes_first(ctx, cluster, clock) -> None:
    # kube-scheduler starts a wave of attempts at the first lift: a pod of a hard spread, pod (anti-)affinity or host
    # port fails there until its peers are placed, loses its nomination, and its room is unprotected, so the Nodes
    # whose pods can bind at once go first (docs/benchmarks.md run s).
    from .conftest import node_for, pending_pod
    manager = _manager(ctx, nomination_hold=True)
    for i, zone in enumerate(("us-east-1a", "us-east-1b")):
        pod = pending_pod(f"web-{i}", cpu="2", memory="4Gi")
        pod["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": zone}
        if i == 0:
            pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        cluster.create(r.PODS, pod)
    manager.step()
    clock.advance(1.0)
    manager.step()
    claims = cluster.list(r.NODECLAIMS)
    assert len(claims) == 2
    by_claim = {}
    for claim in claims:
        zone = claim["metadata"]["labels"]["topology.kubernetes.io/zone"]
        node = f"ip-{zone}.ec2.internal"  # by name, the host-port pod's Node (us-east-1a) would go first
        by_claim[zone] = node
        cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claim)), node, ready=False))
    clock.advance(1.0)
    manager.step()
    lifts = []
    patch = cluster.patch

    def recording(kind, name, body, namespace=None):
        if kind is r.NODES and "spec" in body:
            lifts.append(name)
        return patch(kind, name, body, namespace)

    cluster.patch = recording
    for node in by_claim.values():
        cluster.patch_status(r.NODES, node, {"conditions": [{"type": "Ready", "status": "True"}]})
    clock.advance(QUIET + 0.5)
    manager.step()
    assert lifts == [by_claim["us-east-1b"], by_claim["us-east-1a"]]  # the host-port pod's Node last


def test_each_lift_after_the_first_is_preceded_by_its_pods_nominations(ctx, cluster, clock) -> None:
    # The first lift of a pass starts a wave of attempts in kube-scheduler; a pod whose Node is still held fails
    # there and loses its nomination, and that clear can reach our cache only after the next lift, which would then
    # meet the pod without it. So each later lift is preceded by its pods' nominations, written again whatever the
    # cache shows (docs/benchmarks.md run u).
    from .conftest import node_for
    manager, claims = _two_claims(ctx, cluster, clock)
    nodes = [f"ip-10-0-0-{i + 1}.ec2.internal" for i in range(2)]
    for claim, node in zip(claims, nodes, strict=True):
        cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claim)), node, ready=False))
    clock.advance(1.0)
    manager.step()
    planned = {_nominated(cluster, f"web-{i}"): f"web-{i}" for i in range(2)}
    assert set(planned) == set(nodes)
    writes: list[tuple[str, str, str | None]] = []
    patch, patch_status = cluster.patch, cluster.patch_status

    def recording_patch(kind, name, body, namespace=None):
        result = patch(kind, name, body, namespace)
        if kind is r.NODES and "spec" in body:
            writes.append(("lift", name, None))
            if len(writes) == 1:  # the wave of the first lift clears the nomination of the other Node's pod
                other = next(node for node in nodes if node != name)
                patch_status(r.PODS, planned[other], {"nominatedNodeName": None}, "default")
        return result

    def recording_patch_status(kind, name, body, namespace=None, **kwargs):
        if kind is r.PODS:
            writes.append(("nominate", name, body.get("nominatedNodeName")))
        return patch_status(kind, name, body, namespace, **kwargs)

    cluster.patch, cluster.patch_status = recording_patch, recording_patch_status
    for node in nodes:
        cluster.patch_status(r.NODES, node, {"conditions": [{"type": "Ready", "status": "True"}]})
    clock.advance(QUIET + 0.5)
    manager.step()
    first, second = writes[0][1], writes[-1][1]
    assert writes == [("lift", first, None), ("nominate", planned[second], second), ("lift", second, None)]
    assert _nominated(cluster, planned[second]) == second  # it met its Node's lift with its nomination
    assert not _held(cluster, first) and not _held(cluster, second)
