"""Offline EC2 prices: bundled on-demand list prices and a documented spot-price model.

On-demand: ``nodewright/data/ec2-on-demand-prices-<region>.csv`` (columns ``region,instance_type,
on_demand_usd_per_hour``). Bundled is us-east-1 only ("AWS Price List API, us-east-1 Linux on-demand,
2026-07-20"); every other region falls back to those prices and :class:`PriceTable` says so
(``fallback=True``, ``source`` names the stand-in) so callers can print it. The live controller gets real
prices from the AWS provider instead.

Spot (simulation only): a per-family discount from on-demand, deterministic, between 60% and 70% off -- the
range field reports observe ("spot is ~70% cheaper in practice, not 90%"). The discount of a family is
``0.60 + 0.10 x (crc32(family) mod 1001) / 1000``; every size of a family and every zone share it. A file of
real spot prices replaces the model entry by entry (:func:`load_spot_prices`).

All prices are USD per hour for one instance.
"""

from __future__ import annotations

import csv
import functools
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from nodewright.cloud.labels import instance_family
from nodewright.errors import NodewrightValidationError

PRICE_REFERENCE_REGION = "us-east-1"
ON_DEMAND_ATTRIBUTION = "AWS Price List API, us-east-1 Linux on-demand, 2026-07-20"
SPOT_DISCOUNT_MIN = 0.60
SPOT_DISCOUNT_MAX = 0.70


@dataclass(frozen=True, slots=True)
class PriceTable:
    """On-demand prices of one region plus where they came from.

    Attributes:
        region: the region the prices are used for.
        on_demand: instance type -> USD/hour.
        source: human-readable provenance, e.g. "bundled us-east-1 on-demand prices (AWS Price List API, ...)".
        fallback: True when another region's prices stand in for ``region``.
        spot: optional real spot prices, instance type -> zone (``""`` = every zone) -> USD/hour.
        spot_source: provenance of ``spot`` (a file path) or of the model.
    """

    region: str
    on_demand: Mapping[str, float]
    source: str
    fallback: bool
    spot: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    spot_source: str = "spot model: per-family discount of 60-70% off on-demand"

    def on_demand_price(self, instance_type: str) -> float | None:
        """On-demand USD/hour, or None when the type has no known price (no offering, as in Karpenter)."""
        return self.on_demand.get(instance_type)

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        """Spot USD/hour in ``zone``: the real price when loaded, else the model; None without on-demand price."""
        real = self.spot.get(instance_type)
        if real is not None:
            price = real.get(zone, real.get(""))
            if price is not None:
                return price
        on_demand = self.on_demand.get(instance_type)
        if on_demand is None:
            return None
        return modelled_spot_price(instance_type, on_demand)


def spot_discount(family: str) -> float:
    """Modelled spot discount of an instance family, a fraction in [0.60, 0.70], stable across runs."""
    spread = (zlib.crc32(family.encode()) % 1001) / 1000
    return SPOT_DISCOUNT_MIN + (SPOT_DISCOUNT_MAX - SPOT_DISCOUNT_MIN) * spread


def modelled_spot_price(instance_type: str, on_demand: float) -> float:
    """``on_demand x (1 - spot_discount(family))`` rounded to 1e-6 USD/hour."""
    return round(on_demand * (1 - spot_discount(instance_family(instance_type))), 6)


def _bundled_price_file(region: str) -> Path | None:
    path = Path(str(resources.files("nodewright") / "data" / f"ec2-on-demand-prices-{region}.csv"))
    return path if path.is_file() else None


def read_on_demand_csv(path: Path) -> dict[str, float]:
    """``instance_type -> USD/hour`` from a ``region,instance_type,on_demand_usd_per_hour`` CSV.

    Raises:
        NodewrightValidationError: on a missing column or a non-numeric price.
    """
    prices: dict[str, float] = {}
    with path.open(newline="") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            try:
                prices[row["instance_type"]] = float(row["on_demand_usd_per_hour"])
            except (KeyError, TypeError, ValueError) as err:
                raise NodewrightValidationError(f"{path}:{line}", f"bad on-demand price row: {err}") from err
    return prices


@functools.lru_cache(maxsize=32)
def on_demand_prices(region: str) -> PriceTable:
    """The bundled on-demand :class:`PriceTable` for ``region`` (falling back to us-east-1's, flagged)."""
    own = _bundled_price_file(region)
    if own is not None and region != PRICE_REFERENCE_REGION:
        return PriceTable(
            region, read_on_demand_csv(own), f"bundled {region} on-demand prices", fallback=False
        )
    reference = _bundled_price_file(PRICE_REFERENCE_REGION)
    if reference is None:  # pragma: no cover - packaging error
        raise FileNotFoundError("bundled us-east-1 price table is missing from nodewright/data")
    prices = read_on_demand_csv(reference)
    source = f"bundled {PRICE_REFERENCE_REGION} on-demand prices ({ON_DEMAND_ATTRIBUTION})"
    if region == PRICE_REFERENCE_REGION:
        return PriceTable(region, prices, source, fallback=False)
    return PriceTable(
        region, prices, f"{source}; {PRICE_REFERENCE_REGION} prices stand in for {region}", fallback=True
    )


def load_spot_prices(path: Path, region: str | None = None) -> dict[str, dict[str, float]]:
    """Real spot prices from a file, ``instance type -> zone -> USD/hour`` (zone ``""`` = all zones).

    Formats:

    * CSV with columns ``instance_type`` and ``spot_usd_per_hour`` (or ``price``), optional ``zone`` and
      ``region`` (rows of other regions are skipped when ``region`` is given) -- e.g. the output of
      ``aws ec2 describe-spot-price-history`` flattened;
    * JSON ``{"m5.large": 0.035}`` or ``{"m5.large": {"us-east-1a": 0.035, "us-east-1b": 0.036}}``.

    Raises:
        NodewrightValidationError: when the file is missing or malformed.
    """
    if not path.is_file():
        raise NodewrightValidationError(str(path), "spot price file not found")
    if path.suffix.lower() == ".json":
        return _spot_from_json(path)
    return _spot_from_csv(path, region)


def _spot_from_json(path: Path) -> dict[str, dict[str, float]]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise NodewrightValidationError(str(path), f"invalid JSON: {err}") from err
    if not isinstance(data, dict):
        raise NodewrightValidationError(str(path), "expected an object of instance type -> price")
    out: dict[str, dict[str, float]] = {}
    for name, value in data.items():
        try:
            if isinstance(value, dict):
                out[name] = {zone: float(price) for zone, price in value.items()}
            else:
                out[name] = {"": float(value)}
        except (TypeError, ValueError) as err:
            raise NodewrightValidationError(f"{path}.{name}", f"price is not a number: {err}") from err
    return out


def _spot_from_csv(path: Path, region: str | None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with path.open(newline="") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            if region and row.get("region") and row["region"] != region:
                continue
            raw = row.get("spot_usd_per_hour") or row.get("price")
            try:
                price = float(raw)  # type: ignore[arg-type]
                name = row["instance_type"]
            except (KeyError, TypeError, ValueError) as err:
                raise NodewrightValidationError(
                    f"{path}:{line}", "needs instance_type and spot_usd_per_hour (or price) columns"
                ) from err
            out.setdefault(name, {})[row.get("zone") or ""] = price
    return out
