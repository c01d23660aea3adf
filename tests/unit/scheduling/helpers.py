"""Hand-built instance types and pods for scheduler tests (no catalog needed)."""

from __future__ import annotations

from nodewright.cloud.instancetype import InstanceType, Offering, Overhead
from nodewright.scheduling import NodePoolSpec, Pod, Requirements
from nodewright.scheduling.nodepools import pool_requirements
from nodewright.scheduling.taints import Taint

GIB = 2**30
MIB = 2**20
ZONES = ("test-1a", "test-1b")


def make_type(
    name: str,
    cpu: int,
    mem_gib: float,
    price: float,
    *,
    zones: tuple[str, ...] = ZONES,
    spot: float | None = None,
    arch: str = "amd64",
    pods: int = 110,
    extra: dict[str, int] | None = None,
) -> InstanceType:
    """A type whose allocatable equals ``cpu`` vCPUs and ``mem_gib`` GiB (no overhead)."""
    family, _, size = name.partition(".")
    offerings = [Offering(z, "on-demand", price) for z in zones]
    if spot is not None:
        offerings += [Offering(z, "spot", spot) for z in zones]
    return InstanceType(
        name=name,
        labels={
            "node.kubernetes.io/instance-type": name,
            "kubernetes.io/arch": arch,
            "kubernetes.io/os": "linux",
            "karpenter.k8s.aws/instance-family": family,
            "karpenter.k8s.aws/instance-category": family[0],
            "karpenter.k8s.aws/instance-size": size,
            "karpenter.k8s.aws/instance-cpu": str(cpu),
        },
        capacity={"cpu": cpu * 1000, "memory": int(mem_gib * GIB), "pods": pods, **(extra or {})},
        overhead=Overhead(),
        offerings=tuple(offerings),
    )


def standard_types() -> list[InstanceType]:
    """A small m/c/r-like family ladder with linear-ish prices."""
    return [
        make_type("c.large", 2, 4, 0.085),
        make_type("c.xlarge", 4, 8, 0.17),
        make_type("c.2xlarge", 8, 16, 0.34),
        make_type("m.large", 2, 8, 0.096),
        make_type("m.xlarge", 4, 16, 0.192),
        make_type("m.2xlarge", 8, 32, 0.384),
        make_type("r.large", 2, 16, 0.126),
        make_type("r.xlarge", 4, 32, 0.252),
    ]


def pod(name: str, cpu_m: int, mem_mib: int, **kw: object) -> Pod:
    """A pending pod requesting ``cpu_m`` millicores and ``mem_mib`` MiB."""
    return Pod(namespace="default", name=name, requests={"cpu": cpu_m, "memory": mem_mib * MIB, "pods": 1}, **kw)  # type: ignore[arg-type]


def pool(
    name: str = "default",
    *,
    requirements: list[dict[str, object]] | None = None,
    labels: dict[str, str] | None = None,
    weight: int = 0,
    taints: tuple[Taint, ...] = (),
    limits: dict[str, int] | None = None,
    target_utilization: float | None = None,
    overhead: dict[str, int] | None = None,
) -> NodePoolSpec:
    """A NodePoolSpec built directly (no manifest)."""
    reqs: Requirements = pool_requirements(name, requirements or [], labels or {})
    return NodePoolSpec(
        name=name,
        requirements=reqs,
        weight=weight,
        labels={**(labels or {}), "karpenter.sh/nodepool": name},
        taints=taints,
        limits=limits,
        target_utilization=target_utilization,
        daemonset_overhead=overhead or {},
    )
