"""Preferences: pod equivalence classes and their preference-relaxation state (Karpenter's ``preferences.go``).

Pods with the same :attr:`~nodewright.scheduling.pods.Pod.shape_key` (replicas of one workload) form one class:
requirements, tolerations and topology groups are computed once per class. Preferences are treated as required
first and relaxed one step at a time in Karpenter's order (``preferences.go``):

1. the first of several required node-affinity OR-terms (Karpenter uses one term at a time; with volumes, each
   term paired with each volume alternative is one step),
2. the heaviest preferred pod-affinity term,
3. the heaviest preferred pod-anti-affinity term,
4. the heaviest preferred node-affinity term (only the heaviest remaining one is ever applied as required),
5. the first ``ScheduleAnyway`` topology spread constraint,
6. a toleration for ``PreferNoSchedule`` taints (only when some NodePool has such a taint).

Relaxation is per class: once one replica had to relax, its siblings use the relaxed constraints too.

Karpenter's ``PREFERENCE_POLICY=Ignore`` (``scheduler.IgnorePreferences``; ``NewStrictPodRequirements`` and
``topology.go`` in v1.14) drops steps 2 to 5 before the first attempt: a class then starts with every preferred
pod (anti-)affinity term, preferred node-affinity term and ``ScheduleAnyway`` spread already removed
(:meth:`PodClass.ignore_preferences`, the one place this happens). Required OR-terms and the PreferNoSchedule
toleration still relax as under ``Respect``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.scheduling.pods import (
    SCHEDULE_ANYWAY,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
)
from nodewright.scheduling.requirements import Requirements
from nodewright.scheduling.taints import TOLERATE_PREFER_NO_SCHEDULE, Toleration
from nodewright.scheduling.topology import Topology
from nodewright.scheduling.topologygroup import TopologyGroup

#: Karpenter's ``PREFERENCE_POLICY`` value that drops preferences (the default is ``Respect``).
IGNORE_PREFERENCES = "Ignore"


def _concise_term(term: NodeSelectorTerm) -> str:
    exprs = [{"key": k, "operator": op, **({"values": list(v)} if v else {})} for k, op, v in term.expressions]
    return str({"matchExpressions": exprs}).replace("'", '"')


def _concise_pod_term(term: PodAffinityTerm, weight: int) -> str:
    sel: dict[str, Any] = {}
    if term.label_selector is not None:
        sel = {"matchLabels": dict(term.label_selector.match_labels)}
    return str({"weight": weight, "podAffinityTerm": {"labelSelector": sel, "topologyKey": term.topology_key}}).replace(
        "'", '"'
    )


def _concise_spread(tsc: TopologySpreadConstraint) -> str:
    sel = dict(tsc.label_selector.match_labels) if tsc.label_selector else {}
    return (
        f'{{"maxSkew":{tsc.max_skew},"topologyKey":"{tsc.topology_key}",'
        f'"whenUnsatisfiable":"{tsc.when_unsatisfiable}","labelSelector":{{"matchLabels":{sel}}}}}'.replace("'", '"')
    )


@dataclass(eq=False)
class PodClass:
    """Identical pending pods and their current (possibly relaxed) constraints.

    Attributes:
        index: position in the run (stable id).
        rep: representative pod (all pods share its scheduling fields).
        pods: the pods, in queue order.
        vec: requests vector in the run's dimension order.
        reqs: node requirements (nodeSelector ∩ current required term, volume alternative included (see
            :meth:`~nodewright.scheduling.pods.Affinity.placement_terms`) ∩ heaviest remaining preferred term).
        strict: the pod's own node requirements (nodeSelector ∩ its current required term), without preferred
            terms or volumes: Karpenter's ``StrictRequirements``, the pod's topology domains (a preference never
            narrows a spread's eligible domains, aws/karpenter-provider-aws#4406).
        tolerations: tolerations (plus PreferNoSchedule after the last relaxation step).
        owned: topology groups the class must satisfy.
        selecting: groups that count the class's pods.
        inverse: required anti-affinity groups the class must avoid.
    """

    index: int
    rep: Pod
    pods: list[Pod]
    vec: tuple[int, ...]
    required_term: int = 0
    pref_affinity_removed: int = 0
    pref_anti_removed: int = 0
    pref_node_removed: int = 0
    anyway_removed: int = 0
    tolerate_prefer_no_schedule: bool = False
    reqs: Requirements = field(default_factory=Requirements)
    strict: Requirements = field(default_factory=Requirements)
    tolerations: tuple[Toleration, ...] = ()
    owned: list[TopologyGroup] = field(default_factory=list)
    selecting: list[TopologyGroup] = field(default_factory=list)
    inverse: list[TopologyGroup] = field(default_factory=list)
    reason: str = ""

    def refresh(self, topology: Topology) -> None:
        """Recompute requirements, tolerations and owned groups from the relaxation state."""
        pod = self.rep
        selector = Requirements.from_node_selector(pod.node_selector)
        own = pod.affinity.node_required
        index = self.required_term // max(1, len(pod.affinity.volume_required))
        self.strict = selector.intersect(own[index].requirements()) if index < len(own) else selector
        reqs = selector
        terms = pod.affinity.placement_terms()
        if terms and self.required_term < len(terms):
            reqs = reqs.intersect(terms[self.required_term].requirements())
        preferred = sorted(pod.affinity.node_preferred, key=lambda t: -t.weight)[self.pref_node_removed :]
        if preferred:
            reqs = reqs.intersect(preferred[0].term.requirements())
        self.reqs = reqs
        tols = pod.tolerations
        if self.tolerate_prefer_no_schedule:
            tols = (*tols, TOLERATE_PREFER_NO_SCHEDULE)
        self.tolerations = tols
        spreads = list(pod.topology_spread)
        removed = 0
        kept: list[TopologySpreadConstraint] = []
        for tsc in spreads:
            if tsc.when_unsatisfiable == SCHEDULE_ANYWAY and removed < self.anyway_removed:
                removed += 1
                continue
            kept.append(tsc)
        self.owned = topology.owned_groups(
            pod,
            spreads=kept,
            preferred_affinity_removed=self.pref_affinity_removed,
            preferred_anti_affinity_removed=self.pref_anti_removed,
        )

    def ignore_preferences(self) -> None:
        """Treat every preference of the class as already relaxed (``PREFERENCE_POLICY=Ignore``): preferred pod
        (anti-)affinity and node-affinity terms and ``ScheduleAnyway`` spreads never constrain it. Call before
        :meth:`refresh`."""
        aff = self.rep.affinity
        self.pref_affinity_removed = len(aff.pod_affinity_preferred)
        self.pref_anti_removed = len(aff.pod_anti_affinity_preferred)
        self.pref_node_removed = len(aff.node_preferred)
        self.anyway_removed = sum(t.when_unsatisfiable == SCHEDULE_ANYWAY for t in self.rep.topology_spread)

    def is_free(self, ambiguous_ports: Collection[tuple[str, int]] = frozenset()) -> bool:
        """True when placement of this class neither depends on nor changes topology counts, and its host
        ports (if any) conflict with every pod sharing their (protocol, port): ``ambiguous_ports`` lists the
        keys used with several specific host IPs, which need the pod-by-pod conflict check. Pods with CSI volumes
        are never free: the one-by-one loop counts their claims against the types' attach limits."""
        if self.owned or self.selecting or self.inverse:
            return False
        if any(p.volumes for p in self.pods):
            return False
        return not any((p.protocol, p.port) in ambiguous_ports for p in self.rep.host_ports)

    def relaxable(self, prefer_no_schedule_exists: bool) -> bool:
        """Whether :meth:`relax` would find a soft constraint left to relax (it checks the same counters)."""
        aff = self.rep.affinity
        return bool(
            len(aff.placement_terms()) - self.required_term > 1
            or self.pref_affinity_removed < len(aff.pod_affinity_preferred)
            or self.pref_anti_removed < len(aff.pod_anti_affinity_preferred)
            or self.pref_node_removed < len(aff.node_preferred)
            or self.anyway_removed < sum(t.when_unsatisfiable == SCHEDULE_ANYWAY for t in self.rep.topology_spread)
            or (prefer_no_schedule_exists and not self.tolerate_prefer_no_schedule)
        )

    def relax(self, topology: Topology, prefer_no_schedule_exists: bool) -> str | None:
        """Relax one soft constraint (see module docstring); returns Karpenter's description, None if none left."""
        aff = self.rep.affinity
        message: str | None = None
        placement = aff.placement_terms()
        if len(placement) - self.required_term > 1:
            term = placement[self.required_term]
            self.required_term += 1
            message = (
                "removing: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]="
                + _concise_term(term)
            )
        elif self.pref_affinity_removed < len(aff.pod_affinity_preferred):
            wterm = sorted(aff.pod_affinity_preferred, key=lambda t: -t.weight)[self.pref_affinity_removed]
            self.pref_affinity_removed += 1
            message = "removing: spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]=" + (
                _concise_pod_term(wterm.term, wterm.weight)
            )
        elif self.pref_anti_removed < len(aff.pod_anti_affinity_preferred):
            wterm = sorted(aff.pod_anti_affinity_preferred, key=lambda t: -t.weight)[self.pref_anti_removed]
            self.pref_anti_removed += 1
            message = "removing: spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]=" + (
                _concise_pod_term(wterm.term, wterm.weight)
            )
        elif self.pref_node_removed < len(aff.node_preferred):
            pterm = sorted(aff.node_preferred, key=lambda t: -t.weight)[self.pref_node_removed]
            self.pref_node_removed += 1
            message = (
                "removing: spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]="
                + _concise_term(pterm.term)
            )
        else:
            anyway = [t for t in self.rep.topology_spread if t.when_unsatisfiable == SCHEDULE_ANYWAY]
            if self.anyway_removed < len(anyway):
                tsc = anyway[self.anyway_removed]
                self.anyway_removed += 1
                message = "removing: spec.topologySpreadConstraints = " + _concise_spread(tsc)
            elif prefer_no_schedule_exists and not self.tolerate_prefer_no_schedule:
                self.tolerate_prefer_no_schedule = True
                message = "adding: toleration for PreferNoSchedule taints"
        if message is not None:
            self.refresh(topology)
        return message


def pod_classes(pods: Sequence[Pod], dims: Sequence[str], ignore_preferences: bool = False) -> list[PodClass]:
    """``pods`` grouped into classes of identical scheduling fields (:attr:`Pod.shape`), in order of first pod;
    each class's requests vector follows ``dims``. Requirements and topology are set by
    :meth:`nodewright.scheduling.topology.Topology.register`. With ``ignore_preferences`` (Karpenter's
    ``PREFERENCE_POLICY=Ignore``) every class starts with its preferences dropped (:meth:`PodClass.ignore_preferences`)."""
    by_shape: dict[int, list[PodClass]] = {}
    classes: list[PodClass] = []
    for pod in pods:
        bucket = by_shape.setdefault(pod.shape_key, [])
        for cls in bucket:
            if cls.rep.shape is pod.shape or cls.rep.shape == pod.shape:
                cls.pods.append(pod)
                break
        else:
            vec = tuple(pod.requests.get(d, 0) for d in dims)
            cls = PodClass(index=len(classes), rep=pod, pods=[pod], vec=vec)
            if ignore_preferences:
                cls.ignore_preferences()
            bucket.append(cls)
            classes.append(cls)
    return classes
