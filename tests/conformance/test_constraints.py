"""Karpenter ``scheduling/suite_test.go``: Describe "Custom Constraints" and "Preferential Fallback".

Karpenter's zones ``test-zone-1/2/3`` are us-east-1a/b/c here; its integer instance label is
``karpenter.k8s.aws/instance-cpu``. Karpenter runs the "Well Known Labels"/"Scheduling Logic" contexts twice
with the same bodies; each behaviour is ported once.
"""

from __future__ import annotations

import pytest

from .kit import (
    ARCH,
    CAPACITY_TYPE,
    CPU_LABEL,
    HOSTNAME,
    INSTANCE_TYPE,
    OS,
    Z1,
    Z2,
    Z3,
    ZONE,
    expr,
    nodepool,
    not_ready,
    pod,
    req,
    run,
)

# Describe("Custom Constraints") / Context("NodePool with Labels")


def test_labels_unconstrained_pod_gets_pool_label():
    # It("should schedule unconstrained pods that don't have matching node selectors")
    d = run(nodepool(labels={"test-key": "test-value"}), pod("p"))
    assert d.labels_of("p")["test-key"] == "test-value"


def test_labels_conflicting_node_selector():
    # It("should not schedule pods that have conflicting node selectors")
    d = run(nodepool(labels={"test-key": "test-value"}), pod("p", node_selector={"test-key": "different-value"}))
    assert "default/p" in d.unschedulable


def test_labels_node_selector_with_undefined_key():
    # It("should not schedule pods that have node selectors with undefined key")
    d = run(nodepool(), pod("p", node_selector={"test-key": "test-value"}))
    assert not d.claims and "default/p" in d.unschedulable


def test_labels_matching_requirements():
    # It("should schedule pods that have matching requirements")
    d = run(nodepool(labels={"test-key": "test-value"}),
            pod("p", required=[expr("test-key", "In", "test-value", "another-value")]))
    assert d.labels_of("p")["test-key"] == "test-value"


def test_labels_conflicting_requirements():
    # It("should not schedule pods that have conflicting requirements")
    d = run(nodepool(labels={"test-key": "test-value"}), pod("p", required=[expr("test-key", "In", "another-value")]))
    assert "default/p" in d.unschedulable


# Context("Well Known Labels")


def test_well_known_uses_nodepool_constraints():
    # It("should use NodePool constraints")
    d = run(nodepool(zones=[Z2]), pod("p"))
    assert d.labels_of("p")[ZONE] == Z2


def test_well_known_uses_node_selectors():
    # It("should use node selectors")
    d = run(nodepool(zones=[Z1, Z2]), pod("p", node_selector={ZONE: Z2}))
    assert d.labels_of("p")[ZONE] == Z2


def test_well_known_hostname_selector_not_scheduled():
    # It("should not schedule nodes with a hostname selector")
    d = run(nodepool(), pod("p", node_selector={HOSTNAME: "red-node"}))
    assert not d.claims and "default/p" in d.unschedulable


def test_well_known_unknown_zone_selector():
    # It("should not schedule the pod if nodeselector unknown")
    d = run(nodepool(zones=[Z1]), pod("p", node_selector={ZONE: "unknown"}))
    assert "default/p" in d.unschedulable


def test_well_known_selector_outside_nodepool():
    # It("should not schedule if node selector outside of NodePool constraints")
    d = run(nodepool(zones=[Z1]), pod("p", node_selector={ZONE: Z2}))
    assert "default/p" in d.unschedulable


def test_well_known_requirement_in():
    # It("should schedule compatible requirements with Operator=In")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "In", Z3)]))
    assert d.labels_of("p")[ZONE] == Z3


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        # It("should schedule compatible requirements with Operator=Gt")
        ("Gt", "8", "16"),
        # It("should schedule compatible requirements with Operator=Lt")
        ("Lt", "8", "1"),
        # It("should schedule compatible requirements with Operator=Gte")
        ("Gte", "16", "16"),
        # It("should schedule compatible requirements with Operator=Lte")
        ("Lte", "2", "1"),
    ],
)
def test_well_known_numeric_operators(op, value, expected):
    """The cheapest type admitted by the numeric bound is launched, and the node carries its vCPU count (Karpenter's
    fake types start at 2 vCPU; the real ladder starts at c6g.medium with 1)."""
    d = run(nodepool(requirements=[req(CPU_LABEL, op, value)]), pod("p"))
    assert d.labels_of("p")[CPU_LABEL] == expected


def test_well_known_requirement_in_unknown():
    # It("should not schedule incompatible preferences and requirements with Operator=In")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "In", "unknown")]))
    assert "default/p" in d.unschedulable


def test_well_known_requirement_not_in():
    # It("should schedule compatible requirements with Operator=NotIn")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "NotIn", Z1, Z2, "unknown")]))
    assert d.labels_of("p")[ZONE] == Z3


def test_well_known_requirement_not_in_everything():
    # It("should not schedule incompatible preferences and requirements with Operator=NotIn")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "NotIn", Z1, Z2, Z3, "unknown")]))
    assert "default/p" in d.unschedulable


def test_well_known_compatible_preference_in():
    # It("should schedule compatible preferences and requirements with Operator=In")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "In", Z1, Z2, Z3, "unknown")],
                            prefer=[expr(ZONE, "In", Z2, "unknown")]))
    assert d.labels_of("p")[ZONE] == Z2


def test_well_known_incompatible_preference_in():
    # It("should schedule incompatible preferences and requirements with Operator=In")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "In", Z1, Z2, Z3, "unknown")], prefer=[expr(ZONE, "In", "unknown")]))
    assert d.scheduled("p")


def test_well_known_compatible_preference_not_in():
    # It("should schedule compatible preferences and requirements with Operator=NotIn")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "In", Z1, Z2, Z3, "unknown")], prefer=[expr(ZONE, "NotIn", Z1, Z3)]))
    assert d.labels_of("p")[ZONE] == Z2


def test_well_known_incompatible_preference_not_in():
    # It("should schedule incompatible preferences and requirements with Operator=NotIn")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "In", Z1, Z2, Z3, "unknown")],
                            prefer=[expr(ZONE, "NotIn", Z1, Z2, Z3)]))
    assert d.scheduled("p")


def test_well_known_selector_preference_and_requirement():
    # It("should schedule compatible node selectors, preferences and requirements")
    d = run(nodepool(), pod("p", node_selector={ZONE: Z3}, required=[expr(ZONE, "In", Z1, Z2, Z3)],
                            prefer=[expr(ZONE, "In", Z1, Z2, Z3)]))
    assert d.labels_of("p")[ZONE] == Z3


def test_well_known_multidimensional():
    # It("should combine multidimensional node selectors, preferences and requirements")
    d = run(nodepool(), pod(
        "p",
        node_selector={ZONE: Z3, INSTANCE_TYPE: "c6g.xlarge"},
        required=[expr(ZONE, "In", Z1, Z3), expr(INSTANCE_TYPE, "In", "c5.xlarge", "c6g.xlarge")],
        prefer=[expr(ZONE, "NotIn", "unknown"), expr(INSTANCE_TYPE, "NotIn", "unknown")],
    ))
    labels = d.labels_of("p")
    assert (labels[ZONE], labels[INSTANCE_TYPE]) == (Z3, "c6g.xlarge")


# Context("Constraints Validation")


@pytest.mark.parametrize("key", [HOSTNAME])
def test_validation_restricted_labels(key):
    # It("should not schedule pods that have node selectors with restricted labels")
    d = run(nodepool(), pod("p", required=[expr(key, "In", "test")]))
    assert not d.claims and "default/p" in d.unschedulable


@pytest.mark.parametrize("domain", ["karpenter.sh", "karpenter.k8s.aws"])
def test_validation_restricted_domains(domain):
    # It("should not schedule pods that have node selectors with restricted domains")
    """karpenter.sh is restricted by Karpenter; the AWS provider adds karpenter.k8s.aws."""
    d = run(nodepool(), pod("p", required=[expr(f"{domain}/test", "In", "test")]))
    assert not d.claims and "default/p" in d.unschedulable


@pytest.mark.parametrize("domain", ["kubernetes.io", "k8s.io"])
def test_validation_kubernetes_domains_allowed(domain):
    # It("should schedule pods that have node selectors with label in the kubernetes domains")
    # It("should schedule pods that have node selectors with label in kubernetes domains")  (the repeated context)
    d = run(nodepool(requirements=[req(f"{domain}/test", "In", "test-value")]), pod("p"))
    assert d.labels_of("p")[f"{domain}/test"] == "test-value"


@pytest.mark.parametrize("domain", ["kubernetes.io", "k8s.io"])
def test_validation_kubernetes_subdomains_allowed(domain):
    # It("should schedule pods that have node selectors with label in subdomain from kubernetes domains")
    key = f"subdomain.{domain}/test"
    d = run(nodepool(requirements=[req(key, "In", "test-value")]), pod("p"))
    assert d.labels_of("p")[key] == "test-value"


def test_validation_well_known_label_selectors():
    # It("should schedule pods that have node selectors with label in wellknown label list")
    ps = [
        pod("zone", node_selector={ZONE: Z1}),
        pod("type", node_selector={INSTANCE_TYPE: "m5.large"}),
        pod("arch", node_selector={ARCH: "arm64"}),
        pod("os", node_selector={OS: "linux"}),
        pod("ct", node_selector={CAPACITY_TYPE: "spot"}),
    ]
    d = run(nodepool(requirements=[req(CAPACITY_TYPE, "In", "spot", "on-demand")]), ps)
    assert all(d.scheduled(p) for p in ps), d.unschedulable


# Context("Scheduling Logic")


def test_logic_nodepool_not_ready():
    # It("should not schedule pods with nodePool which is not ready ")
    d = run(not_ready(nodepool()), pod("p"))
    assert not d.claims and "default/p" in d.unschedulable


def test_logic_in_undefined_key():
    # It("should not schedule pods that have node selectors with In operator and undefined key")
    d = run(nodepool(), pod("p", required=[expr("test-key", "In", "test-value")]))
    assert "default/p" in d.unschedulable


def test_logic_not_in_undefined_key():
    # It("should schedule pods that have node selectors with NotIn operator and undefined key")
    d = run(nodepool(), pod("p", required=[expr("test-key", "NotIn", "test-value")]))
    assert d.labels_of("p").get("test-key") != "test-value"


def test_logic_exists_undefined_key():
    # It("should not schedule pods that have node selectors with Exists operator and undefined key")
    d = run(nodepool(), pod("p", required=[expr("test-key", "Exists")]))
    assert "default/p" in d.unschedulable


def test_logic_does_not_exist_undefined_key():
    # It("should schedule pods that with DoesNotExists operator and undefined key")
    d = run(nodepool(), pod("p", required=[expr("test-key", "DoesNotExist")]))
    assert "test-key" not in d.labels_of("p")


def test_logic_pool_requirement_labels_unconstrained_pod():
    # It("should schedule unconstrained pods that don't have matching node selectors")  (requirements variant)
    d = run(nodepool(requirements=[req("test-key", "In", "test-value")]), pod("p"))
    assert d.labels_of("p")["test-key"] == "test-value"


def test_logic_matching_in():
    # It("should schedule pods that have node selectors with matching value and In operator")
    d = run(nodepool(requirements=[req("test-key", "In", "test-value")]),
            pod("p", required=[expr("test-key", "In", "test-value")]))
    assert d.labels_of("p")["test-key"] == "test-value"


def test_logic_matching_not_in():
    # It("should not schedule pods that have node selectors with matching value and NotIn operator")
    d = run(nodepool(requirements=[req("test-key", "In", "test-value")]),
            pod("p", required=[expr("test-key", "NotIn", "test-value")]))
    assert "default/p" in d.unschedulable


def test_logic_exists_defined_key():
    # It("should schedule the pod with Exists operator and defined key")
    d = run(nodepool(requirements=[req("test-key", "In", "test-value")]), pod("p", required=[expr("test-key", "Exists")]))
    assert d.labels_of("p")["test-key"] == "test-value"


def test_logic_does_not_exist_defined_key():
    # It("should not schedule the pod with DoesNotExists operator and defined key")
    d = run(nodepool(requirements=[req("test-key", "In", "test-value")]),
            pod("p", required=[expr("test-key", "DoesNotExist")]))
    assert "default/p" in d.unschedulable


def test_logic_different_value_in():
    # It("should not schedule pods that have node selectors with different value and In operator")
    d = run(nodepool(requirements=[req("test-key", "In", "test-value")]),
            pod("p", required=[expr("test-key", "In", "another-value")]))
    assert "default/p" in d.unschedulable


def test_logic_different_value_not_in():
    # It("should schedule pods that have node selectors with different value and NotIn operator")
    d = run(nodepool(requirements=[req("test-key", "In", "test-value")]),
            pod("p", required=[expr("test-key", "NotIn", "another-value")]))
    assert d.labels_of("p")["test-key"] == "test-value"


def test_logic_compatible_pods_share_node():
    # It("should schedule compatible pods to the same node")
    a = pod("a", required=[expr("test-key", "In", "test-value")])
    b = pod("b", required=[expr("test-key", "NotIn", "another-value")])
    d = run(nodepool(requirements=[req("test-key", "In", "test-value", "another-value")]), a, b)
    assert d.same_node(a, b)
    assert d.labels_of(a)["test-key"] == d.labels_of(b)["test-key"] == "test-value"


def test_logic_incompatible_pods_split():
    # It("should schedule incompatible pods to the different node")
    a = pod("a", required=[expr("test-key", "In", "test-value")])
    b = pod("b", required=[expr("test-key", "In", "another-value")])
    d = run(nodepool(requirements=[req("test-key", "In", "test-value", "another-value")]), a, b)
    assert not d.same_node(a, b)
    assert (d.labels_of(a)["test-key"], d.labels_of(b)["test-key"]) == ("test-value", "another-value")


def test_logic_exists_does_not_widen():
    # It("Exists operator should not overwrite the existing value")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "In", "non-existent-zone"), expr(ZONE, "Exists")]))
    assert "default/p" in d.unschedulable


# Describe("Preferential Fallback") / Context("Required")


def test_fallback_final_required_term_not_relaxed():
    # It("should not relax the final term")  (also provisioning/suite_test.go, Context("Preferential Fallback"))
    d = run(nodepool(zones=[Z1], requirements=[req(INSTANCE_TYPE, "In", "m5.large")]),
            pod("p", required=[expr(ZONE, "In", "invalid")]))
    assert "default/p" in d.unschedulable


def test_fallback_relax_multiple_required_terms():
    # It("should relax multiple terms")  (also provisioning/suite_test.go)
    """The first satisfiable OR-term (zone 1) wins; the later zone-2 term is never reached."""
    d = run(nodepool(), pod("p", required_terms=[[expr(ZONE, "In", "invalid")], [expr(ZONE, "In", "invalid")],
                                                 [expr(ZONE, "In", Z1)], [expr(ZONE, "In", Z2)]]))
    assert d.labels_of("p")[ZONE] == Z1


# Context("Preferred")


def test_fallback_relax_all_preferences():
    # It("should relax all terms")
    # It("should relax all node affinity terms")  (provisioning/suite_test.go)
    d = run(nodepool(), pod("p", preferred=[(1, [expr(ZONE, "In", "invalid")]), (1, [expr(INSTANCE_TYPE, "In", "invalid")])]))
    assert d.scheduled("p")


def test_fallback_relax_to_lighter_weights():
    # It("should relax to use lighter weights")  (also provisioning/suite_test.go)
    d = run(nodepool(zones=[Z1, Z2]), pod("p", preferred=[
        (100, [expr(INSTANCE_TYPE, "In", Z3)]),
        (50, [expr(ZONE, "In", Z2)]),
        (1, [expr(ZONE, "In", Z1)]),
    ]))
    assert d.labels_of("p")[ZONE] == Z2


def test_fallback_preference_conflicts_with_requirement():
    # It("should schedule even if preference is conflicting with requirement")
    d = run(nodepool(), pod("p", required=[expr(ZONE, "In", Z3)], prefer=[expr(ZONE, "NotIn", Z3)]))
    assert d.labels_of("p")[ZONE] == Z3


def test_fallback_conflicting_preference_expressions():
    # It("should schedule even if preference requirements are conflicting")
    d = run(nodepool(), pod("p", prefer=[expr(ZONE, "In", "invalid"), expr(ZONE, "NotIn", "invalid")]))
    assert d.scheduled("p")
