"""A small cluster as Karpenter v1 serves it (objects shaped like `kubectl get -o json` of a Karpenter-run EKS
cluster: Karpenter's hash annotations and versions, NodeClaim status, Node labels), for the what-if tests.

Nodes (us-west-2, on-demand, NodePool ``general``):

- ``ip-10-0-1-1`` m5.xlarge: two small pods (``web``) -- consolidatable (its pods fit elsewhere);
- ``ip-10-0-1-2`` m5.xlarge: only the DaemonSet pod -- empty;
- ``ip-10-0-1-3`` m5.2xlarge: ``db-0`` under a PodDisruptionBudget allowing no disruption;
- ``ip-10-0-1-4`` m5.large: ``batch-0`` with ``karpenter.sh/do-not-disrupt``.

One pending pod, ``default/big`` (6 cpu, 4Gi), needs a new node.
"""

from __future__ import annotations

import uuid
from typing import Any

from nodewright.kube.objects import format_time

#: 2026-07-20T12:00:00Z, the snapshot's time.
NOW = 1_784_548_800.0
CREATED = format_time(NOW - 2 * 86400)
ALLOCATABLE = {
    "m5.large": {"cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi"},
    "m5.xlarge": {"cpu": "3920m", "memory": "14162Mi", "pods": "58", "ephemeral-storage": "17Gi"},
    "m5.2xlarge": {"cpu": "7910m", "memory": "29317Mi", "pods": "58", "ephemeral-storage": "17Gi"},
}
NODES = [("ip-10-0-1-1", "m5.xlarge", "us-west-2a"), ("ip-10-0-1-2", "m5.xlarge", "us-west-2b"),
         ("ip-10-0-1-3", "m5.2xlarge", "us-west-2a"), ("ip-10-0-1-4", "m5.large", "us-west-2c")]


def nodepool(name: str = "general", budget: str = "100%", categories: tuple[str, ...] = ("c", "m", "r")) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name, "uid": "np-1", "resourceVersion": "11", "generation": 1,
                     "creationTimestamp": format_time(NOW - 30 * 86400),
                     "annotations": {"karpenter.sh/nodepool-hash": "6821555240594823858",
                                     "karpenter.sh/nodepool-hash-version": "v3"}},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "expireAfter": "720h",
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": list(categories)},
                ]}},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m",
                           "budgets": [{"nodes": budget}]},
            "limits": {"cpu": "1000"},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                   "lastTransitionTime": CREATED, "observedGeneration": 1}],
                   "resources": {"cpu": "20", "nodes": "4"}},
    }


def nodeclass(name: str = "default", ami: str = "al2023@latest") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name, "uid": "nc-1", "resourceVersion": "12", "generation": 1,
                     "creationTimestamp": format_time(NOW - 30 * 86400),
                     "finalizers": ["karpenter.k8s.aws/termination"],
                     "annotations": {"karpenter.k8s.aws/ec2nodeclass-hash": "12345",
                                     "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4"}},
        "spec": {"amiSelectorTerms": [{"alias": ami}], "role": "KarpenterNodeRole-demo",
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]},
        "status": {"amis": [{"id": "ami-0aaa", "name": "al2023", "requirements": []}],
                   "subnets": [{"id": "subnet-a", "zone": "us-west-2a", "zoneID": "usw2-az1"},
                               {"id": "subnet-b", "zone": "us-west-2b", "zoneID": "usw2-az2"},
                               {"id": "subnet-c", "zone": "us-west-2c", "zoneID": "usw2-az3"}],
                   "securityGroups": [{"id": "sg-1", "name": "nodes"}],
                   "instanceProfile": "demo_123", "conditions": [{"type": "Ready", "status": "True",
                                                                  "reason": "Ready", "message": "",
                                                                  "lastTransitionTime": CREATED}]},
    }


def _labels(name: str, itype: str, zone: str, pool: str) -> dict[str, str]:
    return {"karpenter.sh/nodepool": pool, "karpenter.sh/capacity-type": "on-demand",
            "node.kubernetes.io/instance-type": itype, "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": "us-west-2", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
            "karpenter.k8s.aws/instance-category": "m", "karpenter.sh/initialized": "true",
            "karpenter.sh/registered": "true", "kubernetes.io/hostname": name}


def node_and_claim(index: int, name: str, itype: str, zone: str, pool: str = "general") -> list[dict[str, Any]]:
    claim = f"{pool}-{index:05d}"
    pid = f"aws:///{zone}/i-0{index:07d}"
    labels = _labels(name, itype, zone, pool)
    cond = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": CREATED}
            for t in ("Launched", "Registered", "Initialized", "Ready")]
    return [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
         "metadata": {"name": claim, "uid": f"claim-{index}", "resourceVersion": str(100 + index), "generation": 1,
                      "creationTimestamp": CREATED, "labels": dict(labels, **{"kubernetes.io/hostname": name}),
                      "finalizers": ["karpenter.sh/termination"],
                      "annotations": {"karpenter.sh/nodepool-hash": "6821555240594823858",
                                      "karpenter.sh/nodepool-hash-version": "v3",
                                      "karpenter.k8s.aws/ec2nodeclass-hash": "12345",
                                      "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4"},
                      "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": pool,
                                           "uid": "np-1", "blockOwnerDeletion": True}]},
         "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                  "expireAfter": "720h",
                  "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [itype]},
                                   {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]}],
                  "resources": {"requests": {"cpu": "150m", "pods": "1"}}},
         "status": {"providerID": pid, "nodeName": name, "imageID": "ami-0aaa", "capacity": ALLOCATABLE[itype],
                    "allocatable": ALLOCATABLE[itype], "conditions": cond}},
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": name, "uid": f"node-{index}", "resourceVersion": str(200 + index),
                      "creationTimestamp": CREATED, "labels": labels, "finalizers": ["karpenter.sh/termination"]},
         "spec": {"providerID": pid},
         "status": {"capacity": ALLOCATABLE[itype], "allocatable": ALLOCATABLE[itype],
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                    "lastHeartbeatTime": CREATED, "lastTransitionTime": CREATED}],
                    "nodeInfo": {"kubeletVersion": "v1.33.1-eks"}}},
    ]


def pod(name: str, node: str | None, cpu: str = "250m", memory: str = "256Mi", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, owner: tuple[str, str] | None = ("ReplicaSet", "web-5d8f"),
        namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)), "resourceVersion": "300",
                            "creationTimestamp": CREATED, "labels": labels or {"app": name.split("-")[0]}}
    if annotations:
        meta["annotations"] = annotations
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "uid": "o-1",
                                    "controller": True}]
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "public.ecr.aws/nginx/nginx:1.27",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                            "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30}
    if node:
        spec["nodeName"] = node
        status = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"},
                                                     {"type": "Ready", "status": "True"}]}
    else:
        status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                      "reason": "Unschedulable",
                                                      "message": "0/4 nodes are available: 4 Insufficient cpu."}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def daemonset() -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "node-agent"}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1",
                                         "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                         "tolerations": [{"operator": "Exists"}]}}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "node-agent", "namespace": "kube-system", "uid": "ds-1", "resourceVersion": "5",
                         "creationTimestamp": CREATED, "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "node-agent"}}, "template": template},
            "status": {"desiredNumberScheduled": 4, "numberReady": 4, "currentNumberScheduled": 4,
                       "numberMisscheduled": 0}}


def cluster(*, pools: list[dict[str, Any]] | None = None, classes: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every object of the cluster (see module docstring)."""
    objects: list[dict[str, Any]] = [*(pools or [nodepool()]), *(classes or [nodeclass()])]
    for i, (name, itype, zone) in enumerate(NODES, start=1):
        objects.extend(node_and_claim(i, name, itype, zone))
    objects.append(daemonset())
    for name, _, _ in NODES:
        objects.append(pod(f"node-agent-{name[-1]}", name, "100m", "128Mi", {"app": "node-agent"},
                           owner=("DaemonSet", "node-agent"), namespace="kube-system"))
    objects.append(pod("web-5d8f-a", "ip-10-0-1-1", labels={"app": "web"}))
    objects.append(pod("web-5d8f-b", "ip-10-0-1-1", labels={"app": "web"}))
    objects.append(pod("db-0", "ip-10-0-1-3", "2", "4Gi", {"app": "db"}, owner=("StatefulSet", "db")))
    objects.append(pod("batch-0", "ip-10-0-1-4", "500m", "512Mi", {"app": "batch"},
                       {"karpenter.sh/do-not-disrupt": "true"}, owner=("Job", "batch")))
    objects.append(pod("big", None, "6", "4Gi", {"app": "big"}, owner=None))
    objects.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "db", "namespace": "default", "uid": "pdb-1", "resourceVersion": "7",
                                 "creationTimestamp": CREATED},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
                    "status": {"currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0,
                               "expectedPods": 1, "observedGeneration": 1}})
    for ns in ("default", "kube-system"):
        objects.append({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": ns, "uid": f"ns-{ns}", "resourceVersion": "1",
                                     "creationTimestamp": CREATED, "labels": {"kubernetes.io/metadata.name": ns}},
                        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    return objects
