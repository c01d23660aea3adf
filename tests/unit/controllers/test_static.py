"""Static NodePools (``spec.replicas``): the static controller keeps N NodeClaims, the provisioner never
launches for them, consolidation leaves them alone (Karpenter v1.14 ``pkg/controllers/static``)."""

from __future__ import annotations

import copy

from nodewright.api import labels as L
from nodewright.controllers.common import Context, to_model
from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.controllers.static import StaticCapacityController, static_plan
from nodewright.kube import resources as r
from nodewright.kube.objects import is_deleting, name_of
from nodewright.metrics import Metrics
from nodewright.pricing import marginal_pricing, parse_pricing_policy
from nodewright.state.models import nodepool_spec_from_model

from .conftest import NODEPOOL, node_for, pending_pod
from .fakes import FakeCloudProvider, first_fit_solver, instance_type


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


def _catalog_with_an_expensive_reserved_type() -> list:
    """60 cheap types, then m5.2xlarge: the 61st by list price, past the 60-type cap of a NodeClaim."""
    cheap = [instance_type(f"t{i}x.large", 2, 8, 29, round(0.05 + i / 1000, 3), 0.02) for i in range(60)]
    return [*cheap, instance_type("m5.2xlarge", 8, 32, 58, 0.384, 0.16)]


_RESERVED_M5_2XLARGE = {"apiVersion": "nodewright.io/v1alpha1", "kind": "PricingPolicy", "spec": {
    "reservedInstances": [{"instanceType": "m5.2xlarge", "zone": "us-east-1a", "count": 1}]}}


def test_static_nodeclaims_rank_types_by_effective_price_under_a_policy(cluster, clock) -> None:
    """The static controller ranks by the provisioner's price function: at list prices m5.2xlarge is the 61st type
    and is cut; under a policy with one zonal RI for it, the first NodeClaim is priced at $0 for m5.2xlarge (first
    of its types), and the second, priced on top of the first, no longer is (the RI is spent)."""
    catalog = _catalog_with_an_expensive_reserved_type()
    ctx = Context(cluster, FakeCloudProvider(clock, catalog), clock, Metrics(), "test")
    policy = parse_pricing_policy(_RESERVED_M5_2XLARGE)
    cluster.create(r.NODEPOOLS, _static_pool(2))
    StaticCapacityController(ctx, lambda: policy).reconcile()
    types = [next(q["values"] for q in c["spec"]["requirements"] if q["key"] == L.INSTANCE_TYPE)
             for c in sorted(_claims(cluster), key=lambda c: c["metadata"]["creationTimestamp"] + name_of(c))]
    assert [len(t) for t in types] == [60, 60]
    assert sum("m5.2xlarge" in t for t in types) == 1
    assert [t for t in types if "m5.2xlarge" in t][0] == sorted(
        ["m5.2xlarge", *(f"t{i}x.large" for i in range(59))])


def test_static_plan_prices_like_the_provisioner(cluster) -> None:
    catalog = _catalog_with_an_expensive_reserved_type()
    spec = nodepool_spec_from_model(_static_pool(1), [], {})
    listed = static_plan(spec, catalog)
    assert listed is not None and listed.instance_type.name == "t0x.large"
    assert "m5.2xlarge" not in [it.name for it in listed.instance_types]
    pricing = marginal_pricing(parse_pricing_policy(_RESERVED_M5_2XLARGE), catalog, [])
    effective = static_plan(spec, catalog, pricing)
    assert effective is not None
    assert (effective.instance_type.name, effective.offering.zone, effective.offering.capacity_type) == (
        "m5.2xlarge", "us-east-1a", "on-demand")
    assert [it.name for it in effective.instance_types][:3] == ["m5.2xlarge", "t0x.large", "t1x.large"]


def _daemonset(name: str, cpu: str, memory: str, min_cpus: int | None = None) -> dict:
    """A DaemonSet requesting ``cpu``/``memory``; with ``min_cpus`` it only runs on types with more vCPUs."""
    spec: dict = {"containers": [{"name": "c", "image": "agent",
                                  "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if min_cpus is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt",
                                   "values": [str(min_cpus)]}]}]}}}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"ds": name}},
                     "template": {"metadata": {"labels": {"ds": name}}, "spec": spec}}}


def test_static_nodeclaim_requests_the_daemonsets_of_its_chosen_type() -> None:
    """The plan's requests are the overhead of the DaemonSets the chosen (cheapest) type runs: a DaemonSet that
    only runs on types with more than 8 vCPU does not count on a 2-vCPU m5.large, and does on an m5.4xlarge."""
    from nodewright.cloud.catalog import load_instance_types
    from nodewright.scheduling.pods import daemonset_pod

    catalog = {t.name: t for t in load_instance_types("us-east-1")}
    daemons = [daemonset_pod(_daemonset("agent", "100m", "128Mi")),
               daemonset_pod(_daemonset("big-agent", "2", "4Gi", min_cpus=8))]
    spec = nodepool_spec_from_model(_static_pool(1), daemons, {})
    assert spec.daemonset_overhead == {"cpu": 2100, "memory": (4096 + 128) * 2**20, "pods": 2}  # the pool's largest
    small = static_plan(spec, [catalog["m5.large"], catalog["m5.4xlarge"]])
    assert small is not None and small.instance_type.name == "m5.large"
    assert small.requests == small.daemonset_overhead == {"cpu": 100, "memory": 128 * 2**20, "pods": 1}
    large = static_plan(spec, [catalog["m5.4xlarge"]])
    assert large is not None
    assert large.requests == {"cpu": 2100, "memory": (4096 + 128) * 2**20, "pods": 2}


def test_the_manager_runs_the_static_controller_only_under_the_static_capacity_gate(ctx, cluster, caplog) -> None:
    """Karpenter registers its static controllers only under StaticCapacity (default off): the ControllerManager
    with the default options creates no NodeClaim for the pool (one warning line over two passes), with the gate
    on it keeps the replicas."""
    from nodewright.controllers.manager import ControllerManager, ControllerOptions

    cluster.create(r.NODEPOOLS, _static_pool(2))
    off = ControllerManager(ctx, ControllerOptions())
    off.static.reconcile()
    off.static.reconcile()
    assert _claims(cluster) == []
    assert [rec.getMessage() for rec in caplog.records if "StaticCapacity" in rec.getMessage()] == [
        "static nodepool fixed (spec.replicas 2) is not managed: the StaticCapacity feature gate is off "
        "(FEATURE_GATES StaticCapacity=true to keep its replicas)"]
    ControllerManager(ctx, ControllerOptions(static_capacity=True)).static.reconcile()
    assert len(_claims(cluster)) == 2
