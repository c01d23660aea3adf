"""The stages that place topology-free pods (nodewright's cost-optimal packing; Karpenter packs every pod one by
one).

A pod class is *free* when its placement neither depends on nor changes topology counts (no spread, no pod
(anti-)affinity, not selected by any such constraint) and its host ports, if any, are not used with several
specific host IPs (:func:`ambiguous_ports`). Free pods are placed in three stages of
:func:`nodewright.scheduling.schedule`:

1. :func:`fill_existing` -- room on existing nodes first (first fit, nodes in the run's order), as Karpenter
   tries existing nodes before new NodeClaims;
2. :func:`fill_claims` -- after the Karpenter loop: spare room of the NodeClaims it opened, when taking pods does
   not change their cheapest fitting type (so their price);
3. :func:`pack_free` -- the rest, grouped per (NodePool, requirements), packed by
   :func:`nodewright.scheduling.packing.pack`, which searches for the cheapest fleet. Host ports become
   one-per-node resources for the packer. A pool's stricter groups are packed first, and a later group's pods
   may take spare room of the NodeClaims packed for them (:func:`_joins`) when that makes the plan cheaper: a
   plain pod shares the zone-pinned pod's node instead of opening its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from operator import le
from typing import TYPE_CHECKING

from nodewright.scheduling.fronts import pack_inputs
from nodewright.scheduling.minvalues import unmet_reason
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


def ambiguous_ports(pods: Iterable[Pod]) -> frozenset[tuple[str, int]]:
    """(protocol, port) keys used with two different specific host IPs: pods sharing such a key may not
    conflict, so they stay on the pod-by-pod path that checks each pair."""
    ips: dict[tuple[str, int], set[str]] = {}
    for pod in pods:
        for p in pod.host_ports:
            specific = ips.setdefault((p.protocol, p.port), set())
            if p.host_ip not in ("", "0.0.0.0"):
                specific.add(p.host_ip)
    return frozenset(k for k, v in ips.items() if len(v) > 1)


def fill_existing(run: Scheduler) -> None:
    """Place as many pods of each free class as fit on existing nodes (first fit, classes in queue order)."""
    for cls in run.free:
        for node in run.nodes:
            if not cls.pods:
                break
            while cls.pods:
                domains, _ = node.can_add(cls)
                if domains is None:
                    break
                node.add(cls, domains, run.topology)


def fill_claims(run: Scheduler) -> None:
    """Fill spare room of this run's NodeClaims with free classes, without raising their price.

    Each NodeClaim in creation order takes, class by class (queue order), as many pods as fit the room its
    cheapest fitting type has left. This is the same result as letting each class visit every NodeClaim in
    turn, but a NodeClaim's room is computed once per change instead of once per class.
    """
    classes = run.free
    for claim in run.claims:
        if claim.packed:
            continue
        room = claim.room()
        if room is None:
            continue
        for cls in classes:
            if not cls.pods or not all(map(le, cls.vec, room)):
                continue
            if claim.fill(cls, room):
                room = claim.room()
                if room is None:
                    break


def pack_free(run: Scheduler) -> None:
    """Group the free classes still pending by (NodePool, requirements) -- the first NodePool that can host
    them, relaxing preferences as the Karpenter loop does -- and pack each group cost-optimally."""
    groups: dict[tuple[int, tuple[object, ...]], tuple[NodeClaimTemplate, Requirements, list[PodClass]]] = {}
    for cls in run.free:
        if not cls.pods:
            continue
        while True:
            reasons: list[str] = []
            choice = next(run.hosting(cls, reasons), None)
            if choice is not None:
                template, merged, _types = choice
                groups.setdefault((template.order, merged.identity()), (template, merged, []))[2].append(cls)
                break
            if not run.relax(cls, cls.pods[-1].key):
                for pod in cls.pods:
                    run.result.unschedulable[pod.key] = "; ".join(dict.fromkeys(reasons)) or "no NodePool"
                cls.pods.clear()
                break
    ordered = sorted(groups.values(), key=lambda g: g[0].order)
    # Reordered only where a pool's groups are packed independently (limits, a NodeClaim cap or a pricing
    # policy make the first group change what the next one gets).
    if 1 < len(ordered) <= MAX_ORDERED_GROUPS and run.max_new is None and all(
            g[0].remaining is None and g[0].pricing is None for g in ordered):
        ordered = sorted(ordered, key=lambda g: (g[0].order, -sum(_implies(g[1], o[1]) for o in ordered)))
    for template, merged, members in ordered:
        _pack_group(run, template, merged, members)


#: Up to this many groups, :func:`pack_free` orders a pool's groups stricter first (one check per pair).
MAX_ORDERED_GROUPS = 32


def _implies(a: Requirements, b: Requirements) -> bool:
    """True when ``a`` is strictly narrower than ``b``: every node ``a`` allows, ``b`` allows."""
    ident = a.identity()
    return ident != b.identity() and a.intersect(b).identity() == ident


def _joins(run: Scheduler, template: NodeClaimTemplate, members: Sequence[PodClass]) -> list[tuple[NodeClaim, int, int]]:
    """How many pods of each of ``members`` (a pool's group about to be packed) the NodeClaims packed earlier in
    this run for ``template`` can take without changing their price: (claim, member index, count) in order.

    A class may join a NodeClaim only when the NodeClaim's requirements already imply the class's (so neither
    its requirements nor its offering change) and the pods fit the room its cheapest candidate has left (so its
    type stays). Classes with host ports, and pools with ``minValues``, are left to the packer."""
    if template.min_values:
        return []
    claims = [c for c in run.claims if c.packed and c.template is template and c.final]
    if not claims:
        return []
    joins: list[tuple[NodeClaim, int, int]] = []
    left = [0 if cls.rep.host_ports else len(cls.pods) for cls in members]
    for claim in claims:
        ident = claim.reqs.identity()
        assert claim.final is not None
        room = [b - n for b, n in zip(claim.final[0].budget, claim.need, strict=False)]
        for idx, cls in enumerate(members):
            if not left[idx] or claim.reqs.intersect(cls.reqs).identity() != ident:
                continue
            k = left[idx]
            for r, v in zip(room, cls.vec, strict=False):
                if v > 0:
                    k = min(k, r // v)
            if k <= 0:
                continue
            left[idx] -= k
            room = [r - v * k for r, v in zip(room, cls.vec, strict=False)]
            joins.append((claim, idx, k))
    return joins


def _join(claim: NodeClaim, cls: PodClass, k: int) -> None:
    """Move ``k`` pending pods of ``cls`` onto the packed ``claim`` (as :func:`_joins` planned: its type and
    requirements stay); its candidates keep only the types that still fit."""
    claim.need = [n + v * k for n, v in zip(claim.need, cls.vec, strict=True)]
    for _ in range(k):
        claim.pods.append(cls.pods.pop())
    claim.seen.add(cls.index)
    claim.final = claim.types = [t for t in claim.final or () if t.fits(claim.need)]


def _pack_group(run: Scheduler, template: NodeClaimTemplate, merged: Requirements, members: list[PodClass]) -> None:
    run.within_limits(template, template.types_for(merged))  # says once per pool how many types limits exclude
    priced, prices, front = pack_inputs(template, merged)
    items, pack_types = _with_port_dims(members, priced)
    bins, left = pack(items, pack_types, prices, front=front if pack_types is priced else None)
    joins = _joins(run, template, members)
    if joins:
        taken = [0] * len(items)
        for _claim, idx, k in joins:
            taken[idx] += k
        rest = [Item(it.vec, it.count - t) for it, t in zip(items, taken, strict=True)]
        rest_bins, rest_left = pack(rest, pack_types, prices, front=front if pack_types is priced else None)
        # Joining is free (the NodeClaims keep their price): keep it only when the rest then costs less.
        if (sum(rest_left), round(sum(b.price for b in rest_bins), 9)) < (sum(left), round(sum(b.price for b in bins), 9)):
            for claim, idx, k in joins:
                _join(claim, members[idx], k)
            bins, items = rest_bins, rest
    cap_left = None if run.max_new is None else run.max_new - len(run.claims)
    if cap_left is not None and len(bins) > cap_left:
        bins = _squeeze(bins, pack_types, prices, items, cap_left)
    if template.remaining is not None:
        bins = _within_limits(template, bins, items, pack_types, prices)
    base = len(run.dims)
    # Repeated patterns give many equal bins; without limits (which change as NodeClaims reserve them)
    # their candidates are equal too. Without a Pricing they are kept with the pool's cached types: the next
    # batch's bins often have the same needs.
    shared = template.remaining is None and template.pricing is None
    memo: dict[tuple[object, ...], list[TypeInfo]] = template.shared.candidates if shared else {}
    ident = merged.identity()
    min_values = merged.min_values() if template.min_values else {}
    missed = ""
    for i, b in enumerate(bins):
        need = b.need(items, len(items[0].vec))[:base]
        ports = frozenset(hp for idx, _ in b.fill for hp in members[idx].rep.host_ports)
        key = ("packed", ident, tuple(need), ports)  # the bin's ports rule out types whose DaemonSets hold them
        candidates = memo.get(key) if template.remaining is None else None
        if candidates is None:
            # `priced` is cheapest first: without minValues only the first 60 fitting types matter. Under limits,
            # only types that leave room for one NodeClaim of each later bin (nodewright's narrowing).
            room = template.room_after([later.info for later in bins[i + 1:]])
            fitting = fitting_prefix(
                template.port_free(priced, ports),
                need,
                None if min_values else MAX_INSTANCE_TYPES,
                keep=None if room is None else partial(template.within, room=room),
            )
            candidates = template.flexibility.truncate(fitting, MAX_INSTANCE_TYPES, min_values)
            if room is not None and candidates and i + 1 < len(bins):
                wide = fitting_prefix(template.port_free(priced, ports), need, MAX_INSTANCE_TYPES,
                                      keep=template.within_limits)
                if max_launch(template, wide) != max_launch(template, candidates):
                    run.narrowed[template.name] = run.narrowed.get(template.name, 0) + 1
            if shared:
                template.shared.remember(key, candidates)
            else:
                memo[key] = candidates
        if not candidates:
            continue
        reqs = merged
        unmet = template.flexibility.unmet(candidates, min_values) if min_values else {}
        if unmet and not run.relax_min_values:
            missed = unmet_reason(unmet, min_values)
            continue
        if unmet:
            reqs = merged.with_min_values(unmet)  # MinValuesPolicy=BestEffort
        claim = NodeClaim(template, len(run.claims), reqs, candidates, base)
        claim.packed = True
        claim.final = candidates
        claim.need = need
        for idx, k in b.fill:
            cls = members[idx]
            for _ in range(k):
                claim.pods.append(cls.pods.pop())
                claim.ports.extend(cls.rep.host_ports)
            claim.seen.add(cls.index)
        run.claims.append(claim)
        claim.reserved = candidates
        template.reserve(candidates)
    for cls in members:
        for pod in cls.pods:
            run.result.unschedulable[pod.key] = (
                f'incompatible with nodepool "{template.name}", {missed}'
                if missed
                else f'all available instance types exceed limits for nodepool: "{template.name}"'
                if template.remaining is not None
                else f"would need more than {run.max_new} new NodeClaim(s)"
                if run.max_new is not None
                else "no instance type fits the remaining pods"
            )
        cls.pods.clear()


def max_launch(template: NodeClaimTemplate, types: Sequence[TypeInfo]) -> dict[str, int]:
    """The most a NodeClaim with candidates ``types`` takes from each of ``template``'s limited resources."""
    out: dict[str, int] = {}
    for t in types:
        for name, qty in template.launch_cost(t).items():
            out[name] = max(out.get(name, 0), qty)
    return out


#: Rounds of re-packing the pods of bins the limits left out into the room the kept bins leave.
LIMIT_ROUNDS = 3


def _within_limits(template: NodeClaimTemplate, bins: list[Bin], items: list[Item], types: list[TypeInfo],
                   prices: dict[str, float]) -> list[Bin]:
    """The bins (packed without limits) that fit what remains of ``template``'s limits, each counted at its own
    type (its candidates are narrowed to keep that true: :func:`_pack_group`): first fit in the packer's order
    (its most efficient nodes first); the pods of bins left out are packed again into the room left, on the
    types that fit it, for up to :data:`LIMIT_ROUNDS` rounds. Pods still left out stay pending."""
    kept: list[Bin] = []
    for _ in range(LIMIT_ROUNDS):
        left = [0] * len(items)
        for b in bins:
            room = template.room_after([k.info for k in kept] + [b.info])
            if room is not None and min(room.values(), default=0) >= 0:
                kept.append(b)
            else:
                for idx, k in b.fill:
                    left[idx] += k
        room = template.room_after([k.info for k in kept])
        if not any(left) or room is None:
            break
        fitting = [t for t in types if template.within(t, room)]
        if not fitting:
            break
        bins, _ = pack([Item(it.vec, n) for it, n in zip(items, left, strict=True)], fitting, prices)
        if not bins:
            break
    return kept


def _squeeze(bins: list[Bin], priced: list[TypeInfo], prices: dict[str, float], items: list[Item], cap: int) -> list[Bin]:
    """With a cap on new NodeClaims: one node for everything when some type fits it, else the first ``cap``.

    ``items`` and ``priced`` are the packer's (host ports included as dimensions)."""
    if cap <= 0:
        return []
    if cap == 1 and bins:
        fill = tuple((i, it.count) for i, it in enumerate(items) if it.count)
        need = Bin(bins[0].info, 0.0, fill).need(items, len(items[0].vec))
        for t in priced:
            if t.fits(need):
                return [Bin(t, prices[t.name], fill)]
    return bins[:cap]


def _with_port_dims(members: Sequence[PodClass], types: list[TypeInfo]) -> tuple[list[Item], list[TypeInfo]]:
    """Packing items for ``members`` and the types to pack them on, with host ports as resources.

    Each (protocol, port) used by a member becomes one more dimension: a pod using it requests 1 and every
    node offers 1 (0 where a DaemonSet of its type holds the port), so the packer never puts two pods sharing a
    host port on one node. Members only share a key when their ports conflict (see :func:`ambiguous_ports`), so
    this is exact.
    """
    on_key: dict[tuple[str, int], list[HostPort]] = {}
    for cls in members:
        for p in cls.rep.host_ports:
            on_key.setdefault((p.protocol, p.port), []).append(p)
    keys = sorted(on_key)
    if not keys:
        return [Item(cls.vec, len(cls.pods)) for cls in members], types
    items = []
    for cls in members:
        used = {(p.protocol, p.port) for p in cls.rep.host_ports}
        items.append(Item(cls.vec + tuple(1 if k in used else 0 for k in keys), len(cls.pods)))
    return items, with_port_slots(types, [on_key[k] for k in keys])


def with_port_slots(types: Sequence[TypeInfo], ports: Sequence[Sequence[HostPort]]) -> list[TypeInfo]:
    """``types`` whose budgets offer one unit of each host-port dimension (appended last; ``ports[i]``: the pods'
    host ports on dimension i), none where the type's DaemonSets hold one of them."""
    return [TypeInfo(t.it, t.budget + tuple(0 if t.daemons.blocks(on) else 1 for on in ports), daemons=t.daemons)
            for t in types]
