"""A model of kube-scheduler's default profile: binds pending pods one at a time, filter then score.

Scenario replay needs the scheduler the cluster really runs, not the provisioner's packer: Karpenter's premise is
that its simulation matches kube-scheduler, and where kube-scheduler spreads pods differently from the plan the
plan is lost (issue 25). This module follows ``k8s.io/kubernetes/pkg/scheduler`` (v1.36; the plugins under
``framework/plugins``, read for their rules and constants, none of their code):

Queue (``PrioritySort``): pending pods by priority (high first), then creation time, then name. Each pod gets one
scheduling cycle per pass; the nodes it sees include the pods bound earlier in the same pass.

Nominated node first (``evaluateNominatedNode``): a pod whose ``status.nominatedNodeName`` names a node that passes
every filter goes there without scoring. While filtering node N for pod P, the pods nominated to N (unbound, of
priority >= P's, P excluded) count as running on N (``RunFilterPluginsWithNominatedPods``), so a pod planned
elsewhere does not take room promised to them.

Filters: ``NodeUnschedulable`` (cordoned), not ``Ready`` or being deleted (the not-ready taint in a real cluster),
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

Left out: ImageLocality (no images in a simulation), DRA, preemption, the per-container
non-zero defaults (applied per pod here), Services as a source of the default spreading selector (the pod's own
labels stand in for its ReplicaSet's selector).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from nodewright.api import labels as L
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import Obj, condition_true, is_deleting, meta, name_of
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
    """One node during a pass: labels, taints, allocatable, the pods bound to it (and placed this pass)."""

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resources
    schedulable: bool
    volume_limits: dict[str, int] = field(default_factory=dict)
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


def exceeds_volume_limits(pod: Pod, node: NodeInfo) -> bool:
    """``NodeVolumeLimits``: the pod's CSI claims not attached yet, with those attached, pass a driver's CSINode
    count (a claim shared with attached pods counts once; no limit without a count)."""
    new: dict[str, set[str]] = {}
    for driver, claim in pod.volumes:
        if driver in node.volume_limits and claim not in node.volumes.get(driver, ()):
            new.setdefault(driver, set()).add(claim)
    return any(len(node.volumes.get(d, ())) + len(c) > node.volume_limits[d] for d, c in new.items())


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

    def place(self, pod: Pod, nominated_node: str = "") -> NodeInfo | None:
        """The node ``pod`` goes to (already counted there), or None when no node passes the filters."""
        pre = self.prefilter(pod)
        target = self.by_name.get(nominated_node) if nominated_node else None
        if target is not None and self.feasible(pod, target, pre):
            return self._assume(pod, target)
        feasible = [n for n in self.nodes if self.feasible(pod, n, pre)]
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
        """Every filter plugin passes (pods nominated to ``node`` of at least ``pod``'s priority count there)."""
        if not node.schedulable:
            return False
        hard = [t for t in node.taints if t.effect in _HARD_EFFECTS]
        if untolerated(pod.tolerations, hard) is not None:
            return False
        selector, terms = _required_node_affinity(pod)
        if not selector.satisfied_by_labels(node.labels):
            return False
        if terms and not any(t.satisfied_by_labels(node.labels) for t in terms):
            return False
        others = [p for p in self.nominated.get(node.name, ()) if p.key != pod.key and p.priority >= pod.priority]
        if pod.host_ports:
            taken = [hp for p in (*node.pods, *others) for hp in p.host_ports]
            if any(a.conflicts(b) for a in pod.host_ports for b in taken):
                return False
        extra: dict[str, int] = {}
        for p in others:
            for key, value in p.requests.items():
                extra[key] = extra.get(key, 0) + value
        for key, value in pod.requests.items():
            if value and node.requested.get(key, 0) + extra.get(key, 0) + value > node.allocatable.get(key, 0):
                return False
        if pod.volumes and node.volume_limits and exceeds_volume_limits(pod, node):
            return False
        for c, counts, minimum, self_match in pre.spread:
            domain = node.labels.get(c.key)
            if domain is None or counts.get(domain, 0) + self_match - minimum > c.max_skew:
                return False
        if any((key, value) in pre.blocked for key, value in node.labels.items()):
            return False
        for topology_key, domains in pre.affinity:
            here = node.labels.get(topology_key)
            if here is None or (here not in domains and not pre.first_pod):
                return False
        return True

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


class KubeScheduler:
    """Binds pods; re-runs only after pods were added/removed, a nomination changed, or nodes changed.

    Args:
        cluster: the in-memory cluster (the scheduler registers a listener on it).
        seed: seeds the tie-breaking choice among equally scored nodes.

    Attributes:
        bindings: ``(pod key, node name, nominated node or "")`` of every binding made, in order.
    """

    def __init__(self, cluster: InMemoryCluster, seed: int | str = 0) -> None:
        self.cluster = cluster
        self.dirty = True
        self._waiting: set[str] = set()  # keys of pods not bound yet
        self.models = models_for(cluster)
        self.rng = random.Random(f"kube-scheduler-{seed}")
        self.bindings: list[tuple[str, str, str]] = []
        cluster.add_listener(self.on_change)

    def on_change(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        """Cluster listener: new or removed pods, a pod's nomination, and any node change may change placement."""
        if kind == r.NODES or (kind == r.PODS and event in ("ADDED", "DELETED")):
            self.dirty = True
        if kind == r.PODS:
            key = pod_key(obj)
            if event != "DELETED" and not node_name(obj) and not is_deleting(obj) and not is_terminal(obj):
                if nominated_node_name(obj):
                    self.dirty = True
                self._waiting.add(key)
            else:
                self._waiting.discard(key)

    def snapshot(self, nodes: Iterable[Obj], bound: Mapping[str, list[Pod]]) -> list[NodeInfo]:
        """Every node as :class:`NodeInfo` with its bound pods (unschedulable ones kept: they are spread domains)."""
        out = []
        for node in nodes:
            existing = self.models.node(node, bound.get(name_of(node), []))
            if existing is None:
                continue
            schedulable = (not is_deleting(node) and condition_true(node, "Ready") and not existing.unschedulable
                           and not existing.marked_for_deletion)
            info = NodeInfo(existing.name, existing.labels, existing.taints, existing.allocatable, schedulable,
                            dict(existing.volume_limits))
            for pod in bound.get(name_of(node), []):
                info.add(pod)
            out.append(info)
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
        nodes = self.snapshot(self.cluster.list(r.NODES), bound)
        nominated: dict[str, list[Pod]] = {}
        for doc, pod in pending:
            target = nominated_node_name(doc)
            if target:
                nominated.setdefault(target, []).append(pod)
        cycle = Cycle(nodes, nominated, self.rng)
        pending.sort(key=lambda dp: (-dp[1].priority, str(meta(dp[0]).get("creationTimestamp") or ""), dp[1].key))
        made: list[tuple[str, str]] = []
        for doc, pod in pending:
            target = nominated_node_name(doc)
            chosen = cycle.place(pod, target)
            if chosen is None:
                if not is_unschedulable(doc):
                    self._mark_unschedulable(doc, len(nodes))
                continue
            if target:
                nominated[target] = [p for p in nominated[target] if p.key != pod.key]
            self.cluster.bind_pod(pod.namespace, pod.name, chosen.name)
            self.bindings.append((pod.key, chosen.name, target))
            made.append((pod.key, chosen.name))
        return made

    def _mark_unschedulable(self, doc: Obj, nodes: int) -> None:
        conditions = [c for c in (doc.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": f"0/{nodes} nodes are available"})
        self.cluster.patch_status(r.PODS, name_of(doc), {"conditions": conditions}, meta(doc).get("namespace"))
