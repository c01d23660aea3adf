"""The cluster's state as the controllers see it: one consistent snapshot per reconcile pass.

:func:`snapshot` reads every relevant kind once from a :class:`~nodewright.kube.cluster.Cluster` and indexes
it (nodes by name and provider ID, NodeClaims by name, node and provider ID, pods by node). Controllers
decide from one snapshot so a decision never mixes two moments of the cluster, and convert its objects to
models through :attr:`ClusterState.models` (:mod:`nodewright.state.models`, cached per cluster).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from nodewright.api import labels as L
from nodewright.api.nodeoverlay import NodeOverlay
from nodewright.cloud.overlay import OverlayInput
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.cluster import Cluster
from nodewright.kube.objects import Obj, is_deleting, labels_of, meta, name_of, namespace_of
from nodewright.scheduling import Pod
from nodewright.state.models import ClusterModels, models_for
from nodewright.state.pods import daemonset_owner, node_name, pod_key


def _created(obj: Obj) -> str:
    """``metadata.creationTimestamp`` (RFC 3339 strings order as times) or ``""``."""
    return str(meta(obj).get("creationTimestamp") or "")


def provider_id_of(obj: Obj) -> str:
    """``spec.providerID`` of a Node or ``status.providerID`` of a NodeClaim (``""`` when unset)."""
    if obj.get("kind") == "Node":
        return str((obj.get("spec") or {}).get("providerID") or "")
    return str((obj.get("status") or {}).get("providerID") or "")


@dataclass
class ClusterState:
    """Indexed snapshot. All dicts map names (``namespace/name`` for pods) to objects."""

    nodes: dict[str, Obj] = field(default_factory=dict)
    nodeclaims: dict[str, Obj] = field(default_factory=dict)
    nodepools: dict[str, Obj] = field(default_factory=dict)
    nodeclasses: dict[str, Obj] = field(default_factory=dict)
    pods: dict[str, Obj] = field(default_factory=dict)
    daemonsets: list[Obj] = field(default_factory=list)
    pdbs: list[Obj] = field(default_factory=list)
    pvcs: list[Obj] = field(default_factory=list)
    storageclasses: list[Obj] = field(default_factory=list)
    limitranges: list[Obj] = field(default_factory=list)
    #: NodeOverlays by name (karpenter.sh/v1alpha1; applied by nodewright.cloud.overlay when the gate is on).
    nodeoverlays: dict[str, Obj] = field(default_factory=dict)
    #: (namespace, DaemonSet name) -> the newest pod that DaemonSet owns (Karpenter ``Cluster.GetDaemonSetPod``).
    daemon_pods: dict[tuple[str, str], Obj] = field(default_factory=dict)
    pods_by_node: dict[str, list[Obj]] = field(default_factory=dict)
    node_by_provider_id: dict[str, Obj] = field(default_factory=dict)
    nodeclaim_by_provider_id: dict[str, Obj] = field(default_factory=dict)
    #: The cluster's conversion cache (objects -> scheduler/API models): every reader converts through it.
    models: ClusterModels = field(default_factory=ClusterModels)

    def node_for(self, nodeclaim: Obj) -> Obj | None:
        """The Node that registered for ``nodeclaim`` (matched by provider ID), or None."""
        pid = provider_id_of(nodeclaim)
        return self.node_by_provider_id.get(pid) if pid else None

    def nodeclaim_for(self, node: Obj) -> Obj | None:
        """The NodeClaim a Node belongs to (matched by provider ID), or None for unmanaged nodes."""
        pid = provider_id_of(node)
        return self.nodeclaim_by_provider_id.get(pid) if pid else None

    def pods_on(self, node: str) -> list[Obj]:
        """Pods bound to the node named ``node``."""
        return self.pods_by_node.get(node, [])

    def daemonset_models(self) -> list[Pod]:
        """The pod each DaemonSet runs on a node (daemonset overhead), through
        :meth:`ClusterModels.daemonset_pods` with this state's LimitRanges and DaemonSet pods."""
        return self.models.daemonset_pods(self.daemonsets, self.limitranges, self.daemon_pods)

    def nodeclaims_of_nodeclass(self, nodeclass: str) -> list[str]:
        """Names of the NodeClaims whose ``spec.nodeClassRef.name`` is ``nodeclass``; a NodeClaim that does not
        validate counts as using it (a finalizer waits rather than deleting what a launch may still need)."""
        users = []
        for name, obj in sorted(self.nodeclaims.items()):
            try:
                ref = self.models.nodeclaim(obj).spec.node_class_ref.name
            except NodewrightValidationError:
                ref = nodeclass
            if ref == nodeclass:
                users.append(name)
        return users

    def nodepools_by_nodeclass(self) -> dict[str, set[str]]:
        """EC2NodeClass name -> the (valid, not deleting) NodePools whose template references it."""
        out: dict[str, set[str]] = {}
        for name, obj in self.nodepools.items():
            if is_deleting(obj):
                continue
            try:
                ref = self.models.nodepool(obj).spec.template.spec.node_class_ref.name
            except NodewrightValidationError:
                continue
            out.setdefault(ref, set()).add(name)
        return out

    def overlay_inputs(self) -> list[OverlayInput]:
        """The NodeOverlays (not being deleted) as :mod:`nodewright.cloud.overlay` takes them: name, identity
        (uid, resourceVersion) and the validated model or its validation error, through :attr:`models`."""
        out = []
        for name, obj in sorted(self.nodeoverlays.items()):
            if is_deleting(obj):
                continue
            try:
                model: NodeOverlay | NodewrightValidationError = self.models.nodeoverlay(obj)
            except NodewrightValidationError as err:
                model = err
            version = meta(obj).get("resourceVersion")
            identity = (meta(obj).get("uid"), version) if version else json.dumps(obj.get("spec"), sort_keys=True)
            out.append(OverlayInput(name, identity, model))
        return out

    def managed_nodes(self) -> list[Obj]:
        """Nodes carrying the ``karpenter.sh/nodepool`` label."""
        return [n for n in self.nodes.values() if L.NODEPOOL in labels_of(n)]


def sync_models(cluster: Cluster, pvcs: list[Obj] | None = None, storageclasses: list[Obj] | None = None) -> ClusterModels:
    """The cluster's conversion cache, given the cluster-wide objects pod conversion depends on (Namespaces for
    affinity ``namespaceSelector``; RuntimeClasses for pod overhead; claims, volumes and StorageClasses for volume topology; CSINodes for
    volume attach limits; with ``SCHEDULER_CONFIG`` defaults, Services and pod controllers for their selectors). Every reader that
    converts pods without a :func:`snapshot` (the simulated kube-scheduler) calls this first."""
    models = models_for(cluster)
    models.use_namespaces(cluster.list(r.NAMESPACES))
    models.use_runtimeclasses(cluster.list(r.RUNTIMECLASSES))
    models.use_csinodes(cluster.list(r.CSINODES))
    if models.spread_defaults:
        models.use_spread_defaults(cluster.list(r.SERVICES), [
            *cluster.list(r.REPLICATIONCONTROLLERS), *cluster.list(r.REPLICASETS), *cluster.list(r.STATEFULSETS),
            *cluster.list(r.DEPLOYMENTS)])
    models.use_volumes(cluster.list(r.PVCS) if pvcs is None else pvcs, cluster.list(r.PVS),
                       cluster.list(r.STORAGECLASSES) if storageclasses is None else storageclasses)
    return models


def snapshot(cluster: Cluster) -> ClusterState:
    """Read and index the cluster once (O(objects))."""
    state = ClusterState(models=models_for(cluster))
    for node in cluster.list(r.NODES):
        state.nodes[name_of(node)] = node
        pid = provider_id_of(node)
        if pid:
            state.node_by_provider_id[pid] = node
    for claim in cluster.list(r.NODECLAIMS):
        state.nodeclaims[name_of(claim)] = claim
        pid = provider_id_of(claim)
        if pid:
            state.nodeclaim_by_provider_id[pid] = claim
    state.nodepools = {name_of(o): o for o in cluster.list(r.NODEPOOLS)}
    state.nodeclasses = {name_of(o): o for o in cluster.list(r.EC2NODECLASSES)}
    for pod in cluster.list(r.PODS):
        state.pods[pod_key(pod)] = pod
        owner = daemonset_owner(pod)
        if owner:
            key = (namespace_of(pod) or "default", owner)
            held = state.daemon_pods.get(key)
            if held is None or _created(pod) >= _created(held):
                state.daemon_pods[key] = pod
        bound = node_name(pod)
        if bound:
            state.pods_by_node.setdefault(bound, []).append(pod)
    state.daemonsets = cluster.list(r.DAEMONSETS)
    state.pdbs = cluster.list(r.PDBS)
    state.pvcs = cluster.list(r.PVCS)
    state.storageclasses = cluster.list(r.STORAGECLASSES)
    state.limitranges = cluster.list(r.LIMITRANGES)
    state.nodeoverlays = {name_of(o): o for o in cluster.list(r.NODEOVERLAYS)}
    sync_models(cluster, state.pvcs, state.storageclasses)
    return state
