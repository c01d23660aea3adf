"""A model of kube-scheduler's default profile: binds pending pods one at a time, filter then score, in waves.

Scenario replay needs the scheduler the cluster really runs, not the provisioner's packer: Karpenter's premise is
that its simulation matches kube-scheduler, and where kube-scheduler spreads pods differently from the plan the
plan is lost (issue 25). This module follows ``k8s.io/kubernetes/pkg/scheduler`` (v1.36; the plugins under
``framework/plugins``, read for their rules and constants, none of their code):

Queue (``PrioritySort``, ``backend/queue``): pending pods by priority (high first), then the time they entered the
queue (creation, or their last failed attempt: ``AddUnschedulableIfNotPresent`` refreshes it, so a pod that just
failed is tried after the others). A pod that fits nowhere waits until a cluster event moves it back to the active
queue: the plugins that rejected it (its ``UnschedulablePlugins``) decide, by their ``EventsToRegister`` and
queueing hints (:func:`queue_hint`; v1.36 with ``SchedulerQueueingHints``): a Node added, or changed in its taints,
labels or allocatable, moves the pods it may now take (a taint lift moves the pods that tolerate what is left; a
Node added with room moves the pods ``NodeResourcesFit`` rejected, even while its not-ready taint is on); a bound
pod leaving moves those rejected for room or pod rules; a bound pod arriving those rejected by spread or
inter-pod affinity. No plugin registers a Node *condition* change: a Node turning ``Ready`` while its not-ready
taint is still on moves no pod (:mod:`nodewright.sim.kubelet` lifts that taint 11 ms later, as the node lifecycle
controller does). After :data:`UNSCHEDULABLE_FLUSH_SECONDS` a pod is tried again anyway.

Waves (:meth:`KubeScheduler.tick`): the pods moved are tried in queue order, one scheduling cycle each, each seeing
the pods bound before it; then again every pod the wave's own bindings and clears move, until a pass changes
nothing. A wave takes :data:`ATTEMPT_SECONDS` per attempt: a tick given the time to the next cluster event stops
where that event arrives (the pods not reached stay queued), so two Node updates milliseconds apart interleave as
they do in kube-scheduler.

Nominated node first (``evaluateNominatedNode``): a pod whose ``status.nominatedNodeName`` names a node that passes
every filter goes there without scoring. While filtering node N for pod P, the pods nominated to N (unbound, of
priority >= P's, P excluded) count as running on N (``RunFilterPluginsWithNominatedPods``: their requests, host
ports and volumes, and through the PreFilter ``AddPod`` extensions of ``PodTopologySpread`` and
``InterPodAffinity`` their spread counts and (anti-)affinity terms; N must pass with and, when that passed, without
them), so a pod planned elsewhere does not take room promised to them.

Nominations kube-scheduler clears: a pod that fits nowhere goes through PostFilter (``DefaultPreemption``); with no
victim found -- always here: preemption itself is not modelled -- ``Evaluator.Preempt`` returns
``NewPostFilterResultWithNominatedNode("")`` and ``handleSchedulingFailure`` clears the pod's
``status.nominatedNodeName`` (whoever set it). A pod with ``spec.preemptionPolicy: Never`` is not eligible to preempt
(``PodEligibleToPreemptOthers``): PostFilter returns no result and its nomination stays. Each clear is a nominated
pod leaving its node (``updatePodInSchedulingQueue`` -> ``MoveAllToActiveOrBackoffQueue(AssignedPodDelete)``,
pods of at most its priority): it moves the pods rejected for room, and the room it held is free to take, so one
event starts a wave that clears the nomination of every pod that does not fit yet. nodewright's nomination
controller sets them again once the wave is over (:mod:`nodewright.controllers.nomination`).

Filters: ``NodeUnschedulable`` (cordoned, being deleted), not ``Ready`` (read as the not-ready taint: the node
lifecycle controller taints an unready Node within milliseconds; the real filters read no condition),
``TaintToleration`` (NoSchedule/NoExecute), ``NodeAffinity`` (``nodeSelector`` and the ORed required terms, volume
topology included: ``VolumeBinding``/``VolumeZone``), ``NodePorts``, ``NodeResourcesFit`` (requests vs
allocatable, ``pods`` included), ``NodeVolumeLimits`` (CSI attach counts of the node's CSINode), ``PodTopologySpread`` (``DoNotSchedule``: skew against the global minimum over the
domains of eligible nodes, ``minDomains``, node inclusion policies), ``InterPodAffinity`` (required affinity with
the first-pod rule, required anti-affinity both ways).

Scores (plugin weight x normalized 0..100 score, summed):

========================================  ======  ==========================================================
plugin                                    weight  score
========================================  ======  ==========================================================
TaintToleration                           3       intolerable PreferNoSchedule taints, reversed (fewer wins)
NodeAffinity                              2       summed weights of matching preferred terms, / max
NodeResourcesFit (LeastAllocated)         1       mean over cpu, memory of (alloc - requested) x 100 / alloc;
                                                  requested uses non-zero requests (100m cpu, 200Mi memory
                                                  for a pod requesting none)
NodeResourcesBalancedAllocation           1       50 + (50 + with - without) / 2, each (1 - std(cpu, memory
                                                  fractions)) x 100; 0 for a BestEffort pod
PodTopologySpread                         2       ScheduleAnyway constraints (or the system defaults:
                                                  hostname maxSkew 3, zone maxSkew 5, for pods a
                                                  ReplicaSet/StatefulSet owns), count x log(domains + 2) +
                                                  maxSkew - 1, then 100 x (max + min - s) / max
InterPodAffinity                          2       preferred (anti-)affinity both ways, required affinity
                                                  of existing pods at weight 1, min-max normalized
========================================  ======  ==========================================================

The highest total wins; ties are broken by a seeded random choice (kube-scheduler samples ties uniformly).
A pod that fits nowhere gets ``PodScheduled=False, reason=Unschedulable`` -- the signal Karpenter's provisioner
(and Cluster Autoscaler) act on.

Left out: ImageLocality (no images in a simulation), DRA, preemption (a failed attempt never finds a victim), the
backoff queue's 1-10 s delays (``SchedulerPopFromBackoffQ`` pops backed-off pods whenever the active queue is
empty), the queueing hints' finer tests (label selectors of spread and affinity, CSINode and volume events), the
per-container non-zero defaults (applied per pod here), Services as a source of the default spreading selector (the
pod's own labels stand in for its ReplicaSet's selector).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as L
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import Obj, condition_true, is_deleting, labels_of, meta, name_of
from nodewright.kube.resources import ResourceKind
from nodewright.quantities import CPU, MEMORY, Resources
from nodewright.scheduling import Pod, PodAffinityTerm, Requirements, Taint, TopologySpreadConstraint
from nodewright.scheduling.pods import DO_NOT_SCHEDULE, HONOR, SCHEDULE_ANYWAY
from nodewright.scheduling.taints import PREFER_NO_SCHEDULE, untolerated
from nodewright.selectors import LabelSelector
from nodewright.state.cluster import sync_models
from nodewright.state.models import models_for
from nodewright.state.pods import is_terminal, is_unschedulable, node_name, nominated_node_name, pod_key

MAX_SCORE = 100
#: ``schedutil.DefaultMilliCPURequest`` / ``DefaultMemoryRequest``: what scoring counts for a pod requesting none.
NON_ZERO_CPU = 100
NON_ZERO_MEMORY = 200 * 1024 * 1024
#: The default profile's score plugin weights (``apis/config/v1/default_plugins.go``).
WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1,
           "PodTopologySpread": 2, "InterPodAffinity": 2}
#: ``podtopologyspread.systemDefaultConstraints``: (topology key, maxSkew), ScheduleAnyway.
SYSTEM_DEFAULT_SPREAD = ((L.HOSTNAME, 3), (L.ZONE, 5))
#: Owners whose pods get the system default spreading (``helper.DefaultSelector``).
SPREAD_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController", "Deployment"})
#: ``InterPodAffinityArgs.hardPodAffinityWeight`` default.
HARD_POD_AFFINITY_WEIGHT = 1
_HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(eq=False)
class NodeInfo:
    """One node during a pass: labels, taints, allocatable, the pods bound to it (and placed this pass).
    ``schedulable``: Ready, not cordoned, not being deleted or disrupted; ``ready``: its Ready condition."""

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resources
    schedulable: bool
    volume_limits: dict[str, int] = field(default_factory=dict)
    ready: bool = True
    pods: list[Pod] = field(default_factory=list)
    requested: dict[str, int] = field(default_factory=dict)
    non_zero: list[int] = field(default_factory=lambda: [0, 0])
    volumes: dict[str, set[str]] = field(default_factory=dict)

    def add(self, pod: Pod) -> None:
        """Count ``pod`` on this node."""
        self.pods.append(pod)
        for driver, claim in pod.volumes:
            self.volumes.setdefault(driver, set()).add(claim)
        for key, value in pod.requests.items():
            self.requested[key] = self.requested.get(key, 0) + value
        cpu, memory = non_zero(pod)
        self.non_zero[0] += cpu
        self.non_zero[1] += memory


def exceeds_volume_limits(pod: Pod, node: NodeInfo, others: Sequence[Pod] = ()) -> bool:
    """``NodeVolumeLimits``: the pod's CSI claims not attached yet, with those attached (and those of ``others``,
    pods counted on the node as nominated there), pass a driver's CSINode count (a claim shared with attached pods
    counts once; no limit without a count)."""
    attached = node.volumes
    if any(p.volumes for p in others):
        attached = {d: set(c) for d, c in node.volumes.items()}
        for p in others:
            for driver, claim in p.volumes:
                attached.setdefault(driver, set()).add(claim)
    new: dict[str, set[str]] = {}
    for driver, claim in pod.volumes:
        if driver in node.volume_limits and claim not in attached.get(driver, ()):
            new.setdefault(driver, set()).add(claim)
    return any(len(attached.get(d, ())) + len(c) > node.volume_limits[d] for d, c in new.items())


def non_zero(pod: Pod) -> tuple[int, int]:
    """(cpu millicores, memory bytes) scoring counts for ``pod`` (``NonMissingContainerRequests``)."""
    return pod.requests.get(CPU) or NON_ZERO_CPU, pod.requests.get(MEMORY) or NON_ZERO_MEMORY


def _term_namespaces(owner: Pod, term: PodAffinityTerm) -> frozenset[str] | None:
    if term.all_namespaces:
        return None
    return frozenset(term.namespaces) if term.namespaces else frozenset({owner.namespace})


def term_selects(owner: Pod, term: PodAffinityTerm, other: Pod) -> bool:
    """Whether ``owner``'s pod (anti-)affinity ``term`` selects ``other`` (namespaces, then the label selector)."""
    namespaces = _term_namespaces(owner, term)
    if namespaces is not None and other.namespace not in namespaces:
        return False
    return term.label_selector is not None and term.label_selector.matches(other.labels)


def _has_pod_terms(pod: Pod) -> bool:
    a = pod.affinity
    return bool(a.pod_affinity_required or a.pod_affinity_preferred or a.pod_anti_affinity_required
                or a.pod_anti_affinity_preferred)


def _selects(selector: LabelSelector | None, namespace: str, pod: Pod) -> bool:
    return selector is not None and pod.namespace == namespace and selector.matches(pod.labels)


def _required_node_affinity(pod: Pod) -> tuple[Requirements, tuple[Requirements, ...]]:
    """(nodeSelector, ORed required terms incl. volume topology) as requirements."""
    terms = tuple(t.requirements() for t in pod.affinity.placement_terms())
    return Requirements.from_node_selector(pod.node_selector), terms


def _own_affinity_matches(pod: Pod, labels: Mapping[str, str]) -> bool:
    """The pod's own nodeSelector and required terms (no volumes): the spread ``nodeAffinityPolicy: Honor`` test."""
    if not Requirements.from_node_selector(pod.node_selector).satisfied_by_labels(labels):
        return False
    terms = pod.affinity.node_required
    return not terms or any(t.requirements().satisfied_by_labels(labels) for t in terms)


@dataclass(frozen=True)
class _Spread:
    key: str
    max_skew: int
    selector: LabelSelector | None
    min_domains: int | None = None
    honor_affinity: bool = True
    honor_taints: bool = False


def _constraints(pod: Pod, action: str) -> list[_Spread]:
    out = []
    for c in pod.topology_spread:
        if c.when_unsatisfiable == action:
            out.append(_spread_of(c))
    if action == SCHEDULE_ANYWAY and not pod.topology_spread and pod.owner_kind in SPREAD_OWNERS and pod.labels:
        selector = LabelSelector.from_dict({"matchLabels": dict(pod.labels)})
        out = [_Spread(key, skew, selector) for key, skew in SYSTEM_DEFAULT_SPREAD]
    return out


def _spread_of(c: TopologySpreadConstraint) -> _Spread:
    return _Spread(c.topology_key, c.max_skew, c.label_selector, c.min_domains,
                   c.node_affinity_policy == HONOR, c.node_taints_policy == HONOR)


#: Filter plugin names (what :meth:`Cycle.reject` returns; the queueing hints key on them).
NODE_UNSCHEDULABLE = "NodeUnschedulable"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_PORTS = "NodePorts"
NODE_RESOURCES_FIT = "NodeResourcesFit"
NODE_VOLUME_LIMITS = "NodeVolumeLimits"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"


def _tolerates(pod: Pod, node: NodeInfo) -> bool:
    """``TaintToleration``'s filter: every NoSchedule/NoExecute taint of ``node`` is tolerated."""
    return untolerated(pod.tolerations, [t for t in node.taints if t.effect in _HARD_EFFECTS]) is None


def _affinity_matches(pod: Pod, node: NodeInfo) -> bool:
    """``NodeAffinity`` (volume topology included): the nodeSelector and one of the ORed required terms."""
    selector, terms = _required_node_affinity(pod)
    return selector.satisfied_by_labels(node.labels) and (not terms or any(t.satisfied_by_labels(node.labels)
                                                                           for t in terms))


def _static_reject(pod: Pod, node: NodeInfo) -> str:
    """The filters that read only the node: ``NodeUnschedulable``, ``TaintToleration``, ``NodeAffinity``."""
    if not node.schedulable:
        return TAINT_TOLERATION if not node.ready else NODE_UNSCHEDULABLE
    if not _tolerates(pod, node):
        return TAINT_TOLERATION
    if not _affinity_matches(pod, node):
        return NODE_AFFINITY
    return ""


@dataclass
class _PreFilter:
    """What one pod's filters need from the whole cluster, computed once per cycle (kube-scheduler's PreFilter)."""

    spread: list[tuple[_Spread, dict[str, int], int, int]]  # constraint, counts by domain, global minimum, self
    blocked: set[tuple[str, str]]  # (topology key, value) domains required anti-affinity rules out
    affinity: list[tuple[str, set[str]]]  # per required affinity term: key, domains holding a matching pod
    first_pod: bool  # no pod matches any required affinity term and the pod matches its own terms


class Cycle:
    """The scheduling cycles of one pass over a node snapshot (see module docstring).

    Args:
        nodes: every node of the cluster (schedulable or not: all count as spread domains).
        nominated: node name -> pods nominated there and still unbound.
        rng: breaks score ties.
    """

    def __init__(self, nodes: Sequence[NodeInfo], nominated: Mapping[str, Sequence[Pod]], rng: random.Random) -> None:
        self.nodes = list(nodes)
        self.by_name = {n.name: n for n in self.nodes}
        self.nominated = nominated
        self.rng = rng
        #: (pod, node) of bound pods with any pod (anti-)affinity term: the symmetric rules and scores.
        self.holders = [(p, n) for n in self.nodes for p in n.pods if _has_pod_terms(p)]

    # --- one pod -------------------------------------------------------------------------------------------

    def place(self, pod: Pod, nominated_node: str = "", rejected: set[str] | None = None) -> NodeInfo | None:
        """The node ``pod`` goes to (already counted there), or None when no node passes the filters (then
        ``rejected`` gets the plugins that rejected a node: the pod's ``UnschedulablePlugins``)."""
        pre = self.prefilter(pod)
        target = self.by_name.get(nominated_node) if nominated_node else None
        if target is not None and not self.reject(pod, target, pre):
            return self._assume(pod, target)
        feasible = []
        for n in self.nodes:
            plugin = self.reject(pod, n, pre)
            if not plugin:
                feasible.append(n)
            elif rejected is not None:
                rejected.add(plugin)
        if not feasible:
            return None
        scores = self.scores(pod, feasible)
        best = max(scores)
        winners = [n for n, s in zip(feasible, scores, strict=True) if s == best]
        return self._assume(pod, winners[0] if len(winners) == 1 else self.rng.choice(winners))

    def _assume(self, pod: Pod, node: NodeInfo) -> NodeInfo:
        node.add(pod)
        if _has_pod_terms(pod):
            self.holders.append((pod, node))
        return node

    # --- filters -------------------------------------------------------------------------------------------

    def prefilter(self, pod: Pod) -> _PreFilter:
        """Spread counts, anti-affinity domains and affinity domains for ``pod`` over every node."""
        hard = _constraints(pod, DO_NOT_SCHEDULE)
        spread = []
        for c in hard:
            counts: dict[str, int] = {}
            for other in self.nodes:
                if not self._eligible(pod, c, other, hard):
                    continue
                domain = other.labels[c.key]
                counts[domain] = counts.get(domain, 0) + sum(1 for p in other.pods
                                                             if _selects(c.selector, pod.namespace, p))
            minimum = min(counts.values()) if counts else 0
            if c.min_domains is not None and len(counts) < c.min_domains:
                minimum = 0
            spread.append((c, counts, minimum, 1 if _selects(c.selector, pod.namespace, pod) else 0))
        blocked: set[tuple[str, str]] = set()
        for existing, where in self.holders:
            for term in existing.affinity.pod_anti_affinity_required:
                value = where.labels.get(term.topology_key)
                if value is not None and term_selects(existing, term, pod):
                    blocked.add((term.topology_key, value))
        aff = pod.affinity
        if aff.pod_anti_affinity_required:
            for other in self.nodes:
                for term in aff.pod_anti_affinity_required:
                    value = other.labels.get(term.topology_key)
                    if value is not None and any(term_selects(pod, term, p) for p in other.pods):
                        blocked.add((term.topology_key, value))
        affinity: list[tuple[str, set[str]]] = []
        matched = False
        for term in aff.pod_affinity_required:
            domains: set[str] = set()
            for other in self.nodes:
                if any(term_selects(pod, term, p) for p in other.pods):
                    matched = True
                    value = other.labels.get(term.topology_key)
                    if value is not None:
                        domains.add(value)
            affinity.append((term.topology_key, domains))
        first = (bool(aff.pod_affinity_required) and not matched
                 and all(term_selects(pod, t, pod) for t in aff.pod_affinity_required))
        return _PreFilter(spread, blocked, affinity, first)

    def feasible(self, pod: Pod, node: NodeInfo, pre: _PreFilter) -> bool:
        """Every filter plugin passes (:meth:`reject`)."""
        return not self.reject(pod, node, pre)

    def reject(self, pod: Pod, node: NodeInfo, pre: _PreFilter) -> str:
        """The first filter plugin that rejects ``node`` for ``pod``, in the default profile's order, or ``""``.

        Run as ``RunFilterPluginsWithNominatedPods`` does: first with the pods nominated to ``node`` (unbound,
        priority >= ``pod``'s, ``pod`` excluded) counted as running there -- their requests, host ports and volumes,
        and through the PreFilter ``AddPod`` extensions their spread counts and (anti-)affinity terms --, then, when
        that passed and such pods exist, once more without them (a nominated pod may end up elsewhere: pod affinity
        to it must not rely on it). A node that is not Ready counts as ``TaintToleration`` (its not-ready taint);
        cordoned, being deleted or marked for deletion as ``NodeUnschedulable``.
        """
        plugin = _static_reject(pod, node)
        if plugin:
            return plugin
        others = [p for p in self.nominated.get(node.name, ()) if p.key != pod.key and p.priority >= pod.priority]
        if others:
            plugin = self._fits(pod, node, self._with_nominated(pod, node, pre, others), others)
            if plugin:
                return plugin
        return self._fits(pod, node, pre, ())

    def _fits(self, pod: Pod, node: NodeInfo, pre: _PreFilter, others: Sequence[Pod]) -> str:
        """The filters that depend on the pods of ``node`` (plus ``others``) and on ``pre``: the rejecting plugin or
        ``""``."""
        if pod.host_ports:
            taken = [hp for p in (*node.pods, *others) for hp in p.host_ports]
            if any(a.conflicts(b) for a in pod.host_ports for b in taken):
                return NODE_PORTS
        extra: dict[str, int] = {}
        for p in others:
            for key, value in p.requests.items():
                extra[key] = extra.get(key, 0) + value
        for key, value in pod.requests.items():
            if value and node.requested.get(key, 0) + extra.get(key, 0) + value > node.allocatable.get(key, 0):
                return NODE_RESOURCES_FIT
        if pod.volumes and node.volume_limits and exceeds_volume_limits(pod, node, others):
            return NODE_VOLUME_LIMITS
        for c, counts, minimum, self_match in pre.spread:
            domain = node.labels.get(c.key)
            if domain is None or counts.get(domain, 0) + self_match - minimum > c.max_skew:
                return POD_TOPOLOGY_SPREAD
        if any((key, value) in pre.blocked for key, value in node.labels.items()):
            return INTER_POD_AFFINITY
        for topology_key, domains in pre.affinity:
            here = node.labels.get(topology_key)
            if here is None or (here not in domains and not pre.first_pod):
                return INTER_POD_AFFINITY
        return ""

    def _with_nominated(self, pod: Pod, node: NodeInfo, pre: _PreFilter, others: Sequence[Pod]) -> _PreFilter:
        """``pre`` as if ``others`` ran on ``node`` (``addGENominatedPods``: PodTopologySpread's ``AddPod`` counts
        each pod its constraint selects in ``node``'s domain when ``node`` is eligible; InterPodAffinity's adds their
        required anti-affinity against ``pod``, and ``pod``'s own terms that select them, at ``node``'s
        topology)."""
        spread = pre.spread
        if spread:
            hard = [c for c, _, _, _ in spread]
            spread = []
            for c, counts, minimum, self_match in pre.spread:
                added = sum(1 for p in others if _selects(c.selector, pod.namespace, p))
                if added and self._eligible(pod, c, node, hard):
                    counts = dict(counts)
                    domain = node.labels[c.key]
                    counts[domain] = counts.get(domain, 0) + added
                    minimum = min(counts.values())
                    if c.min_domains is not None and len(counts) < c.min_domains:
                        minimum = 0
                spread.append((c, counts, minimum, self_match))
        blocked = pre.blocked
        aff = pod.affinity
        if aff.pod_anti_affinity_required or any(p.affinity.pod_anti_affinity_required for p in others):
            blocked = set(blocked)
            for other in others:
                for term in other.affinity.pod_anti_affinity_required:
                    value = node.labels.get(term.topology_key)
                    if value is not None and term_selects(other, term, pod):
                        blocked.add((term.topology_key, value))
                for term in aff.pod_anti_affinity_required:
                    value = node.labels.get(term.topology_key)
                    if value is not None and term_selects(pod, term, other):
                        blocked.add((term.topology_key, value))
        affinity = pre.affinity
        first_pod = pre.first_pod
        if aff.pod_affinity_required:
            affinity = []
            for term, (topology_key, domains) in zip(aff.pod_affinity_required, pre.affinity, strict=True):
                if any(term_selects(pod, term, p) for p in others):
                    first_pod = False
                    value = node.labels.get(topology_key)
                    if value is not None:
                        domains = domains | {value}
                affinity.append((topology_key, domains))
        return _PreFilter(spread, blocked, affinity, first_pod)

    def _eligible(self, pod: Pod, c: _Spread, node: NodeInfo, hard: Sequence[_Spread]) -> bool:
        if any(k.key not in node.labels for k in hard):
            return False
        if c.honor_affinity and not _own_affinity_matches(pod, node.labels):
            return False
        return not (c.honor_taints and untolerated(pod.tolerations, [t for t in node.taints
                                                                     if t.effect in _HARD_EFFECTS]) is not None)

    # --- scores --------------------------------------------------------------------------------------------

    def scores(self, pod: Pod, nodes: Sequence[NodeInfo]) -> list[int]:
        """Weighted sums of the normalized plugin scores, one per node of ``nodes``."""
        parts = (
            (WEIGHTS["TaintToleration"], self._taint_scores(pod, nodes)),
            (WEIGHTS["NodeAffinity"], self._node_affinity_scores(pod, nodes)),
            (WEIGHTS["NodeResourcesFit"], [least_allocated(pod, n) for n in nodes]),
            (WEIGHTS["NodeResourcesBalancedAllocation"], [balanced_allocation(pod, n) for n in nodes]),
            (WEIGHTS["PodTopologySpread"], self._spread_scores(pod, nodes)),
            (WEIGHTS["InterPodAffinity"], self._pod_affinity_scores(pod, nodes)),
        )
        return [sum(w * s[i] for w, s in parts) for i in range(len(nodes))]

    @staticmethod
    def _taint_scores(pod: Pod, nodes: Sequence[NodeInfo]) -> list[int]:
        tolerations = [t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
        raw = [sum(1 for t in n.taints if t.effect == PREFER_NO_SCHEDULE and not any(x.tolerates(t) for x in tolerations))
               for n in nodes]
        return default_normalize(raw, reverse=True)

    @staticmethod
    def _node_affinity_scores(pod: Pod, nodes: Sequence[NodeInfo]) -> list[int]:
        preferred = [(p.weight, p.term.requirements()) for p in pod.affinity.node_preferred]
        raw = [sum(w for w, req in preferred if req.satisfied_by_labels(n.labels)) for n in nodes]
        return default_normalize(raw, reverse=False)

    def _spread_scores(self, pod: Pod, nodes: Sequence[NodeInfo]) -> list[int]:
        soft = _constraints(pod, SCHEDULE_ANYWAY)
        if not soft:
            return [0] * len(nodes)
        require_all = bool(pod.topology_spread)
        ignored = {n.name for n in nodes if require_all and any(c.key not in n.labels for c in soft)}
        counts: list[dict[str, int]] = [{} for _ in soft]
        weights = []
        for i, c in enumerate(soft):
            if c.key != L.HOSTNAME:
                for n in nodes:
                    if n.name not in ignored and c.key in n.labels:
                        counts[i].setdefault(n.labels[c.key], 0)
            size = len(nodes) - len(ignored) if c.key == L.HOSTNAME else len(counts[i])
            weights.append(math.log(size + 2))
        for other in self.nodes:
            if require_all and any(c.key not in other.labels for c in soft):
                continue
            for i, c in enumerate(soft):
                if c.honor_affinity and not _own_affinity_matches(pod, other.labels):
                    continue
                domain = other.labels.get(c.key)
                if c.key == L.HOSTNAME or domain not in counts[i]:
                    continue
                counts[i][str(domain)] += sum(1 for p in other.pods if _selects(c.selector, pod.namespace, p))
        raw = []
        for n in nodes:
            if n.name in ignored:
                raw.append(0)
                continue
            score = 0.0
            for i, c in enumerate(soft):
                if c.key not in n.labels:
                    continue
                if c.key == L.HOSTNAME:
                    count = sum(1 for p in n.pods if _selects(c.selector, pod.namespace, p))
                else:
                    count = counts[i][n.labels[c.key]]
                score += count * weights[i] + (c.max_skew - 1)
            raw.append(int(_round_half_away(score)))
        kept = [s for n, s in zip(nodes, raw, strict=True) if n.name not in ignored]
        low, high = (min(kept), max(kept)) if kept else (0, 0)
        out = []
        for n, s in zip(nodes, raw, strict=True):
            if n.name in ignored:
                out.append(0)
            elif high == 0:
                out.append(MAX_SCORE)
            else:
                out.append(MAX_SCORE * (high + low - s) // high)
        return out

    def _pod_affinity_scores(self, pod: Pod, nodes: Sequence[NodeInfo]) -> list[int]:
        aff = pod.affinity
        topo: dict[str, dict[str, int]] = {}

        def credit(key: str, labels: Mapping[str, str], weight: int) -> None:
            value = labels.get(key)
            if value is not None:
                topo.setdefault(key, {})[value] = topo.get(key, {}).get(value, 0) + weight

        def weighted(owner: Pod, target: Pod, labels: Mapping[str, str]) -> None:
            """``owner``'s preferred affinity (+) and anti-affinity (-) terms that select ``target``."""
            for sign, terms in ((1, owner.affinity.pod_affinity_preferred), (-1, owner.affinity.pod_anti_affinity_preferred)):
                for w in terms:
                    if term_selects(owner, w.term, target):
                        credit(w.term.topology_key, labels, sign * w.weight)

        if aff.pod_affinity_preferred or aff.pod_anti_affinity_preferred:
            for other in self.nodes:
                for existing in other.pods:
                    weighted(pod, existing, other.labels)
        for existing, other in self.holders:
            for term in existing.affinity.pod_affinity_required:
                if term_selects(existing, term, pod):
                    credit(term.topology_key, other.labels, HARD_POD_AFFINITY_WEIGHT)
            weighted(existing, pod, other.labels)
        if not topo:
            return [0] * len(nodes)
        raw = [sum(values.get(n.labels.get(key, ""), 0) if key in n.labels else 0 for key, values in topo.items())
               for n in nodes]
        low, high = min(raw), max(raw)
        if high == low:
            return [0] * len(nodes)
        return [int(MAX_SCORE * (s - low) / (high - low)) for s in raw]


def _round_half_away(value: float) -> float:
    """Go's ``math.Round`` (half away from zero)."""
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def default_normalize(raw: Sequence[int], reverse: bool) -> list[int]:
    """``helper.DefaultNormalizeScore``: scale to 0..100 by the maximum (reversed: 100 minus that)."""
    high = max(raw, default=0)
    if high == 0:
        return [MAX_SCORE if reverse else 0 for _ in raw]
    return [MAX_SCORE - MAX_SCORE * s // high if reverse else MAX_SCORE * s // high for s in raw]


def least_allocated(pod: Pod, node: NodeInfo) -> int:
    """``NodeResourcesFit`` with the LeastAllocated strategy (cpu and memory, weight 1 each; non-zero requests)."""
    cpu, memory = non_zero(pod)
    total = count = 0
    for requested, capacity in ((node.non_zero[0] + cpu, node.allocatable.get(CPU, 0)),
                                (node.non_zero[1] + memory, node.allocatable.get(MEMORY, 0))):
        if capacity == 0:
            continue
        count += 1
        total += 0 if requested > capacity else (capacity - requested) * MAX_SCORE // capacity
    return total // count if count else 0


def _balance(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    fractions = [min(1.0, q / a) for q, a in zip(requested, allocatable, strict=True) if a]
    std = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    return int((1 - std) * MAX_SCORE)


def balanced_allocation(pod: Pod, node: NodeInfo) -> int:
    """``NodeResourcesBalancedAllocation``: how much placing ``pod`` improves the cpu/memory balance (requests)."""
    cpu, memory = pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0)
    if not cpu and not memory:
        return 0  # BestEffort
    allocatable = (node.allocatable.get(CPU, 0), node.allocatable.get(MEMORY, 0))
    before = (node.requested.get(CPU, 0), node.requested.get(MEMORY, 0))
    with_pod = _balance((before[0] + cpu, before[1] + memory), allocatable)
    without = _balance(before, allocatable)
    return MAX_SCORE // 2 + int((MAX_SCORE // 2 + with_pod - without) / 2)


#: Safety bound on the scheduling passes of one wave. A pass is repeated only after it bound a pod or cleared a
#: nomination, so a wave ends by itself within (pending pods + nominations + 1) passes.
MAX_WAVE_PASSES = 500
#: Seconds one scheduling attempt takes (its status write included): kube-scheduler v1.36 in the real runs of
#: docs/benchmarks.md retried a case's ~10 pending pods every ~60 ms.
ATTEMPT_SECONDS = 0.005
#: Seconds an unschedulable pod waits before it is tried again without any event
#: (``podMaxInUnschedulablePodsDuration``).
UNSCHEDULABLE_FLUSH_SECONDS = 300.0
#: Plugins whose rejection room freed on a node may lift (a pod or a nomination leaving it).
_ROOM = frozenset({NODE_RESOURCES_FIT, NODE_PORTS, NODE_VOLUME_LIMITS})
#: Plugins whose rejection another pod's arrival or departure may lift.
_POD_RULES = frozenset({POD_TOPOLOGY_SPREAD, INTER_POD_AFFINITY})
#: Cluster events (``framework.ClusterEvent``), as :meth:`KubeScheduler.on_change` records them.
NODE_ADD, NODE_UPDATE, NODE_DELETE = "NodeAdd", "NodeUpdate", "NodeDelete"
ASSIGNED_POD_ADD, ASSIGNED_POD_DELETE = "AssignedPodAdd", "AssignedPodDelete"
NOMINATION_GONE = "NominatedPodDelete"  # a nominated pod's nomination changed: AssignedPodDelete of its old node
_NONE = -math.inf  # no priority recorded


def may_preempt(doc: Obj) -> bool:
    """``DefaultPreemption.PodEligibleToPreemptOthers``: a pod with ``spec.preemptionPolicy: Never`` is not eligible
    (PostFilter returns no result, so a failed attempt keeps its nomination)."""
    return (doc.get("spec") or {}).get("preemptionPolicy") != "Never"


def _node_mark(node: Obj) -> dict[str, Any]:
    """What of a Node the scheduling queue reacts to (``NodeSchedulingPropertiesChange``: labels, taints,
    allocatable, ``spec.unschedulable``, condition statuses)."""
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    return {"labels": sorted(labels_of(node).items()), "taints": spec.get("taints") or [],
            "allocatable": sorted((status.get("allocatable") or {}).items()),
            "unschedulable": bool(spec.get("unschedulable")) or is_deleting(node),
            "conditions": sorted((str(c.get("type")), str(c.get("status"))) for c in status.get("conditions") or [])}


def queue_hint(event: str, changed: frozenset[str], priority: float, pod: Pod, rejected: frozenset[str],
               node: NodeInfo | None) -> bool:
    """Whether ``event`` moves ``pod``, rejected by the plugins ``rejected`` at its last attempt, back to the active
    queue: one of those plugins registers the event and its ``QueueingHintFn`` says Queue (``EventsToRegister`` of
    the default plugins, v1.36 with queueing hints; each hint coarsened where noted).

    Args:
        event: one of the event names above.
        changed: for ``NodeUpdate``, what changed (keys of :func:`_node_mark`).
        priority: for ``NominatedPodDelete``, the pod's priority (only pods of at most it are moved).
        node: the Node of a Node event as it is now (None when gone).
    """
    if event == ASSIGNED_POD_DELETE:  # room and pod rules (the spread and affinity hints' selector tests left out)
        return bool(rejected & (_ROOM | _POD_RULES))
    if event == NOMINATION_GONE:  # NodeResourcesFit: a nominated pod leaving frees its room
        return pod.priority <= priority and bool(rejected & _ROOM)
    if event == ASSIGNED_POD_ADD:
        return bool(rejected & _POD_RULES)
    if event == NODE_DELETE:
        return POD_TOPOLOGY_SPREAD in rejected
    if node is None:
        return False
    add = event == NODE_ADD
    taints = add or bool(changed & {"taints", "conditions"})  # conditions: the model's stand-in not-ready taint
    if TAINT_TOLERATION in rejected and taints and _tolerates(pod, node):
        return True
    if NODE_UNSCHEDULABLE in rejected and (add or bool(changed & {"taints", "unschedulable"})) and node.schedulable:
        return True
    if NODE_AFFINITY in rejected and (add or "labels" in changed) and _affinity_matches(pod, node):
        return True
    if NODE_RESOURCES_FIT in rejected and (add or "allocatable" in changed) and all(
            v <= node.allocatable.get(k, 0) for k, v in pod.requests.items() if v):
        return True  # isFit on the node's allocatable (its pods not counted)
    if rejected & {NODE_PORTS, NODE_VOLUME_LIMITS} and add:
        return True
    if POD_TOPOLOGY_SPREAD in rejected and (add or bool(changed & {"labels", "taints"})):
        return True
    return INTER_POD_AFFINITY in rejected and (add or "labels" in changed)


class KubeScheduler:
    """Binds pods in *waves*: cluster events move pods to the active queue (queueing hints), and a wave tries them
    until nothing changes (see module docstring).

    Args:
        cluster: the in-memory cluster (the scheduler registers a listener on it).
        seed: seeds the tie-breaking choice among equally scored nodes.
        clear_nominations: a failed attempt clears the pod's ``status.nominatedNodeName`` (preemption found no
            victim; kube-scheduler's behaviour, the default). False keeps every nomination (the model before the
            real runs of docs/benchmarks.md showed the clears).
        clock: epoch seconds now; with one, pods unschedulable for :data:`UNSCHEDULABLE_FLUSH_SECONDS` are tried
            again without an event.

    Attributes:
        bindings: ``(pod key, node name, nominated node or "")`` of every binding made, in order.
        cleared: ``(pod key, node name)`` of every nomination a failed attempt cleared, in order.
        waves: ticks that tried at least one pod; ``passes``: scheduling passes over the queue they ran.
    """

    def __init__(self, cluster: InMemoryCluster, seed: int | str = 0, clear_nominations: bool = True,
                 clock: Callable[[], float] | None = None) -> None:
        self.cluster = cluster
        self.clear_nominations = clear_nominations
        self.clock = clock
        self._queued: set[str] = set()  # pods in the active queue
        #: events since the last wave: (event, node name) -> (what changed, highest priority of a nominated pod)
        self._events: dict[tuple[str, str], tuple[frozenset[str], float]] = {}
        self._rejected: dict[str, frozenset[str]] = {}  # unschedulable pod key -> plugins that rejected it
        self._failed_at: dict[str, float] = {}  # unschedulable pod key -> when it last failed
        self._seen: dict[str, tuple[str, bool, bool, int]] = {}  # pod key -> (nomination, gated, assigned, priority)
        self._nodes: dict[str, dict[str, Any]] = {}  # node name -> _node_mark as last seen
        self._stamps: dict[str, int] = {}  # pending pod key -> when it entered the queue (added, or last failed)
        self._stamp = 0
        self._waiting: set[str] = set()  # keys of pods not bound yet
        self._writing = False  # the wave's own writes are accounted for in the wave
        self.models = models_for(cluster)
        self.rng = random.Random(f"kube-scheduler-{seed}")
        self.bindings: list[tuple[str, str, str]] = []
        self.cleared: list[tuple[str, str]] = []
        self.waves = 0
        self.passes = 0
        cluster.add_listener(self.on_change)

    # --- the scheduling queue ------------------------------------------------------------------------------

    def _event(self, event: str, node: str = "", changed: frozenset[str] = frozenset(),
               priority: float = _NONE) -> None:
        before, high = self._events.get((event, node), (frozenset(), _NONE))
        self._events[(event, node)] = (before | changed, max(high, priority))

    def on_change(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        """Cluster listener (``eventhandlers.go``): records the events :func:`queue_hint` weighs -- a Node added,
        deleted or changed in what scheduling reads; a pod bound by someone else (or created bound); a bound pod
        gone, finished or being deleted; a nomination changed or cleared -- and puts a pending pod that was added
        or lost its scheduling gates in the active queue. Setting a nomination where there was none records
        nothing (a status-only change of the pod itself, ``isPodUpdated``)."""
        if kind == r.NODES:
            name = name_of(obj)
            old_mark = self._nodes.pop(name, None)
            if event == "DELETED":
                self._event(NODE_DELETE, name)
                return
            mark = _node_mark(obj)
            self._nodes[name] = mark
            if old_mark is None:
                self._event(NODE_ADD, name)
            else:
                changed = frozenset(k for k, v in mark.items() if old_mark.get(k) != v)
                if changed:
                    self._event(NODE_UPDATE, name, changed)
            return
        if kind != r.PODS:
            return
        key = pod_key(obj)
        old = self._seen.pop(key, None)
        if event == "DELETED":
            self._forget(key)
            if old is not None and not self._writing:
                if old[2]:
                    self._event(ASSIGNED_POD_DELETE)
                elif old[0]:
                    self._event(NOMINATION_GONE, priority=old[3])
            return
        host = node_name(obj)
        live = not is_deleting(obj) and not is_terminal(obj)
        pending = live and not host
        spec = obj.get("spec") or {}
        new = (nominated_node_name(obj) if pending else "", pending and bool(spec.get("schedulingGates")),
               bool(host) and live, int(spec.get("priority") or 0))
        self._seen[key] = new
        if pending:
            self._waiting.add(key)
            if key not in self._stamps:
                self._stamps[key] = self._next_stamp()
        else:
            self._forget(key)
        if self._writing:
            return
        if old is None:
            if pending and not new[1]:
                self._queued.add(key)
            elif new[2]:
                self._event(ASSIGNED_POD_ADD)  # created bound (a DaemonSet's pod)
            return
        if old[2] != new[2]:
            self._event(ASSIGNED_POD_ADD if new[2] else ASSIGNED_POD_DELETE)
        elif old[0] and old[0] != new[0]:
            self._event(NOMINATION_GONE, priority=old[3])
        if pending and old[1] and not new[1]:
            self._queued.add(key)

    def _forget(self, key: str) -> None:
        self._waiting.discard(key)
        self._stamps.pop(key, None)
        self._rejected.pop(key, None)
        self._failed_at.pop(key, None)

    def _next_stamp(self) -> int:
        self._stamp += 1
        return self._stamp

    def _queue_order(self, entry: tuple[Obj, Pod]) -> tuple[int, int, str, str]:
        """``PrioritySort``: priority (high first), then the time the pod entered the queue -- its creation, or its
        last failed attempt (``AddUnschedulableIfNotPresent`` refreshes the timestamp): a pod that just failed is
        tried after the others."""
        doc, pod = entry
        return (-pod.priority, self._stamps.get(pod.key, 0), str(meta(doc).get("creationTimestamp") or ""), pod.key)

    def _flush_due(self, now: float | None) -> bool:
        return now is not None and any(now - t >= UNSCHEDULABLE_FLUSH_SECONDS for t in self._failed_at.values())

    def snapshot(self, nodes: Iterable[Obj], bound: Mapping[str, list[Pod]]) -> list[NodeInfo]:
        """Every node as :class:`NodeInfo` with its bound pods (unschedulable ones kept: they are spread domains)."""
        out = []
        for node in nodes:
            existing = self.models.node(node, bound.get(name_of(node), []))
            if existing is None:
                continue
            ready = condition_true(node, "Ready")
            schedulable = (not is_deleting(node) and ready and not existing.unschedulable
                           and not existing.marked_for_deletion)
            info = NodeInfo(existing.name, existing.labels, existing.taints, existing.allocatable, schedulable,
                            dict(existing.volume_limits), ready)
            for pod in bound.get(name_of(node), []):
                info.add(pod)
            out.append(info)
        return out

    # --- a wave ----------------------------------------------------------------------------------------------

    def tick(self, seconds: float | None = None) -> list[tuple[str, str]]:
        """One wave: try the pods in the active queue and those the recorded events move there
        (:func:`queue_hint`), in queue order; then again every pod the wave's own bindings and clears move, until a
        pass changes nothing (at most :data:`MAX_WAVE_PASSES`). A pod that fits nowhere is marked ``Unschedulable``,
        remembers the plugins that rejected it, and its nomination is cleared (unless ``preemptionPolicy: Never``
        or ``clear_nominations`` is off).

        Args:
            seconds: time until the next cluster event (None: none comes). The wave makes at most
                ``seconds / ATTEMPT_SECONDS`` attempts; the pods it did not reach stay queued for the next tick,
                where that event's pods join them (a Node's not-ready taint lifted milliseconds after its Ready
                arrives while the wave the Ready update started still runs).

        Returns:
            The ``(pod key, node)`` bindings made.
        """
        budget = None if seconds is None or math.isinf(seconds) else max(0, math.floor(seconds / ATTEMPT_SECONDS
                                                                                        + 1e-9))
        now = self.clock() if self.clock is not None else None
        if not self._queued and not self._events and not self._flush_due(now):
            return []
        queued, events = self._queued, self._events
        self._queued, self._events = set(), {}
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
        nodes = self.snapshot(self.cluster.list(r.NODES), bound)
        noms = {pod.key: nominated_node_name(doc) for doc, pod in pending}
        nominated: dict[str, list[Pod]] = {}
        for _, pod in pending:
            if noms[pod.key]:
                nominated.setdefault(noms[pod.key], []).append(pod)
        cycle = Cycle(nodes, nominated, self.rng)

        def moved(pod: Pod) -> bool:
            rejected = self._rejected.get(pod.key)
            if rejected is None or pod.key in queued:
                return True  # in the active queue (never tried since it was added)
            if now is not None and now - self._failed_at.get(pod.key, now) >= UNSCHEDULABLE_FLUSH_SECONDS:
                return True
            if not rejected:  # rejected by no plugin (no node at all): any event moves it (isPodWorthRequeuing)
                return bool(events)
            return any(queue_hint(event, changed, priority, pod, rejected, cycle.by_name.get(node))
                       for (event, node), (changed, priority) in events.items())

        made: list[tuple[str, str]] = []
        marked: set[str] = set()
        attempts = 0
        self._writing = True
        try:
            for n in range(MAX_WAVE_PASSES):
                pending.sort(key=self._queue_order)
                attempt = [(doc, pod) for doc, pod in pending if moved(pod)]
                if not attempt:
                    break
                if n == 0:
                    self.waves += 1
                self.passes += 1
                queued, events = set(), {}
                placed: set[str] = set()
                for i, (doc, pod) in enumerate(attempt):
                    if budget is not None and attempts >= budget:  # the next event arrives mid-wave
                        queued.update(p.key for _, p in attempt[i:])
                        break
                    attempts += 1
                    target = noms[pod.key]
                    rejected: set[str] = set()
                    chosen = cycle.place(pod, target, rejected)
                    if chosen is None:
                        clear = bool(target) and self.clear_nominations and may_preempt(doc)
                        if clear:  # a nominated pod leaving its node: room for pods of at most its priority
                            nominated[target] = [p for p in nominated[target] if p.key != pod.key]
                            noms[pod.key] = ""
                            high = events.get((NOMINATION_GONE, ""), (frozenset(), _NONE))[1]
                            events[(NOMINATION_GONE, "")] = (frozenset(), max(high, pod.priority))
                            self.cleared.append((pod.key, target))
                        self._rejected[pod.key] = frozenset(rejected)
                        if now is not None:
                            self._failed_at[pod.key] = now
                        self._fail(doc, pod, len(nodes), clear, marked)
                        continue
                    if target:
                        nominated[target] = [p for p in nominated[target] if p.key != pod.key]
                    self.cluster.bind_pod(pod.namespace, pod.name, chosen.name)
                    self.bindings.append((pod.key, chosen.name, target))
                    made.append((pod.key, chosen.name))
                    placed.add(pod.key)
                    events[(ASSIGNED_POD_ADD, "")] = (frozenset(), _NONE)
                pending = [(doc, pod) for doc, pod in pending if pod.key not in placed]
                if budget is not None and attempts >= budget:
                    self._queued |= queued
                    for (event, node), (changed, priority) in events.items():
                        self._event(event, node, changed, priority)
                    break
        finally:
            self._writing = False
        return made

    def _fail(self, doc: Obj, pod: Pod, nodes: int, clear: bool, marked: set[str]) -> None:
        """``handleSchedulingFailure``: back in the queue behind the others, ``PodScheduled=False/Unschedulable``
        (once) and, with ``clear``, the nomination cleared, in one status write."""
        self._stamps[pod.key] = self._next_stamp()
        status: dict[str, Any] = {}
        if pod.key not in marked and not is_unschedulable(doc):
            conditions = [c for c in (doc.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                               "message": f"0/{nodes} nodes are available"})
            status["conditions"] = conditions
        marked.add(pod.key)
        if clear:
            status["nominatedNodeName"] = None
        if status:
            self.cluster.patch_status(r.PODS, pod.name, status, pod.namespace)
