"""Karpenter ``scheduling/suite_test.go`` Describe "Reserved Instance Types".

Karpenter's fake ``small``/``medium``/``large`` types (2/3/6 vCPU, reserved offerings of capacity 1 for small and
medium in test-zone-1) become c5.9xlarge / c5.12xlarge / c5.18xlarge (36/48/72 vCPU) with EC2 capacity
reservations in us-east-1a, given as ``simulate`` reads them: the EC2NodeClass's
``capacityReservationSelectorTerms`` and ``status.capacityReservations`` (with EC2's ``availableInstanceCount``).
A 25-vCPU pod fits either reserved type alone, and two of them do not fit a c5.12xlarge (Karpenter's 1800m pods on
2/3-vCPU types).

Karpenter's multi-round tests launch, then provision again: its fake cloud marks a used reservation unavailable.
Here each round is a new decision over ``Decision.as_cluster()`` whose EC2NodeClass reports what EC2 would after
the launch (the used reservation's ``availableInstanceCount`` lowered). A NodeClaim that holds two reservations
(Karpenter reserves pessimistically) carries no single ``capacity-reservation-id`` label; the launch takes the
cheapest, which is what ``instance_type`` names.
"""

from __future__ import annotations

from typing import Any

from .kit import (
    APP,
    CAPACITY_TYPE,
    HOSTNAME,
    INSTANCE_TYPE,
    NODEPOOL,
    SIZE,
    Z1,
    ZONE,
    affinity_term,
    ec2nodeclass,
    expr,
    nodepool,
    pods,
    req,
    run,
)

RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
SMALL, MEDIUM = "c5.9xlarge", "c5.12xlarge"
CR_SMALL, CR_MEDIUM = "cr-0000000000000small", "cr-000000000000medium"
SIZES = [req(SIZE, "In", "9xlarge", "12xlarge", "18xlarge")]


def reservation(rid: str, instance_type: str, count: int) -> dict[str, Any]:
    """A ``status.capacityReservations`` entry with ``count`` instances still available (in us-east-1a)."""
    return {"id": rid, "instanceType": instance_type, "availabilityZone": Z1, "ownerID": "123456789012",
            "instanceMatchCriteria": "targeted", "reservationType": "default", "state": "active",
            "availableInstanceCount": count}


def nodeclass(name: str = "default", **counts: int) -> dict[str, Any]:
    """An EC2NodeClass selecting the reservations ``counts`` names (``CR_SMALL=1`` style keys are looked up in
    :data:`RESERVATIONS`) with those available counts."""
    entries = [reservation(rid, RESERVATIONS[rid], n) for rid, n in counts.items()]
    doc = ec2nodeclass(name, capacityReservationSelectorTerms=[{"id": e["id"]} for e in entries])
    doc["status"] = {"capacityReservations": entries}
    return doc


CR_SMALL_2, CR_DISTINCT, CR_FALLBACK = "cr-00000000000small2", "cr-0000000000distinct", "cr-0000000000fallback"
RESERVATIONS = {CR_SMALL: SMALL, CR_MEDIUM: MEDIUM, CR_SMALL_2: SMALL, CR_DISTINCT: SMALL, CR_FALLBACK: SMALL}


def pool(name: str = "default", **kw: Any) -> dict[str, Any]:
    return nodepool(name, families=("c5",), requirements=SIZES, **kw)


def spread_pods(count: int, prefix: str, *extra: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    """``count`` pods that need ``c5.9xlarge`` (plus ``extra`` node requirements), one per host (Karpenter's
    hostname anti-affinity on ``test: test``)."""
    return pods(count, prefix, labels=APP, anti_affinity=[affinity_term(HOSTNAME, APP)],
                required=[expr(INSTANCE_TYPE, "In", SMALL), *extra], **kw)


def reserved(claim: dict[str, Any]) -> bool:
    return claim["capacity_type"] == "reserved"


def test_no_fallback_while_compatible_reservations_exist():
    # It("shouldn't fallback to on-demand or spot when compatible reserved offerings are available")
    ps = pods(3, "p", cpu="25")
    d = run(nodeclass(**{CR_SMALL: 1, CR_MEDIUM: 1}), pool(), ps)
    (claim,) = d.claims  # one NodeClaim holds both reservations: the other pods wait
    assert reserved(claim) and claim["instance_type"] == SMALL and len(claim["pods"]) == 1
    assert set(claim["instance_types"]) == {SMALL, MEDIUM}
    left = [p for p in ps if not d.scheduled(p)]
    assert len(left) == 2 and all("could not be reserved" in d.unschedulable[d.key(p)] for p in left)

    d = run(d.as_cluster("r1"), nodeclass(**{CR_SMALL: 0, CR_MEDIUM: 1}), pool(), left)
    (claim,) = d.claims
    assert reserved(claim) and claim["instance_type"] == MEDIUM and claim["labels"][RESERVATION_ID] == CR_MEDIUM
    left = [p for p in left if not d.scheduled(p)]
    assert len(left) == 1

    d = run(d.as_cluster("r2"), nodeclass(**{CR_SMALL: 0, CR_MEDIUM: 0}), pool(), left)
    (claim,) = d.claims
    assert not reserved(claim) and RESERVATION_ID not in claim["labels"] and claim["instance_type"] == SMALL
    assert d.scheduled(left[0])


def test_reservations_shared_across_nodepools():
    # It("should correctly track reservations shared across nodepools")
    ps = [spread_pods(1, f"p{i}", expr(NODEPOOL, "In", f"np-{i + 1}"))[0] for i in range(2)]
    nc = nodeclass(**{CR_SMALL: 1, CR_MEDIUM: 1})
    d = run(nc, pool("np-1"), pool("np-2"), ps)
    (claim,) = d.claims
    assert reserved(claim) and claim["labels"][RESERVATION_ID] == CR_SMALL and claim["instance_type"] == SMALL
    left = [p for p in ps if not d.scheduled(p)]
    assert len(left) == 1

    d = run(d.as_cluster(), nodeclass(**{CR_SMALL: 0, CR_MEDIUM: 1}), pool("np-1"), pool("np-2"), left)
    (claim,) = d.claims
    assert not reserved(claim) and RESERVATION_ID not in claim["labels"] and claim["instance_type"] == SMALL


def test_distinct_reservations_per_nodepool_for_one_type():
    # It("should correctly track reservations for multiple nodepools with distinct reservations for the same
    #    instance pool")
    ps = [spread_pods(1, f"p{i}", expr(NODEPOOL, "In", f"np-{i + 1}"))[0] for i in range(2)]
    d = run(nodeclass(**{CR_SMALL: 1, CR_MEDIUM: 1}), nodeclass("other", **{CR_DISTINCT: 1}),
            pool("np-1"), pool("np-2", node_class="other"), ps)
    assert len(d.claims) == 2 and all(reserved(c) and c["instance_type"] == SMALL for c in d.claims)
    assert {c["labels"][RESERVATION_ID] for c in d.claims} == {CR_SMALL, CR_DISTINCT}


def test_multiple_reservations_for_one_type():
    # It("should correctly track multiple reservations for the same instance pool")
    ps = spread_pods(4, "p")
    d = run(nodeclass(**{CR_SMALL: 1, CR_MEDIUM: 1, CR_SMALL_2: 2}), pool(), ps)
    assert len(d.claims) == 2 and all(reserved(c) and c["instance_type"] == SMALL for c in d.claims)
    left = [p for p in ps if not d.scheduled(p)]
    assert len(left) == 2

    # One launch went into each reservation: one instance is left, in the second.
    d = run(d.as_cluster("r1"), nodeclass(**{CR_SMALL: 0, CR_MEDIUM: 1, CR_SMALL_2: 1}), pool(), left)
    (claim,) = d.claims
    assert reserved(claim) and claim["labels"][RESERVATION_ID] == CR_SMALL_2
    left = [p for p in left if not d.scheduled(p)]
    assert len(left) == 1

    d = run(d.as_cluster("r2"), nodeclass(**{CR_SMALL: 0, CR_MEDIUM: 1, CR_SMALL_2: 0}), pool(), left)
    (claim,) = d.claims
    assert not reserved(claim) and RESERVATION_ID not in claim["labels"] and claim["instance_type"] == SMALL


def test_no_fallback_to_lower_weight_nodepool_while_reserved():
    # It("shouldn't fallback to a lower weight NodePool if a reserved offering is available")
    def pools() -> list[dict[str, Any]]:
        return [pool("np-primary", weight=100), pool("np-fallback", weight=50, node_class="fallback")]

    ps = spread_pods(2, "p")
    d = run(nodeclass(**{CR_SMALL: 1}), nodeclass("fallback", **{CR_FALLBACK: 1}), pools(), ps)
    (claim,) = d.claims
    assert reserved(claim) and claim["nodepool"] == "np-primary" and claim["labels"][RESERVATION_ID] == CR_SMALL
    left = [p for p in ps if not d.scheduled(p)]
    assert len(left) == 1

    d = run(d.as_cluster(), nodeclass(**{CR_SMALL: 0}), nodeclass("fallback", **{CR_FALLBACK: 1}), pools(), left)
    (claim,) = d.claims
    assert not reserved(claim) and claim["nodepool"] == "np-primary" and claim["instance_type"] == SMALL


def test_no_preference_relaxed_on_reservation_error():
    # It("shouldn't relax preferences when a pod fails to schedule due to a reserved offering error")
    def pools() -> list[dict[str, Any]]:
        return [pool("np-1"), pool("np-2", node_class="other")]

    ps = spread_pods(2, "p", prefer=[expr(NODEPOOL, "In", "np-1")])
    d = run(nodeclass(**{CR_SMALL: 1}), nodeclass("other", **{CR_DISTINCT: 1}), pools(), ps)
    (claim,) = d.claims
    assert reserved(claim) and claim["nodepool"] == "np-1" and claim["instance_type"] == SMALL
    left = [p for p in ps if not d.scheduled(p)]
    assert len(left) == 1

    d = run(d.as_cluster(), nodeclass(**{CR_SMALL: 0}), nodeclass("other", **{CR_DISTINCT: 1}), pools(), left)
    (claim,) = d.claims
    assert not reserved(claim) and claim["nodepool"] == "np-1" and claim["instance_type"] == SMALL


def test_multiple_pods_on_one_reserved_node():
    # It("should handle multiple pods on reserved nodes")
    ps = pods(2, "p", labels=APP, affinity=[affinity_term(ZONE, APP)],
              required=[expr(INSTANCE_TYPE, "In", SMALL), expr(NODEPOOL, "In", "np-1"),
                        expr(CAPACITY_TYPE, "In", "reserved"), expr(ZONE, "In", Z1)])
    d = run(nodeclass(**{CR_SMALL: 1, CR_MEDIUM: 1}), pool("np-1"), ps)
    (claim,) = d.claims
    assert d.same_node(*ps)
    assert reserved(claim) and claim["labels"][RESERVATION_ID] == CR_SMALL and claim["instance_type"] == SMALL


# Karpenter v1.15.1's fix "preferences relaxed when every compatible reservation is full" (its source is not
# available; Karpenter PR #3312 restores it explicitly: a reservation that is full right now is no option, so the pod
# relaxes its preferences or falls through to a lower-weight NodePool in the same pass instead of being deferred).
# nodewright never offers a full reservation (``availableInstanceCount: 0``), which gives that behaviour.

def test_preference_for_reserved_is_relaxed_when_every_compatible_reservation_is_full():
    ps = spread_pods(2, "p", prefer=[expr(CAPACITY_TYPE, "In", "reserved")])
    d = run(nodeclass(**{CR_SMALL: 0, CR_SMALL_2: 0}), pool(), ps)
    assert all(d.scheduled(p) for p in ps) and d.unschedulable == {}
    assert [(reserved(c), c["instance_type"]) for c in d.claims] == [(False, SMALL)] * 2  # spot: the cheapest


def test_a_full_reservation_falls_through_to_a_lower_weight_nodepool_in_the_same_pass():
    ps = spread_pods(1, "p")
    reserved_only = nodepool("np-reserved", families=("c5",), weight=100,
                             requirements=[*SIZES, req(CAPACITY_TYPE, "In", "reserved")])
    d = run(nodeclass(**{CR_SMALL: 0}), reserved_only, pool("np-on-demand", weight=10), ps)
    (claim,) = d.claims
    assert claim["nodepool"] == "np-on-demand" and not reserved(claim) and d.scheduled(ps[0])


def test_room_left_in_one_reservation_still_defers_rather_than_relaxing():
    """The contrast (Karpenter's Strict mode, unchanged): one reservation has room for one of the two pods, so the
    second waits for a later batch instead of relaxing now."""
    ps = spread_pods(2, "p", prefer=[expr(CAPACITY_TYPE, "In", "reserved")])
    d = run(nodeclass(**{CR_SMALL: 1, CR_SMALL_2: 0}), pool(), ps)
    (claim,) = d.claims
    assert reserved(claim) and claim["labels"][RESERVATION_ID] == CR_SMALL
    left = [p for p in ps if not d.scheduled(p)]
    assert len(left) == 1 and "could not be reserved" in d.unschedulable[d.key(left[0])]
