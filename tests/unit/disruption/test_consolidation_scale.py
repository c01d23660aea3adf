"""Consolidation at scale (issue 30): the candidate cap, the replacement's pod cap, the time budgets (anytime
search, on an injected clock) and the savings search, each through :func:`decide_pass`."""

from __future__ import annotations

from collections.abc import Sequence

from nodewright.api.nodepool import Budget
from nodewright.disruption import MULTI_NODE, ClusterView, DecisionOptions, Node, decide, decide_pass
from nodewright.disruption.consolidation import ConsolidationOptions
from nodewright.disruption.simulation import Simulator
from nodewright.scheduling import SchedulingResult

from .helpers import LARGE, MEDIUM, NOW, SMALL, cluster, itype, node, pod, pool

MULTI = DecisionOptions(methods=(MULTI_NODE,))


def _keeper(cpu: int = 64) -> Node:
    """A node that is never a candidate and has ``cpu`` cores free."""
    return node("keeper", itype("c.keep", cpu, cpu * 2, 9.0), [pod("k-0", 100)], do_not_disrupt=True)


def test_multi_node_considers_at_most_karpenters_100_candidates_by_default() -> None:
    # 150 idle-ish nodes: the first 100 by disruption cost fit on the other 50, Karpenter's cap stops there.
    nodes = [node(f"n{i:03d}", MEDIUM, [pod(f"a{i}-0")]) for i in range(150)]
    view = cluster(nodes)
    d = decide(view, NOW, MULTI)
    assert d is not None and d.decision == "delete" and len(d.candidates) == 100
    assert round(d.savings, 6) == 20.0
    wide = DecisionOptions(consolidation=ConsolidationOptions(max_candidates=1_000), methods=(MULTI_NODE,))
    more = decide(view, NOW, wide)
    assert more is not None and len(more.candidates) > 100


def test_a_replacement_takes_at_most_a_tenth_of_its_pools_pods_above_kubelets_default_max_pods() -> None:
    big = itype("c.xl", 16, 32, 0.70, pods=200)
    huge = itype("c.xxl", 32, 64, 1.00, pods=300)
    wide = itype("c.wide", 8, 16, 0.40, pods=110)
    nodes = [node(f"n{i}", wide, [pod(f"a{i}-{j}", 150, 64) for j in range(50)]) for i in range(3)]
    view = cluster(nodes, [pool(types=[wide, big, huge])])
    d = decide(view, NOW, MULTI)
    # 3 into 1 would put 150 pods (all of the pool's) on one c.xxl: over max(110, 10% of 150); 2 into 1 moves
    # 100 pods, 3 of them onto the node that stays.
    assert d is not None and len(d.candidates) == 2 and d.replacements[0].instance_type.name == "c.xl"
    assert len(d.replacements[0].pods) == 97 and round(d.savings, 6) == 0.1
    unbounded = DecisionOptions(consolidation=ConsolidationOptions(max_replacement_pod_share=None),
                                methods=(MULTI_NODE,))
    whole = decide(view, NOW, unbounded)
    assert whole is not None and len(whole.candidates) == 3 and len(whole.replacements[0].pods) == 150
    assert whole.replacements[0].instance_type.name == "c.xxl" and round(whole.savings, 6) == 0.2


class _TickingSimulator(Simulator):
    """Each simulation takes ``step`` seconds of the fake clock."""

    def __init__(self, view: ClusterView, clock: list[float], step: float) -> None:
        super().__init__(view)
        self.clock, self.step = clock, step

    def simulate(self, candidates: Sequence[Node], max_new: int | None, pricing: object = None) -> SchedulingResult:
        self.clock[0] += self.step
        return super().simulate(candidates, max_new, pricing)  # type: ignore[arg-type]


def test_multi_node_returns_the_best_move_found_when_its_time_budget_runs_out() -> None:
    # No instance types to launch: moves are deletions. Four keepers have 1.4 cores free each: the sums say
    # five 1000m pods fit (5.6 >= 5), the screen's first-fit sees that one keeper takes one pod.
    keepers = [node(f"k{i}", itype("c.two", 2, 4, 1.0), [pod(f"k{i}-0", 600)], do_not_disrupt=True)
               for i in range(4)]
    full = itype("c.one", 1, 2, 0.20)  # a candidate has no room left for another's pod
    view = cluster([*keepers, *(node(f"n{i}", full, [pod(f"a{i}-0", 1000)]) for i in range(6))], [pool(types=[])])
    now = [0.0]
    opts = DecisionOptions(consolidation=ConsolidationOptions(multi_node_timeout=5.0, clock=lambda: now[0]),
                           methods=(MULTI_NODE,))
    # Each simulation takes 10 s. Six nodes fail the sums, five the screen (no simulation); the binary search
    # over 2..5 finds that 3 fit (t=10 s), then the budget is spent before 4 are tried.
    outcome = decide_pass(view, NOW, opts, _TickingSimulator(view, now, 10.0))
    assert outcome.stopped_early == (MULTI_NODE,)
    d = outcome.decision
    assert d is not None and [c.name for c in d.candidates] == ["n0", "n1", "n2"]
    assert d.decision == "delete" and d.evaluated == 2 and round(d.savings, 6) == 0.6
    # With the default minute the search finishes: four nodes, no timeout.
    now[0] = 0.0
    unhurried = DecisionOptions(consolidation=ConsolidationOptions(clock=lambda: now[0]), methods=(MULTI_NODE,))
    outcome = decide_pass(view, NOW, unhurried, _TickingSimulator(view, now, 10.0))
    assert outcome.stopped_early == () and outcome.decision is not None
    assert [c.name for c in outcome.decision.candidates] == ["n0", "n1", "n2", "n3"]


def test_the_savings_search_removes_the_dearer_nodes_the_budget_allows() -> None:
    # Disruption cost puts the one-pod small nodes first; the budget (2) lets only two go per pass.
    cheap = [node(f"cheap{i}", SMALL, [pod(f"c{i}-0", 100)]) for i in range(2)]
    dear = [node(f"dear{i}", LARGE, [pod(f"d{i}-0", 100), pod(f"d{i}-1", 100)]) for i in range(2)]
    view = cluster([_keeper(), *cheap, *dear], [pool(budgets=[Budget(nodes="2")])])
    d = decide(view, NOW, MULTI)
    assert d is not None and sorted(c.name for c in d.candidates) == ["dear0", "dear1"]
    assert d.decision == "delete" and round(d.savings, 6) == 0.8
    karpenter = DecisionOptions(consolidation=ConsolidationOptions(improve_simulations=0), methods=(MULTI_NODE,))
    k = decide(view, NOW, karpenter)
    assert k is not None and sorted(c.name for c in k.candidates) == ["cheap0", "cheap1"]
    assert round(k.savings, 6) == 0.2
