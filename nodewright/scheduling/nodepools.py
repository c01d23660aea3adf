"""NodePools as the scheduler sees them: requirements, labels, taints, limits, daemonset overhead.

:func:`nodepool_spec_from_model` builds a :class:`NodePoolSpec` from a validated ``karpenter.sh/v1`` NodePool
(the :mod:`nodewright.api` model or its manifest dict). The template labels become ``In [value]``
requirements and ``karpenter.sh/nodepool In [name]`` is added, as Karpenter's NodeClaimTemplate does.

Daemonset overhead: :attr:`NodePoolSpec.daemonsets` are the DaemonSet pods some node of the pool could run
(:mod:`nodewright.scheduling.daemonsets`: taints tolerated, one required node-affinity term compatible with what a
new node of the pool carries); the scheduler works out which of them each instance type runs.
:attr:`NodePoolSpec.daemonset_overhead` sums them all: the most a node of the pool can carry.

Target utilization (nodewright's addition): annotation ``nodewright.io/target-utilization: "0.8"`` (or ``"80%"``)
makes new nodes of the pool large enough that pod + daemonset requests use at most 80% of allocatable cpu and
memory. Read by :func:`nodewright.api.annotations.target_utilization` (malformed -> full packing, never an error).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as L
from nodewright.api.annotations import TARGET_UTILIZATION, target_utilization
from nodewright.errors import NodewrightValidationError
from nodewright.quantities import Resources, parse_resource_list
from nodewright.scheduling.daemonsets import PoolDaemons, node_requirements
from nodewright.scheduling.nodes import ExistingNode
from nodewright.scheduling.pods import Pod
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.result import NodeClaimPlan
from nodewright.scheduling.taints import Taint, taint_from_dict

TARGET_UTILIZATION_ANNOTATION = TARGET_UTILIZATION  # re-exported; the rules live in nodewright.api.annotations


@dataclass(slots=True, eq=False)
class NodePoolSpec:
    """What the scheduler needs from one NodePool.

    Attributes:
        name: NodePool name.
        weight: priority (higher first; ties by name); 0 when unset.
        requirements: pool requirements incl. template labels and ``karpenter.sh/nodepool``.
        labels: template labels (plus ``karpenter.sh/nodepool``).
        taints: template taints (placement must tolerate them).
        startup_taints: put on the NodeClaim, ignored for placement.
        limits: ``spec.limits`` in canonical units (``nodes`` as a count); None when unlimited.
        usage: resources already provisioned by the pool (capacity of its nodes/NodeClaims).
        target_utilization: fraction in (0, 1) or None (pack fully: no annotation, "1", or a malformed value).
        daemonset_overhead: summed requests of :attr:`daemonsets` (the most a node of the pool carries; each
            instance type's own overhead is the scheduler's, :mod:`nodewright.scheduling.daemonsets`).
        daemonsets: the DaemonSet pods some node of the pool could run (empty when built without them).
        node_class_ref: ``spec.template.spec.nodeClassRef`` as a dict.
        annotations: NodePool annotations.
    """

    name: str
    requirements: Requirements
    weight: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: Resources | None = None
    usage: Resources = field(default_factory=dict)
    target_utilization: float | None = None
    daemonset_overhead: Resources = field(default_factory=dict)
    daemonsets: tuple[Pod, ...] = ()
    node_class_ref: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def node_class(self) -> str:
        """The name of its EC2NodeClass ("" for another kind of node class): a label its nodes carry."""
        ref = self.node_class_ref
        return str(ref.get("name") or "") if ref.get("kind", "EC2NodeClass") == "EC2NodeClass" else ""

    def daemons(self, daemonsets: Iterable[Pod] | None = None) -> PoolDaemons:
        """Which of ``daemonsets`` (default: :attr:`daemonsets`) its new nodes run, per instance type."""
        pods = self.daemonsets if daemonsets is None else daemonsets
        return PoolDaemons(pods, node_requirements(self.requirements, self.node_class()), self.taints)

    def remaining(self) -> Resources | None:
        """``limits - usage`` per limited resource (may be negative), or None when unlimited."""
        if self.limits is None:
            return None
        return {name: qty - self.usage.get(name, 0) for name, qty in self.limits.items()}


def reaches_limits(spec: NodePoolSpec, plans: Iterable[NodeClaimPlan]) -> bool:
    """Whether ``spec``'s usage plus its ``plans`` (each at the type it launches as) leaves no room, for some
    limited resource, for one more NodeClaim like the largest of them; False when the pool has no limits. Units as
    :attr:`NodePoolSpec.limits` (cpu millicores, memory bytes, ``nodes`` a count)."""
    if spec.limits is None:
        return False
    mine = [p for p in plans if p.nodepool == spec.name]
    for name, cap in spec.limits.items():
        sizes = [1 if name == "nodes" else p.instance_type.capacity.get(name, 0) for p in mine]
        if spec.usage.get(name, 0) + sum(sizes) + max(sizes, default=0) > cap:
            return True
    return False


def launched_capacity(spec: NodePoolSpec, plans: Iterable[NodeClaimPlan]) -> Resources:
    """The most ``plans`` of ``spec``'s pool may take from each of its limited resources: per NodeClaim, the
    largest capacity among its candidate instance types (its launch may get any of them), and 1 per NodeClaim
    for ``nodes``. The limits rule (Karpenter ``subtractMax``, kept in every path): ``usage`` + this <= ``limits``.
    Empty when the pool has no limits."""
    out: Resources = {}
    if spec.limits is None:
        return out
    out = {name: 0 for name in spec.limits}
    for plan in plans:
        if plan.nodepool != spec.name:
            continue
        for name in out:
            out[name] += 1 if name == "nodes" else max(it.capacity.get(name, 0) for it in plan.instance_types)
    return out


def usage_of(nodes: Iterable[ExistingNode]) -> dict[str, Resources]:
    """NodePool -> summed capacity (and ``nodes`` count) of ``nodes`` it owns (Karpenter
    ``updateRemainingResources``: each state node's capacity counts against its pool's limits); the pool is the
    node's ``nodepool``, else its ``karpenter.sh/nodepool`` label; a node without a known capacity counts its
    allocatable."""
    usage: dict[str, Resources] = {}
    for node in nodes:
        pool = node.nodepool or node.labels.get(L.NODEPOOL, "")
        if not pool:
            continue
        total = usage.setdefault(pool, {})
        for name, qty in (node.capacity or node.allocatable).items():
            total[name] = total.get(name, 0) + qty
        total["nodes"] = total.get("nodes", 0) + 1
    return usage


def pool_requirements(name: str, requirements: Iterable[Mapping[str, Any]], labels: Mapping[str, str]) -> Requirements:
    """Pool requirements: its expressions, its template labels as ``In``, and ``karpenter.sh/nodepool In [name]``.

    Raises:
        NodewrightValidationError: an invalid expression (path ``spec.template.spec.requirements[i]``).
    """
    reqs = Requirements.from_expressions(list(requirements), "spec.template.spec.requirements")
    extra = [Requirement(k, False, (v,)) for k, v in labels.items()]
    extra.append(Requirement(L.NODEPOOL, False, (name,)))
    return Requirements([*reqs.values(), *extra])


def daemonset_overhead(requirements: Requirements, taints: Iterable[Taint], daemonsets: Iterable[Pod],
                       node_class: str = "") -> Resources:
    """Summed requests of the daemonset pods that could run on a new node with these requirements and taints
    (some instance type of the pool runs each; see :mod:`nodewright.scheduling.daemonsets`)."""
    return PoolDaemons(daemonsets, node_requirements(requirements, node_class), taints).overhead()


def nodepool_spec_from_model(
    nodepool: Any,
    daemonsets: Iterable[Pod] = (),
    usage: Mapping[str, int] | None = None,
) -> NodePoolSpec:
    """Build a :class:`NodePoolSpec` from a v1 NodePool (the pydantic model, or its manifest dict).

    Args:
        nodepool: :class:`nodewright.api.nodepool.NodePool` or a ``karpenter.sh/v1`` NodePool dict.
        daemonsets: daemonset pods (:func:`nodewright.scheduling.pods.daemonset_pod`) for the overhead.
        usage: resources already provisioned by the pool (capacity of its nodes), for remaining limits.

    Raises:
        NodewrightValidationError: invalid requirements or limits (a malformed ``nodewright.io/*`` annotation
            never raises: the pool packs fully, see :mod:`nodewright.api.annotations`).
    """
    doc: Mapping[str, Any] = nodepool.to_manifest() if hasattr(nodepool, "to_manifest") else nodepool
    meta = doc.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name:
        raise NodewrightValidationError("metadata.name", "required field is missing")
    spec = doc.get("spec") or {}
    template = spec.get("template") or {}
    tspec = template.get("spec") or {}
    labels = {str(k): str(v) for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()}
    requirements = pool_requirements(name, tspec.get("requirements") or [], labels)
    taints = tuple(taint_from_dict(t) for t in tspec.get("taints") or [])
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    limits = parse_resource_list(spec.get("limits"), "spec.limits") if spec.get("limits") is not None else None
    node_class_ref = dict(tspec.get("nodeClassRef") or {})
    pool = NodePoolSpec(
        name=name,
        weight=int(spec.get("weight") or 0),
        requirements=requirements,
        labels={**labels, L.NODEPOOL: name},
        taints=taints,
        startup_taints=tuple(taint_from_dict(t) for t in tspec.get("startupTaints") or []),
        limits=limits,
        usage=dict(usage or {}),
        target_utilization=target_utilization(annotations),
        node_class_ref=node_class_ref,
        annotations=annotations,
    )
    daemons = pool.daemons(daemonsets)
    pool.daemonsets = daemons.admitted
    pool.daemonset_overhead = daemons.overhead()
    return pool
