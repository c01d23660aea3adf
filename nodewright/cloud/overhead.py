"""Node capacity and allocatable as EKS and Karpenter compute them from a ``DescribeInstanceTypes`` record.

``allocatable = capacity - kube_reserved - system_reserved - eviction_threshold`` per resource, where
(source: Karpenter AWS provider ``pkg/providers/instancetype/types.go``, which follows the EKS AMI bootstrap
and Bottlerocket's kube-reserved defaults):

* capacity ``cpu`` = ``VCpuInfo.DefaultVCpus`` x 1000 millicores.
* capacity ``memory`` = reported memory minus the VM overhead Karpenter subtracts: with ``M`` =
  ``MemoryInfo.SizeInMiB`` (minus 64 MiB of CMA-reserved memory on Graviton/arm64),
  ``M - ceil(M x vm_memory_overhead_percent)`` MiB, default percent 0.075 (Karpenter's
  ``VM_MEMORY_OVERHEAD_PERCENT``).
* capacity ``pods`` = kubelet ``maxPods`` when set, else the ENI-limited density of the VPC CNI:
  ``ENIs x (IPv4 per ENI - 1) + 2`` with ENIs of the default network card (EKS ``eni-max-pods.txt``), or 110 for
  the Windows families (no ENI-limited density); capped by ``podsPerCore x vCPUs`` when set, except on
  Bottlerocket (Karpenter's AMI family ``FeatureFlags``).
* capacity ``ephemeral-storage`` (Karpenter ``ephemeralStorage``): with ``instanceStorePolicy: RAID0`` and a
  type that has instance store, the instance store's ``TotalSizeInGB`` (decimal GB); else the EC2NodeClass's
  volume the kubelet uses (:func:`ephemeral_volume_bytes`: the ``rootVolume: true`` mapping, else the AMI
  family's ephemeral device, else that family's default: 20 GiB, Windows 50 GiB).
* extended resources: ``nvidia.com/gpu``, ``amd.com/gpu``, ``habana.ai/gaudi`` (GPU counts by manufacturer),
  ``aws.amazon.com/neuron`` and ``aws.amazon.com/neuroncore`` (Neuron devices and cores),
  ``vpc.amazonaws.com/efa`` (``EfaInfo.MaximumEfaInterfaces``); only non-zero ones are present.
* kube-reserved ``cpu`` by EKS tiers: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of
  every core above 4 (each tier truncated to whole millicores, as Karpenter does); kube-reserved
  ``memory`` = ``255Mi + 11Mi x pods`` where pods is the ENI-limited density (no reserved ENIs) on AL2, AL2023
  and Custom whatever ``maxPods`` says, and the pods capacity on Bottlerocket and Windows (Karpenter
  ``UsesENILimitedMemoryOverhead``, :func:`kube_reserved_pods`); kube-reserved ``ephemeral-storage`` = 1Gi. Kubelet ``kubeReserved``
  entries override per resource.
* system-reserved: empty unless kubelet ``systemReserved`` is set.
* eviction threshold: ``memory.available`` 100Mi and ``nodefs.available`` 10% of ephemeral storage; kubelet
  ``evictionHard`` entries (absolute quantities or percentages of capacity) override per signal;
  ``evictionSoft`` reserves nothing (Karpenter v1.14).

All quantities are integers in canonical units: cpu millicores, memory and storage bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from nodewright import quantities
from nodewright.cloud import kubeletexpr
from nodewright.cloud.instancetype import Overhead, Resources
from nodewright.errors import NodewrightValidationError

MIB = 1024 * 1024
GIB = 1024 * MIB

DEFAULT_VM_MEMORY_OVERHEAD_PERCENT = 0.075
DEFAULT_ROOT_VOLUME_BYTES = 20 * GIB
# Graviton instances keep 64 MiB for the contiguous memory allocator that the kernel cannot hand out.
ARM64_CMA_MIB = 64
EVICTION_MEMORY_AVAILABLE_BYTES = 100 * MIB
EVICTION_NODEFS_AVAILABLE_PERCENT = 10.0
KUBE_RESERVED_EPHEMERAL_BYTES = GIB

# (first millicore, last millicore (exclusive), fraction reserved) - EKS / Bottlerocket kube-reserved tiers.
_CPU_TIERS = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))

# Kubelet eviction signal -> the resource it reserves.
_EVICTION_SIGNALS = {"memory.available": "memory", "nodefs.available": "ephemeral-storage"}
# Signals the kubelet accepts; the inode and image-fs ones reserve nothing the scheduler counts.
_KNOWN_SIGNALS = frozenset(
    {*_EVICTION_SIGNALS, "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}
)

_GPU_RESOURCES = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu", "Habana": "habana.ai/gaudi"}


@dataclass(frozen=True, slots=True)
class KubeletSettings:
    """The kubelet settings of an EC2NodeClass (``spec.kubelet``) that change capacity or overhead.

    Attributes:
        max_pods: kubelet ``maxPods``; None means the ENI-limited density.
        pods_per_core: kubelet ``podsPerCore``; caps pods at ``pods_per_core x vCPUs`` when > 0.
        kube_reserved: kubelet ``kubeReserved`` overrides, resource -> quantity (``"100m"``, ``"1Gi"``, int).
        system_reserved: kubelet ``systemReserved``, resource -> quantity.
        eviction_hard: kubelet ``evictionHard``, signal (``memory.available``, ``nodefs.available``) ->
            quantity or percentage (``"5%"``).
        vm_memory_overhead_percent: fraction of reported memory the hypervisor keeps (Karpenter default 0.075).
        root_volume_bytes: size of the EBS volume the kubelet uses, the node's ``ephemeral-storage`` capacity
            (default 20 GiB; :func:`ephemeral_volume_bytes` of the EC2NodeClass).
        instance_store_raid0: EC2NodeClass ``instanceStorePolicy: RAID0``: a type's instance store, when it has
            one, is its ``ephemeral-storage`` capacity.
        ami_family: the EC2NodeClass's resolved AMI family (``AL2023``, ``Bottlerocket``, ``Windows2022``, ...;
            ``""``: the default family's rules, as AL2023) for the family-specific pods and kube-reserved rules.
        reserved_enis: ENIs kept out of pod networking (Karpenter ``RESERVED_ENIS``, default 0).
        eviction_soft: kubelet ``evictionSoft``, same shape as ``eviction_hard``; its signal names are checked,
            but it reserves nothing: a soft threshold only warns (Karpenter v1.14 ``evictionThreshold`` uses
            ``evictionHard`` alone, aws/karpenter-provider-aws#8565).
    """

    max_pods: int | str | None = None
    pods_per_core: int | None = None
    kube_reserved: Mapping[str, Any] = field(default_factory=dict)
    system_reserved: Mapping[str, Any] = field(default_factory=dict)
    eviction_hard: Mapping[str, Any] = field(default_factory=dict)
    vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT
    root_volume_bytes: int = DEFAULT_ROOT_VOLUME_BYTES
    reserved_enis: int = 0
    eviction_soft: Mapping[str, Any] = field(default_factory=dict)
    instance_store_raid0: bool = False
    ami_family: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.max_pods, int) and self.max_pods < 0:
            raise NodewrightValidationError("kubelet.maxPods", f"must be >= 0, got {self.max_pods}")
        if self.pods_per_core is not None and self.pods_per_core < 0:
            raise NodewrightValidationError("kubelet.podsPerCore", f"must be >= 0, got {self.pods_per_core}")
        if not 0 <= self.vm_memory_overhead_percent < 1:
            raise NodewrightValidationError(
                "vmMemoryOverheadPercent", f"must be in [0, 1), got {self.vm_memory_overhead_percent}"
            )
        for field_name, signals in (
            ("evictionHard", self.eviction_hard),
            ("evictionSoft", self.eviction_soft),
        ):
            for signal in signals:
                if signal not in _KNOWN_SIGNALS:
                    raise NodewrightValidationError(
                        f"kubelet.{field_name}.{signal}",
                        f"unknown eviction signal (one of {', '.join(sorted(_KNOWN_SIGNALS))})",
                    )

    @property
    def has_expressions(self) -> bool:
        """True when ``maxPods``, ``kubeReserved`` or ``systemReserved`` holds a CEL expression."""
        return bool(kubeletexpr.expressions(self.max_pods, self.kube_reserved, self.system_reserved))

    def for_type(self, record: Mapping[str, Any]) -> KubeletSettings:
        """These settings on one instance type (a ``DescribeInstanceTypes`` record): every CEL expression of
        ``maxPods``/``kubeReserved``/``systemReserved`` replaced by its value there (:mod:`kubeletexpr`; in
        ``maxPods`` the variable ``max_pods`` is the density without an override, in the reservations the
        resolved ``maxPods``). Settings without an expression are returned as they are.

        Raises:
            kubeletexpr.KubeletExpressionError: an expression that does not compile or fails on this type.
        """
        if not self.has_expressions:
            return self
        default = max_pods(record, replace(self, max_pods=None))
        resolved = kubeletexpr.resolve_max_pods(self.max_pods, kubeletexpr.TypeVars.from_record(record, default))
        pods = max_pods(record, replace(self, max_pods=resolved)) if resolved is not None else default
        variables = kubeletexpr.TypeVars.from_record(record, pods)
        return replace(self, max_pods=resolved,
                       kube_reserved=kubeletexpr.resolve_reserved("kubeReserved", self.kube_reserved, variables),
                       system_reserved=kubeletexpr.resolve_reserved("systemReserved", self.system_reserved,
                                                                    variables))

    def catalog_arguments(self) -> dict[str, Any]:
        """These settings as keyword arguments of :func:`nodewright.cloud.catalog.load_instance_types`."""
        return {"max_pods": self.max_pods, "pods_per_core": self.pods_per_core,
                "kube_reserved": dict(self.kube_reserved) or None, "system_reserved": dict(self.system_reserved) or None,
                "eviction_hard": dict(self.eviction_hard) or None, "eviction_soft": dict(self.eviction_soft) or None,
                "vm_memory_overhead_percent": self.vm_memory_overhead_percent,
                "root_volume_bytes": self.root_volume_bytes, "instance_store_raid0": self.instance_store_raid0,
                "ami_family": self.ami_family}


# --- quantities ---------------------------------------------------------------------------------

def parse_quantity(resource: str, value: Any, path: str = "") -> int:
    """A Kubernetes quantity in canonical units: millicores for ``cpu``, plain integer otherwise.

    ``value`` is a quantity string (``"250m"``, ``"1.5"``, ``"512Mi"``, ``"1G"``) parsed by
    :func:`nodewright.quantities.parse_quantity` (fractions round up), or an int already in canonical units.

    Raises:
        NodewrightValidationError: when ``value`` is not a quantity (``path`` names the field).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return quantities.parse_quantity(value, resource, path or resource)


def _parse_resources(values: Mapping[str, Any], path: str) -> Resources:
    return {name: parse_quantity(name, qty, f"{path}.{name}") for name, qty in values.items()}


# --- capacity -----------------------------------------------------------------------------------


def _arch(record: Mapping[str, Any]) -> str:
    archs = record.get("ProcessorInfo", {}).get("SupportedArchitectures") or [""]
    return str(archs[0])


def vm_memory_bytes(record: Mapping[str, Any], vm_memory_overhead_percent: float) -> int:
    """Memory capacity in bytes: reported MiB (less 64 MiB CMA on arm64) minus ``ceil(MiB x percent)`` MiB."""
    mib = int(record["MemoryInfo"]["SizeInMiB"])
    if _arch(record) == "arm64":
        mib -= ARM64_CMA_MIB
    return (mib - math.ceil(mib * vm_memory_overhead_percent)) * MIB


def eni_limited_pods(record: Mapping[str, Any], reserved_enis: int = 0) -> int:
    """Max pods the VPC CNI can address: ``ENIs x (IPv4 per ENI - 1) + 2``.

    ENIs are those of the default network card (the VPC CNI uses only that card), less ``reserved_enis``;
    zero usable ENIs means zero pods. Source: EKS AMI ``eni-max-pods.txt``, Karpenter ``ENILimitedPods``.
    """
    network = record.get("NetworkInfo", {})
    cards = network.get("NetworkCards") or []
    default_index = int(network.get("DefaultNetworkCardIndex", 0))
    card = next((c for c in cards if c.get("NetworkCardIndex") == default_index), None)
    enis = int(card["MaximumNetworkInterfaces"] if card else network.get("MaximumNetworkInterfaces", 0))
    usable = max(enis - reserved_enis, 0)
    if usable == 0:
        return 0
    return usable * (int(network.get("Ipv4AddressesPerInterface", 1)) - 1) + 2


#: The block device the kubelet's filesystem lives on, per AMI family (Karpenter ``EphemeralBlockDevice()``);
#: Custom has none known.
EPHEMERAL_BLOCK_DEVICE = {"AL2": "/dev/xvda", "AL2023": "/dev/xvda", "Bottlerocket": "/dev/xvdb",
                          "Windows2019": "/dev/sda1", "Windows2022": "/dev/sda1", "Windows2025": "/dev/sda1"}
#: That device's size when the EC2NodeClass sets none (Karpenter ``DefaultBlockDeviceMappings()``; 20 GiB else).
_DEFAULT_EPHEMERAL_BYTES = {"Windows2019": 50 * GIB, "Windows2022": 50 * GIB, "Windows2025": 50 * GIB}


def _volume_bytes(mapping: Any, path: str) -> int | None:
    size = mapping.ebs.volume_size if mapping.ebs is not None else None
    return None if size is None else quantities.parse_quantity(size, "ephemeral-storage", path)


def ephemeral_volume_bytes(spec: Any) -> int:
    """Bytes of the EBS volume that holds the kubelet's ``ephemeral-storage``, from an EC2NodeClass spec
    (:class:`nodewright.api.ec2nodeclass.EC2NodeClassSpec`), as Karpenter's ``ephemeralStorage``: the
    ``blockDeviceMappings`` entry with ``rootVolume: true`` and a ``volumeSize``; else for ``Custom`` the last
    mapping's size; else the mapping on the family's :data:`EPHEMERAL_BLOCK_DEVICE`; else the family default
    (20 GiB; Windows 50 GiB). Sizes are quantities (``100Gi``, ``100G``: decimal).
    """
    family = spec.resolved_ami_family
    mappings = list(spec.block_device_mappings or [])
    paths = {id(m): f"blockDeviceMappings[{i}].ebs.volumeSize" for i, m in enumerate(mappings)}
    root = next((m for m in mappings if m.root_volume), None)
    sized = _volume_bytes(root, paths[id(root)]) if root is not None else None
    if sized is None and mappings:
        if family == "Custom":
            sized = _volume_bytes(mappings[-1], paths[id(mappings[-1])])
        else:
            device = EPHEMERAL_BLOCK_DEVICE.get(family)
            match = next((m for m in mappings if m.device_name == device), None)
            sized = _volume_bytes(match, paths[id(match)]) if match is not None else None
    return sized if sized is not None else _DEFAULT_EPHEMERAL_BYTES.get(family, DEFAULT_ROOT_VOLUME_BYTES)


def kubelet_settings(nodeclass: Any) -> KubeletSettings:
    """The capacity-relevant settings of an EC2NodeClass model: ``spec.kubelet`` (``maxPods``, ``podsPerCore``,
    ``kubeReserved``, ``systemReserved``, ``evictionHard``, ``evictionSoft``; defaults without a kubelet block)
    and the storage the kubelet gets (:func:`ephemeral_volume_bytes`, ``instanceStorePolicy``).

    Args:
        nodeclass: a :class:`nodewright.api.ec2nodeclass.EC2NodeClass`.
    """
    storage = {"root_volume_bytes": ephemeral_volume_bytes(nodeclass.spec),
               "instance_store_raid0": nodeclass.spec.instance_store_policy == "RAID0",
               "ami_family": nodeclass.spec.resolved_ami_family}
    kubelet = nodeclass.spec.kubelet
    if kubelet is None:
        return KubeletSettings(**storage)

    def mapping(value: Any) -> dict[str, Any]:
        return {str(k): v for k, v in (value or {}).items()}

    return KubeletSettings(max_pods=kubelet.max_pods, pods_per_core=kubelet.pods_per_core,
                           kube_reserved=mapping(kubelet.kube_reserved),
                           system_reserved=mapping(kubelet.system_reserved),
                           eviction_hard=mapping(kubelet.eviction_hard),
                           eviction_soft=mapping(kubelet.eviction_soft), **storage)


#: AMI families without ENI-limited pod density (110 pods unless maxPods) and whose kube-reserved memory follows the
#: pods capacity (Karpenter ``FeatureFlags``: ``SupportsENILimitedPodDensity``/``UsesENILimitedMemoryOverhead`` false).
_WINDOWS = frozenset({"Windows2019", "Windows2022", "Windows2025"})
DEFAULT_WINDOWS_MAX_PODS = 110


def max_pods(record: Mapping[str, Any], settings: KubeletSettings) -> int:
    """Pods capacity: kubelet ``maxPods`` if set, else ENI-limited (110 on Windows); capped by
    ``podsPerCore x vCPUs`` if set, except on Bottlerocket (Karpenter ``pods``)."""
    if isinstance(settings.max_pods, str):  # a CEL expression: its value on this type
        settings = settings.for_type(record)
    if isinstance(settings.max_pods, int):
        count = settings.max_pods
    elif settings.ami_family in _WINDOWS:
        count = DEFAULT_WINDOWS_MAX_PODS
    else:
        count = eni_limited_pods(record, settings.reserved_enis)
    if settings.pods_per_core and settings.ami_family != "Bottlerocket":
        count = min(count, settings.pods_per_core * int(record["VCpuInfo"]["DefaultVCpus"]))
    return count


def kube_reserved_pods(record: Mapping[str, Any], settings: KubeletSettings) -> int:
    """The pod count kube-reserved memory is computed from: the ENI-limited density without reserved ENIs on
    AL2/AL2023/Custom (whatever ``maxPods`` says), the pods capacity on Bottlerocket and Windows (Karpenter
    ``NewInstanceType``, ``UsesENILimitedMemoryOverhead``)."""
    if settings.ami_family == "Bottlerocket" or settings.ami_family in _WINDOWS:
        return max_pods(record, settings)
    return eni_limited_pods(record, 0)


def _extended_resources(record: Mapping[str, Any]) -> Resources:
    out: Resources = {}
    for gpu in (record.get("GpuInfo") or {}).get("Gpus", []):
        name = _GPU_RESOURCES.get(gpu.get("Manufacturer", ""))
        if name:
            out[name] = out.get(name, 0) + int(gpu.get("Count", 0))
    devices = (record.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if devices:
        out["aws.amazon.com/neuron"] = sum(int(d.get("Count", 0)) for d in devices)
        first = devices[0]
        out["aws.amazon.com/neuroncore"] = int(first.get("Count", 0)) * int(
            first.get("CoreInfo", {}).get("Count", 0)
        )
    efa = (record.get("NetworkInfo", {}).get("EfaInfo") or {}).get("MaximumEfaInterfaces")
    if efa:
        out["vpc.amazonaws.com/efa"] = int(efa)
    return {k: v for k, v in out.items() if v > 0}


def ephemeral_storage_bytes(record: Mapping[str, Any], settings: KubeletSettings) -> int:
    """``ephemeral-storage`` capacity: the instance store's ``TotalSizeInGB`` x 10^9 under RAID0 when the type
    has instance store, else ``settings.root_volume_bytes``."""
    if settings.instance_store_raid0:
        total = (record.get("InstanceStorageInfo") or {}).get("TotalSizeInGB")
        if total:
            return int(total) * 10**9
    return settings.root_volume_bytes


def compute_capacity(record: Mapping[str, Any], settings: KubeletSettings) -> Resources:
    """Node capacity (cpu m, memory bytes net of VM overhead, pods, ephemeral-storage bytes, extended)."""
    capacity: Resources = {
        "cpu": int(record["VCpuInfo"]["DefaultVCpus"]) * 1000,
        "memory": vm_memory_bytes(record, settings.vm_memory_overhead_percent),
        "ephemeral-storage": ephemeral_storage_bytes(record, settings),
        "pods": max_pods(record, settings),
    }
    capacity.update(_extended_resources(record))
    return capacity


# --- overhead -----------------------------------------------------------------------------------


def kube_reserved_cpu_millis(cpu_millis: int) -> int:
    """EKS kube-reserved cpu: 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% above; whole millicores.

    E.g. 2 vCPU -> 70m, 4 vCPU -> 80m, 8 vCPU -> 90m, 96 vCPU -> 310m.
    """
    total = 0
    for start, end, fraction in _CPU_TIERS:
        if cpu_millis >= start:
            # Truncated per tier, like Karpenter's int64 conversion.
            total += int((min(cpu_millis, end) - start) * fraction)
    return total


def kube_reserved(cpu_millis: int, pods: int, overrides: Mapping[str, Any] | None = None) -> Resources:
    """kube-reserved: cpu by EKS tiers, memory ``255Mi + 11Mi x pods``, ephemeral-storage 1Gi; overrides win."""
    reserved: Resources = {
        "cpu": kube_reserved_cpu_millis(cpu_millis),
        "memory": (255 + 11 * pods) * MIB,
        "ephemeral-storage": KUBE_RESERVED_EPHEMERAL_BYTES,
    }
    reserved.update(_parse_resources(overrides or {}, "kubelet.kubeReserved"))
    return reserved


def _eviction_signal(capacity: int, value: Any, path: str, resource: str) -> int:
    text = str(value).strip()
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError as err:
            raise NodewrightValidationError(path, f"{value!r} is not a percentage") from err
        # 100% disables the threshold (kubelet configuration reference).
        if percent == 100:
            percent = 0.0
        return math.ceil(capacity / 100 * percent)
    return parse_quantity(resource, value, path)


def eviction_threshold(
    memory_bytes: int,
    storage_bytes: int,
    eviction_hard: Mapping[str, Any] | None = None,
) -> Resources:
    """Eviction reservations: memory 100Mi, ephemeral-storage ``ceil(10% of storage)`` by default.

    A ``memory.available`` / ``nodefs.available`` signal in ``eviction_hard`` replaces the default for its
    resource. Percentages are of the node's memory / ephemeral-storage capacity; ``100%`` disables the
    threshold. ``evictionSoft`` does not count (Karpenter v1.14: a soft threshold only warns).
    """
    threshold: Resources = {
        "memory": EVICTION_MEMORY_AVAILABLE_BYTES,
        "ephemeral-storage": math.ceil(storage_bytes / 100 * EVICTION_NODEFS_AVAILABLE_PERCENT),
    }
    capacities = {"memory": memory_bytes, "ephemeral-storage": storage_bytes}
    overrides: Resources = {}
    for signal, value in (eviction_hard or {}).items():
        resource = _EVICTION_SIGNALS.get(signal)
        if resource is not None:
            overrides[resource] = _eviction_signal(capacities[resource], value, f"kubelet.evictionHard.{signal}", resource)
    threshold.update(overrides)
    return threshold


def compute_overhead(capacity: Mapping[str, int], settings: KubeletSettings, reserved_pods: int | None = None) -> Overhead:
    """The :class:`Overhead` of a node with ``capacity`` (from :func:`compute_capacity`) under ``settings``;
    kube-reserved memory for ``reserved_pods`` pods (:func:`kube_reserved_pods`; default: the pods capacity)."""
    pods = capacity["pods"] if reserved_pods is None else reserved_pods
    return Overhead(
        kube_reserved=kube_reserved(capacity["cpu"], pods, settings.kube_reserved),
        system_reserved=_parse_resources(settings.system_reserved, "kubelet.systemReserved"),
        eviction_threshold=eviction_threshold(
            capacity["memory"], capacity["ephemeral-storage"], settings.eviction_hard
        ),
    )
