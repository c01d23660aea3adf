"""Candidate rules, one by one, with the exact reason each gives, and the disruption-cost order."""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.disruption.candidates import (
    base_problem,
    by_disruption_cost,
    consolidation_problem,
    disruption_cost,
    eviction_cost,
    utilization,
)
from nodewright.disruption.model import PDB

from .helpers import HOUR, LARGE, NOW, node, pod, pool

POOLS = {"default": pool()}


def test_a_plain_node_is_a_candidate() -> None:
    assert base_problem(node("n"), POOLS, [], "Underutilized") is None


def test_uninitialized_unknown_pool_deleting_and_do_not_disrupt_nodes_are_not() -> None:
    assert base_problem(node("n", initialized=False), POOLS, [], "Empty") == "node is not initialized"
    assert base_problem(node("n", nodepool="gone"), POOLS, [], "Empty") == "nodepool 'gone' not found"
    assert base_problem(node("n", deleting=True), POOLS, [], "Empty") == "node is already being disrupted"
    assert base_problem(node("n", do_not_disrupt=True), POOLS, [], "Drifted") == "node has karpenter.sh/do-not-disrupt"


def test_missing_well_known_labels() -> None:
    n = node("n")
    del n.view.labels[L.ZONE]
    assert base_problem(n, POOLS, [], "Empty") == "node has no topology.kubernetes.io/zone label"


def test_pod_do_not_disrupt_and_pdb_block_except_drift_with_grace_period() -> None:
    guarded = node("n", pods=[pod("db-0", annotations={L.DO_NOT_DISRUPT: "true"})])
    assert base_problem(guarded, POOLS, [], "Underutilized") == "pod default/db-0 has karpenter.sh/do-not-disrupt"
    assert base_problem(guarded, POOLS, [], "Drifted") == "pod default/db-0 has karpenter.sh/do-not-disrupt"
    guarded.termination_grace_period = 600
    assert base_problem(guarded, POOLS, [], "Drifted") is None
    pdb = PDB("web", "default", {"matchLabels": {"app": "web"}}, 0)
    covered = node("m", pods=[pod("web-0")])
    assert base_problem(covered, POOLS, [pdb], "Underutilized") == "pdb default/web prevents pod evictions"
    assert base_problem(covered, POOLS, [PDB("web", "default", {"matchLabels": {"app": "web"}}, 1)],
                        "Underutilized") is None
    assert base_problem(covered, POOLS, [PDB("web", "other", {"matchLabels": {"app": "web"}}, 0)],
                        "Underutilized") is None


def test_consolidate_after_counts_from_the_last_pod_event() -> None:
    p = pool(consolidate_after=300)
    assert consolidation_problem(node("n", last_pod_event=NOW - 299), p, NOW, "Empty") == (
        "consolidateAfter (300s) has not elapsed since the last pod event")
    assert consolidation_problem(node("n", last_pod_event=NOW - 300), p, NOW, "Empty") is None
    assert consolidation_problem(node("n", created=NOW - 100), p, NOW, "Empty") is not None
    assert consolidation_problem(node("n"), pool(consolidate_after=None), NOW, "Empty") == "consolidateAfter is Never"


def test_min_node_lifetime_churn_guard() -> None:
    p = pool(min_lifetime=HOUR)
    assert consolidation_problem(node("n", created=NOW - 3599), p, NOW, "Underutilized") == (
        "node is younger than min-node-lifetime (3600s)")
    assert consolidation_problem(node("n", created=NOW - 3600), p, NOW, "Underutilized") is None


def test_when_empty_pools_never_consolidate_underutilized_nodes() -> None:
    assert consolidation_problem(node("n"), pool(policy="WhenEmpty"), NOW, "Underutilized") == (
        "consolidationPolicy is WhenEmpty")
    assert consolidation_problem(node("n"), pool(policy="WhenEmpty"), NOW, "Empty") is None


def test_target_utilization_hysteresis() -> None:
    # c.large: 8 cpu / 16 GiB. 4.8 cpu requested = 0.60 utilization.
    busy = node("n", LARGE, [pod("a-0", 4800, 1024)])
    assert utilization(busy) == 0.6
    assert consolidation_problem(busy, pool(target=0.7, hysteresis=0.1), NOW, "Underutilized") == (
        "utilization 0.60 is not below target 0.70 minus hysteresis 0.10")
    assert consolidation_problem(busy, pool(target=0.8, hysteresis=0.1), NOW, "Underutilized") is None
    assert consolidation_problem(busy, pool(), NOW, "Underutilized") is None


def test_disruption_cost_and_order() -> None:
    assert eviction_cost(pod("a")) == 1.0
    assert eviction_cost(pod("a", priority=2**25)) == 2.0
    assert eviction_cost(pod("a", annotations={"controller.kubernetes.io/pod-deletion-cost": str(-2**27)})) == 0.0
    assert eviction_cost(pod("a", priority=2**30)) == 10.0
    two = node("two", pods=[pod("a-0"), pod("a-1")])
    one = node("one", pods=[pod("b-0")])
    old = node("old", pods=[pod("c-0"), pod("c-1"), pod("c-2")], created=NOW - 540 * HOUR, expire_after=720 * HOUR)
    assert disruption_cost(old, NOW) == 0.75
    assert [n.name for n in by_disruption_cost([two, one, old], NOW)] == ["old", "one", "two"]
