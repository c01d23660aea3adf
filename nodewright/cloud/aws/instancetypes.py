"""Instance types and their offerings as the AWS API reports them, priced and filtered for availability.

* ``ec2:DescribeInstanceTypes`` (paginated) gives the specs; labels, capacity and EKS allocatable come from
  :func:`nodewright.cloud.catalog.instance_type_from_aws` (one derivation shared with the bundled catalog).
* ``ec2:DescribeInstanceTypeOfferings`` (location type ``availability-zone``, paginated) says which zones
  offer each type. Zone ids come from the subnets the controller resolved (``ec2:DescribeSubnets`` returns each
  subnet's ``AvailabilityZoneId``, :attr:`nodewright.cloud.aws.subnets.SubnetProvider.zone_ids`): offerings exist
  only in zones where an EC2NodeClass has a subnet, so ``ec2:DescribeAvailabilityZones`` would add no fact and is
  neither called nor granted (Karpenter's ``subnetZoneInfo`` takes the zone id from the subnet the same way).
* Offerings = offered zones (restricted to the EC2NodeClass's subnet zones) x supported usage classes, priced
  by :class:`~nodewright.cloud.aws.pricing.PricingProvider`, with recently failed ones ``available=False``.

Refresh policy: specs every 12 hours and offerings every hour (Karpenter refreshes on similar timers).
When the API fails before any successful load, the bundled snapshot stands in (logged once); a later
failure keeps the last good data.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from nodewright.cloud import catalog
from nodewright.cloud.aws.cache import Clock
from nodewright.cloud.aws.errors import TRANSPORT_ERRORS, error_code, is_authorization_error, translate
from nodewright.cloud.instancetype import InstanceType
from nodewright.cloud.overhead import KubeletSettings
from nodewright.cloud.unavailable import UnavailableOfferings

log = logging.getLogger(__name__)

SPECS_REFRESH_SECONDS = 12 * 3600.0
OFFERINGS_REFRESH_SECONDS = 3600.0


class _Unavailable:
    """Adapts :class:`UnavailableOfferings` to the ``(type, zone, capacity type) in x`` test the catalog uses."""

    def __init__(self, unavailable: UnavailableOfferings) -> None:
        self._unavailable = unavailable

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 3:
            return False
        return self._unavailable.is_unavailable(*key)


class InstanceTypeProvider:
    """Live instance types of one region (bundled snapshot as the fallback)."""

    def __init__(self, ec2: Any, region: str, prices: catalog.PriceLookup, unavailable: UnavailableOfferings,
                 clock: Clock = time.monotonic, patterns: Sequence[str] = (),
                 zone_ids: Callable[[], Mapping[str, str]] | None = None) -> None:
        """``patterns``: optional ``instance-type`` filter values (``"m5.*"``) restricting what is described;
        empty means every type (the default, as Karpenter). ``zone_ids``: zone name -> zone id known from the
        resolved subnets (an unknown zone gets an empty id)."""
        self._ec2 = ec2
        self._filters = [{"Name": "instance-type", "Values": list(patterns)}] if patterns else []
        self.region = region
        self._prices = prices
        self._unavailable = unavailable
        self._clock = clock
        self._records: dict[str, Mapping[str, Any]] = {}
        self._offered: dict[str, list[str]] = {}
        self._zone_ids: Callable[[], Mapping[str, str]] = zone_ids or dict
        self._specs_at: float | None = None
        self._offerings_at: float | None = None
        self._views: dict[tuple[Any, ...], list[InstanceType]] = {}
        self.source = "none"
        """``"aws"`` once a live load succeeded, ``"bundled"`` while the snapshot stands in."""

    def refresh(self, force: bool = False) -> None:
        """Reload specs/offerings older than their period (all with ``force``).

        Raises:
            AuthorizationError: the controller may not describe instance types (no fallback hides that).
        """
        now = self._clock()
        if force or self._specs_at is None or now - self._specs_at >= SPECS_REFRESH_SECONDS:
            self._load(self._describe_specs, "specs")
            self._specs_at = now
        if force or self._offerings_at is None or now - self._offerings_at >= OFFERINGS_REFRESH_SECONDS:
            self._load(self._describe_offerings, "offerings")
            self._offerings_at = now

    def _load(self, describe: Any, what: str) -> None:
        try:
            describe()
            self.source = "aws"
        except ClientError as err:
            if is_authorization_error(error_code(err)):
                raise translate(err, operation=f"ec2:DescribeInstanceType{'s' if what == 'specs' else 'Offerings'}") \
                    from err
            self._fall_back(what, err)
        except TRANSPORT_ERRORS as err:
            self._fall_back(what, err)

    def _fall_back(self, what: str, err: Exception) -> None:
        if (self._records if what == "specs" else self._offered):
            log.warning(f"keeping instance type {what} from the last refresh: {err}")
            return
        log.warning(f"using the bundled instance type {what} for {self.region}: DescribeInstanceTypes failed: {err}")
        self.source = "bundled"
        if what == "specs":
            self._records = {name: record for name, record in catalog.instance_type_records().items()
                             if self._wanted(name)}
        else:
            self._offered = {it.name: sorted({o.zone for o in it.offerings})
                             for it in catalog.load_instance_types(self.region)}

    def _wanted(self, name: str) -> bool:
        patterns = self._filters[0]["Values"] if self._filters else ["*"]
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)

    def _describe_specs(self) -> None:
        records: dict[str, Mapping[str, Any]] = {}
        for page in self._ec2.get_paginator("describe_instance_types").paginate(Filters=self._filters):
            for record in page.get("InstanceTypes", []):
                records[record["InstanceType"]] = record
        self._records = records

    def _describe_offerings(self) -> None:
        offered: dict[str, list[str]] = {}
        paginator = self._ec2.get_paginator("describe_instance_type_offerings")
        for page in paginator.paginate(LocationType="availability-zone", Filters=self._filters):
            for item in page.get("InstanceTypeOfferings", []):
                offered.setdefault(item["InstanceType"], []).append(item["Location"])
        self._offered = {name: sorted(set(z)) for name, z in offered.items()}

    def instance_types(self, zones: Iterable[str] | None = None, kubelet: KubeletSettings | None = None) -> list[InstanceType]:
        """Instance types offered in any of ``zones`` (all zones when None), sorted by name.

        Each type's offerings cover only those zones; types without a priced offering there are left out.
        """
        self.refresh()
        key = (tuple(sorted(zones)) if zones is not None else None, repr(kubelet), self._unavailable.version(),
               getattr(self._prices, "version", 0), self._specs_at, self._offerings_at,
               tuple(sorted(self._zone_ids().items())))
        if key not in self._views:
            # Only the latest few views matter (availability changes invalidate them); keep memory bounded.
            if len(self._views) > 32:
                self._views.clear()
            self._views[key] = self._build(zones, kubelet)
        return list(self._views[key])

    def _build(self, zones: Iterable[str] | None, kubelet: KubeletSettings | None) -> list[InstanceType]:
        allowed = set(zones) if zones is not None else None
        ids = self._zone_ids()
        unavailable = _Unavailable(self._unavailable)
        out: list[InstanceType] = []
        for name in sorted(self._records):
            offered = [z for z in self._offered.get(name, []) if allowed is None or z in allowed]
            if not offered:
                continue
            zone_objs = [catalog.Zone(z, ids.get(z, "")) for z in offered]
            try:
                instance_type = catalog.instance_type_from_aws(
                    self._records[name], zone_objs, self._prices, kubelet=kubelet, unavailable=unavailable)
            except (KeyError, ValueError) as err:
                log.debug("skipping instance type with incomplete record", extra={"type": name, "error": str(err)})
                continue
            if instance_type.offerings:
                out.append(instance_type)
        return out

    def names(self) -> list[str]:
        """Names of every described instance type, sorted."""
        self.refresh()
        return sorted(self._records)

    def record(self, name: str) -> Mapping[str, Any] | None:
        """The raw ``DescribeInstanceTypes`` record of ``name`` (None when unknown)."""
        self.refresh()
        return self._records.get(name)
