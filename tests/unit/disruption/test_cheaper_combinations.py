"""kubernetes-sigs/karpenter#1962: many c5a.xlarge, memory-full but half idle on CPU, fit into fewer m6a.xlarge
(same 4 vCPU, twice the memory). Karpenter's single-node consolidation answers "Can't replace with a cheaper node"
for each of them; nodewright's multi-node consolidation merges them pair by pair.

Real us-east-1 prices: c5a.xlarge $0.154/h (allocatable 3920m / 6.43 GiB), m6a.xlarge $0.1728/h (3920m /
13.83 GiB), m5a.xlarge $0.172/h, m5a.2xlarge $0.344/h. Each c5a.xlarge runs three 650m/2Gi pods: 1950m (50% of
its CPU) and 6 GiB (93% of its memory), too much CPU for any 2-vCPU type.
"""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.disruption import ClusterView, decide
from nodewright.disruption.replay import converge
from nodewright.scheduling import Requirement

from .helpers import NOW
from .real import real_node, real_pool, remake

#: The families and sizes of the report (its NodePool offered these).
REPORTED_FAMILIES = ("c5a", "c6a", "m6a", "m5a", "c7a", "r6a", "r5a", "r4")
REPORTED_SIZES = ("large", "xlarge", "2xlarge")


def _fleet(n: int):
    return [real_node(f"c5a-{i}", "c5a.xlarge", [(650, 2048)] * 3) for i in range(n)]


def _pool(families: tuple[str, ...], sizes: tuple[str, ...]):
    return real_pool(extra=[Requirement(L.INSTANCE_FAMILY, False, families),
                            Requirement(L.INSTANCE_SIZE, False, sizes)])


def _types(view: ClusterView) -> list[str]:
    return sorted(n.instance_type for n in view.nodes)


def test_six_half_idle_c5a_xlarge_become_three_m6a_xlarge() -> None:
    view = ClusterView(nodes=_fleet(6), pools={"default": _pool(("c5a", "m6a"), ("xlarge",))})
    assert round(sum(n.price for n in view.nodes), 4) == 0.924
    final, done = converge(view, NOW, remake)
    assert [d.message() for d in done] == ["Consolidating 2 nodes into 1 m6a.xlarge, saving $0.14/h"] * 3
    assert [d.method for d in done] == ["multi-node-consolidation"] * 3
    assert _types(final) == ["m6a.xlarge"] * 3
    assert round(sum(n.price for n in final.nodes), 4) == 0.5184
    assert sum(len(n.pods) for n in final.nodes) == 18


def test_with_the_reported_nodepool_the_pairs_go_to_the_cheapest_memory_type() -> None:
    """Offered the report's eight families, nodewright merges four into one m5a.2xlarge (7.8 vCPU, 24 GiB), then
    the last two into one m5a.xlarge: $0.924/h -> $0.516/h."""
    view = ClusterView(nodes=_fleet(6), pools={"default": _pool(REPORTED_FAMILIES, REPORTED_SIZES)})
    final, done = converge(view, NOW, remake)
    assert [d.message() for d in done] == ["Consolidating 4 nodes into 1 m5a.2xlarge, saving $0.27/h",
                                           "Consolidating 2 nodes into 1 m5a.xlarge, saving $0.14/h"]
    assert _types(final) == ["m5a.2xlarge", "m5a.xlarge"]
    assert round(sum(n.price for n in final.nodes), 4) == 0.516


def test_no_single_c5a_xlarge_has_a_cheaper_replacement() -> None:
    """The reported event, reproduced: one node alone fits nothing cheaper than itself among c5a/m6a."""
    view = ClusterView(nodes=_fleet(1), pools={"default": _pool(("c5a", "m6a"), ("xlarge",))})
    assert decide(view, NOW) is None
