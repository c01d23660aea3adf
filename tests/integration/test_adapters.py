"""nodewright's adapters (``KubernetesCluster``, ``Informer``, ``LeaderElector``) over HTTP against the emulator."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from nodewright.backoff import Backoff
from nodewright.kube import resources as r
from nodewright.kube.client import KubernetesCluster
from nodewright.kube.errors import (
    AlreadyExistsError,
    ConflictError,
    KubeError,
    NotFoundError,
    TooManyRequestsError,
)
from nodewright.kube.informer import Informer
from nodewright.kube.leaderelection import LeaderElector, LeaseConfig
from nodewright.kube.rest import RestClient

from .emulator import EmulatorThread
from .harness import wait_for


def pod(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "labels": labels or {}}, "spec": spec}


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def cluster(rest: RestClient, stop: threading.Event) -> KubernetesCluster:
    cluster = KubernetesCluster(rest, time.time, kinds=(r.PODS, r.NODES, r.NODECLAIMS, r.PDBS), watch_timeout=30)
    cluster.start(stop)
    assert cluster.wait_for_sync(5)
    return cluster


def test_cache_follows_other_writers_and_reflects_own_writes_at_once(cluster: KubernetesCluster,
                                                                     core: k8s.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod("a", {"app": "web"}))
    core.create_namespaced_pod("default", pod("b", {"app": "db"}))
    wait_for(lambda: len(cluster.list(r.PODS)) == 2, 5, "two pods in the cache")
    assert [p["metadata"]["name"] for p in cluster.list(r.PODS, label_selector={"app": "web"})] == ["a"]
    assert cluster.get(r.PODS, "a", "default")["kind"] == "Pod"  # restored on list items
    created = cluster.create(r.NODES, {"metadata": {"name": "n1", "labels": {"zone": "a"}}})
    assert cluster.get(r.NODES, "n1") == created  # no wait for the watch
    patched = cluster.patch(r.NODES, "n1", {"metadata": {"labels": {"zone": "b"}}})
    assert cluster.get(r.NODES, "n1")["metadata"]["labels"] == {"zone": "b"}
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    core.delete_namespaced_pod("b", "default")
    wait_for(lambda: cluster.get(r.PODS, "b", "default") is None, 5, "the delete to arrive")
    time.sleep(0.3)  # a late watch event of the older version must not overwrite the newer own write
    assert cluster.get(r.NODES, "n1")["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


def test_writes_map_api_errors(cluster: KubernetesCluster, core: k8s.CoreV1Api) -> None:
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
             "metadata": {"generateName": "general-", "finalizers": ["karpenter.sh/termination"]},
             "spec": {"requirements": []}, "status": {"providerID": "ignored-on-create"}}
    created = cluster.create(r.NODECLAIMS, claim)
    name = created["metadata"]["name"]
    assert "status" not in created
    with pytest.raises(AlreadyExistsError):
        cluster.create(r.NODECLAIMS, {**claim, "metadata": {"name": name}})
    with_status = cluster.patch_status(r.NODECLAIMS, name, {"providerID": "aws:///us-east-1a/i-1"})
    assert with_status["status"] == {"providerID": "aws:///us-east-1a/i-1"}
    with pytest.raises(ConflictError):
        cluster.patch(r.NODECLAIMS, name, {"metadata": {"labels": {"a": "b"},
                                                        "resourceVersion": created["metadata"]["resourceVersion"]}})
    cluster.delete(r.NODECLAIMS, name)
    assert cluster.get(r.NODECLAIMS, name)["metadata"]["deletionTimestamp"]  # the finalizer holds it
    with pytest.raises(NotFoundError):
        cluster.patch(r.NODECLAIMS, "missing", {"metadata": {"labels": {"a": "b"}}})
    cluster.create(r.PODS, pod("a", {"app": "web"}))
    cluster.bind_pod("default", "a", "n1")
    with pytest.raises(ConflictError):
        cluster.bind_pod("default", "a", "n2")
    core.patch_namespaced_pod_status("a", "default", {"status": {"conditions": [{"type": "Ready",
                                                                                   "status": "True"}]}})
    cluster.create(r.PDBS, {"metadata": {"name": "web", "namespace": "default"},
                            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    with pytest.raises(TooManyRequestsError):
        cluster.evict_pod("default", "a")
    with pytest.raises(NotFoundError):
        cluster.evict_pod("default", "missing")
    cluster.record_event(created, "Launched", "Launched c5.large")
    events = core.list_namespaced_event("default").items
    assert [(e.reason, e.involved_object.kind, e.involved_object.name) for e in events] == [
        ("Launched", "NodeClaim", name)]


def _informer(rest: RestClient, seen: list[tuple[str, str]]) -> Informer:
    informer = Informer(rest, r.PODS, watch_timeout=30, backoff=Backoff(initial=0.05, maximum=0.2))
    informer.add_handler(lambda event, obj: seen.append((event, obj["metadata"]["name"])))
    return informer


def test_informer_resumes_a_broken_watch_from_its_last_version(rest: RestClient, core: k8s.CoreV1Api,
                                                               kube: EmulatorThread,
                                                               stop: threading.Event) -> None:
    core.create_namespaced_pod("default", pod("a"))
    seen: list[tuple[str, str]] = []
    informer = _informer(rest, seen)
    threading.Thread(target=informer.run, args=(stop,), daemon=True).start()
    wait_for(lambda: kube.emulator.live_watches("pods") == 1, 5, "the watch")
    kube.call(lambda: (kube.emulator.break_watches("pods"), kube.emulator.delete_object("pods", "a", "default")))
    core.create_namespaced_pod("default", pod("b"))
    wait_for(lambda: ("ADDED", "b") in seen, 5, "b")
    assert seen == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "b")]  # each change exactly once
    assert informer.stats["lists"] == 1 and informer.stats["errors"] == 1 and informer.stats["watches"] == 2
    assert kube.emulator.calls[("list", "pods")] == 1


def test_informer_relists_on_410_gone_with_synthetic_deletes(rest: RestClient, core: k8s.CoreV1Api,
                                                             kube: EmulatorThread, stop: threading.Event) -> None:
    core.create_namespaced_pod("default", pod("a"))
    core.create_namespaced_pod("default", pod("keep"))
    seen: list[tuple[str, str]] = []
    informer = _informer(rest, seen)
    threading.Thread(target=informer.run, args=(stop,), daemon=True).start()
    wait_for(lambda: kube.emulator.live_watches("pods") == 1, 5, "the watch")
    kube.call(lambda: (kube.emulator.break_watches("pods"), kube.emulator.delete_object("pods", "a", "default"),
                       kube.emulator.compact()))
    wait_for(lambda: informer.stats["gone"] == 1 and informer.stats["lists"] == 2, 5, "the relist")
    assert sorted(p["metadata"]["name"] for p in informer.items()) == ["keep"]
    assert ("DELETED", "a") in seen and seen.count(("ADDED", "keep")) == 1
    core.create_namespaced_pod("default", pod("c"))
    wait_for(lambda: informer.get("default/c"), 5, "c after the relist")


def test_leader_election_over_http(rest: RestClient, kube: EmulatorThread) -> None:
    cluster = KubernetesCluster(rest, time.time, kinds=())
    config = LeaseConfig(namespace="kube-system", name="nodewright-it", lease_duration=2.0, renew_deadline=1.5,
                         retry_period=0.2)
    now = [1000.0]
    a = LeaderElector(cluster, "a", config, lambda: now[0])
    b = LeaderElector(cluster, "b", config, lambda: now[0])
    assert a.step() and not b.step()
    now[0] += 1.0
    assert a.step() and not b.step()  # a renews; b has seen a change within the lease
    a.release()
    assert b.step()
    lease = kube.emulator.peek("leases", "nodewright-it", "kube-system")
    assert lease is not None
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("b", 1)
    now[0] += 1.0
    assert not a.step()  # b holds it and renews
    now[0] += 1.0  # b stops renewing: a waits out the 2 s lease by its own clock, then takes over
    assert not a.step()
    now[0] += 1.0
    assert a.step() and kube.emulator.peek("leases", "nodewright-it", "kube-system")["spec"]["holderIdentity"] == "a"


def test_releasing_the_last_finalizer_never_resurrects_the_object(cluster: KubernetesCluster,
                                                                  kube: EmulatorThread) -> None:
    """Regression: the answer to the finalizer-removing PATCH may arrive after the watch's DELETED; reflecting
    it used to put the deleted Node back into the cache for good, and NodeClaim termination waited forever."""
    cluster.create(r.NODES, {"metadata": {"name": "n1", "finalizers": ["karpenter.sh/termination"]}})
    cluster.delete(r.NODES, "n1")
    informer = cluster.informers[r.NODES]
    wait_for(lambda: (informer.get("n1") or {}).get("metadata", {}).get("deletionTimestamp"), 5, "deleting")
    released = cluster.rest.request("PATCH", r.NODES.object_path("n1"), body={"metadata": {"finalizers": None}},
                                    content_type="application/merge-patch+json")
    assert released["metadata"]["deletionTimestamp"] and not released["metadata"].get("finalizers")
    wait_for(lambda: informer.get("n1") is None, 5, "the watch's DELETED")
    informer.apply_local("MODIFIED", released)  # the late answer, as KubernetesCluster.patch reflects it
    assert informer.get("n1") is None and cluster.get(r.NODES, "n1") is None


def test_refused_writes_back_off_per_object_and_verb(rest: RestClient, kube: EmulatorThread,
                                                     core: k8s.CoreV1Api) -> None:
    """A Node registration write refused with 403 is not repeated on every reconcile: until the object's delay has
    passed, the adapter answers with the last refusal and the API server sees nothing (field report: 34 tries in
    4 s)."""
    now = [1000.0]
    cluster = KubernetesCluster(rest, lambda: now[0], kinds=())
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    kube.emulator.rbac_rules = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "delete"]}]
    for _ in range(34):  # one reconcile every 0.1 s for 3.4 s
        with pytest.raises(KubeError) as err:
            cluster.patch(r.NODES, "n1", {"metadata": {"labels": {"karpenter.sh/registered": "true"}}})
        assert err.value.status == 403
        now[0] += 0.1
    # 0.5 s doubling with up to 20 % jitter: attempts at 0, ~0.5, ~1.5, ~3.5 s at most.
    assert 3 <= kube.emulator.forbidden.count(("patch", "nodes", "")) <= 4
    asked = kube.emulator.forbidden.count(("patch", "nodes", ""))
    for _ in range(2):  # the second at the same instant is answered locally, whatever the first met
        with pytest.raises(KubeError) as err:
            cluster.patch(r.NODES, "n1", {"metadata": {"labels": {"karpenter.sh/registered": "true"}}})
    assert err.value.status == 403 and "not retried yet: patch of Node n1 is backing off" in str(err.value)
    assert kube.emulator.forbidden.count(("patch", "nodes", "")) <= asked + 1
    cluster.delete(r.NODES, "n1")  # another verb on the same object is not held back
    kube.emulator.rbac_rules = None
    now[0] += 60
    with pytest.raises(NotFoundError):  # asked again once the delay passed (and answered truthfully)
        cluster.patch(r.NODES, "n1", {"metadata": {"labels": {"karpenter.sh/registered": "true"}}})
