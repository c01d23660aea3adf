"""The chart's RBAC proven by a real kube-apiserver's RBAC authorizer (issue #27 item 4).

The rendered chart's ClusterRole, ClusterRoleBinding, Role and RoleBinding (``tests/rbacreplay/rules.py``: the
``minimal`` values with ``controller.bindPods=true``, release namespace ``kube-system``) are applied to the control
plane of ``controlplane.py``; then, as the admin, one ``SubjectAccessReview`` per request the RBAC replay recorded
the controller sending (``tests/rbacreplay/recorded.py``) asks whether the chart's ServiceAccount
``system:serviceaccount:kube-system:nodewright`` may send it (Kubernetes "Authorization": checking API access).
Every recorded request must be allowed; the ones the chart was cut to refuse (update where the code patches, the
control plane's leases, Secrets) must be denied.
"""

from __future__ import annotations

from typing import Any

import pytest
from rbacreplay.recorded import RECORDED, REFUSED
from rbacreplay.rules import NAMESPACE

from nodewright.kube.errors import ConflictError
from nodewright.kube.rest import RestClient, load_api_client

from .controlplane import ControlPlane, chart_documents

pytestmark = [pytest.mark.e2e]

SUBJECT = f"system:serviceaccount:{NAMESPACE}:nodewright"
_RBAC = "/apis/rbac.authorization.k8s.io/v1"
_PLURAL = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
           "RoleBinding": "rolebindings"}


@pytest.fixture(scope="module")
def admin(control_plane: ControlPlane) -> RestClient:
    rest = RestClient(load_api_client(control_plane.kubeconfig))
    for doc in chart_documents("controller.bindPods=true"):
        if doc["kind"] not in _PLURAL:
            continue
        scope = f"/namespaces/{doc['metadata']['namespace']}" if doc["kind"].startswith("Role") else ""
        try:
            rest.request("POST", f"{_RBAC}{scope}/{_PLURAL[doc['kind']]}", body=doc, creating=True)
        except ConflictError:
            pass  # already applied by an earlier module of the session
    return rest


def _review(rest: RestClient, verb: str, group: str, resource: str, name: str) -> dict[str, Any]:
    plural, _, sub = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": plural, "subresource": sub, "name": name}
    if plural in ("leases",):
        attributes["namespace"] = NAMESPACE
    elif plural in ("pods", "events", "secrets"):
        attributes["namespace"] = "default"
    review = rest.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": SUBJECT, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}",
                                             "system:authenticated"], "resourceAttributes": attributes}})
    status: dict[str, Any] = review.get("status") or {}
    return status


def test_the_real_authorizer_allows_every_request_the_controller_sends(admin: RestClient) -> None:
    denied = [(a, _review(admin, *a).get("reason", "")) for a in RECORDED if not _review(admin, *a).get("allowed")]
    assert denied == []


def test_the_real_authorizer_refuses_what_the_chart_was_cut_to_refuse(admin: RestClient) -> None:
    allowed = [(a, _review(admin, *a).get("reason", "")) for a in REFUSED if _review(admin, *a).get("allowed")]
    assert allowed == []
