"""Effective prices: what one more hour of an instance really costs, given Reserved Instances, Savings Plans and
negotiated discounts already working for the running fleet.

Everything is per hour, in USD, for one region (the cluster's, ``PriceTable.region``). Pure functions over plain
data: no I/O, no clock; the same fleet and policy always give the same numbers.

**Assignment order of one hour of usage** (AWS billing rules; quotes are paraphrased from the sources):

1. *Only on-demand usage* (capacity types ``on-demand`` and ``reserved`` -- an On-Demand Capacity Reservation is
   billed as on-demand) can use Reserved Instances and Savings Plans. Spot usage pays the spot price.
2. *Reserved Instances first*: "Savings Plans apply to your usage after the EC2 Reserved Instances are applied"
   (AWS Savings Plans User Guide, "Understanding how Savings Plans apply to your AWS usage",
   https://docs.aws.amazon.com/savingsplans/latest/userguide/sp-applying.html).

   * zonal RIs (``zone`` set) before regional ones, each in document order: a zonal RI covers up to ``count``
     running instances of exactly its type in its zone (EC2 User Guide, "How Reserved Instance discounts are
     applied", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/apply_ri.html);
   * a regional RI covers its type in any zone of its region and is *size-flexible*: its ``count`` x
     normalization factor of its size covers instances of the same family, the smallest sizes first, a larger
     instance partly ("Size flexible Reserved Instances apply to the smallest instance sizes first", AWS CUR User
     Guide, "Monitoring your size flexible reservations"; normalization factors: nano 0.25, micro 0.5, small 1,
     medium 2, large 4, xlarge 8, Nxlarge 8N, from the same EC2 page). Sizes without a factor (``metal``) match
     their exact type only. nodewright launches Linux, default tenancy: the case size flexibility covers.
3. *Then Savings Plans*: "EC2 Instance Savings Plans are applied before Compute Savings Plans because Compute
   Savings Plans have broader applicability"; within one kind, all plans together, "applied to your highest
   savings percentage first. If there are multiple usages with equal savings percentages, Savings Plans are
   applied to the first usage with the lowest Savings Plans rate", until the usage or the commitment runs out;
   "any remaining usage is charged at the On-Demand rates" (sp-applying, above). The commitment is measured in
   Savings Plans rates: covering one instance-hour uses ``list x (1 - discount)`` of it. Remaining ties are
   broken by instance type, then zone (AWS does not document them). Identical instances (same type, zone and
   capacity type) share their coverage equally: a bill line is per offering, not per node.
4. *Then negotiated discounts* (``spec.discounts``) on the list price of whatever usage is still uncovered, spot
   included: the most specific matching rule (:meth:`PricingPolicy.discount_for`).

**The bill** of a fleet (:class:`Bill`) = what uncovered usage costs + every Savings Plan commitment (paid
whether used or not) + the amortised cost of the RIs (``usdPerHour`` x count, optional).

**The marginal price** of an offering = bill(fleet + that instance) - bill(fleet). The commitments are sunk, so
an instance that fits under an unused commitment or an idle RI costs 0; past the commitment it costs the
on-demand price (after discounts), not the Savings Plans rate. It also counts a displacement: a new instance with
a deeper Savings Plans discount takes the commitment from an older one, which then pays on-demand. A Savings Plan
*rate* is what covered usage costs on average (:attr:`Line.effective_usd_per_hour`, what cost reports show); the
marginal price is what the next decision changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from nodewright.api import labels as wk
from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.cloud.labels import instance_family, region_of_zone
from nodewright.cloud.prices import PriceTable
from nodewright.pricing.policy import PricingPolicy, ReservedInstance, SavingsPlan

_EPS = 1e-12
_ON_DEMAND_LIKE = frozenset({wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_RESERVED})
_NORMALIZATION = {"nano": 0.25, "micro": 0.5, "small": 1.0, "medium": 2.0, "large": 4.0, "xlarge": 8.0}
_NXLARGE = re.compile(r"^(\d+)xlarge$")


def normalization_factor(instance_type: str) -> float | None:
    """Regional RI size units of ``instance_type`` (``m5.large`` -> 4, ``m5.4xlarge`` -> 32); None for ``metal``
    and other sizes without a published factor."""
    size = instance_type.split(".", 1)[-1]
    if size in _NORMALIZATION:
        return _NORMALIZATION[size]
    match = _NXLARGE.match(size)
    return 8.0 * int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class Usage:
    """One running (or candidate) instance for one hour.

    Attributes:
        instance_type: e.g. ``"m6i.large"``.
        zone: e.g. ``"us-east-1a"`` (``""`` when unknown: zonal RIs then do not match it).
        capacity_type: ``"on-demand"``, ``"spot"`` or ``"reserved"`` (Karpenter's ``karpenter.sh/capacity-type``).
    """

    instance_type: str
    zone: str
    capacity_type: str

    @property
    def family(self) -> str:
        return instance_family(self.instance_type)

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Usage | None:
        """From node labels (``node.kubernetes.io/instance-type``, zone, ``karpenter.sh/capacity-type``, default
        on-demand); None when the instance type label is missing (not an EC2 node nodewright can price)."""
        instance_type = labels.get(wk.INSTANCE_TYPE)
        if not instance_type:
            return None
        return cls(instance_type, labels.get(wk.ZONE, ""),
                   labels.get(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_ON_DEMAND))


@dataclass(frozen=True, slots=True)
class Line:
    """The identical instances of one offering in a :class:`Bill` (identical instances cost the same).

    Attributes:
        usage: the offering.
        count: how many instances of it run.
        list_usd_per_hour: list price of one (on-demand, or spot for spot usage).
        reserved_fraction: share of their hours covered by Reserved Instances, in [0, 1].
        savings_plan_fraction: share covered by Savings Plans, in [0, 1].
        effective_usd_per_hour: what one instance-hour costs with the coverage attributed to it (average over
            ``count``): the RIs' amortised cost share + the Savings Plans rate for the covered share + the
            discounted price of the rest.
    """

    usage: Usage
    count: int
    list_usd_per_hour: float
    reserved_fraction: float
    savings_plan_fraction: float
    effective_usd_per_hour: float


@dataclass(frozen=True, slots=True)
class Bill:
    """The hourly bill of a fleet (USD/hour, rounded to 1e-6).

    Attributes:
        lines: one per distinct priced offering, in order of first appearance in the fleet.
        unpriced: instances without a list price (not billed; the caller may warn).
        list_usd_per_hour: the fleet at list prices, no policy.
        usage_usd_per_hour: what usage not covered by RIs/Savings Plans costs after discounts (the variable part).
        savings_plan_commitment_usd_per_hour: the commitment of every plan that applies in this region (Compute
            plans, and EC2 Instance plans of this region), used or not (sunk).
        unused_commitment_usd_per_hour: the part of it no usage used this hour.
        reserved_usd_per_hour: this region's RIs' amortised cost (sunk; 0 unless the policy gives ``usdPerHour``).
        total_usd_per_hour: usage + commitment + reserved.
    """

    lines: tuple[Line, ...]
    unpriced: tuple[Usage, ...]
    list_usd_per_hour: float
    usage_usd_per_hour: float
    savings_plan_commitment_usd_per_hour: float
    unused_commitment_usd_per_hour: float
    reserved_usd_per_hour: float
    total_usd_per_hour: float


@dataclass(slots=True)
class _Item:
    """``count`` identical instances; coverage in instance-hours."""

    usage: Usage
    count: int
    list_price: float
    reserved: float = 0.0
    reserved_cost: float = 0.0
    saved: float = 0.0
    saved_cost: float = 0.0

    @property
    def open(self) -> float:
        return max(0.0, self.count - self.reserved - self.saved)

    def key(self) -> tuple[str, str, str]:
        return (self.usage.instance_type, self.usage.zone, self.usage.capacity_type)


def _count(fleet: Iterable[Usage]) -> dict[Usage, int]:
    counts: dict[Usage, int] = {}
    for usage in fleet:
        counts[usage] = counts.get(usage, 0) + 1
    return counts


@dataclass(frozen=True)
class PricingEngine:
    """Effective prices of one region's usage under ``policy``; ``prices`` gives list prices.

    Raises nothing on unknown types: their list price is unknown, so :meth:`marginal_price` returns None (no
    offering, as in Karpenter) and :meth:`bill` lists them under ``unpriced``.
    """

    policy: PricingPolicy
    prices: PriceTable
    _reserved_cost: float = field(init=False, default=0.0)
    _price_cache: dict[Usage, tuple[float | None, float | None]] = field(init=False, default_factory=dict)
    _committable_cache: dict[Usage, bool] = field(init=False, default_factory=dict)
    _discount_cache: dict[tuple[Usage, float], float] = field(init=False, default_factory=dict)
    _plans: tuple[SavingsPlan, ...] = field(init=False, default=())
    _reserved: tuple[ReservedInstance, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        # Plans and RIs of other regions neither cover this region's usage nor belong to its bill.
        plans = tuple(p for p in self.policy.spec.savings_plans if p.type == "Compute" or p.region == self.region)
        reserved = tuple(ri for ri in self.policy.spec.reserved_instances if ri.scope_region == self.region)
        object.__setattr__(self, "_plans", plans)
        object.__setattr__(self, "_reserved", reserved)
        object.__setattr__(self, "_reserved_cost", sum(ri.count * ri.usd_per_hour for ri in reserved))

    @property
    def region(self) -> str:
        return self.prices.region

    def list_price(self, usage: Usage) -> float | None:
        """List USD/hour: spot price for spot usage, else on-demand (:class:`PriceTable`); None when unknown."""
        if usage.capacity_type == wk.CAPACITY_TYPE_SPOT:
            return self.prices.spot_price(usage.instance_type, usage.zone)
        return self.prices.on_demand_price(usage.instance_type)

    def discounted_price(self, usage: Usage, list_price: float | None = None) -> float | None:
        """List price (``list_price`` when given, else :meth:`list_price`) after the matching negotiated discount
        (step 4): what uncovered usage pays per hour."""
        price = self.list_price(usage) if list_price is None else list_price
        if price is None:
            return None
        key = (usage, price)  # the policy is fixed: cached (a scheduling run or consolidation pass asks per offering)
        cached = self._discount_cache.get(key)
        if cached is None:
            capacity = (wk.CAPACITY_TYPE_SPOT if usage.capacity_type == wk.CAPACITY_TYPE_SPOT
                        else wk.CAPACITY_TYPE_ON_DEMAND)
            rule = self.policy.discount_for(usage.instance_type, self.region, capacity)
            cached = self._discount_cache[key] = rule.apply(price) if rule else price
        return cached

    def committable(self, usage: Usage) -> bool:
        """True when some RI or Savings Plan of the region could cover ``usage`` (on-demand only); otherwise its
        marginal price is simply :meth:`discounted_price`, whatever the fleet. Cached per usage."""
        cached = self._committable_cache.get(usage)
        if cached is None:
            cached = self._committable_cache[usage] = self._could_commit(usage)
        return cached

    def _could_commit(self, usage: Usage) -> bool:
        if usage.capacity_type not in _ON_DEMAND_LIKE:
            return False
        if any(plan.covers(usage.family, self.region) for plan in self._plans):
            return True
        for ri in self._reserved:
            if ri.instance_type == usage.instance_type and ri.zone in (None, usage.zone):
                return True
            if (ri.zone is None and ri.family == usage.family and normalization_factor(ri.instance_type)
                    and normalization_factor(usage.instance_type)):
                return True
        return False

    def bill(self, fleet: Iterable[Usage]) -> Bill:
        """The hourly bill of ``fleet`` under the policy (see the module docstring for the order)."""
        return self._bill(_count(fleet))

    def _allocate(self, counts: Mapping[Usage, int]) -> tuple[list[_Item], list[Usage], float]:
        """Steps 2-3: the priced items with their RI and Savings Plans coverage, the unpriced usage, and the
        unused commitment."""
        items: list[_Item] = []
        unpriced: list[Usage] = []
        for usage, count in counts.items():
            price = self._prices(usage)[0]
            if price is None:
                unpriced.extend([usage] * count)
            elif count > 0:
                items.append(_Item(usage, count, price))
        on_demand = sorted((i for i in items if i.usage.capacity_type in _ON_DEMAND_LIKE), key=_Item.key)
        self._apply_reserved(on_demand)
        unused = self._apply_savings_plans(on_demand)
        return items, unpriced, unused

    def _variable_cost(self, counts: Mapping[Usage, int]) -> float:
        """Unrounded USD/hour of the usage no commitment covers (step 4)."""
        items, _, _ = self._allocate(counts)
        return sum(i.open * (self._prices(i.usage)[1] or 0.0) for i in items)

    def _prices(self, usage: Usage) -> tuple[float | None, float | None]:
        """(list, discounted) price of ``usage``, cached: a bill asks for them once per offering."""
        cached = self._price_cache.get(usage)
        if cached is None:
            cached = self._price_cache[usage] = (self.list_price(usage), self.discounted_price(usage))
        return cached

    def _bill(self, counts: Mapping[Usage, int]) -> Bill:
        items, unpriced, unused = self._allocate(counts)
        lines: list[Line] = []
        usage_cost = 0.0
        for item in items:
            rest = item.open * (self._prices(item.usage)[1] or 0.0)
            usage_cost += rest
            lines.append(Line(item.usage, item.count, item.list_price, round(item.reserved / item.count, 6),
                              round(item.saved / item.count, 6),
                              round((item.reserved_cost + item.saved_cost + rest) / item.count, 6)))
        commitment = sum(p.commitment_usd_per_hour for p in self._plans)
        return Bill(
            lines=tuple(lines),
            unpriced=tuple(unpriced),
            list_usd_per_hour=round(sum(i.list_price * i.count for i in items), 6),
            usage_usd_per_hour=round(usage_cost, 6),
            savings_plan_commitment_usd_per_hour=round(commitment, 6),
            unused_commitment_usd_per_hour=round(unused, 6),
            reserved_usd_per_hour=round(self._reserved_cost, 6),
            total_usd_per_hour=round(usage_cost + commitment + self._reserved_cost, 6),
        )

    def marginal_price(self, fleet: Sequence[Usage], usage: Usage) -> float | None:
        """USD/hour that adding one ``usage`` to ``fleet`` adds to the bill (>= 0); None without a list price."""
        return self.for_fleet(fleet).marginal_price(usage)

    def marginal_prices(self, fleet: Sequence[Usage], additions: Sequence[Usage]) -> list[float | None]:
        """Marginal price of each of ``additions`` added in order (each on top of the fleet and those before it);
        they sum to bill(fleet + additions) - bill(fleet) (None entries add nothing)."""
        current = list(fleet)
        out: list[float | None] = []
        for usage in additions:
            out.append(self.marginal_price(current, usage))
            current.append(usage)
        return out

    def saving(self, fleet: Sequence[Usage], removed: Sequence[Usage],
               added: Sequence[Usage] = ()) -> float:
        """USD/hour saved by removing ``removed`` from ``fleet`` and launching ``added`` (consolidation's
        delete or replace). Negative when the move costs more.

        Raises:
            ValueError: when an instance of ``removed`` is not in ``fleet``.
        """
        counts = _count(fleet)
        after = dict(counts)
        for usage in removed:
            if after.get(usage, 0) == 0:
                raise ValueError(f"{usage} is not in the fleet")
            after[usage] -= 1
        for usage in added:
            after[usage] = after.get(usage, 0) + 1
        return round(self._bill(counts).total_usd_per_hour - self._bill(after).total_usd_per_hour, 6)

    def move_saving(self, fleet: Sequence[Usage], removed: Sequence[Usage],
                    added: Sequence[Usage] = ()) -> MoveSaving:
        """:meth:`saving` of a consolidation move, with what the removed nodes cost (their own removal saving)
        so a percentage threshold has its base (:class:`MinimumSaving`).

        Raises:
            ValueError: when an instance of ``removed`` is not in ``fleet``.
        """
        return MoveSaving(self.saving(fleet, removed, added), self.saving(fleet, removed))

    def for_fleet(self, fleet: Sequence[Usage]) -> FleetPrices:
        """Marginal prices against a fixed ``fleet``, cached per offering: what a scheduling pass calls."""
        return FleetPrices(self, _count(fleet))

    # --- steps 2 and 3 ------------------------------------------------------------------------------------------

    def _apply_reserved(self, items: list[_Item]) -> None:
        for ri in sorted(self._reserved, key=lambda r: r.zone is None):  # zonal first; stable: document order within
            if ri.zone is not None or normalization_factor(ri.instance_type) is None:
                self._apply_exact_ri(ri, items)
            else:
                self._apply_flexible_ri(ri, items)

    @staticmethod
    def _apply_exact_ri(ri: ReservedInstance, items: list[_Item]) -> None:
        left = float(ri.count)
        for item in items:
            u = item.usage
            if left <= _EPS:
                return
            if u.instance_type == ri.instance_type and (ri.zone is None or u.zone == ri.zone):
                share = min(item.open, left)
                item.reserved += share
                item.reserved_cost += share * ri.usd_per_hour
                left -= share

    @staticmethod
    def _apply_flexible_ri(ri: ReservedInstance, items: list[_Item]) -> None:
        unit = normalization_factor(ri.instance_type) or 0.0
        units = ri.count * unit
        eligible = [(nf, i) for i in items if i.usage.family == ri.family
                    and (nf := normalization_factor(i.usage.instance_type)) is not None]
        for nf, item in sorted(eligible, key=lambda p: (p[0], p[1].key())):  # smallest sizes first
            if units <= _EPS:
                return
            share = min(item.open, units / nf)
            if share <= _EPS:
                continue
            item.reserved += share
            item.reserved_cost += share * nf / unit * ri.usd_per_hour
            units -= share * nf

    def _apply_savings_plans(self, items: list[_Item]) -> float:
        plans = self._plans
        left = [p.commitment_usd_per_hour for p in plans]
        for kind in ("EC2Instance", "Compute"):
            pairs: list[tuple[float, float, tuple[str, str, str], int, _Item]] = []
            for p, plan in enumerate(plans):
                if plan.type != kind:
                    continue
                for item in items:
                    if item.open > _EPS and plan.covers(item.usage.family, self.region):
                        d = plan.discount(item.usage.family, self.region)
                        pairs.append((-d, item.list_price * (1 - d), item.key(), p, item))
            for _neg_d, rate, _key, p, item in sorted(pairs, key=lambda t: t[:4]):
                if left[p] <= _EPS or item.open <= _EPS or rate <= 0:
                    continue
                share = min(item.open, left[p] / rate)
                item.saved += share
                item.saved_cost += share * rate
                left[p] -= share * rate
        return sum(max(0.0, x) for x in left)


@dataclass(frozen=True, slots=True)
class MoveSaving:
    """USD/hour a consolidation move saves, and what the nodes it removes cost (both effective, marginal).

    ``percent`` = 100 x saving / removed cost (0 when the removed nodes cost nothing: RI- or plan-covered).
    """

    usd_per_hour: float
    removed_usd_per_hour: float

    @property
    def percent(self) -> float:
        if self.removed_usd_per_hour <= 0:
            return 0.0
        return round(100 * self.usd_per_hour / self.removed_usd_per_hour, 4)


@dataclass(frozen=True, slots=True)
class MinimumSaving:
    """A NodePool's minimum consolidation saving: ``usd_per_hour`` and/or ``percent`` (of what the removed nodes
    cost); a move must clear every limit that is set. Both None: any positive saving will do (Karpenter's rule).
    """

    usd_per_hour: float | None = None
    percent: float | None = None

    def shortfall(self, saving: MoveSaving) -> str | None:
        """None when ``saving`` clears the threshold; else why not, one sentence for the skip event."""
        if saving.usd_per_hour <= 0:
            return (f"it would save nothing: ${saving.usd_per_hour:.4f}/h at effective prices "
                    f"(the nodes it removes cost ${saving.removed_usd_per_hour:.4f}/h)")
        if self.usd_per_hour is not None and saving.usd_per_hour < self.usd_per_hour:
            return (f"it would save ${saving.usd_per_hour:.4f}/h, below the minimum "
                    f"${self.usd_per_hour:.4f}/h")
        if self.percent is not None and saving.percent < self.percent:
            return (f"it would save {saving.percent:g}% of the ${saving.removed_usd_per_hour:.4f}/h the nodes it "
                    f"removes cost, below the minimum {self.percent:g}%")
        return None


class FleetPrices:
    """Marginal prices against one fleet, with its bill computed once and each offering's price cached: the object
    a scheduling pass or a consolidation screen asks about each candidate offering.

    Only the part of the fleet RIs and Savings Plans could cover is re-allocated per candidate (the rest pays its
    discounted price whatever is added), and a candidate no commitment could cover costs its discounted price.
    """

    def __init__(self, engine: PricingEngine, counts: dict[Usage, int]) -> None:
        self.engine = engine
        self.bill = engine._bill(counts)
        self._committable = {u: n for u, n in counts.items() if engine.committable(u)}
        self._base = engine._variable_cost(self._committable)
        self._cache: dict[Usage, float | None] = {}

    def marginal_price(self, usage: Usage) -> float | None:
        """bill(fleet + usage) - bill(fleet), USD/hour, >= 0; None when ``usage`` has no list price."""
        if usage not in self._cache:
            self._cache[usage] = self._marginal(usage)
        return self._cache[usage]

    def _marginal(self, usage: Usage) -> float | None:
        listed, discounted = self.engine._prices(usage)
        if listed is None or discounted is None:
            return None
        if not self.engine.committable(usage):
            return round(discounted, 6)
        after = dict(self._committable)
        after[usage] = after.get(usage, 0) + 1
        return max(0.0, round(self.engine._variable_cost(after) - self._base, 6))


def offering_price_table(instance_types: Iterable[InstanceType]) -> PriceTable | None:
    """The list prices a scheduling run sees as the engine's :class:`PriceTable`, for the region of their zones:
    each type's cheapest on-demand ``Offering.price``, and its cheapest spot ``Offering.price`` per zone (so a
    running spot node is billed at the price its NodePool's offerings show, as consolidation's list-price rule
    does). None when no offering names a region. So the engine and the scheduler price the same list, whatever
    the cloud provider read it from."""
    on_demand: dict[str, float] = {}
    spot: dict[str, dict[str, float]] = {}
    region = None
    for it in instance_types:
        for o in it.offerings:
            region = region or region_of_zone(o.zone)
            if o.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND:
                known = on_demand.get(it.name)
                on_demand[it.name] = o.price if known is None else min(known, o.price)
            elif o.capacity_type == wk.CAPACITY_TYPE_SPOT:
                zones = spot.setdefault(it.name, {})
                zones[o.zone] = min(zones.get(o.zone, o.price), o.price)
    if region is None:
        return None
    return PriceTable(region, on_demand, "the offerings' on-demand prices", fallback=False, spot=spot,
                      spot_source="the offerings' spot prices")


def marginal_pricing(policy: PricingPolicy, instance_types: Iterable[InstanceType],
                     fleet_labels: Iterable[Mapping[str, str]]) -> MarginalPricing | None:
    """The :class:`MarginalPricing` of a decision under ``policy``: list prices from ``instance_types``' offerings
    (:func:`offering_price_table`), the fleet from the labels of the running Nodes and launched NodeClaims
    (:meth:`Usage.from_labels`; those without an instance type are skipped). None when no offering names a
    region."""
    table = offering_price_table(instance_types)
    if table is None:
        return None
    fleet = [u for u in (Usage.from_labels(labels) for labels in fleet_labels) if u is not None]
    return MarginalPricing(PricingEngine(policy, table), fleet)


class MarginalPricing:
    """The scheduler's :class:`~nodewright.scheduling.nodeclaimtemplate.Pricing` under a policy: each offering at
    its marginal price over ``fleet`` (the running Nodes and NodeClaims) plus the NodeClaims this scheduling run
    planned so far, so RIs and Savings Plans commitment go to the first NodeClaims that can use them.

    Usage no RI or Savings Plan could cover pays the offering's own list price (``Offering.price``, the
    scheduler's, spot included) after discounts; covered usage is priced by :class:`FleetPrices` from the
    engine's price table, falling back to the offering's price when the table lacks the type.
    """

    def __init__(self, engine: PricingEngine, fleet: Sequence[Usage]) -> None:
        self.engine = engine
        self.fleet = tuple(fleet)
        self._counts = _count(fleet)
        self._prices = engine.for_fleet(fleet)
        self.version = 0

    def fresh(self) -> MarginalPricing:
        """A new one over the same starting ``fleet`` (each scheduling run plans its own NodeClaims)."""
        return MarginalPricing(self.engine, self.fleet)

    def price(self, instance_type: str, offering: Offering) -> float:
        """USD/hour one more ``instance_type`` on ``offering`` adds to the bill now (>= 0)."""
        usage = Usage(instance_type, offering.zone, offering.capacity_type)
        if not self.engine.committable(usage):
            return round(self.engine.discounted_price(usage, offering.price) or 0.0, 6)
        marginal = self._prices.marginal_price(usage)
        return offering.price if marginal is None else marginal

    def launched(self, instance_type: str, offering: Offering) -> float:
        """Add one instance to the fleet (a planned NodeClaim); returns the price it had. Bumps ``version``
        when it changes what later offerings cost (only committable usage can)."""
        price = self.price(instance_type, offering)
        usage = Usage(instance_type, offering.zone, offering.capacity_type)
        self._counts[usage] = self._counts.get(usage, 0) + 1
        if self.engine.committable(usage):
            self._prices = FleetPrices(self.engine, dict(self._counts))
            self.version += 1
        return price


@dataclass(frozen=True, slots=True)
class Run:
    """One instance's billed interval: ``usage`` from ``start`` to ``stop`` (epoch seconds; None = still running)."""

    usage: Usage
    start: float
    stop: float | None = None


@dataclass(frozen=True, slots=True)
class PeriodCost:
    """Dollars paid over a window (USD, rounded to 1e-4).

    Attributes:
        hours: length of the window.
        list_usd: every instance at its list price for the time it ran.
        effective_usd: the bill under the policy, commitments included for the whole window.
    """

    hours: float
    list_usd: float
    effective_usd: float


def cost_over_time(engine: PricingEngine, runs: Sequence[Run], start: float, end: float) -> PeriodCost:
    """What ``runs`` cost between ``start`` and ``end`` (epoch seconds): the bill is constant between two
    launches/terminations, so it is :meth:`PricingEngine.bill` of the live set times the length of each such
    interval, summed; per-second billing, as EC2 Linux. Savings Plans and RI costs are paid for the whole
    window whether used or not. For scenario reports: list and effective dollars side by side.
    """
    bounds = {start, end}
    for run in runs:
        for t in (run.start, run.stop):
            if t is not None and start < t < end:
                bounds.add(t)
    edges = sorted(bounds)
    list_usd = effective_usd = 0.0
    for lo, hi in zip(edges, edges[1:], strict=False):
        live = [r.usage for r in runs if r.start <= lo and (r.stop is None or r.stop >= hi)]
        bill = engine.bill(live)
        hours = (hi - lo) / 3600.0
        list_usd += bill.list_usd_per_hour * hours
        effective_usd += bill.total_usd_per_hour * hours
    return PeriodCost(round((end - start) / 3600.0, 6), round(list_usd, 4), round(effective_usd, 4))
