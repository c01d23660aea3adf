"""Multi-node consolidation when disruption-cost order interleaves zones (issue 6, priority-pools scenario).

Eight nodes in two zones, one zone-spread pod each. Every prefix of the global order mixes zones, so its pods
cannot all land on one new node without breaking ``maxSkew: 1``; only same-zone sets can consolidate. The
prices make three pods the only strictly cheaper move: 3 x 1600m on one ``c.xlarge`` (6 cpu, $0.27/h) instead
of three ``c.small`` ($0.10/h each); two pods would need a ``c.medium`` ($0.20/h, not cheaper), four a
``c.large`` ($0.40/h, not cheaper).
"""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.api.nodepool import Budget
from nodewright.disruption import ClusterView, decide
from nodewright.scheduling import LabelSelector, TopologySpreadConstraint

from .helpers import CATALOG, NOW, SMALL, ZONES, cluster, itype, node, pod, pool

XLARGE = itype("c.xlarge", 6, 12, 0.27)
SPREAD = TopologySpreadConstraint(max_skew=1, topology_key=L.ZONE, when_unsatisfiable="DoNotSchedule",
                                  label_selector=LabelSelector(match_labels=(("app", "web"),)))


def _interleaved(budget: str) -> ClusterView:
    # Equal disruption cost and price: ordered by name, so n0 (zone a), n1 (zone b), n2 (zone a), ...
    nodes = [node(f"n{i}", SMALL, [pod(f"web-{i}", 1600, labels={"app": "web"}, topology_spread=(SPREAD,))],
                  zone=ZONES[i % 2]) for i in range(8)]
    return cluster(nodes, [pool(types=[*CATALOG, XLARGE], budgets=[Budget(nodes=budget)])])


def test_three_same_zone_nodes_become_one_cheaper_node_of_that_zone() -> None:
    view = _interleaved("100%")
    d = decide(view, NOW)
    assert d is not None and (d.method, d.decision) == ("multi-node-consolidation", "replace")
    assert [c.name for c in d.candidates] == ["n0", "n2", "n4"]  # zone a's first three in cost order
    (repl,) = d.replacements
    assert repl.instance_type.name == "c.xlarge"
    assert (repl.labels[L.ZONE], repl.offering.zone, repl.offering.price) == ("us-east-1a", "us-east-1a", 0.27)
    assert round(d.savings, 6) == 0.03
    assert d.message() == "Consolidating 3 nodes into 1 c.xlarge, saving $0.03/h"


def test_a_budget_below_three_nodes_leaves_no_cheaper_move() -> None:
    # 25% of 8 nodes = 2 per pass: two pods need a c.medium ($0.20/h), not cheaper than two c.small.
    view = _interleaved("25%")
    assert decide(view, NOW) is None
