"""In-memory cluster semantics, object helpers, PDB maths, leader election, informer, settings."""

from __future__ import annotations

import threading

import pytest

from nodewright.backoff import Backoff
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.errors import ConflictError, GoneError, KubeError, TooManyRequestsError
from nodewright.kube.informer import Informer
from nodewright.kube.leaderelection import LeaderElector, LeaseConfig
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import match_field_selector_string, match_label_selector_string, merge_patch
from nodewright.settings import load_settings


class Clock:
    def __init__(self) -> None:
        self.now = 1_784_548_800.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, node: str = "n1", labels: dict | None = None) -> dict:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "db"}},
            "spec": {"nodeName": node, "containers": []}, "status": {"phase": "Running"}}


def test_create_sets_server_metadata_and_conflicts() -> None:
    c = InMemoryCluster(Clock(), seed=3)
    obj = c.create(r.NODECLAIMS, {"metadata": {"generateName": "general-"}, "spec": {"a": 1}})
    assert obj["metadata"]["name"].startswith("general-") and len(obj["metadata"]["name"]) == 13
    assert obj["metadata"]["resourceVersion"] == "1" and obj["metadata"]["generation"] == 1
    assert obj["metadata"]["creationTimestamp"] == "2026-07-20T12:00:00Z"
    name = obj["metadata"]["name"]
    updated = c.patch(r.NODECLAIMS, name, {"spec": {"a": 2}})
    assert updated["metadata"]["generation"] == 2 and updated["metadata"]["resourceVersion"] == "2"
    with pytest.raises(ConflictError):
        c.patch(r.NODECLAIMS, name, {"metadata": {"resourceVersion": "1"}, "spec": {"a": 3}})
    assert obj["spec"] == {"a": 1}  # snapshots never change


def test_finalizers_defer_deletion_and_node_deletion_removes_its_pods() -> None:
    c = InMemoryCluster(Clock())
    c.create(r.NODES, {"metadata": {"name": "n1", "finalizers": ["karpenter.sh/termination"]}})
    c.create(r.PODS, pod("a"))
    c.delete(r.NODES, "n1")
    assert c.get(r.NODES, "n1")["metadata"]["deletionTimestamp"] == "2026-07-20T12:00:00Z"
    c.patch(r.NODES, "n1", {"metadata": {"finalizers": []}})
    assert c.get(r.NODES, "n1") is None
    assert c.get(r.PODS, "a", "default") is None


def test_eviction_honours_pdb_and_binding_conflicts() -> None:
    c = InMemoryCluster(Clock())
    c.create(r.PODS, pod("a"))
    c.create(r.PODS, pod("b"))
    c.create(r.PODS, pod("c"))
    c.create(r.PDBS, {"metadata": {"name": "db", "namespace": "default"},
                      "spec": {"minAvailable": "60%", "selector": {"matchLabels": {"app": "db"}}}})
    c.evict_pod("default", "a")
    with pytest.raises(TooManyRequestsError):
        c.evict_pod("default", "b")
    c.create(r.PODS, {"metadata": {"name": "p", "namespace": "default"}, "spec": {}})
    c.bind_pod("default", "p", "n2")
    assert c.get(r.PODS, "p", "default")["spec"]["nodeName"] == "n2"
    with pytest.raises(ConflictError):
        c.bind_pod("default", "p", "n3")


def test_merge_patch_and_selectors() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3}, "l": [2]}
    labels = {"app": "web", "tier": "fe"}
    assert match_label_selector_string("app=web,tier in (fe,be),!gpu", labels)
    assert not match_label_selector_string("app!=web", labels)
    assert match_field_selector_string("spec.nodeName=n1,status.phase!=Failed", pod("x"))


def test_leader_election_takeover_and_release() -> None:
    clock = Clock()
    c = InMemoryCluster(clock)
    cfg = LeaseConfig(lease_duration=10, renew_deadline=7, retry_period=2)
    a, b = LeaderElector(c, "a", cfg, clock), LeaderElector(c, "b", cfg, clock)
    assert a.step() is True and b.step() is False
    clock.now += 2
    assert a.step() is True and b.step() is False
    # a stops renewing (crash): b takes over once it saw no change for 10 s.
    for _ in range(4):
        clock.now += 2
        assert b.step() is False
    clock.now += 2
    assert b.step() is True
    assert c.get(r.LEASES, cfg.name, cfg.namespace)["spec"]["leaseTransitions"] == 1
    clock.now += 2
    assert a.is_leader is False and a.step() is False
    b.release()
    assert a.step() is True  # released lease is taken at once


class FakeRest:
    """Scripted REST: LIST answers and watch streams (lists of events or exceptions)."""

    def __init__(self, lists, watches):
        self.lists, self.watches, self.queries = list(lists), list(watches), []

    def request(self, method, path, query=None, body=None, **_):
        return self.lists.pop(0)

    def stream_lines(self, path, query, read_timeout, connect_timeout=10.0):
        self.queries.append(dict(query))
        script = self.watches.pop(0)
        if isinstance(script, Exception):
            raise script
        for event in script:
            if isinstance(event, Exception):
                raise event
            yield event


def node(name: str, rv: str) -> dict:
    return {"metadata": {"name": name, "resourceVersion": rv}}


def test_informer_resumes_relists_on_410_and_tracks_bookmarks() -> None:
    stop = threading.Event()
    rest = FakeRest(
        lists=[{"metadata": {"resourceVersion": "10"}, "items": [node("a", "5"), node("b", "6")]},
               {"metadata": {"resourceVersion": "30"}, "items": [node("a", "5"), node("c", "29")]}],
        watches=[
            [{"type": "ADDED", "object": node("x", "11")}, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
             KubeError("connection reset")],
            [{"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}],
            [{"type": "DELETED", "object": node("c", "31")}],
        ],
    )
    informer = Informer(rest, r.NODES, watch_timeout=5, backoff=Backoff(initial=0.0, jitter=0.0))  # type: ignore[arg-type]
    deleted = []
    informer.add_handler(lambda t, o: deleted.append(o["metadata"]["name"]) if t == "DELETED" else None)

    def stop_when_done(stop_event=stop):
        return not rest.watches

    original = informer.watch_once

    def watch_once(s):
        try:
            original(s)
        finally:
            if not rest.watches:
                stop.set()

    informer.watch_once = watch_once  # type: ignore[method-assign]
    informer.run(stop)
    assert [q.get("resourceVersion") for q in rest.queries] == ["10", "15", "30"]
    assert all(q["allowWatchBookmarks"] == "true" for q in rest.queries)
    assert informer.stats["gone"] == 1 and informer.stats["lists"] == 2 and informer.stats["errors"] == 1
    assert sorted(o["metadata"]["name"] for o in informer.items()) == ["a"]
    assert deleted == ["b", "x", "c"]


def test_informer_keeps_a_pod_in_graceful_deletion_and_drops_a_released_object() -> None:
    informer = Informer(FakeRest(lists=[], watches=[]), r.PODS)  # type: ignore[arg-type]
    terminating = {"metadata": {"name": "web", "namespace": "default", "resourceVersion": "7",
                                "deletionTimestamp": "2026-12-01T10:00:30Z", "deletionGracePeriodSeconds": 30}}
    informer.apply_local("MODIFIED", terminating)
    assert informer.get("default/web") == terminating  # still running out its grace period on the node
    released = {"metadata": {"name": "n", "resourceVersion": "8", "deletionTimestamp": "2026-12-01T10:00:00Z",
                             "deletionGracePeriodSeconds": 0, "finalizers": []}}
    informer.apply_local("MODIFIED", released)  # the answer to the write that removed the last finalizer
    assert informer.get("n") is None


def test_gone_error_is_a_kube_error() -> None:
    assert issubclass(GoneError, KubeError) and GoneError("x").status == 410


def test_settings_names_defaults_and_errors() -> None:
    s = load_settings({"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1", "BATCH_IDLE_DURATION": "500ms",
                       "DISABLE_LEADER_ELECTION": "true"}, {"metrics_port": 9090})
    assert (s.cluster_name, s.batch_idle_duration, s.batch_max_duration, s.metrics_port) == ("demo", 0.5, 10.0, 9090)
    assert s.leader_election is False and s.health_probe_port == 8081
    with pytest.raises(NodewrightValidationError, match="CLUSTER_NAME: required"):
        load_settings({"AWS_REGION": "us-east-1"})
    with pytest.raises(NodewrightValidationError, match="BATCH_IDLE_DURATION"):
        load_settings({"CLUSTER_NAME": "d", "AWS_REGION": "r", "BATCH_IDLE_DURATION": "20s"})


def test_bind_addresses_from_flags_and_env_and_their_errors() -> None:
    base = {"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1"}
    defaults = load_settings(base)
    assert (defaults.metrics_bind_address, defaults.health_probe_bind_address) == ("0.0.0.0", "0.0.0.0")
    s = load_settings({**base, "METRICS_BIND_ADDRESS": "127.0.0.1", "HEALTH_PROBE_BIND_ADDRESS": "::1"},
                      {"metrics_bind_address": "10.0.0.7"})
    assert (s.metrics_bind_address, s.health_probe_bind_address) == ("10.0.0.7", "::1")
    with pytest.raises(NodewrightValidationError) as err:
        load_settings({**base, "HEALTH_PROBE_BIND_ADDRESS": "127.0.0.1:8081"})
    assert str(err.value) == ("HEALTH_PROBE_BIND_ADDRESS: '127.0.0.1:8081' is not an IP address (e.g. 0.0.0.0, "
                              "127.0.0.1 or ::); the port is HEALTH_PROBE_PORT")


def test_runtime_endpoints_listen_on_the_configured_bind_addresses() -> None:
    from nodewright.runtime import Runtime

    settings = load_settings({"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1", "METRICS_PORT": "0",
                              "HEALTH_PROBE_PORT": "0", "METRICS_BIND_ADDRESS": "127.0.0.1",
                              "HEALTH_PROBE_BIND_ADDRESS": "127.0.0.2"})
    runtime = Runtime(InMemoryCluster(lambda: 0.0), object(), settings)  # type: ignore[arg-type]
    runtime.start_endpoints()
    try:
        assert [e.server.server_address[0] for e in runtime.endpoints] == ["127.0.0.1", "127.0.0.2"]
    finally:
        for endpoint in runtime.endpoints:
            endpoint.stop()
