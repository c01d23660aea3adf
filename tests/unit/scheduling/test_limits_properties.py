"""Property tests for NodePool ``limits`` within one batch (issue 26, item 1), on random batches.

The invariant, in every path (the Karpenter loop with its NodeClaim tightening, the cost packer with its narrowing,
the topology re-pack, the greedy guard): for every pool with limits, what it owns plus, per new NodeClaim, the
largest capacity among its candidate types (its launch may get any of them; Karpenter ``subtractMax``) is at most
the limit, for each limited resource and for ``nodes``. Derandomized (the ``ci`` profile of ``tests/conftest.py``).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nodewright.scheduling import (
    Affinity,
    ExistingNode,
    LabelSelector,
    PodAffinityTerm,
    TopologySpreadConstraint,
    schedule,
)
from nodewright.scheduling.nodepools import launched_capacity

from .helpers import make_type, pod, pool

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
GIB = 2**30


def gpu_types() -> list:  # type: ignore[type-arg]
    """A g-like ladder: 1, 1, 4 and 8 GPUs."""
    return [make_type("g.xlarge", 4, 16, 0.80, extra={GPU: 1}), make_type("g.2xlarge", 8, 32, 0.98, extra={GPU: 1}),
            make_type("g.12xlarge", 48, 192, 4.60, extra={GPU: 4}), make_type("g.48xlarge", 192, 768, 13.35,
                                                                          extra={GPU: 8})]


def ladder() -> list:  # type: ignore[type-arg]
    """120 types: 30 families x 2/4/8/16 vCPU (4 GiB per vCPU), price by size then family. Twice the 60
    candidates a NodeClaim lists, so a NodeClaim can grow past its 60 cheapest types (the issue's bug)."""
    return [make_type(f"f{f:02d}.{size}", cpu, 4 * cpu, round(0.05 * cpu * (1 + f / 100), 6))
            for f in range(30) for size, cpu in (("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16))]


TYPES = ladder() + gpu_types()

pod_spec = st.tuples(
    st.sampled_from([250, 500, 1000, 1500, 2000, 3000, 7000]),  # cpu m
    st.sampled_from([256, 1024, 4096, 12000]),  # memory MiB
    st.sampled_from(["free", "free", "host-anti", "zone-spread", "gpu"]),
)
limits = st.fixed_dictionaries({}, optional={
    "cpu": st.sampled_from([4000, 12000, 16000, 20000, 32000]),
    "memory": st.sampled_from([8 * GIB, 16 * GIB, 64 * GIB]),
    GPU: st.sampled_from([1, 2, 4, 8]),
    "nodes": st.integers(min_value=0, max_value=5),
})
owned = st.lists(st.sampled_from(["f00.xlarge", "f03.2xlarge", "g.2xlarge"]), max_size=3)


def batch(specs: list[tuple[int, int, str]]) -> list:  # type: ignore[type-arg]
    out = []
    for i, (cpu, mem, kind) in enumerate(specs):
        kw: dict[str, object] = {}
        if kind == "host-anti":
            kw["labels"] = {"app": "db"}
            kw["affinity"] = Affinity(pod_anti_affinity_required=(PodAffinityTerm(HOST, LabelSelector((("app", "db"),))),))
        elif kind == "zone-spread":
            kw["labels"] = {"app": "s"}
            kw["topology_spread"] = (TopologySpreadConstraint(1, ZONE, label_selector=LabelSelector((("app", "s"),))),)
        p = pod(f"p{i}", cpu, mem, **kw)
        if kind == "gpu":
            p.requests[GPU] = 1
        out.append(p)
    return out


def owned_node(i: int, name: str) -> ExistingNode:
    it = next(t for t in TYPES if t.name == name)
    # Full: owns capacity, takes no pods (the batch must launch).
    return ExistingNode(name=f"owned-{i}", labels={ZONE: "test-1a", "karpenter.sh/nodepool": "default"},
                        allocatable={"cpu": 0, "memory": 0, "pods": 0}, nodepool="default", capacity=dict(it.capacity))


@settings(max_examples=80, deadline=None)
@given(workloads=st.lists(st.tuples(st.integers(min_value=1, max_value=14), pod_spec), min_size=1, max_size=4),
       limit=limits, owned_types=owned, optimize=st.booleans(), second=st.one_of(st.none(), limits))
def test_owned_plus_launched_never_exceeds_the_limits(workloads: list[tuple[int, tuple[int, int, str]]],
                                                      limit: dict[str, int], owned_types: list[str],
                                                      optimize: bool, second: dict[str, int] | None) -> None:
    """``second``: a heavier NodePool tried first, with limits of its own (None: only ``default``)."""
    pods = batch([spec for count, spec in workloads for _ in range(count)])  # replicas of up to 4 workloads
    nodes = [owned_node(i, name) for i, name in enumerate(owned_types)]
    spec = pool(limits=limit or None)
    usage: dict[str, int] = {}
    for n in nodes:
        for k, v in n.capacity.items():
            usage[k] = usage.get(k, 0) + v
        usage["nodes"] = usage.get("nodes", 0) + 1
    spec.usage = usage
    pools = [spec] if second is None else [spec, pool("first", weight=10, limits=second or None)]
    result = schedule(pods, nodes, pools, {p.name: TYPES for p in pools}, optimize=optimize)
    # Every pod is placed once or reported.
    placed = [p.key for n in result.new_nodeclaims for p in n.pods]
    assert sorted(placed + list(result.unschedulable)) == sorted(p.key for p in pods)
    launched = launched_capacity(spec, result.new_nodeclaims)
    for name, cap in limit.items():
        # What the pool owned already may exceed a limit; then nothing more launches.
        assert launched[name] <= max(0, cap - usage.get(name, 0)), (name, cap, usage, launched)
    if second:
        first = launched_capacity(pools[1], result.new_nodeclaims)
        assert all(first[name] <= max(0, cap) for name, cap in second.items()), (second, first)
    # The plan's line says what changed.
    line = [e.message for e in result.events if e.message.startswith("limits of nodepool default changed the plan")]
    assert len(line) <= 1


@settings(max_examples=40, deadline=None)
@given(count=st.integers(min_value=1, max_value=8), gpus=st.sampled_from([1, 2, 4, 8]), optimize=st.booleans())
def test_a_far_limit_never_costs_more_than_no_limit_when_the_unlimited_plan_fits_it(count: int, gpus: int,
                                                                                    optimize: bool) -> None:
    """Narrowing (nodewright's addition): when the plan without limits already fits them (at its own types), the
    limited plan places the same pods for no more USD/hour."""
    pods = batch([(2000, 4096, "gpu")] * count)
    free = schedule(pods, [], [pool()], {"default": gpu_types()}, optimize=optimize)
    need = {GPU: sum(n.instance_type.capacity.get(GPU, 0) for n in free.new_nodeclaims)}
    limited_pool = pool(limits={GPU: gpus})
    limited = schedule(pods, [], [limited_pool], {"default": gpu_types()}, optimize=optimize)
    assert launched_capacity(limited_pool, limited.new_nodeclaims)[GPU] <= gpus
    if need[GPU] <= gpus and optimize:
        assert limited.scheduled_pod_count() == free.scheduled_pod_count()
        assert round(limited.total_price, 6) <= round(free.total_price, 6)
