"""Kubernetes resource quantities as integers, and small resource-map arithmetic (the one implementation).

Canonical units (shared with :mod:`nodewright.cloud.instancetype`): ``cpu`` in millicores, ``memory`` and
``ephemeral-storage`` in bytes, every other resource (``pods``, ``nvidia.com/gpu``, ...) as an integer count.
Parsing follows the Kubernetes ``resource.Quantity`` grammar (``k8s.io/apimachinery`` ``quantity.go``): a
signed decimal number followed by at most one of a binary suffix ``Ki Mi Gi Ti Pi Ei``, a decimal suffix
``n u m k M G T P E`` or a decimal exponent (``1e3``). Fractions are rounded up, as the API server does when it
canonicalises a quantity to the resource's smallest unit.

This module is neutral (no import from ``nodewright.scheduling``, ``nodewright.cloud`` or ``nodewright.api``):
the scheduler, the catalog's allocatable computation and the API models all use it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from nodewright.errors import NodewrightValidationError

Resources = dict[str, int]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

#: The quantity grammar as one regular expression (also the JSON-schema ``pattern`` of quantity fields).
QUANTITY_PATTERN = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$"

_SUFFIXES: dict[str, Decimal] = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
# QUANTITY_PATTERN with the number and the suffix/exponent captured.
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")
_CACHE: dict[tuple[str, str], int] = {}


def is_quantity(text: str) -> bool:
    """True when ``text`` follows the quantity grammar (sign allowed; the value is not checked)."""
    return _QUANTITY.match(text) is not None


def parse_quantity(value: object, resource: str = MEMORY, path: str = "") -> int:
    """Parse a quantity into the canonical integer unit of ``resource``.

    Args:
        value: ``"500m"``, ``"1.5"``, ``"4Gi"``, ``2`` (YAML integers) ...
        resource: the resource name; ``cpu`` yields millicores, anything else the base unit.
        path: field path used in the error.

    Returns:
        Millicores for ``cpu``; bytes for memory/storage; counts otherwise (rounded up).

    Raises:
        NodewrightValidationError: ``value`` is not a quantity or is negative.
    """
    text = str(value).strip() if not isinstance(value, bool) else ""
    key = (text, resource)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    match = _QUANTITY.match(text)
    if not match:
        raise NodewrightValidationError(path, f"{value!r} is not a quantity like '500m', '2' or '4Gi'")
    suffix = match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E") and len(suffix) > 1 and suffix != "Ei":  # "Ei" is exbibytes, not an exponent
            number = Decimal(match.group(1)) * Decimal(10) ** int(suffix[1:])
        else:
            number = Decimal(match.group(1)) * _SUFFIXES[suffix]
    except InvalidOperation:
        raise NodewrightValidationError(path, f"{value!r} is not a quantity like '500m', '2' or '4Gi'") from None
    if number < 0:
        raise NodewrightValidationError(path, f"{value!r} is negative")
    if resource == CPU:
        number *= 1000
    result = int(math.ceil(number))
    if len(_CACHE) < 10_000:
        _CACHE[key] = result
    return result


def parse_resource_list(values: Mapping[str, object] | None, path: str = "") -> Resources:
    """Parse a Kubernetes ``ResourceList`` (``{"cpu": "1", "memory": "1Gi"}``) into canonical integers.

    Raises:
        NodewrightValidationError: one of the quantities is invalid (path ``<path>.<resource>``).
    """
    out: Resources = {}
    for name, raw in (values or {}).items():
        out[str(name)] = parse_quantity(raw, str(name), f"{path}.{name}" if path else str(name))
    return out


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """Per-resource sum of two maps."""
    out = dict(a)
    for name, qty in b.items():
        out[name] = out.get(name, 0) + qty
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """Per-resource ``a - b`` (may go negative; callers decide)."""
    out = dict(a)
    for name, qty in b.items():
        out[name] = out.get(name, 0) - qty
    return out


def maximum(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """Per-resource maximum of two maps."""
    out = dict(a)
    for name, qty in b.items():
        if qty > out.get(name, 0):
            out[name] = qty
    return out


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """True when every requested quantity is within ``available`` (missing resources count as 0)."""
    for name, qty in requests.items():
        if qty > 0 and qty > available.get(name, 0):
            return False
    return True


def is_byte_resource(resource: str) -> bool:
    """Whether ``resource`` is counted in bytes (``memory``, ``ephemeral-storage``, ``hugepages-*``)."""
    return resource in (MEMORY, EPHEMERAL_STORAGE) or resource.startswith("hugepages-")


def format_quantity(resource: str, value: int) -> str:
    """A canonical integer as the Kubernetes quantity the API server would print (the one formatter).

    cpu millicores: ``2000`` -> ``"2"``, ``1780`` -> ``"1780m"``; bytes: the largest binary suffix that divides
    exactly (``3615490048`` -> ``"3448Mi"``, ``4294967296`` -> ``"4Gi"``), else plain bytes (``"100000000"``),
    never rounded, so a manifest written from it parses back to the same integer; counts: ``"110"``.
    """
    if resource == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if is_byte_resource(resource):
        for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20),
                               ("Ki", 2**10)):
            if value and value % factor == 0:
                return f"{value // factor}{suffix}"
    return str(value)


def format_resource_list(resources: Mapping[str, int]) -> dict[str, str]:
    """``{resource: quantity string}`` sorted by resource name (a Kubernetes ``ResourceList``)."""
    return {name: format_quantity(name, value) for name, value in sorted(resources.items())}


def format_resources(resources: Mapping[str, int]) -> str:
    """Karpenter's log spelling: ``{cpu: 1780m, memory: 3448Mi, pods: 9}`` (cpu, memory, pods first)."""
    order = [CPU, MEMORY, PODS] + sorted(k for k in resources if k not in (CPU, MEMORY, PODS))
    parts = []
    for name in order:
        if name not in resources:
            continue
        parts.append(f"{name}: {format_quantity(name, resources[name])}")
    return "{" + ", ".join(parts) + "}"
