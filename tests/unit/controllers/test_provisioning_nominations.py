"""Provisioning onto a Node that registered but is not Ready yet: pods nominated to it take its room.

Before the fix in ``Provisioner._capacity`` such a node -- no longer an in-flight NodeClaim, no pods bound yet --
looked empty, so new pending pods were planned onto room already promised to the pods nominated to it (and then
waited out the 60 s nomination grace once kube-scheduler could not bind them).
"""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.controllers.lifecycle import LifecycleController
from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.kube import resources as r
from nodewright.kube.objects import name_of
from nodewright.scheduling import schedule

from .conftest import node_for, pending_pod

NODE_NAME = "ip-10-0-0-1.ec2.internal"  # the name conftest.node_for gives the registered Node


def test_pods_nominated_to_a_registered_not_ready_node_count_against_its_room(ctx, cluster, clock) -> None:
    """A registered Node that is not Ready yet is not an in-flight NodeClaim any more and has no pods bound, so
    only the pods nominated to it (to its NodeClaim before it registered) tell the provisioner it is taken."""
    for i in range(3):
        cluster.create(r.PODS, pending_pod(f"web-{i}"))  # 3 x 500m / 512Mi
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)
    life = LifecycleController(ctx)
    prov.reconcile()
    clock.advance(1.0)
    first = prov.reconcile()
    assert first is not None and len(first.new_nodeclaims) == 1
    claim = cluster.list(r.NODECLAIMS)[0]
    life.reconcile()  # launched: a c5.large, 1900m / 3840Mi allocatable
    claim = cluster.get(r.NODECLAIMS, name_of(claim))
    assert claim["metadata"]["labels"][L.INSTANCE_TYPE] == "c5.large"
    assert claim["status"]["allocatable"]["cpu"] == "1900m"
    cluster.create(r.NODES, node_for(claim, ready=False))
    life.reconcile()  # registered, not initialized: the web pods are still unbound, nominated to the claim
    assert {k: (n.target, n.on_nodeclaim) for k, n in prov.nominations.items()} == {
        f"default/web-{i}": (name_of(claim), True) for i in range(3)}

    # 400m are left on the node: one 300m pod fits there, the other needs a new node.
    for i in range(2):
        cluster.create(r.PODS, pending_pod(f"api-{i}", cpu="300m"))
    clock.advance(2.0)
    assert prov.reconcile() is None  # a new batch window opens
    clock.advance(1.0)
    result = prov.reconcile()
    assert result is not None
    assert {node: [p.key for p in pods] for node, pods in result.existing.items()} == {
        NODE_NAME: ["default/api-0"]}
    assert [[p.key for p in plan.pods] for plan in result.new_nodeclaims] == [["default/api-1"]]
    assert len(cluster.list(r.NODECLAIMS)) == 2
    assert prov.nominations["default/api-0"].target == NODE_NAME
    assert prov.nominations["default/api-0"].on_nodeclaim is False
