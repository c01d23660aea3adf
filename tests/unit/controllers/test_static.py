"""Static NodePools (``spec.replicas``): the static controller keeps N NodeClaims, the provisioner never
launches for them, consolidation leaves them alone (Karpenter v1.14 ``pkg/controllers/static``)."""

from __future__ import annotations

import copy

from nodewright.api import labels as L
from nodewright.controllers.common import to_model
from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.controllers.static import StaticCapacityController
from nodewright.kube import resources as r
from nodewright.kube.objects import is_deleting, name_of

from .conftest import NODEPOOL, node_for, pending_pod
from .fakes import first_fit_solver


def _static_pool(replicas: int, name: str = "fixed", nodes_limit: str | None = None) -> dict:
    doc = copy.deepcopy(NODEPOOL)
    doc["metadata"]["name"] = name
    doc["spec"]["replicas"] = replicas
    doc["spec"]["limits"] = {"nodes": nodes_limit} if nodes_limit else {}
    return doc


def _claims(cluster, pool: str = "fixed") -> list[dict]:
    return [c for c in cluster.list(r.NODECLAIMS) if c["metadata"]["labels"][L.NODEPOOL] == pool and not is_deleting(c)]


def test_scale_up_creates_the_missing_nodeclaims_from_the_template(ctx, cluster) -> None:
    cluster.create(r.NODEPOOLS, _static_pool(3))
    StaticCapacityController(ctx).reconcile()
    claims = _claims(cluster)
    assert len(claims) == 3
    claim = claims[0]
    assert claim["metadata"]["labels"] == {L.NODEPOOL: "fixed", "team": "web", L.EC2NODECLASS: "default",
                                          L.CAPACITY_TYPE: "on-demand"}
    assert claim["metadata"]["finalizers"] == [L.TERMINATION_FINALIZER]
    itypes = next(q for q in claim["spec"]["requirements"] if q["key"] == L.INSTANCE_TYPE)
    assert sorted(itypes["values"]) == ["c5.large", "m5.large", "m5.xlarge"]
    assert ctx.metrics.value("karpenter_nodeclaims_created_total",
                             {"reason": "provisioned", "nodepool": "fixed", "min_values_relaxed": "false"}) == 3.0
    StaticCapacityController(ctx).reconcile()  # at its count: nothing more
    assert len(_claims(cluster)) == 3
    assert _claims(cluster, "general") == []  # the dynamic pool is untouched


def test_scale_up_stops_at_limits_nodes(ctx, cluster) -> None:
    cluster.create(r.NODEPOOLS, _static_pool(5, nodes_limit="2"))
    StaticCapacityController(ctx).reconcile()
    assert len(_claims(cluster)) == 2


def test_scale_down_removes_unlaunched_then_empty_nodes_first(ctx, cluster, cloud) -> None:
    cluster.create(r.NODEPOOLS, _static_pool(3))
    controller = StaticCapacityController(ctx)
    controller.reconcile()
    busy, idle, unlaunched = sorted(_claims(cluster), key=name_of)
    for i, claim in enumerate((busy, idle)):  # launch two, register their Nodes, run a pod on one
        launched = cloud.create(to_model(claim))
        status = {"providerID": launched.status.provider_id,
                  "capacity": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                  "allocatable": {"cpu": "1900m", "memory": "3840Mi", "pods": "29"}}
        claim = cluster.patch_status(r.NODECLAIMS, name_of(claim), status)
        cluster.create(r.NODES, node_for(claim, name=f"ip-10-0-0-{i + 1}.ec2.internal"))
    pod = pending_pod("web-0")
    pod["spec"]["nodeName"] = "ip-10-0-0-1.ec2.internal"
    pod["status"] = {"phase": "Running"}
    cluster.create(r.PODS, pod)
    spec = cluster.get(r.NODEPOOLS, "fixed")
    spec["spec"]["replicas"] = 1
    cluster.replace(r.NODEPOOLS, spec)
    controller.reconcile()
    assert [name_of(c) for c in _claims(cluster)] == [name_of(busy)]


def test_provisioner_never_launches_for_a_static_pool(ctx, cluster, clock) -> None:
    cluster.delete(r.NODEPOOLS, "general")
    cluster.create(r.NODEPOOLS, _static_pool(1))
    cluster.create(r.PODS, pending_pod("web-0"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=first_fit_solver)
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    assert cluster.list(r.NODECLAIMS) == []
