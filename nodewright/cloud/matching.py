"""Which instance types and offerings a NodeClaim's requirements allow (every cloud provider's launch).

A NodeClaim (Karpenter) carries its candidates as requirements: ``node.kubernetes.io/instance-type In
[...]``, ``topology.kubernetes.io/zone In [...]``, ``karpenter.sh/capacity-type In [...]`` plus any
well-known instance label (``karpenter.k8s.aws/instance-family``, ``kubernetes.io/arch``...). Keys that
are not properties of an instance or offering (custom labels such as ``intent``) are node labels, not
constraints on the launch, and are skipped here. The requirements are parsed once into the scheduler's
:class:`~nodewright.scheduling.requirements.Requirements`, so a value is allowed here exactly when the
scheduler allowed it (a missing label satisfies only ``NotIn``/``DoesNotExist``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.scheduling.requirements import Requirement, Requirements

_OFFERING_KEYS = frozenset({L.ZONE, L.CAPACITY_TYPE, L.ZONE_ID, L.CAPACITY_RESERVATION_ID})


def as_requirements(requirements: Requirements | Sequence[Any]) -> Requirements:
    """``requirements`` as :class:`Requirements`: already parsed, or ``nodewright.api`` Requirement models
    (a NodePool's or a NodeClaim's ``spec.requirements``).

    Raises:
        NodewrightValidationError: an invalid requirement (the API models are validated already).
    """
    if isinstance(requirements, Requirements):
        return requirements
    return Requirements.from_expressions(
        {"key": r.key, "operator": r.operator, "values": r.values, "minValues": r.min_values} for r in requirements)


def _holds(requirement: Requirement, value: str | None) -> bool:
    return requirement.allows_absence() if value is None else requirement.has(value)


def _is_instance_key(key: str, instance_labels: Mapping[str, str]) -> bool:
    return key in instance_labels or (key in L.WELL_KNOWN_LABELS and key not in _OFFERING_KEYS
                                      and key not in (L.NODEPOOL, L.EC2NODECLASS, L.REGION))


def type_allowed(instance_type: InstanceType, requirements: Requirements | Sequence[Any]) -> bool:
    """Whether every instance-property requirement holds for ``instance_type``'s labels."""
    return type_filter(requirements)(instance_type)


def type_filter(requirements: Requirements | Sequence[Any]) -> Callable[[InstanceType], bool]:
    """:func:`type_allowed` for many types: the requirements parsed once."""
    items = list(as_requirements(requirements).items())

    def allowed(instance_type: InstanceType) -> bool:
        labels = instance_type.labels
        for key, requirement in items:
            if _is_instance_key(key, labels) and not _holds(requirement, labels.get(key)):
                return False
        return True

    return allowed


def offering_allowed(offering: Offering, requirements: Requirements | Sequence[Any]) -> bool:
    """Whether the zone / zone id / capacity-type / capacity-reservation-id requirements hold for ``offering`` (a
    reserved NodeClaim names the reservations it holds: :mod:`nodewright.scheduling.reservations`)."""
    values = {L.ZONE: offering.zone, L.CAPACITY_TYPE: offering.capacity_type, L.ZONE_ID: offering.zone_id or None,
              L.CAPACITY_RESERVATION_ID: offering.reservation_id or None}
    return all(_holds(r, values[key]) for key, r in as_requirements(requirements).items() if key in values)


def allowed_offerings(instance_types: Iterable[InstanceType], requirements: Requirements | Sequence[Any],
                      zones: Iterable[str]) -> list[tuple[InstanceType, Offering]]:
    """Every available (type, offering) the requirements allow in ``zones``, cheapest first."""
    parsed = as_requirements(requirements)
    allowed = type_filter(parsed)
    zone_set = set(zones)
    out = [(it, o) for it in instance_types if allowed(it)
           for o in it.offerings if o.available and o.zone in zone_set and offering_allowed(o, parsed)]
    return sorted(out, key=lambda pair: (pair[1].price, pair[0].name, pair[1].zone, pair[1].capacity_type))
