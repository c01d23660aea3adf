"""Karpenter main ``scheduling/topology_test.go`` Context("DefaultConstraints"): cluster-default topology spread
from ``--scheduler-config`` / ``SCHEDULER_CONFIG`` (Karpenter #3205), given to pods with no constraints of their
own, with the selector kube-scheduler deduces from the Services and the RC/RS/SS that select the pod
(:mod:`nodewright.state.defaultspread`).

As in Karpenter's tests the pods are owned by a ReplicaSet selecting ``test: test`` (a ReplicaSet document with
``replicas: 0``, so it adds no pods of its own). The default NodePool allows zones us-east-1a/b/c.
"""

from __future__ import annotations

import json
from typing import Any

from .kit import APP, CAPACITY_TYPE, HOSTNAME, Z1, Z2, ZONE, node, nodepool, pod, pods, req, run, spread

ALL_CT = [req(CAPACITY_TYPE, "Exists")]


def pool(**kw: Any) -> dict[str, Any]:
    kw.setdefault("requirements", ALL_CT)
    return nodepool(**kw)


def defaults(*constraints: dict[str, Any]) -> dict[str, str]:
    """Controller settings with these ``podTopologySpread.defaultConstraints``."""
    return {"SCHEDULER_CONFIG": json.dumps({"podTopologySpread": {"defaultConstraints": list(constraints)}})}


def default(key: str, max_skew: int = 1, when: str = "DoNotSchedule", **extra: Any) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}


def replicaset(name: str = "rs", labels: dict[str, str] = APP) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 0, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": [{"name": "c"}]}}}}


def owned(count: int, prefix: str, rs: str = "rs", labels: dict[str, str] = APP, **kw: Any) -> list[dict[str, Any]]:
    return pods(count, prefix, labels=labels, owner=("ReplicaSet", rs), **kw)


ZONE_DEFAULT = default(ZONE)
HOSTNAME_DEFAULT = default(HOSTNAME)


def test_default_zonal_spread():
    # It("should apply default zonal spread to a pod that declares no constraints of its own")
    d = run(pool(), replicaset(), owned(4, "p"), settings=defaults(ZONE_DEFAULT))
    assert d.skew(ZONE) == [2, 1, 1]


def test_default_hostname_spread():
    # It("should apply default hostname spread to a pod that declares no constraints of its own")
    d = run(pool(), replicaset(), owned(3, "p"), settings=defaults(HOSTNAME_DEFAULT))
    assert d.skew(HOSTNAME) == [1, 1, 1]


def test_default_not_applied_to_pod_with_own_constraints():
    # It("should NOT apply the default to a pod that declares its own constraints")
    ps = owned(3, "p", spreads=[spread(HOSTNAME, 3)])
    d = run(pool(), replicaset(), ps, settings=defaults(HOSTNAME_DEFAULT))
    assert d.node_count(ps) == 1


def test_default_carries_min_domains():
    # It("should carry minDomains through a synthesized default")
    d = run(pool(zones=[Z1, Z2]), replicaset(), owned(3, "p"), settings=defaults(default(ZONE, minDomains=3)))
    assert d.skew(ZONE) == [1, 1]


def test_default_do_not_schedule_unsatisfiable():
    # It("should NOT schedule past a synthesized DoNotSchedule default that can't be satisfied")
    ps = owned(3, "p")
    d = run(pool(zones=[Z1]), replicaset(), ps, settings=defaults(default(ZONE, minDomains=3)))
    assert sum(d.scheduled(p) for p in ps) == 1


def test_default_schedule_anyway_relaxed():
    # It("should relax a synthesized ScheduleAnyway default when it can't be satisfied")
    ps = owned(3, "p")
    d = run(pool(zones=[Z1]), replicaset(), ps, settings=defaults(default(ZONE, when="ScheduleAnyway", minDomains=3)))
    assert all(d.scheduled(p) for p in ps)


def test_no_defaults_configured_is_noop():
    # It("should be a no-op when no default constraints are configured")
    ps = owned(3, "p")
    d = run(pool(), replicaset(), ps)
    assert d.node_count(ps) == 1


def test_no_default_without_owner_or_service():
    # It("should not apply the default to a pod with no owner and no matching service")
    ps = pods(3, "p", labels=APP)
    d = run(pool(), ps, settings=defaults(HOSTNAME_DEFAULT))
    assert d.node_count(ps) == 1


def test_default_counts_existing_pods_through_deduced_selector():
    # It("should count pre-existing cluster pods through the deduced selector")
    existing = [node("n1", zone=Z1),
                *(pod(f"old-{i}", labels=APP, owner=("ReplicaSet", "rs"), node_name="n1") for i in range(2))]
    new = owned(2, "new")
    d = run(pool(zones=[Z1, Z2]), replicaset(), existing, new, settings=defaults(ZONE_DEFAULT))
    assert [d.labels_of(p)[ZONE] for p in new] == [Z2, Z2]
    assert d.skew(ZONE) == [2, 2]


def test_default_spreads_each_workload_independently():
    # It("should spread each workload independently")
    other = {"test": "other"}
    d = run(pool(), replicaset(), replicaset("other", other), owned(3, "a"), owned(3, "b", "other", other),
            settings=defaults(ZONE_DEFAULT))
    assert not d.unschedulable
    assert d.skew(ZONE) == [1, 1, 1]
    assert d.skew(ZONE, labels=other) == [1, 1, 1]


def test_default_spreads_each_revision_independently():
    # It("should spread each Deployment revision independently")
    old = {"test": "test", "pod-template-hash": "old"}
    new = {"test": "test", "pod-template-hash": "new"}
    d = run(pool(), replicaset("old", old), replicaset("new", new), owned(3, "o", "old", old),
            owned(3, "n", "new", new), settings=defaults(ZONE_DEFAULT))
    assert not d.unschedulable
    assert d.skew(ZONE, labels=old) == [1, 1, 1]
    assert d.skew(ZONE, labels=new) == [1, 1, 1]


def test_default_selector_from_service_for_unsupported_owner():
    # It("should deduce a selector from a matching service for a pod with no supported owner")
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "default"},
               "spec": {"selector": dict(APP)}}
    job_pods = pods(4, "j", labels=APP)
    for p in job_pods:
        p["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "test-job",
                                             "uid": "test-job-uid", "controller": True}]
    d = run(pool(), service, job_pods, settings=defaults(ZONE_DEFAULT))
    assert d.skew(ZONE) == [2, 1, 1]
