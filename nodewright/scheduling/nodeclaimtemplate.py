"""NodeClaim templates: each NodePool compiled for one run (Karpenter's ``nodeclaimtemplate.go``).

A :class:`NodeClaimTemplate` holds the NodePool's instance types as this run sees them: resource budgets,
compatibility with requirements, offering choice and price rankings (:meth:`NodeClaimTemplate.priced` is the
one "cheapest first, with prices" list), and what remains of the pool's limits.

Resources are handled as fixed-order integer vectors (``dims``: cpu millicores, memory bytes, pods, then any
other requested resource) so fit checks are tuple comparisons. A type's *budget* on a pool is its allocatable
(cpu and memory scaled by the pool's target utilization) minus the requests of the DaemonSets that type runs
(:mod:`nodewright.scheduling.daemonsets`; Karpenter's daemon overhead groups): pods fit when their summed requests
are within the budget. A pod whose host port one of those DaemonSets holds cannot use that type. The per-type part
(:class:`~.typeinfo.TypeInfo`, compiled on demand) is in :mod:`~.typeinfo`.

Instance-type compatibility with requirements follows Karpenter: a key the type labels must be allowed; a
well-known instance label the type lacks (``instance-gpu-name`` on a non-GPU type) behaves as
``DoesNotExist``; zone / capacity type / zone id are checked against the type's available offerings.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from operator import le
from typing import TYPE_CHECKING, Protocol

from nodewright.api import labels as wk
from nodewright.cloud.instancetype import (
    CAPACITY_TYPE_SPOT,
    InstanceType,
    Offering,
)
from nodewright.quantities import format_resources
from nodewright.scheduling.catalogindex import CAPACITY_TYPE_PRIORITY, build_ranking, catalog_view
from nodewright.scheduling.daemonsets import DaemonGroup, PoolDaemons, overhead_text, port_taken
from nodewright.scheduling.minvalues import Flexibility, unmet_reason
from nodewright.scheduling.nodepools import NodePoolSpec
from nodewright.scheduling.pods import HostPort
from nodewright.scheduling.requirements import Requirements
from nodewright.scheduling.taints import untolerated
from nodewright.scheduling.templatetypes import TemplateTypes
from nodewright.scheduling.typeinfo import (
    OfferingFilter,
    TypeInfo,
    Vector,
    offering_filter,
    pool_budget,
    pool_type,
)

__all__ = ["OfferingFilter", "TypeInfo", "Vector", "offering_filter", "pool_budget", "pool_type"]  # re-exported

if TYPE_CHECKING:
    from nodewright.scheduling.preferences import PodClass

#: Karpenter truncates the fleet request's instance types to 60 (``MaxInstanceTypes``).
MAX_INSTANCE_TYPES = 60


class Pricing(Protocol):
    """What one more instance costs this run, when it is not the list price (a ``PricingPolicy``: see
    :class:`nodewright.pricing.engine.MarginalPricing`). The one price every ranking, capacity-type choice and
    packing cost of a run reads; without it (``None``) that is ``Offering.price``.

    ``version`` changes whenever prices may have changed (the run's fleet grew by a NodeClaim): rankings cached
    under another version are recomputed.
    """

    @property
    def version(self) -> int: ...

    def price(self, instance_type: str, offering: Offering) -> float:
        """USD/hour one more ``instance_type`` launched as ``offering`` adds to the bill."""
        ...

    def launched(self, instance_type: str, offering: Offering) -> float:
        """Add one ``instance_type`` on ``offering`` to the run's fleet (a NodeClaim planned); returns the
        :meth:`price` it had."""
        ...


#: Makes the :class:`Pricing` of one scheduling run (a fresh fleet per run).
PricingFactory = Callable[[], Pricing]


class NodeClaimTemplate:
    """A NodePool compiled for one scheduling run.

    ``daemons`` says which DaemonSets each instance type runs (its budget is net of their requests); without it
    every type carries ``overhead``. ``overhead`` is also what reasons quote: the most a node of the pool carries.
    """

    def __init__(
        self,
        spec: NodePoolSpec,
        order: int,
        instance_types: Sequence[InstanceType],
        dims: Sequence[str],
        overhead: Mapping[str, int],
        pricing: Pricing | None = None,
        shared: TemplateTypes | None = None,
        daemons: PoolDaemons | None = None,
    ) -> None:
        """``shared``: the pool's :class:`TemplateTypes` built earlier for the same inputs (the scheduling
        cache's); None builds them from ``instance_types``."""
        self.spec = spec
        self.pricing = pricing
        self._version = -1 if pricing is None else pricing.version
        self.name = spec.name
        self.order = order
        self.reqs = spec.requirements
        self.taints = spec.taints
        self.dims = tuple(dims)
        self.overhead = dict(overhead)
        #: whether some DaemonSet holds a host port (else no type ever blocks a pod's ports)
        self.daemon_ports = daemons is not None and daemons.has_ports
        if shared is None:
            by_position = [pool_type(spec, it, dims, overhead, pricing, daemons) for it in instance_types]
            shared = TemplateTypes([info for info in by_position if info is not None], view=catalog_view(instance_types),
                                   by_position=by_position)
        self.shared = shared
        self.types = shared.types
        self.remaining = spec.remaining()  # per run: NodeClaims reserve from it
        self._compat = shared.compat
        self._domains = shared.domains
        self._ranked = shared.ranked
        self._priced = shared.priced
        self._offered = shared.offered
        self.min_values = self.reqs.min_values()
        self.flexibility = Flexibility(self.reqs)

    def _sync(self) -> None:
        """Drop the price rankings when the run's :class:`Pricing` changed its prices."""
        if self.pricing is not None and self.pricing.version != self._version:
            self._version = self.pricing.version
            self._compat.clear()
            self._ranked.clear()
            self._priced.clear()
            self.shared.candidates.clear()

    def types_for(self, reqs: Requirements) -> list[TypeInfo]:
        """Pool types compatible with ``reqs`` (which already include the pool's requirements), cheapest
        allowed offering first (ties by name); cached per requirement set."""
        self._sync()
        ident = reqs.identity()
        found = self._compat.get(ident)
        if found is None:
            if self.pricing is None:
                return self._list_rankings(reqs, ident)
            # compatible() looked the cheapest allowed offering up already: rank by that cached one.
            found = _by_price((t for t in self.types if t.compatible(reqs)), lambda t: t.offering(reqs))
            self._compat[ident] = found
        return found

    def _list_rankings(self, reqs: Requirements, ident: tuple[object, ...]) -> list[TypeInfo]:
        """At list prices, :meth:`types_for`, every capacity type's :meth:`ranked` list and (without limits)
        :meth:`priced` for ``reqs`` in one pass over the pool's types (issue 30: a cold batch used to make five
        passes, an offering lookup each, and sort three times). The same lists: by (price, name), each capacity
        type's cut from the types_for order; the launch's capacity type is the first of reserved/spot/on-demand
        some type offers. Under the pool's own requirements every type is compatible (pool_type kept only
        those): no label check."""
        flt = offering_filter(reqs)
        own = ident == self.reqs.identity()
        view, by_position = self.shared.view, self.shared.by_position
        if view is not None and by_position is not None and (
                view.has_ranking(flt) or (own and 4 * len(self.types) >= len(by_position))):
            # The catalog's ranking of the pool's list, shared by every pool and cache: a filter, not a sort (made
            # for a pool that keeps at least a quarter of its list; a narrower one sorts its own few types).
            found, ranked, priced = view.ranking(flt).restrict(by_position, None if own else reqs)
        else:
            kept = self.types if own else [t for t in self.types if t.labels_allow(reqs)]
            ranking = build_ranking([t.name for t in kept], [t.cheapest_under(flt) for t in kept])
            found, ranked, priced = ranking.restrict(kept)
        self._compat[ident] = found
        for ct, cut in ranked.items():
            self._ranked[(ident, ct)] = cut
        if self.remaining is None:
            self._priced[ident] = priced
        return found

    def ranked(self, reqs: Requirements, capacity_type: str | None) -> list[TypeInfo]:
        """``types_for(reqs)`` offering ``capacity_type`` under ``reqs``, cheapest such offering first (ties by
        name); ``None`` ranks by the cheapest offering of any capacity type (``types_for`` itself). Cached per
        requirement set and capacity type.

        Built once per requirement set so that choosing the launch candidates of each NodeClaim is a scan of a
        ready ranking instead of an offering lookup and a sort per NodeClaim.
        """
        types = self.types_for(reqs)
        if capacity_type is None:
            return types
        key = (reqs.identity(), capacity_type)
        found = self._ranked.get(key)
        if found is None:
            # Through each type's offering cache: priced() looks the same offerings up next.
            found = _by_price(types, lambda t: t.offering(reqs, capacity_type))
            self._ranked[key] = found
        return found

    def priced(self, reqs: Requirements) -> list[tuple[TypeInfo, float]]:
        """(type, USD/hour) of the types a new NodeClaim under ``reqs`` could launch, cheapest first: compatible
        with ``reqs``, within what remains of the limits, offering the capacity type a launch would use (the
        first of reserved/spot/on-demand that one of them offers), priced by that capacity type's cheapest
        allowed offering (ties by name). Cached per requirement set while the pool has no limits."""
        key = reqs.identity()
        found = self._priced.get(key) if self.remaining is None else None
        if found is None:
            types = self.types_for(reqs)
            if self.remaining is None and key in self._priced:
                return self._priced[key]  # types_for made it (list prices, the first time)
            if self.remaining is not None:
                types = self.limited(types)
            ct = capacity_type_for(types, reqs, self.pricing is not None)
            kept = None if self.remaining is None else {id(t) for t in types}
            found = []
            for t in self.ranked(reqs, ct):
                if kept is None or id(t) in kept:
                    offering = t.offering(reqs, ct)
                    assert offering is not None  # ranked by the same offering filter
                    found.append((t, t.price_of(offering)))
            if self.remaining is None:
                self._priced[key] = found
        return found

    def limited(self, types: list[TypeInfo]) -> list[TypeInfo]:
        """``types`` whose launch keeps every limited resource within what remains (order kept; ``types``
        itself when the pool has no limits)."""
        if self.remaining is None:
            return types
        return [t for t in types if self.within_limits(t)]

    def launch_candidates(
        self,
        reqs: Requirements,
        need: Sequence[int],
        limit: int,
        allowed: Collection[int] | None = None,
    ) -> list[TypeInfo]:
        """The instance types a NodeClaim with summed pod requests ``need`` lists for its launch.

        The capacity type is the first of reserved/spot/on-demand that some fitting type (compatible with
        ``reqs``, ``allowed`` by id when given) offers; the fitting types offering it are taken cheapest
        offering first and truncated to ``limit`` honouring the ``minValues`` of ``reqs`` (Karpenter orders a
        NodeClaim's instance types by price and truncates the fleet request to 60). Empty when nothing fits.
        Cached (without ``allowed``) per requirement set (``minValues`` included), ``need`` and ``limit``.
        """
        if allowed is not None:
            return self._launch_candidates(reqs, need, limit, allowed)
        self._sync()
        key = (reqs.identity(), tuple(need), limit)
        found = self.shared.candidates.get(key)
        if found is None:
            found = self._launch_candidates(reqs, need, limit, None)
            self.shared.remember(key, found)
        return found

    def _launch_candidates(
        self, reqs: Requirements, need: Sequence[int], limit: int, allowed: Collection[int] | None
    ) -> list[TypeInfo]:
        """Uncached :meth:`launch_candidates`."""
        min_values = reqs.min_values() if self.min_values else {}
        offered = self.capacity_types(reqs)
        by_price = self.pricing is not None
        found: list[tuple[str | None, list[TypeInfo]]] = []
        for ct in (*CAPACITY_TYPE_PRIORITY, None):
            if (ct is not None and ct not in offered) or (ct is None and found):
                continue
            out = fitting_prefix(self.ranked(reqs, ct), need, None if min_values else limit, allowed)
            if out:
                found.append((ct, out))
                if not by_price or ct != CAPACITY_TYPE_SPOT:
                    break
        if not found:
            return []
        # With a Pricing, spot competes with on-demand: the first type of each list is its cheapest fit (ties
        # to spot, as capacity_type_for).
        chosen = min(found, key=lambda f: offered_price(f[1][0], reqs, f[0]))[1]
        return self.flexibility.truncate(chosen, limit, min_values)

    def capacity_types(self, reqs: Requirements) -> set[str]:
        """Capacity types some type of ``types_for(reqs)`` offers in any zone (a cheap superset of those it
        offers under ``reqs``, to skip ranking capacity types nobody offers); cached."""
        ident = reqs.identity()
        found = self._offered.get(ident)
        if found is None:
            found = {ct for t in self.types_for(reqs) for ct in t.capacity_types}
            self._offered[ident] = found
        return found

    def domains(self, key: str, reqs: Requirements) -> frozenset[str]:
        """Values a node of this pool could have for ``key`` under ``reqs`` (zones and capacity types from
        the compatible types' available offerings, other keys from their labels); cached."""
        cache_key = (key, reqs.identity())
        found = self._domains.get(cache_key)
        if found is not None:
            return found
        req = reqs.get(key)
        if req is not None and not req.complement:
            values = set(req.values)
        else:
            values = set()
            types = self.types_for(reqs)
            if key in (wk.ZONE, wk.CAPACITY_TYPE, wk.ZONE_ID):
                for t in types:
                    for o in t.it.offerings:
                        if o.available:
                            values.add(o.zone if key == wk.ZONE else o.capacity_type if key == wk.CAPACITY_TYPE else o.zone_id)
            else:
                values = {v for t in types if (v := t.labels.get(key)) is not None}
            if req is not None:
                values = {v for v in values if req.has(v)}
        found = frozenset(values)
        self._domains[cache_key] = found
        return found

    def port_free(self, types: list[TypeInfo], ports: Collection[HostPort]) -> list[TypeInfo]:
        """``types`` whose DaemonSets hold none of ``ports`` (order kept; ``types`` itself when none can)."""
        if not ports or not self.daemon_ports:
            return types
        return [t for t in types if not t.daemons.blocks(ports)]

    def within_limits(self, info: TypeInfo) -> bool:
        """True when launching ``info`` keeps every limited resource within what remains."""
        if self.remaining is None:
            return True
        cap = info.capacity
        for name, left in self.remaining.items():
            if name == "nodes":
                if left < 1:
                    return False
            elif cap.get(name, 0) > left:
                return False
        return True

    def launch_cost(self, info: TypeInfo) -> dict[str, int]:
        """What launching ``info`` takes from each limited resource: its capacity, and 1 for ``nodes``
        (empty when the pool has no limits)."""
        if self.remaining is None:
            return {}
        return {name: 1 if name == "nodes" else info.capacity.get(name, 0) for name in self.remaining}

    def room_after(self, later: Sequence[TypeInfo]) -> dict[str, int] | None:
        """What remains of the limits once one NodeClaim of each of ``later`` is launched (None: no limits)."""
        if self.remaining is None:
            return None
        room = dict(self.remaining)
        for info in later:
            for name, qty in self.launch_cost(info).items():
                room[name] -= qty
        return room

    def within(self, info: TypeInfo, room: Mapping[str, int]) -> bool:
        """True when launching ``info`` takes no more than ``room`` of each limited resource."""
        return all(qty <= room.get(name, 0) for name, qty in self.launch_cost(info).items())

    def reserve(self, infos: Sequence[TypeInfo]) -> None:
        """Subtract the largest capacity among ``infos`` (and one node) from the remaining limits (Karpenter
        ``subtractMax`` over a new NodeClaim's instance-type options: the launch may get any of them)."""
        if self.remaining is None or not infos:
            return
        for name in list(self.remaining):
            if name == "nodes":
                self.remaining[name] -= 1
            else:
                self.remaining[name] -= max(i.capacity.get(name, 0) for i in infos)

    def release(self, infos: Sequence[TypeInfo]) -> None:
        """Undo :meth:`reserve` of ``infos`` (a NodeClaim replaced by a cheaper re-pack)."""
        if self.remaining is None or not infos:
            return
        for name in list(self.remaining):
            if name == "nodes":
                self.remaining[name] += 1
            else:
                self.remaining[name] += max(i.capacity.get(name, 0) for i in infos)


def type_daemons(daemons: PoolDaemons, it: InstanceType) -> DaemonGroup:
    """The DaemonSets ``it`` runs as a new node of the pool ``daemons`` belongs to, outside a scheduling run (the
    same rule as a template's types; the disruption screen's room per type)."""
    info = TypeInfo(it, ())
    return daemons.group_for(info.labels, info.compatible)


def hosting(
    templates: Sequence[NodeClaimTemplate],
    cls: PodClass,
    reasons: list[str],
    within_limits: Callable[[NodeClaimTemplate, list[TypeInfo]], list[TypeInfo]],
    relax_min_values: bool = False,
) -> Iterator[tuple[NodeClaimTemplate, Requirements, list[TypeInfo]]]:
    """The templates (in order: weight, then name) whose taints, requirements, limits, instance types and
    ``minValues`` can host one pod of ``cls``, with the merged requirements and the types ``within_limits`` keeps;
    each rejected template appends its reason to ``reasons`` in Karpenter's words. With ``relax_min_values``
    (``MinValuesPolicy=BestEffort``) a ``minValues`` the fitting types miss is relaxed in the merged requirements
    instead of rejecting the template, so a NodePool relaxes before a lower-weight one is tried."""
    for template in templates:
        taint = untolerated(cls.tolerations, template.taints)
        if taint is not None:
            reasons.append(f'incompatible with nodepool "{template.name}", did not tolerate taint {taint}')
            continue
        why = template.reqs.incompatibility(cls.reqs)
        if why is not None:
            reasons.append(f'incompatible with nodepool "{template.name}", {why}')
            continue
        merged = template.reqs.intersect(cls.reqs)
        compatible = template.types_for(merged)
        types = within_limits(template, compatible)
        if compatible and not types:
            reasons.append(f'all available instance types exceed limits for nodepool: "{template.name}"')
            continue
        free = template.port_free(types, cls.rep.host_ports)
        if types and not free:
            why = port_taken(types[0].daemons, cls.rep.host_ports)
            reasons.append(f'incompatible with nodepool "{template.name}", {why}')
            continue
        if not any(t.fits(cls.vec) for t in free):
            fitting = next((t for t in types if t.fits(cls.vec)), None) if free is not types else None
            if fitting is not None:  # only types whose daemonsets hold one of its host ports are large enough
                why = port_taken(fitting.daemons, cls.rep.host_ports, "on every instance type large enough for it")
                reasons.append(f'incompatible with nodepool "{template.name}", {why}')
                continue
            overhead = overhead_text([t.daemons for t in free or template.types], template.overhead)
            reasons.append(
                f'incompatible with nodepool "{template.name}", daemonset overhead={overhead}, no instance type '
                f"satisfied resources {format_resources(cls.rep.requests)} and requirements {merged}"
            )
            continue
        if template.min_values:
            min_values = merged.min_values()
            unmet = template.flexibility.unmet([t for t in free if t.fits(cls.vec)], min_values)
            if unmet and not relax_min_values:
                reasons.append(f'incompatible with nodepool "{template.name}", {unmet_reason(unmet, min_values)}')
                continue
            if unmet:
                merged = merged.with_min_values(unmet)
        yield template, merged, free


def _by_price(types: Iterable[TypeInfo], offering: Callable[[TypeInfo], Offering | None]) -> list[TypeInfo]:
    """``types`` that have an ``offering``, cheapest such offering first, ties by list price (with a
    :class:`Pricing`, equal marginal prices spend the least commitment), then name: the one price ranking every
    candidate list is cut from."""
    priced = []
    for t in types:
        o = offering(t)
        if o is not None:
            priced.append((t.price_of(o), o.price, t.name, t))
    priced.sort(key=lambda p: (p[0], p[1], p[2]))
    return [p[3] for p in priced]


def fitting_prefix(
    ordered: Sequence[TypeInfo],
    need: Sequence[int],
    limit: int | None,
    allowed: Collection[int] | None = None,
    keep: Callable[[TypeInfo], bool] | None = None,
) -> list[TypeInfo]:
    """The first ``limit`` (None: all) types of ``ordered`` whose budget fits ``need``, optionally only those
    whose id is in ``allowed`` and for which ``keep`` holds; order preserved."""
    out: list[TypeInfo] = []
    cpu, memory = need[0], need[1]  # the run's dims start cpu, memory: most misfits fail there, cheaply
    for t in ordered:
        budget = t.budget
        if budget[0] >= cpu and budget[1] >= memory and all(map(le, need, budget)):
            if allowed is not None and id(t) not in allowed:
                continue
            if keep is not None and not keep(t):
                continue
            out.append(t)
            if limit is not None and len(out) >= limit:
                break
    return out


def capacity_type_for(candidates: Sequence[TypeInfo], reqs: Requirements, by_price: bool = False) -> str | None:
    """The capacity type a launch would use: the first of reserved/spot/on-demand some candidate offers
    (Karpenter's rule). With ``by_price`` (a :class:`Pricing` is set): reserved first, then spot or on-demand,
    whichever has the cheaper candidate offering at the run's prices (ties to spot)."""
    offered = [ct for ct in CAPACITY_TYPE_PRIORITY if any(info.offering(reqs, ct) is not None for info in candidates)]
    if not by_price or not offered or offered[0] != CAPACITY_TYPE_SPOT or len(offered) == 1:
        return offered[0] if offered else None
    return min(offered, key=lambda ct: min(offered_price(info, reqs, ct) for info in candidates))


def offered_price(info: TypeInfo, reqs: Requirements, ct: str | None) -> float:
    """The run's price of ``info``'s cheapest ``ct`` offering under ``reqs`` (infinite when it has none)."""
    o = info.offering(reqs, ct)
    return float("inf") if o is None else info.price_of(o)
