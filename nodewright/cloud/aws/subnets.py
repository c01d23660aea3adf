"""Subnets of an EC2NodeClass, from its ``subnetSelectorTerms`` (tags incl. ``*``, ids).

Refresh policy: results are cached per set of terms for 60 seconds (free-IP counts drift as nodes launch;
Karpenter refreshes on a similar cadence). Subnets are ranked by free IPv4 addresses, most first, and a
launch uses the best subnet of each zone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from nodewright.api.ec2nodeclass import SubnetSelectorTerm
from nodewright.cloud.aws.cache import Clock, TTLCache
from nodewright.cloud.aws.errors import translate
from nodewright.cloud.aws.filters import tag_filters, tags_dict

SUBNET_TTL_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Subnet:
    """A resolved subnet: id, zone name and id, free IPv4 addresses, tags."""

    id: str
    zone: str
    zone_id: str
    available_ips: int
    tags: dict[str, str]

    def status(self) -> dict[str, object]:
        """``EC2NodeClass.status.subnets[]`` entry (Karpenter: id, zone, zoneID)."""
        return {"id": self.id, "zone": self.zone, "zoneID": self.zone_id}


def _term_filters(term: SubnetSelectorTerm) -> list[dict[str, Any]]:
    if term.id:
        return [{"Name": "subnet-id", "Values": [term.id]}]
    return tag_filters(term.tags)


def _terms_key(terms: Sequence[SubnetSelectorTerm]) -> str:
    return json.dumps([t.to_manifest() for t in terms], sort_keys=True)


class SubnetProvider:
    """Resolves subnet selector terms against ``ec2:DescribeSubnets``."""

    def __init__(self, ec2: Any, clock: Clock = time.monotonic, ttl: float = SUBNET_TTL_SECONDS) -> None:
        self._ec2 = ec2
        self._cache: TTLCache[list[Subnet]] = TTLCache(ttl, clock)
        #: Zone name -> zone id of every subnet described so far (DescribeSubnets' ``AvailabilityZoneId``): the
        #: zone ids of the instance-type offerings (no DescribeAvailabilityZones call).
        self.zone_ids: dict[str, str] = {}

    def resolve(self, terms: Sequence[SubnetSelectorTerm]) -> list[Subnet]:
        """Every subnet matching any term, most free IPs first (ties by id).

        Raises:
            AuthorizationError: ``ec2:DescribeSubnets`` denied.
            LaunchError: any other AWS error.
        """
        return self._cache.get_or_load(_terms_key(terms), lambda: self._describe(terms))

    def _describe(self, terms: Sequence[SubnetSelectorTerm]) -> list[Subnet]:
        found: dict[str, Subnet] = {}
        try:
            paginator = self._ec2.get_paginator("describe_subnets")
            for term in terms:
                for page in paginator.paginate(Filters=_term_filters(term)):
                    for raw in page.get("Subnets", []):
                        found[raw["SubnetId"]] = Subnet(
                            id=raw["SubnetId"], zone=raw["AvailabilityZone"], zone_id=raw.get("AvailabilityZoneId", ""),
                            available_ips=int(raw.get("AvailableIpAddressCount", 0)), tags=tags_dict(raw.get("Tags")))
        except ClientError as err:
            raise translate(err, operation="ec2:DescribeSubnets") from err
        self.zone_ids.update({s.zone: s.zone_id for s in found.values() if s.zone_id})
        return sorted(found.values(), key=lambda s: (-s.available_ips, s.id))

    def zonal(self, terms: Sequence[SubnetSelectorTerm]) -> dict[str, Subnet]:
        """Zone name -> the subnet with the most free IPs in it (subnets with no free IP are skipped)."""
        best: dict[str, Subnet] = {}
        for subnet in self.resolve(terms):
            if subnet.available_ips > 0 and subnet.zone not in best:
                best[subnet.zone] = subnet
        return best

    def invalidate(self) -> None:
        """Drop cached results (after a launch failed for lack of free addresses)."""
        self._cache.clear()
