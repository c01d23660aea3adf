"""The Kubernetes resources nodewright reads and writes, with their REST paths.

A :class:`ResourceKind` names one API resource (group, version, plural) and knows how to build the URL
paths the API server serves for it (``/api/v1/...`` for the core group, ``/apis/<group>/<version>/...``
otherwise). Objects everywhere in :mod:`nodewright.kube` are plain JSON dicts exactly as the API server
serves them, so the same code runs against the in-memory cluster, the emulator and a real cluster.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """One API resource.

    Attributes:
        group: API group, ``""`` for the core group.
        version: API version, e.g. ``"v1"``.
        plural: resource name in URLs, e.g. ``"nodeclaims"``.
        kind: object kind, e.g. ``"NodeClaim"``.
        namespaced: whether objects live in a namespace.
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``apiVersion`` field value: ``"v1"`` or ``"<group>/<version>"``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None = None) -> str:
        """URL path of the collection, cluster-wide when ``namespace`` is None."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None, subresource: str = "") -> str:
        """URL path of one object (or of its ``subresource``, e.g. ``"status"``)."""
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} {name!r} is namespaced: a namespace is required")
        path = f"{self.collection_path(namespace)}/{name}"
        return f"{path}/{subresource}" if subresource else path

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = ResourceKind("", "v1", "pods", "Pod", True)
NODES = ResourceKind("", "v1", "nodes", "Node", False)
EVENTS = ResourceKind("", "v1", "events", "Event", True)
PVCS = ResourceKind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
LIMITRANGES = ResourceKind("", "v1", "limitranges", "LimitRange", True)
NAMESPACES = ResourceKind("", "v1", "namespaces", "Namespace", False)
PVS = ResourceKind("", "v1", "persistentvolumes", "PersistentVolume", False)
DAEMONSETS = ResourceKind("apps", "v1", "daemonsets", "DaemonSet", True)
PDBS = ResourceKind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
STORAGECLASSES = ResourceKind("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
CSINODES = ResourceKind("storage.k8s.io", "v1", "csinodes", "CSINode", False)
RUNTIMECLASSES = ResourceKind("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False)
LEASES = ResourceKind("coordination.k8s.io", "v1", "leases", "Lease", True)
NODECLAIMS = ResourceKind("karpenter.sh", "v1", "nodeclaims", "NodeClaim", False)
NODEPOOLS = ResourceKind("karpenter.sh", "v1", "nodepools", "NodePool", False)
EC2NODECLASSES = ResourceKind("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass", False)
# CapacityBuffer (feature gate CapacityBuffer) and what a buffer references.
CAPACITYBUFFERS = ResourceKind("autoscaling.x-k8s.io", "v1beta1", "capacitybuffers", "CapacityBuffer", True)
PODTEMPLATES = ResourceKind("", "v1", "podtemplates", "PodTemplate", True)
DEPLOYMENTS = ResourceKind("apps", "v1", "deployments", "Deployment", True)
STATEFULSETS = ResourceKind("apps", "v1", "statefulsets", "StatefulSet", True)
REPLICASETS = ResourceKind("apps", "v1", "replicasets", "ReplicaSet", True)
SERVICES = ResourceKind("", "v1", "services", "Service", True)
REPLICATIONCONTROLLERS = ResourceKind("", "v1", "replicationcontrollers", "ReplicationController", True)
#: Karpenter's NodeOverlay (v1alpha1, feature gate NodeOverlay; nodewright.cloud.overlay).
NODEOVERLAYS = ResourceKind("karpenter.sh", "v1alpha1", "nodeoverlays", "NodeOverlay", False)

#: Every resource the controller watches (events and leases are written, not watched).
WATCHED: tuple[ResourceKind, ...] = (
    PODS,
    NODES,
    NODECLAIMS,
    NODEPOOLS,
    EC2NODECLASSES,
    DAEMONSETS,
    PDBS,
    PVCS,
    STORAGECLASSES,
    LIMITRANGES,
    NAMESPACES,
    PVS,
    RUNTIMECLASSES,
    CSINODES,
    NODEOVERLAYS,
)

#: Watched too when the ``CapacityBuffer`` gate is on (:mod:`nodewright.controllers.buffer`); with it off the
#: controller lists CapacityBuffers once, only to warn that they are ignored.
BUFFER_WATCHED: tuple[ResourceKind, ...] = (CAPACITYBUFFERS, PODTEMPLATES, DEPLOYMENTS, STATEFULSETS, REPLICASETS)

#: Watched too when ``SCHEDULER_CONFIG`` gives default spread constraints (:mod:`nodewright.state.defaultspread`):
#: the selectors that deduce each pod's default spread selector, as kube-scheduler's ``DefaultSelector``.
#: Deployments stand for their ReplicaSets in ``simulate -f`` (pods there name the Deployment as controller).
SPREAD_WATCHED: tuple[ResourceKind, ...] = (SERVICES, REPLICATIONCONTROLLERS, REPLICASETS, STATEFULSETS, DEPLOYMENTS)

#: Watched resources a cluster may not serve (their CRD is not installed): a 404 on their LIST means "none".
OPTIONAL_WATCHED = frozenset({NODEOVERLAYS})

ALL: tuple[ResourceKind, ...] = (*WATCHED, *BUFFER_WATCHED, SERVICES, REPLICATIONCONTROLLERS, EVENTS, LEASES)

