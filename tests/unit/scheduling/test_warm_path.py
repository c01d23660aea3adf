"""The warm path of a batch (issue 19): what a batch on a warm SchedulingCache skips or reuses must not change a
decision. The greedy guard is skipped for a lone pod only when no greedy NodeClaim can be cheaper; instance types
equal to the cached ones reuse them, changed ones do not; plan requirements are reused per candidate list; the
three-dimension dot-product fill chooses exactly as the general one."""

from __future__ import annotations

import dataclasses
import random

import pytest

from nodewright.cloud.instancetype import InstanceType
from nodewright.scheduling import NodePoolSpec, Pod, SchedulingResult, schedule
from nodewright.scheduling.cache import SchedulingCache
from nodewright.scheduling.packing import Item, _dot_fill3, _dot_fill_any
from nodewright.scheduling.pods import Affinity, NodeSelectorTerm, PreferredSchedulingTerm

from .helpers import MIB, make_type, pod, pool

TYPES = [
    make_type("c.large", 2, 4, 0.085, spot=0.03),
    make_type("m.large", 2, 8, 0.096, spot=0.035),
    make_type("r.large", 2, 16, 0.126, spot=0.05),
    make_type("c.xlarge", 4, 8, 0.17, spot=0.06),
]
ITYPE = "node.kubernetes.io/instance-type"


def plans(result: SchedulingResult) -> list[tuple[str, str, str, float, list[str]]]:
    return [(p.nodepool, p.instance_type.name, p.offering.capacity_type, p.price, [x.name for x in p.pods])
            for p in result.new_nodeclaims]


# --- the greedy guard for a lone pod -------------------------------------------------------------------------

def test_a_lone_pod_on_the_cheapest_fitting_type_needs_no_greedy_pass(greedy_runs: list[int]) -> None:
    lone = [pod("a", 1000, 1024)]
    result = schedule(lone, [], [pool()], {"default": TYPES})
    assert greedy_runs == []
    assert plans(result) == plans(schedule(lone, [], [pool()], {"default": TYPES}, optimize=False)) == [
        ("default", "c.large", "spot", 0.03, ["a"])]


def test_a_lone_pod_with_a_preference_left_to_relax_is_checked_against_greedy(greedy_runs: list[int]) -> None:
    """A preferred node term the greedy loop could relax differently: the guard runs."""
    term = NodeSelectorTerm(((ITYPE, "In", ("r.large",)),))
    lone = [pod("a", 1000, 1024, affinity=Affinity(node_preferred=(PreferredSchedulingTerm(10, term),)))]
    result = schedule(lone, [], [pool()], {"default": TYPES})
    assert greedy_runs == [1]
    assert plans(result) == [("default", "r.large", "spot", 0.05, ["a"])]


def test_a_lone_pod_in_a_pricier_heavier_pool_is_checked_against_greedy(greedy_runs: list[int]) -> None:
    """The heavier pool allows only r.large ($0.05 spot); the other pool's c.large costs $0.03, below the plan,
    so no bound proves greedy cannot be cheaper: the guard runs (and greedy, too, takes the heavier pool)."""
    heavy = pool("heavy", weight=10, requirements=[{"key": ITYPE, "operator": "In", "values": ["r.large"]}])
    lone = [pod("a", 1000, 1024)]
    result = schedule(lone, [], [heavy, pool()], {"heavy": TYPES, "default": TYPES})
    assert greedy_runs == [1]
    assert plans(result) == [("heavy", "r.large", "spot", 0.05, ["a"])]


def test_a_lone_pod_in_a_pool_with_limits_is_checked_against_greedy(greedy_runs: list[int]) -> None:
    lone = [pod("a", 1000, 1024)]
    result = schedule(lone, [], [pool(limits={"cpu": 64_000})], {"default": TYPES})
    assert greedy_runs == [1]
    assert plans(result) == [("default", "c.large", "spot", 0.03, ["a"])]


# --- instance types compared by value ------------------------------------------------------------------------

def test_an_equal_copy_of_the_catalog_reuses_the_compiled_types() -> None:
    cache = SchedulingCache()
    schedule([pod("a", 1000, 1024)], [], [pool()], {"default": TYPES}, cache=cache)
    built, hits = cache.stats.types_built, cache.stats.hits
    copies = [dataclasses.replace(t) for t in TYPES]
    assert copies == TYPES and all(c is not t for c, t in zip(copies, TYPES, strict=True))
    result = schedule([pod("b", 1000, 1024)], [], [pool()], {"default": copies}, cache=cache)
    assert cache.stats.types_built == built and cache.stats.hits == hits + 1
    assert plans(result) == [("default", "c.large", "spot", 0.03, ["b"])]


def _repriced(it: InstanceType, spot: float) -> InstanceType:
    offerings = tuple(dataclasses.replace(o, price=spot) if o.capacity_type == "spot" else o for o in it.offerings)
    return dataclasses.replace(it, offerings=offerings)


def test_a_changed_spot_price_rebuilds_that_type_and_decides_on_it() -> None:
    """c.large's spot price rises from $0.03 to $0.09, the other types are the same objects: m.large ($0.035)
    wins, and only c.large is compiled again."""
    cache = SchedulingCache()
    schedule([pod("a", 1000, 1024)], [], [pool()], {"default": TYPES}, cache=cache)
    built = cache.stats.types_built
    changed = [_repriced(TYPES[0], 0.09), *TYPES[1:]]
    assert changed != TYPES
    result = schedule([pod("b", 1000, 1024)], [], [pool()], {"default": changed}, cache=cache)
    assert cache.stats.types_built == built + 1
    assert plans(result) == [("default", "m.large", "spot", 0.035, ["b"])]
    assert plans(result) == plans(schedule([pod("b", 1000, 1024)], [], [pool()], {"default": changed}))


# --- plan requirements reused between batches ----------------------------------------------------------------

def _plan_docs(result: SchedulingResult) -> list[tuple[str, dict[str, str], list[str]]]:
    return [(repr(p.requirements), p.labels, [t.name for t in p.instance_types]) for p in result.new_nodeclaims]


@pytest.mark.parametrize("spec", [pool(), pool(labels={"team": "a"})])
def test_plan_requirements_and_labels_follow_each_batch(spec: NodePoolSpec) -> None:
    """Batches of other sizes and capacity types on one warm cache: each plan's requirements and labels are the
    ones an empty cache gives (the memo is keyed by requirement set, candidates and capacity type)."""
    cache = SchedulingCache()
    on_demand = {"karpenter.sh/capacity-type": "on-demand"}
    batches: list[list[Pod]] = [
        [pod("a", 1000, 1024)],
        [pod("b", 1000, 1024, node_selector=on_demand)],
        [pod("c", 3000, 1024)],
        [pod("d", 1000, 1024)],
    ]
    seen = []
    for batch in batches:
        warm = schedule(batch, [], [spec], {spec.name: TYPES}, cache=cache)
        assert _plan_docs(warm) == _plan_docs(schedule(batch, [], [spec], {spec.name: TYPES}))
        seen.append((warm.new_nodeclaims[0].labels["karpenter.sh/capacity-type"],
                     warm.new_nodeclaims[0].requirements.get(ITYPE).values))  # type: ignore[union-attr]
    assert [ct for ct, _ in seen] == ["spot", "on-demand", "spot", "spot"]
    assert sorted(seen[2][1]) == ["c.xlarge"]
    assert sorted(seen[0][1]) == sorted(seen[3][1]) == ["c.large", "c.xlarge", "m.large", "r.large"]


# --- the unrolled dot-product fill ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(40))
def test_the_three_dimension_dot_fill_chooses_as_the_general_one(seed: int) -> None:
    rng = random.Random(seed)
    budget = (rng.choice([1930, 3920, 7910, 15890]), rng.choice([3, 7, 15, 31]) * 1024 * MIB, rng.choice([8, 29, 110]))
    shapes = {(rng.choice([100, 250, 500, 1000, 1930]), rng.choice([128, 512, 1024, 2048]) * MIB, 1)
              for _ in range(rng.randint(1, 8))}
    if seed % 4 == 0:
        shapes |= {(250, 512 * MIB, 1), (500, 1024 * MIB, 1)}  # equal scores: ties go to the first item
    items = [Item(v, rng.randint(1, 30)) for v in sorted(shapes)]
    counts = [it.count for it in items]
    assert _dot_fill3(budget, items, counts) == _dot_fill_any(budget, items, counts)


def test_the_dot_fill_of_a_known_node() -> None:
    """2 vCPU / 4 GiB / 4 pods: the 1-vCPU/1-GiB pod aligns best (1.0 against 0.875); then both score 0.625 and
    the tie goes to the first item; the cpu is then used up, so the 250m pod no longer fits."""
    items = [Item((1000, 1024 * MIB, 1), 3), Item((250, 2048 * MIB, 1), 3)]
    budget = (2000, 4096 * MIB, 4)
    assert _dot_fill3(budget, items, [3, 3]) == _dot_fill_any(budget, items, [3, 3]) == [(0, 2)]
