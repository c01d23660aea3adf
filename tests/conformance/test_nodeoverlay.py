"""Karpenter's NodeOverlay controller tests, ported: ``pkg/controllers/nodeoverlay/suite_test.go`` (main
2026-08-20). Karpenter's fake cloud provider has one type ``default-instance-type`` with one spot offering in
``test-zone-1`` at $1.02; here the bundled us-east-1 catalog stands in (the suite's c5/m5/c6g/m6g pool), and what
Karpenter reads from ``store.ApplyAll`` is read from the decision: the type chosen for a pod and the price the
NodeClaim is priced at (the overlaid one). Status assertions go through the NodeOverlay status controller
(``kit.overlay_status``). Every test names the Karpenter ``Describe``/``Context`` and ``It`` (or
``DescribeTable`` entry) it mirrors."""

from __future__ import annotations

import pytest

from .kit import (
    ARCH,
    CAPACITY_TYPE,
    INSTANCE_TYPE,
    NODEPOOL,
    OVERLAYS_ON,
    Z1,
    Z2,
    ZONE,
    _catalog,
    nodeoverlay,
    nodepool,
    overlay_status,
    pod,
    req,
    run,
)

OK = {"ValidationSucceeded": ("True", "ValidationSucceeded"), "Ready": ("True", "Ready")}
CONFLICT = {"ValidationSucceeded": ("False", "Conflict"), "Ready": ("False", "UnhealthyDependents")}
INVALID = {"ValidationSucceeded": ("False", "RuntimeValidation"), "Ready": ("False", "UnhealthyDependents")}
#: The pod every decision places: 1 vCPU on amd64 (without overlays: c5.large spot in us-east-1a, $0.03304/h).
AMD64 = {ARCH: "amd64"}


def _price(name: str, capacity_type: str = "spot", zone: str = Z1) -> float:
    return next(o.price for o in _catalog()[name].offerings if o.zone == zone and o.capacity_type == capacity_type)


def _choice(*docs: dict, pool: dict | None = None) -> tuple[str, str, str, float]:
    decision = run(pool or nodepool(), pod("a", cpu=1, node_selector=AMD64), *docs, settings=OVERLAYS_ON)
    claim = decision.claim_of("a")
    return claim["instance_type"], claim["capacity_type"], claim["zone"], claim["price_per_hour"]


M5 = req(INSTANCE_TYPE, "In", "m5.large")
BASELINE = ("c5.large", "spot", Z1, _price("c5.large"))
#: Price / PriceAdjustment entries: the overlay field and the m5.large spot price it yields (cheapest of all).
CHEAP_M5 = [pytest.param({"price": "0.001"}, 0.001, id="Price"),
            pytest.param({"price_adjustment": "-99%"}, round(_price("m5.large") * 0.01, 6), id="PriceAdjustment")]


# Describe("Validation") It("should return the same instance type when zero overlay are applied")
def test_no_overlay_same_types() -> None:
    assert _choice() == BASELINE


# Describe("Validation") It("should pass with a single overlay")
def test_single_overlay_passes() -> None:
    assert overlay_status(nodepool(), nodeoverlay("only", M5, price="0.5")) == {"only": OK}


# Context("Runtime Validation") It("should fail validation for invalid requirements values")
def test_runtime_validation_of_requirement_key() -> None:
    key = "test.com.test/test-" + "a" * 250  # the CRD takes it (maxLength 316); the name part is over 63
    status = overlay_status(nodepool(), nodeoverlay("long", req(key, "Exists"), weight=10, price="13234.223"))
    assert status == {"long": INVALID}


# Context("Runtime Validation") It("should fail validation for invalid capacity values")
def test_runtime_validation_of_capacity() -> None:
    assert overlay_status(nodepool(), nodeoverlay("cpu", capacity={"cpu": "1"})) == {"cpu": INVALID}


# Context("Requirements Validations") Describe("Instance types Requirements")
# It("should fail when requirements overlays overlap")
def test_type_requirements_overlap_conflict() -> None:
    status = overlay_status(nodepool(), nodeoverlay("overlay-a", req(ARCH, "In", "arm64"), weight=10, price="1.03"),
                            nodeoverlay("overlay-b", req(CAPACITY_TYPE, "Exists"), weight=10, price="23"))
    assert status == {"overlay-a": CONFLICT, "overlay-b": OK}


# Describe("Instance types Requirements") It("should succeed with requirements overlays don't overlap")
def test_type_requirements_disjoint() -> None:
    status = overlay_status(nodepool(), nodeoverlay("overlay-a", req(ARCH, "In", "arm64"), weight=10, price="1.03"),
                            nodeoverlay("overlay-b", req(ARCH, "In", "amd64"), weight=10, price="23"))
    assert status == {"overlay-a": OK, "overlay-b": OK}


# Describe("Offering Requirements") It("should fail with requirements overlays overlap on zone") and
# It("... on capacity type"); It("should succeed with requirements overlays don't overlap")
@pytest.mark.parametrize(("a", "b", "conflict"), [
    pytest.param(req(ZONE, "In", Z1), req(ZONE, "In", Z1, Z2), True, id="zone"),
    pytest.param(req(CAPACITY_TYPE, "In", "spot"), req(CAPACITY_TYPE, "In", "spot", "on-demand"), True,
                 id="capacity-type"),
    pytest.param(req(ZONE, "In", Z1), req(ZONE, "In", Z2), False, id="disjoint zones"),
])
def test_offering_requirements(a: dict, b: dict, conflict: bool) -> None:
    status = overlay_status(nodepool(), nodeoverlay("overlay-a", a, weight=10, price="1"),
                            nodeoverlay("overlay-b", b, weight=10, price="2"))
    assert status == {"overlay-a": CONFLICT if conflict else OK, "overlay-b": OK}


# Context("Pricing Updates") DescribeTable("should fail with conflicting pricing updates overlays with overlapping
# requirements") Entry("Price"), Entry("PriceAdjustment"); DescribeTable("should fail with pricing updates are the
# same overlays with overlapping requirements") Entry("Price"), Entry("PriceAdjustment")
@pytest.mark.parametrize(("a", "b"), [
    pytest.param({"price": "1.03"}, {"price": "23"}, id="Price"),
    pytest.param({"price_adjustment": "+54"}, {"price_adjustment": "-2"}, id="PriceAdjustment"),
    pytest.param({"price": "100"}, {"price": "100"}, id="same Price"),
    pytest.param({"price_adjustment": "+100"}, {"price_adjustment": "+100"}, id="same PriceAdjustment"),
])
def test_pricing_conflicts(a: dict, b: dict) -> None:
    status = overlay_status(
        nodepool(), nodeoverlay("overlay-a", req(INSTANCE_TYPE, "In", "m5.large", "c5.large"), weight=10, **a),
        nodeoverlay("overlay-b", req(INSTANCE_TYPE, "In", "m5.large", "m5.xlarge"), weight=10, **b))
    assert status == {"overlay-a": CONFLICT, "overlay-b": OK}


# Describe("Offering Requirements") It("should fail with requirements overlays overlap"): a zone overlay and a
# capacity-type overlay meet on the spot offerings of us-east-1a.
def test_zone_and_capacity_type_overlays_meet() -> None:
    status = overlay_status(nodepool(), nodeoverlay("overlay-a", req(ZONE, "In", Z1, "us-east-1e"), weight=10, price="1"),
                            nodeoverlay("overlay-b", req(CAPACITY_TYPE, "In", "spot"), weight=10, price="2"))
    assert status == {"overlay-a": CONFLICT, "overlay-b": OK}


# Context("Pricing Updates") DescribeTable("should pass with conflicting pricing updates overlays with mutually
# exclusive requirements") and DescribeTable("... with mutually exclusive weights"), Entry("Price"),
# Entry("PriceAdjustment") each.
@pytest.mark.parametrize(("change_a", "change_b"), [
    pytest.param({"price": "54"}, {"price": "23"}, id="Price"),
    pytest.param({"price_adjustment": "+54"}, {"price_adjustment": "-2"}, id="PriceAdjustment")])
@pytest.mark.parametrize("exclusive", ["requirements", "weights"])
def test_pricing_overlays_that_do_not_meet(change_a: dict, change_b: dict, exclusive: str) -> None:
    other = "c5.large" if exclusive == "requirements" else "m5.large"
    status = overlay_status(
        nodepool(), nodeoverlay("overlay-a", M5, weight=10, **change_a),
        nodeoverlay("overlay-b", req(INSTANCE_TYPE, "In", other), weight=10 if exclusive == "requirements" else 20,
                    **change_b))
    assert status == {"overlay-a": OK, "overlay-b": OK}


# Context("Capacity Adjustment") It("should fail with conflicting capacity overlays with overlapping requirements"),
# It("should pass with capacity adjustment are the same overlays with overlapping requirements") (Karpenter's
# expectation in that It is a Conflict for overlay-a, despite its title), It("should pass with conflicting capacity
# overlays with mutually exclusive requirements"), It("... with mutually exclusive weights"), It("should pass with
# non conflicting capacity overlays with overlapping requirements")
@pytest.mark.parametrize(("a", "b", "expected_a"), [
    pytest.param((10, "m5.large", {"hugepages-1Gi": "2Gi"}), (10, "m5.large", {"hugepages-1Gi": "3Gi"}), CONFLICT,
                 id="overlapping"),
    pytest.param((10, "m5.large", {"smarter-devices/fuse": "54"}), (10, "m5.large", {"smarter-devices/fuse": "54"}),
                 CONFLICT, id="same values"),
    pytest.param((10, "m5.large", {"hugepages-1Gi": "2Gi"}), (10, "c5.large", {"hugepages-1Gi": "3Gi"}), OK,
                 id="exclusive requirements"),
    pytest.param((10, "m5.large", {"hugepages-1Gi": "2Gi"}), (20, "m5.large", {"hugepages-1Gi": "3Gi"}), OK,
                 id="exclusive weights"),
    pytest.param((10, "m5.large", {"hugepages-1Gi": "2Gi"}), (10, "m5.large", {"smarter-devices/fuse": "1"}), OK,
                 id="different resources"),
])
def test_capacity_conflicts(a: tuple, b: tuple, expected_a: dict) -> None:
    status = overlay_status(nodepool(), nodeoverlay("overlay-a", req(INSTANCE_TYPE, "In", a[1]), weight=a[0],
                                                    capacity=a[2]),
                            nodeoverlay("overlay-b", req(INSTANCE_TYPE, "In", b[1]), weight=b[0], capacity=b[2]))
    assert status == {"overlay-a": expected_a, "overlay-b": OK}


# Context("Capacity Adjustment") It("should fail with conflicting capacity overlays with multiple overlays"):
# conflicting-overlay-1 meets conflicting-overlay-2 on hugepages; good-overlay-1 sets another resource.
def test_capacity_conflict_among_three() -> None:
    status = overlay_status(
        nodepool(),
        nodeoverlay("conflicting-overlay-1", req(INSTANCE_TYPE, "In", "m5.large", "c5.large"), weight=10,
                    capacity={"hugepage-1Gi": "2Gi"}),
        nodeoverlay("good-overlay-1", M5, weight=10, capacity={"smarter-devices/fuse": "1"}),
        nodeoverlay("conflicting-overlay-2", M5, weight=10, capacity={"hugepage-1Gi": "3Gi"}))
    assert status == {"conflicting-overlay-1": CONFLICT, "good-overlay-1": OK, "conflicting-overlay-2": OK}


# Describe("Instance Type Controller") Context("Price Updates") DescribeTable("should apply pricing updates for
# instances types") Entry("Price"), Entry("PriceAdjustment")
@pytest.mark.parametrize(("change", "expected"), CHEAP_M5)
def test_price_applies_to_selected_type(change: dict, expected: float) -> None:
    assert _choice(nodeoverlay("m5", M5, **change)) == ("m5.large", "spot", Z1, expected)


# DescribeTable("should pass with conflicting pricing update overlays with mutually exclusive weights"): the higher
# weight's change applies. Entry("Price"), Entry("PriceAdjustment")
@pytest.mark.parametrize(("change", "expected"), CHEAP_M5)
def test_higher_weight_price_wins(change: dict, expected: float) -> None:
    assert _choice(nodeoverlay("low", M5, weight=1, price="5"), nodeoverlay("high", M5, weight=10, **change)) == \
        ("m5.large", "spot", Z1, expected)


# DescribeTable("should apply pricing updates for instances types for capacity type") Entry("Price"),
# Entry("PriceAdjustment"): only the on-demand offerings change (where spot is allowed, spot is launched as before).
@pytest.mark.parametrize(("change", "expected"), [
    pytest.param({"price": "0.001"}, 0.001, id="Price"),
    pytest.param({"price_adjustment": "-99%"}, round(_price("m5.large", "on-demand") * 0.01, 6), id="PriceAdjustment")])
def test_price_for_capacity_type(change: dict, expected: float) -> None:
    overlay = nodeoverlay("od", M5, req(CAPACITY_TYPE, "In", "on-demand"), **change)
    on_demand = nodepool(requirements=[req(CAPACITY_TYPE, "In", "on-demand")])
    assert _choice(pool=on_demand)[0] == "c5.large"
    assert _choice(overlay, pool=on_demand) == ("m5.large", "on-demand", Z1, expected)
    spot_only = nodepool(requirements=[req(CAPACITY_TYPE, "In", "spot")])
    assert _choice(overlay, pool=spot_only) == BASELINE


# DescribeTable("should apply pricing updates for instances types for availability zone") Entry("Price"),
# Entry("PriceAdjustment"): only the us-east-1b offerings change.
@pytest.mark.parametrize(("change", "expected"), [
    pytest.param({"price": "0.001"}, 0.001, id="Price"),
    pytest.param({"price_adjustment": "-99%"}, round(_price("m5.large", zone=Z2) * 0.01, 6), id="PriceAdjustment")])
def test_price_for_zone(change: dict, expected: float) -> None:
    assert _choice(nodeoverlay("b", M5, req(ZONE, "In", Z2), **change)) == ("m5.large", "spot", Z2, expected)


# DescribeTable("should not apply adjustments for overlays that do not overlap with instance types requirements")
# Entry("Price"), Entry("PriceAdjustment")
@pytest.mark.parametrize("change", [{"price": "0.001"}, {"price_adjustment": "-99%"}], ids=["Price", "PriceAdjustment"])
def test_no_overlap_no_change(change: dict) -> None:
    assert _choice(nodeoverlay("gpu", req(INSTANCE_TYPE, "In", "g4dn.xlarge"), **change)) == BASELINE


# DescribeTable("should only apply pricing updates for nodeclaim spec labels that defined in the overlay
# requirements") Entry("Price"), Entry("PriceAdjustment"): a NodePool template label selects.
@pytest.mark.parametrize(("change", "expected"), CHEAP_M5)
def test_price_by_nodepool_label(change: dict, expected: float) -> None:
    overlay = nodeoverlay("team", M5, req("team", "In", "a"), **change)
    assert _choice(overlay, pool=nodepool(labels={"team": "a"})) == ("m5.large", "spot", Z1, expected)
    assert _choice(overlay, pool=nodepool(labels={"team": "b"})) == BASELINE


# DescribeTable("should not partial apply instance types in a nodepool") Entry("Price"), Entry("PriceAdjustment"): a
# conflicting overlay changes no type at all, not even those where it does not conflict.
@pytest.mark.parametrize("change", [{"price": "0.001"}, {"price_adjustment": "-99%"}], ids=["Price", "PriceAdjustment"])
def test_conflict_applies_nowhere(change: dict) -> None:
    winner = nodeoverlay("z-winner", req(INSTANCE_TYPE, "In", "c5.xlarge"), weight=5, price="9")
    loser = nodeoverlay("a-loser", req(INSTANCE_TYPE, "In", "c5.xlarge", "m5.large"), weight=5, **change)
    assert _choice(winner, loser) == BASELINE


# Context("Capacity") Context("Requirements") It("should only apply override for nodepool that defined in the
# overlay requirements"); It("should apply capacity adjustments for instances types")
def test_capacity_by_nodepool() -> None:
    fuse = nodeoverlay("fuse", M5, req(NODEPOOL, "In", "devices"), capacity={"smarter-devices/fuse": "1"})
    wanting = pod("a", cpu=1, node_selector=AMD64, requests={"smarter-devices/fuse": "1"})
    placed = run(nodepool("devices"), wanting, fuse, settings=OVERLAYS_ON).claim_of("a")
    assert (placed["nodepool"], placed["instance_type"]) == ("devices", "m5.large")
    assert not run(nodepool("other"), wanting, fuse, settings=OVERLAYS_ON).scheduled("a")


# It("should update capacity for instance types from multiple overlays") and It("should apply pricing and capacity
# adjustment from two overlays on the same instance type"): resources of several overlays merge, a price overlay
# and a capacity overlay both apply.
def test_capacity_and_price_merge() -> None:
    docs = [nodeoverlay("fuse", M5, capacity={"smarter-devices/fuse": "1"}),
            nodeoverlay("slots", M5, weight=3, capacity={"example.com/slots": "2"}),
            nodeoverlay("price", M5, weight=7, price="0.5")]
    wanting = pod("a", cpu=1, node_selector=AMD64, requests={"smarter-devices/fuse": "1", "example.com/slots": "2"})
    claim = run(nodepool(), wanting, *docs, settings=OVERLAYS_ON).claim_of("a")
    assert (claim["instance_type"], claim["price_per_hour"]) == ("m5.large", 0.5)


# It("should apply higher weight overlay when multiple overlays match the same instance type"): the higher weight's
# quantity of a resource wins.
def test_capacity_higher_weight_quantity() -> None:
    docs = [nodeoverlay("two", M5, weight=1, capacity={"example.com/slots": "2"}),
            nodeoverlay("four", M5, weight=9, capacity={"example.com/slots": "4"})]
    three = pod("a", cpu=1, node_selector=AMD64, requests={"example.com/slots": "3"})
    assert run(nodepool(), three, *docs, settings=OVERLAYS_ON).claim_of("a")["instance_type"] == "m5.large"
    five = pod("a", cpu=1, node_selector=AMD64, requests={"example.com/slots": "5"})
    assert not run(nodepool(), five, *docs, settings=OVERLAYS_ON).scheduled("a")
