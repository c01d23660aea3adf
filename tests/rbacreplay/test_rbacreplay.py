"""The RBAC replay's parts against Kubernetes' documented semantics, and the chart's rules against what the
controller sends: every recorded request allowed, the cut and dangerous ones refused, the messages exact."""

from __future__ import annotations

import pytest

from .access import Access, UnmappedRequest, accesses
from .recorded import LEASE, RECORDED, REFUSED
from .recorder import Recorder, Tally
from .rules import Rule, chart_rules, judge, unused


def test_requests_become_verbs_resources_and_names():
    assert accesses("GET", "/apis/karpenter.sh/v1/nodeclaims", {"watch": "true"}) == [
        Access("watch", "karpenter.sh", "nodeclaims")]
    assert accesses("GET", "/api/v1/namespaces") == [Access("list", "", "namespaces")]
    assert accesses("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x") == [
        Access("get", "coordination.k8s.io", "leases", "kube-system", "x")]
    assert accesses("POST", "/api/v1/namespaces/default/pods/web-0/eviction") == [
        Access("create", "", "pods/eviction", "default", "web-0")]
    assert accesses("PATCH", "/apis/karpenter.sh/v1/nodeclaims/a/status") == [
        Access("patch", "karpenter.sh", "nodeclaims/status", "", "a")]
    assert accesses("DELETE", "/api/v1/namespaces/default/pods") == [
        Access("deletecollection", "", "pods", "default")]
    assert accesses("GET", "/version") == [Access("get", "", "nonResourceURL:/version")]
    with pytest.raises(UnmappedRequest, match="not a Kubernetes resource path"):
        accesses("GET", "/metrics/x")


def test_block_owner_deletion_implies_update_on_the_owners_finalizers():
    body = {"metadata": {"ownerReferences": [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "general", "blockOwnerDeletion": True},
        {"apiVersion": "v1", "kind": "Node", "name": "n"}]}}
    assert accesses("POST", "/apis/karpenter.sh/v1/nodeclaims", body=body) == [
        Access("create", "karpenter.sh", "nodeclaims"),
        Access("update", "karpenter.sh", "nodepools/finalizers", "", "general",
               why="blockOwnerDeletion on create nodeclaims")]


def _access(verb: str, group: str, resource: str, name: str) -> Access:
    namespace = "kube-system" if resource == "leases" else ("default" if resource in ("pods", "pods/eviction",
                                                                                      "pods/binding", "events",
                                                                                      "secrets") else "")
    return Access(verb, group, resource, namespace, name)


@pytest.fixture(scope="module")
def rules() -> tuple[Rule, ...]:
    try:
        return chart_rules()
    except FileNotFoundError as err:
        pytest.skip(str(err))


def test_the_chart_allows_every_recorded_request_and_refuses_the_rest(rules):
    assert [a for a in RECORDED if not judge(_access(*a), rules)[0]] == []
    assert [a for a in REFUSED if judge(_access(*a), rules)[0]] == []
    unexplained = [u for u in unused({(g, r, v) for v, g, r, _ in RECORDED}, rules) if "(expected:" not in u]
    assert unexplained == []


def test_a_denial_names_verb_resource_object_and_the_closest_rule(rules):
    tally = Tally(accesses={_access("update", "coordination.k8s.io", "leases", "kube-controller-manager"),
                            _access("update", "karpenter.sh", "nodeclaims", "a"), _access("get", "", "secrets", "s")})
    assert Recorder.denials(tally, "t", rules) == [
        "RBAC replay DENIED get core/secrets s in default: no rule names core/secrets (in t)",
        "RBAC replay DENIED update coordination.k8s.io/leases kube-controller-manager in kube-system: closest rule "
        "Role/nodewright: ['coordination.k8s.io'] ['leases'] ['get', 'update'] "
        f"resourceNames=['{LEASE}'] (resourceNames ['{LEASE}'] do not include 'kube-controller-manager') (in t)",
        "RBAC replay DENIED update karpenter.sh/nodeclaims a: closest rule ClusterRole/nodewright: ['karpenter.sh'] "
        "['nodepools', 'nodeclaims', 'nodeoverlays'] ['list', 'watch'] (verbs ['list', 'watch'] lack 'update') (in t)"]


def test_the_rules_before_the_cut_had_unused_grants_and_covered_the_control_planes_leases():
    """The Role and a part of the ClusterRole as they were before #27: the replay lists what no request used."""
    old = (Rule("Role/nodewright", "kube-system", ("coordination.k8s.io",), ("leases",),
                ("get", "list", "watch", "create", "update", "patch")),
           Rule("ClusterRole/nodewright", "", ("karpenter.sh",), ("nodeclaims",), ("create", "patch", "update",
                                                                                  "delete")))
    assert judge(_access("update", "coordination.k8s.io", "leases", "kube-controller-manager"), old)[0]
    # ... and they lacked what the EC2NodeClass finalizer sends.
    classes = (Rule("ClusterRole/nodewright", "", ("karpenter.k8s.aws",), ("ec2nodeclasses", "ec2nodeclasses/status"),
                    ("get", "list", "watch")),
               Rule("ClusterRole/nodewright", "", ("karpenter.k8s.aws",), ("ec2nodeclasses/status",),
                    ("patch", "update")))
    assert judge(_access("patch", "karpenter.k8s.aws", "ec2nodeclasses", "default"), classes) == (
        False, "closest rule ClusterRole/nodewright: ['karpenter.k8s.aws'] ['ec2nodeclasses', "
               "'ec2nodeclasses/status'] ['get', 'list', 'watch'] (verbs ['get', 'list', 'watch'] lack 'patch')")
    assert unused({(g, r, v) for v, g, r, _ in RECORDED}, old) == [
        "Role/nodewright: list coordination.k8s.io/leases", "Role/nodewright: watch coordination.k8s.io/leases",
        "Role/nodewright: patch coordination.k8s.io/leases", "ClusterRole/nodewright: update karpenter.sh/nodeclaims"]


def test_an_explained_rule_is_listed_with_its_reason():
    rules = (Rule("ClusterRole/nodewright", "", ("",), ("pods/status",), ("patch",)),)
    assert unused(set(), rules) == ["ClusterRole/nodewright: patch core/pods/status (expected: pod nomination "
                                    "(issue #25) patches the nominated pods' status)"]
