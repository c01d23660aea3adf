"""Well-known labels of an instance type, derived from its ``DescribeInstanceTypes`` record as Karpenter does.

Source: Karpenter AWS provider ``computeRequirements`` (``pkg/providers/instancetype/types.go``) and its
"Instance Types" reference page. Every value is a string; numbers are base-10 integers as text:

====================================================  ==============================================
label                                                  value (m5.large / g4dn.xlarge examples)
====================================================  ==============================================
``node.kubernetes.io/instance-type``                   ``m5.large``
``kubernetes.io/arch``                                 ``amd64`` / ``arm64`` (from x86_64 / arm64)
``kubernetes.io/os``                                   ``linux``
``karpenter.k8s.aws/instance-category``                ``m`` (letters before the generation digit)
``karpenter.k8s.aws/instance-family``                  ``m5`` (text before the dot)
``karpenter.k8s.aws/instance-generation``              ``5``
``karpenter.k8s.aws/instance-size``                    ``large`` (text after the dot)
``karpenter.k8s.aws/instance-cpu``                     ``2`` (vCPUs)
``karpenter.k8s.aws/instance-cpu-manufacturer``        ``intel`` / ``amd`` / ``aws`` (lower-kebab case)
``karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz``  ``3100``
``karpenter.k8s.aws/instance-memory``                  ``8192`` (MiB as reported by EC2)
``karpenter.k8s.aws/instance-ebs-bandwidth``           ``4750`` (Mbps, max; EBS-optimized by default only)
``karpenter.k8s.aws/instance-network-bandwidth``       ``750`` (Mbps, baseline of the default card)
``karpenter.k8s.aws/instance-hypervisor``              ``nitro`` / ``xen`` / ``""`` (bare metal)
``karpenter.k8s.aws/instance-encryption-in-transit-supported``  ``true`` / ``false``
``karpenter.k8s.aws/instance-local-nvme``              ``125`` (GB of NVMe instance store), if any
``karpenter.k8s.aws/instance-gpu-{name,manufacturer,count,memory}``  ``t4``, ``nvidia``, ``1``, ``16384``
                                                       (MiB per GPU), when the type has exactly one GPU model
``karpenter.k8s.aws/instance-accelerator-{name,manufacturer,count}``  ``inferentia2``, ``aws``, ``1`` for
                                                       Neuron devices (or legacy inference accelerators)
====================================================  ==============================================

Labels that vary per offering (zone, zone id, region, capacity type) are not here: the scheduler takes them
from :class:`nodewright.cloud.instancetype.Offering`. Network bandwidth comes from
``NetworkCards[default].BaselineBandwidthInGbps`` x 1000, where Karpenter reads a table generated from the same
AWS documentation; both give e.g. 750 for m5.large.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nodewright.api import labels as L

# Karpenter's instance type scheme: category letters, optional "-<n>tb" (u-6tb1), generation digit(s).
_TYPE_SCHEME = re.compile(r"^([a-z]+)(-[0-9]+tb)?([0-9]+).*\.")
# EC2 architecture names -> Kubernetes GOARCH (Karpenter AWSToKubeArchitectures).
AWS_TO_KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


def lower_kebab(text: str) -> str:
    """``"NVIDIA A10G"`` -> ``"nvidia-a10g"``: Karpenter's label value spelling for names."""
    return text.replace(" ", "-").lower()


def kube_arch(record: Mapping[str, Any]) -> str:
    """``amd64`` or ``arm64`` for the first supported architecture Kubernetes knows (i386-only types: ``""``)."""
    for arch in record.get("ProcessorInfo", {}).get("SupportedArchitectures", []):
        if arch in AWS_TO_KUBE_ARCH:
            return AWS_TO_KUBE_ARCH[arch]
    return ""


_ZONE = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]$")


def region_of_zone(zone: str) -> str | None:
    """``"ap-northeast-2a"`` -> ``"ap-northeast-2"``; None for anything else."""
    match = _ZONE.match(zone)
    return match.group(1) if match else None


def instance_family(instance_type: str) -> str:
    """``"m6i.large"`` -> ``"m6i"``: the text before the dot (the ``karpenter.k8s.aws/instance-family`` label,
    and the family Savings Plans, Reserved Instances and the spot model key on)."""
    return instance_type.split(".", 1)[0]


def _name_labels(name: str) -> dict[str, str]:
    out: dict[str, str] = {}
    match = _TYPE_SCHEME.match(name)
    if match:
        out[L.INSTANCE_CATEGORY] = match.group(1)
        out[L.INSTANCE_GENERATION] = match.group(3)
    parts = name.split(".")
    if len(parts) == 2:
        out[L.INSTANCE_FAMILY], out[L.INSTANCE_SIZE] = parts
    return out


def _processor_labels(record: Mapping[str, Any]) -> dict[str, str]:
    processor = record.get("ProcessorInfo")
    if processor is None:
        return {}
    clock_mhz = round(float(processor.get("SustainedClockSpeedInGhz") or 0) * 1000)
    return {
        L.INSTANCE_CPU_MANUFACTURER: lower_kebab(str(processor.get("Manufacturer", ""))),
        L.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: str(clock_mhz),
    }


def _storage_and_network_labels(record: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    storage = record.get("InstanceStorageInfo")
    if storage and storage.get("NvmeSupport") != "unsupported" and storage.get("TotalSizeInGB") is not None:
        out[L.INSTANCE_LOCAL_NVME] = str(int(storage["TotalSizeInGB"]))
    network = record.get("NetworkInfo", {})
    default_index = network.get("DefaultNetworkCardIndex", 0)
    for card in network.get("NetworkCards") or []:
        baseline = card.get("BaselineBandwidthInGbps")
        if card.get("NetworkCardIndex") == default_index and baseline is not None:
            out[L.INSTANCE_NETWORK_BANDWIDTH] = str(round(float(baseline) * 1000))
    ebs = record.get("EbsInfo") or {}
    optimized = ebs.get("EbsOptimizedInfo")
    if optimized and ebs.get("EbsOptimizedSupport") == "default":
        out[L.INSTANCE_EBS_BANDWIDTH] = str(int(optimized["MaximumBandwidthInMbps"]))
    return out


def _accelerator_labels(record: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    gpus = (record.get("GpuInfo") or {}).get("Gpus") or []
    # Karpenter labels GPUs only when the type carries a single GPU model.
    if len(gpus) == 1:
        gpu = gpus[0]
        out[L.INSTANCE_GPU_NAME] = lower_kebab(str(gpu.get("Name", "")))
        out[L.INSTANCE_GPU_MANUFACTURER] = lower_kebab(str(gpu.get("Manufacturer", "")))
        out[L.INSTANCE_GPU_COUNT] = str(int(gpu.get("Count", 0)))
        out[L.INSTANCE_GPU_MEMORY] = str(int(gpu.get("MemoryInfo", {}).get("SizeInMiB", 0)))
    neuron = (record.get("NeuronInfo") or {}).get("NeuronDevices") or []
    legacy = (record.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    if len(neuron) == 1:
        out[L.INSTANCE_ACCELERATOR_NAME] = lower_kebab(str(neuron[0].get("Name", "")))
        out[L.INSTANCE_ACCELERATOR_MANUFACTURER] = "aws"
        out[L.INSTANCE_ACCELERATOR_COUNT] = str(int(neuron[0].get("Count", 0)))
    elif len(legacy) == 1 and not record.get("NeuronInfo"):
        out[L.INSTANCE_ACCELERATOR_NAME] = lower_kebab(str(legacy[0].get("Name", "")))
        out[L.INSTANCE_ACCELERATOR_MANUFACTURER] = lower_kebab(str(legacy[0].get("Manufacturer", "")))
        out[L.INSTANCE_ACCELERATOR_COUNT] = str(int(legacy[0].get("Count", 0)))
    return out


def instance_type_labels(record: Mapping[str, Any]) -> dict[str, str]:
    """Single-valued well-known labels of any node of this type (see the module table).

    Args:
        record: one ``InstanceTypeInfo`` of ``DescribeInstanceTypes`` (AWS field names, as boto3 returns).

    Raises:
        KeyError: when the record lacks ``InstanceType``, ``VCpuInfo`` or ``MemoryInfo``.
    """
    name = str(record["InstanceType"])
    labels = {
        L.INSTANCE_TYPE: name,
        L.ARCH: kube_arch(record),
        L.OS: "linux",
        L.INSTANCE_CPU: str(int(record["VCpuInfo"]["DefaultVCpus"])),
        L.INSTANCE_MEMORY: str(int(record["MemoryInfo"]["SizeInMiB"])),
        L.INSTANCE_HYPERVISOR: str(record.get("Hypervisor", "")),
        L.INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: str(
            bool(record.get("NetworkInfo", {}).get("EncryptionInTransitSupported", False))
        ).lower(),
    }
    labels.update(_name_labels(name))
    labels.update(_processor_labels(record))
    labels.update(_storage_and_network_labels(record))
    labels.update(_accelerator_labels(record))
    return labels
