"""Requirements algebra: operators, intersection, compatibility, minValues, old label names."""

import pytest

from nodewright.errors import NodewrightValidationError
from nodewright.scheduling import Requirement, Requirements


def req(key: str, op: str, *values: str, min_values: int | None = None) -> Requirement:
    return Requirement.from_operator(key, op, list(values), min_values)


def test_in_notin_exists_doesnotexist_membership() -> None:
    assert req("k", "In", "a", "b").has("a") and not req("k", "In", "a").has("c")
    assert not req("k", "NotIn", "a").has("a") and req("k", "NotIn", "a").has("z")
    assert req("k", "Exists").has("anything")
    assert req("k", "DoesNotExist").is_empty() and req("k", "DoesNotExist").allows_absence()


def test_gt_lt_gte_lte_are_integer_bounds() -> None:
    assert [v for v in ("4", "5", "6") if req("g", "Gt", "5").has(v)] == ["6"]
    assert [v for v in ("4", "5", "6") if req("g", "Lt", "5").has(v)] == ["4"]
    assert [v for v in ("4", "5", "6") if req("g", "Gte", "5").has(v)] == ["5", "6"]
    assert [v for v in ("4", "5", "6") if req("g", "Lte", "5").has(v)] == ["4", "5"]
    assert not req("g", "Gt", "5").has("abc")


def test_intersection_of_in_and_bounds_and_notin() -> None:
    both = req("g", "In", "4", "6", "8").intersection(req("g", "Gt", "5")).intersection(req("g", "NotIn", "8"))
    assert both.values == frozenset({"6"}) and both.operator() == "In"
    assert req("g", "Gt", "5").intersection(req("g", "Lt", "6")).is_empty()


def test_intersection_keeps_larger_min_values() -> None:
    merged = req("f", "In", "a", "b", "c", min_values=2).intersection(req("f", "Exists", min_values=3))
    assert merged.min_values == 3


def test_compatible_custom_label_needs_defined_values() -> None:
    pool = Requirements.from_expressions([{"key": "team", "operator": "In", "values": ["a"]}])
    assert pool.compatible(Requirements.from_node_selector({"team": "a"}))
    assert pool.incompatibility(Requirements.from_node_selector({"team": "b"})) == (
        "key team, team In [b] not in team In [a]"
    )
    assert Requirements().incompatibility(Requirements.from_node_selector({"other": "x"})) == (
        "label 'other' does not have known values"
    )
    # NotIn on an undefined custom label is fine (the node simply lacks it).
    assert Requirements().compatible(Requirements.from_expressions([{"key": "other", "operator": "NotIn", "values": ["x"]}]))


def test_compatible_allows_undefined_well_known_labels() -> None:
    assert Requirements().compatible(Requirements.from_node_selector({"kubernetes.io/arch": "arm64"}))


def test_notin_and_doesnotexist_are_compatible_even_when_empty_intersection() -> None:
    a = Requirements.from_expressions([{"key": "x", "operator": "DoesNotExist"}])
    b = Requirements.from_expressions([{"key": "x", "operator": "NotIn", "values": ["1"]}])
    assert a.compatible(b)


def test_provisioner_name_maps_to_nodepool_label() -> None:
    reqs = Requirements.from_node_selector({"karpenter.sh/provisioner-name": "team1"})
    assert list(reqs) == ["karpenter.sh/nodepool"] and reqs["karpenter.sh/nodepool"].has("team1")


def test_satisfied_by_labels_for_existing_nodes() -> None:
    reqs = Requirements.from_expressions(
        [{"key": "zone", "operator": "In", "values": ["a"]}, {"key": "gpu", "operator": "DoesNotExist"}]
    )
    assert reqs.satisfied_by_labels({"zone": "a"})
    assert not reqs.satisfied_by_labels({"zone": "a", "gpu": "1"})
    assert not reqs.satisfied_by_labels({})


def test_invalid_operator_and_values_raise_with_path() -> None:
    with pytest.raises(NodewrightValidationError, match=r"r\[0\]: Gt on 'g' needs one integer"):
        Requirements.from_expressions([{"key": "g", "operator": "Gt", "values": ["x"]}], path="r")
    with pytest.raises(NodewrightValidationError, match="unknown operator 'Like'"):
        Requirements.from_expressions([{"key": "g", "operator": "Like", "values": ["x"]}])


def test_to_dicts_round_trip() -> None:
    reqs = Requirements.from_expressions(
        [{"key": "a", "operator": "In", "values": ["2", "1"], "minValues": 2}, {"key": "b", "operator": "Gt", "values": ["5"]}]
    )
    assert reqs.to_dicts() == [
        {"key": "a", "operator": "In", "values": ["1", "2"], "minValues": 2},
        {"key": "b", "operator": "Gt", "values": ["5"]},
    ]


def test_launch_matching_reads_requirements_exactly_as_the_scheduler() -> None:
    """The cloud providers' instance matching parses NodeClaim/NodePool requirements into these Requirements:
    a type is launched exactly when the scheduler's view of its labels allows it (missing labels satisfy only
    NotIn/DoesNotExist)."""
    from nodewright.api.requirements import Requirement as ApiRequirement
    from nodewright.cloud.catalog import load_instance_types
    from nodewright.cloud.matching import as_requirements, type_allowed

    api = [ApiRequirement(key="karpenter.k8s.aws/instance-generation", operator="Gt", values=["6"]),
           ApiRequirement(key="karpenter.k8s.aws/instance-gpu-count", operator="DoesNotExist"),
           ApiRequirement(key="karpenter.k8s.aws/instance-family", operator="NotIn", values=["m7i-flex"]),
           ApiRequirement(key="kubernetes.io/arch", operator="In", values=["arm64"]),
           ApiRequirement(key="intent", operator="In", values=["apps"])]  # a node label, not an instance property
    parsed = as_requirements(api)
    types = [it for it in load_instance_types("us-east-1") if it.name.startswith(("m7g.", "m6g.", "g5g.", "m8g."))]
    allowed = {it.name for it in types if type_allowed(it, api)}
    for it in types:
        instance_keys = [k for k in parsed if k != "intent"]
        expected = all(parsed[k].has(it.labels[k]) if k in it.labels else parsed[k].allows_absence()
                       for k in instance_keys)
        assert (it.name in allowed) == expected, it.name
    assert "m7g.large" in allowed and "m6g.large" not in allowed and "g5g.xlarge" not in allowed
