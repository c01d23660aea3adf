"""Pods of different requirement sets in one NodePool share a node where that is cheaper (issue 14 packing defect).

The free pods are packed per (NodePool, requirements): a plain pod and a zone-pinned pod land in two groups.
The stricter group is packed first and the plain pods take the spare room of its NodeClaims when the rest of the
plain pods then cost less; they never narrow that NodeClaim (its price stays), and a pinned pod never lands on a
node outside its zone.
"""

from __future__ import annotations

import pytest

from nodewright.scheduling import schedule

from .helpers import make_type, pod, pool

ZONE = "topology.kubernetes.io/zone"
#: A c6g-like ladder: 2 vCPU for $0.068/h, 4 vCPU for $0.136/h, 8 vCPU for $0.272/h (no overhead).
LADDER = [make_type("g.large", 2, 4, 0.068), make_type("g.xlarge", 4, 8, 0.136), make_type("g.2xlarge", 8, 16, 0.272)]


def _layout(result: object) -> list[tuple[str, str, list[str]]]:
    return sorted((nc.instance_type.name, nc.zone, sorted(p.name for p in nc.pods))  # type: ignore[attr-defined]
                  for nc in result.new_nodeclaims)  # type: ignore[attr-defined]


@pytest.mark.parametrize("first", ["pinned", "plain"])
def test_plain_pod_shares_the_pinned_pods_node(first: str) -> None:
    # 2.5 vCPU pinned to test-1a needs a g.xlarge; two 1.2 vCPU plain pods packed alone need one too (2.4 vCPU),
    # $0.272/h in all. Pinned + one plain fill the g.xlarge (3.7 vCPU), the other plain a g.large: $0.204/h.
    pinned = pod("pinned", 2500, 1024, node_selector={ZONE: "test-1a"})
    plain = [pod(f"plain-{i}", 1200, 1024) for i in range(2)]
    pods = [pinned, *plain] if first == "pinned" else [*plain, pinned]
    result = schedule(pods, [], [pool()], {"default": LADDER})
    assert not result.unschedulable
    big = next(nc for nc in result.new_nodeclaims if "pinned" in {p.name for p in nc.pods})
    assert (big.instance_type.name, big.zone, len(big.pods)) == ("g.xlarge", "test-1a", 2)
    assert sorted(nc.instance_type.name for nc in result.new_nodeclaims) == ["g.large", "g.xlarge"]
    assert result.total_price == pytest.approx(0.068 + 0.136)  # separately: two g.xlarge, $0.272/h
    alone = next(nc for nc in result.new_nodeclaims if nc is not big)
    assert alone.requirements.get(ZONE) is None  # the lone plain pod's NodeClaim is not pinned to the zone


def test_pinned_pods_stay_in_their_zone_and_plain_pods_keep_their_own_when_no_room() -> None:
    # Each pinned pod fills a g.large: nothing to share, the two plain pods get one g.large of their own.
    pods = [pod("a", 2000, 1024, node_selector={ZONE: "test-1a"}), pod("b", 2000, 1024, node_selector={ZONE: "test-1b"}),
            pod("p1", 1000, 512), pod("p2", 1000, 512)]
    result = schedule(pods, [], [pool()], {"default": LADDER})
    layout = _layout(result)
    assert [row for row in layout if row[2] in (["a"], ["b"])] == [("g.large", "test-1a", ["a"]),
                                                                   ("g.large", "test-1b", ["b"])]
    assert [(t, pods) for t, _zone, pods in layout if pods == ["p1", "p2"]] == [("g.large", ["p1", "p2"])]
    assert result.total_price == pytest.approx(3 * 0.068)


def test_a_stricter_pod_never_joins_a_plain_pods_node_outside_its_requirements() -> None:
    # The plain pod's NodeClaim allows every zone: a pinned pod may not be added to it (that would narrow it), so
    # both zone-pinned pods get nodes in their own zones.
    pods = [pod("plain", 3000, 1024), pod("a", 500, 512, node_selector={ZONE: "test-1b"})]
    result = schedule(pods, [], [pool()], {"default": LADDER})
    for nc in result.new_nodeclaims:
        if "a" in {p.name for p in nc.pods}:
            assert nc.zone == "test-1b"
    assert not result.unschedulable


def test_the_stricter_group_is_packed_first_even_when_its_pods_queue_last() -> None:
    # The pinned pod (500m, 5 GiB: only a g.xlarge holds it) queues after the 1.8 vCPU plain pods. Packed in queue
    # order, the plain pods take a g.xlarge (or two g.large) and the pinned pod another g.xlarge: $0.272/h (the
    # greedy loop puts all three on a g.2xlarge, $0.272/h too). Pinned first, one plain pod joins it: $0.204/h.
    pods = [pod("p1", 1800, 256), pod("p2", 1800, 256), pod("pinned", 500, 5 * 1024, node_selector={ZONE: "test-1a"})]
    result = schedule(pods, [], [pool()], {"default": LADDER})
    layout = _layout(result)
    assert [(t, z) for t, z, names in layout if "pinned" in names] == [("g.xlarge", "test-1a")]
    assert sorted(t for t, _z, _names in layout) == ["g.large", "g.xlarge"]
    assert result.total_price == pytest.approx(0.204)
