"""``simulate -f`` (``decide``) reads the cluster-state kinds of issue 14 and skips the rest with one line."""

from __future__ import annotations

import logging
from typing import Any

from nodewright.sim.decision import decide

NODEPOOL = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}


def _pod(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m"}}}]}}


def test_unsupported_kinds_are_named_in_one_warning_and_skipped(caplog) -> None:
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"}, "spec": {}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}}
    caplog.set_level(logging.WARNING, logger="nodewright.sim")
    out = decide([NODEPOOL, ingress, dict(ingress, metadata={"name": "api"}), role, _pod("p")])
    assert [c["instance_type"] for c in out["nodeclaims"]] == ["c5.large"]
    lines = [r.getMessage() for r in caplog.records if r.name == "nodewright.sim"]
    assert lines == ["skipped 3 objects simulate does not need: Ingress x2, Role x1"]


def test_terminating_pending_pod_and_limit_range_defaults() -> None:
    """A terminating pending pod needs nothing; a pod without requests gets its namespace's defaultRequest."""
    limit_range = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "default"},
                   "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "1200m"}}]}}
    bare = _pod("bare")
    bare["spec"]["containers"][0]["resources"] = {}
    out = decide([NODEPOOL, limit_range, bare, _pod("going", deletionTimestamp="2026-07-20T11:00:00Z")])
    assert [c["pods"] for c in out["nodeclaims"]] == [["default/bare"]]
    assert out["nodeclaims"][0]["requests"]["cpu"] == 1200
