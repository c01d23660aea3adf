"""Taints and tolerations (core/v1 semantics, as the kube-scheduler and Karpenter apply them).

- A toleration with an empty ``effect`` matches every effect; operator ``Exists`` ignores the value and, with
  an empty key, matches every taint; operator ``Equal`` (the default) needs key and value equal.
- ``NoSchedule`` and ``NoExecute`` taints must be tolerated. ``PreferNoSchedule`` taints must be tolerated
  too until preference relaxation adds an ``Exists``/``PreferNoSchedule`` toleration (Karpenter's
  ``toleratePreferNoScheduleTaints``), so pods first avoid such pools, then may use them.
- Startup taints of a NodePool are ignored for placement (they are removed by an agent after boot).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint ``key[=value]:effect``."""

    key: str
    effect: str
    value: str = ""

    def to_dict(self) -> dict[str, str]:
        """Kubernetes spelling (``value`` omitted when empty)."""
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (``operator`` is ``Equal`` or ``Exists``; empty ``effect`` matches all effects)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """True when this toleration matches ``taint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


#: Added by preference relaxation: tolerate every PreferNoSchedule taint.
TOLERATE_PREFER_NO_SCHEDULE = Toleration(operator="Exists", effect=PREFER_NO_SCHEDULE)


def taint_from_dict(doc: Mapping[str, Any]) -> Taint:
    """From ``{"key", "value"?, "effect"}``."""
    return Taint(key=str(doc.get("key", "")), effect=str(doc.get("effect", "")), value=str(doc.get("value") or ""))


def toleration_from_dict(doc: Mapping[str, Any]) -> Toleration:
    """From ``{"key"?, "operator"?, "value"?, "effect"?}`` (operator defaults to Equal)."""
    return Toleration(
        key=str(doc.get("key") or ""),
        operator=str(doc.get("operator") or "Equal"),
        value=str(doc.get("value") or ""),
        effect=str(doc.get("effect") or ""),
    )


def untolerated(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first taint that blocks scheduling and is not tolerated, or None.

    Every effect counts, PreferNoSchedule included (see module docstring for the relaxation).
    """
    tols = tuple(tolerations)
    for taint in taints:
        if not any(t.tolerates(taint) for t in tols):
            return taint
    return None
