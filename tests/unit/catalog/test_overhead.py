"""EKS allocatable: ENI-limited max pods, kube-reserved tiers, eviction threshold, VM memory overhead."""

from __future__ import annotations

import pytest

from nodewright.cloud.catalog import instance_type_records
from nodewright.cloud.overhead import (
    GIB,
    MIB,
    KubeletSettings,
    compute_capacity,
    compute_overhead,
    eni_limited_pods,
    eviction_threshold,
    kube_reserved,
    kube_reserved_cpu_millis,
    kube_reserved_pods,
    parse_quantity,
    vm_memory_bytes,
)
from nodewright.errors import NodewrightValidationError


def record(name: str) -> dict:
    return dict(instance_type_records()[name])


def allocatable(name: str, settings: KubeletSettings | None = None) -> dict[str, int]:
    settings = settings or KubeletSettings()
    capacity = compute_capacity(record(name), settings)
    reserved = compute_overhead(capacity, settings, kube_reserved_pods(record(name), settings)).total()
    return {k: v - reserved.get(k, 0) for k, v in capacity.items()}


@pytest.mark.parametrize(
    ("name", "pods"),
    [
        ("m5.large", 29),
        ("t3.large", 35),
        ("t3.medium", 17),
        ("c5.large", 29),
        ("m5.xlarge", 58),
        ("m5.24xlarge", 737),
    ],
)
def test_eni_limited_max_pods(name: str, pods: int) -> None:
    assert eni_limited_pods(record(name)) == pods


def test_reserved_enis_reduce_pods_and_all_reserved_means_zero() -> None:
    # m5.large: 3 ENIs x 10 IPv4 -> (3 - 1) x 9 + 2 = 20
    assert eni_limited_pods(record("m5.large"), reserved_enis=1) == 20
    assert eni_limited_pods(record("m5.large"), reserved_enis=3) == 0


@pytest.mark.parametrize(
    ("vcpus", "millis"), [(1, 60), (2, 70), (4, 80), (8, 90), (16, 110), (96, 310), (5, 82)]
)
def test_kube_reserved_cpu_tiers(vcpus: int, millis: int) -> None:
    assert kube_reserved_cpu_millis(vcpus * 1000) == millis


def test_t3_large_allocatable_is_1930m_and_6837mi() -> None:
    # memory: 8192Mi - ceil(8192 x 0.075)=615Mi VM overhead = 7577Mi capacity;
    # kube-reserved 255 + 11 x 35 pods = 640Mi; eviction 100Mi -> 6837Mi.
    alloc = allocatable("t3.large")
    assert alloc["cpu"] == 1930
    assert alloc["memory"] == 7169114112 == 6837 * MIB
    assert alloc["pods"] == 35
    # 20Gi root volume - 1Gi kube-reserved - 2Gi (10%) eviction
    assert alloc["ephemeral-storage"] == 17 * GIB


def test_graviton_loses_64mi_cma_before_vm_overhead() -> None:
    # m6g.large: (8192 - 64) = 8128Mi - ceil(609.6)=610Mi = 7518Mi; - (255 + 11 x 29) - 100 = 6844Mi
    assert vm_memory_bytes(record("m6g.large"), 0.075) == 7518 * MIB
    assert allocatable("m6g.large")["memory"] == 6844 * MIB


def test_max_pods_override_changes_pods_and_kube_reserved_memory_per_family() -> None:
    """Karpenter ``NewInstanceType``: AL2/AL2023/Custom reserve memory for the ENI-limited pods whatever maxPods
    says (``UsesENILimitedMemoryOverhead``); Bottlerocket and Windows for the pods capacity."""
    alloc = allocatable("t3.large", KubeletSettings(max_pods=110))
    assert alloc["pods"] == 110
    # 7577Mi - (255 + 11 x 35 ENI-limited pods = 640Mi) - 100Mi
    assert alloc["memory"] == 6837 * MIB
    bottlerocket = allocatable("t3.large", KubeletSettings(max_pods=110, ami_family="Bottlerocket"))
    # 7577Mi - (255 + 11 x 110 = 1465Mi) - 100Mi
    assert bottlerocket["pods"] == 110 and bottlerocket["memory"] == 6012 * MIB


def test_windows_has_110_pods_and_bottlerocket_ignores_pods_per_core() -> None:
    assert allocatable("t3.large", KubeletSettings(ami_family="Windows2022"))["pods"] == 110
    assert allocatable("m5.xlarge", KubeletSettings(pods_per_core=10, ami_family="Bottlerocket"))["pods"] == 58


def test_pods_per_core_caps_pods() -> None:
    assert allocatable("m5.xlarge", KubeletSettings(pods_per_core=10))["pods"] == 40


def test_vm_memory_overhead_is_configurable() -> None:
    assert (
        allocatable("t3.large", KubeletSettings(vm_memory_overhead_percent=0.0))["memory"]
        == (8192 - 740) * MIB
    )
    assert (
        allocatable("t3.large", KubeletSettings(vm_memory_overhead_percent=0.1))["memory"]
        == (8192 - 820 - 740) * MIB
    )


def test_kube_and_system_reserved_overrides_and_eviction_percent() -> None:
    settings = KubeletSettings(
        kube_reserved={"cpu": "200m", "memory": "1Gi"},
        system_reserved={"cpu": "100m", "memory": "512Mi"},
        eviction_hard={"memory.available": "5%"},
    )
    alloc = allocatable("m5.large", settings)
    assert alloc["cpu"] == 2000 - 200 - 100
    capacity_mib = 7577
    assert alloc["memory"] == capacity_mib * MIB - GIB - 512 * MIB - -(-(capacity_mib * MIB * 5) // 100)


def test_eviction_threshold_defaults_and_100_percent_disables() -> None:
    assert eviction_threshold(8 * GIB, 20 * GIB) == {"memory": 100 * MIB, "ephemeral-storage": 2 * GIB}
    assert eviction_threshold(8 * GIB, 20 * GIB, {"nodefs.available": "100%"})["ephemeral-storage"] == 0
    assert eviction_threshold(8 * GIB, 20 * GIB, {"memory.available": "200Mi"})["memory"] == 200 * MIB


def test_kube_reserved_memory_formula() -> None:
    assert kube_reserved(2000, 29) == {"cpu": 70, "memory": 574 * MIB, "ephemeral-storage": GIB}


def test_extended_resources_for_gpu_neuron_and_efa_types() -> None:
    settings = KubeletSettings()
    assert compute_capacity(record("g4dn.xlarge"), settings)["nvidia.com/gpu"] == 1
    p4d = compute_capacity(record("p4d.24xlarge"), settings)
    assert (p4d["nvidia.com/gpu"], p4d["vpc.amazonaws.com/efa"]) == (8, 4)
    trn1 = compute_capacity(record("trn1.32xlarge"), settings)
    assert (trn1["aws.amazon.com/neuron"], trn1["aws.amazon.com/neuroncore"]) == (16, 32)
    assert "nvidia.com/gpu" not in compute_capacity(record("m5.large"), settings)


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", "250m", 250),
        ("cpu", "1.5", 1500),
        ("cpu", "2", 2000),
        ("memory", "512Mi", 512 * MIB),
        ("memory", "1G", 10**9),
        ("memory", "1.5Gi", 3 * GIB // 2),
        ("memory", 1234, 1234),
    ],
)
def test_parse_quantity(resource: str, value: object, expected: int) -> None:
    assert parse_quantity(resource, value) == expected


@pytest.mark.parametrize("bad", ["abc", "12Qi", "", True])
def test_parse_quantity_rejects_garbage(bad: object) -> None:
    with pytest.raises(NodewrightValidationError, match="kubelet.kubeReserved.memory"):
        parse_quantity("memory", bad, "kubelet.kubeReserved.memory")


def test_invalid_settings_raise_validation_errors() -> None:
    with pytest.raises(NodewrightValidationError, match="maxPods"):
        KubeletSettings(max_pods=-1)
    with pytest.raises(NodewrightValidationError, match="vmMemoryOverheadPercent"):
        KubeletSettings(vm_memory_overhead_percent=1.5)
    with pytest.raises(NodewrightValidationError, match="evictionHard.memory.availble"):
        KubeletSettings(eviction_hard={"memory.availble": "1Mi"})


def test_eviction_soft_reserves_nothing() -> None:
    """Karpenter v1.14 (aws/karpenter-provider-aws#8565): only evictionHard is subtracted from allocatable."""
    settings = KubeletSettings(eviction_hard={"memory.available": "200Mi"},
                               eviction_soft={"memory.available": "500Mi", "nodefs.available": "15%"})
    capacity = {"cpu": 2000, "memory": 8 * GIB, "ephemeral-storage": 20 * GIB, "pods": 29}
    assert compute_overhead(capacity, settings).eviction_threshold == {
        "memory": 200 * MIB,
        "ephemeral-storage": 2 * GIB,
    }
    with pytest.raises(NodewrightValidationError, match="kubelet.evictionSoft.memory.free"):
        KubeletSettings(eviction_soft={"memory.free": "1Mi"})


def _nodeclass_spec(alias: str | None = "al2023@latest", **spec: object) -> object:
    from nodewright.api.manifests import parse_ec2nodeclass

    body: dict[str, object] = {"role": "r", "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                               "securityGroupSelectorTerms": [{"tags": {"a": "b"}}], **spec}
    if alias:
        body["amiSelectorTerms"] = [{"alias": alias}]
    return parse_ec2nodeclass({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                               "metadata": {"name": "c"}, "spec": body}).spec


def test_ephemeral_volume_follows_karpenter_ephemeral_storage() -> None:
    """Karpenter ``ephemeralStorage``: rootVolume first, then the family's device, then its default."""
    from nodewright.cloud.overhead import ephemeral_volume_bytes

    xvda = {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "80Gi"}}
    xvdb = {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "200G"}}
    assert ephemeral_volume_bytes(_nodeclass_spec()) == 20 * GIB
    assert ephemeral_volume_bytes(_nodeclass_spec(blockDeviceMappings=[xvda])) == 80 * GIB
    assert ephemeral_volume_bytes(_nodeclass_spec(blockDeviceMappings=[xvda, {**xvdb, "rootVolume": True}])) == 200 * 10**9
    # Bottlerocket's kubelet is on /dev/xvdb; with only the OS volume given, its 20Gi default data volume counts.
    assert ephemeral_volume_bytes(_nodeclass_spec("bottlerocket@latest", blockDeviceMappings=[xvda, xvdb])) == 200 * 10**9
    assert ephemeral_volume_bytes(_nodeclass_spec("bottlerocket@latest", blockDeviceMappings=[xvda])) == 20 * GIB
    assert ephemeral_volume_bytes(_nodeclass_spec("windows2022@latest")) == 50 * GIB
    # Custom: the last mapping's size (nothing else is known about a custom AMI).
    custom = _nodeclass_spec(None, amiFamily="Custom", amiSelectorTerms=[{"id": "ami-0123456789abcdef0"}],
                             blockDeviceMappings=[xvda, {"deviceName": "/dev/xvdc", "ebs": {"volumeSize": "30Gi"}}])
    assert ephemeral_volume_bytes(custom) == 30 * GIB


def test_raid0_instance_store_is_ephemeral_storage_of_types_that_have_one() -> None:
    from nodewright.cloud.catalog import load_instance_types

    types = {t.name: t for t in load_instance_types("us-east-1", zones=["us-east-1a"], instance_store_raid0=True)}
    assert types["c5d.2xlarge"].capacity["ephemeral-storage"] == 200 * 10**9  # one 200 GB NVMe disk
    assert types["c5.2xlarge"].capacity["ephemeral-storage"] == 20 * GIB  # no instance store: the EBS volume
