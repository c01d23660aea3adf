"""The labels a NodeClaim carries for its requirements (Karpenter's ``ToNodeClaim`` / ``Requirement.Any``) and
how ``minValues`` counts a key over real catalog types (:mod:`nodewright.scheduling.minvalues`)."""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.cloud.catalog import load_instance_types
from nodewright.scheduling import Requirement, Requirements
from nodewright.scheduling.minvalues import Flexibility, relaxed, unmet_reason
from nodewright.scheduling.nodeclaimtemplate import TypeInfo


def req(key: str, op: str, *values: str, min_values: int | None = None) -> Requirement:
    return Requirement.from_operator(key, op, list(values), min_values)


def test_any_value_per_operator() -> None:
    assert req("k", "In", "b", "a").any_value() == "a"
    assert req("k", "Exists").any_value() == "0"
    assert req("k", "NotIn", "0", "1", "3").any_value() == "2"
    assert req("k", "Gt", "5").any_value() == "6"
    assert req("k", "Lt", "3").any_value() == "0"
    assert req("k", "Gt", "5").intersection(req("k", "Lt", "7")).any_value() == "6"
    assert req("k", "Gt", "5").intersection(req("k", "Lt", "7")).intersection(req("k", "NotIn", "6")).any_value() is None
    assert req("k", "DoesNotExist").any_value() is None


def test_labels_resolve_custom_keys_only() -> None:
    reqs = Requirements([
        req("team", "Exists"), req("tier", "In", "gold", "silver"), req("rank", "Gt", "5"), req("gone", "DoesNotExist"),
        req(L.ZONE, "In", "us-east-1a"), req(L.INSTANCE_FAMILY, "In", "m5", "c5"), req(L.WINDOWS_BUILD, "NotIn", "x"),
        req(L.HOSTNAME, "Exists"), req(L.REGISTERED, "In", "true", "false"), req("karpenter.k8s.aws/instance-tenancy", "In",
                                                                             "default", "dedicated")])
    assert reqs.labels() == {"team": "0", "tier": "gold", "rank": "6", L.ZONE: "us-east-1a"}


def test_min_values_counts_zones_capacity_types_and_custom_keys_on_real_types() -> None:
    types = {it.name: it for it in load_instance_types("us-east-1")}
    infos = [TypeInfo(types[name], ()) for name in ("c6g.large", "c6g.xlarge")]
    pool = Requirements([req(L.ZONE, "In", "us-east-1a", "us-east-1b", "us-east-1e", min_values=3),
                         req(L.CAPACITY_TYPE, "Exists", min_values=2), req("team", "In", "a", "b", min_values=2),
                         req("any", "Exists", min_values=9), req(L.INSTANCE_GPU_NAME, "NotIn", "x", min_values=1)])
    flex = Flexibility(pool)
    # No Graviton offering in us-east-1e: two of the three zones.
    assert flex.union(infos, L.ZONE) == frozenset({"us-east-1a", "us-east-1b"})
    assert flex.union(infos, L.CAPACITY_TYPE) == frozenset({"spot", "on-demand"})
    assert flex.union(infos, "team") == frozenset({"a", "b"}) and flex.union(infos, "any") is None
    unmet = flex.unmet(infos, pool.min_values())
    assert unmet == {L.ZONE: 2, L.INSTANCE_GPU_NAME: 0}
    assert unmet_reason(unmet, pool.min_values()) == (
        "minValues requirement is not met for label(s) [karpenter.k8s.aws/instance-gpu-name (0 of 1 values), "
        "topology.kubernetes.io/zone (2 of 3 values)]")
    relaxed_reqs = pool.with_min_values(unmet)
    assert relaxed_reqs[L.ZONE].min_values == 2 and relaxed_reqs[L.INSTANCE_GPU_NAME].min_values is None
    assert relaxed(pool.min_values(), relaxed_reqs) and not relaxed(pool.min_values(), pool)


def test_truncation_swaps_in_a_type_that_adds_a_family() -> None:
    types = {it.name: it for it in load_instance_types("us-east-1")}
    ordered = [TypeInfo(types[name], ()) for name in ("m5.large", "m5.xlarge", "m5.2xlarge", "c5.large")]
    flex = Flexibility(Requirements([req(L.INSTANCE_FAMILY, "Exists", min_values=2)]))
    kept = flex.truncate(ordered, 2, {L.INSTANCE_FAMILY: 2})
    assert [t.name for t in kept] == ["m5.large", "c5.large"]
    assert flex.needed(ordered, {L.INSTANCE_FAMILY: 2}) == 4
