"""Fixtures: an in-memory cluster with one NodePool + EC2NodeClass, a fake cloud, a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.controllers.common import Context
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics

from .fakes import FakeClock, FakeCloudProvider

NODEPOOL = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
    "spec": {"template": {"metadata": {"labels": {"team": "web"}}, "spec": {
        "requirements": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "terminationGracePeriod": "10m"}},
        "limits": {"cpu": "100"}},
}
NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
             "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]},
}


def pending_pod(name: str, cpu: str = "500m", memory: str = "512Mi", **meta: Any) -> dict[str, Any]:
    """A pod kube-scheduler marked Unschedulable."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}, **meta},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }


def node_for(claim: dict[str, Any], name: str = "ip-10-0-0-1.ec2.internal", ready: bool = True) -> dict[str, Any]:
    """The Node a kubelet would register for a launched NodeClaim."""
    status = claim["status"]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {L.HOSTNAME: name}},
        "spec": {"providerID": status["providerID"],
                 "taints": [{"key": L.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}]},
        "status": {"capacity": status["capacity"], "allocatable": status["allocatable"],
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cluster(clock: FakeClock) -> InMemoryCluster:
    c = InMemoryCluster(clock, seed=1)
    c.create(r.EC2NODECLASSES, NODECLASS)
    c.create(r.NODEPOOLS, NODEPOOL)
    return c


@pytest.fixture
def cloud(clock: FakeClock) -> FakeCloudProvider:
    return FakeCloudProvider(clock)


@pytest.fixture
def ctx(cluster: InMemoryCluster, cloud: FakeCloudProvider, clock: FakeClock) -> Context:
    return Context(cluster, cloud, clock, Metrics(), "demo")


def nomination_manager(ctx: Any, **options: Any) -> Any:
    """A ControllerManager with ``options`` and the real scheduler (the nomination tests)."""
    from nodewright.controllers.manager import ControllerManager, ControllerOptions
    from nodewright.scheduling import schedule

    manager = ControllerManager(ctx, ControllerOptions(**options))
    manager.provisioner.solver = schedule
    return manager


def planned_and_registered(manager: Any, cluster: InMemoryCluster, clock: FakeClock, pods: int = 2) -> dict[str, Any]:
    """Pods planned on one NodeClaim, launched, and its Node registered (not Ready); returns the NodeClaim."""
    for i in range(pods):
        cluster.create(r.PODS, pending_pod(f"web-{i}"))
    manager.step()
    clock.advance(1.0)
    manager.step()  # batch closed: one NodeClaim; lifecycle launches it
    (claim,) = cluster.list(r.NODECLAIMS)
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, claim["metadata"]["name"]), ready=False))
    clock.advance(1.0)
    manager.step()  # registered: nominated
    return claim
