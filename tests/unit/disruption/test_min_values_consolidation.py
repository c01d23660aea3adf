"""Consolidation keeps a NodePool's ``minValues``: the strictly cheaper replacement types must still offer enough
distinct values (Karpenter's ``RemoveInstanceTypeOptionsByPriceAndMinValues``), and a spot-to-spot replacement
launches as many of the cheapest types as ``minValues`` needs when that is more than 15."""

from __future__ import annotations

import dataclasses

from nodewright.api import labels as L
from nodewright.disruption import decide
from nodewright.disruption.model import Pool
from nodewright.scheduling import Requirement

from .helpers import LARGE, MEDIUM, NOW, cluster, itype, node, pod, pool

TWO_FAMILIES = Requirement(L.INSTANCE_FAMILY, True, (), min_values=2)


def _with_min_values(p: Pool, req: Requirement = TWO_FAMILIES) -> Pool:
    spec = dataclasses.replace(p.spec, requirements=p.spec.requirements.with_requirement(req))
    return dataclasses.replace(p, spec=spec)


def test_replacement_keeps_two_families() -> None:
    other = itype("d.medium", 4, 8, 0.30)  # family d, cheaper than the c.large candidate
    candidate = node("big", LARGE, [pod("a-0", 3000)])
    d = decide(cluster([candidate], [_with_min_values(pool(types=[MEDIUM, other, LARGE]))]), NOW)
    assert d is not None and d.method == "single-node-consolidation"
    plan = d.replacements[0]
    assert [it.name for it in plan.instance_types] == ["c.medium", "d.medium"]
    assert plan.requirements[L.INSTANCE_FAMILY].min_values == 2


def test_no_replacement_when_the_cheaper_types_miss_min_values() -> None:
    dearer = itype("d.large", 8, 16, 0.50)  # the second family only costs more than the candidate
    candidate = node("big", LARGE, [pod("a-0", 3000)])
    assert decide(cluster([candidate], [_with_min_values(pool(types=[MEDIUM, LARGE, dearer]))]), NOW) is None
    # Without minValues the same cluster consolidates onto c.medium.
    d = decide(cluster([candidate], [pool(types=[MEDIUM, LARGE, dearer])]), NOW)
    assert d is not None and d.replacements[0].instance_type.name == "c.medium"


def test_spot_to_spot_launches_what_min_values_needs_beyond_fifteen() -> None:
    # 16 cheap spot types of family s, then one of family t: two families need the 17 cheapest.
    cheap = [itype(f"s.t{i:02d}", 4, 8, 0.5, spot=round(0.005 * (i + 1), 3)) for i in range(16)]
    cheap.append(itype("t.t16", 4, 8, 0.5, spot=0.09))
    candidate = node("spot", LARGE, [pod("a-0", 3000)], capacity_type="spot")
    p = _with_min_values(pool(capacity_types=("spot",), types=[*cheap, LARGE]))
    d = decide(cluster([candidate], [p]), NOW)
    assert d is not None and d.method == "single-node-consolidation"
    assert [it.name for it in d.replacements[0].instance_types] == [*(f"s.t{i:02d}" for i in range(16)), "t.t16"]


def test_drift_simulation_follows_the_min_values_policy() -> None:
    """Karpenter's disruption simulations use MinValuesPolicy too: under BestEffort a drifted node of a pool whose
    minValues its types cannot meet (one family only) is replaced by a relaxed NodeClaim; under Strict its pod has
    nowhere to go, so it is not disrupted."""
    drifted = node("old", MEDIUM, [pod("a-0", 3000)], hash="stale")
    view = cluster([drifted], [_with_min_values(pool())])
    assert decide(view, NOW) is None
    d = decide(dataclasses.replace(view, min_values_policy="BestEffort"), NOW)
    assert d is not None and (d.method, d.reason) == ("drift", "Drifted")
    plan = d.replacements[0]
    assert plan.instance_type.name == "c.medium" and plan.min_values_relaxed
    assert plan.requirements[L.INSTANCE_FAMILY].min_values == 1
