"""DaemonSets on new nodes: which DaemonSet pods a node would run, what they request, which host ports they hold.

Karpenter ``scheduling/scheduler.go`` (``buildDaemonOverheadGroups``, ``isDaemonPodCompatible``,
``getCompatibleDaemonPods``) and ``nodeclaimtemplate.go``; read for behaviour, the code is ours:

- A DaemonSet pod runs on a node when it tolerates the node's ``NoSchedule``/``NoExecute`` taints
  (``PreferNoSchedule`` never keeps it away; a NodePool's startup taints are ignored, they go away) and its strict
  node requirements hold: its ``nodeSelector`` AND one of the ``nodeSelectorTerms`` of its required node affinity.
  The terms are ORed, as kube-scheduler does (Karpenter tries them in turn); preferences are ignored, and so are
  ``matchFields`` (the DaemonSet controller's pin of each pod to its own node by name).
- On a node a NodePool would launch, what the node will carry is known from the pool's requirements (its template
  labels and ``karpenter.sh/nodepool``), the node class label, Karpenter's lifecycle labels
  (``karpenter.sh/registered`` and ``karpenter.sh/initialized``, ``"true"`` once the node joins: Karpenter adds
  them to its templates for this check only, they never reach the NodeClaim) and the instance type. A term is
  checked against the pool first (a well-known label the pool leaves open is allowed: the instance type supplies
  it), then against each instance type's labels and offerings.
- So the overhead is per instance type: a DaemonSet that only runs where ``karpenter.k8s.aws/instance-cpu Gt 8``
  does not inflate a 4-vCPU type, and a type no DaemonSet runs on carries none. Types running the same DaemonSets
  share one :class:`DaemonGroup` (requests summed, host ports collected).

:class:`PoolDaemons` is computed from (NodePool, DaemonSet pods) alone and a type's group from (that, the instance
type), so both cache with those keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from nodewright.api import labels as L
from nodewright.quantities import Resources, add, format_resources
from nodewright.scheduling.pods import HostPort, Pod
from nodewright.scheduling.requirements import OFFERING_KEYS, Requirements
from nodewright.scheduling.taints import PREFER_NO_SCHEDULE, Taint, untolerated

#: Karpenter's lifecycle labels: every node it launches carries them once it has joined the cluster.
LIFECYCLE_LABELS: Mapping[str, str] = {L.REGISTERED: "true", L.INITIALIZED: "true"}
_LIFECYCLE = Requirements.from_node_selector(LIFECYCLE_LABELS)
#: Keys an instance type or its offerings decide (a term without them is decided by the pool alone).
_TYPE_KEYS = (L.WELL_KNOWN_LABELS | OFFERING_KEYS) - {L.NODEPOOL, L.EC2NODECLASS, L.REGION}


def daemon_terms(pod: Pod) -> tuple[Requirements, ...]:
    """The pod's strict node requirements, one alternative per required node-affinity term (ORed): its
    ``nodeSelector`` AND the term's ``matchExpressions``; just the ``nodeSelector`` without required affinity."""
    base = Requirements.from_node_selector(pod.node_selector)
    terms = pod.affinity.node_required
    if not terms:
        return (base,)
    return tuple(base.intersect(term.requirements()) for term in terms)


def blocking(taints: Iterable[Taint]) -> tuple[Taint, ...]:
    """The taints that keep a DaemonSet pod away (every effect but ``PreferNoSchedule``)."""
    return tuple(t for t in taints if t.effect != PREFER_NO_SCHEDULE)


def pool_terms(pod: Pod, requirements: Requirements, taints: Iterable[Taint]) -> tuple[Requirements, ...]:
    """The terms of ``pod`` a new node of a pool could satisfy, judged at pool level; () when the pod never runs
    there. ``requirements`` is :func:`node_requirements` of the pool; ``taints`` its taints (not startup taints)."""
    if untolerated(pod.tolerations, blocking(taints)) is not None:
        return ()
    return tuple(term for term in daemon_terms(pod) if requirements.compatible(term))


def node_requirements(requirements: Requirements, node_class: str = "") -> Requirements:
    """What a new node of a pool with ``requirements`` is known to carry, for DaemonSet scheduling: the pool's
    requirements, Karpenter's lifecycle labels and, when named, the node class label."""
    reqs = requirements.intersect(_LIFECYCLE)
    if node_class:
        reqs = reqs.intersect(Requirements.from_node_selector({L.EC2NODECLASS: node_class}))
    return reqs


def runs_on_node(pod: Pod, labels: Mapping[str, str], taints: Iterable[Taint]) -> bool:
    """Whether the DaemonSet pod runs on a node with these labels and taints (a term must hold on the labels
    themselves: a missing label satisfies only ``NotIn``/``DoesNotExist``)."""
    if untolerated(pod.tolerations, blocking(taints)) is not None:
        return False
    return any(term.satisfied_by_labels(labels) for term in daemon_terms(pod))


@dataclass(frozen=True, slots=True, eq=False)
class DaemonGroup:
    """The DaemonSet pods an instance type of a pool runs.

    Attributes:
        pods: the DaemonSet pods, in input order.
        requests: their summed requests (cpu millicores, memory bytes, pods count, ...).
        ports: their host ports.
    """

    pods: tuple[Pod, ...] = ()
    requests: Resources = field(default_factory=dict)
    ports: tuple[HostPort, ...] = ()

    @classmethod
    def of(cls, pods: Sequence[Pod]) -> DaemonGroup:
        """The group of ``pods``."""
        total: Resources = {}
        for pod in pods:
            total = add(total, pod.requests)
        return cls(tuple(pods), total, tuple(p for pod in pods for p in pod.host_ports))

    def blocks(self, ports: Iterable[HostPort]) -> bool:
        """True when one of ``ports`` conflicts with a host port of these DaemonSets."""
        mine = self.ports
        return bool(mine) and any(a.conflicts(b) for a in ports for b in mine)

    def holder(self, port: HostPort) -> Pod | None:
        """The DaemonSet pod whose host port conflicts with ``port`` (None: none)."""
        return next((pod for pod in self.pods if any(port.conflicts(p) for p in pod.host_ports)), None)


#: The group of a type no DaemonSet runs on.
NO_DAEMONS = DaemonGroup()


class PoolDaemons:
    """The DaemonSet pods a NodePool's new nodes could run, and the :class:`DaemonGroup` of each instance type.

    Args:
        pods: DaemonSet pods (:func:`nodewright.scheduling.pods.daemonset_pod`).
        requirements: :func:`node_requirements` of the pool.
        taints: the pool's taints (startup taints left out).
    """

    __slots__ = ("admitted", "everywhere", "varying", "keys", "by_labels", "has_ports", "_groups", "_by_labels")

    def __init__(self, pods: Iterable[Pod], requirements: Requirements, taints: Iterable[Taint]) -> None:
        taints = tuple(taints)
        admitted: list[Pod] = []
        everywhere: list[Pod] = []
        varying: list[tuple[Pod, tuple[Requirements, ...]]] = []
        for pod in pods:
            terms = pool_terms(pod, requirements, taints)
            if not terms:
                continue
            admitted.append(pod)
            if any(not any(k in _TYPE_KEYS for k in term) for term in terms):
                everywhere.append(pod)  # a term the pool alone satisfies: runs on every type
            else:
                varying.append((pod, terms))
        #: every pod some type of the pool may run (in input order)
        self.admitted: tuple[Pod, ...] = tuple(admitted)
        self.everywhere: tuple[Pod, ...] = tuple(everywhere)
        self.varying = tuple(varying)
        keys = {k for _, terms in varying for term in terms for k in term if k in _TYPE_KEYS}
        #: the type labels the varying pods' terms read, and whether those labels alone decide (no offering key)
        self.keys = tuple(sorted(keys))
        self.by_labels = not keys & OFFERING_KEYS
        self.has_ports = any(pod.host_ports for pod in admitted)
        self._groups: dict[tuple[int, ...], DaemonGroup] = {}
        self._by_labels: dict[tuple[str | None, ...], DaemonGroup] = {}

    def overhead(self) -> Resources:
        """Summed requests of every pod some type may run (the pool's largest possible overhead)."""
        return DaemonGroup.of(self.admitted).requests

    def group_for(self, labels: Mapping[str, str], compatible: Callable[[Requirements], bool]) -> DaemonGroup:
        """The group of an instance type of the pool: its ``labels`` and ``compatible(term)`` (whether the type's
        labels and available offerings admit a term; :meth:`TypeInfo.compatible`)."""
        if not self.varying:
            return self._group(())
        if self.by_labels:
            signature = tuple(map(labels.get, self.keys))
            found = self._by_labels.get(signature)
            if found is None:
                found = self._by_labels[signature] = self._group_of(compatible)
            return found
        return self._group_of(compatible)

    def _group_of(self, compatible: Callable[[Requirements], bool]) -> DaemonGroup:
        return self._group(tuple(i for i, (_, terms) in enumerate(self.varying) if any(map(compatible, terms))))

    def _group(self, key: tuple[int, ...]) -> DaemonGroup:
        found = self._groups.get(key)
        if found is None:
            chosen = {id(self.varying[i][0]) for i in key} | {id(p) for p in self.everywhere}
            pods = [p for p in self.admitted if id(p) in chosen]
            found = self._groups[key] = DaemonGroup.of(pods) if pods else NO_DAEMONS
        return found


def port_taken(group: DaemonGroup, ports: Sequence[HostPort], where: str = "on every instance type it allows") -> str:
    """The reason a pod with ``ports`` gets no new node when the DaemonSets of every type it could use (``where``)
    hold one of them (``group``: one such type's DaemonSets)."""
    for port in ports:
        holder = group.holder(port)
        if holder is not None:
            return (f"host port {port.port}/{port.protocol} is taken by daemonset {holder.namespace}/"
                    f"{holder.owner_name or holder.name} {where}")
    return f"its host ports are taken by daemonsets {where}"


def overhead_text(groups: Iterable[DaemonGroup], fallback: Resources) -> str:
    """The daemonset overhead of some types (their ``groups``) as a reason quotes it: one value, or the least and
    the most per resource when the types run different DaemonSets (Karpenter's ``min=..., max=...``);
    ``fallback`` when there is no type."""
    distinct = list({tuple(sorted(g.requests.items())): g.requests for g in groups}.values())
    if not distinct:
        return format_resources(fallback)
    if len(distinct) == 1:
        return format_resources(distinct[0])
    names = {k for g in distinct for k in g}
    low = {k: min(g.get(k, 0) for g in distinct) for k in names}
    high = {k: max(g.get(k, 0) for g in distinct) for k in names}
    return f"min={format_resources(low)}, max={format_resources(high)}"
