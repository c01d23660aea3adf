"""What the RBAC replay recorded across the integration suite (``tests/integration``, 64 tests, this branch): the
controller's distinct authorizations as ``(verb, group, resource, name)`` (``name`` only where a rule restricts it).

The list the chart is cut to (``tests/chart/test_rbac.py``) and the one ``tests/e2e/test_rbac_authorizer.py`` asks
a real kube-apiserver's RBAC authorizer about. The session summary of a run over ``tests/integration`` prints the
recorded set; when it changes, update this list together with the chart.
"""

from __future__ import annotations

LEASE = "nodewright-leader-election"

_INFORMED = [("", "nodes"), ("", "pods"), ("", "persistentvolumeclaims"), ("", "persistentvolumes"),
             ("", "limitranges"), ("", "namespaces"), ("apps", "daemonsets"), ("policy", "poddisruptionbudgets"),
             ("storage.k8s.io", "storageclasses"), ("storage.k8s.io", "csinodes"), ("node.k8s.io", "runtimeclasses"),
             ("karpenter.sh", "nodepools"), ("karpenter.sh", "nodeclaims"), ("karpenter.k8s.aws", "ec2nodeclasses"),
             # CapacityBuffer gate on (tests/integration/test_buffers.py): the buffers and what they reference.
             ("autoscaling.x-k8s.io", "capacitybuffers"), ("", "podtemplates"), ("apps", "deployments"),
             ("apps", "replicasets"), ("apps", "statefulsets"),
             ("karpenter.sh", "nodeoverlays"),
             # SCHEDULER_CONFIG default spread (tests/integration/test_default_spread.py): selectors of the pods.
             ("", "services"), ("", "replicationcontrollers")]

#: (verb, apiGroup, resource, object name or "") the controller sends.
RECORDED: list[tuple[str, str, str, str]] = [
    *[(verb, group, resource, "") for group, resource in _INFORMED for verb in ("list", "watch")],
    ("create", "karpenter.sh", "nodeclaims", ""), ("patch", "karpenter.sh", "nodeclaims", ""),
    ("delete", "karpenter.sh", "nodeclaims", ""), ("patch", "karpenter.sh", "nodeclaims/status", ""),
    ("patch", "karpenter.sh", "nodepools/status", ""), ("patch", "karpenter.sh", "nodeoverlays/status", ""),
    ("update", "karpenter.sh", "nodepools/finalizers", ""),
    ("update", "karpenter.sh", "nodeclaims/finalizers", ""), ("patch", "karpenter.k8s.aws", "ec2nodeclasses", ""),
    ("patch", "karpenter.k8s.aws", "ec2nodeclasses/status", ""), ("patch", "", "nodes", ""),
    ("delete", "", "nodes", ""), ("delete", "", "pods", ""), ("create", "", "pods/eviction", ""),
    ("create", "", "pods/binding", ""), ("create", "", "events", ""), ("patch", "", "pods/status", ""),
    ("patch", "", "pods", ""),  # the readiness hold's pin (issue 25)
    ("get", "coordination.k8s.io", "leases", LEASE), ("update", "coordination.k8s.io", "leases", LEASE),
    ("create", "coordination.k8s.io", "leases", ""),
    ("patch", "autoscaling.x-k8s.io", "capacitybuffers/status", ""),
]

#: Requests the chart must refuse: the cut rules (update where patch is used, get of informed kinds), the control
#: plane's leases, Secrets.
REFUSED: list[tuple[str, str, str, str]] = [
    ("update", "coordination.k8s.io", "leases", "kube-controller-manager"),
    ("patch", "coordination.k8s.io", "leases", LEASE), ("list", "coordination.k8s.io", "leases", ""),
    ("update", "karpenter.sh", "nodeclaims", ""), ("update", "", "nodes", ""), ("patch", "", "events", ""),
    ("get", "", "secrets", ""), ("list", "", "secrets", ""), ("get", "karpenter.sh", "nodepools/status", ""),
]
