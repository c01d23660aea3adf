"""Live EC2 prices: on-demand from the AWS Pricing API, spot from ``DescribeSpotPriceHistory``.

* On-demand: ``pricing:GetProducts`` (endpoint us-east-1) for service ``AmazonEC2`` with TERM_MATCH filters
  ``regionCode=<cluster region>``, ``operatingSystem=Linux``, ``tenancy=Shared``, ``preInstalledSw=NA``,
  ``capacitystatus=Used``; each PriceList entry is a JSON document whose ``terms.OnDemand.*.priceDimensions.*
  .pricePerUnit.USD`` is the hourly price (AWS Price List API reference).
* Spot: ``ec2:DescribeSpotPriceHistory`` for ``Linux/UNIX`` since now, keeping the latest price per
  (instance type, zone).

Refresh policy: on-demand every 12 hours, spot every 5 minutes (:meth:`PricingProvider.refresh` is called
by the provider when the data is older than that). When a call fails, or returns nothing, the bundled table
(:func:`nodewright.cloud.prices.on_demand_prices`) and the catalog's spot model stand in; that is said once
in a warning log line and by :attr:`PricingProvider.on_demand_fallback` / :attr:`~PricingProvider.spot_fallback`,
which :meth:`nodewright.metrics.Metrics.observe_pricing` exports as ``nodewright_pricing_fallback{kind}``.
With ``isolated_vpc`` (Karpenter's ``ISOLATED_VPC``) the Pricing API, which has no VPC endpoint, is never
called: on-demand prices are the bundled table's.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from botocore.exceptions import ClientError

from nodewright.cloud.aws.cache import Clock
from nodewright.cloud.aws.errors import TRANSPORT_ERRORS
from nodewright.cloud.prices import PriceTable, modelled_spot_price, on_demand_prices

log = logging.getLogger(__name__)

ON_DEMAND_REFRESH_SECONDS = 12 * 3600.0
SPOT_REFRESH_SECONDS = 300.0

def on_demand_filters(region: str) -> list[dict[str, str]]:
    """The ``GetProducts`` filters for Linux, shared-tenancy, no-preinstalled-software on-demand in ``region``."""
    pairs = [("regionCode", region), ("operatingSystem", "Linux"), ("tenancy", "Shared"),
             ("preInstalledSw", "NA"), ("capacitystatus", "Used")]
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in pairs]


def parse_price_list(entries: Iterable[str | dict[str, Any]]) -> dict[str, float]:
    """``instance type -> USD/hour`` from ``GetProducts`` PriceList entries (JSON text or decoded).

    Entries without an instance type or a positive USD price are skipped; when a type appears twice the
    lower price wins (several SKUs differ only in attributes we do not filter on, e.g. license model).
    """
    prices: dict[str, float] = {}
    for entry in entries:
        doc = json.loads(entry) if isinstance(entry, str) else entry
        instance_type = doc.get("product", {}).get("attributes", {}).get("instanceType")
        if not instance_type:
            continue
        for term in doc.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                try:
                    usd = float(dimension.get("pricePerUnit", {}).get("USD", "0"))
                except ValueError:
                    continue
                if usd > 0:
                    prices[instance_type] = min(usd, prices.get(instance_type, usd))
    return prices


def latest_spot_prices(history: Iterable[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """``(instance type, zone) -> USD/hour`` keeping the newest ``Timestamp`` of each pair."""
    newest: dict[tuple[str, str], tuple[dt.datetime, float]] = {}
    for item in history:
        key = (item["InstanceType"], item["AvailabilityZone"])
        stamp = item["Timestamp"]
        if isinstance(stamp, str):
            stamp = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        if key not in newest or stamp > newest[key][0]:
            newest[key] = (stamp, float(item["SpotPrice"]))
    return {key: price for key, (_, price) in newest.items()}


class PricingProvider:
    """Current EC2 prices for one region; a :class:`nodewright.cloud.catalog.PriceLookup`."""

    def __init__(self, pricing: Any, ec2: Any, region: str, clock: Clock = time.monotonic,
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC), isolated_vpc: bool = False) -> None:
        self._pricing = pricing
        self._ec2 = ec2
        self.isolated_vpc = isolated_vpc
        self.region = region
        self._clock = clock
        self._now = now
        self._bundled: PriceTable = on_demand_prices(region)
        self._on_demand: dict[str, float] = {}
        self._spot: dict[tuple[str, str], float] = {}
        self._on_demand_at: float | None = None
        self._spot_at: float | None = None
        self.on_demand_fallback = True
        self.spot_fallback = True
        self.version = 0
        """Bumped whenever live prices change (a cache key for priced instance types)."""

    # --- PriceLookup ---------------------------------------------------------------------------------------

    def on_demand_price(self, instance_type: str) -> float | None:
        """On-demand USD/hour: live when known, else the bundled table's, else None (no offering)."""
        live = self._on_demand.get(instance_type)
        return live if live is not None else self._bundled.on_demand_price(instance_type)

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        """Spot USD/hour in ``zone``: latest history price, else the catalog's model over on-demand."""
        live = self._spot.get((instance_type, zone))
        if live is not None:
            return live
        on_demand = self.on_demand_price(instance_type)
        return None if on_demand is None else modelled_spot_price(instance_type, on_demand)

    # --- refresh -------------------------------------------------------------------------------------------

    def refresh(self, instance_types: Iterable[str] | None = None, force: bool = False) -> None:
        """Refresh whatever is older than its period (or everything with ``force``); never raises for AWS errors.

        Args:
            instance_types: limit the spot history query to these types (None: all).
        """
        now = self._clock()
        if force or self._on_demand_at is None or now - self._on_demand_at >= ON_DEMAND_REFRESH_SECONDS:
            self._refresh_on_demand()
            self._on_demand_at = now
        if force or self._spot_at is None or now - self._spot_at >= SPOT_REFRESH_SECONDS:
            self._refresh_spot(instance_types)
            self._spot_at = now

    def _refresh_on_demand(self) -> None:
        if self.isolated_vpc:
            if self._on_demand_at is None:
                log.info(f"ISOLATED_VPC: on-demand prices from {self._bundled.source}; the AWS Pricing API is "
                         "not called", extra={"region": self.region})
            return
        try:
            entries: list[str] = []
            paginator = self._pricing.get_paginator("get_products")
            for page in paginator.paginate(ServiceCode="AmazonEC2", Filters=on_demand_filters(self.region)):
                entries += page.get("PriceList", [])
            prices = parse_price_list(entries)
        except (ClientError, *TRANSPORT_ERRORS, ValueError) as err:
            self._fall_back("on-demand", f"pricing:GetProducts failed: {err}")
            return
        if not prices:
            self._fall_back("on-demand", "pricing:GetProducts returned no prices")
            return
        self._on_demand = prices
        self.version += 1
        self.on_demand_fallback = False
        log.info("refreshed on-demand prices", extra={"count": len(prices), "region": self.region})

    def _refresh_spot(self, instance_types: Iterable[str] | None) -> None:
        kwargs: dict[str, Any] = {"ProductDescriptions": ["Linux/UNIX"], "StartTime": self._now()}
        if instance_types is not None:
            kwargs["InstanceTypes"] = sorted(instance_types)
        try:
            history: list[dict[str, Any]] = []
            for page in self._ec2.get_paginator("describe_spot_price_history").paginate(**kwargs):
                history += page.get("SpotPriceHistory", [])
            prices = latest_spot_prices(history)
        except (ClientError, *TRANSPORT_ERRORS, ValueError, KeyError) as err:
            self._fall_back("spot", f"ec2:DescribeSpotPriceHistory failed: {err}")
            return
        if not prices:
            self._fall_back("spot", "ec2:DescribeSpotPriceHistory returned no prices")
            return
        self._spot = prices
        self.version += 1
        self.spot_fallback = False

    def _fall_back(self, kind: str, reason: str) -> None:
        if self._on_demand if kind == "on-demand" else self._spot:
            # An earlier refresh succeeded: slightly stale live prices beat the bundled table.
            log.warning(f"keeping {kind} prices from the last successful refresh: {reason}",
                        extra={"kind": kind, "region": self.region})
            return
        source = self._bundled.source if kind == "on-demand" else "the catalog's spot model (60-70% off on-demand)"
        log.warning(f"using fallback {kind} prices from {source}: {reason}",
                    extra={"kind": kind, "region": self.region})
        if kind == "on-demand":
            self.on_demand_fallback = True
        else:
            self.spot_fallback = True
