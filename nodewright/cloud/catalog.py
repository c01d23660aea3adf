"""The EC2 instance-type catalog: specs, offerings, labels, allocatable and prices as :class:`InstanceType`.

Public entry points (the scheduler, the simulator and the AWS provider call these):

* :func:`load_instance_types` -- every instance type offered in a region from the bundled snapshot, with
  Karpenter's labels, EKS allocatable and on-demand + spot offerings per zone; cached per argument set.
* :func:`instance_type_from_aws` -- the same derivation over one live ``DescribeInstanceTypes`` record.
* :func:`region_zones`, :func:`bundled_regions`, :func:`catalog_price_source`.

Bundled data (``nodewright/data/catalog/``, written by ``scripts/refresh_catalog.py``):
``instance-types.json.gz`` holds ``DescribeInstanceTypes`` records once for all regions;
``offerings/<region>.json.gz`` holds the region's zones (name and id) and ``DescribeInstanceTypeOfferings``
(location type availability-zone) as ``type -> [zone, ...]``.

Like Karpenter, an offering exists per (zone the type is offered in) x (usage class in the record's
``SupportedUsageClasses``: ``on-demand``, ``spot``); an offering without a known price is left out, and a type
with no offering left in the selected zones is not returned. Types Karpenter never considers (non-HVM,
or neither x86_64 nor arm64, e.g. mac) are left out, see :func:`is_supported`.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from nodewright.api import labels as wk
from nodewright.api.ec2nodeclass import EC2NodeClassSpec
from nodewright.cloud.instancetype import CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, InstanceType, Offering
from nodewright.cloud.labels import instance_type_labels
from nodewright.cloud.overhead import (
    DEFAULT_ROOT_VOLUME_BYTES,
    DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
    KubeletSettings,
    compute_capacity,
    compute_overhead,
    kube_reserved_pods,
)
from nodewright.cloud.prices import PriceTable, load_spot_prices, on_demand_prices
from nodewright.errors import NodewrightValidationError

__all__ = [
    "KubeletSettings",
    "PriceLookup",
    "ReadOnlyDict",
    "Zone",
    "bundled_regions",
    "catalog_price_source",
    "catalog_source",
    "instance_type_from_aws",
    "instance_type_records",
    "is_supported",
    "load_instance_types",
    "make_offerings",
    "price_is_fallback",
    "price_table",
    "region_zones",
]


@dataclass(frozen=True, slots=True)
class Zone:
    """An availability zone: ``name`` (``ap-northeast-2a``) and ``zone_id`` (``apne2-az1``, may be empty)."""

    name: str
    zone_id: str = ""


class PriceLookup(Protocol):
    """Where offerings get their prices (USD/hour); :class:`nodewright.cloud.prices.PriceTable` is one.

    Return None for an unknown price: that offering is then left out, as Karpenter does.
    """

    def on_demand_price(self, instance_type: str) -> float | None: ...

    def spot_price(self, instance_type: str, zone: str) -> float | None: ...


class ReadOnlyDict(dict[str, Any]):
    """A dict that refuses mutation: InstanceTypes are shared by caches, so their labels/capacity must not change.

    Unlike ``MappingProxyType`` it pickles and deep-copies (to a ``ReadOnlyDict``), and reads at dict speed.
    """

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("instance type labels/capacity are read-only; copy with dict(...) to change them")

    __setitem__ = __delitem__ = _readonly
    clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]
    __ior__ = _readonly  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlyDict, (dict(self),))


# --- bundled data -------------------------------------------------------------------------------


def _data_dir() -> Path:
    return Path(str(resources.files("nodewright") / "data" / "catalog"))


def _read_json_gz(path: Path) -> Any:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


@functools.lru_cache(maxsize=1)
def _specs() -> tuple[str, dict[str, dict[str, Any]]]:
    payload = _read_json_gz(_data_dir() / "instance-types.json.gz")
    return payload["source"], {r["InstanceType"]: r for r in payload["instance_types"]}


def instance_type_records() -> Mapping[str, Mapping[str, Any]]:
    """Bundled ``DescribeInstanceTypes`` records by instance type name (read-only view; ~1,400 types)."""
    return MappingProxyType(_specs()[1])


def catalog_source() -> str:
    """Provenance of the bundled specs, e.g. ``"moto 5.2.5 EC2 data (DescribeInstanceTypes, ...)"``."""
    return _specs()[0]


def bundled_regions() -> list[str]:
    """Regions with bundled offerings, sorted (at least ``us-east-1`` and ``ap-northeast-2``)."""
    return sorted(p.name.removesuffix(".json.gz") for p in (_data_dir() / "offerings").glob("*.json.gz"))


@functools.lru_cache(maxsize=64)
def _region_offerings(region: str) -> tuple[tuple[Zone, ...], dict[str, list[str]]]:
    path = _data_dir() / "offerings" / f"{region}.json.gz"
    if not path.is_file():
        raise NodewrightValidationError(
            "region",
            f"no bundled EC2 catalog for {region!r}; bundled regions: {', '.join(bundled_regions())}",
        )
    payload = _read_json_gz(path)
    zones = tuple(Zone(z["name"], z.get("id", "")) for z in payload["zones"])
    return zones, payload["offerings"]


def region_zones(region: str) -> list[str]:
    """Availability zone names of ``region`` in the bundled catalog, sorted (``["ap-northeast-2a", ...]``).

    Raises:
        NodewrightValidationError: when ``region`` has no bundled catalog.
    """
    return [z.name for z in _region_offerings(region)[0]]


def price_table(region: str, spot_prices: Path | None = None) -> PriceTable:
    """On-demand prices for ``region`` (us-east-1 fallback, flagged) plus real spot prices when a file is given.

    Raises:
        NodewrightValidationError: when ``spot_prices`` is missing or malformed.
    """
    table = on_demand_prices(region)
    if spot_prices is None:
        return table
    return PriceTable(
        table.region,
        table.on_demand,
        table.source,
        table.fallback,
        spot=load_spot_prices(Path(spot_prices), region),
        spot_source=f"spot prices from {spot_prices} (model for types not listed)",
    )


def catalog_price_source(region: str) -> str:
    """One line saying where prices for ``region`` come from, for CLI output and reports.

    E.g. ``"bundled us-east-1 on-demand prices (AWS Price List API, us-east-1 Linux on-demand, 2026-07-20);
    us-east-1 prices stand in for ap-northeast-2"``.
    """
    return on_demand_prices(region).source


def price_is_fallback(region: str) -> bool:
    """True when another region's on-demand prices stand in for ``region``'s."""
    return on_demand_prices(region).fallback


# --- derivation ---------------------------------------------------------------------------------


def is_supported(record: Mapping[str, Any]) -> bool:
    """Whether Karpenter would consider this type: HVM virtualization and an x86_64 or arm64 processor.

    Karpenter filters ``DescribeInstanceTypes`` with ``supported-virtualization-type=hvm`` and
    ``processor-info.supported-architecture in (x86_64, arm64)``; this drops e.g. mac (``x86_64_mac``) and
    i386-only types.
    """
    archs = record.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    virt = record.get("SupportedVirtualizationTypes", ["hvm"])
    return "hvm" in virt and any(a in ("x86_64", "arm64") for a in archs)


def make_offerings(
    record: Mapping[str, Any],
    zones: Iterable[Zone],
    prices: PriceLookup,
    unavailable: Container[tuple[str, str, str]] = (),
) -> tuple[Offering, ...]:
    """Offerings of one type: each zone x each supported usage class with a known price.

    Args:
        record: ``DescribeInstanceTypes`` record (``SupportedUsageClasses`` decides spot / on-demand).
        zones: zones the type is offered in (from ``DescribeInstanceTypeOfferings``).
        prices: price source; a None price drops that offering.
        unavailable: ``(instance type, zone, capacity type)`` triples known to be out of capacity; they are
            kept with ``available=False`` (Karpenter's unavailable-offerings cache).
    """
    name = str(record["InstanceType"])
    classes = [
        c
        for c in (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT)
        if c in record.get("SupportedUsageClasses", ())
    ]
    out: list[Offering] = []
    for zone in zones:
        for capacity_type in classes:
            if capacity_type == CAPACITY_TYPE_SPOT:
                price = prices.spot_price(name, zone.name)
            else:
                price = prices.on_demand_price(name)
            if price is None:
                continue
            available = (name, zone.name, capacity_type) not in unavailable
            out.append(Offering(zone.name, capacity_type, price, available, zone.zone_id))
    return tuple(out)


def instance_type_from_aws(
    record: Mapping[str, Any],
    zones: Iterable[Zone],
    prices: PriceLookup,
    *,
    kubelet: KubeletSettings | None = None,
    unavailable: Container[tuple[str, str, str]] = (),
) -> InstanceType:
    """An :class:`InstanceType` from one ``DescribeInstanceTypes`` record (live or bundled).

    Labels per :func:`nodewright.cloud.labels.instance_type_labels`; capacity and overhead per
    :mod:`nodewright.cloud.overhead` (EKS allocatable, Karpenter's VM memory overhead); offerings per
    :func:`make_offerings`. ``labels`` and ``capacity`` are :class:`ReadOnlyDict` (instances are shared by caches).

    Raises:
        NodewrightValidationError: when a kubelet setting is not a valid quantity.
        KeyError: when the record lacks ``InstanceType``, ``VCpuInfo`` or ``MemoryInfo``.
    """
    settings = (kubelet or KubeletSettings()).for_type(record)
    capacity = compute_capacity(record, settings)
    return InstanceType(
        name=str(record["InstanceType"]),
        labels=ReadOnlyDict(instance_type_labels(record)),
        capacity=ReadOnlyDict(capacity),
        overhead=compute_overhead(capacity, settings, kube_reserved_pods(record, settings)),
        offerings=make_offerings(record, zones, prices, unavailable),
        volume_limits=ReadOnlyDict(volume_limits(record)),
    )


#: The EBS CSI driver's name (its CSINode entry and the PersistentVolumes it provisions).
EBS_CSI_DRIVER = "ebs.csi.aws.com"


def volume_limits(record: Mapping[str, Any]) -> dict[str, int]:
    """CSI driver -> volumes a new node of this ``DescribeInstanceTypes`` record can attach: for the EBS CSI driver,
    ``EbsInfo.MaximumEbsAttachments`` (EC2 reports it net of the primary network interface and instance-store
    NVMe volumes on types whose limit is ``shared``) minus 1 for the root volume every EKS AMI boots from, as the
    EBS CSI driver's CSINode count comes out on a fresh node. A record without the field gives no limit.

    Source: EC2 "Amazon EBS volume limits" and ``DescribeInstanceTypes``; Karpenter v1.15's instance-type volume
    attach limits (its source was not available here: this is our rule, docs/karpenter-compatibility.md)."""
    ebs = record.get("EbsInfo") or {}
    count = ebs.get("MaximumEbsAttachments")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 1:
        return {}
    return {EBS_CSI_DRIVER: count - 1}


def _frozen(values: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((values or {}).items()))


def load_instance_types(
    region: str,
    *,
    zones: Sequence[str] | None = None,
    spot_prices: Path | None = None,
    max_pods: int | None = None,
    kube_reserved: Mapping[str, Any] | None = None,
    system_reserved: Mapping[str, Any] | None = None,
    eviction_hard: Mapping[str, Any] | None = None,
    vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
    pods_per_core: int | None = None,
    eviction_soft: Mapping[str, Any] | None = None,
    root_volume_bytes: int = DEFAULT_ROOT_VOLUME_BYTES,
    instance_store_raid0: bool = False,
    ami_family: str = "",
) -> list[InstanceType]:
    """Every instance type offered in ``region`` (optionally only in ``zones``), sorted by name.

    Offerings: on-demand in each zone the type is offered in, plus spot where ``SupportedUsageClasses`` has
    spot; on-demand prices from the bundled table (us-east-1 standing in for other regions, see
    :func:`catalog_price_source`), spot from ``spot_prices`` (CSV/JSON, see
    :func:`nodewright.cloud.prices.load_spot_prices`) or the documented model. Kubelet arguments mirror an
    EC2NodeClass's ``spec.kubelet`` (``maxPods``, ``podsPerCore``, ``kubeReserved``, ``systemReserved``,
    ``evictionHard``, ``evictionSoft``; quantities as strings such as ``"100m"``/``"1Gi"``, or canonical
    ints); ``root_volume_bytes`` is the kubelet's EBS volume (the ``ephemeral-storage`` capacity, default 20 GiB)
    and ``instance_store_raid0`` (``instanceStorePolicy: RAID0``) puts a type's instance store there instead;
    ``ami_family`` selects the family's pods and kube-reserved rules (:mod:`nodewright.cloud.overhead`).

    Results are cached per argument set (the returned list is a fresh copy; the InstanceTypes are shared
    and must not be mutated). About 1,345 types for us-east-1; a cold call takes ~0.25 s, a cached one ~5 µs.

    Raises:
        NodewrightValidationError: unknown region, a zone not in the region, a bad kubelet value or spot file.
    """
    key_zones = tuple(sorted(set(zones))) if zones is not None else None
    return list(
        _load_cached(
            region,
            key_zones,
            str(spot_prices) if spot_prices is not None else None,
            max_pods,
            _frozen(kube_reserved),
            _frozen(system_reserved),
            _frozen(eviction_hard),
            vm_memory_overhead_percent,
            pods_per_core,
            _frozen(eviction_soft),
            root_volume_bytes,
            instance_store_raid0,
            ami_family,
        )
    )


@functools.lru_cache(maxsize=64)
def _load_cached(
    region: str,
    zones: tuple[str, ...] | None,
    spot_prices: str | None,
    max_pods: int | None,
    kube_reserved: tuple[tuple[str, Any], ...],
    system_reserved: tuple[tuple[str, Any], ...],
    eviction_hard: tuple[tuple[str, Any], ...],
    vm_memory_overhead_percent: float,
    pods_per_core: int | None,
    eviction_soft: tuple[tuple[str, Any], ...],
    root_volume_bytes: int,
    instance_store_raid0: bool,
    ami_family: str,
) -> tuple[InstanceType, ...]:
    region_zone_list, offered = _region_offerings(region)
    by_name = {z.name: z for z in region_zone_list}
    if zones is not None:
        unknown = [z for z in zones if z not in by_name]
        if unknown:
            raise NodewrightValidationError(
                "zones", f"{', '.join(unknown)} not in {region} (zones: {', '.join(sorted(by_name))})"
            )
    selected = set(zones) if zones is not None else set(by_name)
    settings = KubeletSettings(
        max_pods=max_pods,
        kube_reserved=dict(kube_reserved),
        system_reserved=dict(system_reserved),
        eviction_hard=dict(eviction_hard),
        vm_memory_overhead_percent=vm_memory_overhead_percent,
        pods_per_core=pods_per_core,
        eviction_soft=dict(eviction_soft),
        root_volume_bytes=root_volume_bytes,
        instance_store_raid0=instance_store_raid0,
        ami_family=ami_family,
    )
    prices = price_table(region, Path(spot_prices) if spot_prices else None)
    records = _specs()[1]
    out: list[InstanceType] = []
    for name in sorted(offered):
        record = records.get(name)
        type_zones = [by_name[z] for z in offered[name] if z in selected]
        if record is None or not type_zones or not is_supported(record):
            continue
        instance_type = instance_type_from_aws(record, type_zones, prices, kubelet=settings)
        if instance_type.offerings:
            out.append(instance_type)
    return tuple(out)


# --- what exists at all -------------------------------------------------------------------------

#: Labels whose values form a closed set the catalog knows completely (checked for typos on input).
CATEGORICAL_LABELS = (
    wk.INSTANCE_TYPE, wk.ARCH, wk.OS, wk.CAPACITY_TYPE, wk.ZONE, wk.REGION, wk.INSTANCE_FAMILY,
    wk.INSTANCE_CATEGORY, wk.INSTANCE_SIZE, wk.INSTANCE_CPU_MANUFACTURER, wk.INSTANCE_HYPERVISOR,
    wk.INSTANCE_GPU_NAME, wk.INSTANCE_GPU_MANUFACTURER, wk.INSTANCE_ACCELERATOR_NAME,
    wk.INSTANCE_ACCELERATOR_MANUFACTURER,
)


@functools.lru_cache(maxsize=1)
def known_label_values() -> Mapping[str, frozenset[str]]:
    """Every value each of :data:`CATEGORICAL_LABELS` takes anywhere in the bundled catalog: over all instance
    types Karpenter would consider (:func:`is_supported`), all bundled regions and their zones, the capacity types
    ``spot``/``on-demand``/``reserved`` and the operating systems ``linux``/``windows``. A requirement value outside
    these sets can match no node anywhere (``m5.larg``, ``spto``).
    """
    values: dict[str, set[str]] = {key: set() for key in CATEGORICAL_LABELS}
    for record in _specs()[1].values():
        if not is_supported(record):
            continue
        for key, value in instance_type_labels(record).items():
            if key in values:
                values[key].add(value)
    values[wk.CAPACITY_TYPE] |= {CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_RESERVED}
    values[wk.OS] |= {"linux", "windows"}
    for region in bundled_regions():
        values[wk.REGION].add(region)
        values[wk.ZONE].update(z.name for z in _region_offerings(region)[0])
    return MappingProxyType({key: frozenset(v) for key, v in values.items()})


# --- operating system of the node class ---------------------------------------------------------

#: ``node.kubernetes.io/windows-build`` per Windows AMI family (Karpenter AWS provider ``pkg/apis/v1/labels.go``).
WINDOWS_BUILDS: Mapping[str, str] = MappingProxyType(
    {"Windows2019": "10.0.17763", "Windows2022": "10.0.20348", "Windows2025": "10.0.26100"}
)
#: Modelled Windows Server license, USD per vCPU-hour, added to the Linux on-demand and spot prices. AWS's
#: us-east-1 on-demand list prices differ from Linux by this much for the general-purpose, compute and memory
#: families (m5.large $0.096 -> $0.188); burstable types are charged less by AWS, so they are overstated here.
WINDOWS_LICENSE_PER_VCPU_HOUR = 0.046


def instance_types_for_nodeclass(
    instance_types: Sequence[InstanceType],
    spec: EC2NodeClassSpec | None,
    records: Callable[[str], Mapping[str, Any] | None] | None = None,
) -> list[InstanceType]:
    """The instance types as nodes of an EC2NodeClass with ``spec`` see them (``None``: a Linux class).

    * ``cpuOptions.nestedVirtualization: enabled`` keeps only types whose ``DescribeInstanceTypes``
      ``ProcessorInfo.SupportedFeatures`` include ``nested-virtualization`` (Karpenter's compatibility check);
      ``records`` looks a record up by name (default: the bundled catalog).
    * Windows families (Karpenter ``getOS``): amd64 types only, ``kubernetes.io/os: windows``, the family's
      ``node.kubernetes.io/windows-build``, and prices plus :data:`WINDOWS_LICENSE_PER_VCPU_HOUR` per vCPU. Linux
      families and ``Custom`` (even with a Windows alias, as in Karpenter) keep ``kubernetes.io/os: linux``.
    """
    out = list(instance_types)
    if spec is None:
        return out
    if spec.cpu_options is not None and spec.cpu_options.nested_virtualization == "enabled":
        lookup = records or instance_type_records().get

        def nested(name: str) -> bool:
            record = lookup(name) or {}
            return "nested-virtualization" in (record.get("ProcessorInfo") or {}).get("SupportedFeatures", ())

        out = [it for it in out if nested(it.name)]
    build = WINDOWS_BUILDS.get(spec.resolved_ami_family)
    if build is None:
        return out
    return [_windows(it, build) for it in out if it.labels.get(wk.ARCH) == "amd64"]


def _windows(instance_type: InstanceType, build: str) -> InstanceType:
    license_fee = WINDOWS_LICENSE_PER_VCPU_HOUR * int(instance_type.labels.get(wk.INSTANCE_CPU, "0"))
    return InstanceType(
        name=instance_type.name,
        labels=ReadOnlyDict({**instance_type.labels, wk.OS: "windows", wk.WINDOWS_BUILD: build}),
        capacity=instance_type.capacity,
        overhead=instance_type.overhead,
        offerings=tuple(dataclasses.replace(o, price=round(o.price + license_fee, 6)) for o in instance_type.offerings),
        volume_limits=instance_type.volume_limits,
    )
