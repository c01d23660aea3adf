"""Which instance types and offerings a NodeClaim's requirements allow.

A NodeClaim (Karpenter) carries its candidates as requirements: ``node.kubernetes.io/instance-type In
[...]``, ``topology.kubernetes.io/zone In [...]``, ``karpenter.sh/capacity-type In [...]`` plus any
well-known instance label (``karpenter.k8s.aws/instance-family``, ``kubernetes.io/arch``...). Keys that
are not properties of an instance or offering (custom labels such as ``intent``) are node labels, not
constraints on the launch, and are skipped here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from nodewright.api import labels
from nodewright.api.requirements import Requirement
from nodewright.cloud.instancetype import InstanceType, Offering

_OFFERING_KEYS = frozenset({labels.ZONE, labels.CAPACITY_TYPE, labels.ZONE_ID})


def _holds(requirement: Requirement, value: str | None) -> bool:
    values = requirement.values or []
    op = requirement.operator
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if value is None or not value.lstrip("-").isdigit():
        return False
    bound, number = int(values[0]), int(value)
    return {"Gt": number > bound, "Lt": number < bound, "Gte": number >= bound, "Lte": number <= bound}[op]


def _is_instance_key(key: str, instance_labels: Mapping[str, str]) -> bool:
    return key in instance_labels or (key in labels.WELL_KNOWN_LABELS and key not in _OFFERING_KEYS
                                      and key not in (labels.NODEPOOL, labels.EC2NODECLASS, labels.REGION))


def type_allowed(instance_type: InstanceType, requirements: Sequence[Requirement]) -> bool:
    """Whether every instance-property requirement holds for ``instance_type``'s labels."""
    for requirement in requirements:
        if _is_instance_key(requirement.key, instance_type.labels) and \
                not _holds(requirement, instance_type.labels.get(requirement.key)):
            return False
    return True


def offering_allowed(offering: Offering, requirements: Sequence[Requirement]) -> bool:
    """Whether the zone / zone id / capacity-type requirements hold for ``offering``."""
    values = {labels.ZONE: offering.zone, labels.CAPACITY_TYPE: offering.capacity_type,
              labels.ZONE_ID: offering.zone_id or None}
    return all(_holds(r, values[r.key]) for r in requirements if r.key in values)


def allowed_offerings(instance_types: Iterable[InstanceType], requirements: Sequence[Requirement],
                      zones: Iterable[str]) -> list[tuple[InstanceType, Offering]]:
    """Every available (type, offering) the requirements allow in ``zones``, cheapest first."""
    zone_set = set(zones)
    out = [(it, o) for it in instance_types if type_allowed(it, requirements)
           for o in it.offerings if o.available and o.zone in zone_set and offering_allowed(o, requirements)]
    return sorted(out, key=lambda pair: (pair[1].price, pair[0].name, pair[1].zone, pair[1].capacity_type))
