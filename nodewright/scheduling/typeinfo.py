"""One instance type as one NodePool sees it (:class:`TypeInfo`), compiled on demand (issue 30).

A type's *budget* on a pool is its allocatable (cpu and memory scaled by the pool's target utilization) minus the
requests of the DaemonSets that type runs, as a vector in the run's ``dims`` order (:func:`pool_budget`);
:func:`pool_type` decides whether the pool can use the type at all (labels, an allowed available offering, room
for its DaemonSets). Offering lookups (the cheapest allowed offering per requirement set and capacity type) are
cached on the type; at list prices they go through the catalog-wide memo of :mod:`~.catalogindex` (per instance
type object, shared by every pool and cache). :mod:`~.nodeclaimtemplate` re-exports these names; it builds its
rankings from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import le
from typing import TYPE_CHECKING, Any

from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.quantities import CPU, MEMORY
from nodewright.scheduling.catalogindex import (
    Cheapest,
    OfferingFilter,
    cheapest_in,
    compute_cheapest,
    labels_allow,
    offering_filter,
    type_filters,
)
from nodewright.scheduling.daemonsets import NO_DAEMONS, DaemonGroup, PoolDaemons
from nodewright.scheduling.nodepools import NodePoolSpec
from nodewright.scheduling.requirements import Requirements

if TYPE_CHECKING:
    from nodewright.scheduling.nodeclaimtemplate import Pricing

Vector = tuple[int, ...]


class TypeInfo:
    """One instance type as seen by one pool: budget vector, capacity, the DaemonSets it runs (``daemons``), and a
    per-requirements price cache.

    Compiled on demand (issue 30: a pool's first batch used to compile all ~1,345 types of the catalog up front,
    most of a cold one-pod batch): ``capacity`` and the offering ranking are built on first use, and so is
    ``budget`` when it is given as ``None`` with ``lazy_budget`` = (NodePool, dims, overhead) for
    :func:`pool_budget` (only where that budget cannot be negative: :func:`pool_type`). Each is then a plain
    slot: warm paths pay nothing for the laziness (``__getattr__`` runs only while a slot is unset)."""

    __slots__ = ("it", "name", "labels", "budget", "daemons", "capacity", "pricing", "_price_cache", "_by_price",
                 "_version", "_lazy_budget", "_filters", "capacity_types")
    # Slots that may be compiled on first use (declared for the type checker; no class attributes).
    budget: Vector
    capacity: dict[str, int]
    capacity_types: list[str]
    _by_price: dict[str | None, list[Offering]]
    _filters: dict[OfferingFilter, Cheapest]

    def __init__(
        self, it: InstanceType, budget: Vector | None, pricing: Pricing | None = None,
        daemons: DaemonGroup = NO_DAEMONS,
        lazy_budget: tuple[NodePoolSpec, Sequence[str], Mapping[str, int]] | None = None,
    ) -> None:
        self.it = it
        self.name = it.name
        self.labels = it.labels
        if budget is not None:
            self.budget = budget
        self._lazy_budget = lazy_budget
        self.daemons = daemons
        self.pricing = pricing
        self._price_cache: dict[tuple[object, ...], Offering | None] = {}
        self._version = -1 if pricing is None else pricing.version

    if not TYPE_CHECKING:  # hidden from the type checker, which would otherwise accept any attribute name

        def __getattr__(self, name: str) -> Any:
            """The fields compiled on first use (see the class docstring); any other missing name is an error."""
            if name == "budget" and self._lazy_budget is not None:
                spec, dims, overhead = self._lazy_budget
                self.budget = pool_budget(spec, self.it, dims, overhead)
                return self.budget
            if name == "_filters":  # list-price lookups depend on the offerings alone: one memo per type object
                self._filters = type_filters(self.it)
                return self._filters
            if name == "capacity":
                self.capacity = dict(self.it.capacity)
                return self.capacity
            if name == "_by_price":
                self._by_price = self._rank_offerings()
                return self._by_price
            if name == "capacity_types":  # capacity types with an available offering (any zone), catalog order
                self.capacity_types = list(dict.fromkeys(o.capacity_type for o in self.it.offerings if o.available))
                return self.capacity_types
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def cached_lookups(self) -> int:
        """How many (requirement set, capacity type) offering lookups it has cached (memory accounting)."""
        return len(self._price_cache)

    def price_of(self, offering: Offering) -> float:
        """USD/hour of one of its offerings this run: the list price, or the :class:`Pricing`'s."""
        return offering.price if self.pricing is None else self.pricing.price(self.name, offering)

    def _rank_offerings(self) -> dict[str | None, list[Offering]]:
        """Available offerings by (price, list price, zone), per capacity type (None: all); the sort is stable, so
        ties keep the catalog's order."""
        available = [o for o in self.it.offerings if o.available]
        # Without pricing, (list price, list price, zone) orders as (list price, zone): the cold path.
        ordered = sorted(available, key=(lambda o: (o.price, o.zone)) if self.pricing is None
                         else (lambda o: (self.price_of(o), o.price, o.zone)))
        by_price: dict[str | None, list[Offering]] = {None: ordered}
        for o in ordered:
            by_price.setdefault(o.capacity_type, []).append(o)
        return by_price

    def _sync(self) -> None:
        """Re-rank the offerings when the run's prices changed (only with a :class:`Pricing`)."""
        if self.pricing is not None and self.pricing.version != self._version:
            self._version = self.pricing.version
            self._price_cache.clear()
            self._by_price = self._rank_offerings()


    def offering(self, reqs: Requirements, capacity_type: str | None = None) -> Offering | None:
        """Cheapest available offering allowed by ``reqs`` (zone, capacity type, zone id), optionally of one
        capacity type; ties broken by zone name (then catalog order); cached per requirement set."""
        self._sync()
        key = (reqs.identity(), capacity_type)
        cache = self._price_cache
        if key in cache:
            return cache[key]
        flt = offering_filter(reqs)
        if self.pricing is None:
            # List prices: one scan per offering filter (requirement sets differing elsewhere share it) finds
            # the cheapest offering of every capacity type, without ranking the offerings (issue 30: a cold
            # batch looks every type up under two or three requirement sets).
            best = self.cheapest_under(flt).get(capacity_type)
        else:
            best = self.first_offering(flt, capacity_type)
        cache[key] = best
        return best

    def _cheapest(self, flt: OfferingFilter) -> Cheapest:
        """Capacity type (None: any) -> the available offering ``flt`` allows of least (list price, zone), the
        first such in catalog order: what :meth:`first_offering` returns without a :class:`Pricing`."""
        return compute_cheapest(self.it, flt)

    def first_offering(self, flt: OfferingFilter, capacity_type: str | None) -> Offering | None:
        """Uncached :meth:`offering` for a precomputed :func:`offering_filter`."""
        self._sync()
        zone, ct, zid = flt
        for o in self._by_price.get(capacity_type, ()):
            if zone is not None and not zone.has(o.zone):
                continue
            if ct is not None and not ct.has(o.capacity_type):
                continue
            if zid is not None and o.zone_id and not zid.has(o.zone_id):
                continue
            return o  # offerings are sorted: the first allowed one is the cheapest
        return None

    def compatible(self, reqs: Requirements) -> bool:
        """Labels allowed by ``reqs`` and at least one allowed available offering."""
        return self.labels_allow(reqs) and self.offering(reqs) is not None

    def cheapest_under(self, flt: OfferingFilter) -> dict[str | None, Offering]:
        """Capacity type (None: any) -> the cheapest available offering ``flt`` allows, at list prices (the
        offering :meth:`offering` returns without a Pricing), computed once per filter."""
        return cheapest_in(self._filters, self.it, flt)

    def labels_allow(self, reqs: Requirements) -> bool:
        """Every label ``reqs`` constrains is allowed (a well-known instance label the type lacks counts as
        absent); offering keys are :meth:`offering`'s (:func:`~.catalogindex.labels_allow`)."""
        return labels_allow(self.labels, reqs)

    def fits(self, need: Sequence[int]) -> bool:
        """True when ``need`` is within the budget in every dimension (vectors of the run's dims)."""
        return all(map(le, need, self.budget))


def pool_budget(spec: NodePoolSpec, it: InstanceType, dims: Sequence[str], overhead: Mapping[str, int]) -> Vector:
    """``it``'s budget on ``spec``'s nodes: allocatable (cpu and memory scaled by the target utilization) minus
    the daemonset ``overhead``, in ``dims`` order (a negative entry: the daemonsets alone do not fit)."""
    alloc = it.allocatable()
    util = spec.target_utilization
    budget = []
    for d in dims:
        value = alloc.get(d, 0)
        if util is not None and d in (CPU, MEMORY):
            value = int(value * util)
        budget.append(value - int(overhead.get(d, 0)))
    return tuple(budget)


def never_negative(dims: Sequence[str], overhead: Mapping[str, int]) -> bool:
    """Whether a DaemonSet ``overhead`` carried by every type can never make a budget negative (none of it is
    positive): :func:`pool_type` then admits a type on labels and offerings alone and compiles its budget lazily."""
    return not overhead or not any(int(overhead.get(d, 0)) > 0 for d in dims)


def pool_type(
    spec: NodePoolSpec,
    it: InstanceType,
    dims: Sequence[str],
    overhead: Mapping[str, int],
    pricing: Pricing | None,
    daemons: PoolDaemons | None = None,
) -> TypeInfo | None:
    """``it`` as ``spec``'s nodes see it, or None when its daemonsets alone do not fit or the pool's requirements
    rule it out (labels, or no allowed available offering). ``daemons``: which DaemonSets each type runs (the
    budget is net of the type's own); None: every type carries ``overhead``."""
    if daemons is None:
        group = DaemonGroup(requests=dict(overhead)) if overhead else NO_DAEMONS
        if never_negative(dims, overhead):
            # Allocatable is never negative: nor is the budget, which is then compiled when first read.
            info = TypeInfo(it, None, pricing, group, lazy_budget=(spec, dims, overhead))
            reqs = spec.requirements
            if pricing is None:  # compatible() without the per-requirement-set offering cache entry
                ok = info.labels_allow(reqs) and info.cheapest_under(offering_filter(reqs)).get(None) is not None
                return info if ok else None
            return info if info.compatible(reqs) else None
        budget = pool_budget(spec, it, dims, overhead)
        if min(budget) < 0:
            return None
        info = TypeInfo(it, budget, pricing, group)
        return info if info.compatible(spec.requirements) else None
    info = TypeInfo(it, (), pricing)
    if not info.compatible(spec.requirements):
        return None
    group = daemons.group_for(info.labels, info.compatible)
    budget = pool_budget(spec, it, dims, group.requests)
    if min(budget) < 0:
        return None  # its daemonsets alone do not fit
    info.budget = budget
    info.daemons = group
    return info
