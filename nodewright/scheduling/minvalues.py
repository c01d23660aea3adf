"""``minValues``: how many distinct values of a key a NodeClaim's candidate instance types must offer.

Karpenter's rule (``cloudprovider.InstanceTypes.SatisfiesMinValues``, ``Truncate``; read for behaviour): for every
requirement with ``minValues``, the candidate instance types of a launch together carry at least that many values
of its key, counted over each type's own requirements. A key is counted as follows (one :class:`Flexibility` per
NodePool, as the pool's requirements decide which offerings count):

- a label the type carries (``instance-family``, ``instance-cpu``, ``node.kubernetes.io/instance-type``, ...): its
  value;
- zone, capacity type and zone id: the values of the type's available offerings that the NodePool allows (so a
  pool asking ``zone In [a, b, e]`` with ``minValues: 3`` is not met by types offered in a and b only, while a
  topology spread that pins one NodeClaim to one zone does not break it);
- an instance-type label the type lacks (``instance-gpu-name`` on a CPU type): no value;
- any other key (a custom label such as ``team``): the type does not constrain it, so it offers every value the
  NodePool allows (the ``In`` values; unlimited for ``Exists``/``NotIn``). Karpenter's instance types carry no
  custom keys, so such a ``minValues`` can never be met there; issue 14 asks that it work on any key.

With ``MinValuesPolicy=Strict`` (Karpenter's default) a NodeClaim whose candidates miss a ``minValues`` is not
launched and the pod's reason says ``minValues requirement is not met for label(s) ...``. With ``BestEffort`` the
requirement is relaxed to what the candidates meet (:meth:`Requirements.with_min_values`) and the NodeClaim is
annotated ``karpenter.sh/nodeclaim-min-values-relaxed: "true"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from nodewright.api import labels as wk
from nodewright.scheduling.requirements import INSTANCE_TYPE_KEYS, OFFERING_KEYS, Requirements

if TYPE_CHECKING:
    from nodewright.scheduling.nodeclaimtemplate import TypeInfo

#: Karpenter's ``MinValuesPolicy`` that relaxes a ``minValues`` the candidates miss (``MIN_VALUES_POLICY``; the
#: default, ``Strict``, refuses such a NodeClaim). The setting is validated in :mod:`nodewright.settings`.
BEST_EFFORT = "BestEffort"

Values = frozenset[str] | None  # None: every value (the type does not constrain the key)


class Flexibility:
    """Counts ``minValues`` keys over candidate instance types of one NodePool (see the module docstring)."""

    __slots__ = ("reqs", "_values")

    def __init__(self, reqs: Requirements) -> None:
        self.reqs = reqs
        self._values: dict[tuple[str, str], Values] = {}

    def values(self, info: TypeInfo, key: str) -> Values:
        """The values of ``key`` a node of ``info`` from this pool can have (None: unlimited); cached."""
        cache_key = (key, info.name)
        if cache_key in self._values:
            return self._values[cache_key]
        found: Values
        value = info.labels.get(key)
        if value is not None:
            found = frozenset({value})
        elif key in OFFERING_KEYS:
            zone, ct, zid = self.reqs.get(wk.ZONE), self.reqs.get(wk.CAPACITY_TYPE), self.reqs.get(wk.ZONE_ID)
            seen = set()
            for o in info.it.offerings:
                if not o.available or (zone is not None and not zone.has(o.zone)):
                    continue
                if (ct is not None and not ct.has(o.capacity_type)) or (zid is not None and o.zone_id
                                                                        and not zid.has(o.zone_id)):
                    continue
                v = o.zone if key == wk.ZONE else o.capacity_type if key == wk.CAPACITY_TYPE else o.zone_id
                if v:
                    seen.add(v)
            found = frozenset(seen)
        elif key in INSTANCE_TYPE_KEYS:
            found = frozenset()
        else:
            req = self.reqs.get(key)
            found = None if req is None or req.complement else req.values
        self._values[cache_key] = found
        return found

    def union(self, infos: Sequence[TypeInfo], key: str) -> Values:
        """The values of ``key`` over ``infos`` (None: unlimited)."""
        out: set[str] = set()
        for info in infos:
            v = self.values(info, key)
            if v is None:
                return None
            out |= v
        return frozenset(out)

    def unmet(self, candidates: Sequence[TypeInfo], min_values: Mapping[str, int]) -> dict[str, int]:
        """key -> distinct values ``candidates`` offer, for each key of ``min_values`` they fall short of
        (empty: every ``minValues`` is met)."""
        out: dict[str, int] = {}
        for key, need in min_values.items():
            have = self.union(candidates, key)
            if have is not None and len(have) < need:
                out[key] = len(have)
        return out

    def needed(self, ordered: Sequence[TypeInfo], min_values: Mapping[str, int]) -> int | None:
        """How many of the first types of ``ordered`` meet every ``minValues`` (Karpenter's
        ``minNeededInstanceTypes``); None when all of them do not."""
        for n in range(1, len(ordered) + 1):
            if not self.unmet(ordered[:n], min_values):
                return n
        return None

    def truncate(self, ordered: Sequence[TypeInfo], limit: int, min_values: Mapping[str, int]) -> list[TypeInfo]:
        """The first ``limit`` of ``ordered`` (cheapest first), swapping in the cheapest later types that add a
        missing value of a ``minValues`` key in place of the most expensive kept ones whose values the others
        still cover (Karpenter truncates to 60 while keeping minValues satisfiable)."""
        kept = list(ordered[:limit])
        if not min_values or not self.unmet(kept, min_values):
            return kept
        for key, need in min_values.items():
            for info in ordered[limit:]:
                have = self.union(kept, key)
                if have is None or len(have) >= need:
                    break
                added = self.values(info, key)
                if added is not None and added <= have:
                    continue
                for i in range(len(kept) - 1, -1, -1):
                    others = self.union(kept[:i] + kept[i + 1:], key)
                    mine = self.values(kept[i], key)
                    if others is not None and mine is not None and mine <= others:
                        kept[i] = info
                        break
        return kept


def unmet_reason(unmet: Mapping[str, int], min_values: Mapping[str, int]) -> str:
    """Karpenter's sentence for a ``minValues`` its candidates miss, with the counts:
    ``minValues requirement is not met for label(s) [key (2 of 3 values)]``."""
    shown = ", ".join(f"{key} ({unmet[key]} of {min_values[key]} values)" for key in sorted(unmet))
    return f"minValues requirement is not met for label(s) [{shown}]"


def relaxed(template_min_values: Mapping[str, int], reqs: Requirements) -> bool:
    """True when ``reqs`` (a NodeClaim's) ask for fewer values of some key than its NodePool does (BestEffort
    relaxed it): Karpenter's ``karpenter.sh/nodeclaim-min-values-relaxed``."""
    for key, need in template_min_values.items():
        req = reqs.get(key)
        if req is not None and (req.min_values or 0) < need:
            return True
    return False
