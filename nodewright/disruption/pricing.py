"""What a consolidation move saves: the one price function of a disruption pass, and its minimum-saving gate.

**Without a PricingPolicy** (Karpenter's rule) a node costs its list price (``Node.price``: its NodePool's
cheapest offering of its type in its zone and capacity type, :class:`~nodewright.cloud.instancetype.PriceIndex`)
and a move saves the candidates' list prices minus the replacement offering's.

**With a PricingPolicy** (``nodewright run --pricing-policy``, ``simulate --scenario --pricing``) every price is
effective and marginal (:mod:`nodewright.pricing.engine`), over the fleet of the pass (every managed and
unmanaged node of the view, by its instance-type, zone and capacity-type labels):

* what the candidates cost = bill(fleet) - bill(fleet without them): a node an idle Reserved Instance or unused
  Savings Plan commitment covers costs 0 (removing it saves nothing), one whose removal moves the commitment to
  another node costs that node's uncovered price;
* a replacement offering costs its marginal price over the fleet *after* the candidates are gone: a type the
  freed RI or commitment covers is free;
* the move saves bill(fleet) - bill(fleet - candidates + replacement) (:meth:`PricingEngine.move_saving`).

Prices come from the offerings of the pass's NodePools (:func:`nodewright.pricing.offering_price_table`), the
same list the provisioner ranks by.

**Minimum saving** (nodewright's NodePool annotations ``nodewright.io/consolidation-minimum-saving`` (USD/hour)
and ``...-minimum-saving-percent`` (of what the removed nodes cost), :mod:`nodewright.api.annotations`): a
delete or replace, single- or multi-node, is taken only when its saving clears the threshold; a move whose
candidates span NodePools must clear the strictest of each limit among them (:func:`move_threshold`), so no
pool's nodes are disrupted for less than that pool asks. With neither a policy nor a threshold no move is gated
here (Karpenter's behaviour: the replacement filter already demands a strictly cheaper node).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.disruption.model import ClusterView, Node, Pool
from nodewright.pricing.engine import (
    FleetPrices,
    MarginalPricing,
    MinimumSaving,
    MoveSaving,
    PricingEngine,
    Usage,
    offering_price_table,
)
from nodewright.pricing.policy import PricingPolicy
from nodewright.scheduling import NodeClaimPlan
from nodewright.scheduling.nodeclaimtemplate import PricingFactory


def move_threshold(pools: Iterable[Pool]) -> MinimumSaving:
    """The minimum saving a move over nodes of ``pools`` must clear: the largest USD/hour and the largest percent
    any of them sets (each None when none sets it)."""
    limits = [p.minimum_saving for p in pools]
    usd = [m.usd_per_hour for m in limits if m.usd_per_hour is not None]
    pct = [m.percent for m in limits if m.percent is not None]
    return MinimumSaving(max(usd) if usd else None, max(pct) if pct else None)


@dataclass(frozen=True, slots=True)
class Skip:
    """A consolidation move found feasible but not taken because of its saving (the disruption controller turns
    it into an Event on each NodePool in ``pools`` and a log line).

    Attributes:
        method: :data:`~nodewright.disruption.model.MULTI_NODE` or ``SINGLE_NODE``.
        pools: NodePools of the candidates, sorted.
        candidates: node names.
        replacement: the replacement's cheapest type, or None for a delete.
        saving: what it would save (USD/hour, at the prices in force).
        reason: why it is below the threshold (:meth:`MinimumSaving.shortfall`).
    """

    method: str
    pools: tuple[str, ...]
    candidates: tuple[str, ...]
    replacement: str | None
    saving: MoveSaving
    reason: str

    def message(self) -> str:
        """E.g. ``"Not consolidating 2 nodes (n1, n2) into 1 m6a.xlarge: it would save $0.0128/h, below the
        minimum $0.0200/h"``."""
        n = len(self.candidates)
        what = f"{n} node{'s' if n != 1 else ''} ({', '.join(self.candidates)})"
        into = f"into 1 {self.replacement}" if self.replacement else "by deleting " + ("them" if n != 1 else "it")
        return f"Not consolidating {what} {into}: {self.reason}"


class MovePricing:
    """The prices one consolidation pass decides by (see module docstring).

    Args:
        view: the pass's cluster view (its nodes are the fleet; its pools' offerings the price list).
        policy: the PricingPolicy in force, or None (list prices).
    """

    def __init__(self, view: ClusterView, policy: PricingPolicy | None) -> None:
        self.view = view
        self.policy = policy
        self.engine: PricingEngine | None = None
        self.fleet: list[Usage] = []
        self._removed: dict[tuple[str, ...], float] = {}
        self._after: dict[tuple[str, ...], FleetPrices] = {}
        if policy is None:
            return
        table = offering_price_table(it for pool in view.pools.values() for it in pool.instance_types)
        if table is None:
            return
        self.engine = PricingEngine(policy, table)
        labels = [n.labels for n in view.nodes] + [n.labels for n in view.unmanaged]
        self.fleet = [u for u in (Usage.from_labels(lb) for lb in labels) if u is not None]

    @property
    def effective(self) -> bool:
        """True when prices are effective marginal prices under a policy."""
        return self.engine is not None

    def gated(self, threshold: MinimumSaving) -> bool:
        """Whether moves are gated by their saving (a policy is in force, or ``threshold`` sets a limit)."""
        return self.effective or threshold.usd_per_hour is not None or threshold.percent is not None

    @staticmethod
    def _key(candidates: Sequence[Node]) -> tuple[str, ...]:
        return tuple(sorted(c.name for c in candidates))

    def _usages(self, candidates: Sequence[Node]) -> list[Usage]:
        return [u for u in (Usage.from_labels(c.labels) for c in candidates) if u is not None]

    def removed_cost(self, candidates: Sequence[Node]) -> float:
        """USD/hour the candidates cost: removing them (and launching nothing) saves this much."""
        if self.engine is None:
            return sum(c.price for c in candidates)
        key = self._key(candidates)
        hit = self._removed.get(key)
        if hit is None:
            hit = self._removed[key] = self.engine.saving(self.fleet, self._usages(candidates))
        return hit

    def replacement_price(self, candidates: Sequence[Node], it: InstanceType, offering: Offering) -> float:
        """USD/hour one ``it`` on ``offering`` costs once the candidates are gone."""
        if self.engine is None:
            return offering.price
        key = self._key(candidates)
        prices = self._after.get(key)
        if prices is None:
            prices = self._after[key] = self.engine.for_fleet(self._rest(candidates))
            if len(self._after) > 64:  # a pass probes many sets; keep the recent ones
                self._after.pop(next(iter(self._after)))
        marginal = prices.marginal_price(Usage(it.name, offering.zone, offering.capacity_type))
        return offering.price if marginal is None else marginal

    def _rest(self, candidates: Sequence[Node]) -> list[Usage]:
        """The fleet without ``candidates``."""
        rest = list(self.fleet)
        for usage in self._usages(candidates):
            rest.remove(usage)
        return rest

    def scheduler_pricing(self, candidates: Sequence[Node]) -> PricingFactory | None:
        """The scheduler's prices for simulating the move of ``candidates`` (None: list prices): marginal prices
        over the fleet without them, so the simulation's new NodeClaim is the type and capacity type that is
        cheapest once they are gone (what provisioning would launch)."""
        if self.engine is None:
            return None
        return MarginalPricing(self.engine, self._rest(candidates)).fresh

    def move_saving(self, candidates: Sequence[Node], replacements: Sequence[NodeClaimPlan]) -> MoveSaving:
        """What removing ``candidates`` and launching ``replacements`` (their chosen offering) saves."""
        if self.engine is None:
            removed = sum(c.price for c in candidates)
            return MoveSaving(removed - sum(p.price for p in replacements), removed)
        added = [Usage(p.instance_type.name, p.offering.zone, p.offering.capacity_type) for p in replacements]
        return self.engine.move_saving(self.fleet, self._usages(candidates), added)

    def floor(self, list_floor: float) -> float:
        """A lower bound of a replacement's price, from the list-price floor of the screen: 0 under a policy (a
        type an RI or commitment covers is free)."""
        return 0.0 if self.engine is not None else list_floor


#: (simulator-like pass key) -> MovePricing: the multi- and single-node searches of one pass share one.
_PRICINGS: weakref.WeakKeyDictionary[object, MovePricing] = weakref.WeakKeyDictionary()


def pass_pricing(key: object, view: ClusterView, policy: PricingPolicy | None) -> MovePricing:
    """The :class:`MovePricing` of the pass ``key`` (its Simulator) over ``view`` under ``policy``, built once."""
    hit = _PRICINGS.get(key)
    if hit is None or hit.view is not view or hit.policy is not policy:
        hit = _PRICINGS[key] = MovePricing(view, policy)
    return hit
