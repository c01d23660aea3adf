"""Provisioning: batch windows, pending-pod selection, NodeClaim creation, nomination, bind mode."""

from __future__ import annotations

import logging

import pytest

from nodewright.api import labels as L
from nodewright.controllers.provisioning import BIND_SETTLE, Batcher, Provisioner
from nodewright.kube import resources as r
from nodewright.kube.objects import format_time, name_of
from nodewright.state.cluster import snapshot

from .conftest import node_for, pending_pod
from .fakes import first_fit_solver


def test_batcher_closes_after_idle_window() -> None:
    b = Batcher(idle=1.0, maximum=10.0)
    assert b.ready({"a"}, 0.0) is False
    assert b.ready({"a", "b"}, 0.5) is False
    assert b.ready({"a", "b"}, 1.4) is False  # 0.9 s since "b" arrived
    assert b.ready({"a", "b"}, 1.5) is True


def test_batcher_closes_at_max_window_while_pods_keep_arriving() -> None:
    b = Batcher(idle=1.0, maximum=10.0)
    pods: set[str] = set()
    fired = []
    for tick in range(0, 24):
        t = tick * 0.5
        pods.add(f"p{tick}")
        if b.ready(set(pods), t):
            fired.append(t)
    assert fired == [10.0]


def test_batcher_retries_still_pending_pods_every_max_window() -> None:
    b = Batcher(idle=1.0, maximum=10.0)
    assert b.ready({"a"}, 0.0) is False
    assert b.ready({"a"}, 1.0) is True
    assert b.ready({"a"}, 5.0) is False
    assert b.ready({"a"}, 11.0) is True
    assert b.ready(set(), 12.0) is False


def test_provisioner_creates_one_nodeclaim_for_the_batch(ctx, cluster, clock, caplog) -> None:
    for i in range(3):
        cluster.create(r.PODS, pending_pod(f"web-{i}"))
    ds_pod = pending_pod("fluentbit-x", ownerReferences=[{"kind": "DaemonSet", "name": "fluentbit"}])
    cluster.create(r.PODS, ds_pod)
    gated = pending_pod("gated")
    gated["spec"]["schedulingGates"] = [{"name": "wait"}]
    cluster.create(r.PODS, gated)
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=first_fit_solver)
    caplog.set_level(logging.INFO)
    assert prov.reconcile() is None  # batch window opens
    clock.advance(1.0)
    result = prov.reconcile()
    assert result is not None
    claims = cluster.list(r.NODECLAIMS)
    assert len(claims) == 1
    claim = claims[0]
    assert name_of(claim).startswith("general-") and len(name_of(claim)) == len("general-") + 5
    assert claim["metadata"]["labels"] == {L.NODEPOOL: "general", "team": "web", L.EC2NODECLASS: "default"}
    assert claim["metadata"]["finalizers"] == [L.TERMINATION_FINALIZER]
    assert claim["spec"]["resources"]["requests"] == {"cpu": "1500m", "memory": "1536Mi", "pods": "3"}
    assert claim["spec"]["terminationGracePeriod"] == "10m"
    itypes = next(q for q in claim["spec"]["requirements"] if q["key"] == L.INSTANCE_TYPE)
    assert itypes["values"] == ["c5.large", "m5.large", "m5.xlarge"]
    messages = [rec.getMessage() for rec in caplog.records]
    assert "Found 3 provisionable pod(s)" in messages
    assert "Computed 1 new node(s) will fit 3 pod(s)" in messages
    assert any(m.startswith("Launching node with 3 pods requesting") for m in messages)
    assert ctx.metrics.value("karpenter_nodeclaims_created_total",
                             {"reason": "provisioned", "nodepool": "general", "min_values_relaxed": "false"}) == 1.0
    assert ctx.metrics.value("karpenter_scheduler_unschedulable_pods_count", {"controller": "provisioner"}) == 0.0
    # The instance types the NodePool may launch (the fake catalog: m5.xlarge 4 vCPU / 16 GiB, $0.192 / $0.080 spot).
    assert ctx.metrics.value("karpenter_cloudprovider_instance_type_cpu_cores", {"instance_type": "m5.xlarge"}) == 4.0
    assert ctx.metrics.value("karpenter_cloudprovider_instance_type_memory_bytes",
                             {"instance_type": "m5.xlarge"}) == 16 * 2.0**30
    offering = {"instance_type": "m5.xlarge", "capacity_type": "spot", "zone": "us-east-1b"}
    assert ctx.metrics.value("karpenter_cloudprovider_instance_type_offering_price_estimate", offering) == 0.080
    assert ctx.metrics.value("karpenter_cloudprovider_instance_type_offering_available", offering) == 1.0
    # Nominated pods do not trigger another NodeClaim in later batches.
    clock.advance(11.0)
    prov.reconcile()
    clock.advance(11.0)
    prov.reconcile()
    assert len(cluster.list(r.NODECLAIMS)) == 1


def test_pods_of_a_deleted_nodeclaim_are_provisioned_again(ctx, cluster, clock) -> None:
    cluster.create(r.PODS, pending_pod("web-0"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=first_fit_solver)
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    first = cluster.list(r.NODECLAIMS)[0]
    cluster.patch(r.NODECLAIMS, name_of(first), {"metadata": {"finalizers": None}})
    cluster.delete(r.NODECLAIMS, name_of(first))
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    claims = cluster.list(r.NODECLAIMS)
    assert len(claims) == 1 and name_of(claims[0]) != name_of(first)


def _bind_mode_launched(ctx, cluster, clock, pods: int):
    """Bind mode: ``pods`` pending pods planned on one NodeClaim, launched (no Node yet)."""
    from nodewright.controllers.lifecycle import LifecycleController

    for i in range(pods):
        cluster.create(r.PODS, pending_pod(f"web-{i}"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), bind_pods=True, solver=first_fit_solver)
    life = LifecycleController(ctx, on_registered=prov.on_registered)
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    life.reconcile()
    return prov, life, cluster.list(r.NODECLAIMS)[0]


def test_bind_mode_binds_nominated_pods_on_registration(ctx, cluster, clock, cloud) -> None:
    prov, life, claim = _bind_mode_launched(ctx, cluster, clock, pods=2)
    # Someone else took one pod meanwhile: only the other is bound.
    cluster.patch(r.PODS, "web-1", {"spec": {"nodeName": "elsewhere"}}, "default")
    cluster.create(r.NODES, node_for(claim))
    life.reconcile()  # registered: karpenter.sh/unregistered (NoExecute) removed
    assert cluster.bindings == []  # not in the same pass: the taint-eviction controller may not have seen it go
    clock.advance(BIND_SETTLE)
    prov.reconcile()
    assert cluster.bindings == [("default", "web-0", "ip-10-0-0-1.ec2.internal")]
    assert cluster.get(r.PODS, "web-0", "default")["spec"]["nodeName"] == "ip-10-0-0-1.ec2.internal"


def test_bind_mode_waits_for_a_noexecute_taint_the_pod_does_not_tolerate(ctx, cluster, clock, cloud) -> None:
    """A pod bound to a Node with a NoExecute taint it does not tolerate is deleted by kube-controller-manager's
    taint-eviction controller at once: bind mode binds it only once the taint is gone."""
    prov, life, claim = _bind_mode_launched(ctx, cluster, clock, pods=1)
    node = node_for(claim)
    node["spec"]["taints"].append({"key": "example.com/draining", "effect": "NoExecute"})
    cluster.create(r.NODES, node)
    life.reconcile()
    for _ in range(3):
        clock.advance(BIND_SETTLE)
        prov.reconcile()
    assert cluster.bindings == []
    cluster.patch(r.NODES, "ip-10-0-0-1.ec2.internal", {"spec": {"taints": None}})
    for _ in range(40):
        clock.advance(0.25)
        prov.reconcile()
    assert cluster.bindings == [("default", "web-0", "ip-10-0-0-1.ec2.internal")]


def test_real_scheduler_plans_the_nodeclaim(ctx, cluster, clock) -> None:
    from nodewright.scheduling import schedule

    cluster.create(r.PODS, pending_pod("web-0", cpu="3", memory="1Gi"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)
    prov.reconcile()
    clock.advance(1.0)
    try:
        prov.reconcile()
    except NotImplementedError:
        pytest.skip("nodewright.scheduling.schedule is not implemented yet")
    claims = cluster.list(r.NODECLAIMS)
    assert len(claims) == 1
    itypes = next(q for q in claims[0]["spec"]["requirements"] if q["key"] == L.INSTANCE_TYPE)
    assert itypes["values"][0] == "m5.xlarge"


def test_bind_mode_retries_a_failed_bind_with_backoff_and_names_the_rbac_on_403(ctx, cluster, clock,
                                                                               caplog) -> None:
    from nodewright.controllers.lifecycle import LifecycleController
    from nodewright.kube.errors import KubeError

    caplog.set_level(logging.INFO, logger="nodewright.controllers")
    cluster.create(r.PODS, pending_pod("web-0"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), bind_pods=True, solver=first_fit_solver)
    life = LifecycleController(ctx, on_registered=prov.on_registered)
    real_bind, attempts = cluster.bind_pod, []

    def forbidden(namespace: str, name: str, node: str) -> None:
        attempts.append(clock())
        raise KubeError('pods "web-0" is forbidden: cannot create resource "pods/binding"', 403)

    cluster.bind_pod = forbidden
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    life.reconcile()
    claim = cluster.list(r.NODECLAIMS)[0]
    cluster.create(r.NODES, node_for(claim))
    life.reconcile()  # registration: the first bind BIND_SETTLE s later, refused
    assert prov.nominated_targets(snapshot(cluster)) == {name_of(claim), "ip-10-0-0-1.ec2.internal"}
    for _ in range(85):  # 8.5 s of 0.1 s passes
        clock.advance(0.1)
        prov.reconcile()
    gaps = [b - a for a, b in zip(attempts, attempts[1:], strict=False)]
    assert len(gaps) == 3 and all(abs(g - want) <= 0.15 for g, want in zip(gaps, (1.0, 2.0, 4.0), strict=True))
    events = [e for e in cluster.events if e["reason"] == "FailedBinding"]
    assert len(events) == 1 and "controller.bindPods=true" in events[0]["message"]
    errors = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.ERROR]
    assert len(errors) == 1 and "create on pods/binding" in errors[0]
    cluster.bind_pod = real_bind  # the chart upgraded with controller.bindPods=true
    clock.advance(8.0)
    prov.reconcile()
    assert cluster.bindings == [("default", "web-0", "ip-10-0-0-1.ec2.internal")]


def test_scheduler_queue_depth_unfinished_work_and_ignored_pods(ctx, cluster, clock) -> None:
    for i in range(3):
        cluster.create(r.PODS, pending_pod(f"web-{i}"))
    cluster.create(r.PODS, pending_pod("bad", cpu="lots"))  # an unreadable request: ignored
    seen: dict[str, float | None] = {}

    def solver(pods, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - the Solver signature
        samples = {s.name: s for f in ctx.metrics.registry.collect() for s in f.samples
                   if s.name.startswith("karpenter_scheduler_")}
        seen["depth"] = samples["karpenter_scheduler_queue_depth"].value
        seen["unfinished"] = samples["karpenter_scheduler_unfinished_work_seconds"].value
        seen["id"] = samples["karpenter_scheduler_unfinished_work_seconds"].labels["scheduling_id"]
        return first_fit_solver(pods, *args, **kwargs)

    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=solver)
    prov.reconcile()
    clock.advance(1.0)
    assert prov.reconcile() is not None
    assert seen["depth"] == 3 and seen["unfinished"] >= 0  # three readable pods in the batch; a live age
    assert ctx.metrics.value("karpenter_scheduler_ignored_pods_count") == 1
    labels = {"controller": "provisioner", "scheduling_id": seen["id"]}
    assert ctx.metrics.value("karpenter_scheduler_queue_depth", labels) == 3  # kept until the next run
    assert ctx.metrics.value("karpenter_scheduler_unfinished_work_seconds", labels) is None  # run finished
    cluster.create(r.PODS, pending_pod("web-late"))
    prov.reconcile()
    clock.advance(1.0)
    assert prov.reconcile() is not None
    assert ctx.metrics.value("karpenter_scheduler_queue_depth", labels) is None  # replaced by the new run's series
    assert seen["id"] != labels["scheduling_id"] and seen["depth"] == 1  # nominated pods are not handed again


def test_pod_provisioning_times_from_first_seen_to_decision_bind_and_start(ctx, cluster, clock) -> None:
    start = clock.now
    for i in range(2):
        cluster.create(r.PODS, pending_pod(f"web-{i}"))
    cluster.create(r.PODS, pending_pod("bad", cpu="lots"))
    metrics = ctx.metrics
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=first_fit_solver)
    prov.reconcile()  # first seen at start
    web0 = {"name": "web-0", "namespace": "default"}
    clock.advance(0.5)
    assert metrics.value("karpenter_pods_provisioning_scheduling_undecided_time_seconds", web0) == 0.5
    clock.advance(0.5)
    assert prov.reconcile() is not None  # decided at start + 1: two placed, "bad" ignored
    assert metrics.value("karpenter_pods_scheduling_decision_duration_seconds_count") == 3
    assert metrics.value("karpenter_pods_scheduling_decision_duration_seconds_sum") == 3.0
    assert metrics.value("karpenter_pods_provisioning_scheduling_undecided_time_seconds", web0) is None
    clock.advance(4.0)
    prov.reconcile()  # "bad" is still pending but decided: not undecided again
    assert metrics.value("karpenter_pods_provisioning_scheduling_undecided_time_seconds",
                         {"name": "bad", "namespace": "default"}) is None
    assert metrics.value("karpenter_pods_provisioning_unbound_time_seconds", web0) == 4.0
    # kube-scheduler binds web-0 at start + 31; it is Ready at start + 61.
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": format_time(start + 31)}
    cluster.patch(r.PODS, "web-0", {"spec": {"nodeName": "ip-10-0-0-1.ec2.internal"}}, "default")
    cluster.patch_status(r.PODS, "web-0", {"phase": "Pending", "conditions": [scheduled]}, "default")
    clock.now = start + 40
    prov.reconcile()
    assert metrics.value("karpenter_pods_provisioning_bound_duration_seconds_sum") == 30.0
    assert metrics.value("karpenter_pods_provisioning_unbound_time_seconds", web0) is None
    assert metrics.value("karpenter_pods_provisioning_unstarted_time_seconds", web0) == 39.0
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": format_time(start + 61)}
    cluster.patch_status(r.PODS, "web-0", {"phase": "Running", "conditions": [scheduled, ready]}, "default")
    clock.now = start + 70
    prov.reconcile()
    assert metrics.value("karpenter_pods_provisioning_startup_duration_seconds_count") == 1
    assert metrics.value("karpenter_pods_provisioning_startup_duration_seconds_sum") == 60.0
    assert metrics.value("karpenter_pods_provisioning_unstarted_time_seconds", web0) is None
    assert metrics.value("karpenter_pods_provisioning_unstarted_time_seconds",
                         {"name": "web-1", "namespace": "default"}) == 69.0


def test_provisioner_logs_the_schedulers_sentences_once(ctx, cluster, clock, caplog) -> None:
    """The scheduler logs nothing; the provisioner logs each of its sentences once, and a pod that still cannot
    be placed for the same reason is not reported again in later batches."""
    from nodewright.scheduling import schedule

    cluster.create(r.PODS, pending_pod("web-0", cpu="3", memory="1Gi"))
    cluster.create(r.PODS, pending_pod("huge-0", cpu="500", memory="1Gi"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)
    caplog.set_level(logging.DEBUG, logger="nodewright")
    prov.reconcile()
    clock.advance(1.0)
    result = prov.reconcile()
    assert result is not None
    messages = [rec.getMessage() for rec in caplog.records if rec.name != "nodewright.controllers"]
    assert messages == []  # nothing from nodewright.scheduling
    logged = [(rec.levelname, rec.getMessage()) for rec in caplog.records
              if not rec.getMessage().startswith("created nodeclaim")]
    assert logged == [(e.level, e.message) for e in result.events]
    assert [m for _, m in logged[:2]] == ["Found 2 provisionable pod(s)", "Computed 1 new node(s) will fit 1 pod(s)"]
    assert logged[2][1].startswith("Launching node with 1 pods requesting {cpu: 3, memory: 1Gi, pods: 1} from types "
                                   "m5.xlarge")
    assert logged[3][0] == "ERROR"
    assert logged[3][1].startswith('Could not schedule pod default/huge-0, incompatible with nodepool "general", ')
    caplog.clear()
    clock.advance(11.0)
    assert prov.reconcile() is not None  # the huge pod is retried
    assert [rec.getMessage() for rec in caplog.records] == ["Found 1 provisionable pod(s)"]
