"""NodeOverlays applied to instance types: the one place overlay prices and capacity enter the catalog.

A NodeOverlay (``karpenter.sh/v1alpha1``, :mod:`nodewright.api.nodeoverlay`) selects instance types of every
NodePool with ``spec.requirements`` and changes what the scheduler sees of them: ``price`` replaces and
``priceAdjustment`` changes the price of the selected *offerings*; ``capacity`` adds extended resources to the
selected *types*. Everything downstream (provisioning, the static pools, consolidation and the node prices of the
disruption view, ``simulate``, scenario replay, the cloud providers' launch order) reads the instance types
:func:`nodewright.controllers.common.nodepool_instance_types` returns, which passes them through
:meth:`OverlayStore.instance_types` here.

Rules (Karpenter main 2026-08-20, ``pkg/controllers/nodeoverlay/{controller,store}.go``,
``pkg/cloudprovider/types.go`` ``AdjustedPrice``, and the NodeOverlays concept page):

- Matching, per NodePool: the requirements not about offerings (instance type labels, region, custom keys) hold
  for the type's labels plus ``karpenter.sh/nodepool`` = the pool's name and the pool's ``spec.template.metadata
  .labels`` (not its requirements); a key with no value there satisfies only NotIn/DoesNotExist. The offering keys
  (``topology.kubernetes.io/zone``, ``karpenter.sh/capacity-type``, ``topology.k8s.aws/zone-id``,
  ``karpenter.k8s.aws/capacity-reservation-id``) select offerings; a type none of whose offerings match is not
  selected. An empty ``requirements`` list selects every type and offering.
- Order: higher ``weight`` first (unset = 0); equal weights by name, the name later in the alphabet first.
- Price: the first (highest-weight) overlay to select an offering sets its price: ``price`` is the new USD/hour,
  ``+x%``/``-x%`` scales the list price, ``+x``/``-x`` adds to it, never below 0 (:func:`adjusted_price`).
- Capacity: per resource, the highest weight wins; lower weights add the resources not set yet (merged). The
  result replaces a resource of the same name the type already reports (Karpenter ``lo.Assign``).
- Conflict: an overlay that selects an offering whose price an overlay *of the same weight* already set, or sets
  a capacity resource of a type that an overlay of the same weight already set (whatever the values, identical
  ones too), conflicts: it is applied nowhere (all or nothing, across every NodePool) and its status says
  ``ValidationSucceeded=False``, reason ``Conflict``. The overlay processed first (the later name) stays.
- An overlay that fails validation (:func:`nodewright.api.manifests.parse_nodeoverlay`) is applied nowhere
  (reason ``RuntimeValidation``, the field and why).

Deliberate difference: Karpenter compares a capacity overlay only against the *last* overlay of the same weight
recorded for the type; here against every one of that weight (three equal-weight overlays A, B, C where only A and
C set one resource: Karpenter applies both, dropping C's value silently; nodewright reports C as a conflict).

Units: prices USD/hour; capacity in the canonical integers of :mod:`nodewright.quantities` (``hugepages-2Mi``
bytes, device counts).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from nodewright.api import labels as L
from nodewright.api.nodeoverlay import NodeOverlay
from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.cloud.labels import region_of_zone
from nodewright.errors import NodewrightValidationError
from nodewright.quantities import parse_resource_list
from nodewright.scheduling.requirements import Requirement, Requirements

log = logging.getLogger("nodewright.overlay")

#: Requirement keys that select offerings rather than instance types.
OFFERING_KEYS = frozenset({L.ZONE, L.CAPACITY_TYPE, L.ZONE_ID, L.CAPACITY_RESERVATION_ID})

#: Condition types and reasons of a NodeOverlay's status (Karpenter ``v1alpha1.ConditionTypeValidationSucceeded``).
CONDITION_VALIDATION_SUCCEEDED = "ValidationSucceeded"
REASON_CONFLICT = "Conflict"
REASON_RUNTIME_VALIDATION = "RuntimeValidation"

#: (zone, capacity type, reservation id): one offering of a type.
OfferingKey = tuple[str, str, str]


def adjusted_price(price: float, change: str) -> float:
    """The price of an offering listed at ``price`` USD/hour under an overlay's ``change`` (Karpenter
    ``AdjustedPrice``): ``""`` keeps it; an unsigned decimal (``spec.price``, ``"0.42"``) replaces it; ``"+10%"`` /
    ``"-15%"`` scale it; ``"+0.5"`` / ``"-0.25"`` add to it; never below 0.

    Raises:
        ValueError: ``change`` is not a number of that shape (the API model validated it already).
    """
    if not change:
        return price
    if change[0] not in "+-":
        return float(change)
    if change.endswith("%"):
        result = price * (1 + float(change[:-1]) / 100)
    else:
        result = price + float(change)
    return max(result, 0.0)


def offering_key(offering: Offering) -> OfferingKey:
    """The identity of ``offering`` within its type: zone, capacity type, reservation."""
    return (offering.zone, offering.capacity_type, offering.reservation_id)


@dataclass(frozen=True)
class Overlay:
    """One NodeOverlay compiled for matching.

    Attributes:
        name: ``metadata.name``.
        weight: ``spec.weight`` (0 when unset).
        type_requirements: the requirements on type labels (everything but :data:`OFFERING_KEYS`).
        offering_requirements: the requirements on :data:`OFFERING_KEYS`.
        price_change: ``spec.price`` or ``spec.priceAdjustment`` (``""``: none), for :func:`adjusted_price`.
        capacity: ``spec.capacity`` in canonical integers.
    """

    name: str
    weight: int
    type_requirements: tuple[tuple[str, Requirement], ...]
    offering_requirements: tuple[tuple[str, Requirement], ...]
    price_change: str = ""
    capacity: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_model(cls, model: NodeOverlay) -> Overlay:
        """Compile a validated NodeOverlay.

        Raises:
            NodewrightValidationError: a requirement set no value can satisfy or a bad capacity quantity, naming
                ``spec.requirements`` / ``spec.capacity``.
        """
        spec = model.spec
        reqs = Requirements.from_expressions((r.as_expression() for r in spec.requirements), "spec.requirements")
        capacity = parse_resource_list(spec.capacity, "spec.capacity")
        items = sorted(reqs.items())
        return cls(name=model.name, weight=model.weight,
                   type_requirements=tuple((k, r) for k, r in items if k not in OFFERING_KEYS),
                   offering_requirements=tuple((k, r) for k, r in items if k in OFFERING_KEYS),
                   price_change=spec.price or spec.price_adjustment or "", capacity=capacity)

    def order_key(self) -> tuple[int, tuple[int, ...]]:
        """Sort key: higher weight first, then the name later in the alphabet first (Karpenter ``OrderByWeight``)."""
        return (-self.weight, tuple(-ord(c) for c in self.name) + (1,))

    def selects_type(self, labels: Mapping[str, str]) -> bool:
        """Whether the type-level requirements hold for ``labels`` (a key missing there satisfies only
        NotIn/DoesNotExist)."""
        return all(_holds(r, labels.get(k)) for k, r in self.type_requirements)

    def selects_offering(self, offering: Offering) -> bool:
        """Whether the offering requirements hold for ``offering``."""
        values = {L.ZONE: offering.zone, L.CAPACITY_TYPE: offering.capacity_type, L.ZONE_ID: offering.zone_id or None,
                  L.CAPACITY_RESERVATION_ID: offering.reservation_id or None}
        return all(_holds(r, values[k]) for k, r in self.offering_requirements)


def _holds(requirement: Requirement, value: str | None) -> bool:
    return requirement.allows_absence() if value is None else requirement.has(value)


@dataclass(frozen=True)
class PoolTypes:
    """One NodePool as overlays see it: its name, its template labels and the instance types it may launch."""

    name: str
    labels: Mapping[str, str]
    types: Sequence[InstanceType]


@dataclass
class TypeUpdate:
    """What overlays change on one instance type of one NodePool: offering prices and added capacity."""

    prices: dict[OfferingKey, str] = field(default_factory=dict)
    price_weights: dict[OfferingKey, dict[int, str]] = field(default_factory=dict)  # weight -> overlay
    capacity: dict[str, int] = field(default_factory=dict)
    capacity_weights: dict[tuple[int, str], str] = field(default_factory=dict)  # (weight, resource) -> overlay


@dataclass(frozen=True)
class Verdict:
    """A NodeOverlay's outcome: ``reason`` ``""`` (applied; it may select nothing), ``Conflict`` or
    ``RuntimeValidation``, with the message its ``ValidationSucceeded`` condition carries."""

    reason: str = ""
    message: str = ""

    @property
    def ok(self) -> bool:
        """True when the overlay validated and conflicts with none."""
        return not self.reason


@dataclass
class Resolution:
    """Every overlay's verdict and, per NodePool and type name, the updates to apply."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    updates: dict[str, dict[str, TypeUpdate]] = field(default_factory=dict)

    def apply(self, pool: str, types: Iterable[InstanceType]) -> list[InstanceType]:
        """``types`` of NodePool ``pool`` with the overlays applied (new objects only for changed types)."""
        changes = self.updates.get(pool)
        if not changes:
            return list(types)
        return [_applied(it, changes[it.name]) if it.name in changes else it for it in types]

    def price_overlaid(self, pool: str, instance_type: str) -> bool:
        """Whether an overlay set the price of an offering of ``instance_type`` in ``pool`` (Karpenter's
        ``karpenter.sh/price-overlay-applied``: the fleet request then follows these prices, ``prioritized``)."""
        update = self.updates.get(pool, {}).get(instance_type)
        return bool(update and update.prices)


def _applied(it: InstanceType, update: TypeUpdate) -> InstanceType:
    offerings = it.offerings
    if update.prices:
        offerings = tuple(
            dataclasses.replace(o, price=adjusted_price(o.price, update.prices[offering_key(o)]))
            if offering_key(o) in update.prices else o for o in it.offerings)
    capacity = {**it.capacity, **update.capacity} if update.capacity else it.capacity
    return dataclasses.replace(it, offerings=offerings, capacity=capacity)


def _type_labels(pool: PoolTypes, it: InstanceType) -> dict[str, str]:
    labels = {**pool.labels, **it.labels, L.NODEPOOL: pool.name, L.INSTANCE_TYPE: it.name}
    region = next((r for r in (region_of_zone(o.zone) for o in it.offerings) if r), None)
    if region:
        labels.setdefault(L.REGION, region)
    return labels


def resolve(overlays: Sequence[Overlay], pools: Sequence[PoolTypes],
            invalid: Mapping[str, str] | None = None) -> Resolution:
    """Verdicts and updates for ``overlays`` over ``pools`` (module docstring for the rules); ``invalid`` names
    the overlays that failed validation, with why (they get a ``RuntimeValidation`` verdict). O(overlays x types x
    offerings)."""
    result = Resolution()
    for name, why in (invalid or {}).items():
        result.verdicts[name] = Verdict(REASON_RUNTIME_VALIDATION, why)
    labels = {(p.name, i): _type_labels(p, it) for p in pools for i, it in enumerate(p.types)}
    for overlay in sorted(overlays, key=Overlay.order_key):
        selected: list[tuple[str, str, list[OfferingKey]]] = []
        conflict = ""
        for pool in pools:
            for i, it in enumerate(pool.types):
                if not overlay.selects_type(labels[(pool.name, i)]):
                    continue
                offers = [offering_key(o) for o in it.offerings if overlay.selects_offering(o)]
                if not offers:
                    continue
                selected.append((pool.name, it.name, offers))
                found = _conflict(result.updates.get(pool.name, {}).get(it.name), overlay, offers)
                if found:
                    conflict = f"{found} (instance type {it.name}, NodePool {pool.name})"
                    break
            if conflict:
                break
        if conflict:
            result.verdicts[overlay.name] = Verdict(REASON_CONFLICT, f"conflict with another overlay: {conflict}")
            continue
        result.verdicts[overlay.name] = Verdict()
        for pool_name, type_name, offers in selected:
            _record(result.updates.setdefault(pool_name, {}).setdefault(type_name, TypeUpdate()), overlay, offers)
    return result


def _conflict(update: TypeUpdate | None, overlay: Overlay, offers: list[OfferingKey]) -> str:
    if update is None:
        return ""
    if overlay.price_change:
        for key in offers:
            other = update.price_weights.get(key, {}).get(overlay.weight)
            if other is not None:
                return (f"NodeOverlay {other!r} of weight {overlay.weight} already sets the price of the {key[1]} "
                        f"offering in {key[0]}")
    for resource in overlay.capacity:
        other = update.capacity_weights.get((overlay.weight, resource))
        if other is not None:
            return f"NodeOverlay {other!r} of weight {overlay.weight} already sets capacity {resource}"
    return ""


def _record(update: TypeUpdate, overlay: Overlay, offers: list[OfferingKey]) -> None:
    if overlay.price_change:
        for key in offers:
            update.prices.setdefault(key, overlay.price_change)
            update.price_weights.setdefault(key, {}).setdefault(overlay.weight, overlay.name)
    for resource, qty in overlay.capacity.items():
        update.capacity.setdefault(resource, qty)
        update.capacity_weights[(overlay.weight, resource)] = overlay.name


@dataclass(frozen=True)
class OverlayInput:
    """One NodeOverlay object as read from the cluster: its name, an identity that changes when the object does
    (``(uid, resourceVersion)``), and its validated model or the validation error."""

    name: str
    identity: object
    model: NodeOverlay | NodewrightValidationError


class OverlayStore:
    """The NodeOverlays in force for one controller process (or one ``simulate`` / replay run).

    ``enabled`` is Karpenter's ``NodeOverlay`` feature gate: off, overlays are ignored with one warning (the first
    time any exist). :meth:`instance_types` resolves the cluster's overlays over the NodePools' types (cached while
    overlays and types are the same objects); :attr:`resolution` keeps the last result for the cloud providers'
    launch (:meth:`launch_types`) and the NodeOverlay status controller.
    """

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self.resolution = Resolution()
        self._warned = False
        self._lock = threading.Lock()
        self._cached: tuple[object, dict[str, list[InstanceType]], Resolution, object] | None = None

    def instance_types(self, overlays: Sequence[OverlayInput],
                       pools: Sequence[PoolTypes]) -> dict[str, list[InstanceType]]:
        """Pool name -> its types with the overlays applied.

        Args:
            overlays: one :class:`OverlayInput` per NodeOverlay object, in any order.
            pools: every NodePool being decided on, with the types its cloud provider returned.
        """
        if not overlays or not self.enabled:
            if overlays and not self._warned:
                self._warned = True
                log.warning("%d NodeOverlay(s) ignored: feature gate NodeOverlay is off (set FEATURE_GATES="
                            "NodeOverlay=true, chart settings.featureGates.nodeOverlay: true)", len(overlays))
            with self._lock:
                self.resolution = Resolution()
            return {p.name: list(p.types) for p in pools}
        key = (tuple(sorted((o.name, o.identity) for o in overlays)),
               tuple((p.name, tuple(sorted(p.labels.items())), tuple(id(t) for t in p.types)) for p in pools))
        with self._lock:
            hit = self._cached
        if hit is not None and hit[0] == key:
            return {name: list(types) for name, types in hit[1].items()}
        compiled: list[Overlay] = []
        invalid: dict[str, str] = {}
        for item in overlays:
            if isinstance(item.model, NodewrightValidationError):
                invalid[item.name] = str(item.model)
                continue
            try:
                compiled.append(Overlay.from_model(item.model))
            except NodewrightValidationError as err:
                invalid[item.name] = str(err)
        resolution = resolve(compiled, pools, invalid)
        out = {p.name: resolution.apply(p.name, p.types) for p in pools}
        with self._lock:
            # The key holds ids of the input types: the inputs are kept with it, so the ids stay theirs.
            self._cached = (key, out, resolution, [p.types for p in pools])
            self.resolution = resolution
        return {name: list(types) for name, types in out.items()}

    def launch_types(self, pool: str | None, types: Sequence[InstanceType]) -> list[InstanceType]:
        """``types`` as the launch of a NodeClaim of NodePool ``pool`` sees them: with the last resolution's
        updates (Karpenter's AWS ``Create`` applies the store the same way; a NodeClaim without a pool: none)."""
        if not pool or not self.enabled:
            return list(types)
        with self._lock:
            resolution = self.resolution
        return resolution.apply(pool, types)

    def price_overlaid(self, pool: str | None, instance_type: str) -> bool:
        """:meth:`Resolution.price_overlaid` of the last resolution."""
        return bool(pool) and self.enabled and self.resolution.price_overlaid(pool or "", instance_type)

