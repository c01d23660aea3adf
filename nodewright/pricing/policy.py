"""The ``PricingPolicy`` document: what an account really pays for EC2, as nodewright reads it.

```yaml
apiVersion: nodewright.io/v1alpha1
kind: PricingPolicy
metadata: {name: acme}
spec:
  discounts:                  # negotiated discounts on the price of usage no RI or Savings Plan covers
    - match: {family: m6i, region: us-east-1, capacityType: on-demand}   # every key optional
      percent: 12             # percent off the price, or ...
    - match: {instanceType: c6i.large}
      usdPerHour: 0.005       # ... an absolute $/h off each instance-hour (never below 0)
  savingsPlans:
    - name: m6i-iad           # optional, for reports
      type: EC2Instance       # one family in one region
      family: m6i
      region: us-east-1
      commitmentUsdPerHour: 1.5
      discountPercent: 40     # the plan's rate = list on-demand price x (1 - 40%)
    - type: Compute           # any family, any region
      commitmentUsdPerHour: 0.5
      discountPercent: 25     # default rate ...
      rates:                  # ... overridden per family and/or region (most specific wins)
        - {family: c6i, discountPercent: 28}
  reservedInstances:
    - instanceType: m6i.large
      zone: us-east-1a        # zonal RI: this type in this zone
      count: 2
    - instanceType: m6i.xlarge
      region: us-east-1       # regional RI: any zone, size-flexible within m6i
      count: 1
      usdPerHour: 0.12        # optional amortised hourly cost, counted in the bill (default 0)
```

Every field name is Kubernetes camelCase; unknown fields are rejected. Errors are
:class:`nodewright.errors.NodewrightValidationError` naming the path, e.g.
``spec.savingsPlans[0].family: an EC2Instance Savings Plan covers one family: set family``.

How the engine applies the policy (order, marginal price) is in :mod:`nodewright.pricing.engine`.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, model_validator

from nodewright.api.base import KubeModel, LenientModel, invalid, parse_model
from nodewright.api.manifests import SAFE_LOADER
from nodewright.cloud.labels import instance_family
from nodewright.errors import NodewrightValidationError

_log = logging.getLogger("nodewright.pricing")

API_VERSION = "nodewright.io/v1alpha1"
KIND = "PricingPolicy"

_FAMILY_RE = re.compile(r"^[a-z][a-z0-9-]*$")
_TYPE_RE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_ZONE_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+[a-z]$")

CapacityType = Literal["on-demand", "spot"]
Percent = Annotated[float, Field(ge=0, lt=100)]
UsdPerHour = Annotated[float, Field(ge=0)]


def _check(pattern: re.Pattern[str], value: str | None, field: str, example: str) -> None:
    if value is not None and not pattern.match(value):
        raise invalid(field, f"{value!r} is not a valid {field.rsplit('.', 1)[-1]}, e.g. {example!r}")


def _check_placement(family: str | None, instance_type: str | None, region: str | None,
                     zone: str | None = None) -> None:
    _check(_FAMILY_RE, family, "family", "m6i")
    _check(_TYPE_RE, instance_type, "instanceType", "m6i.large")
    _check(_REGION_RE, region, "region", "us-east-1")
    _check(_ZONE_RE, zone, "zone", "us-east-1a")
    if family and instance_type and instance_family(instance_type) != family:
        raise invalid("instanceType", f"{instance_type!r} is not of family {family!r}: set one or the other")
    if region and zone and not zone.startswith(region):
        raise invalid("zone", f"{zone!r} is not in region {region!r}")


class Match(KubeModel):
    """Which usage a discount applies to; an unset key matches everything."""

    family: str | None = None
    instance_type: str | None = None
    region: str | None = None
    capacity_type: CapacityType | None = None

    @model_validator(mode="after")
    def _valid(self) -> Match:
        _check_placement(self.family, self.instance_type, self.region)
        return self

    def specificity(self) -> tuple[bool, bool, bool, bool]:
        """Sort key: an instance type beats a family beats a region beats a capacity type."""
        return (self.instance_type is not None, self.family is not None, self.region is not None,
                self.capacity_type is not None)


class Discount(KubeModel):
    """A negotiated discount (private pricing, EDP): ``percent`` off, or ``usdPerHour`` off, never both."""

    match: Match = Field(default_factory=Match)
    percent: Percent | None = None
    usd_per_hour: UsdPerHour | None = None

    @model_validator(mode="after")
    def _one_amount(self) -> Discount:
        if (self.percent is None) == (self.usd_per_hour is None):
            raise invalid("", "set exactly one of percent (e.g. 10) or usdPerHour (e.g. 0.01)")
        return self

    def apply(self, price: float) -> float:
        """``price`` (USD/hour) after this discount, never below 0."""
        if self.percent is not None:
            return price * (1 - self.percent / 100)
        return max(0.0, price - (self.usd_per_hour or 0.0))


class SavingsPlanRate(KubeModel):
    """A discount rate of a Compute Savings Plan for one family and/or region."""

    family: str | None = None
    region: str | None = None
    discount_percent: Percent

    @model_validator(mode="after")
    def _valid(self) -> SavingsPlanRate:
        _check_placement(self.family, None, self.region)
        if self.family is None and self.region is None:
            raise invalid("", "a rate names a family, a region or both (the plan's discountPercent is the default)")
        return self


class SavingsPlan(KubeModel):
    """A Savings Plan: an hourly commitment (USD of Savings Plan rates) and its discount off on-demand.

    ``Compute`` plans apply to any family in any region; ``EC2Instance`` plans to ``family`` in ``region`` only
    (AWS Savings Plans User Guide, "What are Savings Plans?").
    """

    name: str | None = None
    type: Literal["Compute", "EC2Instance"]
    commitment_usd_per_hour: Annotated[float, Field(gt=0)]
    discount_percent: Percent
    family: str | None = None
    region: str | None = None
    rates: list[SavingsPlanRate] = Field(default_factory=list)

    @model_validator(mode="after")
    def _valid(self) -> SavingsPlan:
        _check_placement(self.family, None, self.region)
        if self.type == "EC2Instance":
            if self.family is None:
                raise invalid("family", "an EC2Instance Savings Plan covers one family: set family, e.g. 'm6i'")
            if self.region is None:
                raise invalid("region", "an EC2Instance Savings Plan covers one region: set region, e.g. 'us-east-1'")
            if self.rates:
                raise invalid("rates", "only Compute Savings Plans have per-family rates; "
                                       "an EC2Instance plan has one discountPercent")
        elif self.family is not None or self.region is not None:
            raise invalid("family" if self.family is not None else "region",
                          "a Compute Savings Plan applies to every family and region: "
                          "use rates for a family's or region's discount")
        return self

    def covers(self, family: str, region: str) -> bool:
        """True when usage of ``family`` in ``region`` is eligible for this plan."""
        if self.type == "EC2Instance":
            return family == self.family and region == self.region
        return True

    def discount(self, family: str, region: str) -> float:
        """The plan's discount off on-demand for ``family`` in ``region``, a fraction in [0, 1)."""
        best: SavingsPlanRate | None = None
        for rate in self.rates:
            if rate.family not in (None, family) or rate.region not in (None, region):
                continue
            if best is None or (rate.family is not None, rate.region is not None) > (
                best.family is not None, best.region is not None
            ):
                best = rate
        return (best.discount_percent if best else self.discount_percent) / 100


class ReservedInstance(KubeModel):
    """``count`` Reserved Instances of ``instanceType``: zonal (``zone``) or regional (``region``).

    ``usdPerHour`` is the amortised hourly cost of one RI (upfront / hours of the term + recurring); it only
    enters the fleet's bill (it is already paid), never a marginal price. Default 0: not counted.
    """

    instance_type: str
    zone: str | None = None
    region: str | None = None
    count: Annotated[int, Field(ge=1)]
    usd_per_hour: UsdPerHour = 0.0

    @model_validator(mode="after")
    def _valid(self) -> ReservedInstance:
        _check_placement(None, self.instance_type, self.region, self.zone)
        if self.zone is None and self.region is None:
            raise invalid("", "set zone (a zonal RI, e.g. 'us-east-1a') or region (a regional RI, e.g. 'us-east-1')")
        return self

    @property
    def family(self) -> str:
        return instance_family(self.instance_type)

    @property
    def scope_region(self) -> str:
        """The RI's region (a zonal RI's region is its zone without the letter)."""
        return self.region or (self.zone or "")[:-1]


class PricingPolicySpec(KubeModel):
    """``spec`` of a PricingPolicy; every list may be empty."""

    discounts: list[Discount] = Field(default_factory=list)
    savings_plans: list[SavingsPlan] = Field(default_factory=list)
    reserved_instances: list[ReservedInstance] = Field(default_factory=list)


class PricingPolicy(KubeModel):
    """The whole document (``apiVersion: nodewright.io/v1alpha1``, ``kind: PricingPolicy``)."""

    api_version: Literal["nodewright.io/v1alpha1"]
    kind: Literal["PricingPolicy"]
    metadata: LenientModel | None = None
    spec: PricingPolicySpec = Field(default_factory=PricingPolicySpec)

    def discount_for(self, instance_type: str, region: str, capacity_type: str) -> Discount | None:
        """The discount that applies to this usage: the most specific match, the first listed among equals."""
        family = instance_family(instance_type)
        best: Discount | None = None
        for rule in self.spec.discounts:
            m = rule.match
            if (m.instance_type not in (None, instance_type) or m.family not in (None, family)
                    or m.region not in (None, region) or m.capacity_type not in (None, capacity_type)):
                continue
            if best is None or m.specificity() > best.match.specificity():
                best = rule
        return best


def parse_pricing_policy(doc: Any, source: str = "") -> PricingPolicy:
    """Validate a decoded PricingPolicy document.

    Raises:
        NodewrightValidationError: ``"<source>: <field path>: <reason>"``.
    """
    try:
        return parse_model(PricingPolicy, doc)
    except NodewrightValidationError as err:
        if not source:
            raise
        raise NodewrightValidationError(f"{source}: {err.path}" if err.path else source, err.reason) from None


def load_pricing_policy(path: str | Path) -> PricingPolicy:
    """Read and validate the PricingPolicy in the YAML file ``path`` (exactly one document).

    Raises:
        NodewrightValidationError: missing file, bad YAML, or an invalid field (path and reason named).
    """
    where = f"{path} (PricingPolicy)"
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise NodewrightValidationError(str(path), f"cannot read the pricing policy: {err.strerror}") from None
    try:
        docs = [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]  # safe: api.manifests
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise NodewrightValidationError(str(path), f"not valid YAML{where}: {problem}") from None
    if len(docs) != 1:
        raise NodewrightValidationError(str(path), f"expected one PricingPolicy document, found {len(docs)}")
    return parse_pricing_policy(docs[0], where)


class PolicyFile:
    """The PricingPolicy at ``path``, re-read when the file changes: how ``nodewright run`` follows the chart's
    ConfigMap (``settings.pricingPolicy``), whose mounted file the kubelet replaces on update.

    :meth:`current` stats the file (following the ConfigMap's ``..data`` symlink) and re-reads it when its
    (inode, size, mtime) changed. A new version that does not validate is not taken: the last good policy stays
    in force, :attr:`error` holds the one-line reason until a good version arrives and one ERROR line is logged
    per bad version (``pricing policy not reloaded, the last valid one stays in force: <file>
    (PricingPolicy): <field>: <why>``), so a typo in the ConfigMap never drops the policy halfway through. A
    good version logs one INFO line. A file that disappears keeps the last good policy too.

    Raises (constructor):
        NodewrightValidationError: the file is missing or invalid at start (the controller exits 2).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.error: str | None = None
        self._stamp = self._stat()
        self._policy = load_pricing_policy(self.path)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def current(self) -> PricingPolicy:
        """The policy in force (the last version that validated)."""
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return self._policy
        self._stamp = stamp
        try:
            self._policy = load_pricing_policy(self.path)
        except NodewrightValidationError as err:
            self.error = str(err)
            _log.error("pricing policy not reloaded, the last valid one stays in force: %s", err)
            return self._policy
        _log.info("pricing policy reloaded from %s", self.path)
        self.error = None
        return self._policy
