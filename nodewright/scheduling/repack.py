"""Re-packing the NodeClaims of topology-constrained pods: the rules and the executor (nodewright's addition to
Karpenter).

Pods with topology constraints are placed one at a time, Karpenter-style: a NodeClaim keeps absorbing pods
while some instance type still fits them, so it can end up on one large type where several small ones cost
less (four 1-vCPU pods spread over two zones get two ``xlarge`` nodes instead of four ``micro`` ones). Once
every constrained pod is placed, the scheduler re-packs those NodeClaims with the cost packer
(:func:`nodewright.scheduling.packing.pack`) and keeps the result only when it is strictly cheaper. This module
says which re-packs keep every constraint satisfied:

- **Splitting** one NodeClaim's pods over several NodeClaims with the *same requirements*: every topology key
  but the hostname is pinned to one domain by those requirements when a group counts the pods (see
  :func:`nodewright.scheduling.topology.narrow_requirements`), so zone / capacity-type spread counts, minDomains and zone (anti-)
  affinity are unchanged. Per-hostname counts only go down, and kube-scheduler's (and Karpenter's) hostname
  spread minimum is 0, so hostname spread and hostname anti-affinity can only get better. Host ports: a subset
  of conflict-free pods is conflict-free. A required or preferred **hostname pod affinity** is the exception:
  its owner must stay on the node of the pods it selects, so a NodeClaim holding such an owner is never split
  (see :func:`keeps_together`).
- **Merging** NodeClaims (re-packing the union of their pods) moves pods next to pods they were not next to,
  so it is only allowed for NodeClaims whose pods no hostname constraint involves (neither owned, nor counted
  by another pod's group, nor avoided by another pod's anti-affinity: :func:`hostname_bound`), whose
  requirements are identical (same pool, same pinned domains) and whose host ports are unambiguous (each
  (protocol, port) becomes a one-per-node resource, as for the free pods).

:func:`repack_topology` applies them (a stage of :func:`nodewright.scheduling.schedule`, after the Karpenter
loop, before free pods fill spare room). Limits, minValues, target utilization and the cap on new NodeClaims are
checked when it builds the new NodeClaims (the same checks a new NodeClaim gets); any failure keeps the original
NodeClaims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from nodewright.api import labels as wk
from nodewright.scheduling.freepods import with_port_slots
from nodewright.scheduling.fronts import pool_front
from nodewright.scheduling.nodeclaim import NodeClaim
from nodewright.scheduling.nodeclaimtemplate import (
    MAX_INSTANCE_TYPES,
    NodeClaimTemplate,
    TypeInfo,
    fitting_prefix,
)
from nodewright.scheduling.packing import Bin, Item, pack
from nodewright.scheduling.pods import HostPort, Pod
from nodewright.scheduling.preferences import PodClass
from nodewright.scheduling.requirements import Requirements

if TYPE_CHECKING:
    from nodewright.scheduling.scheduler import Scheduler

#: Relative tolerance when comparing plan prices: a re-pack must save more than this to be kept.
PRICE_EPSILON = 1e-9


def keeps_together(cls: PodClass) -> bool:
    """True when a pod of ``cls`` has a hostname pod affinity (required or preferred): the NodeClaim holding
    it may not be split, since its owner must share the node of the pods it selects."""
    aff = cls.rep.affinity
    if any(t.topology_key == wk.HOSTNAME for t in aff.pod_affinity_required):
        return True
    return any(w.term.topology_key == wk.HOSTNAME for w in aff.pod_affinity_preferred)


def hostname_bound(cls: PodClass) -> bool:
    """True when some hostname constraint involves pods of ``cls``: its own spread or (anti-)affinity on the
    hostname (required or preferred, relaxed or not), or a hostname group of other pods that counts or avoids
    it. Such pods may be split apart but never moved next to other pods."""
    pod = cls.rep
    if any(t.topology_key == wk.HOSTNAME for t in pod.topology_spread):
        return True
    aff = pod.affinity
    for term in (*aff.pod_affinity_required, *aff.pod_anti_affinity_required):
        if term.topology_key == wk.HOSTNAME:
            return True
    for wterm in (*aff.pod_affinity_preferred, *aff.pod_anti_affinity_preferred):
        if wterm.term.topology_key == wk.HOSTNAME:
            return True
    return any(g.key == wk.HOSTNAME for g in (*cls.owned, *cls.selecting, *cls.inverse))


def domains_pinned(classes: Iterable[PodClass], reqs: Requirements) -> bool:
    """True when every non-hostname topology key counted for ``classes`` is pinned to one value by ``reqs``
    (the scheduler pins them at placement; checked again so a re-pack never moves a counted pod between
    domains)."""
    for cls in classes:
        for g in (*cls.owned, *cls.selecting):
            if g.key == wk.HOSTNAME:
                continue
            req = reqs.get(g.key)
            if req is None or req.complement or len(req.values) != 1:
                return False
    return True


# --- the executor -------------------------------------------------------------------------------------------
def repack_topology(run: Scheduler) -> None:
    """Replace NodeClaims of the Karpenter loop by cheaper ones holding the same pods, where the rules above
    allow: NodeClaims whose pods no hostname constraint involves are re-packed together per (NodePool,
    requirements), falling back to one-by-one splits; any other NodeClaim is split on its own, unless it holds a
    hostname pod-affinity owner. A re-pack is kept only when its launch prices sum to strictly less. The
    NodeClaims are renumbered (hostname placeholders follow) when any was replaced."""
    class_of = run.class_of
    units: list[tuple[list[NodeClaim], bool]] = []
    merge_groups: dict[tuple[object, ...], list[NodeClaim]] = {}
    for claim in run.claims:
        classes = list({class_of[id(p)].index: class_of[id(p)] for p in claim.pods}.values())
        if any(keeps_together(c) for c in classes) or not domains_pinned(classes, claim.reqs):
            continue
        if any(p.volumes for p in claim.pods):
            continue  # the cost packer does not count CSI claims against the types' attach limits: keep the loop's
        mergeable = not any(hostname_bound(c) for c in classes) and not any(
            (p.protocol, p.port) in run.ambiguous for c in classes for p in c.rep.host_ports
        )
        if mergeable:
            key = (claim.template.order, claim.reqs.identity())
            group = merge_groups.get(key)
            if group is None:
                group = merge_groups[key] = []
                units.append((group, True))
            group.append(claim)
        elif len(claim.pods) > 1:
            units.append(([claim], False))
    repacker = _Repacker(run)
    replaced: dict[int, list[NodeClaim]] = {}
    for group, merging in units:
        new = repacker.repack(group, merging)
        if new is None and len(group) > 1:
            for claim in group:
                if len(claim.pods) > 1:
                    split = repacker.repack([claim], False)
                    if split is not None:
                        replaced[id(claim)] = split
            continue
        if new is not None:
            replaced[id(group[0])] = new
            for claim in group[1:]:
                replaced[id(claim)] = []
    if not replaced:
        return
    claims: list[NodeClaim] = []
    for claim in run.claims:
        claims.extend(replaced.get(id(claim), (claim,)))
    for i, claim in enumerate(claims):
        claim.index = i
        claim.hostname = f"hostname-placeholder-{i:04d}"
    run.claims = claims
    run.repacked = True


class _Repacker:
    """Re-packs groups of NodeClaims of one run; counts the NodeClaims planned against the run's cap."""

    def __init__(self, run: Scheduler) -> None:
        self.run = run
        self.dims = len(run.dims)
        #: NodeClaims planned while re-packs replace some (checked against the cap on new NodeClaims).
        self.claim_total = len(run.claims)
        self.memo: dict[tuple[object, ...], list[Bin] | None] = {}

    def repack(self, group: list[NodeClaim], ports: bool) -> list[NodeClaim] | None:
        """The cheapest NodeClaims (same pool and requirements) holding the pods of ``group``, or None when the
        packer finds nothing strictly cheaper that passes limits, minValues and the NodeClaim cap. ``ports``:
        host ports become one-per-node resources (needed when pods of several NodeClaims are mixed)."""
        if len(group) == 1 and len(group[0].pods) < 2:
            return None
        template, reqs = group[0].template, group[0].reqs
        old_cost = _total_price(group)
        if old_cost is None:
            return None
        class_of = self.run.class_of
        pods = [p for claim in group for p in claim.pods]
        items, pods_of = _repack_items(pods, class_of, ports)
        # Types whose DaemonSets hold none of the pods' host ports (each NodeClaim of the group had only such types).
        held = [hp for p in pods for hp in p.host_ports]
        saved = None if template.remaining is None else dict(template.remaining)
        for claim in group:
            template.release(claim.reserved)
        key = (template.order, reqs.identity(), round(old_cost, 9), tuple(items), frozenset(held))
        if saved is None and key in self.memo:
            plan = self.memo[key]
        else:
            plan = self._plan(template, reqs, items, old_cost, held)
            if saved is None:
                self.memo[key] = plan
        new = self._claims(template, reqs, items, pods_of, plan, len(group)) if plan else None
        if new is not None:
            new_cost = _total_price(new)
            if new_cost is not None and new_cost < old_cost - PRICE_EPSILON:
                self.claim_total += len(new) - len(group)
                return new
        if saved is not None:
            template.remaining = saved
        return None

    def _plan(self, template: NodeClaimTemplate, reqs: Requirements, items: list[Item], old_cost: float,
              held: list[HostPort]) -> list[Bin] | None:
        """The packer's bins for ``items`` (whose pods hold host ports ``held``) when they cost less than
        ``old_cost`` (only types cheaper than it can be part of a cheaper plan), else None."""
        prices: dict[str, float] = {}
        priced: list[TypeInfo] = []
        blocked = template.daemon_ports and bool(held)
        for t, price in template.priced(reqs):
            if price >= old_cost - PRICE_EPSILON:
                break
            if blocked and t.daemons.blocks(held):
                continue
            prices[t.name] = price
            priced.append(t)
        if not priced:
            return None
        extra = len(items[0].vec) - self.dims
        front = None
        if extra:
            priced = with_port_slots(priced, [held] * extra)  # none of them is held on these types: one slot each
        elif not blocked:
            # A cheapest-first prefix's front is the pool's front cut at the same price (packing.Front).
            pool = pool_front(template, reqs)
            front = None if pool is None else pool.below(old_cost - PRICE_EPSILON)
        bins, left = pack(items, priced, prices, thorough=False, front=front)
        if any(left) or not bins or sum(b.price for b in bins) >= old_cost - PRICE_EPSILON:
            return None
        return bins

    def _claims(
        self,
        template: NodeClaimTemplate,
        reqs: Requirements,
        items: list[Item],
        pods_of: list[list[Pod]],
        plan: list[Bin],
        replacing: int,
    ) -> list[NodeClaim] | None:
        """NodeClaims for the bins of ``plan``, reserving limits as a new NodeClaim does; None when a bin has no
        type within limits, misses minValues, or the cap on new NodeClaims would be exceeded."""
        max_new = self.run.max_new
        if max_new is not None and self.claim_total - replacing + len(plan) > max_new:
            return None
        class_of = self.run.class_of
        base = self.dims
        taken = [0] * len(items)
        new: list[NodeClaim] = []
        for i, b in enumerate(plan):
            need = b.need(items, len(items[0].vec))[:base]
            pods: list[Pod] = []
            for idx, k in b.fill:
                start = taken[idx]
                pods.extend(pods_of[idx][start:start + k])
                taken[idx] = start + k
            ports = [hp for p in pods for hp in p.host_ports]
            types = template.port_free(template.limited(template.types_for(reqs)), ports)
            room = template.room_after([later.info for later in plan[i + 1:]])
            if room is not None:  # leave room under the limits for one NodeClaim of each later bin
                types = [t for t in types if template.within(t, room)]
            min_values = reqs.min_values() if template.min_values else {}
            fitting = fitting_prefix(types, need, None if min_values else MAX_INSTANCE_TYPES)
            if not fitting or (min_values and template.flexibility.unmet(fitting, min_values)):
                return None
            claim = NodeClaim(template, 0, reqs, types, base)
            claim.need = need
            claim.pods = pods
            claim.seen = {class_of[id(p)].index for p in claim.pods}
            claim.ports = ports
            claim.reserve()
            new.append(claim)
        return new


def _total_price(claims: Iterable[NodeClaim]) -> float | None:
    """Summed launch prices of ``claims`` (None when one has no candidate)."""
    total = 0.0
    for claim in claims:
        price = claim.launch_price()
        if price is None:
            return None
        total += price
    return total


def _repack_items(
    pods: Sequence[Pod], class_of: Mapping[int, PodClass], ports: bool
) -> tuple[list[Item], list[list[Pod]]]:
    """Packing items for a re-pack: pods with equal requests (and, with ``ports``, equal host-port keys, each
    (protocol, port) one more dimension as for free pods) are interchangeable, whatever their class, because a
    re-pack keeps every pod under the same requirements. Items in order of first pod."""
    keys = sorted({(hp.protocol, hp.port) for p in pods for hp in p.host_ports}) if ports else []
    index: dict[tuple[int, ...], int] = {}
    vecs: list[tuple[int, ...]] = []
    pods_of: list[list[Pod]] = []
    for p in pods:
        vec = class_of[id(p)].vec
        if keys:
            used = {(hp.protocol, hp.port) for hp in p.host_ports}
            vec = vec + tuple(1 if k in used else 0 for k in keys)
        i = index.get(vec)
        if i is None:
            i = index[vec] = len(vecs)
            vecs.append(vec)
            pods_of.append([])
        pods_of[i].append(p)
    return [Item(v, len(ps)) for v, ps in zip(vecs, pods_of, strict=True)], pods_of
