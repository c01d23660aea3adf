"""The one conversion from cluster objects (plain JSON dicts) to the scheduler's and the API's models.

Every reader of the cluster -- provisioning, the disruption view, the simulated kube-scheduler, the Cluster
Autoscaler baseline and ``simulate -f`` -- turns objects into models here, and nowhere else:

=================  ==========================================================================================
object             model
=================  ==========================================================================================
Pod                :class:`~nodewright.scheduling.Pod` (:meth:`ClusterModels.pod`; ``pending=True`` drops
                   ``spec.nodeName``: the pod of a leaving node, to be placed again)
Node               :class:`~nodewright.scheduling.ExistingNode` with its bound pods (:meth:`ClusterModels.node`)
NodeClaim          the validated :class:`~nodewright.api.nodeclaim.NodeClaim` (:meth:`ClusterModels.nodeclaim`)
NodePool           the validated :class:`~nodewright.api.nodepool.NodePool` (:meth:`ClusterModels.nodepool`) and
                   the scheduler's :class:`~nodewright.scheduling.NodePoolSpec` (:meth:`ClusterModels.nodepool_spec`)
EC2NodeClass       the validated model and its kubelet/overhead settings
                   (:meth:`ClusterModels.kubelet`, :class:`~nodewright.cloud.overhead.KubeletSettings`)
DaemonSet          the pod it runs on every node (:meth:`ClusterModels.daemonset_pods`: its running pod, else its
                   template with LimitRange defaults)
RuntimeClass       the pod overhead, node selector and tolerations admission writes into the pods naming it
                   (:meth:`ClusterModels.use_runtimeclasses`)
PVC, PV, SC        the zones (node requirements) of the pods that mount them (:class:`VolumeTopology`), and the
                   CSI volumes each pod attaches (:attr:`Pod.volumes <nodewright.scheduling.Pod>`,
                   :func:`~nodewright.state.volumeusage.pod_attachments`)
CSINode            a node's volume attach limits per CSI driver (:attr:`ExistingNode.volume_limits
                   <nodewright.scheduling.ExistingNode>`, :meth:`ClusterModels.use_csinodes`)
Service, RS, SS,   the selector of the cluster-default topology spread constraints (``SCHEDULER_CONFIG``) given
RC (Deployment)    to pods without their own (:meth:`ClusterModels.use_spread_defaults`,
                   :mod:`nodewright.state.defaultspread`)
Namespace          its labels, which resolve pod affinity ``namespaceSelector`` into the term's namespaces
                   (:meth:`ClusterModels.use_namespaces`, :func:`resolve_namespace_selectors`)
PDB                a :class:`~nodewright.disruption.model.PDB` with the disruptions it allows now (:func:`pdbs`)
CapacityBuffer     the validated :class:`~nodewright.api.capacitybuffer.CapacityBuffer`
                   (:meth:`ClusterModels.capacity_buffer`); its virtual pods: :mod:`nodewright.state.buffers`
=================  ==========================================================================================

Conversions are cached by object version: ``(kind, namespace, name, uid, resourceVersion)`` -- the API server
changes the resourceVersion on every write, so an unchanged object converts once however many passes read it.
Objects without a resourceVersion (hand-built in tests) are cached by identity and kept referenced so that
identity stays valid. A cache belongs to one cluster (:func:`models_for`): two in-memory clusters built from the
same seed reuse uids and resourceVersions for different objects. The cache is bounded (cleared past
:data:`CACHE_LIMIT` entries).

Invalid objects: :meth:`ClusterModels.pod`/:meth:`~ClusterModels.node` return None and log one line at debug
level naming the object, field and reason (one bad pod must not stop provisioning for the whole cluster); the
NodePool/EC2NodeClass methods raise :class:`~nodewright.errors.NodewrightValidationError` for the caller to
report (they name what cannot launch).
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from nodewright.admission import apply_limit_ranges, apply_runtime_class, runtime_classes
from nodewright.api import labels as wk
from nodewright.api.base import parse_model
from nodewright.api.capacitybuffer import CapacityBuffer
from nodewright.api.ec2nodeclass import EC2NodeClass
from nodewright.api.manifests import parse_ec2nodeclass, parse_nodeclaim, parse_nodeoverlay, parse_nodepool
from nodewright.api.nodeclaim import NodeClaim
from nodewright.api.nodeoverlay import NodeOverlay
from nodewright.api.nodepool import NodePool
from nodewright.cloud.overhead import KubeletSettings, kubelet_settings
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import Obj
from nodewright.quantities import Resources
from nodewright.scheduling import (
    ExistingNode,
    NodePoolSpec,
    NodeSelectorTerm,
    Pod,
    Requirements,
    daemonset_pod,
    node_from_manifest,
    nodepool_spec_from_model,
    pod_from_manifest,
)
from nodewright.selectors import selects
from nodewright.state.blocked import DRA_REASON, DRAError, PodBlocked, has_dra_requirements
from nodewright.state.defaultspread import SchedulerConfig, SpreadSelectors, default_spread
from nodewright.state.volumeusage import claim_name, csinode_limits, pod_attachments

log = logging.getLogger("nodewright.state")

#: The label the API server puts on every Namespace (its name).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

T = TypeVar("T")
_IDENTITY = object()  # marks a version that is the object's identity (no resourceVersion)

#: Entries kept per cache before it is cleared (objects of a large cluster: ~20,000 pods, 1,000 nodes).
CACHE_LIMIT = 100_000


def object_version(obj: Mapping[str, Any]) -> Hashable:
    """What identifies this version of ``obj``: ``(namespace, name, resourceVersion)``, or its identity without
    a resourceVersion."""
    m = obj.get("metadata")
    rv = m.get("resourceVersion") if isinstance(m, Mapping) else None
    if rv is None:
        return (_IDENTITY, id(obj))
    return (m.get("namespace"), m.get("name"), m.get("uid"), rv)  # type: ignore[union-attr]


def versions(objs: Iterable[Mapping[str, Any]]) -> tuple[Hashable, ...]:
    """:func:`object_version` of each object, in order."""
    return tuple(object_version(o) for o in objs)


def describe(obj: Mapping[str, Any], kind: str) -> str:
    """``Pod default/web-1`` (for log lines)."""
    m = obj.get("metadata") or {}
    ns = m.get("namespace")
    return f"{kind} {ns + '/' if ns else ''}{m.get('name', '?')}"


class _Cache:
    """(kind, object version, variant) -> (object kept alive, model or the validation error)."""

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[Any, Any]] = {}

    def get(self, key: Hashable, obj: Any) -> Any:
        hit = self._entries.get(key)
        if hit is not None and (hit[0] is obj or key[1][0] is not _IDENTITY):  # type: ignore[index]
            return hit[1]
        return None

    def put(self, key: Hashable, obj: Any, value: Any) -> Any:
        if len(self._entries) >= CACHE_LIMIT:
            self._entries.clear()
        self._entries[key] = (obj, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)


class ClusterModels:
    """Cached conversions for the objects of one cluster (see module docstring)."""

    def __init__(self) -> None:
        self._cache = _Cache()
        #: (kind, id(object), variant) -> (object, model): the very same object again (the usual case: stored
        #: objects are replaced, never mutated) is found without computing its version.
        self._same: dict[Hashable, tuple[Any, Any]] = {}
        self._daemonsets: tuple[tuple[Hashable, ...], list[Pod]] | None = None
        #: Namespace name -> labels (with ``kubernetes.io/metadata.name``), for pod affinity namespaceSelectors.
        self._namespaces: dict[str, dict[str, str]] = {}
        self._namespaces_key: tuple[Hashable, ...] = ()
        self._volumes = VolumeTopology()
        #: RuntimeClass name -> object, whose overhead and scheduling admission writes into pods.
        self._runtimeclasses: dict[str, Mapping[str, Any]] = {}
        self._runtimeclasses_key: tuple[Hashable, ...] = ()
        #: Node name -> {CSI driver: volumes it can attach}, from CSINode objects (:meth:`use_csinodes`).
        self._volume_limits: dict[str, dict[str, int]] = {}
        self._volume_limits_key: tuple[Hashable, ...] = ()
        #: ``SCHEDULER_CONFIG`` and the selectors that deduce each pod's default spread selector.
        self.scheduler_config: SchedulerConfig | None = None
        self._spread_selectors = SpreadSelectors()
        self._spread_versions: tuple[Hashable, ...] = ()
        self._spread_key = ""
        #: Bumped whenever every cached conversion is dropped (a Namespace, RuntimeClass, SCHEDULER_CONFIG or
        #: spread selector change), so caches of converted models outside this class know to rebuild.
        self.epoch = 0

    @property
    def spread_defaults(self) -> bool:
        """Whether pods without their own spread constraints get cluster defaults (``SCHEDULER_CONFIG``)."""
        return self.scheduler_config is not None and bool(self.scheduler_config.constraints)

    def use_scheduler_config(self, config: SchedulerConfig | None) -> None:
        """The controller's ``SCHEDULER_CONFIG`` (:mod:`nodewright.state.defaultspread`); a change drops every
        cached conversion."""
        if config == self.scheduler_config:
            return
        self.scheduler_config = config
        self._drop()

    def use_spread_defaults(self, services: Sequence[Obj], controllers: Sequence[Obj]) -> None:
        """The cluster's Services and ReplicationControllers, ReplicaSets, StatefulSets (and, in ``simulate``,
        Deployments), whose selectors deduce the selector of a pod's default spread constraints. Only a change of
        a selector (not of a status) drops the cached conversions."""
        version = versions([*services, *controllers])
        if version == self._spread_versions:
            return
        self._spread_versions = version
        selectors = SpreadSelectors.build(services, controllers)
        key = selectors.key()
        self._spread_selectors = selectors
        if key != self._spread_key:
            self._spread_key = key
            self._drop()

    def _drop(self) -> None:
        """Forget every cached conversion; :attr:`epoch` tells views that cache models of their own."""
        self._cache = _Cache()
        self._same.clear()
        self._daemonsets = None
        self.epoch += 1

    def use_volumes(self, pvcs: Sequence[Obj], pvs: Sequence[Obj], storageclasses: Sequence[Obj]) -> None:
        """The cluster's PersistentVolumeClaims, PersistentVolumes and StorageClasses, whose zones restrict the
        pods that mount them (:class:`VolumeTopology`). Only pods with claim volumes convert again on a change."""
        self._volumes = self._volumes.updated(pvcs, pvs, storageclasses)

    def use_csinodes(self, csinodes: Sequence[Obj]) -> None:
        """The cluster's ``storage.k8s.io/v1`` CSINode objects: the volume attach limits per CSI driver of the
        node of the same name (:func:`~nodewright.state.volumeusage.csinode_limits`), set on :meth:`node`."""
        key = versions(csinodes)
        if key != self._volume_limits_key:
            self._volume_limits_key = key
            self._volume_limits = csinode_limits(csinodes)

    def use_namespaces(self, namespaces: Sequence[Obj]) -> None:
        """The cluster's Namespace objects, which pod affinity terms' ``namespaceSelector`` is matched against.

        A change (rare: a namespace created, deleted or relabelled) drops every cached conversion, so pods
        convert again against the new set.
        """
        key = versions(namespaces)
        if key == self._namespaces_key:
            return
        self._namespaces_key = key
        self._namespaces = {}
        for ns in namespaces:
            name = str((ns.get("metadata") or {}).get("name") or "")
            labels = dict((ns.get("metadata") or {}).get("labels") or {})
            self._namespaces[name] = {**labels, NAMESPACE_NAME_LABEL: name}
        self._drop()

    def use_runtimeclasses(self, runtimeclasses: Sequence[Obj]) -> None:
        """The cluster's ``node.k8s.io/v1`` RuntimeClass objects: a pod (or DaemonSet template) naming one is
        converted as RuntimeClass admission leaves it (:func:`nodewright.admission.apply_runtime_class`: pod
        overhead, node selector, tolerations). A change drops every cached conversion."""
        key = versions(runtimeclasses)
        if key == self._runtimeclasses_key:
            return
        self._runtimeclasses_key = key
        self._runtimeclasses = runtime_classes(runtimeclasses)
        self._drop()

    def _convert(self, kind: str, obj: Mapping[str, Any], variant: Hashable, build: Any) -> Any:
        same = (kind, id(obj), variant)
        hit = self._same.get(same)
        if hit is not None and hit[0] is obj:
            return hit[1]
        key = (kind, object_version(obj), variant)
        value = self._cache.get(key, obj)
        if value is None:
            try:
                value = build()
            except NodewrightValidationError as err:
                value = err
            self._cache.put(key, obj, value)
        if len(self._same) >= CACHE_LIMIT:
            self._same.clear()
        self._same[same] = (obj, value)
        return value

    def _strict(self, kind: str, obj: Mapping[str, Any], variant: Hashable, build: Callable[[], T]) -> T:
        """:meth:`_convert`, raising the cached validation error."""
        value = self._convert(kind, obj, variant, build)
        if isinstance(value, NodewrightValidationError):
            raise value
        return value  # type: ignore[no-any-return]

    # --- pods and nodes --------------------------------------------------------------------------------------

    def pod(self, obj: Obj, *, pending: bool = False) -> Pod | None:
        """The scheduler's view of a Pod object; None (logged at debug) when it is invalid.

        Args:
            pending: drop ``spec.nodeName`` (a pod of a leaving node, to be placed again).
        """
        variant: Hashable = (pending, self._volumes.key) if _claims_volumes(obj) else pending
        hit = self._same.get(("Pod", id(obj), variant))  # the common case, without building a closure
        if hit is not None and hit[0] is obj:
            value = hit[1]
            if isinstance(value, NodewrightValidationError):
                return None
            return value  # type: ignore[no-any-return]
        value = self._convert("Pod", obj, variant, lambda: self._build_pod(obj, pending))
        if isinstance(value, NodewrightValidationError):
            log.debug("ignoring %s: %s", describe(obj, "Pod"), value)
            return None
        return value  # type: ignore[no-any-return]

    def _build_pod(self, obj: Obj, pending: bool) -> Pod:
        spec = obj.get("spec") or {}
        if pending and has_dra_requirements(spec):
            raise DRAError("spec.resourceClaims", DRA_REASON)
        if pending and spec.get("nodeName"):
            spec = {k: v for k, v in spec.items() if k != "nodeName"}
        spec = apply_runtime_class(spec, self._runtimeclasses)
        spec = default_spread(obj, spec, self.scheduler_config, self._spread_selectors)
        spec = resolve_namespace_selectors(spec, self._namespaces)
        volume_terms = self._volumes.requirements(obj, spec)
        pod = pod_from_manifest({**obj, "kind": "Pod", "spec": spec})
        attachments = pod_attachments(obj, spec, self._volumes)
        if attachments:
            pod.volumes = attachments  # per pod, not part of the shape
        if not volume_terms:
            return pod
        affinity = dataclasses.replace(pod.affinity, volume_required=volume_terms)
        return dataclasses.replace(pod, affinity=affinity, shape=(), shape_key=0)

    def pods(self, objs: Iterable[Obj], *, pending: bool = False) -> list[Pod]:
        """:meth:`pod` of each object, invalid ones left out."""
        out = []
        for obj in objs:
            pod = self.pod(obj, pending=pending)
            if pod is not None:
                out.append(pod)
        return out

    def requests(self, obj: Obj) -> Resources:
        """A Pod object's effective requests (:func:`nodewright.scheduling.pods.effective_requests`); ``{}``
        when it is invalid."""
        pod = self.pod(obj)
        return dict(pod.requests) if pod is not None else {}

    def pod_error(self, obj: Obj, *, pending: bool = False) -> NodewrightValidationError | None:
        """Why :meth:`pod` (with the same ``pending``) rejects the object (None when it is valid); a
        :class:`~nodewright.state.blocked.PodBlocked` is a valid pod no new node can serve now."""
        variant: Hashable = (pending, self._volumes.key) if _claims_volumes(obj) else pending
        value = self._convert("Pod", obj, variant, lambda: self._build_pod(obj, pending))
        return value if isinstance(value, NodewrightValidationError) else None

    def node(self, obj: Obj, pods: Iterable[Pod] = ()) -> ExistingNode | None:
        """A Node object as an :class:`ExistingNode` holding ``pods`` (those bound to it); None (logged at
        debug) when it is invalid. A fresh object every call: callers add nominated pods to it."""
        value = self._convert("Node", obj, None, lambda: node_from_manifest({**obj, "kind": "Node"}))
        if isinstance(value, NodewrightValidationError):
            log.debug("ignoring %s: %s", describe(obj, "Node"), value)
            return None
        base: ExistingNode = value
        return dataclasses.replace(base, labels=dict(base.labels), pods=[p for p in pods if p.node_name == base.name],
                                   volume_limits=self._volume_limits.get(base.name, {}))

    def daemonset_pods(self, daemonsets: Sequence[Obj], limitranges: Sequence[Obj] = (),
                       daemon_pods: Mapping[tuple[str, str], Obj] | None = None) -> list[Pod]:
        """The pod each valid DaemonSet runs on a node, in order (for daemonset overhead); invalid ones left out
        (logged at debug). The same list while the DaemonSets, LimitRanges and DaemonSet pods are unchanged.

        As Karpenter's provisioner (``getDaemonSetPods``): a pod the DaemonSet already runs (``daemon_pods``,
        ``(namespace, DaemonSet name) -> pod``) stands for it, since admission (LimitRange defaults, mutating
        webhooks) may have changed its resources, with the template's required node affinity in place of the
        one the DaemonSet controller wrote (which pins the pod to its node by name); without one, the template
        with the namespace's LimitRange defaults (:func:`nodewright.admission.apply_limit_ranges`).
        """
        daemon_pods = daemon_pods or {}
        used = [daemon_pods.get(_ds_key(ds)) for ds in daemonsets]
        key = (versions(daemonsets), versions(limitranges), tuple(object_version(p) if p else None for p in used))
        if self._daemonsets is not None and self._daemonsets[0] == key:
            return self._daemonsets[1]
        out = []
        for ds, pod in zip(daemonsets, used, strict=True):
            if has_dra_requirements(((ds.get("spec") or {}).get("template") or {}).get("spec") or {}):
                continue  # no overhead for a DaemonSet using DRA (Karpenter, IGNORE_DRA_REQUESTS=true)
            ranges = [lr for lr in limitranges if _ds_key(lr)[0] == _ds_key(ds)[0]]
            variant = (object_version(pod) if pod else None, versions(ranges))
            value = self._convert("DaemonSet", ds, variant, lambda ds=ds, pod=pod, ranges=ranges: daemonset_pod(
                _daemonset_doc(ds, pod, ranges, self._runtimeclasses)))
            if isinstance(value, NodewrightValidationError):
                log.debug("ignoring %s: %s", describe(ds, "DaemonSet"), value)
            else:
                out.append(value)
        self._daemonsets = (key, out)
        return out

    # --- NodePools and EC2NodeClasses -----------------------------------------------------------------------

    def nodepool(self, obj: Obj) -> NodePool:
        """The validated ``karpenter.sh/v1`` NodePool model.

        Raises:
            NodewrightValidationError: an invalid NodePool.
        """
        return self._strict("NodePool", obj, None, lambda: parse_nodepool(obj))

    def nodepool_spec(self, obj: Obj, daemonsets: Sequence[Pod] = (),
                      usage: Mapping[str, int] | None = None) -> NodePoolSpec:
        """The scheduler's :class:`NodePoolSpec` of a NodePool object (daemonset overhead from ``daemonsets``,
        remaining limits from ``usage``: what the pool's nodes already hold).

        Raises:
            NodewrightValidationError: an invalid NodePool.
        """
        self.nodepool(obj)  # validated first: the spec conversion assumes a valid pool
        variant = (tuple(p.shape for p in daemonsets), tuple(sorted((usage or {}).items())))
        return self._strict("NodePoolSpec", obj, variant, lambda: nodepool_spec_from_model(obj, daemonsets, usage or {}))

    def nodeoverlay(self, obj: Obj) -> NodeOverlay:
        """The validated ``karpenter.sh/v1alpha1`` NodeOverlay model.

        Raises:
            NodewrightValidationError: an invalid NodeOverlay (what Karpenter's runtime validation refuses).
        """
        return self._strict("NodeOverlay", obj, None, lambda: parse_nodeoverlay(obj))

    def nodeclaim(self, obj: Obj) -> NodeClaim:
        """The validated ``karpenter.sh/v1`` NodeClaim model (what the cloud provider takes).

        Raises:
            NodewrightValidationError: an invalid NodeClaim.
        """
        return self._strict("NodeClaim", obj, None, lambda: parse_nodeclaim(obj))

    def nodeclaim_requirements(self, obj: Obj) -> Requirements:
        """A NodeClaim object's ``spec.requirements`` parsed once into the scheduler's :class:`Requirements`.

        Raises:
            NodewrightValidationError: an invalid requirement.
        """
        return self._strict("NodeClaimRequirements", obj, None, lambda: Requirements.from_expressions(
            (obj.get("spec") or {}).get("requirements"), "spec.requirements"))

    def nodeclass(self, obj: Mapping[str, Any]) -> EC2NodeClass:
        """The validated ``karpenter.k8s.aws/v1`` EC2NodeClass model.

        Raises:
            NodewrightValidationError: an invalid EC2NodeClass.
        """
        value = self._convert("EC2NodeClass", obj, None, lambda: parse_ec2nodeclass(dict(obj)))
        if isinstance(value, NodewrightValidationError):
            raise value
        return value  # type: ignore[no-any-return]

    def capacity_buffer(self, obj: Mapping[str, Any]) -> CapacityBuffer:
        """The validated ``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer model (:mod:`nodewright.state.buffers`
        resolves it into virtual pods).

        Raises:
            NodewrightValidationError: an invalid CapacityBuffer (field path and reason).
        """
        return self._strict("CapacityBuffer", obj, None, lambda: parse_model(CapacityBuffer, dict(obj)))

    def kubelet(self, obj: Mapping[str, Any]) -> KubeletSettings:
        """The kubelet settings of an EC2NodeClass object that change capacity or overhead.

        Raises:
            NodewrightValidationError: an invalid EC2NodeClass.
        """
        return self._strict("Kubelet", obj, None, lambda: kubelet_settings(self.nodeclass(obj)))


def _age_key(obj: Mapping[str, Any]) -> tuple[str, int]:
    """(creationTimestamp, resourceVersion when numeric else 0): larger is newer."""
    meta = obj.get("metadata") or {}
    rv = str(meta.get("resourceVersion") or "")
    return str(meta.get("creationTimestamp") or ""), int(rv) if rv.isdigit() else 0


def _claims_volumes(obj: Mapping[str, Any]) -> bool:
    """Whether the pod mounts a PersistentVolumeClaim (directly or as a generic ephemeral volume)."""
    volumes = (obj.get("spec") or {}).get("volumes")
    return isinstance(volumes, list) and any(
        isinstance(v, Mapping) and ("persistentVolumeClaim" in v or "ephemeral" in v) for v in volumes)


class VolumeError(PodBlocked):
    """A pod's claim that no new node can serve now: the pod is unschedulable (not invalid) for this reason."""


_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"

#: At most this many alternative zone/label combinations from a pod's volumes (PV and StorageClass terms multiply).
MAX_VOLUME_ALTERNATIVES = 64
_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


class VolumeTopology:
    """Where a pod's volumes let it run, as node requirements (Karpenter ``scheduling.VolumeTopology.Inject``).

    For each claim volume (``persistentVolumeClaim.claimName``, or ``<pod>-<volume>`` for a generic ephemeral
    volume): a claim bound to a PersistentVolume (``spec.volumeName``) contributes that volume's
    ``nodeAffinity.required`` terms, without ``kubernetes.io/hostname`` expressions (local and hostPath volumes
    name a node that a new node can never be; a term left empty makes the volume unconstrained); an unbound
    claim contributes its StorageClass's ``allowedTopologies`` (``storageClassName`` unset: the default class;
    ``""``: none). Terms are alternatives (ORed); several volumes combine every alternative of one with every
    alternative of the others. The result restricts the node (each alternative ANDed with the pod's own required
    node affinity) but not the pod's topology domains, as Karpenter's ``PodData.VolumeRequirements``.

    Unusable claims (:class:`VolumeError`; the pod stays pending with the reason), as Karpenter's
    ``ValidatePersistentVolumeClaims``: a claim that is missing, being deleted or ``Lost``; one naming a volume
    without ``pv.kubernetes.io/bind-completed``; a bound volume missing or being deleted; an unbound claim
    without a StorageClass, with a missing one, or with ``Immediate`` binding (the volume is created and bound
    before the pod schedules, so no node can be launched for it now). Hostname expressions are kept for volumes
    that are neither ``local`` nor ``hostPath``.
    """

    def __init__(self) -> None:
        self.key: tuple[Hashable, ...] = ()
        self.pvcs: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.pvs: dict[str, Mapping[str, Any]] = {}
        self.classes: dict[str, Mapping[str, Any]] = {}
        self.default_class: str | None = None

    def updated(self, pvcs: Sequence[Obj], pvs: Sequence[Obj], storageclasses: Sequence[Obj]) -> VolumeTopology:
        """This index, or a new one when the objects changed."""
        key = (versions(pvcs), versions(pvs), versions(storageclasses))
        if key == self.key:
            return self
        out = VolumeTopology()
        out.key = key
        out.pvcs = {_ds_key(c): c for c in pvcs}
        out.pvs = {_ds_key(v)[1]: v for v in pvs}
        out.classes = {_ds_key(c)[1]: c for c in storageclasses}
        # Several defaults: the newest by creationTimestamp (kube's DefaultStorageClass admission), ties by name.
        # Equal timestamps with numeric resourceVersions (an in-memory cluster stamps every object of ``simulate``
        # at one moment) fall back to creation order, so the later document is the newer class.
        defaults = sorted(n for n, c in out.classes.items()
                          if ((c.get("metadata") or {}).get("annotations") or {}).get(_DEFAULT_CLASS) == "true")
        defaults.sort(key=lambda n: _age_key(out.classes[n]), reverse=True)
        out.default_class = defaults[0] if defaults else None
        return out

    def _volume_terms(self, namespace: str, claim: str) -> list[list[dict[str, Any]]] | None:
        """Alternatives (lists of matchExpressions) for one claim; None when it does not constrain.

        Raises:
            VolumeError: the claim cannot be used by a new node (see class docstring).
        """
        ref = f"PersistentVolumeClaim {namespace}/{claim}"
        pvc = self.pvcs.get((namespace, claim))
        if pvc is None:
            raise VolumeError("spec.volumes", f"{ref} not found")
        if (pvc.get("metadata") or {}).get("deletionTimestamp"):
            raise VolumeError("spec.volumes", f"{ref} is being deleted")
        if (pvc.get("status") or {}).get("phase") == "Lost":
            raise VolumeError("spec.volumes", f"{ref} is Lost (its PersistentVolume is gone)")
        spec = pvc.get("spec") or {}
        if spec.get("volumeName"):
            if not ((pvc.get("metadata") or {}).get("annotations") or {}).get(_BIND_COMPLETED):
                raise VolumeError("spec.volumes", f"{ref} names volume {spec['volumeName']} but is not bound yet")
            pv = self.pvs.get(str(spec["volumeName"]))
            if pv is None:
                raise VolumeError("spec.volumes", f"PersistentVolume {spec['volumeName']} of {ref} not found")
            if (pv.get("metadata") or {}).get("deletionTimestamp"):
                raise VolumeError("spec.volumes", f"PersistentVolume {spec['volumeName']} of {ref} is being deleted")
            pv_spec = pv.get("spec") or {}
            node_local = "local" in pv_spec or "hostPath" in pv_spec
            required = ((pv_spec.get("nodeAffinity") or {}).get("required") or {})
            terms = [[e for e in (t.get("matchExpressions") or []) if not (node_local and e.get("key") == wk.HOSTNAME)]
                     for t in required.get("nodeSelectorTerms") or [] if isinstance(t, Mapping)]
        else:
            name = spec.get("storageClassName")
            if name is None:
                name = self.default_class
            if not name:
                raise VolumeError("spec.volumes", f"{ref} is not bound and has no StorageClass")
            sc = self.classes.get(str(name))
            if sc is None:
                raise VolumeError("spec.volumes", f"{ref} is not bound and its StorageClass {name} does not exist")
            if sc.get("volumeBindingMode", "Immediate") != "WaitForFirstConsumer":
                raise VolumeError("spec.volumes", f"{ref} waits for its volume (StorageClass {name} binds Immediate)")
            terms = [[{"key": e.get("key"), "operator": "In", "values": list(e.get("values") or [])}
                      for e in (t.get("matchLabelExpressions") or [])]
                     for t in sc.get("allowedTopologies") or [] if isinstance(t, Mapping)]
        if not terms or any(not t for t in terms):
            return None
        return terms

    def requirements(self, pod: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
        """The node requirements of the pod's volumes: alternatives, ORed (see class docstring); () when its
        volumes do not constrain the node. They become :attr:`Affinity.volume_required
        <nodewright.scheduling.pods.Affinity.volume_required>`, apart from the pod's own node affinity.

        Raises:
            NodewrightValidationError: a claim or bound volume that is not in the cluster, or an invalid
                expression in a volume's node affinity or a StorageClass's ``allowedTopologies``.
        """
        volumes = spec.get("volumes")
        if not isinstance(volumes, list):
            return ()
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        alternatives: list[list[dict[str, Any]]] = [[]]
        for volume in volumes:
            claim = claim_name(pod, volume) if isinstance(volume, Mapping) else None
            if claim is None:
                continue
            terms = self._volume_terms(namespace, claim)
            if terms is not None:
                alternatives = [a + t for a in alternatives for t in terms][:MAX_VOLUME_ALTERNATIVES]
        if alternatives == [[]]:
            return ()
        return tuple(NodeSelectorTerm.from_dict({"matchExpressions": alt}, f"spec.volumes (alternative {i})")
                     for i, alt in enumerate(alternatives))


def _resolve_term(term: Any, namespaces: Mapping[str, Mapping[str, str]]) -> Any:
    """A pod affinity term whose non-empty ``namespaceSelector`` is replaced by the names it selects, added to
    ``namespaces`` (kube: the union of both lists the namespaces searched)."""
    if not isinstance(term, Mapping):
        return term
    selector = term.get("namespaceSelector")
    if not selector or not isinstance(selector, Mapping):
        return term
    chosen = {name for name, labels in namespaces.items() if selects(selector, labels)}
    out = {k: v for k, v in term.items() if k != "namespaceSelector"}
    out["namespaces"] = sorted({*(str(n) for n in term.get("namespaces") or []), *chosen})
    return out


def resolve_namespace_selectors(spec: Mapping[str, Any], namespaces: Mapping[str, Mapping[str, str]]) -> Mapping[str, Any]:
    """``spec`` with every pod (anti-)affinity term's non-empty ``namespaceSelector`` resolved against
    ``namespaces`` (name -> labels) into the term's ``namespaces`` list, the field the scheduler's
    :class:`~nodewright.scheduling.pods.PodAffinityTerm` reads. An empty selector (``{}``: every namespace) is
    kept. A selector matching no namespace leaves the term to the pod's own namespace (the model cannot say
    "no namespace")."""
    affinity = spec.get("affinity")
    if not isinstance(affinity, Mapping) or not any(
            isinstance(affinity.get(k), Mapping) for k in ("podAffinity", "podAntiAffinity")):
        return spec
    new_affinity = dict(affinity)
    for kind in ("podAffinity", "podAntiAffinity"):
        part = affinity.get(kind)
        if not isinstance(part, Mapping):
            continue
        new_part = dict(part)
        required = part.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(required, list):
            new_part["requiredDuringSchedulingIgnoredDuringExecution"] = [_resolve_term(t, namespaces) for t in required]
        preferred = part.get("preferredDuringSchedulingIgnoredDuringExecution")
        if isinstance(preferred, list):
            new_part["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {**w, "podAffinityTerm": _resolve_term(w.get("podAffinityTerm"), namespaces)}
                if isinstance(w, Mapping) else w for w in preferred]
        new_affinity[kind] = new_part
    return {**spec, "affinity": new_affinity}


def _ds_key(ds: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a namespaced object."""
    meta = ds.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _daemonset_doc(ds: Mapping[str, Any], pod: Mapping[str, Any] | None, limitranges: Sequence[Obj],
                   runtimeclasses: Mapping[str, Mapping[str, Any]]) -> Obj:
    """The DaemonSet document whose template is what its pods really run (see :meth:`ClusterModels.daemonset_pods`),
    RuntimeClass admission applied."""
    spec = ds.get("spec") or {}
    template = spec.get("template")
    if not isinstance(template, Mapping):
        return {**ds, "kind": "DaemonSet"}  # daemonset_pod reports the missing template
    pod_spec = dict(template.get("spec") or {})
    if pod is not None:
        own = dict(pod.get("spec") or {})
        node_affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        affinity = dict(own.get("affinity") or {})
        pinned = dict(affinity.get("nodeAffinity") or {})
        pinned.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
        if node_affinity:
            pinned["requiredDuringSchedulingIgnoredDuringExecution"] = node_affinity
        if pinned:
            affinity["nodeAffinity"] = pinned
        else:
            affinity.pop("nodeAffinity", None)
        own.pop("nodeName", None)
        own["affinity"] = affinity
        if not affinity:
            own.pop("affinity")
        pod_spec = own
    pod_spec = dict(apply_runtime_class(pod_spec, runtimeclasses))
    doc = {**ds, "kind": "DaemonSet", "spec": {**spec, "template": {**template, "spec": pod_spec}}}
    return apply_limit_ranges([*limitranges, doc])[-1]


_BY_CLUSTER: weakref.WeakKeyDictionary[Any, ClusterModels] = weakref.WeakKeyDictionary()


def models_for(cluster: Any) -> ClusterModels:
    """The conversion cache of ``cluster`` (one per cluster object, created on first use)."""
    models = _BY_CLUSTER.get(cluster)
    if models is None:
        models = _BY_CLUSTER[cluster] = ClusterModels()
    return models
