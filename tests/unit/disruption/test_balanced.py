"""``consolidationPolicy: Balanced``: Karpenter v1.14's score (savings share / disruption share >= 1/2) on m7i
pools priced at us-east-1 on-demand list prices, with the worked examples of Karpenter's Balanced design."""

from __future__ import annotations

from nodewright.disruption import decide, validate
from nodewright.disruption.balanced import balanced_verdicts, score_move
from nodewright.disruption.consolidation import single_node
from nodewright.disruption.simulation import Simulator

from .helpers import cluster, itype, node, pod, pool

# us-east-1 on-demand, USD/hour (Linux): m7i.large 2 vCPU/8 GiB, m7i.xlarge 4/16, m7i.2xlarge 8/32.
M7I_LARGE = itype("m7i.large", 2, 8, 0.1008)
M7I_XLARGE = itype("m7i.xlarge", 4, 16, 0.2016)
M7I_2XLARGE = itype("m7i.2xlarge", 8, 32, 0.4032)
M7I = [M7I_LARGE, M7I_XLARGE, M7I_2XLARGE]


def _full_xlarge(i: int):  # 8 pods of 500m / 2 GiB fill an m7i.xlarge exactly
    return node(f"x{i}", M7I_XLARGE, [pod(f"x{i}-{j}", 500, 2048) for j in range(8)])


def _full_2xlarge(i: int):  # 8 pods of 1 cpu / 4 GiB fill an m7i.2xlarge exactly
    return node(f"d{i}", M7I_2XLARGE, [pod(f"d{i}-{j}", 1000, 4096) for j in range(8)])


def _marginal_pool():
    """Seven full m7i.xlarge, two full m7i.2xlarge and one m7i.xlarge whose 8 pods (1.8 cpu, 7 GiB) fit an
    m7i.large: replacing it saves $0.1008/h of $2.4192/h (4.2%) while disrupting 9 of 90 (10%)."""
    small = node("marginal", M7I_XLARGE, [pod(f"m-{j}", 225, 896) for j in range(8)])
    return [small, *(_full_xlarge(i) for i in range(7)), *(_full_2xlarge(i) for i in range(2))]


def test_marginal_replace_is_taken_by_when_empty_or_underutilized_and_rejected_by_balanced() -> None:
    nodes = _marginal_pool()
    eager = decide(cluster(nodes, [pool(types=M7I)]), 1_784_548_800.0)
    assert eager is not None and [c.name for c in eager.candidates] == ["marginal"]
    assert eager.replacements[0].instance_type.name == "m7i.large" and round(eager.savings, 4) == 0.1008

    view = cluster(_marginal_pool(), [pool(types=M7I, policy="Balanced")])
    [verdict] = balanced_verdicts(view, [view.nodes[0]], 0.1008)
    assert (round(verdict.savings_fraction, 4), round(verdict.disruption_fraction, 4)) == (0.0417, 0.1)
    assert round(verdict.score, 3) == 0.417 and not verdict.approved
    assert verdict.reason() == "Balanced score 0.42 < 0.50 in NodePool 'default' (savings 4.2%, disruption 10.0%)"
    assert decide(view, 1_784_548_800.0) is None


def test_oversized_node_is_replaced_under_balanced() -> None:
    """An m7i.2xlarge running 3 pods (1.5 cpu, 6 GiB) -> m7i.large saves $0.3024/h (12.5% of the pool) for a
    disruption of 4 of 85 (4.7%): score 2.66, approved."""
    oversized = node("big", M7I_2XLARGE, [pod(f"b-{j}", 500, 2048) for j in range(3)])
    nodes = [oversized, *(_full_xlarge(i) for i in range(8)), _full_2xlarge(0)]
    view = cluster(nodes, [pool(types=M7I, policy="Balanced")])
    [verdict] = balanced_verdicts(view, [oversized], 0.1008)
    assert round(verdict.score, 2) == 2.66 and verdict.approved
    d = single_node(view, 1_784_548_800.0, Simulator(view))
    assert d is not None and [c.name for c in d.candidates] == ["big"]
    assert d.replacements[0].instance_type.name == "m7i.large" and round(d.savings, 4) == 0.3024
    assert validate(d, view, 1_784_548_800.0) is not None


def test_uniform_pool_half_price_replace_sits_on_the_boundary() -> None:
    """Karpenter's design: in a uniform pool a replace saving exactly half the node's price scores 0.5 (passes
    at the default threshold 2); pool totals here exclude the per-node base, as in the design's arithmetic."""
    assert score_move(2.42, 8, (48.40, 80), "p").approved
    assert round(score_move(2.42, 8, (48.40, 80), "p").score, 6) == 0.5
    assert not score_move(2.41, 8, (48.40, 80), "p").approved
    assert not score_move(0.0, 1, (48.40, 80), "p").approved  # no savings: never


def test_emptiness_is_not_scored() -> None:
    nodes = [node("empty", M7I_2XLARGE), *(_full_xlarge(i) for i in range(3))]
    d = decide(cluster(nodes, [pool(types=M7I, policy="Balanced")]), 1_784_548_800.0)
    assert d is not None and d.method == "emptiness" and [c.name for c in d.candidates] == ["empty"]


def test_static_pools_are_never_consolidated() -> None:
    """Karpenter leaves static NodePools (spec.replicas) to the static controller: an empty and an oversized
    m7i.2xlarge stay, though a dynamic pool would delete one and shrink the other."""
    nodes = [node("empty", M7I_2XLARGE), node("big", M7I_2XLARGE, [pod("b-0", 500, 2048)])]
    static = pool(types=M7I)
    static.static = True
    assert decide(cluster(nodes, [static]), 1_784_548_800.0) is None
    assert decide(cluster(nodes, [pool(types=M7I)]), 1_784_548_800.0) is not None
