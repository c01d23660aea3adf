"""The emulator itself, through the official ``kubernetes`` client: does it behave like an API server?"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from nodewright.kube import resources as r
from nodewright.kube.errors import ConflictError, KubeError, TooManyRequestsError
from nodewright.kube.rest import RestClient

from .emulator import EmulatorThread
from .harness import wait_for


def pod(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def nodepool(name: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {"requirements": []}}}, "status": {"nodes": 99}}


def status_of(err: ApiException) -> dict[str, Any]:
    return dict(json.loads(err.body))


def test_create_sets_server_metadata_and_increasing_resource_versions(core: k8s.CoreV1Api) -> None:
    a = core.create_namespaced_pod("default", pod("a"))
    b = core.create_namespaced_pod("default", pod("b"))
    assert a.metadata.uid and b.metadata.uid and a.metadata.uid != b.metadata.uid
    assert int(b.metadata.resource_version) == int(a.metadata.resource_version) + 1
    assert a.metadata.creation_timestamp is not None
    assert a.metadata.generation == 1
    assert a.status.phase == "Pending"  # a Pod's status is reset on create
    listed = core.list_namespaced_pod("default")
    assert listed.metadata.resource_version == b.metadata.resource_version
    assert [p.metadata.name for p in listed.items] == ["a", "b"]


def test_custom_object_create_returns_the_stored_object_without_status(custom: k8s.CustomObjectsApi) -> None:
    created = custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", nodepool("general"))
    assert created["kind"] == "NodePool" and created["metadata"]["name"] == "general"
    assert "status" not in created  # the status subresource ignores status on create
    with pytest.raises(ApiException) as err:
        custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", nodepool("general"))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"


def test_generate_name_spec_generation_and_status_subresource(custom: k8s.CustomObjectsApi) -> None:
    body = {**nodepool(""), "metadata": {"generateName": "general-"}}
    created = custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", body)
    name = created["metadata"]["name"]
    assert name.startswith("general-") and len(name) == len("general-") + 5
    # A status write through the main resource is ignored; a metadata change keeps the generation.
    labelled = custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", name,
                                                  {"metadata": {"labels": {"a": "b"}}, "status": {"nodes": 3}})
    assert labelled["metadata"]["generation"] == 1 and "status" not in labelled
    respecced = custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", name,
                                                   {"spec": {"weight": 5}})
    assert respecced["metadata"]["generation"] == 2
    with_status = custom.patch_cluster_custom_object_status("karpenter.sh", "v1", "nodepools", name,
                                                            {"status": {"nodes": 3}, "spec": {"weight": 9}})
    assert with_status["status"] == {"nodes": 3} and with_status["spec"]["weight"] == 5
    assert with_status["metadata"]["generation"] == 2


def test_label_and_field_selectors(core: k8s.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod("web-1", {"app": "web", "tier": "front"}, node="n1"))
    core.create_namespaced_pod("default", pod("web-2", {"app": "web"}, node="n2"))
    core.create_namespaced_pod("default", pod("db-1", {"app": "db"}))
    core.create_namespaced_pod("other", pod("web-3", {"app": "web"}))

    def names(**kwargs: Any) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(**kwargs).items]

    assert names(label_selector="app=web") == ["web-1", "web-2", "web-3"]
    assert names(label_selector="app=web,tier") == ["web-1"]
    assert names(label_selector="app in (db, cache)") == ["db-1"]
    assert names(label_selector="app notin (web),!tier") == ["db-1"]
    assert names(label_selector="app!=web") == ["db-1"]
    assert names(field_selector="spec.nodeName=n2") == ["web-2"]
    assert names(field_selector="spec.nodeName=,metadata.namespace=default") == ["db-1"]
    assert [p.metadata.name for p in core.list_namespaced_pod("other").items] == ["web-3"]


def test_stale_resource_version_conflicts_on_put_and_patch(core: k8s.CoreV1Api, rest: RestClient) -> None:
    created = core.create_namespaced_pod("default", pod("a"))
    stale = created.metadata.resource_version
    core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ConflictError):
        rest.request("PATCH", r.PODS.object_path("a", "default"),
                     body={"metadata": {"resourceVersion": stale, "labels": {"x": "2"}}},
                     content_type="application/merge-patch+json")
    body = core.read_namespaced_pod("a", "default").to_dict()
    body["metadata"]["resource_version"] = stale
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_pod("a", "default", k8s.ApiClient().sanitize_for_serialization(
            k8s.V1Pod(metadata=k8s.V1ObjectMeta(name="a", resource_version=stale, labels={"x": "3"}),
                      spec=created.spec)))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "Conflict"
    assert core.read_namespaced_pod("a", "default").metadata.labels == {"x": "1"}


def test_finalizers_delay_deletion_until_released(core: k8s.CoreV1Api) -> None:
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "finalizers": ["karpenter.sh/termination"]}}
    core.create_node(node)
    core.create_namespaced_pod("default", pod("bound", node="n1"))
    core.delete_node("n1")
    marked = core.read_node("n1")
    assert marked.metadata.deletion_timestamp is not None
    core.patch_node("n1", {"metadata": {"finalizers": ["karpenter.sh/termination", "sneaky/late"]}})
    assert core.read_node("n1").metadata.finalizers == ["karpenter.sh/termination"]  # none added while deleting
    core.patch_node("n1", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as err:
        core.read_node("n1")
    assert err.value.status == 404
    assert core.list_namespaced_pod("default").items == []  # pod GC removed the pod bound to the node


def test_binding_sets_node_and_condition_once(core: k8s.CoreV1Api, rest: RestClient) -> None:
    core.create_namespaced_pod("default", pod("a"))
    rest.request("POST", r.PODS.object_path("a", "default", "binding"),
                 body={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"},
                       "target": {"kind": "Node", "name": "n1"}})
    bound = core.read_namespaced_pod("a", "default")
    assert bound.spec.node_name == "n1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ConflictError):
        rest.request("POST", r.PODS.object_path("a", "default", "binding"),
                     body={"metadata": {"name": "a"}, "target": {"name": "n2"}})
    # The official client's bindings collection works too.
    core.create_namespaced_pod("default", pod("b"))
    core.create_namespaced_binding("default", k8s.V1Binding(metadata=k8s.V1ObjectMeta(name="b"),
                                                            target=k8s.V1ObjectReference(name="n2", kind="Node")),
                                   _preload_content=False)
    assert core.read_namespaced_pod("b", "default").spec.node_name == "n2"


def _ready(core: k8s.CoreV1Api, name: str) -> None:
    core.patch_namespaced_pod_status(name, "default", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}})


def test_eviction_honours_pod_disruption_budgets(core: k8s.CoreV1Api, rest: RestClient,
                                                 kube: EmulatorThread) -> None:
    kube.emulator.pod_grace_scale = None  # terminating pods stay until the test finishes them
    for name in ("web-1", "web-2"):
        core.create_namespaced_pod("default", pod(name, {"app": "web"}, node="n1"))
        _ready(core, name)
    k8s.PolicyV1Api(core.api_client).create_namespaced_pod_disruption_budget("default", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    rest.request("POST", r.PODS.object_path("web-1", "default", "eviction"),
                 body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1"}})
    with pytest.raises(TooManyRequestsError):
        rest.request("POST", r.PODS.object_path("web-2", "default", "eviction"),
                     body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-2"}})
    # The evicted pod is terminating (its 30 s grace period), not gone, and no longer counts as healthy.
    evicted = core.read_namespaced_pod("web-1", "default")
    assert evicted.metadata.deletion_grace_period_seconds == 30 and evicted.metadata.deletion_timestamp is not None
    assert kube.finish_pod("default", "web-1")
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["web-2"]
    assert kube.emulator.evictions == [("default", "web-1")]
    assert kube.emulator.refused_evictions == [("default", "web-2")]


def test_leases_take_turns_under_optimistic_concurrency(api_client: k8s.ApiClient) -> None:
    coordination = k8s.CoordinationV1Api(api_client)
    lease = coordination.create_namespaced_lease("kube-system", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}})
    lease.spec.holder_identity = "b"
    updated = coordination.replace_namespaced_lease("leader", "kube-system", lease)
    assert updated.spec.holder_identity == "b"
    lease.spec.holder_identity = "c"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        coordination.replace_namespaced_lease("leader", "kube-system", lease)
    assert err.value.status == 409
    assert coordination.read_namespaced_lease("leader", "kube-system").spec.holder_identity == "b"


def _watch(rest: RestClient, path: str, events: list[dict[str, Any]], errors: list[Exception], **query: Any) -> None:
    try:
        for event in rest.stream_lines(path, {"watch": "true", **query}, read_timeout=5):
            events.append(event)
    except Exception as err:  # the test inspects what ended the stream
        errors.append(err)


def _wait(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_watch_resumes_from_a_version_filters_and_sends_bookmarks(core: k8s.CoreV1Api, rest: RestClient) -> None:
    core.create_namespaced_pod("default", pod("before", {"app": "web"}))
    start = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod("after", {"app": "web"}))
    core.create_namespaced_pod("default", pod("db", {"app": "db"}))
    events: list[dict[str, Any]] = []
    errors: list[Exception] = []
    thread = threading.Thread(target=_watch, args=(rest, r.PODS.collection_path("default"), events, errors),
                              kwargs={"resourceVersion": start, "labelSelector": "app=web",
                                      "allowWatchBookmarks": "true", "timeoutSeconds": 1}, daemon=True)
    thread.start()
    _wait(lambda: any(e["type"] == "BOOKMARK" for e in events))
    core.patch_namespaced_pod("after", "default", {"metadata": {"labels": {"app": "db"}}})  # leaves the selector
    thread.join(5)
    assert not errors and not thread.is_alive()  # timeoutSeconds ended the stream cleanly
    changes = [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"]
    assert changes == [("ADDED", "after"), ("DELETED", "after")]
    bookmark = next(e for e in events if e["type"] == "BOOKMARK")
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(start) + 2


def test_compacted_history_answers_410_gone(core: k8s.CoreV1Api, rest: RestClient, kube: EmulatorThread) -> None:
    core.create_namespaced_pod("default", pod("a"))
    old = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod("b"))
    kube.compact()
    expired = list(rest.stream_lines(r.PODS.collection_path(), {"watch": "true", "resourceVersion": old},
                                     read_timeout=5))
    assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in expired] == [("ERROR", 410, "Expired")]
    current = core.list_namespaced_pod("default").metadata.resource_version
    events: list[dict[str, Any]] = []
    errors: list[Exception] = []
    _watch(rest, r.PODS.collection_path(), events, errors, resourceVersion=current, timeoutSeconds=0.3)
    assert events == [] and errors == []  # resuming from the current version is fine


def test_break_watches_drops_the_connection_mid_stream(core: k8s.CoreV1Api, rest: RestClient,
                                                       kube: EmulatorThread) -> None:
    events: list[dict[str, Any]] = []
    errors: list[Exception] = []
    thread = threading.Thread(target=_watch, args=(rest, r.NODES.collection_path(), events, errors),
                              kwargs={"timeoutSeconds": 30}, daemon=True)
    thread.start()
    _wait(lambda: kube.emulator.live_watches("nodes") == 1)
    core.create_node({"metadata": {"name": "n1"}})
    _wait(lambda: len(events) == 1)
    assert kube.break_watches("nodes") == 1
    thread.join(5)
    assert not thread.is_alive()
    assert len(errors) == 1 and "watch" in str(errors[0])  # a transport error, not a clean end
    assert [e["type"] for e in events] == ["ADDED"]


def test_graceful_pod_deletion_runs_out_the_grace_period(core: k8s.CoreV1Api, kube: EmulatorThread) -> None:
    kube.emulator.pod_grace_scale = 0.01  # 100 s of grace pass in 1 s
    core.create_namespaced_pod("default", {**pod("slow", {"app": "web"}, node="n1"),
                                           "spec": {**pod("slow", {}, node="n1")["spec"],
                                                    "terminationGracePeriodSeconds": 100}})
    core.create_namespaced_pod("default", pod("pending", {"app": "web"}))
    core.delete_namespaced_pod("slow", "default")
    core.delete_namespaced_pod("pending", "default")  # never scheduled: no kubelet, gone at once
    terminating = core.read_namespaced_pod("slow", "default")
    assert terminating.metadata.deletion_grace_period_seconds == 100
    assert kube.emulator.terminating_pods() == [("default", "slow")]
    assert kube.emulator.peek("pods", "pending") is None
    wait_for(lambda: kube.emulator.peek("pods", "slow") is None, 10, "the grace period to end")
    # A forced delete (grace 0) of a terminating pod removes it at once.
    kube.emulator.pod_grace_scale = None
    core.create_namespaced_pod("default", pod("stuck", {"app": "web"}, node="n1"))
    core.delete_namespaced_pod("stuck", "default")
    assert kube.emulator.terminating_pods() == [("default", "stuck")]
    core.delete_namespaced_pod("stuck", "default", grace_period_seconds=0)
    assert kube.emulator.peek("pods", "stuck") is None


def test_rbac_rules_refuse_what_they_leave_out_with_the_apiservers_message(core: k8s.CoreV1Api, rest: RestClient,
                                                                           kube: EmulatorThread) -> None:
    kube.emulator.rbac_rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create"]}]
    core.create_namespaced_pod("default", pod("a", {"app": "web"}))
    with pytest.raises(KubeError) as err:
        rest.request("POST", r.PODS.object_path("a", "default", "binding"),
                     body={"metadata": {"name": "a"}, "target": {"name": "n1"}})
    assert err.value.status == 403
    assert str(err.value) == ('HTTP 403 Forbidden: pods "a" is forbidden: User '
                              '"system:serviceaccount:kube-system:nodewright" cannot create resource "pods/binding" '
                              'in API group "" in the namespace "default"')
    assert kube.emulator.forbidden == [("create", "pods/binding", "")]


def test_owner_references_enforcement_needs_finalizers_update_on_the_owner(custom: k8s.CustomObjectsApi,
                                                                          kube: EmulatorThread) -> None:
    kube.emulator.owner_references_enforcement = True
    kube.emulator.rbac_rules = [{"apiGroups": ["karpenter.sh"], "resources": ["nodepools", "nodeclaims"],
                                 "verbs": ["get", "list", "create", "delete", "patch"]}]
    owner = custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"}, "spec": {}})
    ref = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "general",
           "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c", "ownerReferences": [ref]},
             "spec": {}}
    with pytest.raises(ApiException) as err:
        custom.create_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim)
    assert err.value.status == 403
    assert "cannot set blockOwnerDeletion" in json.loads(err.value.body)["message"]
    assert kube.emulator.forbidden == [("update", "nodepools/finalizers", "karpenter.sh")]
    kube.emulator.rbac_rules.append({"apiGroups": ["karpenter.sh"], "resources": ["nodepools/finalizers"],
                                     "verbs": ["update"]})
    custom.create_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim)


def test_a_new_node_is_not_ready_until_the_node_lifecycle_controller_sees_it_ready(core: k8s.CoreV1Api,
                                                                                   kube: EmulatorThread) -> None:
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                      "spec": {"taints": [{"key": "example.com/agent", "effect": "NoSchedule"}]}})
    taints = [(t.key, t.effect) for t in core.read_node("n1").spec.taints]
    assert taints == [("example.com/agent", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoSchedule")]
    core.patch_node_status("n1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    wait_for(lambda: [t.key for t in core.read_node("n1").spec.taints] == ["example.com/agent"], 5,
             "the not-ready taint to go")
    # A client writing the taint back (from a stale read) loses it again.
    core.patch_node("n1", {"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}})
    wait_for(lambda: not core.read_node("n1").spec.taints, 5, "the not-ready taint to go again")
