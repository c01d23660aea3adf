"""A minimal kube-scheduler: binds pending pods to Ready nodes, or marks them ``Unschedulable``.

Placement uses :func:`nodewright.scheduling.schedule` with no NodePools, so a pod lands on an existing node
only under the same predicates the provisioner plans with: resources (requests vs allocatable minus bound
pods), taints/tolerations, node selectors and affinity, pod (anti-)affinity and topology spread. Nodes that
are not ``Ready``, are cordoned, carry ``karpenter.sh/disrupted`` or are being deleted are not candidates.
A pod that fits nowhere gets ``PodScheduled=False, reason=Unschedulable`` -- the signal Karpenter's
provisioner (and Cluster Autoscaler) act on.

The real kube-scheduler scores nodes (spreading by default); this stand-in packs, which only changes which
of several fitting nodes a pod gets.
"""

from __future__ import annotations

from collections.abc import Iterable

from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import Obj, condition_true, is_deleting, meta, name_of
from nodewright.kube.resources import ResourceKind
from nodewright.scheduling import ExistingNode, Pod, schedule
from nodewright.state.cluster import sync_models
from nodewright.state.models import models_for
from nodewright.state.pods import is_terminal, is_unschedulable, node_name, pod_key


class KubeScheduler:
    """Binds pods; re-runs only after pods were added/removed or nodes changed (see :meth:`on_change`).

    Args:
        cluster: the in-memory cluster (the scheduler registers a listener on it).
    """

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster
        self.dirty = True
        self._waiting: set[str] = set()  # keys of pods not bound yet
        self.models = models_for(cluster)
        cluster.add_listener(self.on_change)

    def on_change(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        """Cluster listener: new or removed pods and any node change may open or use capacity."""
        if kind == r.NODES or (kind == r.PODS and event in ("ADDED", "DELETED")):
            self.dirty = True
        if kind == r.PODS:
            key = pod_key(obj)
            if event != "DELETED" and not node_name(obj) and not is_deleting(obj) and not is_terminal(obj):
                self._waiting.add(key)
            else:
                self._waiting.discard(key)

    def candidates(self, nodes: Iterable[Obj], bound: dict[str, list[Pod]]) -> list[ExistingNode]:
        """Ready, schedulable nodes as :class:`ExistingNode` with their bound pods."""
        out = []
        for node in nodes:
            if is_deleting(node) or not condition_true(node, "Ready") or (node.get("spec") or {}).get("unschedulable"):
                continue
            existing = self.models.node(node, bound.get(name_of(node), []))
            if existing is not None and not existing.marked_for_deletion:
                out.append(existing)
        return out

    def tick(self) -> list[tuple[str, str]]:
        """Bind what fits, mark the rest ``Unschedulable``; returns ``(pod key, node)`` bindings made."""
        if not self.dirty:
            return []
        self.dirty = False
        if not self._waiting:
            return []  # nothing to place: skip the scan of every pod
        sync_models(self.cluster)
        pending: list[tuple[Obj, Pod]] = []
        bound: dict[str, list[Pod]] = {}
        for doc in self.cluster.list(r.PODS):
            if is_deleting(doc) or is_terminal(doc):
                continue
            pod = self.models.pod(doc)
            if pod is None:
                continue
            host = node_name(doc)
            if host:
                bound.setdefault(host, []).append(pod)
            elif not (doc.get("spec") or {}).get("schedulingGates"):
                pending.append((doc, pod))
        if not pending:
            return []
        nodes = self.candidates(self.cluster.list(r.NODES), bound)
        result = schedule([p for _, p in pending], nodes, [], {}, max_new_nodeclaims=0) if nodes else None
        bindings: list[tuple[str, str]] = []
        placed: set[str] = set()
        if result is not None:
            for target, pods in result.existing.items():
                for pod in pods:
                    self.cluster.bind_pod(pod.namespace, pod.name, target)
                    bindings.append((pod.key, target))
                    placed.add(pod.key)
        for doc, pod in pending:
            if pod.key not in placed and not is_unschedulable(doc):
                self._mark_unschedulable(doc, len(nodes))
        return bindings

    def _mark_unschedulable(self, doc: Obj, nodes: int) -> None:
        conditions = [c for c in (doc.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": f"0/{nodes} nodes are available"})
        self.cluster.patch_status(r.PODS, name_of(doc), {"conditions": conditions}, meta(doc).get("namespace"))

