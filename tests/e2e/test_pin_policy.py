"""The readiness hold's guard in a real kube-apiserver (issue 25): the chart's ValidatingAdmissionPolicy lets the
controller's ServiceAccount add the hold's toleration to a pending pod and nothing else.

The chart is rendered with ``controller.nominationHold=true`` (release namespace ``kube-system``); its policy and
binding are applied to the control plane of ``controlplane.py``, and a namespaced Role grants the ServiceAccount
``patch`` on pods and pods/status (the chart's ClusterRole rules, kept out of the cluster-wide rules other suites apply). As that
ServiceAccount (impersonated by the admin) the test sends the merge patch the controller sends when it pins a pod
(``NominationController._pin``), then patches that go further, and nomination's ``pods/status`` patch (a
subresource the policy does not match); the admin's own update is not matched.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from rbacreplay.rules import NAMESPACE

from nodewright.controllers.nomination import hold_taint, hold_toleration
from nodewright.kube.errors import ConflictError, KubeError
from nodewright.kube.rest import MERGE_PATCH, RestClient, load_api_client

from .controlplane import ControlPlane, chart_documents

pytestmark = [pytest.mark.e2e]

SUBJECT = f"system:serviceaccount:{NAMESPACE}:nodewright"
TEST_NS = "pin-policy-e2e"
_VAP = "/apis/admissionregistration.k8s.io/v1"
_PLURAL = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
           "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}


def _create(rest: RestClient, path: str, body: dict[str, Any]) -> None:
    try:
        rest.request("POST", path, body=body, creating=True)
    except ConflictError:
        pass  # already there from an earlier run of the module in this session


@pytest.fixture(scope="module")
def clients(control_plane: ControlPlane) -> Iterator[tuple[RestClient, RestClient]]:
    admin = RestClient(load_api_client(control_plane.kubeconfig))
    policies = [d for d in chart_documents("controller.nominationHold=true") if d["kind"] in _PLURAL and d["metadata"]["name"].endswith("-pod-pin")]
    assert len(policies) == 2
    for doc in policies:
        _create(admin, f"{_VAP}/{_PLURAL[doc['kind']]}", doc)
    _create(admin, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEST_NS}})
    _create(admin, f"/apis/rbac.authorization.k8s.io/v1/namespaces/{TEST_NS}/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "pin"},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "patch"]}]})
    _create(admin, f"/apis/rbac.authorization.k8s.io/v1/namespaces/{TEST_NS}/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "pin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pin"},
        "subjects": [{"kind": "ServiceAccount", "name": "nodewright", "namespace": NAMESPACE}]})
    impersonated = load_api_client(control_plane.kubeconfig)
    impersonated.set_default_header("Impersonate-User", SUBJECT)
    yield admin, RestClient(impersonated)


def _pod(admin: RestClient, name: str) -> dict[str, Any]:
    """A pending pod (its nodeSelector matches no Node, so no kube-scheduler binds it)."""
    return admin.request("POST", f"/api/v1/namespaces/{TEST_NS}/pods", creating=True, body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeSelector": {"pin-policy-e2e": "nowhere"},
                 "containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}})


def _get(admin: RestClient, name: str) -> dict[str, Any]:
    return admin.request("GET", f"/api/v1/namespaces/{TEST_NS}/pods/{name}")


def _settled(admin: RestClient, name: str) -> dict[str, Any]:
    """A new pending pod, read again once kube-scheduler (when one runs) has marked it unschedulable, so the
    resourceVersion the patches carry stays current (bounded: 30 s)."""
    _pod(admin, name)
    deadline = time.monotonic() + 30
    while True:
        pod = _get(admin, name)
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "PodScheduled" for c in conditions) or time.monotonic() > deadline:
            return pod
        time.sleep(0.2)


def _patch(rest: RestClient, pod: dict[str, Any], spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    body = {"metadata": {"resourceVersion": pod["metadata"]["resourceVersion"], **meta}, "spec": spec}
    return rest.request("PATCH", f"/api/v1/namespaces/{TEST_NS}/pods/{pod['metadata']['name']}", body=body,
                        content_type=MERGE_PATCH)


def _pin(pod: dict[str, Any], claim: str = "service-abcde") -> dict[str, Any]:
    """The controller's pin body: the pod's tolerations plus the hold's (``NominationController._pin``)."""
    return {"tolerations": [*(pod["spec"].get("tolerations") or []), hold_toleration(hold_taint(claim))]}


def _refusal(rest: RestClient, pod: dict[str, Any], spec: dict[str, Any], **meta: Any) -> KubeError:
    with pytest.raises(KubeError) as caught:
        _patch(rest, pod, spec, **meta)
    return caught.value


def test_the_policy_type_checks_against_the_pod_schema(control_plane: ControlPlane,
                                                       clients: tuple[RestClient, RestClient]) -> None:
    """kube-controller-manager's policy status controller type-checks each expression against the Pod schema and
    reports warnings in ``status.typeChecking`` (a misspelt field would be one)."""
    if "kube-controller-manager" not in control_plane.processes:
        pytest.skip("kube-controller-manager is not running: nothing type-checks the policy")
    admin, _ = clients
    deadline = time.monotonic() + 30
    while True:
        status = admin.request("GET", f"{_VAP}/validatingadmissionpolicies/nodewright-pod-pin").get("status") or {}
        if status.get("observedGeneration") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert status.get("observedGeneration") == 1, status
    assert not (status.get("typeChecking") or {}).get("expressionWarnings"), status


def test_the_policy_admits_the_pin_and_refuses_anything_more(clients: tuple[RestClient, RestClient]) -> None:
    admin, controller = clients
    # The API server takes the new policy from its informer: wait (bounded) until it refuses an image change.
    _pod(admin, "probe")
    deadline = time.monotonic() + 30
    while True:
        probe = _get(admin, "probe")
        image = "registry.k8s.io/pause:3.9" if probe["spec"]["containers"][0]["image"].endswith("3.10") else \
            "registry.k8s.io/pause:3.10"  # a real change each time (an unchanged image passes the policy)
        try:
            _patch(controller, probe, {"containers": [{"name": "web", "image": image}]})
        except ConflictError:
            continue  # kube-scheduler wrote the pod's PodScheduled condition meanwhile
        except KubeError as err:
            assert err.status == 422, err
            break
        assert time.monotonic() < deadline, "the ValidatingAdmissionPolicy never took effect"
        time.sleep(0.5)

    pod = _settled(admin, "web-0")
    pinned = _patch(controller, pod, _pin(pod))
    assert hold_toleration(hold_taint("service-abcde")) in pinned["spec"]["tolerations"]
    assert _patch(controller, pinned, _pin(pinned, "service-fghij"))  # re-planned: a second hold's toleration

    fresh = _settled(admin, "web-1")
    image = _refusal(controller, fresh, {**_pin(fresh), "containers": [{"name": "web", "image": "evil:1"}]})
    assert image.status == 422 and "nodewright may change a pod's tolerations only" in str(image)
    other = _refusal(controller, fresh, {"tolerations": [*(fresh["spec"].get("tolerations") or []),
                                                         {"operator": "Exists"}]})
    assert other.status == 422 and "nodewright may add only the readiness hold's toleration" in str(other)
    label = _refusal(controller, fresh, _pin(fresh), labels={"app": "other"})
    assert label.status == 422 and "may not change a pod's labels" in str(label)

    # Nomination writes pods/status, a subresource the policy does not match.
    nominated = controller.request("PATCH", f"/api/v1/namespaces/{TEST_NS}/pods/web-1/status",
                                   body={"status": {"nominatedNodeName": "ip-10-0-0-1"}}, content_type=MERGE_PATCH)
    assert nominated["status"]["nominatedNodeName"] == "ip-10-0-0-1"

    # Anyone else's update is not matched: the admin changes the image.
    fresh = _get(admin, "web-1")
    changed = _patch(admin, fresh, {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.9"}]})
    assert changed["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.9"
