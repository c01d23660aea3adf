"""The catalog as an EC2NodeClass's nodes see it (Windows families, nested virtualization), and its coverage:
every commercial region moto knows, AMD GPU g4ad from the supplement."""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.api.manifests import parse_ec2nodeclass
from nodewright.cloud.catalog import (
    WINDOWS_LICENSE_PER_VCPU_HOUR,
    bundled_regions,
    instance_type_records,
    instance_types_for_nodeclass,
    known_label_values,
    load_instance_types,
)


def _spec(**fields: Any) -> Any:
    doc = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "c"},
           "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
                    "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
                    **fields}}
    return parse_ec2nodeclass(doc).spec


@pytest.mark.parametrize("alias,build", [("windows2019@latest", "10.0.17763"), ("windows2022@latest", "10.0.20348"),
                                         ("windows2025@latest", "10.0.26100")])
def test_windows_classes_get_amd64_windows_types(alias: str, build: str) -> None:
    linux = {t.name: t for t in load_instance_types("us-east-1")}
    windows = {t.name: t for t in instance_types_for_nodeclass(list(linux.values()),
                                                                _spec(amiSelectorTerms=[{"alias": alias}]))}
    assert "m5.large" in windows and "m6g.large" not in windows  # Windows Server runs on x86 only
    assert set(windows) == {n for n, t in linux.items() if t.labels["kubernetes.io/arch"] == "amd64"}
    m5 = windows["m5.large"]
    assert m5.labels["kubernetes.io/os"] == "windows" and m5.labels["node.kubernetes.io/windows-build"] == build
    on_demand = {o.price for o in m5.offerings if o.capacity_type == "on-demand"}
    assert on_demand == {round(0.096 + 2 * WINDOWS_LICENSE_PER_VCPU_HOUR, 6)} == {0.188}  # AWS lists $0.188/h
    assert linux["m5.large"].labels["kubernetes.io/os"] == "linux"  # the shared catalog is untouched


def test_custom_family_with_a_windows_alias_stays_linux_as_in_karpenter() -> None:
    types = load_instance_types("us-east-1")
    spec = _spec(amiFamily="Custom", amiSelectorTerms=[{"alias": "windows2022@latest"}])
    assert instance_types_for_nodeclass(types, spec) == types


def test_nested_virtualization_keeps_only_supporting_types() -> None:
    types = load_instance_types("us-east-1")
    kept = instance_types_for_nodeclass(types, _spec(cpuOptions={"nestedVirtualization": "enabled"}))
    records = instance_type_records()
    assert kept and len(kept) < len(types)
    assert all("nested-virtualization" in records[t.name]["ProcessorInfo"]["SupportedFeatures"] for t in kept)
    assert instance_types_for_nodeclass(types, _spec(cpuOptions={"nestedVirtualization": "disabled"})) == types


def test_every_commercial_region_moto_knows_is_bundled() -> None:
    regions = bundled_regions()
    assert len(regions) == 30
    assert {"af-south-1", "ap-southeast-5", "ca-west-1", "il-central-1", "me-central-1", "sa-east-1"} <= set(regions)
    assert {t.name for t in load_instance_types("sa-east-1")} >= {"m5.large", "c6g.large"}


def test_amd_gpu_g4ad_from_the_supplement() -> None:
    types = {t.name: t for t in load_instance_types("us-east-1")}
    g4ad = types["g4ad.8xlarge"]
    assert g4ad.capacity["amd.com/gpu"] == 2
    assert g4ad.labels["karpenter.k8s.aws/instance-gpu-name"] == "radeon-pro-v520"
    assert g4ad.labels["karpenter.k8s.aws/instance-gpu-manufacturer"] == "amd"
    assert g4ad.labels["karpenter.k8s.aws/instance-network-bandwidth"] == "15000"
    assert g4ad.capacity["pods"] == 58  # 4 ENIs x (15 - 1) + 2, as Karpenter's reference lists
    assert {o.price for o in g4ad.offerings if o.capacity_type == "on-demand"} == {1.734}
    assert "g4ad.xlarge" not in {t.name for t in load_instance_types("sa-east-1")}
    assert "amd" in known_label_values()["karpenter.k8s.aws/instance-gpu-manufacturer"]
