"""Karpenter ``scheduling/scheduling_benchmark_test.go``: ``BenchmarkRespectPreferences`` / ``makePreferencePods``
(issue 26, item 3).

Karpenter's preference benchmark pods all carry ``app: nginx`` and three preferences: node affinity to one zone
(weight 1, can be met), pod anti-affinity on the zone (weight 10, cannot be met by every pod: one pod per zone at
most) and pod anti-affinity on the hostname (weight 1, can be met). Under ``PREFERENCE_POLICY=Respect`` Karpenter
relaxes one term at a time, heaviest pod anti-affinity first (``preferences.go``), so the zone term goes and the
hostname term stays: one node per pod, all in the preferred zone. The benchmark's random requests are fixed
here (500m / 512Mi) so that the node count is the assertion; Karpenter's benchmark asserts none.
"""

from __future__ import annotations

import pytest

from .kit import HOSTNAME, Z1, ZONE, affinity_term, expr, nodepool, pods, run

NGINX = {"app": "nginx"}


def preference_pods(count: int) -> list[dict]:
    """``makePreferencePods(count)`` with fixed requests."""
    return pods(count, "nginx", labels=NGINX, cpu="500m", memory="512Mi", prefer=[expr(ZONE, "In", Z1)],
                preferred_anti_affinity=[(10, affinity_term(ZONE, NGINX)), (1, affinity_term(HOSTNAME, NGINX))])


@pytest.mark.parametrize("count", [10, 40])
def test_respect_preferences_keeps_hostname_anti_affinity(count):
    # BenchmarkRespectPreferences (makePreferencePods): one node per pod, in the preferred zone.
    ps = preference_pods(count)
    d = run(nodepool(), ps)
    assert not d.unschedulable
    assert d.node_count(ps) == count
    assert set(d.domains_of(ZONE, ps)) == {Z1}


def test_relaxation_removes_only_the_unmeetable_term():
    # preferences.go removePreferredPodAntiAffinityTerm: the heaviest remaining term (weight 10, zone) is the one
    # relaxed; the lighter hostname term is kept (before the fix the zone term was named but the hostname term
    # was dropped).
    ps = preference_pods(3)
    d = run(nodepool(), ps)
    assert d.node_count(ps) == 3
    assert set(d.domains_of(ZONE, ps)) == {Z1}
