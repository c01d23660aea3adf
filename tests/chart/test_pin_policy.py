"""The readiness hold's guard: the chart's ValidatingAdmissionPolicy that narrows ``patch`` on ``pods`` to the pin.

The CEL of ``templates/validatingadmissionpolicy-pin.yaml`` is evaluated with cel-python against the pod a merge
patch would produce, with the toleration the controller really adds (``hold_toleration``). The same policy runs in a
real kube-apiserver in ``tests/e2e/test_pin_policy.py``.
"""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest
from chart_helpers import find, one

from nodewright.controllers.nomination import hold_taint, hold_toleration

pytestmark = pytest.mark.chart

ENV = celpy.Environment()
PENDING: dict[str, Any] = {
    "metadata": {"name": "web-0", "namespace": "shop", "labels": {"app": "web"},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1"}]},
    "spec": {"containers": [{"name": "web", "image": "web:1", "resources": {"requests": {"cpu": "1"}}}],
             "terminationGracePeriodSeconds": 30,
             "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                              "tolerationSeconds": 300}]},
}


def _policy(render) -> dict[str, Any]:
    return one(render("controller.nominationHold=true", namespace="karpenter"), "ValidatingAdmissionPolicy",
               "nodewright-pod-pin")


def _denials(policy: dict[str, Any], old: dict[str, Any], new: dict[str, Any],
             user: str = "system:serviceaccount:karpenter:nodewright") -> list[str]:
    """The messages of the policy's failing validations for ``user`` updating ``old`` to ``new`` (none when its
    match condition does not match)."""
    activation = {"object": celpy.json_to_cel(new), "oldObject": celpy.json_to_cel(old),
                  "request": celpy.json_to_cel({"operation": "UPDATE", "userInfo": {"username": user}})}

    def holds(expression: str) -> bool:
        return bool(ENV.program(ENV.compile(expression)).evaluate(activation))

    if not all(holds(c["expression"]) for c in policy["spec"]["matchConditions"]):
        return []
    return [rule["message"] for rule in policy["spec"]["validations"] if not holds(rule["expression"])]


def _pinned(pod: dict[str, Any], claim: str = "service-abcde") -> dict[str, Any]:
    """``pod`` after the controller's pin: the merge patch ``{"spec": {"tolerations": [...old, hold]}}``."""
    new = copy.deepcopy(pod)
    new["spec"]["tolerations"] = [*pod["spec"].get("tolerations", []), hold_toleration(hold_taint(claim))]
    return new


def test_the_pin_is_admitted(render):
    policy = _policy(render)
    assert _denials(policy, PENDING, _pinned(PENDING)) == []
    bare = copy.deepcopy(PENDING)
    del bare["spec"]["tolerations"], bare["metadata"]["labels"]
    assert _denials(policy, bare, _pinned(bare)) == []  # a pod without tolerations or labels
    assert _denials(policy, PENDING, _pinned(_pinned(PENDING, "a"), "b")) == []  # re-planned: a second hold


@pytest.mark.parametrize(("change", "message"), [
    (lambda p: p["spec"]["containers"][0].update(image="evil:1"), "spec: nodewright may change a pod's tolerations"),
    (lambda p: p["spec"].update(initContainers=[{"name": "i", "image": "evil:1"}]), "spec: nodewright may change"),
    (lambda p: p["spec"].update(activeDeadlineSeconds=1), "spec: nodewright may change"),
    (lambda p: p["spec"].update(schedulingGates=[{"name": "x"}]), "spec: nodewright may change"),
    (lambda p: p["spec"].update(nodeSelector={"team": "a"}), "spec: nodewright may change"),
    (lambda p: p["metadata"]["labels"].update(app="other"), "metadata: nodewright may not change"),
    (lambda p: p["metadata"].update(annotations={"a": "b"}), "metadata: nodewright may not change"),
    (lambda p: p["metadata"].update(finalizers=["x"]), "metadata: nodewright may not change"),
    (lambda p: p["metadata"].pop("ownerReferences"), "metadata: nodewright may not change"),
    (lambda p: p["spec"]["tolerations"].append({"operator": "Exists"}), "spec.tolerations: nodewright may add only"),
    (lambda p: p["spec"]["tolerations"].append({"key": "nodewright.io/nominating", "operator": "Exists",
                                                "effect": "NoSchedule"}), "spec.tolerations: nodewright may add only"),
    (lambda p: p["spec"]["tolerations"].append({"key": "nodewright.io/nominating", "operator": "Equal", "value": "x",
                                                "effect": "NoExecute"}), "spec.tolerations: nodewright may add only"),
])
def test_anything_beyond_the_pin_is_refused(render, change, message):
    new = _pinned(PENDING)
    change(new)
    (denial,) = _denials(_policy(render), PENDING, new)
    assert denial.startswith(message)


def test_a_bound_pod_is_not_pinned(render):
    bound = copy.deepcopy(PENDING)
    bound["spec"]["nodeName"] = "ip-10-0-1-5"
    assert _denials(_policy(render), bound, _pinned(bound)) == [
        "nodewright may update a pod only while it is unbound (the readiness hold pins pending pods)"]


def test_only_the_charts_service_account_is_matched(render):
    policy = _policy(render)
    new = _pinned(PENDING)
    new["spec"]["containers"][0]["image"] = "web:2"
    assert _denials(policy, PENDING, new, user="system:serviceaccount:shop:deployer") == []
    assert _denials(policy, PENDING, new, user="system:serviceaccount:kube-system:nodewright") == []
    assert len(_denials(policy, PENDING, new)) == 1


def test_rendered_with_the_hold_only(render):
    docs = render("controller.nominationHold=true")
    policy = one(docs, "ValidatingAdmissionPolicy", "nodewright-pod-pin")
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}]
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert all(rule["reason"] == "Invalid" for rule in policy["spec"]["validations"])  # 422: one pod, not RBAC
    binding = one(docs, "ValidatingAdmissionPolicyBinding", "nodewright-pod-pin")
    assert binding["spec"] == {"policyName": "nodewright-pod-pin", "validationActions": ["Deny"]}
    assert not [d for d in find(render("controller.nominationHold=false"), "ValidatingAdmissionPolicy")
                if d["metadata"]["name"].endswith("-pod-pin")]
