"""Catalog-wide list-price indexes, shared by every NodePool, :class:`~.cache.SchedulingCache` and run (issue 30).

A cold one-pod batch on the bundled catalog (1,345 types) was mostly per-type work that depends on the catalog
alone, redone for every pool and every new cache: each type's cheapest allowed offering per capacity type, which
types a pool's requirements admit, and a sort of the pool's types by price. This module computes each once per
catalog snapshot and hands it out:

* :func:`cheapest_under` -- one instance type's cheapest available offering per capacity type under an
  *offering filter* (the zone, capacity-type and zone-id requirements, :func:`offering_filter`), at list prices.
  A pure function of the type's offerings, memoised per :class:`~nodewright.cloud.instancetype.InstanceType`
  object.
* :class:`CatalogView` -- one list of instance types (a cloud provider's answer for a NodePool, overlays
  applied): per requirement set, the positions whose labels and offerings the requirements allow
  (:meth:`CatalogView.kept`); per offering filter, every position ordered by its cheapest allowed offering, overall
  and per capacity type (:meth:`CatalogView.ranking`). A pool's price ranking is then a filter over that
  pre-sorted sequence instead of a sort.

Validity: :class:`~nodewright.cloud.instancetype.InstanceType` and :class:`~nodewright.cloud.instancetype.Offering`
are frozen; a price refresh, an overlay (:mod:`nodewright.cloud.overlay`, ``dataclasses.replace``), an offering
marked unavailable (:mod:`nodewright.cloud.unavailable` copies the type) or a reservation's new capacity makes new
objects, hence new entries: nothing here can go stale. A view is found by its list's length and end objects and
then checked element by element (identity first, at C speed), so a list with any other type is another view.
Everything is at list prices (``Offering.price``): under a PricingPolicy
(:class:`~.nodeclaimtemplate.Pricing`) the rankings are built per run from the run's prices and none of the
orders here are read. Entries hold their types (ids stay theirs); memory is bounded (:data:`MAX_TYPES`,
:data:`MAX_VIEWS`, :data:`MAX_FILTERS`: past a bound the oldest part is dropped and recomputed on demand).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Generic, Protocol, TypeVar

from nodewright.api import labels as wk
from nodewright.cloud.instancetype import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    InstanceType,
    Offering,
)
from nodewright.scheduling.requirements import INSTANCE_TYPE_KEYS, OFFERING_KEYS, Requirement, Requirements

#: The requirements that restrict offerings: (zone, capacity type, zone id); None where unconstrained.
OfferingFilter = tuple[Requirement | None, Requirement | None, Requirement | None]
#: Capacity type (None: any) -> the cheapest allowed available offering.
Cheapest = dict[str | None, Offering]

#: Capacity-type preference when several are allowed (Karpenter launches reserved, then spot, then on-demand).
CAPACITY_TYPE_PRIORITY = (CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND)
#: Instance types whose offering lookups are memoised (about six catalogs of the bundled size); past it all drop.
MAX_TYPES = 8192
#: Offering filters memoised per type, and filters / requirement sets kept per view; past it that memo drops.
MAX_FILTERS = 64
#: Lists of instance types with a :class:`CatalogView` to share; past it the oldest is dropped (a cache entry
#: that holds it keeps using it).
MAX_VIEWS = 8

_FIRST_TWO = itemgetter(0, 1)

#: The last (requirements, offering filter) computed: a run asks for every type's offerings under one requirement
#: set in a row. Rebound whole (atomic), and it holds its requirements, so ``is`` cannot match another object.
_LAST_FILTER: tuple[Requirements | None, OfferingFilter] = (None, (None, None, None))


def offering_filter(reqs: Requirements) -> OfferingFilter:
    """The requirements that restrict offerings: (zone, capacity type, zone id)."""
    global _LAST_FILTER
    last = _LAST_FILTER
    if last[0] is reqs:
        return last[1]
    flt = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE), reqs.get(wk.ZONE_ID)
    _LAST_FILTER = (reqs, flt)
    return flt


def labels_allow(labels: Mapping[str, str], reqs: Requirements) -> bool:
    """Every label ``reqs`` constrains is allowed by an instance type's ``labels`` (a well-known instance label
    the type lacks counts as absent: Karpenter's ``DoesNotExist`` for ``instance-gpu-name`` on a non-GPU type);
    offering keys (zone, capacity type, zone id) are the offerings' business."""
    for key, req in reqs.items():
        if key in OFFERING_KEYS:
            continue
        value = labels.get(key)
        if value is not None:
            if not req.has(value):
                return False
        elif key in INSTANCE_TYPE_KEYS and not req.allows_absence():
            return False
    return True


def compute_cheapest(it: InstanceType, flt: OfferingFilter) -> Cheapest:
    """Capacity type (None: any) -> the available offering of ``it`` that ``flt`` allows of least (list price,
    zone), the first such in catalog order; empty when none is allowed. Uncached: see :func:`cheapest_under`.

    One pass: an offering replaces its capacity type's best only when strictly less by (price, zone), so ties keep
    the first; the overall best (None) is always some capacity type's best when it is first met."""
    zone, ct, zid = flt
    unfiltered = zone is None and ct is None and zid is None
    best: Cheapest = {}
    first: Offering | None = None
    get = best.get
    for o in it.offerings:
        if not o.available:
            continue
        if not unfiltered and not ((zone is None or zone.has(o.zone))
                                   and (ct is None or ct.has(o.capacity_type))
                                   and (zid is None or not o.zone_id or zid.has(o.zone_id))):
            continue
        price = o.price
        b = get(o.capacity_type)
        if b is None or price < b.price or (price == b.price and o.zone < b.zone):
            best[o.capacity_type] = o
            if first is None or price < first.price or (price == first.price and o.zone < first.zone):
                first = o
    if first is not None:
        best[None] = first
    return best


def has_offering(it: InstanceType, flt: OfferingFilter) -> bool:
    """Whether ``it`` has an available offering ``flt`` allows (``bool(compute_cheapest(it, flt))``, cheaper)."""
    zone, ct, zid = flt
    for o in it.offerings:
        if o.available and ((zone is None or zone.has(o.zone)) and (ct is None or ct.has(o.capacity_type))
                            and (zid is None or not o.zone_id or zid.has(o.zone_id))):
            return True
    return False


#: id(InstanceType) -> (that type, {offering filter: its :func:`compute_cheapest`}).
_TYPES: dict[int, tuple[InstanceType, dict[OfferingFilter, Cheapest]]] = {}


def type_filters(it: InstanceType) -> dict[OfferingFilter, Cheapest]:
    """``it``'s memo of :func:`compute_cheapest` per offering filter (created empty), shared by every pool and
    cache that sees this object."""
    entry = _TYPES.get(id(it))
    if entry is not None and entry[0] is it:
        return entry[1]
    if len(_TYPES) >= MAX_TYPES:
        _TYPES.clear()
    memo: dict[OfferingFilter, Cheapest] = {}
    _TYPES[id(it)] = (it, memo)
    return memo


def cheapest_in(memo: dict[OfferingFilter, Cheapest], it: InstanceType, flt: OfferingFilter) -> Cheapest:
    """:func:`compute_cheapest` through ``it``'s memo (:func:`type_filters`)."""
    found = memo.get(flt)
    if found is None:
        if len(memo) >= MAX_FILTERS:
            memo.clear()
        found = memo[flt] = compute_cheapest(it, flt)
    return found


def cheapest_under(it: InstanceType, flt: OfferingFilter) -> Cheapest:
    """Capacity type (None: any) -> ``it``'s cheapest available offering ``flt`` allows, at list prices; computed
    once per (type object, filter) process-wide."""
    return cheapest_in(type_filters(it), it, flt)


class _Labelled(Protocol):
    @property
    def labels(self) -> Mapping[str, str]: ...


T = TypeVar("T", bound=_Labelled)


@dataclass(slots=True, eq=False)
class Ranking(Generic[T]):
    """One list of instance types ordered under one offering filter, at list prices.

    Attributes:
        order: positions (into the view's list) of the types with an allowed offering, by (price of the cheapest
            one, name); the sort is stable, so ties keep the list's order.
        by_capacity_type: capacity type -> (price, name, position) of the types offering it, by (that capacity
            type's cheapest allowed price, name), ties in ``order``'s order; the priority capacity types first
            (present even when empty), then the others by name.
    """

    order: list[int]
    by_capacity_type: dict[str, list[tuple[float, str, int]]]

    def restrict(self, by_position: Sequence[T | None], reqs: Requirements | None = None,
                 ) -> tuple[list[T], dict[str, list[T]], list[tuple[T, float]]]:
        """A pool's rankings as a filter over this one: ``by_position`` is the pool's type at each position of
        the view's list (None: the pool cannot use it); ``reqs`` (None: the pool's own requirements, which every
        pool type meets) drops the types whose labels they rule out. Returns (the types by price, each capacity
        type's types by that capacity type's price, (type, price) of the launch's capacity type: the first of
        reserved/spot/on-demand some type offers, empty when none). The same lists as sorting the pool's types
        by the same keys: a stable sort of the whole list, restricted, is the stable sort of the restriction."""
        mine: Sequence[T | None] = by_position
        if reqs is not None:
            allowed: list[T | None] = [None] * len(by_position)
            for i in self.order:
                t = by_position[i]
                if t is not None and labels_allow(t.labels, reqs):
                    allowed[i] = t
            mine = allowed
        found = [t for i in self.order if (t := mine[i]) is not None]
        ranked: dict[str, list[T]] = {}
        launch: list[tuple[T, float]] | None = None
        for ct, entries in self.by_capacity_type.items():
            kept = [(t, price) for price, _, i in entries if (t := mine[i]) is not None]
            ranked[ct] = [e[0] for e in kept]
            if launch is None and kept and ct in CAPACITY_TYPE_PRIORITY:
                launch = kept
        return found, ranked, launch or []


def build_ranking(names: Sequence[str], cheapest: Sequence[Cheapest]) -> Ranking[Any]:
    """The :class:`Ranking` of a list of types given, per position, its name and :func:`cheapest_under` (one
    pass and a sort per capacity type)."""
    rows = [(c[None].price, names[i], i, c) for i, c in enumerate(cheapest) if c]
    rows.sort(key=_FIRST_TWO)
    present = set().union(*(r[3].keys() for r in rows))
    others = sorted(c for c in present if c is not None and c not in CAPACITY_TYPE_PRIORITY)
    by_ct: dict[str, list[tuple[float, str, int]]] = {}
    for ct in (*CAPACITY_TYPE_PRIORITY, *others):
        entries = [(c[ct].price, name, i) for _, name, i, c in rows if ct in c] if ct in present else []
        entries.sort(key=_FIRST_TWO)  # stable: ties keep the overall order
        by_ct[ct] = entries
    return Ranking([r[2] for r in rows], by_ct)


class CatalogView:
    """The indexes of one list of instance types (see the module docstring). Read-only once built; each
    ranking and requirement-set answer is computed on first use."""

    __slots__ = ("types", "_cheapest", "_rankings", "_kept")

    def __init__(self, types: Sequence[InstanceType]) -> None:
        self.types: list[InstanceType] = list(types)
        self._cheapest: dict[OfferingFilter, list[Cheapest]] = {}
        self._rankings: dict[OfferingFilter, Ranking[Any]] = {}
        self._kept: dict[tuple[object, ...], list[int]] = {}

    def cheapest(self, flt: OfferingFilter) -> list[Cheapest]:
        """Per position, :func:`cheapest_under` of ``flt`` (empty: no allowed available offering)."""
        found = self._cheapest.get(flt)
        if found is None:
            # Read from the types' memos where a pool filled them already (DaemonSet pools check every type), but
            # not filled here (filling 1,345 memos costs as much again): a pool looks up only a few types itself.
            memos = _TYPES
            found = []
            for it in self.types:
                entry = memos.get(id(it))
                known = entry[1].get(flt) if entry is not None and entry[0] is it else None
                found.append(compute_cheapest(it, flt) if known is None else known)
            if len(self._cheapest) >= MAX_FILTERS:
                self._cheapest.clear()
            self._cheapest[flt] = found
        return found

    def has_ranking(self, flt: OfferingFilter) -> bool:
        """Whether :meth:`ranking` of ``flt`` is computed already (free to read)."""
        return flt in self._rankings

    def ranking(self, flt: OfferingFilter) -> Ranking[Any]:
        """Every type of the list ordered under ``flt`` (one pass and a sort per capacity type, once)."""
        found = self._rankings.get(flt)
        if found is not None:
            return found
        found = build_ranking([it.name for it in self.types], self.cheapest(flt))
        if len(self._rankings) >= MAX_FILTERS:
            self._rankings.clear()
        self._rankings[flt] = found
        return found

    def kept(self, reqs: Requirements) -> list[int]:
        """Positions (ascending) of the types whose labels ``reqs`` allow (:func:`labels_allow`) and that have an
        available offering ``reqs`` allows: a pool's usable types when no DaemonSet overhead can rule one out."""
        ident = reqs.identity()
        found = self._kept.get(ident)
        if found is None:
            flt = offering_filter(reqs)
            types = self.types
            labelled = [i for i, it in enumerate(types) if labels_allow(it.labels, reqs)]
            if flt in self._cheapest or 4 * len(labelled) >= len(types):
                # A wide pool: its ranking will read every type's cheapest offerings (computed once, here).
                known = self.cheapest(flt)
                found = [i for i in labelled if known[i]]
            else:  # a pool of a few families reads the offerings of those types only
                found = [i for i in labelled if has_offering(types[i], flt)]
            if len(self._kept) >= MAX_FILTERS:
                self._kept.clear()
            self._kept[ident] = found
        return found


#: (length, id of the first type, id of the last) -> the views of lists with those ends, oldest first.
_VIEWS: dict[tuple[int, int, int], list[CatalogView]] = {}
_VIEW_COUNT = [0]
_VIEWS_LOCK = threading.Lock()


def catalog_view(types: Sequence[InstanceType]) -> CatalogView | None:
    """The :class:`CatalogView` of ``types`` (made on first sight; the same view for a list of the same types in
    the same order, or equal ones); None for an empty list."""
    if not types:
        return None
    key = (len(types), id(types[0]), id(types[-1]))
    listed = types if isinstance(types, list) else list(types)
    with _VIEWS_LOCK:  # controllers may schedule from several threads
        for view in _VIEWS.get(key, ()):
            if view.types == listed:  # identity first: ~3 us for 1,345 types
                return view
        if _VIEW_COUNT[0] >= MAX_VIEWS:
            _VIEW_COUNT[0] -= len(_VIEWS.pop(next(iter(_VIEWS))))
        view = CatalogView(listed)
        _VIEWS.setdefault(key, []).append(view)
        _VIEW_COUNT[0] += 1
        return view


def clear() -> None:
    """Forget every memo and view (the benchmark's "nothing indexed yet" first batch; tests)."""
    _TYPES.clear()
    with _VIEWS_LOCK:
        _VIEWS.clear()
        _VIEW_COUNT[0] = 0
