"""Valid v1 manifests for the API tests to start from (fresh copies each call)."""

from __future__ import annotations

import copy
from typing import Any

_NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "general"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "web"}},
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]},
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            },
        },
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m"},
        "limits": {"cpu": "1000", "memory": "1000Gi"},
        "weight": 10,
    },
}

_EC2NODECLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "role": "KarpenterNodeRole-demo",
    },
}

_NODECLAIM: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodeClaim",
    "metadata": {"name": "general-abcde", "labels": {"karpenter.sh/nodepool": "general"}},
    "spec": {
        "requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["general"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m6g.large", "m7g.large"]},
        ],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "resources": {"requests": {"cpu": "1780m", "memory": "3448Mi", "pods": "9"}},
    },
    "status": {
        "providerID": "aws:///us-east-1a/i-0123456789abcdef0",
        "imageID": "ami-0123456789abcdef0",
        "nodeName": "ip-10-0-1-23.ec2.internal",
        "capacity": {"cpu": "2", "memory": "7929Mi", "pods": "29"},
        "allocatable": {"cpu": "1930m", "memory": "7112Mi", "pods": "29"},
        "conditions": [
            {"type": "Launched", "status": "True", "lastTransitionTime": "2026-07-20T10:00:00Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-07-20T10:00:19Z"},
        ],
    },
}


def nodepool() -> dict[str, Any]:
    """A valid karpenter.sh/v1 NodePool manifest."""
    return copy.deepcopy(_NODEPOOL)


def ec2nodeclass() -> dict[str, Any]:
    """A valid karpenter.k8s.aws/v1 EC2NodeClass manifest."""
    return copy.deepcopy(_EC2NODECLASS)


def nodeclaim() -> dict[str, Any]:
    """A valid karpenter.sh/v1 NodeClaim manifest with status."""
    return copy.deepcopy(_NODECLAIM)
