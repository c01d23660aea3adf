"""``NodeOverlay`` (``karpenter.sh/v1alpha1``): price and capacity overrides for the instance types a selector matches.

Follows Karpenter main (2026-08-20) ``pkg/apis/v1alpha1/nodeoverlay*.go`` and its CRD:

- ``spec.requirements`` (required, may be empty, at most 100): node selector requirements without ``minValues``;
  In and NotIn need values, Exists/DoesNotExist take none, Gt/Lt/Gte/Lte one non-negative integer. Keys: any
  qualified name but ``kubernetes.io/hostname``; under ``karpenter.sh`` only ``karpenter.sh/capacity-type`` and
  ``karpenter.sh/nodepool`` (CRD rule); other restricted domains (``karpenter.k8s.aws``) only for well-known labels
  (Karpenter's runtime validation, ``ValidateRequirement``).
- ``spec.price`` (``"5.00"``: an absolute USD/hour) or ``spec.priceAdjustment`` (``"+10%"``, ``"-15%"`` down to
  ``"-100%"``, ``"+0.5"``, ``"-0.25"``), never both.
- ``spec.capacity``: extended resources added to the type (never ``cpu``, ``memory``, ``ephemeral-storage``,
  ``pods``).
- ``spec.weight`` 1..10000 (unset counts as 0): higher wins; equal weights conflict (:mod:`nodewright.cloud.overlay`).

A manifest that breaks one of these is refused by the CRD (CEL rules and patterns below, the API server's
checks) or, for what only runtime validation catches, fails :func:`nodewright.api.manifests.parse_nodeoverlay`
with the field's path; the NodeOverlay controller reports it as ``ValidationSucceeded=False``, reason
``RuntimeValidation``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator, model_validator

from nodewright.api import labels
from nodewright.api.base import (
    LABEL_VALUE_SCHEMA,
    Condition,
    KubeModel,
    LenientModel,
    ObjectMeta,
    QualifiedName,
    Quantity,
    cel,
    cel_field,
    invalid,
)
from nodewright.api.requirements import MAX_REQUIREMENTS, Operator, _coerce_values, check_operator_values

API_VERSION = "karpenter.sh/v1alpha1"
#: Karpenter's patterns, verbatim (``+kubebuilder:validation:Pattern``): the API server and the model check the same.
PRICE_PATTERN = r"^\d+(\.\d+)?$"
PRICE_ADJUSTMENT_PATTERN = r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
#: Resources an overlay may not set (Karpenter ``v1.WellKnownResources``): capacity adds extended resources only.
RESTRICTED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
MAX_WEIGHT = 10_000


def check_overlay_key(key: str) -> str | None:
    """Why ``key`` may not be a NodeOverlay requirement key, or None: as a NodePool's
    (:func:`nodewright.api.labels.is_restricted_label`) except that ``karpenter.sh/nodepool`` is allowed."""
    if key == labels.NODEPOOL:
        return None
    return labels.is_restricted_label(key)


class OverlayRequirement(KubeModel):
    """One requirement of ``spec.requirements``: ``key operator values`` (Karpenter's v1alpha1
    ``NodeSelectorRequirement``: no ``minValues``). Integers in YAML values become strings."""

    model_config = cel(
        ("self.key != 'kubernetes.io/hostname'", 'label "kubernetes.io/hostname" is restricted'),
        ("self.key in ['karpenter.sh/capacity-type', 'karpenter.sh/nodepool'] || "
         "!(self.key.split('/')[0] == 'karpenter.sh' || self.key.split('/')[0].endsWith('.karpenter.sh'))",
         'label domain "karpenter.sh" is restricted'),
        ("!(self.operator in ['In', 'NotIn']) || (has(self.values) && self.values.size() != 0)",
         "requirements with operator 'In' or 'NotIn' must have a value defined"),
        ("!(self.operator in ['Gt', 'Lt', 'Gte', 'Lte']) || (has(self.values) && self.values.size() == 1 "
         "&& self.values[0].matches('^[0-9]+$'))",
         "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"),
    )

    key: QualifiedName
    operator: Operator
    values: Annotated[list[Annotated[str, WithJsonSchema(LABEL_VALUE_SCHEMA)]],
                      BeforeValidator(_coerce_values)] | None = None

    @field_validator("key")
    @classmethod
    def _allowed_key(cls, key: str) -> str:
        reason = check_overlay_key(key)
        if reason:
            raise ValueError(reason)
        return key

    @model_validator(mode="after")
    def _check_values(self) -> OverlayRequirement:
        values = self.values or []
        if self.operator == "NotIn" and not values:
            raise invalid("values", "NotIn needs at least one value")
        check_operator_values(self.operator, values)
        return self

    def as_expression(self) -> dict[str, object]:
        """``{"key", "operator", "values"}``, the scheduler's requirement input."""
        return {"key": self.key, "operator": self.operator, "values": list(self.values or [])}


class NodeOverlaySpec(KubeModel):
    """requirements select instance types (and offerings, by zone and capacity type) of every NodePool; price sets
    their offerings' price or priceAdjustment changes it; capacity adds extended resources; weight orders overlays
    (higher wins, equal weights that overlap conflict)."""

    model_config = cel(("!has(self.price) || !has(self.priceAdjustment)",
                        "cannot set both 'price' and 'priceAdjustment'"))

    requirements: list[OverlayRequirement] = Field(max_length=MAX_REQUIREMENTS)
    price_adjustment: Annotated[str, WithJsonSchema({"type": "string", "pattern": PRICE_ADJUSTMENT_PATTERN})] | None = None
    price: Annotated[str, WithJsonSchema({"type": "string", "pattern": PRICE_PATTERN})] | None = None
    capacity: dict[str, Quantity] | None = Field(default=None, json_schema_extra=cel_field(
        ("self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))", "invalid resource restricted")))
    weight: int | None = Field(default=None, ge=1, le=MAX_WEIGHT)

    @field_validator("price_adjustment")
    @classmethod
    def _adjustment(cls, value: str | None) -> str | None:
        if value is not None and not re.match(PRICE_ADJUSTMENT_PATTERN, value):
            raise ValueError(f"{value!r} is not a price adjustment: use '+10%', '-15%' (down to '-100%'), "
                             "'+0.5' or '-0.25' (USD/hour)")
        return value

    @field_validator("price")
    @classmethod
    def _price(cls, value: str | None) -> str | None:
        if value is not None and not re.match(PRICE_PATTERN, value):
            raise ValueError(f"{value!r} is not a price: an unsigned decimal such as '0.42' (USD/hour)")
        return value

    @field_validator("capacity")
    @classmethod
    def _extended_only(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name in value or {}:
            if name in RESTRICTED_RESOURCES:
                raise invalid(f"[{name}]", f"{name!r} is restricted: capacity adds extended resources only "
                                           f"(never {', '.join(RESTRICTED_RESOURCES)})")
        return value

    @model_validator(mode="after")
    def _exclusive(self) -> NodeOverlaySpec:
        if self.price is not None and self.price_adjustment is not None:
            raise invalid("priceAdjustment", "cannot set both 'price' and 'priceAdjustment'")
        return self


class NodeOverlayStatus(LenientModel):
    """``status``: ``ValidationSucceeded`` and ``Ready`` conditions (the NodeOverlay controller writes them)."""

    conditions: list[Condition] | None = None


class NodeOverlay(KubeModel):
    """A ``karpenter.sh/v1alpha1`` NodeOverlay; build from a manifest with
    :func:`nodewright.api.manifests.parse_nodeoverlay`."""

    api_version: Literal["karpenter.sh/v1alpha1"] = Field(default="karpenter.sh/v1alpha1", alias="apiVersion")
    kind: Literal["NodeOverlay"] = "NodeOverlay"
    metadata: ObjectMeta
    spec: NodeOverlaySpec
    status: NodeOverlayStatus | None = None

    @model_validator(mode="after")
    def _named(self) -> NodeOverlay:
        if not self.metadata.name:
            raise invalid("metadata.name", "required field is missing")
        return self

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name or ""

    @property
    def weight(self) -> int:
        """``spec.weight``, 0 when unset (Karpenter ``lo.FromPtr``)."""
        return self.spec.weight or 0


__all__ = ["API_VERSION", "NodeOverlay", "NodeOverlaySpec", "NodeOverlayStatus", "OverlayRequirement",
           "check_overlay_key"]
