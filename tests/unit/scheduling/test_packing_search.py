"""The packer's bounded search returns exactly what a full scan of every type would (same moves, same order).

``_Problem.moves`` / ``best_move`` skip types whose price / value lower bound cannot beat the best fills found and
reuse fills cached under capped counts; a plain reference scan (fill every pareto type, sort) must agree.
"""

import random

import pytest

from nodewright.scheduling import packing
from nodewright.scheduling.nodeclaimtemplate import TypeInfo
from nodewright.scheduling.packing import Item, _dot_fill, _ffd, _Problem, _Shared, pareto

from .helpers import MIB, make_type


def random_problem(seed: int) -> tuple[list[Item], list[TypeInfo], dict[str, float]]:
    rng = random.Random(seed)
    types = []
    for i in range(rng.randint(3, 30)):
        cpu = rng.choice([1, 2, 4, 8, 16, 32])
        ratio = rng.choice([2, 4, 8])
        price = round((cpu * 0.034 + cpu * ratio * 0.0045) * rng.uniform(0.6, 1.4), 4)
        it = make_type(f"t{i}.x{cpu}", cpu, cpu * ratio, price, pods=rng.choice([4, 8, 29, 110]))
        alloc = it.allocatable()
        types.append(TypeInfo(it, (alloc["cpu"], alloc["memory"], alloc["pods"])))
    prices = {t.name: t.it.offerings[0].price for t in types}
    shapes = {(rng.choice([100, 250, 500, 1000, 3000]), rng.choice([128, 512, 2048, 6144]) * MIB, 1) for _ in range(rng.randint(1, 6))}
    items = [Item(v, rng.randint(1, 40)) for v in sorted(shapes)]
    return items, types, prices


def reference_moves(problem: _Problem, counts: list[int], limit: int):
    scored = []
    for t in problem.types:
        fills = [_ffd(t.budget, problem.order, problem.items, counts)]
        if problem.small:
            fills.append(_dot_fill(t.budget, problem.items, counts))
        for fill in fills:
            if fill:
                value = sum(problem.values[i] * k for i, k in fill)
                scored.append((problem.prices[t.name] / value, t, fill))
    scored.sort(key=lambda s: (s[0], s[1].name))
    return [(s[0], s[1].name, s[2]) for s in scored[:limit]]


def reference_best(problem: _Problem, counts: list[int]):
    best, best_key = None, None
    for t in problem.types:
        fill = _ffd(t.budget, problem.order, problem.items, counts)
        if fill:
            value = sum(problem.values[i] * k for i, k in fill)
            key = (problem.prices[t.name] / value, -value)
            if best_key is None or key < best_key:
                best, best_key = (t.name, fill), key
    return best


@pytest.mark.parametrize("seed", range(25))
def test_bounded_search_equals_full_scan(seed: int) -> None:
    items, types, prices = random_problem(seed)
    useful = [t for t in types if any(packing._fits(it.vec, t.budget) for it in items)]
    shared = _Shared(items, pareto(useful, prices), prices)
    rng = random.Random(seed)
    for mode in ("fit", "cpu", "memory"):
        problem = _Problem(items, shared, prices, mode)
        counts = [it.count for it in items]
        for _ in range(6):  # a few states along a random descent
            got = [(s, t.name, f) for s, t, f in problem.moves(counts, packing.BEAM_WIDTH)]
            assert got == reference_moves(problem, counts, packing.BEAM_WIDTH)
            move = problem.best_move(counts)
            ref = reference_best(problem, counts)
            assert (move[0].name, move[1]) == ref if move else ref is None
            if not got:
                break
            _, _, fill = got[rng.randrange(len(got))]
            for i, k in fill:
                counts[i] -= k
            if not any(counts):
                break


def testpareto_drops_dominated_types() -> None:
    a = TypeInfo(make_type("a.x2", 2, 4, 0.11), (2000, 4 * 2**30, 110))
    b = TypeInfo(make_type("b.x2", 2, 8, 0.1), (2000, 8 * 2**30, 110))  # cheaper, more memory: dominates a
    c = TypeInfo(make_type("c.x4", 4, 8, 0.2), (4000, 8 * 2**30, 110))
    d = TypeInfo(make_type("d.x4", 4, 8, 0.3), (4000, 8 * 2**30, 110))  # c holds the same for less
    prices = {"a.x2": 0.11, "b.x2": 0.1, "c.x4": 0.2, "d.x4": 0.3}
    assert [t.name for t in pareto([a, b, c, d], prices)] == ["b.x2", "c.x4"]


def _linear_problem() -> tuple[list[Item], list[TypeInfo], dict[str, float]]:
    """120 types priced exactly per vCPU and GiB (every score bound ties) and 40 pods of 10 shapes."""
    types = []
    for i in range(120):
        cpu, mem = 1 + i % 40, (1 + i % 40) * (2 + i // 40 * 2)
        it = make_type(f"lin{i:03d}", cpu, mem, round(0.04 * cpu + 0.005 * mem, 6))
        alloc = it.allocatable()
        types.append(TypeInfo(it, (alloc["cpu"], alloc["memory"], alloc["pods"])))
    prices = {t.name: t.it.offerings[0].price for t in types}
    items = [Item((250 * (1 + k % 5), 512 * MIB * (1 + k // 5), 1), 4) for k in range(10)]
    return items, types, prices


def test_linear_prices_bound_each_move_search_and_every_pod_is_placed() -> None:
    items, types, prices = _linear_problem()
    front = pareto(types, prices)
    shared = _Shared(items, front, prices)
    problem = _Problem(items, shared, prices, "fit")
    assert shared.linear is True and len(front) > packing.MAX_FILLED_TYPES
    assert problem.max_filled == packing.MAX_FILLED_TYPES
    counts = [it.count for it in items]
    filled_before = len(shared.fills)
    assert len(problem.moves(counts, packing.BEAM_WIDTH)) == packing.BEAM_WIDTH
    # Two fills (first-fit decreasing and dot product) per type, for at most MAX_FILLED_TYPES types.
    assert len(shared.fills) - filled_before <= 2 * packing.MAX_FILLED_TYPES
    bins, left = packing.pack(items, types, prices)
    assert left == [0] * len(items) and sum(k for b in bins for _, k in b.fill) == 40


@pytest.mark.parametrize("seed", range(25))
def test_catalogs_not_priced_linearly_keep_the_full_scan(seed: int) -> None:
    items, types, prices = random_problem(seed)
    shared = _Shared(items, pareto(types, prices), prices)
    problem = _Problem(items, shared, prices, "fit")
    assert shared.linear is False and problem.max_filled == len(problem.types)


def test_one_pod_takes_the_same_type_from_all_types_by_price_as_from_the_front() -> None:
    from nodewright.scheduling.fronts import Front

    items, types, prices = _linear_problem()
    front = Front([(t, prices[t.name]) for t in types])
    for vec in ((250, 512 * MIB, 1), (3000, 9 * 1024 * MIB, 1), (39_000, 70 * 1024 * MIB, 1), (64_000, MIB, 1)):
        lone = [Item(vec, 1)]
        assert packing.pack(lone, types, prices, front=front.by_price()) == packing.pack(
            lone, types, prices, front=front.below(None))


@pytest.mark.parametrize("seed", range(25))
def test_beam_bounded_by_an_incumbent_finds_the_same_plan_when_that_plan_is_at_most_the_incumbent(seed: int) -> None:
    items, types, prices = random_problem(seed)
    useful = [t for t in types if any(packing._fits(it.vec, t.budget) for it in items)]
    front = pareto(useful, prices)
    if not all(any(packing._fits(it.vec, t.budget) for t in front) for it in items):
        pytest.skip("an item fits no type: the estimate is no lower bound, pack() passes no incumbent")
    shared = _Shared(items, front, prices)
    for mode in ("fit", "cpu", "memory"):
        problem = _Problem(items, shared, prices, mode)
        counts = [it.count for it in items]
        free = problem.beam(list(counts))
        greedy = packing._cost(problem.greedy(list(counts)))
        free_cost = packing._cost(free)
        for incumbent in (greedy, free_cost, free_cost * 1.01, free_cost * 0.99):
            bounded = problem.beam(list(counts), incumbent)
            if free_cost <= incumbent:
                assert [(b.info.name, b.fill) for b in bounded] == [(b.info.name, b.fill) for b in free]
            else:  # nothing at most the incumbent exists in the search: whatever it returns costs more
                assert bounded == [] or packing._cost(bounded) > incumbent


def test_linear_prices_weigh_pods_one_way_above_sixteen_pods() -> None:
    """Under linear prices the fitted weights are the prices: the cpu-only and memory-only weightings are not
    tried for groups of more than TIE_ONE_WEIGHTING_PODS pods (each is a full search); smaller groups try all three."""
    items, types, prices = _linear_problem()
    modes: list[str] = []
    real = packing._Problem

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, items, shared, prices, mode):  # type: ignore[no-untyped-def]
            modes.append(mode)
            super().__init__(items, shared, prices, mode)

    packing._Problem = Recording
    try:
        bins, left = packing.pack(items, types, prices)
        assert modes == ["fit"] and left == [0] * len(items)
        modes.clear()
        few = [Item(it.vec, 1) for it in items[:8]]
        packing.pack(few, types, prices)
        assert modes == ["fit", "cpu", "memory"]
    finally:
        packing._Problem = real


def test_a_type_holding_every_pod_fills_with_all_of_them_as_the_scans_would() -> None:
    items, types, prices = _linear_problem()
    front = pareto(types, prices)
    shared = _Shared(items, front, prices)
    counts = (1, 2, 0, 1, 1, 0, 3, 1, 0, 2)
    need = [sum(it.vec[d] * c for it, c in zip(items, counts, strict=True)) for d in range(3)]
    order = tuple(range(len(items) - 1, -1, -1))
    holding = [j for j, t in enumerate(front) if all(map(lambda n, b: n <= b, need, t.budget))]
    assert holding
    for j in holding:
        top = max(counts)
        assert shared.fill(j, order, counts, top, need) == _ffd(front[j].budget, order, items, counts)
        assert shared.fill(j, None, counts, top, need) == _dot_fill(front[j].budget, items, counts)
