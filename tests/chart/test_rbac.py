"""RBAC: least privilege, no wildcards, exactly the verbs and resources the controllers use."""

from __future__ import annotations

import pytest
from chart_helpers import find, one

pytestmark = pytest.mark.chart

READ = ("list", "watch")  # informers: list + watch, reads served from their caches (no get)

# (apiGroup, resource) -> verbs; the contract documented in docs/chart.md ("RBAC"), cut to what the
# RBAC replay (tests/rbacreplay) recorded the controller sending across the integration suite.
CLUSTER_RULES: dict[tuple[str, str], set[str]] = {
    ("karpenter.sh", "nodepools"): {*READ},
    ("karpenter.sh", "nodepools/status"): {"patch"},
    ("karpenter.sh", "nodeclaims"): {*READ, "create", "patch", "delete"},
    ("karpenter.sh", "nodeclaims/status"): {"patch"},
    # NodeOverlay (gate NodeOverlay): read by the informers; ValidationSucceeded/Ready written by its controller.
    ("karpenter.sh", "nodeoverlays"): {*READ},
    ("karpenter.sh", "nodeoverlays/status"): {"patch"},
    # OwnerReferencesPermissionEnforcement: blockOwnerDeletion on NodeClaims (owner NodePool) and Nodes (owner
    # NodeClaim) needs update on the owner's finalizers.
    ("karpenter.sh", "nodepools/finalizers"): {"update"},
    ("karpenter.sh", "nodeclaims/finalizers"): {"update"},
    ("karpenter.k8s.aws", "ec2nodeclasses"): {*READ, "patch"},  # patch: the termination finalizer
    ("karpenter.k8s.aws", "ec2nodeclasses/status"): {"patch"},
    ("", "nodes"): {*READ, "patch", "delete"},
    ("", "pods"): {*READ, "delete", "patch"},  # patch: the readiness hold pins planned pods (issue 25; narrowed by a VAP)
    ("", "pods/eviction"): {"create"},
    ("", "events"): {"create"},
    ("", "persistentvolumeclaims"): {*READ},
    ("", "limitranges"): {*READ},
    ("", "namespaces"): {*READ},
    ("", "persistentvolumes"): {*READ},
    ("apps", "daemonsets"): {*READ},
    ("policy", "poddisruptionbudgets"): {*READ},
    ("storage.k8s.io", "storageclasses"): {*READ},
    ("storage.k8s.io", "csinodes"): {*READ},
    ("node.k8s.io", "runtimeclasses"): {*READ},
    # CapacityBuffers (controllers/buffer.py) and what they reference; their status.
    ("autoscaling.x-k8s.io", "capacitybuffers"): {*READ},
    ("autoscaling.x-k8s.io", "capacitybuffers/status"): {"patch"},
    ("", "podtemplates"): {*READ},
    ("apps", "deployments"): {*READ},
    ("apps", "replicasets"): {*READ},
    ("apps", "statefulsets"): {*READ},
    # The default topology spread's selectors (SCHEDULER_CONFIG; with the ReplicaSets and StatefulSets above).
    ("", "services"): {*READ},
    ("", "replicationcontrollers"): {*READ},
    # Nomination (issue 25, controller.nominatePods: true by default): status.nominatedNodeName only.
    ("", "pods/status"): {"patch"},
}


def _grants(rules: list[dict]) -> dict[tuple[str, str], set[str]]:
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


@pytest.mark.parametrize("variant", ["default", "minimal", "production", "bottlerocket", "custom-pools"])
def test_no_wildcards_and_no_dangerous_verbs(rendered, variant):
    for role in find(rendered[variant], "ClusterRole") + find(rendered[variant], "Role"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"{role['kind']} {field} has a wildcard: {rule}"
            assert "nonResourceURLs" not in rule
            # Dangerous verbs that would let the controller grow its own permissions.
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])


def test_cluster_role_grants_exactly_what_the_controllers_use(rendered):
    role = one(rendered["minimal"], "ClusterRole", "nodewright")
    assert _grants(role["rules"]) == CLUSTER_RULES
    # No access to secrets, configmaps or RBAC objects at all.
    groups_resources = {resource for _, resource in _grants(role["rules"])}
    assert not groups_resources & {"secrets", "configmaps", "clusterroles", "roles", "serviceaccounts"}


def test_pods_binding_only_in_bind_mode(rendered):
    assert ("", "pods/binding") not in _grants(one(rendered["minimal"], "ClusterRole")["rules"])
    grants = _grants(one(rendered["production"], "ClusterRole")["rules"])  # controller.bindPods: true
    assert grants.pop(("", "pods/binding")) == {"create"}
    assert grants == CLUSTER_RULES


def test_leases_are_namespaced_and_only_the_controllers_own_lease_may_change(rendered):
    role = one(rendered["minimal"], "Role", "nodewright")
    assert role["metadata"]["namespace"] == "kube-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"],
         "resourceNames": ["nodewright-leader-election"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}]
    assert ("coordination.k8s.io", "leases") not in _grants(one(rendered["minimal"], "ClusterRole")["rules"])


def test_bindings_tie_the_roles_to_the_service_account(rendered):
    subject = [{"kind": "ServiceAccount", "name": "nodewright", "namespace": "kube-system"}]
    crb = one(rendered["minimal"], "ClusterRoleBinding", "nodewright")
    assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nodewright"}
    assert crb["subjects"] == subject
    rb = one(rendered["minimal"], "RoleBinding", "nodewright")
    assert rb["metadata"]["namespace"] == "kube-system"
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "nodewright"}
    assert rb["subjects"] == subject


def test_pods_status_patch_only_with_nomination(render):
    """controller.nominatePods=false drops the pods/status rule and sets NOMINATE_PODS=false (issue 25)."""
    docs = render("controller.nominatePods=false")
    assert ("", "pods/status") not in _grants(one(docs, "ClusterRole")["rules"])
    env = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "NOMINATE_PODS", "value": "false"} in env


def test_nomination_hold_on_by_default(render):
    """The readiness hold (issue 25) is on by default: patch on pods (the hold pins the planned pods with a
    toleration; the ValidatingAdmissionPolicy of tests/chart/test_pin_policy.py narrows it), with or without
    nomination. controller.nominationHold=false sets NOMINATION_HOLD=false and withholds the verb."""
    def env(*sets: str) -> list[dict]:
        return one(render(*sets), "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]

    def pods(*sets: str) -> set[str]:
        return _grants(one(render(*sets), "ClusterRole")["rules"]).get(("", "pods"), set())

    off = {"name": "NOMINATION_HOLD", "value": "false"}
    assert off not in env() and not [e for e in env() if e["name"] == "NOMINATION_HOLD"]
    assert pods() == {"list", "watch", "delete", "patch"}
    assert off in env("controller.nominationHold=false")
    assert pods("controller.nominationHold=false") == {"list", "watch", "delete"}
    without = ("controller.nominatePods=false",)
    assert off not in env(*without) and {"name": "NOMINATE_PODS", "value": "false"} in env(*without)
    assert pods(*without) == {"list", "watch", "delete", "patch"}
    assert ("", "pods/status") not in _grants(one(render(*without), "ClusterRole")["rules"])
