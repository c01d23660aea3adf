"""ORed required nodeSelectorTerms take room already planned under any term (issue 25, scheduling/orterms.py)."""

from __future__ import annotations

from nodewright.scheduling import Affinity, ExistingNode, NodeSelectorTerm, schedule

from .helpers import GIB, pod, pool, standard_types

FAMILY = "karpenter.k8s.aws/instance-family"


def _or_pod(name: str, cpu_m: int) -> object:
    """First term: family c; second: family m."""
    terms = (NodeSelectorTerm(((FAMILY, "In", ("c",)),)), NodeSelectorTerm(((FAMILY, "In", ("m",)),)))
    return pod(name, cpu_m, 512, affinity=Affinity(node_required=terms))


def test_a_later_term_takes_room_on_a_nodeclaim_planned_for_other_pods() -> None:
    # Two 3-cpu pods need family m: one m.2xlarge (8 cpu) with 2 cpu spare. The OR pod's first term (family c)
    # would open a c.large of its own; under its second term it fits the m.2xlarge's spare room.
    m_pods = [pod(f"m-{i}", 3000, 1024, node_selector={FAMILY: "m"}) for i in range(2)]
    for optimize in (True, False):
        result = schedule([*m_pods, _or_pod("or-0", 1500)], [], [pool()], {"default": standard_types()},
                          optimize=optimize)
        assert [(p.instance_type.name, sorted(x.name for x in p.pods)) for p in result.new_nodeclaims] == [
            ("m.2xlarge", ["m-0", "m-1", "or-0"])], optimize
        assert not result.unschedulable


def test_a_later_term_takes_room_on_an_existing_node() -> None:
    node = ExistingNode(name="m-node", labels={FAMILY: "m", "karpenter.sh/nodepool": "default"},
                        allocatable={"cpu": 4000, "memory": 16 * GIB, "pods": 110})
    result = schedule([_or_pod("or-0", 1000)], [node], [pool()], {"default": standard_types()})
    assert result.new_nodeclaims == []
    assert {name: [p.name for p in pods] for name, pods in result.existing.items()} == {"m-node": ["or-0"]}


def test_no_room_under_any_term_keeps_the_first_terms_nodeclaim() -> None:
    m_pods = [pod(f"m-{i}", 3900, 1024, node_selector={FAMILY: "m"}) for i in range(2)]  # m.2xlarge full
    result = schedule([*m_pods, _or_pod("or-0", 1500)], [], [pool()], {"default": standard_types()})
    assert sorted((p.instance_type.name, [x.name for x in p.pods]) for p in result.new_nodeclaims) == [
        ("c.large", ["or-0"]), ("m.2xlarge", ["m-0", "m-1"])]
