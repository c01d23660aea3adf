"""NodeOverlay matching, weights, conflicts and price adjustments (nodewright.cloud.overlay), and the model's
validation of bad input (nodewright.api.nodeoverlay)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.api.manifests import parse_documents, parse_nodeoverlay
from nodewright.cloud.instancetype import InstanceType, Offering, Overhead
from nodewright.cloud.overlay import (
    REASON_CONFLICT,
    REASON_RUNTIME_VALIDATION,
    Overlay,
    OverlayInput,
    OverlayStore,
    PoolTypes,
    adjusted_price,
    resolve,
)
from nodewright.errors import NodewrightValidationError


def _type(name: str, arch: str = "amd64", price: float = 1.0, family: str | None = None) -> InstanceType:
    offerings = tuple(Offering(zone, ct, price if ct == "on-demand" else price / 2, zone_id=f"use1-az{i}")
                      for i, zone in enumerate(("us-east-1a", "us-east-1b"), start=1)
                      for ct in ("on-demand", "spot"))
    return InstanceType(name, {L.INSTANCE_TYPE: name, L.ARCH: arch,
                               "karpenter.k8s.aws/instance-family": family or name.split(".")[0]},
                        {"cpu": 2000, "memory": 8 << 30, "pods": 29}, Overhead(), offerings)


TYPES = [_type("m5.large", price=0.096), _type("m6g.large", "arm64", 0.077), _type("c5.large", price=0.085)]


def _overlay(name: str, spec: dict[str, Any]) -> Overlay:
    return Overlay.from_model(parse_nodeoverlay(
        {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
         "spec": {"requirements": [], **spec}}))


def _pools(*pools: tuple[str, dict[str, str]]) -> list[PoolTypes]:
    return [PoolTypes(name, labels, TYPES) for name, labels in pools] or [PoolTypes("default", {}, TYPES)]


def _price(types: list[InstanceType], name: str, zone: str = "us-east-1a", ct: str = "on-demand") -> float:
    it = next(t for t in types if t.name == name)
    return next(o.price for o in it.offerings if o.zone == zone and o.capacity_type == ct)


@pytest.mark.parametrize(("change", "expected"), [
    ("", 1.0), ("2.5", 2.5), ("0", 0.0), ("+10%", 1.1), ("-15%", 0.85), ("-100%", 0.0), ("+298%", 3.98),
    ("+0.5", 1.5), ("-0.25", 0.75), ("-5", 0.0),  # an absolute cut below zero stops at 0 (Karpenter)
])
def test_adjusted_price_follows_karpenter(change: str, expected: float) -> None:
    assert adjusted_price(1.0, change) == pytest.approx(expected)


def test_price_selects_types_by_label_and_offerings_by_capacity_type() -> None:
    overlay = _overlay("arm-spot", {"requirements": [{"key": L.ARCH, "operator": "In", "values": ["arm64"]},
                                                     {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}],
                                    "price": "0.01"})
    res = resolve([overlay], _pools())
    out = res.apply("default", TYPES)
    assert _price(out, "m6g.large", ct="spot") == 0.01 and _price(out, "m6g.large", "us-east-1b", "spot") == 0.01
    assert _price(out, "m6g.large") == 0.077  # on-demand untouched
    assert _price(out, "m5.large", ct="spot") == 0.048  # amd64 untouched
    assert out[0] is TYPES[0] and out[2] is TYPES[2]  # unchanged types are the same objects
    assert res.verdicts["arm-spot"].ok


def test_zone_requirement_selects_one_zone_and_empty_requirements_select_everything() -> None:
    zonal = _overlay("zone-b", {"requirements": [{"key": L.ZONE, "operator": "In", "values": ["us-east-1b"]}],
                                "priceAdjustment": "+100%"})
    out = resolve([zonal], _pools()).apply("default", TYPES)
    assert _price(out, "c5.large", "us-east-1b") == pytest.approx(0.17) and _price(out, "c5.large") == 0.085
    everything = resolve([_overlay("all", {"priceAdjustment": "-50%"})], _pools()).apply("default", TYPES)
    assert [_price(everything, t.name) for t in TYPES] == pytest.approx([0.048, 0.0385, 0.0425])


def test_nodepool_name_and_template_labels_select_pools_not_requirements() -> None:
    by_pool = _overlay("gpu-pool", {"requirements": [{"key": L.NODEPOOL, "operator": "In", "values": ["gpu"]}],
                                    "price": "9"})
    by_label = _overlay("team-a", {"requirements": [{"key": "team", "operator": "In", "values": ["a"]}],
                                   "capacity": {"example.com/fuse": "1"}})
    res = resolve([by_pool, by_label], _pools(("default", {"team": "a"}), ("gpu", {})))
    assert _price(res.apply("gpu", TYPES), "m5.large") == 9.0 and _price(res.apply("default", TYPES), "m5.large") == 0.096
    assert res.apply("default", TYPES)[0].capacity["example.com/fuse"] == 1
    assert "example.com/fuse" not in res.apply("gpu", TYPES)[0].capacity  # no such label on that pool


def test_numeric_requirements_select_by_label_value() -> None:
    types = [_type("m5.large"), _type("m5.4xlarge")]
    types = [InstanceType(t.name, {**t.labels, "karpenter.k8s.aws/instance-cpu": cpu}, t.capacity, t.overhead,
                          t.offerings) for t, cpu in zip(types, ("2", "16"), strict=True)]
    overlay = _overlay("big", {"requirements": [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte",
                                                 "values": ["16"]}], "price": "3"})
    out = resolve([overlay], [PoolTypes("p", {}, types)]).apply("p", types)
    assert [_price(out, n) for n in ("m5.large", "m5.4xlarge")] == [1.0, 3.0]


def test_higher_weight_wins_and_capacity_merges_across_weights() -> None:
    # Karpenter's docs example: overlay-b (weight 10) sets the price, overlay-a's hugepages are kept.
    a = _overlay("overlay-a", {"weight": 5, "priceAdjustment": "-10%", "capacity": {"hugepages-2Mi": "50Mi"},
                               "requirements": [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}]})
    b = _overlay("overlay-b", {"weight": 10, "priceAdjustment": "-20%", "capacity": {"example.com/gpu": "1"},
                               "requirements": [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}]})
    res = resolve([a, b], _pools())
    m5 = res.apply("default", TYPES)[0]
    assert _price([m5], "m5.large") == pytest.approx(0.0768)
    assert m5.capacity["hugepages-2Mi"] == 50 << 20 and m5.capacity["example.com/gpu"] == 1
    assert m5.capacity["cpu"] == 2000  # standard resources untouched
    assert res.verdicts["overlay-a"].ok and res.verdicts["overlay-b"].ok


def test_capacity_replaces_a_resource_the_type_reports() -> None:
    gpu = InstanceType("g6f.xlarge", {L.INSTANCE_TYPE: "g6f.xlarge"}, {"cpu": 4000, "nvidia.com/gpu": 0},
                       Overhead(), TYPES[0].offerings)
    out = resolve([_overlay("g6f", {"capacity": {"nvidia.com/gpu": "1"}})], [PoolTypes("p", {}, [gpu])]).apply("p", [gpu])
    assert out[0].capacity["nvidia.com/gpu"] == 1


def test_equal_weight_price_overlap_conflicts_later_name_wins_nothing_of_the_loser_applies() -> None:
    a = _overlay("overlay-a", {"weight": 10, "price": "1.03", "capacity": {"example.com/x": "1"},
                               "requirements": [{"key": L.ARCH, "operator": "In", "values": ["arm64"]}]})
    b = _overlay("overlay-b", {"weight": 10, "price": "23",
                               "requirements": [{"key": L.CAPACITY_TYPE, "operator": "Exists"}]})
    res = resolve([a, b], _pools())
    assert res.verdicts["overlay-b"].ok
    verdict = res.verdicts["overlay-a"]
    assert verdict.reason == REASON_CONFLICT
    assert verdict.message.startswith("conflict with another overlay: NodeOverlay 'overlay-b' of weight 10")
    assert "m6g.large" in verdict.message and "NodePool default" in verdict.message
    arm = res.apply("default", TYPES)[1]
    assert _price([arm], "m6g.large") == 23.0 and "example.com/x" not in arm.capacity  # all or nothing


def test_identical_equal_weight_prices_still_conflict_and_disjoint_selections_do_not() -> None:
    same = [_overlay(n, {"weight": 3, "price": "100"}) for n in ("a", "b")]
    assert resolve(same, _pools()).verdicts["a"].reason == REASON_CONFLICT
    disjoint = [_overlay("a", {"price": "1", "requirements": [{"key": L.ARCH, "operator": "In", "values": ["arm64"]}]}),
                _overlay("b", {"price": "2", "requirements": [{"key": L.ARCH, "operator": "In", "values": ["amd64"]}]})]
    assert all(v.ok for v in resolve(disjoint, _pools()).verdicts.values())
    # Different capacity resources at one weight merge; the same resource conflicts.
    caps = [_overlay("a", {"capacity": {"x.io/a": "1"}}), _overlay("b", {"capacity": {"x.io/b": "1"}}),
            _overlay("c", {"capacity": {"x.io/a": "2"}})]
    res = resolve(caps, _pools())
    assert res.verdicts["a"].reason == REASON_CONFLICT and res.verdicts["b"].ok and res.verdicts["c"].ok
    assert res.apply("default", TYPES)[0].capacity["x.io/a"] == 2


def test_a_conflict_in_one_pool_keeps_the_overlay_out_of_every_pool() -> None:
    winner = _overlay("z-gpu", {"weight": 1, "price": "5",
                                "requirements": [{"key": L.NODEPOOL, "operator": "In", "values": ["gpu"]}]})
    loser = _overlay("a-all", {"weight": 1, "price": "7"})
    res = resolve([winner, loser], _pools(("default", {}), ("gpu", {})))
    assert res.verdicts["a-all"].reason == REASON_CONFLICT
    assert _price(res.apply("default", TYPES), "m5.large") == 0.096


@pytest.mark.parametrize(("spec", "path", "reason"), [
    ({"priceAdjustment": "10%"}, "spec.priceAdjustment", "'10%' is not a price adjustment"),
    ({"priceAdjustment": "-100.0%"}, "spec.priceAdjustment", "is not a price adjustment"),
    ({"price": "+42"}, "spec.price", "'+42' is not a price"),
    ({"price": "1e10"}, "spec.price", "is not a price"),
    ({"price": "1", "priceAdjustment": "+1%"}, "spec.priceAdjustment", "cannot set both 'price' and 'priceAdjustment'"),
    ({"capacity": {"memory": "1Gi"}}, "spec.capacity[memory]", "'memory' is restricted"),
    ({"weight": 0}, "spec.weight", ""),
    ({"weight": 10001}, "spec.weight", ""),
    ({"requirements": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]}, "spec.requirements[0].key", ""),
    ({"requirements": [{"key": "karpenter.sh/other", "operator": "Exists"}]}, "spec.requirements[0].key",
     "label domain 'karpenter.sh' is restricted"),
    ({"requirements": [{"key": "team", "operator": "NotIn"}]}, "spec.requirements[0].values", "NotIn needs"),
    ({"requirements": [{"key": L.ZONE, "operator": "Gt", "values": ["-1"]}]}, "spec.requirements[0].values",
     "Gt needs one integer"),
])
def test_bad_overlays_are_one_error_naming_the_field(spec: dict[str, Any], path: str, reason: str) -> None:
    doc = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "bad"},
           "spec": {"requirements": [], **spec}}
    with pytest.raises(NodewrightValidationError) as err:
        parse_documents([doc])
    assert str(err.value).startswith(f"documents[0].{path}: ") and reason in str(err.value)
    assert "\n" not in str(err.value)


def test_karpenter_sh_nodepool_and_capacity_type_keys_are_allowed() -> None:
    for key in (L.NODEPOOL, L.CAPACITY_TYPE, "kubernetes.io/test", "subdomain.k8s.io/test", L.ZONE):
        _overlay("ok", {"requirements": [{"key": key, "operator": "In", "values": ["x"]}]})


def test_store_gate_off_warns_once_and_leaves_types(caplog: pytest.LogCaptureFixture) -> None:
    store = OverlayStore(enabled=False)
    inputs = [OverlayInput("cheap", ("u", "1"), parse_nodeoverlay(
        {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "cheap"},
         "spec": {"requirements": [], "price": "0.001"}}))]
    with caplog.at_level(logging.WARNING, logger="nodewright.overlay"):
        for _ in range(3):
            out = store.instance_types(inputs, _pools())
    assert out["default"] == TYPES
    assert [r.getMessage() for r in caplog.records] == [
        "1 NodeOverlay(s) ignored: feature gate NodeOverlay is off (set FEATURE_GATES=NodeOverlay=true, chart "
        "settings.featureGates.nodeOverlay: true)"]


def test_store_caches_while_inputs_are_the_same_and_reports_invalid_overlays() -> None:
    store = OverlayStore(enabled=True)
    good = parse_nodeoverlay({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                              "metadata": {"name": "good"}, "spec": {"requirements": [], "price": "2"}})
    bad = NodewrightValidationError("spec.price", "'x' is not a price")
    inputs = [OverlayInput("good", ("u1", "1"), good), OverlayInput("bad", ("u2", "1"), bad)]
    pools = _pools()
    first = store.instance_types(inputs, pools)
    second = store.instance_types(inputs, pools)
    assert all(a is b for a, b in zip(first["default"], second["default"], strict=True))
    assert _price(first["default"], "m5.large") == 2.0
    assert store.resolution.verdicts["bad"].reason == REASON_RUNTIME_VALIDATION
    assert store.resolution.verdicts["bad"].message == "spec.price: 'x' is not a price"
    assert store.launch_types("default", TYPES)[0].offerings[0].price == 2.0
    assert store.launch_types(None, TYPES)[0] is TYPES[0]  # a NodeClaim of no NodePool: no overlay
    assert store.price_overlaid("default", "m5.large")
