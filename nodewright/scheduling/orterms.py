"""Pods with several ORed required ``nodeSelectorTerms`` take room already planned, under any term (issue 25).

Karpenter schedules such a pod under its first term and tries the next only when the first fits nowhere at all
(preference relaxation, ``Preferences.removeRequiredNodeAffinityTerm``): a pod whose first term fits a *new*
NodeClaim gets one, even when a node or a NodeClaim planned for other pods has room for it under a later term.
kube-scheduler accepts any term, puts the pod there, and the NodeClaim opened for it stays empty (issue 25: 3 of
60 real-scheduler cases). nodewright goes beyond Karpenter here: after every pod is placed and before the plans are
made (:data:`nodewright.scheduling.scheduler.OPTIMIZED` and ``GREEDY``), :func:`use_or_terms` visits the batch's
NodeClaims newest first; each pod there of a topology-free class with more than one placement term
(:meth:`~nodewright.scheduling.pods.Affinity.placement_terms`) moves to the first existing node (initialized, then
in flight) or other NodeClaim of the batch that takes it under any of its terms without changing that
NodeClaim's cheapest instance type. A NodeClaim left with no pod is not opened; one left with fewer pods is
priced again at finalize (its cheapest fitting type can only get cheaper).

Left alone: pods with topology (spread, pod affinity: their counts were recorded per domain), NodeClaims of
NodePools with ``limits`` (their reservation was counted); a NodeClaim built by the cost packer gives pods away
(emptied, it is dropped; else its final candidates still fit) but takes none (its candidate types are final).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodewright.scheduling.pods import Pod
from nodewright.scheduling.preferences import PodClass

if TYPE_CHECKING:
    from nodewright.scheduling.nodeclaim import NodeClaim
    from nodewright.scheduling.scheduler import Scheduler


def use_or_terms(run: Scheduler) -> None:
    """The scheduler stage (see module docstring); changes ``run.claims`` and the existing nodes in place."""
    emptied: set[int] = set()
    for claim in reversed(run.claims):
        if claim.template.remaining is not None:
            continue
        for pod in list(claim.pods):
            cls = run.class_of.get(id(pod))
            if cls is None or not _movable(run, cls):
                continue
            if _rehome(run, cls, pod, claim, emptied):
                _take_out(claim, cls, pod)
        if not claim.pods:
            emptied.add(id(claim))
    if emptied:
        run.claims = [c for c in run.claims if id(c) not in emptied]


def _movable(run: Scheduler, cls: PodClass) -> bool:
    return len(cls.rep.affinity.placement_terms()) > 1 and cls.is_free(run.ambiguous)


def _variant(run: Scheduler, cls: PodClass, term: int, pod: Pod) -> PodClass:
    """``cls`` for one pod under required term ``term`` (its other relaxations kept), a class id of its own."""
    alt = PodClass(index=-(cls.index * 64 + term + 1), rep=cls.rep, pods=[pod], vec=cls.vec, required_term=term,
                   pref_affinity_removed=cls.pref_affinity_removed, pref_anti_removed=cls.pref_anti_removed,
                   pref_node_removed=cls.pref_node_removed, anyway_removed=cls.anyway_removed,
                   tolerate_prefer_no_schedule=cls.tolerate_prefer_no_schedule)
    alt.refresh(run.topology)
    return alt


def _rehome(run: Scheduler, cls: PodClass, pod: Pod, source: NodeClaim, emptied: set[int]) -> bool:
    """Give ``pod`` to the first existing node or other NodeClaim that takes it under some term; True if one did."""
    terms = range(len(cls.rep.affinity.placement_terms()))
    for node in run.nodes:
        for term in terms:
            alt = _variant(run, cls, term, pod)
            domains, _ = node.can_add(alt)
            if domains is not None:
                node.add(alt, domains, run.topology)
                return True
    for claim in run.claims:
        if claim is source or claim.packed or id(claim) in emptied:
            continue
        for term in terms:
            room = claim.room()
            if room is not None and claim.fill(_variant(run, cls, term, pod), room):
                return True
    return False


def _take_out(claim: NodeClaim, cls: PodClass, pod: Pod) -> None:
    """Remove ``pod`` from ``claim``: its requests and host ports too (the cheapest fitting type is found again)."""
    claim.pods.remove(pod)
    claim.need = [a - v for a, v in zip(claim.need, cls.vec, strict=True)]
    for port in cls.rep.host_ports:
        claim.ports.remove(port)
    claim.ptr = 0
