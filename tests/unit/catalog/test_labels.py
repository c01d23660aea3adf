"""Well-known labels derived from DescribeInstanceTypes records, spelled and valued as Karpenter does."""

from __future__ import annotations

import copy

import pytest

from nodewright.cloud.catalog import instance_type_records
from nodewright.cloud.labels import instance_type_labels, kube_arch, lower_kebab

PREFIX = "karpenter.k8s.aws/"


def labels_of(name: str) -> dict[str, str]:
    return instance_type_labels(instance_type_records()[name])


def test_m5_large_has_exactly_karpenters_labels() -> None:
    assert labels_of("m5.large") == {
        "node.kubernetes.io/instance-type": "m5.large",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        PREFIX + "instance-category": "m",
        PREFIX + "instance-family": "m5",
        PREFIX + "instance-generation": "5",
        PREFIX + "instance-size": "large",
        PREFIX + "instance-cpu": "2",
        PREFIX + "instance-cpu-manufacturer": "intel",
        PREFIX + "instance-cpu-sustained-clock-speed-mhz": "3100",
        PREFIX + "instance-memory": "8192",
        PREFIX + "instance-ebs-bandwidth": "4750",
        PREFIX + "instance-network-bandwidth": "750",
        PREFIX + "instance-hypervisor": "nitro",
        PREFIX + "instance-encryption-in-transit-supported": "false",
    }


def test_graviton_type_is_arm64_made_by_aws() -> None:
    labels = labels_of("m6g.large")
    assert labels["kubernetes.io/arch"] == "arm64"
    assert labels[PREFIX + "instance-cpu-manufacturer"] == "aws"
    assert labels[PREFIX + "instance-family"] == "m6g"
    assert labels[PREFIX + "instance-generation"] == "6"


def test_gpu_type_has_gpu_labels_and_local_nvme() -> None:
    labels = labels_of("g4dn.xlarge")
    assert {k: v for k, v in labels.items() if "gpu" in k or "nvme" in k} == {
        PREFIX + "instance-gpu-name": "t4",
        PREFIX + "instance-gpu-manufacturer": "nvidia",
        PREFIX + "instance-gpu-count": "1",
        PREFIX + "instance-gpu-memory": "16384",
        PREFIX + "instance-local-nvme": "125",
    }
    assert labels[PREFIX + "instance-category"] == "g"
    assert labels[PREFIX + "instance-generation"] == "4"


def test_multi_gpu_type_counts_gpus_of_its_single_model() -> None:
    labels = labels_of("p4d.24xlarge")
    assert labels[PREFIX + "instance-gpu-name"] == "a100"
    assert labels[PREFIX + "instance-gpu-count"] == "8"
    assert labels[PREFIX + "instance-gpu-memory"] == "40960"


def test_neuron_type_has_accelerator_labels_not_gpu_labels() -> None:
    labels = labels_of("inf2.xlarge")
    assert labels[PREFIX + "instance-accelerator-name"] == "inferentia2"
    assert labels[PREFIX + "instance-accelerator-manufacturer"] == "aws"
    assert labels[PREFIX + "instance-accelerator-count"] == "1"
    assert not any("gpu" in k for k in labels)


def test_bare_metal_has_empty_hypervisor_label() -> None:
    labels = labels_of("m5.metal")
    assert labels[PREFIX + "instance-hypervisor"] == ""
    assert labels[PREFIX + "instance-size"] == "metal"


def test_high_memory_name_scheme_u_6tb1() -> None:
    labels = labels_of("u-6tb1.112xlarge")
    assert labels[PREFIX + "instance-category"] == "u"
    assert labels[PREFIX + "instance-generation"] == "1"
    assert labels[PREFIX + "instance-family"] == "u-6tb1"
    assert labels[PREFIX + "instance-size"] == "112xlarge"


def test_ebs_bandwidth_only_when_ebs_optimized_by_default() -> None:
    record = copy.deepcopy(dict(instance_type_records()["m5.large"]))
    record["EbsInfo"]["EbsOptimizedSupport"] = "supported"
    assert PREFIX + "instance-ebs-bandwidth" not in instance_type_labels(record)


def test_minimal_record_still_labels_and_missing_fields_raise() -> None:
    record = {
        "InstanceType": "x9.large",
        "VCpuInfo": {"DefaultVCpus": 2},
        "MemoryInfo": {"SizeInMiB": 1024},
        "ProcessorInfo": {"SupportedArchitectures": ["i386", "x86_64"], "Manufacturer": "AMD"},
    }
    labels = instance_type_labels(record)
    assert labels["kubernetes.io/arch"] == "amd64"
    assert labels[PREFIX + "instance-cpu-sustained-clock-speed-mhz"] == "0"
    assert labels[PREFIX + "instance-hypervisor"] == ""
    with pytest.raises(KeyError):
        instance_type_labels({"InstanceType": "x9.large"})


def test_helpers() -> None:
    assert lower_kebab("NVIDIA A10G") == "nvidia-a10g"
    assert kube_arch({"ProcessorInfo": {"SupportedArchitectures": ["x86_64_mac"]}}) == ""
