"""Capacity reservations within one scheduling pass (Karpenter v1.14 ``ReservationManager``,
``NodeClaim.offeringsToReserve`` and ``FinalizeScheduling`` in ``pkg/controllers/provisioning/scheduling``;
read for behaviour, our own code).

A ``reserved`` offering (:mod:`nodewright.cloud.reservations`) can take only ``reservation_capacity`` more
instances. Karpenter reserves pessimistically: a NodeClaim takes one instance from *every* reservation it is
compatible with (it cannot know which instance type the launch will get), and the provisioner runs in
``ReservedOfferingModeStrict`` (``DisableReservedCapacityFallback``): a NodeClaim that is compatible with some
available reserved offering but can reserve none is not created, and its pods are deferred to a later batch
(neither relaxed nor sent to a lower-weight NodePool). Once the reservations are used up, the cloud provider stops
offering them and the next batch falls back to spot or on-demand.

:func:`hold_reservations` applies this to a finished pass (the scheduler's ``finalize`` stage, before its closing
log lines), NodeClaims in creation order. A kept reserved NodeClaim
is narrowed as Karpenter's ``FinalizeScheduling`` does: ``karpenter.sh/capacity-type In [reserved]`` and
``karpenter.k8s.aws/capacity-reservation-id In [<the reservations it holds>]``, its instance types cut to those
with such an offering. A kept pod whose topology spread or pod affinity counts a deferred pod is deferred as well
(the counts it was placed by no longer hold). The disruption simulations use Karpenter's fallback mode and do not
call this.

Not modelled yet (Karpenter checks it while adding each pod, nodewright only after the pass): a pod is never
refused by an open NodeClaim because adding it would leave that NodeClaim no reserved offering ("satisfying updated
nodeclaim constraints would remove all compatible reserved offering options"). The pass that defers pods for a
reservation is still preferred over one that does not (:func:`~nodewright.scheduling.scheduler.schedule` counts
deferred pods as placed when it ranks its plans), which covers the common case; the greedy-only mode
(``optimize=False``) can still grow a NodeClaim past its reserved types.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodewright.api import labels as L
from nodewright.cloud.instancetype import CAPACITY_TYPE_RESERVED, Offering
from nodewright.quantities import Resources, add
from nodewright.scheduling.nodeclaim import _shown
from nodewright.scheduling.pods import Pod
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.result import NodeClaimPlan, SchedulingResult

#: Karpenter's pod error when a NodeClaim could not reserve any of its compatible reserved offerings.
RESERVATION_EXHAUSTED = ("one or more instance types with compatible reserved offerings are available, but could "
                         "not be reserved; deferring the pod to a later scheduling decision")


def hold_reservations(result: SchedulingResult) -> SchedulingResult:
    """``result`` with at most ``reservation_capacity`` NodeClaims per reservation (Strict mode; module docstring).
    Deferred pods are reported in ``unschedulable`` with :data:`RESERVATION_EXHAUSTED`. Mutates and returns
    ``result``."""
    room: dict[str, int] = {}
    kept: list[NodeClaimPlan] = []
    deferred: list[Pod] = []
    for plan in result.new_nodeclaims:
        compatible = _compatible_reserved(plan)
        if not compatible:
            kept.append(plan)
            continue
        for o in compatible:
            room.setdefault(o.reservation_id, o.reservation_capacity)
        held = sorted({o.reservation_id for o in compatible if room[o.reservation_id] > 0})
        if not held:
            deferred.extend(plan.pods)
            continue
        for rid in held:
            room[rid] -= 1
        _narrow(plan, set(held))
        kept.append(plan)
    if not deferred:
        return result
    deferred.extend(_dependents(kept, result, deferred))
    keys = {p.key for p in deferred}
    result.new_nodeclaims = [plan for plan in kept if _drop_pods(plan, keys)]
    for node, pods in list(result.existing.items()):
        result.existing[node] = [p for p in pods if p.key not in keys]
        if not result.existing[node]:
            del result.existing[node]
    for p in deferred:
        result.unschedulable[p.key] = RESERVATION_EXHAUSTED
    return result


def _allows(reqs: Requirements, key: str, value: str) -> bool:
    req = reqs.get(key)
    return req is None or req.has(value)


def _compatible_reserved(plan: NodeClaimPlan) -> list[Offering]:
    """The available reserved offerings of ``plan``'s candidate types its requirements admit (zone, capacity type,
    reservation id)."""
    reqs = plan.requirements
    if not _allows(reqs, L.CAPACITY_TYPE, CAPACITY_TYPE_RESERVED):
        return []
    return [o for it in plan.instance_types for o in it.offerings
            if o.capacity_type == CAPACITY_TYPE_RESERVED and o.available and o.reservation_id
            and _allows(reqs, L.ZONE, o.zone) and _allows(reqs, L.CAPACITY_RESERVATION_ID, o.reservation_id)]


def _narrow(plan: NodeClaimPlan, held: set[str]) -> None:
    """Karpenter's ``FinalizeScheduling`` for a NodeClaim holding the reservations ``held``."""
    def held_offerings(it_offerings: Sequence[Offering]) -> list[Offering]:
        return [o for o in it_offerings if o.reservation_id in held and _allows(plan.requirements, L.ZONE, o.zone)]

    types = [it for it in plan.instance_types if held_offerings(it.offerings)]
    best = min(((o.price, i, o) for i, it in enumerate(types) for o in held_offerings(it.offerings)),
               key=lambda t: (t[0], t[1]))
    extra = Requirements([Requirement(L.CAPACITY_TYPE, False, (CAPACITY_TYPE_RESERVED,)),
                          Requirement(L.CAPACITY_RESERVATION_ID, False, tuple(sorted(held))),
                          Requirement(L.INSTANCE_TYPE, False, tuple(it.name for it in types))])
    plan.instance_types = types
    plan.instance_type = types[best[1]]
    plan.offering = best[2]
    plan.requirements = plan.requirements.intersect(extra)
    plan.labels = {**plan.labels, **{k: str(v) for k, v in plan.instance_type.labels.items()}, **extra.labels(),
                   L.ZONE: plan.offering.zone}


def _counts(pod: Pod, other: Pod) -> bool:
    """Whether ``pod``'s topology spreads or pod affinity terms count ``other`` (same namespace selectors only:
    a conservative test, enough to never keep a placement that counted a deferred pod)."""
    if pod.namespace != other.namespace:
        return False
    selectors = [t.label_selector for t in pod.topology_spread]
    aff = pod.affinity
    selectors += [t.label_selector for t in aff.pod_affinity_required]
    selectors += [w.term.label_selector for w in aff.pod_affinity_preferred]
    return any(s is not None and s.matches(other.labels) for s in selectors)


def _dependents(kept: Sequence[NodeClaimPlan], result: SchedulingResult, deferred: Sequence[Pod]) -> list[Pod]:
    """Placed pods whose spread or pod affinity counts a deferred pod, transitively."""
    placed = [p for plan in kept for p in plan.pods] + [p for pods in result.existing.values() for p in pods]
    out: list[Pod] = []
    frontier = list(deferred)
    seen = {p.key for p in deferred}
    while frontier:
        nxt = [p for p in placed if p.key not in seen and any(_counts(p, d) for d in frontier)]
        seen.update(p.key for p in nxt)
        out.extend(nxt)
        frontier = nxt
    return out


def _drop_pods(plan: NodeClaimPlan, keys: set[str]) -> bool:
    """Remove the pods in ``keys`` from ``plan``; False when none is left (the NodeClaim is not created)."""
    if any(p.key in keys for p in plan.pods):
        plan.pods = [p for p in plan.pods if p.key not in keys]
        requests: Resources = dict(plan.daemonset_overhead)
        for p in plan.pods:
            requests = add(requests, p.requests)
        plan.requests = _shown(requests)
    return bool(plan.pods)
