"""Node selector requirements with ``minValues`` (Karpenter's NodeSelectorRequirementWithMinValues).

Rules (Karpenter v1 CRD CEL rules and ``ValidateRequirement``):
- operator is one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte;
- In needs at least one value; Exists/DoesNotExist take no values;
- Gt, Lt, Gte, Lte take exactly one non-negative integer;
- In/NotIn values are valid label values;
- minValues is 1..50 and, with In, at most the number of values;
- the key is a qualified name and never ``kubernetes.io/hostname``.
NodePool-only key restrictions (``karpenter.sh/nodepool``, reserved domains) live in
:mod:`nodewright.api.nodepool`, because a NodeClaim's requirements do carry the nodepool key.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator, model_validator

from nodewright.api import labels
from nodewright.api.base import LABEL_VALUE_SCHEMA, KubeModel, QualifiedName, cel, check_label_value, invalid

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
OPERATORS: tuple[str, ...] = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
NUMERIC_OPERATORS: frozenset[str] = frozenset({"Gt", "Lt", "Gte", "Lte"})
MAX_REQUIREMENTS = 100


def _coerce_values(value: object) -> object:
    # YAML reads `values: [8]` as integers; Kubernetes wants strings.
    if isinstance(value, list):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


def check_operator_values(op: str, values: list[str]) -> None:
    """The operator/values rules every node selector requirement shares (NodePool, NodeClaim, NodeOverlay):
    In needs values, Exists/DoesNotExist take none,
    Gt/Lt/Gte/Lte take one non-negative integer, every value is a label value.

    Raises:
        PydanticCustomError: naming ``values`` or ``values[i]`` and the reason (inside a model validator).
    """
    if op == "In" and not values:
        raise invalid("values", "In needs at least one value")
    if op in ("Exists", "DoesNotExist") and values:
        raise invalid("values", f"{op} takes no values, got {values!r}")
    if op in NUMERIC_OPERATORS:
        if len(values) != 1:
            raise invalid("values", f"{op} needs one integer, got {len(values)} values")
        if not values[0].isdigit():
            raise invalid("values", f"{op} needs one integer, got {values[0]!r}")
    for i, value in enumerate(values):
        try:
            check_label_value(value)
        except ValueError as err:
            raise invalid(f"values[{i}]", str(err)) from None


class Requirement(KubeModel):
    """One requirement on node labels: ``key operator values`` with optional ``minValues``.

    ``values`` are strings even for numeric labels (``instance-cpu: ["8"]``); integers in YAML are
    accepted and turned into strings. ``min_values`` asks the launch to keep at least that many
    distinct values of ``key`` among its candidate instance types (flexibility for spot).
    """

    model_config = cel(
        ("self.key != 'kubernetes.io/hostname'", "label 'kubernetes.io/hostname' is restricted"),
        ("self.operator != 'In' || (has(self.values) && self.values.size() != 0)",
         "requirements with operator 'In' must have a value defined"),
        ("!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || self.values.size() == 0",
         "requirements with operator 'Exists' or 'DoesNotExist' must not have values"),
        ("!(self.operator in ['Gt', 'Lt', 'Gte', 'Lte']) || (has(self.values) && self.values.size() == 1 "
         "&& self.values[0].matches('^[0-9]+$'))",
         "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"),
        ("!(self.operator == 'In' && has(self.minValues)) || self.values.size() >= self.minValues",
         "requirements with 'minValues' must have at least that many values specified in the 'values' field"),
    )

    key: QualifiedName
    operator: Operator
    # Label-value syntax is checked in _check_values, after the operator rules, so that
    # "Gt needs one integer" wins over "not a label value" for values like "-1".
    values: Annotated[list[Annotated[str, WithJsonSchema(LABEL_VALUE_SCHEMA)]], BeforeValidator(_coerce_values)] | None = None
    min_values: int | None = Field(default=None, ge=1, le=50)

    @field_validator("key")
    @classmethod
    def _not_hostname(cls, key: str) -> str:
        if key == labels.HOSTNAME:
            raise ValueError(f"{key!r} is restricted: Karpenter picks the hostname")
        return key

    @model_validator(mode="after")
    def _check_values(self) -> Requirement:
        values = self.values or []
        op = self.operator
        check_operator_values(op, values)
        if self.min_values is not None and op == "In" and len(values) < self.min_values:
            raise invalid(
                "minValues",
                f"minValues {self.min_values} needs at least that many values, got {len(values)}",
            )
        return self

    def integer_value(self) -> int:
        """The single integer of a Gt/Lt/Gte/Lte requirement.

        Raises:
            ValueError: for any other operator.
        """
        if self.operator not in NUMERIC_OPERATORS or not self.values:
            raise ValueError(f"{self.operator} requirement has no integer bound")
        return int(self.values[0])
