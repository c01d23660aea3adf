"""load_instance_types and friends: offerings per zone, spot support, caching, validation, field report 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodewright.cloud.catalog import (
    Zone,
    bundled_regions,
    catalog_price_source,
    instance_type_from_aws,
    instance_type_records,
    is_supported,
    load_instance_types,
    price_is_fallback,
    price_table,
    region_zones,
)
from nodewright.cloud.instancetype import InstanceType
from nodewright.cloud.overhead import MIB, KubeletSettings
from nodewright.errors import NodewrightValidationError

APNE2_AC = ["ap-northeast-2a", "ap-northeast-2c"]


def by_name(types: list[InstanceType]) -> dict[str, InstanceType]:
    return {t.name: t for t in types}


def test_bundled_regions_and_zones() -> None:
    assert {"us-east-1", "ap-northeast-2"} <= set(bundled_regions())
    assert region_zones("ap-northeast-2") == [
        "ap-northeast-2a",
        "ap-northeast-2b",
        "ap-northeast-2c",
        "ap-northeast-2d",
    ]
    assert region_zones("us-east-1") == [f"us-east-1{s}" for s in "abcdef"]


def test_unknown_region_and_zone_are_validation_errors() -> None:
    with pytest.raises(NodewrightValidationError, match="no bundled EC2 catalog for 'mars-1'"):
        load_instance_types("mars-1")
    with pytest.raises(NodewrightValidationError, match="us-east-1a not in ap-northeast-2"):
        load_instance_types("ap-northeast-2", zones=["us-east-1a"])


def test_field_report_1_four_gib_types_cannot_fit_and_the_rest_order_by_price() -> None:
    """ap-northeast-2 a+c, 1780m / 3448Mi requested: t3.medium and c5.large are too small."""
    types = by_name(load_instance_types("ap-northeast-2", zones=APNE2_AC))
    pool = ["t3.medium", "c5.large", "t3.large", "m5.large", "t3.xlarge", "m5.xlarge"]
    need_cpu, need_mem = 1780, 3448 * MIB

    def fits(name: str) -> bool:
        alloc = types[name].allocatable()
        return alloc["cpu"] >= need_cpu and alloc["memory"] >= need_mem

    assert [n for n in pool if not fits(n)] == ["t3.medium", "c5.large"]
    fitting = [n for n in pool if fits(n)]
    prices = {n: types[n].cheapest_offering(APNE2_AC, ["on-demand"]).price for n in fitting}  # type: ignore[union-attr]
    assert sorted(fitting, key=lambda n: prices[n]) == ["t3.large", "m5.large", "t3.xlarge", "m5.xlarge"]
    assert prices == {"t3.large": 0.0832, "m5.large": 0.096, "t3.xlarge": 0.1664, "m5.xlarge": 0.192}
    assert types["t3.medium"].allocatable()["memory"] == 3246 * MIB
    assert types["c5.large"].allocatable()["memory"] == 3114 * MIB
    assert types["m5.large"].allocatable()["memory"] == 6903 * MIB


def test_offerings_cover_zones_and_both_capacity_types() -> None:
    m5 = by_name(load_instance_types("ap-northeast-2", zones=APNE2_AC))["m5.large"]
    assert sorted((o.zone, o.capacity_type, o.zone_id) for o in m5.offerings) == [
        ("ap-northeast-2a", "on-demand", "apne2-az1"),
        ("ap-northeast-2a", "spot", "apne2-az1"),
        ("ap-northeast-2c", "on-demand", "apne2-az3"),
        ("ap-northeast-2c", "spot", "apne2-az3"),
    ]
    assert m5.cheapest_offering().price == 0.034579  # type: ignore[union-attr]
    assert m5.labels["node.kubernetes.io/instance-type"] == "m5.large"
    assert "topology.kubernetes.io/zone" not in m5.labels


def test_spot_only_where_supported_usage_classes_say_so() -> None:
    assert "spot" not in instance_type_records()["t2.nano"]["SupportedUsageClasses"]
    t2 = by_name(load_instance_types("us-east-1"))["t2.nano"]
    assert {o.capacity_type for o in t2.offerings} == {"on-demand"}


def test_types_only_where_offered_and_priced() -> None:
    all_a2 = by_name(load_instance_types("ap-northeast-2"))
    only_b = by_name(load_instance_types("ap-northeast-2", zones=["ap-northeast-2b"]))
    # g4dn.xlarge is offered in ap-northeast-2 a, b, c but not d.
    assert (
        sorted({o.zone for o in all_a2["g4dn.xlarge"].offerings})
        == APNE2_AC[:1] + ["ap-northeast-2b"] + APNE2_AC[1:]
    )
    assert len(only_b) < len(all_a2)
    assert all({o.zone for o in t.offerings} == {"ap-northeast-2b"} for t in only_b.values())
    us = load_instance_types("us-east-1")
    assert len(us) == 1345  # moto's 1,340 offered and priced + the 5 g4ad sizes of the supplement
    assert all(t.offerings for t in us)
    assert "mac1.metal" not in by_name(us)


def test_is_supported_drops_mac_and_non_hvm() -> None:
    records = instance_type_records()
    assert is_supported(records["m5.large"])
    assert not is_supported(records["mac1.metal"])
    assert not is_supported(
        {
            "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
            "SupportedVirtualizationTypes": ["paravirtual"],
        }
    )


def test_cached_per_argument_set() -> None:
    first = load_instance_types("us-east-1", zones=["us-east-1a", "us-east-1b"])
    again = load_instance_types("us-east-1", zones=["us-east-1b", "us-east-1a"])
    assert first is not again and first == again
    assert all(a is b for a, b in zip(first, again, strict=True))
    other = load_instance_types("us-east-1", zones=["us-east-1a", "us-east-1b"], max_pods=110)
    assert by_name(other)["m5.large"].capacity["pods"] == 110
    assert by_name(first)["m5.large"].capacity["pods"] == 29


def test_kubelet_arguments_change_allocatable() -> None:
    types = by_name(
        load_instance_types(
            "us-east-1",
            zones=["us-east-1a"],
            kube_reserved={"cpu": "250m"},
            system_reserved={"memory": "100Mi"},
            eviction_hard={"memory.available": "200Mi"},
            vm_memory_overhead_percent=0.05,
        )
    )
    alloc = types["t3.large"].allocatable()
    assert alloc["cpu"] == 1750
    # 8192 - ceil(409.6)=410 -> 7782Mi; - 640 kube - 100 system - 200 eviction
    assert alloc["memory"] == (7782 - 640 - 100 - 200) * MIB
    with pytest.raises(NodewrightValidationError, match="kubelet.kubeReserved.cpu"):
        load_instance_types("us-east-1", kube_reserved={"cpu": "lots"})


def test_spot_price_file_replaces_model(tmp_path: Path) -> None:
    path = tmp_path / "spot.json"
    path.write_text(json.dumps({"m5.large": {"ap-northeast-2a": 0.031}}))
    m5 = by_name(load_instance_types("ap-northeast-2", zones=APNE2_AC, spot_prices=path))["m5.large"]
    spot = {o.zone: o.price for o in m5.offerings if o.capacity_type == "spot"}
    assert spot == {"ap-northeast-2a": 0.031, "ap-northeast-2c": 0.034579}
    assert price_table("ap-northeast-2", path).spot_source.startswith(f"spot prices from {path}")


def test_price_source_lines() -> None:
    assert price_is_fallback("ap-northeast-2") is True
    assert price_is_fallback("us-east-1") is False
    assert catalog_price_source("ap-northeast-2") == (
        "bundled us-east-1 on-demand prices (AWS Price List API, us-east-1 Linux on-demand, 2026-07-20); "
        "us-east-1 prices stand in for ap-northeast-2"
    )
    assert catalog_price_source("us-east-1") == (
        "bundled us-east-1 on-demand prices (AWS Price List API, us-east-1 Linux on-demand, 2026-07-20)"
    )


class FixedPrices:
    def on_demand_price(self, instance_type: str) -> float | None:
        return 1.0

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        return None if zone.endswith("b") else 0.3


def test_instance_type_from_live_record_with_own_prices_and_unavailable_offerings() -> None:
    record = dict(instance_type_records()["m5.large"])
    it = instance_type_from_aws(
        record,
        [Zone("eu-west-1a", "euw1-az3"), Zone("eu-west-1b", "euw1-az1")],
        FixedPrices(),
        kubelet=KubeletSettings(max_pods=58),
        unavailable={("m5.large", "eu-west-1a", "spot")},
    )
    assert it.capacity["pods"] == 58
    assert [(o.zone, o.capacity_type, o.price, o.available) for o in it.offerings] == [
        ("eu-west-1a", "on-demand", 1.0, True),
        ("eu-west-1a", "spot", 0.3, False),
        ("eu-west-1b", "on-demand", 1.0, True),
    ]
    assert it.cheapest_offering(capacity_types=["spot"]) is None
    with pytest.raises(TypeError):
        it.labels["kubernetes.io/arch"] = "arm64"  # type: ignore[index]


def test_bundle_is_small() -> None:
    data = Path(__file__).resolve().parents[3] / "nodewright" / "data"
    total = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    assert total < 3 * 1024 * 1024


def test_pods_per_core_eviction_soft_and_root_volume_arguments() -> None:
    types = by_name(
        load_instance_types(
            "us-east-1",
            zones=["us-east-1a"],
            pods_per_core=4,
            eviction_soft={"memory.available": "300Mi"},
            root_volume_bytes=100 * 1024 * MIB,
        )
    )
    m5 = types["m5.large"]
    assert m5.capacity["pods"] == 8
    # 7577Mi - (255 + 11 x 29) kube-reserved (AL2023: the ENI-limited 29 pods, not the 8 podsPerCore allows;
    # Karpenter UsesENILimitedMemoryOverhead) - 100Mi hard eviction (the soft threshold reserves nothing)
    assert m5.allocatable()["memory"] == (7577 - 574 - 100) * MIB
    # 100Gi - 1Gi kube-reserved - 10Gi nodefs eviction
    assert m5.allocatable()["ephemeral-storage"] == 89 * 1024 * MIB


def test_shared_instance_types_are_read_only_but_copy_and_pickle() -> None:
    import copy
    import pickle

    m5 = by_name(load_instance_types("us-east-1", zones=["us-east-1a"]))["m5.large"]
    with pytest.raises(TypeError, match="read-only"):
        m5.capacity["pods"] = 1  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        m5.labels.update({"a": "b"})  # type: ignore[attr-defined]
    clone = copy.deepcopy(m5)
    assert clone == m5 and clone.capacity["pods"] == 29
    assert pickle.loads(pickle.dumps(m5)) == m5
    assert dict(m5.capacity)["pods"] == 29
