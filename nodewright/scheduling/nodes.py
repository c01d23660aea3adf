"""Existing nodes (and in-flight NodeClaims) as the scheduler sees them.

An :class:`ExistingNode` carries what placement needs: labels, taints, allocatable and the pods already
bound to it. Karpenter tries existing nodes before opening new NodeClaims, initialized nodes first; for a node
that is not initialized yet its startup taints and the transient taints a booting node carries
(``node.kubernetes.io/not-ready``, ``node.kubernetes.io/unreachable``, ``karpenter.sh/unregistered``,
``node.cloudprovider.kubernetes.io/uninitialized``, and the Node Readiness Controller's ``readiness.k8s.io/*``)
are ignored, as Karpenter does (``state/statenode.go`` ``Taints()``, ``scheduling/taints.go``
``IsKnownEphemeralTaint``). Once initialized, every taint counts again, even on a node that went ``NotReady``:
its pods need capacity elsewhere (Karpenter v1.14; its 2022 code ignored the not-ready/unreachable taints on every
node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as L
from nodewright.errors import NodewrightValidationError
from nodewright.quantities import Resources, add, parse_resource_list
from nodewright.scheduling.pods import Pod
from nodewright.scheduling.taints import Taint, taint_from_dict

#: Taints a node carries while booting: ignored for a node that is not initialized yet, and gone before the
#: lifecycle controller marks a NodeClaim Initialized (Karpenter's ``KnownEphemeralTaints``, plus nodewright's
#: readiness hold ``nodewright.io/nominating``, lifted seconds after Ready: controllers/nomination.py).
EPHEMERAL_TAINT_KEYS = frozenset(
    {L.NOT_READY_TAINT_KEY, L.UNREACHABLE_TAINT_KEY, L.UNREGISTERED_TAINT_KEY, L.UNINITIALIZED_TAINT_KEY,
     L.NOMINATING_TAINT_KEY}
)
#: Key prefixes of transient taint families (the Node Readiness Controller's ``readiness.k8s.io/<rule>``).
EPHEMERAL_TAINT_PREFIXES = ("readiness.k8s.io/",)


def is_ephemeral_taint(taint: Taint) -> bool:
    """A taint a node carries only while it boots (see module docstring)."""
    return taint.key in EPHEMERAL_TAINT_KEYS or taint.key.startswith(EPHEMERAL_TAINT_PREFIXES)


@dataclass(slots=True, eq=False)
class ExistingNode:
    """A node in the cluster, or a NodeClaim launched earlier that has no node yet (``initialized=False``).

    Attributes:
        name: node (or NodeClaim) name; used as the hostname topology domain.
        labels: node labels (zone, capacity type, instance type, nodepool, hostname ...).
        allocatable: cpu millicores, memory bytes, pods count ...
        taints: current taints.
        pods: pods bound to it (daemonset pods included).
        initialized: False for a NodeClaim/node still booting (see module docstring).
        nodepool: ``karpenter.sh/nodepool`` label ('' for nodes Karpenter does not manage).
        instance_type, capacity_type, zone: from labels, for reports.
        price: USD/hour when known (0.0 otherwise).
        capacity: node capacity when known.
        startup_taints: taints ignored while not initialized (the NodeClaim's, else its NodePool's).
        marked_for_deletion: being disrupted/terminated: never a placement target.
        unschedulable: ``spec.unschedulable`` (cordoned): never a placement target.
        volume_limits: CSI driver -> volumes it can attach to the node (its CSINode's
            ``spec.drivers[].allocatable.count``; none known for a NodeClaim without a node yet).
    """

    name: str
    labels: dict[str, str]
    allocatable: Resources
    taints: tuple[Taint, ...] = ()
    pods: list[Pod] = field(default_factory=list)
    initialized: bool = True
    nodepool: str = ""
    instance_type: str = ""
    capacity_type: str = ""
    zone: str = ""
    price: float = 0.0
    capacity: Resources = field(default_factory=dict)
    startup_taints: tuple[Taint, ...] = ()
    marked_for_deletion: bool = False
    unschedulable: bool = False
    volume_limits: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labels.setdefault(L.HOSTNAME, self.name)
        self.nodepool = self.nodepool or self.labels.get(L.NODEPOOL, "")
        self.instance_type = self.instance_type or self.labels.get(L.INSTANCE_TYPE, "")
        self.capacity_type = self.capacity_type or self.labels.get(L.CAPACITY_TYPE, "")
        self.zone = self.zone or self.labels.get(L.ZONE, "")

    def requested(self) -> Resources:
        """Sum of the bound pods' requests."""
        total: Resources = {}
        for pod in self.pods:
            total = add(total, pod.requests)
        return total

    def scheduling_taints(self) -> tuple[Taint, ...]:
        """Taints that block placement now: startup taints (matched by key and effect, as Karpenter's
        ``MatchTaint``) and transient ones dropped while not initialized."""
        if self.initialized:
            return self.taints
        startup = {(t.key, t.effect) for t in self.startup_taints}
        return tuple(t for t in self.taints if (t.key, t.effect) not in startup and not is_ephemeral_taint(t))


def node_from_manifest(doc: Mapping[str, Any], pods: Iterable[Pod] = ()) -> ExistingNode:
    """A ``v1/Node`` manifest as an :class:`ExistingNode`; ``pods`` with ``node_name`` equal to it are bound.

    Initialized when the node has ``karpenter.sh/initialized: "true"``, or is not managed by a NodePool, or
    reports a ``Ready=True`` condition and carries none of the boot taints (:func:`is_ephemeral_taint`: a Node
    Ready for milliseconds still has ``node.kubernetes.io/not-ready``, and one under the readiness hold
    ``nodewright.io/nominating``; counted as initialized, its taints would make the provisioner plan its pods
    again). Cordoned nodes and nodes carrying ``karpenter.sh/disrupted`` or with a
    deletion timestamp are never placement targets.

    Raises:
        NodewrightValidationError: not a Node, no name, or invalid allocatable quantities.
    """
    if doc.get("kind") != "Node":
        raise NodewrightValidationError("kind", f"expected 'Node', got {doc.get('kind')!r}")
    meta = doc.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise NodewrightValidationError("metadata.name", "required field is missing")
    spec = doc.get("spec") or {}
    status = doc.get("status") or {}
    labels = {L.NORMALIZED_LABELS.get(str(k), str(k)): str(v) for k, v in (meta.get("labels") or {}).items()}
    capacity = parse_resource_list(status.get("capacity"), "status.capacity")
    allocatable = parse_resource_list(status.get("allocatable"), "status.allocatable") or dict(capacity)
    if not allocatable:
        raise NodewrightValidationError("status.allocatable", "a Node needs status.allocatable (or capacity)")
    taints = tuple(taint_from_dict(t) for t in spec.get("taints") or [])
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    managed = L.NODEPOOL in labels
    # Ready alone is not enough while a boot taint is still on: between the kubelet's Ready and the node lifecycle
    # controller lifting not-ready (milliseconds), or while the readiness hold is on, the node is still booting.
    initialized = labels.get(L.INITIALIZED) == "true" or not managed or (
        ready and not any(is_ephemeral_taint(t) for t in taints))
    disrupted = any(t.key == L.DISRUPTED_TAINT_KEY for t in taints)
    return ExistingNode(
        name=str(name),
        labels=labels,
        allocatable=allocatable,
        capacity=capacity,
        taints=taints,
        pods=[p for p in pods if p.node_name == name],
        initialized=initialized,
        marked_for_deletion=disrupted or bool(meta.get("deletionTimestamp")),
        unschedulable=bool(spec.get("unschedulable")),
    )
