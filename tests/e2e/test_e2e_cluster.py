"""Opt-in end to end against a real cluster: ``NODEWRIGHT_E2E_KUBECONFIG``, else the control plane of ``controlplane.py``.

The cluster must have the nodewright CRDs installed (``nodewright crds``). These tests only read and write
Kubernetes objects through the same adapters the controller uses (no EC2 launches): they check that the
informer syncs, that NodePools are listed, and that leader election works on a real Lease.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from nodewright.kube import resources as r
from nodewright.kube.client import KubernetesCluster
from nodewright.kube.errors import ConflictError
from nodewright.kube.leaderelection import LeaderElector, LeaseConfig
from nodewright.kube.rest import RestClient, load_api_client

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def rest(e2e_kubeconfig: str) -> RestClient:
    return RestClient(load_api_client(e2e_kubeconfig))


def test_informers_sync_and_list_nodes(rest: RestClient) -> None:
    stop = threading.Event()
    cluster = KubernetesCluster(rest, time.time, kinds=(r.NODES,), watch_timeout=30)
    name = f"nodewright-e2e-{uuid.uuid4().hex[:6]}"
    cluster.start(stop)
    try:
        assert cluster.wait_for_sync(60)
        rest.request("POST", r.NODES.collection_path(None), body={"apiVersion": "v1", "kind": "Node",
                                                                 "metadata": {"name": name}}, creating=True)
        deadline = time.monotonic() + 30
        while cluster.get(r.NODES, name) is None and time.monotonic() < deadline:
            time.sleep(0.1)  # the watch delivers another writer's Node
        assert cluster.get(r.NODES, name) is not None
    finally:
        stop.set()
        rest.request("DELETE", r.NODES.object_path(name))


def test_leader_election_on_a_real_lease(rest: RestClient) -> None:
    cluster = KubernetesCluster(rest, time.time, kinds=())
    cfg = LeaseConfig(namespace="default", name=f"nodewright-e2e-{uuid.uuid4().hex[:6]}",
                      lease_duration=4, renew_deadline=3, retry_period=1)
    a = LeaderElector(cluster, "a", cfg, time.time)
    b = LeaderElector(cluster, "b", cfg, time.time)
    try:
        assert a.step() and not b.step()
        a.release()
        assert b.step()
    finally:
        cluster.delete(r.LEASES, cfg.name, cfg.namespace)


def test_stale_resource_version_conflicts_like_the_emulator(rest: RestClient) -> None:
    """The integration emulator answers 409 to a write based on a stale resourceVersion; so must the cluster."""
    cluster = KubernetesCluster(rest, time.time, kinds=())
    name = f"nodewright-e2e-{uuid.uuid4().hex[:6]}"
    created = cluster.create(r.LEASES, {"metadata": {"name": name, "namespace": "default"},
                                        "spec": {"holderIdentity": "a"}})
    try:
        cluster.replace(r.LEASES, {**created, "spec": {"holderIdentity": "b"}})
        with pytest.raises(ConflictError):
            cluster.replace(r.LEASES, {**created, "spec": {"holderIdentity": "c"}})
    finally:
        cluster.delete(r.LEASES, name, "default")
