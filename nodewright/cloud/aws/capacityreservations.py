"""Capacity reservations of an EC2NodeClass, from its ``capacityReservationSelectorTerms``
(``ec2:DescribeCapacityReservations``), as Karpenter v1.14's ``pkg/providers/capacityreservation`` resolves them.

Per term (terms are ORed): ``id`` -> ``CapacityReservationIds=[id]``; otherwise ``Filters`` ANDed from ``tags``
(``tag:KEY`` = value, ``tag-key`` for ``*``), ``ownerID`` (``owner-id``) and ``instanceMatchCriteria``
(``instance-match-criteria``). Only ``state=active`` reservations are kept. Cached per set of terms for
:data:`CAPACITY_RESERVATION_TTL_SECONDS`; launches into a reservation are counted against its
``AvailableInstanceCount`` until the next describe (EC2's count lags), so a burst of NodeClaims does not all
target a reservation that has room for one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from nodewright.api.ec2nodeclass import CapacityReservationSelectorTerm
from nodewright.cloud.aws.cache import Clock, TTLCache
from nodewright.cloud.aws.errors import translate
from nodewright.cloud.aws.filters import tag_filters
from nodewright.cloud.reservations import CapacityReservation

CAPACITY_RESERVATION_TTL_SECONDS = 60.0


def describe_arguments(term: CapacityReservationSelectorTerm) -> dict[str, Any]:
    """The ``DescribeCapacityReservations`` arguments for one term (see module docstring)."""
    active = {"Name": "state", "Values": ["active"]}
    if term.id:
        return {"CapacityReservationIds": [term.id], "Filters": [active]}
    filters = tag_filters(term.tags)
    if term.owner_id:
        filters.append({"Name": "owner-id", "Values": [term.owner_id]})
    if term.instance_match_criteria:
        filters.append({"Name": "instance-match-criteria", "Values": [term.instance_match_criteria]})
    return {"Filters": [*filters, active]}


def _reservation(raw: dict[str, Any]) -> CapacityReservation:
    end: Any = raw.get("EndDate")
    return CapacityReservation(
        id=raw["CapacityReservationId"], instance_type=raw.get("InstanceType", ""),
        zone=raw.get("AvailabilityZone", ""), available=int(raw.get("AvailableInstanceCount", 0)),
        owner_id=raw.get("OwnerId", ""), match_criteria=raw.get("InstanceMatchCriteria", "open"),
        reservation_type=raw.get("ReservationType", "default"),
        end_time=None if not end else end.isoformat() if hasattr(end, "isoformat") else str(end))


class CapacityReservationProvider:
    """Resolves capacity-reservation selector terms (see module docstring)."""

    def __init__(self, ec2: Any, clock: Clock = time.monotonic, ttl: float = CAPACITY_RESERVATION_TTL_SECONDS) -> None:
        self._ec2 = ec2
        self._cache: TTLCache[list[CapacityReservation]] = TTLCache(ttl, clock)
        #: reservation id -> instances launched into it since its count was last described.
        self.launched: dict[str, int] = {}
        self._seen: dict[str, int] = {}

    def resolve(self, terms: Sequence[CapacityReservationSelectorTerm]) -> list[CapacityReservation]:
        """Every active reservation matching any term, sorted by id.

        Raises:
            AuthorizationError: ``ec2:DescribeCapacityReservations`` denied.
            LaunchError: any other AWS error.
        """
        if not terms:
            return []
        key = json.dumps([t.to_manifest() for t in terms], sort_keys=True)
        found = self._cache.get_or_load(key, lambda: self._describe(terms))
        for r in found:  # a fresh describe carries EC2's own count: forget our local launches into it
            if self._seen.get(r.id) != id(found):
                self._seen[r.id] = id(found)
                self.launched.pop(r.id, None)
        return found

    def mark_launched(self, reservation_id: str) -> None:
        """Count one launch into ``reservation_id`` against its available instances until the next describe."""
        self.launched[reservation_id] = self.launched.get(reservation_id, 0) + 1

    def _describe(self, terms: Sequence[CapacityReservationSelectorTerm]) -> list[CapacityReservation]:
        found: dict[str, CapacityReservation] = {}
        try:
            paginator = self._ec2.get_paginator("describe_capacity_reservations")
            for term in terms:
                for page in paginator.paginate(**describe_arguments(term)):
                    for raw in page.get("CapacityReservations", []):
                        if raw.get("State", "active") == "active":
                            found[raw["CapacityReservationId"]] = _reservation(raw)
        except ClientError as err:
            raise translate(err, operation="ec2:DescribeCapacityReservations") from err
        return sorted(found.values(), key=lambda r: r.id)
