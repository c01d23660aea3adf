"""The packer's Pareto fronts, kept with a NodePool's cached types (issue 19).

A type is on the front of a priced list when no other type has at least its budget in every dimension for at
most its price. The packer only ever considers front types; computing the front is a scan of the whole list,
so it is done once per (NodePool, requirement set) and extended only as far as a caller's prices reach.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import ge, mul
from typing import TYPE_CHECKING

from nodewright.scheduling.nodeclaimtemplate import TypeInfo, Vector

if TYPE_CHECKING:
    from nodewright.scheduling.nodeclaimtemplate import NodeClaimTemplate
    from nodewright.scheduling.requirements import Requirements

#: Under ties (issue 30) at most this many types give a fill in one move search. The bound of a type's score
#: (price over the most value it could hold) only prunes when prices are not a linear function of the resources;
#: with prices linear in cpu and memory (a catalog priced per vCPU and GiB) every type's bound ties with the best
#: fills' scores and each search filled the whole front (~300 types) at every beam state. Types are visited best
#: bound first, so the cap keeps the most promising. It applies only to such problems (:func:`linear_prices`): on
#: real catalogs and the tests' the search is the full scan's.
MAX_FILLED_TYPES = 48
#: A problem's prices count as linear when the weights give the median front type's price within this relative
#: error (the bundled catalog: 15-17%; priced per vCPU and GiB: 0.8%, allocatable being net of overhead).
LINEAR_FIT = 0.02


def linear_prices(types: Sequence[TypeInfo], prices: Sequence[float], weights: Sequence[float]) -> bool:
    """Whether the front is large (over :data:`MAX_FILLED_TYPES`) and priced linearly in its resources: the
    median type's price within :data:`LINEAR_FIT` of ``weights`` x budget."""
    if len(types) <= MAX_FILLED_TYPES:
        return False
    errors = sorted(abs(p - sum(map(mul, weights, t.budget))) / max(p, 1e-12) for t, p in zip(types, prices, strict=True))
    return errors[len(errors) // 2] <= LINEAR_FIT


class Front:
    """The Pareto front of one priced list, extended only as far as asked: a price prefix's front is the
    front's prefix at that price, so the re-pack (types cheaper than the NodeClaims it replaces) never pays for
    the whole list, and the free pods' packing extends it to the end once per (NodePool, requirements).

    ``ranked``: the :meth:`~.NodeClaimTemplate.priced` list it was made from (the cache checks it is the same
    object); ``types``/``prices``: that list's types and prices by name."""

    __slots__ = ("ranked", "types", "prices", "_ordered", "_next", "_kept", "_budgets")

    def __init__(self, ranked: list[tuple[TypeInfo, float]], ordered: bool = False) -> None:
        """``ordered``: ``ranked`` is by (price, name) (distinct names), so it is its own price order."""
        self.ranked = ranked
        self.types = [t for t, _ in ranked]
        self.prices = {t.name: price for t, price in ranked}
        prices = self.prices
        # A list-price ranking is by (price, name) already (NodeClaimTemplate._list_rankings): then no sort.
        self._ordered = (self.types if ordered and len(prices) == len(self.types)
                         else sorted(self.types, key=lambda t: (prices[t.name], t.name)))
        self._next = 0
        self._kept: list[TypeInfo] = []
        self._budgets: list[Vector] = []

    def below(self, limit: float | None) -> list[TypeInfo]:
        """The front of the types priced under ``limit`` (None: all of them), by (price, name)."""
        ordered, prices, kept, budgets = self._ordered, self.prices, self._kept, self._budgets
        i = self._next
        while i < len(ordered) and (limit is None or prices[ordered[i].name] < limit):
            tb = ordered[i].budget
            # Everything kept so far is at most its price: it is dominated when one of them holds its budget.
            if not any(all(map(ge, kb, tb)) for kb in budgets):
                kept.append(ordered[i])
                budgets.append(tb)
            i += 1
        self._next = i
        return kept if limit is None else [t for t in kept if prices[t.name] < limit]

    def by_price(self) -> list[TypeInfo]:
        """Every type by (price, name), front or not. For one pod the first that fits is the first front type
        that fits (an earlier type dominating it would fit too), without computing the front (issue 30: the
        dominance scan of ~1,300 types was most of a cold one-pod batch)."""
        return self._ordered


def pareto(types: Sequence[TypeInfo], prices: dict[str, float]) -> list[TypeInfo]:
    """Drop types another type dominates (at least the budget in every dimension, at most the price); the rest
    by (price, name) (:class:`Front`, all at once).

    A type's dominators fit whatever it fits, so the front of any subset closed that way (the types that fit
    some pod, a cheapest-first prefix) is this front filtered to the subset, order kept: :func:`~.packing.pack`
    takes a front computed once per (NodePool, requirements) instead of one per batch."""
    return Front([(t, prices[t.name]) for t in types]).below(None)


def pool_front(template: NodeClaimTemplate, reqs: Requirements) -> Front | None:
    """The :class:`Front` of ``template``'s :meth:`~.NodeClaimTemplate.priced` list under ``reqs``, kept with the
    pool's cached types for as long as that list is the same object; None while the pool has limits (the list
    then changes as NodeClaims reserve)."""
    if template.remaining is not None:
        return None
    ranked = template.priced(reqs)
    key = reqs.identity()
    found = template.shared.fronts.get(key)
    if found is None or found.ranked is not ranked:
        found = template.shared.fronts[key] = Front(ranked, ordered=template.pricing is None)
    return found


def pack_inputs(
    template: NodeClaimTemplate, reqs: Requirements, lone: bool = False
) -> tuple[list[TypeInfo], dict[str, float], list[TypeInfo] | None]:
    """What the packer takes for a group of ``template``'s pods under ``reqs``: its :meth:`~.NodeClaimTemplate.priced`
    types, their prices by name and their Pareto front (None while the pool has limits). ``lone``: the group is
    one pod, for which :func:`~.packing.pack` only looks for the first type that fits, so every type by price
    (:meth:`Front.by_price`) stands in for the front."""
    front = pool_front(template, reqs)
    if front is None:
        ranked = template.priced(reqs)
        return [t for t, _ in ranked], {t.name: price for t, price in ranked}, None
    return front.types, front.prices, front.by_price() if lone else front.below(None)
