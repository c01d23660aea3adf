"""CEL expressions in EC2NodeClass kubelet fields, evaluated per instance type (Karpenter AWS provider v1.15).

``spec.kubelet.maxPods`` may be an integer or a CEL expression string; each value of ``kubeReserved`` and
``systemReserved`` may be a Kubernetes quantity (``"100Mi"``) or a CEL expression (any value that does not parse
as a quantity). An expression is evaluated once per instance type with these variables (all ``int`` but
``instance_type``):

| variable | value |
|---|---|
| ``instance_type`` | the EC2 type name (``"m5.large"``) |
| ``vcpus`` | ``VCpuInfo.DefaultVCpus`` |
| ``memory_mib`` | ``MemoryInfo.SizeInMiB`` |
| ``default_enis`` | ``NetworkInfo.MaximumNetworkInterfaces`` of the default network card |
| ``ips_per_eni`` | ``NetworkInfo.Ipv4AddressesPerInterface`` |
| ``max_pods`` | in ``maxPods``: the density without an override (ENI-limited, 110 on Windows); in ``kubeReserved`` / ``systemReserved``: the resolved ``maxPods`` of the type |

An expression returns a bare int or double (doubles are truncated; NaN/Inf and negative results are errors;
``maxPods`` must fit an int32). Reserved values take the unit the field's quantities use, rounded **up**:
``cpu`` millicores to a multiple of 10m, ``memory`` MiB to a multiple of 16Mi, ``ephemeral-storage`` GiB,
``pid`` a count. Functions: CEL's operators, ``int()``, ``double()``, the conditional, and two-argument
``max(a, b)`` / ``min(a, b)``.

Expressions are behind the AWS gate ``NodeClassCEL`` (``AWS_FEATURE_GATES``, off by default): while it is off an
EC2NodeClass that uses one is not Ready (reason ``KubeletExpressionsDisabled``). An expression that does not
compile, names an unknown variable or returns neither int nor double is ``KubeletExpressionInvalid``; one that
fails on some instance type is ``KubeletExpressionEvalFailed`` (:func:`validate`).

Source: aws/karpenter-provider-aws ``pkg/cel`` and the "Dynamic Kubelet Configuration via Expressions" section
of the EC2NodeClass docs (#9326, #9508). The CEL engine is the ``common-expression-language`` package.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import cel

from nodewright.errors import NodewrightValidationError
from nodewright.quantities import parse_quantity

VARIABLES = ("instance_type", "vcpus", "memory_mib", "default_enis", "ips_per_eni", "max_pods")
RESERVED_FIELDS = ("kubeReserved", "systemReserved")
_INT32_MAX = 2**31 - 1
_PROBE = {"instance_type": "m5.large", "vcpus": 2, "memory_mib": 8192, "default_enis": 3, "ips_per_eni": 10,
          "max_pods": 29}


class KubeletExpressionError(NodewrightValidationError):
    """A kubelet expression that cannot be used. ``reason`` is the EC2NodeClass condition reason
    (``KubeletExpressionInvalid`` or ``KubeletExpressionEvalFailed``); the path names the field."""

    def __init__(self, path: str, message: str, reason: str) -> None:
        super().__init__(path, message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class TypeVars:
    """The variables of one instance type (see the module table)."""

    instance_type: str
    vcpus: int
    memory_mib: int
    default_enis: int
    ips_per_eni: int
    max_pods: int

    @classmethod
    def from_record(cls, record: Mapping[str, Any], max_pods: int) -> TypeVars:
        """From a ``DescribeInstanceTypes`` record (the catalog's or a live answer's)."""
        network = record.get("NetworkInfo") or {}
        cards = network.get("NetworkCards") or []
        default_card = network.get("DefaultNetworkCardIndex", 0)
        enis = next((c.get("MaximumNetworkInterfaces") for c in cards if c.get("NetworkCardIndex") == default_card),
                    network.get("MaximumNetworkInterfaces", 0))
        return cls(instance_type=str(record.get("InstanceType", "")),
                   vcpus=int((record.get("VCpuInfo") or {}).get("DefaultVCpus", 0)),
                   memory_mib=int((record.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
                   default_enis=int(enis or 0), ips_per_eni=int(network.get("Ipv4AddressesPerInterface", 0)),
                   max_pods=int(max_pods))


def is_expression(value: Any) -> bool:
    """True for a ``kubeReserved``/``systemReserved`` value that is not a quantity (so it is an expression)."""
    if not isinstance(value, str):
        return False
    try:
        parse_quantity(value)
    except (ValueError, NodewrightValidationError):
        return True
    return False


def _max(a: Any, b: Any) -> Any:
    return a if a > b else b


def _min(a: Any, b: Any) -> Any:
    return a if a < b else b


def _context(variables: Mapping[str, Any]) -> cel.Context:
    return cel.Context(variables=dict(variables), functions={"max": _max, "min": _min})


@lru_cache(maxsize=1024)
def _compiled(expression: str) -> Any:
    return cel.compile(expression)


def check(path: str, expression: str) -> None:
    """Compile-time check of one expression: it parses, names only :data:`VARIABLES` (and ``max``/``min``), and
    returns an int or a double (judged on a probe instance type).

    Raises:
        KubeletExpressionError: reason ``KubeletExpressionInvalid``.
    """
    try:
        program = _compiled(expression)
    except Exception as err:  # the engine raises ValueError/RuntimeError subclasses of its own
        raise KubeletExpressionError(path, f"expression {expression!r} does not compile: {_first_line(err)}",
                                     "KubeletExpressionInvalid") from err
    unknown = sorted(set(program.variables()) - set(VARIABLES)) if callable(getattr(program, "variables", None)) \
        else []
    if unknown:
        raise KubeletExpressionError(
            path, f"expression {expression!r} names unknown variable(s) {', '.join(unknown)}; available: "
                  f"{', '.join(VARIABLES)}", "KubeletExpressionInvalid")
    try:
        probe = program.execute(_context(_PROBE))
    except Exception as err:
        raise KubeletExpressionError(path, f"expression {expression!r} is not valid: {_first_line(err)}",
                                     "KubeletExpressionInvalid") from err
    if isinstance(probe, bool) or not isinstance(probe, int | float):
        raise KubeletExpressionError(path, f"expression {expression!r} must return int or double, not "
                                           f"{type(probe).__name__}", "KubeletExpressionInvalid")


def evaluate(path: str, expression: str, variables: TypeVars) -> int:
    """The expression's value on one instance type, truncated to an integer.

    Raises:
        KubeletExpressionError: ``KubeletExpressionInvalid`` (see :func:`check`) or ``KubeletExpressionEvalFailed``
            (an evaluation error, a non-finite or negative result), naming ``path`` and the instance type.
    """
    check(path, expression)
    where = f"on {variables.instance_type}" if variables.instance_type else ""
    try:
        value = _compiled(expression).execute(_context(
            {name: getattr(variables, name) for name in VARIABLES}))
    except Exception as err:
        raise KubeletExpressionError(path, f"expression {expression!r} fails {where}: {_first_line(err)}",
                                     "KubeletExpressionEvalFailed") from err
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise KubeletExpressionError(path, f"expression {expression!r} returns {value} {where}",
                                     "KubeletExpressionEvalFailed")
    result = int(value)
    if result < 0:
        raise KubeletExpressionError(path, f"expression {expression!r} returns {result} {where}; it must not be "
                                           "negative", "KubeletExpressionEvalFailed")
    return result


def resolve_max_pods(value: int | str | None, variables: TypeVars) -> int | None:
    """``maxPods`` for one type: the integer as given, an expression's value (int32), or None (not set)."""
    if value is None or isinstance(value, int):
        return value
    result = evaluate("kubelet.maxPods", value, variables)
    if result > _INT32_MAX:
        raise KubeletExpressionError("kubelet.maxPods", f"expression {value!r} returns {result} on "
                                                        f"{variables.instance_type}, over the int32 range",
                                     "KubeletExpressionEvalFailed")
    return result


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def resolve_reserved(field: str, values: Mapping[str, Any], variables: TypeVars) -> dict[str, Any]:
    """``kubeReserved``/``systemReserved`` for one type: quantities kept, each expression turned into the
    quantity of its unit (``cpu`` -> ``"480m"``, ``memory`` -> ``"640Mi"``, ``ephemeral-storage`` -> ``"3Gi"``,
    ``pid`` -> ``"4096"``)."""
    resolved: dict[str, Any] = {}
    for resource, value in values.items():
        if not is_expression(value):
            resolved[resource] = value
            continue
        amount = evaluate(f"kubelet.{field}.{resource}", value, variables)
        if resource == "cpu":
            resolved[resource] = f"{_round_up(amount, 10)}m"
        elif resource == "memory":
            resolved[resource] = f"{_round_up(amount, 16)}Mi"
        elif resource == "ephemeral-storage":
            resolved[resource] = f"{amount}Gi"
        else:
            resolved[resource] = str(amount)
    return resolved


def expressions(max_pods: Any, kube_reserved: Mapping[Any, Any], system_reserved: Mapping[Any, Any]
                ) -> dict[str, str]:
    """Field path -> expression of every expression among these settings (empty: all static)."""
    found: dict[str, str] = {}
    if isinstance(max_pods, str):
        found["kubelet.maxPods"] = max_pods
    for field, values in (("kubeReserved", kube_reserved), ("systemReserved", system_reserved)):
        for resource, value in (values or {}).items():
            if is_expression(value):
                found[f"kubelet.{field}.{resource}"] = str(value)
    return found


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]
