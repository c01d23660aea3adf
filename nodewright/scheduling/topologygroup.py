"""Topology groups: spread constraints and pod (anti-)affinity counted per domain (Karpenter's
``topologygroup.go`` and ``topologynodefilter.go``).

A :class:`TopologyGroup` counts, per domain of one topology key (zone, hostname, capacity type, ...), the pods
its label selector selects; the pods that own the constraint consult it before placement. Groups are shared
by every pod with the same constraint (one group per Deployment spread, say), so counting is per group, not per
pod. Semantics follow the kube-scheduler and Karpenter:

- **Spread** (maxSkew): a domain is admissible when ``count(domain) + self - min(counts) <= maxSkew``, where
  ``self`` is 1 when the pod matches its own selector and the minimum runs over the eligible domains
  (:meth:`nodewright.scheduling.topology.Topology.eligible_domains`) that the pod's own requirement on the key
  allows (0 when fewer than ``minDomains`` such domains exist; always 0 for ``kubernetes.io/hostname``, since a
  new node is always possible). Among several admissible domains the least-populated one is chosen (ties by name), as Karpenter's
  ``nextDomainTopologySpread`` does.
- **Affinity** (required): domains already holding a selected pod; any domain when the pod selects itself and
  no selected pod sits in a domain its own node requirements allow (the first replica; or a replica pinned
  elsewhere, as Karpenter's ``nextDomainAffinity``).
- **Anti-affinity** (required): domains holding no selected pod; and, inversely, a pod selected by another
  pod's required anti-affinity must avoid the domains holding that pod's owners.

A spread group carries the owner's :class:`NodeFilter` (kube-scheduler's ``nodeAffinityPolicy`` /
``nodeTaintsPolicy``, Karpenter's ``TopologyNodeFilter``): a selected pod is counted only when its node -- an
existing node or a NodeClaim of this run -- passes the filter: with ``nodeAffinityPolicy: Honor`` (default) the
node must match the owner's nodeSelector and one of its required node-affinity terms, with
``nodeTaintsPolicy: Honor`` (default Ignore) the owner must tolerate the node's ``NoSchedule``/``NoExecute``
taints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from nodewright.api import labels as wk
from nodewright.scheduling.pods import HONOR, LabelSelector, Pod, TopologySpreadConstraint
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.taints import NO_EXECUTE, NO_SCHEDULE, Taint, Toleration, untolerated

SPREAD = "spread"
AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"


@dataclass(frozen=True, eq=False)
class NodeFilter:
    """Which nodes a spread constraint counts (kube-scheduler's node inclusion policies).

    Attributes:
        terms: requirement sets, OR-ed (nodeSelector AND each required node-affinity term); None when
            ``nodeAffinityPolicy`` is Ignore or the pod has no node requirements.
        tolerations: the owner's tolerations; None when ``nodeTaintsPolicy`` is Ignore.
    """

    terms: tuple[Requirements, ...] | None
    tolerations: tuple[Toleration, ...] | None

    @classmethod
    def for_spread(cls, pod: Pod, tsc: TopologySpreadConstraint) -> NodeFilter | None:
        """The filter of ``pod``'s constraint ``tsc``; None when it counts every node."""
        terms: tuple[Requirements, ...] | None = None
        if tsc.node_affinity_policy == HONOR:
            selector = Requirements.from_node_selector(pod.node_selector)
            required = pod.affinity.node_required
            built = tuple(selector.intersect(t.requirements()) for t in required) if required else (selector,)
            terms = built if any(len(t) for t in built) else None
        tolerations = tuple(pod.tolerations) if tsc.node_taints_policy == HONOR else None
        if terms is None and tolerations is None:
            return None
        return cls(terms, tolerations)

    @property
    def honors_affinity(self) -> bool:
        """True when only nodes meeting the owner's node requirements count (``nodeAffinityPolicy: Honor`` and
        the owner has some); otherwise every node and NodePool counts, whatever the owner's node affinity."""
        return self.terms is not None

    def identity(self) -> tuple[object, ...]:
        """Hashable identity (groups with equal constraints and filters are shared)."""
        terms = None if self.terms is None else tuple(t.identity() for t in self.terms)
        return (terms, self.tolerations)

    def tolerates(self, taints: Iterable[Taint]) -> bool:
        """True unless taints are honoured and a ``NoSchedule``/``NoExecute`` one is not tolerated."""
        if self.tolerations is None:
            return True
        blocking = [t for t in taints if t.effect in (NO_SCHEDULE, NO_EXECUTE)]
        return untolerated(self.tolerations, blocking) is None

    def matches_node(self, labels: Mapping[str, str], taints: Iterable[Taint]) -> bool:
        """Whether an existing node with ``labels`` and ``taints`` counts."""
        if self.terms is not None and not any(t.satisfied_by_labels(labels) for t in self.terms):
            return False
        return self.tolerates(taints)

    def matches_claim(self, reqs: Requirements, taints: Iterable[Taint]) -> bool:
        """Whether a NodeClaim with requirements ``reqs`` and ``taints`` counts (requirements compatible with
        one term, as Karpenter's ``TopologyNodeFilter.MatchesRequirements``)."""
        if self.terms is not None and not any(reqs.compatible(t) for t in self.terms):
            return False
        return self.tolerates(taints)


@dataclass(eq=False)
class TopologyGroup:
    """Counts of selected pods per domain for one constraint shared by a set of pods.

    Attributes:
        kind: ``spread``, ``affinity`` or ``anti-affinity``.
        key: topology key.
        namespaces: namespaces whose pods are counted (None: all namespaces).
        selector: which pods are counted (None selects none).
        max_skew, min_domains: spread parameters.
        enforce_inverse: True for required anti-affinity (pods it selects must avoid its owners' domains).
        universe: eligible domains (spread minimum); hostname groups leave it empty.
        counts: selected pods per domain.
        owner_counts: owning pods per domain (anti-affinity inverse).
        node_filter: which nodes count (spread only; None: every node).
    """

    kind: str
    key: str
    namespaces: frozenset[str] | None
    selector: LabelSelector | None
    max_skew: int = 1
    min_domains: int | None = None
    enforce_inverse: bool = False
    universe: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    owner_counts: dict[str, int] = field(default_factory=dict)
    node_filter: NodeFilter | None = None

    def selects(self, pod: Pod) -> bool:
        """True when ``pod`` is counted by this group."""
        if self.selector is None:
            return False
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.selector.matches(pod.labels)

    def min_count(self, pod_domains: Requirement | None = None) -> int:
        """Global minimum over the eligible domains the owner's own requirement on :attr:`key` allows
        (``pod_domains``, None: all; Karpenter's ``domainMinCount``); see module docstring."""
        universe = self.universe
        if pod_domains is not None:
            universe = {d for d in universe if pod_domains.has(d)}
        if self.key == wk.HOSTNAME or not universe:
            return 0
        if self.min_domains is not None and len(universe) < self.min_domains:
            return 0
        counts = self.counts
        return min(counts.get(d, 0) for d in universe)

    def admissible(
        self, candidates: Iterable[str], self_selecting: bool, pod_domains: Requirement | None = None
    ) -> set[str]:
        """The candidate domains this group allows for one more owning pod (a single domain for spread).

        ``pod_domains``: the owner's own requirement on :attr:`key` (None: any domain). A spread's minimum runs
        over the eligible domains it allows; a self-selecting affinity owner may open a domain when no selected
        pod sits in a domain it allows (Karpenter's ``anyCompatiblePodDomain``): two self-affine pods pinned to
        different zones each start their own."""
        cands = candidates if isinstance(candidates, set) else set(candidates)
        counts = self.counts
        if self.kind == SPREAD:
            low = self.min_count(pod_domains)
            extra = 1 if self_selecting else 0
            best: str | None = None
            best_count = 0
            for domain in sorted(cands):
                count = counts.get(domain, 0) + extra
                if count - low <= self.max_skew and (best is None or count < best_count):
                    best, best_count = domain, count
            return {best} if best is not None else set()
        if self.kind == AFFINITY:
            occupied = {d for d in cands if counts.get(d, 0) > 0}
            if occupied:
                return occupied
            if self_selecting and not any(
                v > 0 and (pod_domains is None or pod_domains.has(d)) for d, v in counts.items()
            ):
                return cands
            return set()
        return {d for d in cands if counts.get(d, 0) == 0}

    def inverse_admissible(self, candidates: Iterable[str]) -> set[str]:
        """Candidate domains free of this anti-affinity group's owners."""
        return {d for d in candidates if self.owner_counts.get(d, 0) == 0}
