"""Cost-optimal packing of interchangeable pods onto new nodes (nodewright's addition to Karpenter).

Karpenter packs greedily: a new NodeClaim keeps absorbing pods while *some* instance type still fits them, and
the launch picks the cheapest type that fits the result. That can be far from the cheapest fleet (one huge
node where two small ones cost less; a big node opened for a remainder of two pods). This module solves the
variable-sized, multi-dimensional bin packing problem for one group of pods that may share nodes (same
NodePool, compatible requirements, no topology constraint):

1. **Efficiency greedy with pattern repetition**: for every non-dominated instance type, fill it first-fit
   decreasing from the remaining pods and score ``price / value(packed pods)``, where a pod's value is its
   requests priced by a least-squares fit of the candidate types' prices to their cpu and memory. Open the
   best-scoring node, and repeat that same pattern as many times as the remaining counts allow (identical
   pods are counted per equivalence class, so 20,000 replicas cost a handful of rounds).
2. **Beam search** over the same moves on small problems and on the tail of large ones (the last,
   least-efficient nodes), ranked by cost so far plus an optimistic estimate of the rest.
3. **Local improvement**: every node is downsized to the cheapest type that fits its pods, and pairs of nodes
   are merged when one type holding both is cheaper.

Several value weightings (fitted, cpu-only, memory-only) are tried and the cheapest plan kept. Quality is
checked in tests against the exact optimum of the MILP (SciPy/HiGHS) on random small cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nodewright.scheduling.templates import TypeInfo, Vector

BEAM_WIDTH = 8
SMALL_PROBLEM_PODS = 64
TAIL_BINS = 6


@dataclass(frozen=True, slots=True)
class Item:
    """A class of identical pods: requests vector and how many."""

    vec: Vector
    count: int


@dataclass(slots=True)
class Bin:
    """One node of the plan: its type and how many pods of each item (index -> count)."""

    info: TypeInfo
    price: float
    fill: tuple[tuple[int, int], ...]

    def need(self, items: Sequence[Item], dims: int) -> list[int]:
        """Summed requests of the bin's pods."""
        need = [0] * dims
        for idx, k in self.fill:
            vec = items[idx].vec
            for d in range(dims):
                need[d] += vec[d] * k
        return need


def _fits(need: Sequence[int], budget: Sequence[int]) -> bool:
    for n, b in zip(need, budget, strict=True):
        if n > b:
            return False
    return True


def _pareto(types: Sequence[TypeInfo], prices: dict[str, float]) -> list[TypeInfo]:
    """Drop types another type dominates (at least the budget in every dimension, at most the price)."""
    ordered = sorted(types, key=lambda t: (prices[t.name], t.name))
    kept: list[TypeInfo] = []
    for t in ordered:
        dominated = False
        for k in kept:
            if prices[k.name] <= prices[t.name] and all(kb >= tb for kb, tb in zip(k.budget, t.budget, strict=True)):
                dominated = True
                break
        if not dominated:
            kept.append(t)
    return kept


def _fit_weights(types: Sequence[TypeInfo], prices: dict[str, float], dims: int, mode: str) -> list[float]:
    """Price per unit of each dimension (index 0 cpu, 1 memory; others tiny) for valuing pods."""
    weights = [0.0] * dims
    if not types:
        return [1.0] * dims
    cpu_rates = sorted(prices[t.name] / max(t.budget[0], 1) for t in types)
    mem_rates = sorted(prices[t.name] / max(t.budget[1], 1) for t in types) if dims > 1 else [0.0]
    if mode == "cpu":
        weights[0] = cpu_rates[len(cpu_rates) // 2]
    elif mode == "memory" and dims > 1:
        weights[1] = mem_rates[len(mem_rates) // 2]
    else:
        # Least squares price ~ a*cpu + b*memory over the candidate types (2x2 normal equations).
        sxx = sxy = syy = sxp = syp = 0.0
        for t in types:
            x, y, p = float(t.budget[0]), float(t.budget[1]) if dims > 1 else 0.0, prices[t.name]
            sxx += x * x
            sxy += x * y
            syy += y * y
            sxp += x * p
            syp += y * p
        det = sxx * syy - sxy * sxy
        a = (sxp * syy - syp * sxy) / det if det else 0.0
        b = (syp * sxx - sxp * sxy) / det if det else 0.0
        if a <= 0 or b <= 0:
            a, b = cpu_rates[len(cpu_rates) // 2] / 2, mem_rates[len(mem_rates) // 2] / 2
        weights[0] = a
        if dims > 1:
            weights[1] = b
    # Other dimensions (pods, gpus...) get a small weight so they are not free.
    scale = max(weights) or 1.0
    for d in range(2, dims):
        weights[d] = scale * 1e-6
    return weights


def _ffd(budget: Vector, order: Sequence[int], items: Sequence[Item], counts: Sequence[int]) -> list[tuple[int, int]]:
    """First-fit-decreasing fill of one node of ``budget``: how many of each item, in ``order``."""
    rem = list(budget)
    fill: list[tuple[int, int]] = []
    dims = len(rem)
    for idx in order:
        left = counts[idx]
        if left <= 0:
            continue
        vec = items[idx].vec
        k = left
        for d in range(dims):
            v = vec[d]
            if v > 0:
                q = rem[d] // v
                if q < k:
                    k = q
                    if k <= 0:
                        break
        if k > 0:
            for d in range(dims):
                rem[d] -= vec[d] * k
            fill.append((idx, k))
    return fill


def _dot_fill(budget: Vector, items: Sequence[Item], counts: Sequence[int]) -> list[tuple[int, int]]:
    """Fill one node pod by pod, each time taking the pod best aligned with the room left (normalised dot
    product), so complementary pods (cpu-heavy with memory-heavy) share a node."""
    rem = list(budget)
    left = list(counts)
    taken: dict[int, int] = {}
    scale = [max(b, 1) for b in budget]
    while True:
        best, best_score = -1, -1.0
        for i, item in enumerate(items):
            if left[i] <= 0 or not _fits(item.vec, rem):
                continue
            score = sum((v / sc) * (r / sc) for v, r, sc in zip(item.vec, rem, scale, strict=True))
            if score > best_score:
                best, best_score = i, score
        if best < 0:
            break
        vec = items[best].vec
        for d in range(len(rem)):
            rem[d] -= vec[d]
        left[best] -= 1
        taken[best] = taken.get(best, 0) + 1
    return sorted(taken.items())


class _Problem:
    def __init__(
        self,
        items: Sequence[Item],
        all_types: list[TypeInfo],
        pareto: list[TypeInfo],
        prices: dict[str, float],
        mode: str,
    ) -> None:
        self.items = items
        self.small = sum(it.count for it in items) <= SMALL_PROBLEM_PODS
        self.dims = len(items[0].vec) if items else 0
        self.prices = prices
        self.all_types = all_types
        self.types = pareto
        w = _fit_weights(self.types, prices, self.dims, mode)
        self.values = [sum(wd * vd for wd, vd in zip(w, it.vec, strict=True)) + 1e-12 for it in items]
        self.order = sorted(range(len(items)), key=lambda i: (-self.values[i], i))
        best_rate = min(
            (prices[t.name] / (sum(wd * bd for wd, bd in zip(w, t.budget, strict=True)) + 1e-12) for t in self.types),
            default=0.0,
        )
        self.best_rate = best_rate

    def best_move(self, counts: Sequence[int]) -> tuple[TypeInfo, list[tuple[int, int]], float] | None:
        best: tuple[TypeInfo, list[tuple[int, int]], float] | None = None
        best_key: tuple[float, float] | None = None
        for t in self.types:
            fill = _ffd(t.budget, self.order, self.items, counts)
            if not fill:
                continue
            value = sum(self.values[i] * k for i, k in fill)
            key = (self.prices[t.name] / value, -value)
            if best_key is None or key < best_key:
                best, best_key = (t, fill, value), key
        return best

    def moves(self, counts: Sequence[int], limit: int) -> list[tuple[float, TypeInfo, list[tuple[int, int]]]]:
        scored = []
        for t in self.types:
            fills = [_ffd(t.budget, self.order, self.items, counts)]
            if self.small:
                fills.append(_dot_fill(t.budget, self.items, counts))
            for fill in fills:
                if fill:
                    value = sum(self.values[i] * k for i, k in fill)
                    scored.append((self.prices[t.name] / value, t, fill))
        scored.sort(key=lambda s: (s[0], s[1].name))
        return scored[:limit]

    def remaining_estimate(self, counts: Sequence[int]) -> float:
        return self.best_rate * sum(self.values[i] * c for i, c in enumerate(counts))

    def greedy(self, counts: list[int]) -> list[Bin]:
        bins: list[Bin] = []
        while any(counts):
            move = self.best_move(counts)
            if move is None:
                break
            t, fill, _ = move
            reps = min(counts[i] // k for i, k in fill)
            for i, k in fill:
                counts[i] -= k * reps
            bins.extend(Bin(t, self.prices[t.name], tuple(fill)) for _ in range(reps))
        return bins

    def beam(self, counts: list[int]) -> list[Bin]:
        states: list[tuple[float, tuple[int, ...], list[Bin]]] = [(0.0, tuple(counts), [])]
        finished: list[tuple[float, list[Bin]]] = []
        while states:
            children: list[tuple[float, float, tuple[int, ...], list[Bin]]] = []
            for cost, cnt, bins in states:
                moves = self.moves(cnt, BEAM_WIDTH)
                if not moves:
                    finished.append((cost, bins))
                    continue
                for _, t, fill in moves:
                    nxt = list(cnt)
                    for i, k in fill:
                        nxt[i] -= k
                    new_cost = cost + self.prices[t.name]
                    new_bins = [*bins, Bin(t, self.prices[t.name], tuple(fill))]
                    if not any(nxt):
                        finished.append((new_cost, new_bins))
                    else:
                        children.append((new_cost + self.remaining_estimate(nxt), new_cost, tuple(nxt), new_bins))
            children.sort(key=lambda c: c[0])
            seen: set[tuple[int, ...]] = set()
            states = []
            for _, cost, cnt, bins in children:
                if cnt in seen:
                    continue
                seen.add(cnt)
                states.append((cost, cnt, bins))
                if len(states) >= BEAM_WIDTH:
                    break
        if not finished:
            return []
        return min(finished, key=lambda f: (round(f[0], 9), len(f[1])))[1]

    def cheapest_fitting(self, need: Sequence[int]) -> TypeInfo | None:
        for t in self.all_types:
            if _fits(need, t.budget):
                return t
        return None

    def downsize(self, bins: list[Bin]) -> None:
        memo: dict[tuple[tuple[int, int], ...], TypeInfo | None] = {}
        for b in bins:
            if b.fill not in memo:
                memo[b.fill] = self.cheapest_fitting(b.need(self.items, self.dims))
            t = memo[b.fill]
            if t is not None and self.prices[t.name] < b.price:
                b.info, b.price = t, self.prices[t.name]

    def merge_pairs(self, bins: list[Bin], repack: bool = False) -> list[Bin]:
        """Merge two nodes into one cheaper type; with ``repack``, also re-solve each pair's pods by beam search."""
        improved = True
        rounds = 0
        while improved and len(bins) > 1 and rounds < 200:
            improved = False
            rounds += 1
            for i in range(len(bins)):
                for j in range(i + 1, len(bins)):
                    merged = _merge_fill(bins[i].fill, bins[j].fill)
                    need = Bin(bins[i].info, 0.0, merged).need(self.items, self.dims)
                    pair_cost = bins[i].price + bins[j].price - 1e-9
                    t = self.cheapest_fitting(need)
                    if t is not None and self.prices[t.name] < pair_cost:
                        bins[i] = Bin(t, self.prices[t.name], merged)
                        del bins[j]
                        improved = True
                        break
                    if repack:
                        counts = [0] * len(self.items)
                        for idx, k in merged:
                            counts[idx] += k
                        alt = self.beam(counts)
                        self.downsize(alt)
                        if alt and _cost(alt) < pair_cost and _placed(alt, len(self.items)) == counts:
                            bins[i:i + 1] = alt[:1]
                            del bins[j]
                            bins.extend(alt[1:])
                            improved = True
                            break
                if improved:
                    break
        return bins


def _merge_fill(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    merged: dict[int, int] = {}
    for idx, k in (*a, *b):
        merged[idx] = merged.get(idx, 0) + k
    return tuple(sorted(merged.items()))


def _cost(bins: Sequence[Bin]) -> float:
    return sum(b.price for b in bins)


def pack(items: Sequence[Item], types: Sequence[TypeInfo], prices: dict[str, float]) -> tuple[list[Bin], list[int]]:
    """Pack ``items`` onto new nodes of ``types`` at minimum total price.

    Args:
        items: pod classes (requests vectors in the pool's dimension order, counts).
        types: candidate instance types (budgets already net of daemonset overhead / target utilization).
        prices: type name -> USD/hour of the offering a launch would get.

    Returns:
        (bins, leftover counts per item): pods of an item that fits no type stay in the leftovers.
    """
    if not items or not types:
        return [], [it.count for it in items]
    total_pods = sum(it.count for it in items)
    best_bins: list[Bin] | None = None
    best_left: list[int] = []
    all_types = sorted(types, key=lambda t: (prices[t.name], t.name))
    # Only types that fit at least one item matter for the greedy moves.
    useful = [t for t in types if any(_fits(it.vec, t.budget) for it in items)]
    pareto = _pareto(useful, prices)
    for mode in ("fit", "cpu", "memory"):
        problem = _Problem(items, all_types, pareto, prices, mode)
        counts = [it.count for it in items]
        if total_pods <= SMALL_PROBLEM_PODS:
            bins = problem.beam(list(counts))
            placed = _placed(bins, len(items))
            left = [c - p for c, p in zip(counts, placed, strict=True)]
            greedy_bins = problem.greedy(list(counts))
            if _placed(greedy_bins, len(items)) == placed and (round(_cost(greedy_bins), 9), len(greedy_bins)) < (
                round(_cost(bins), 9),
                len(bins),
            ):
                bins = greedy_bins
        else:
            bins = problem.greedy(counts)
            left = counts
            bins = _improve_tail(problem, bins)
        problem.downsize(bins)
        if total_pods <= SMALL_PROBLEM_PODS:
            # Pairwise re-solving costs a beam search per pair: only for small catalogs (tests, narrow pools).
            bins = problem.merge_pairs(bins, repack=len(bins) <= 30 and len(problem.types) <= 40)
        elif len(bins) <= 40:
            bins = problem.merge_pairs(bins)
        else:
            tail = problem.merge_pairs(bins[-TAIL_BINS:])
            bins = bins[:-TAIL_BINS] + tail
        # Ties (to the nano-dollar) go to fewer nodes.
        if best_bins is None or (sum(left), round(_cost(bins), 9), len(bins)) < (
            sum(best_left),
            round(_cost(best_bins), 9),
            len(best_bins),
        ):
            best_bins, best_left = bins, left
    return best_bins or [], best_left


def _placed(bins: Sequence[Bin], n: int) -> list[int]:
    placed = [0] * n
    for b in bins:
        for i, k in b.fill:
            placed[i] += k
    return placed


def _improve_tail(problem: _Problem, bins: list[Bin]) -> list[Bin]:
    """Re-solve the pods of the last few nodes with beam search; keep it when cheaper."""
    if len(bins) < 2:
        return bins
    start = max(0, len(bins) - TAIL_BINS)
    tail = bins[start:]
    counts = _placed(tail, len(problem.items))
    if sum(counts) > 4 * SMALL_PROBLEM_PODS:
        return bins
    alt = problem.beam(list(counts))
    if _placed(alt, len(problem.items)) == counts and _cost(alt) < _cost(tail):
        return bins[:start] + alt
    return bins
