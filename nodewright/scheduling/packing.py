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

Speed without changing the result (``tests/unit/scheduling/test_packing_search.py`` checks it against a full
scan): a move search visits types by a lower bound of their score (price over the most value any fill of the
type could hold) and stops once the bound exceeds the best scores found, instead of filling all ~150 pareto
types of a real catalog; fills are cached under the counts capped at what fits the type alone, so beam states,
search steps and the three weightings share them; ``cheapest_fitting`` scans the pareto types only (the
cheapest type holding a node's pods is never dominated).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import le, mul
from typing import Any

from nodewright.scheduling.fronts import MAX_FILLED_TYPES, linear_prices, pareto
from nodewright.scheduling.nodeclaimtemplate import TypeInfo, Vector

BEAM_WIDTH = 8
SMALL_PROBLEM_PODS = 64
TAIL_BINS = 6
MAX_CACHED_FILLS = 50_000


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
    return all(map(le, need, budget))


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
    if len(budget) == 3:
        return _dot_fill3(budget, items, counts)
    return _dot_fill_any(budget, items, counts)


def _dot_fill_any(budget: Vector, items: Sequence[Item], counts: Sequence[int]) -> list[tuple[int, int]]:
    """:func:`_dot_fill` in any number of dimensions."""
    rem = list(budget)
    scale = [max(b, 1) for b in budget]
    # Items that no longer fit never fit again (the room only shrinks): keep a shrinking active list.
    active = [i for i, item in enumerate(items) if counts[i] > 0 and all(map(le, item.vec, rem))]
    normed = {i: [v / sc for v, sc in zip(items[i].vec, scale, strict=True)] for i in active}
    left = {i: counts[i] for i in active}
    taken: dict[int, int] = {}
    while active:
        room = [r / sc for r, sc in zip(rem, scale, strict=True)]
        best, best_score = -1, -1.0
        for i in active:
            score = sum(map(mul, normed[i], room))
            if score > best_score:
                best, best_score = i, score
        vec = items[best].vec
        for d in range(len(rem)):
            rem[d] -= vec[d]
        left[best] -= 1
        taken[best] = taken.get(best, 0) + 1
        active = [i for i in active if left[i] > 0 and all(map(le, items[i].vec, rem))]
    return sorted(taken.items())


def _dot_fill3(budget: Vector, items: Sequence[Item], counts: Sequence[int]) -> list[tuple[int, int]]:
    """:func:`_dot_fill` for three dimensions (cpu, memory, pods: the usual run), unrolled: the same float
    operations in the same order (``sum`` adds left to right from 0), so the same choices, at a third of the
    interpreter's work."""
    r0, r1, r2 = budget
    s0, s1, s2 = max(r0, 1), max(r1, 1), max(r2, 1)
    # (index, normed vector, vector, pods left) per item; each step keeps (in order) those still left and
    # fitting, and scores them in the same pass.
    active = []
    for i, item in enumerate(items):
        v0, v1, v2 = item.vec
        active.append([i, v0 / s0, v1 / s1, v2 / s2, v0, v1, v2, counts[i]])
    taken: dict[int, int] = {}
    while True:
        q0, q1, q2 = r0 / s0, r1 / s1, r2 / s2
        best: list[Any] | None = None
        best_score = -1.0
        kept = []
        for a in active:
            if a[7] > 0 and a[4] <= r0 and a[5] <= r1 and a[6] <= r2:
                kept.append(a)
                score = 0 + a[1] * q0 + a[2] * q1 + a[3] * q2
                if score > best_score:
                    best, best_score = a, score
        if best is None:
            break
        active = kept
        r0 -= best[4]
        r1 -= best[5]
        r2 -= best[6]
        best[7] -= 1
        taken[best[0]] = taken.get(best[0], 0) + 1
    return sorted(taken.items())


Fill = list[tuple[int, int]]


class _Shared:
    """Per-:func:`pack` data shared by the value weightings: pareto types, per-type item capacities, and the
    fills already computed.

    A fill of type ``t`` depends on the remaining counts only through ``min(count_i, cap_i(t))``, where
    ``cap_i(t)`` is how many pods of item ``i`` fit ``t`` alone: fills are cached under those capped counts,
    so beam states, search steps and the three weightings reuse each other's fills.
    """

    def __init__(self, items: Sequence[Item], types: list[TypeInfo], prices: dict[str, float]) -> None:
        self.items = items
        self.types = types
        self.prices = [prices[t.name] for t in types]
        self.caps: list[list[int]] = []
        for t in types:
            caps = []
            for it in items:
                cap = min((b // v for b, v in zip(t.budget, it.vec, strict=True) if v > 0), default=1 << 62)
                caps.append(cap)
            self.caps.append(caps)
        #: Per type, the smallest of its caps: counts all at most that are their own capped counts.
        self.floor = [min(caps, default=0) for caps in self.caps]
        self.fills: dict[tuple[object, ...], Fill] = {}
        self.linear: bool | None = None  # prices linear in the resources (fronts.linear_prices): 1st problem

    def fill(self, j: int, order: tuple[int, ...] | None, counts: Sequence[int], top: int | None = None) -> Fill:
        """FFD fill of type ``j`` in ``order`` (None: the dot-product fill), cached. ``top``: ``max(counts)``
        (the caller's, computed once for all types), or None."""
        if top is not None and top <= self.floor[j]:
            capped = counts if type(counts) is tuple else tuple(counts)  # no cap lowers them
        else:
            capped = tuple([c if c < m else m for c, m in zip(counts, self.caps[j], strict=True)])
        key = (j, order, capped)
        found = self.fills.get(key)
        if found is None:
            budget = self.types[j].budget
            found = _dot_fill(budget, self.items, capped) if order is None else _ffd(budget, order, self.items, capped)
            if len(self.fills) >= MAX_CACHED_FILLS:
                self.fills.clear()  # bounds memory on batches of many shapes, where reuse is rare anyway
            self.fills[key] = found
        return found


def _move_key(s: tuple[float, str, int, int, TypeInfo, Fill]) -> tuple[float, str, int, int]:
    return s[0], s[1], s[2], s[3]


class _Problem:
    def __init__(
        self,
        items: Sequence[Item],
        shared: _Shared,
        prices: dict[str, float],
        mode: str,
    ) -> None:
        self.items = items
        self.small = sum(it.count for it in items) <= SMALL_PROBLEM_PODS
        self.dims = len(items[0].vec) if items else 0
        self.prices = prices
        self.shared = shared
        self.types = shared.types
        w = _fit_weights(self.types, prices, self.dims, mode)
        self.weights = w
        self.values = [sum(wd * vd for wd, vd in zip(w, it.vec, strict=True)) + 1e-12 for it in items]
        self.order = tuple(sorted(range(len(items)), key=lambda i: (-self.values[i], i)))
        best_rate = min(
            (prices[t.name] / (sum(wd * bd for wd, bd in zip(w, t.budget, strict=True)) + 1e-12) for t in self.types),
            default=0.0,
        )
        self.best_rate = best_rate
        total = sum(it.count for it in items)
        slack = 1e-12 * (total + 1)
        self.static_order = sorted(
            (shared.prices[j] / (sum(map(mul, w, t.budget)) * (1 + 1e-9) + slack), j) for j, t in enumerate(self.types)
        )
        if shared.linear is None:  # then all score bounds tie: fill at most MAX_FILLED_TYPES per move search
            shared.linear = linear_prices(self.types, shared.prices, _fit_weights(self.types, prices, self.dims, "fit"))
        self.max_filled = MAX_FILLED_TYPES if shared.linear else len(self.types)

    def _need(self, counts: Sequence[int]) -> tuple[list[int], int]:
        """Summed requests and number of the remaining pods."""
        dims = self.dims
        items = self.items
        need = [0] * dims
        pods = 0
        for i, c in enumerate(counts):
            if c:
                pods += c
                vec = items[i].vec
                for d in range(dims):
                    need[d] += vec[d] * c
        return need, pods

    def _candidates(self, counts: Sequence[int]) -> Iterator[tuple[float, float, int]]:
        """Yield (static bound, bound, j) for the types in static-bound order; see :meth:`moves`.

        A fill's value is at most the weighted sum, per dimension, of the smaller of the type's budget and the
        remaining pods' total need, so no fill of type j scores (price / value) below ``bound``, and
        ``static bound`` (the same with the whole budget, computed once) is at most ``bound``. Visiting types
        in static-bound order and stopping once it exceeds the best scores found gives exactly the moves a
        full scan would, without filling every type.
        """
        need, pods = self._need(counts)
        w = self.weights
        slack = 1e-12 * (pods + 1)
        prices = self.shared.prices
        types = self.types
        if len(need) == 3:
            # Unrolled: the same float operations in the same order as ``sum`` (left to right from 0).
            w0, w1, w2 = w
            n0, n1, n2 = need
            for static, j in self.static_order:
                b0, b1, b2 = types[j].budget
                cap = 0 + w0 * (b0 if b0 <= n0 else n0) + w1 * (b1 if b1 <= n1 else n1) + w2 * (b2 if b2 <= n2 else n2)
                yield static, prices[j] / (cap * (1 + 1e-9) + slack), j
            return
        for static, j in self.static_order:
            cap = sum(map(mul, w, map(min, types[j].budget, need)))
            yield static, prices[j] / (cap * (1 + 1e-9) + slack), j

    def best_move(self, counts: Sequence[int]) -> tuple[TypeInfo, Fill, float] | None:
        best: tuple[TypeInfo, Fill, float] | None = None
        best_key: tuple[float, float, int] | None = None
        shared = self.shared
        top = max(counts, default=0)
        filled = 0
        for static, bound, j in self._candidates(counts):
            if best_key is not None:
                if static > best_key[0]:
                    break
                if bound > best_key[0]:
                    continue
            if filled >= self.max_filled and best is not None:
                break
            fill = shared.fill(j, self.order, counts, top)
            if not fill:
                continue
            filled += 1
            value = sum(self.values[i] * k for i, k in fill)
            # Ties go to the type listed first (pareto order), as a scan in that order would choose.
            key = (shared.prices[j] / value, -value, j)
            if best_key is None or key < best_key:
                best, best_key = (self.types[j], fill, value), key
        return best

    def moves(self, counts: Sequence[int], limit: int) -> list[tuple[float, TypeInfo, Fill]]:
        """The ``limit`` best-scoring (price / value) fills of any type for ``counts``, best first (ties by
        type name, then FFD before the dot-product fill), as filling every type and sorting would give."""
        scored: list[tuple[float, str, int, int, TypeInfo, Fill]] = []
        kth = float("inf")
        shared = self.shared
        orders: tuple[tuple[int, ...] | None, ...] = (self.order, None) if self.small else (self.order,)
        top = max(counts, default=0)
        filled = 0
        for static, bound, j in self._candidates(counts):
            if static > kth:
                break
            if bound > kth:
                continue
            if filled >= self.max_filled and len(scored) >= limit:
                break
            t = self.types[j]
            filled += 1
            for n, order in enumerate(orders):
                fill = shared.fill(j, order, counts, top)
                if fill:
                    value = sum(self.values[i] * k for i, k in fill)
                    scored.append((shared.prices[j] / value, t.name, j, n, t, fill))
            if len(scored) >= 2 * limit or (kth == float("inf") and len(scored) >= limit):
                scored.sort(key=_move_key)
                del scored[limit:]
                kth = scored[-1][0]
        scored.sort(key=_move_key)
        return [(s[0], s[4], s[5]) for s in scored[:limit]]

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
        # The cheapest type holding ``need`` (at least one pod) is never dominated: scanning the pareto
        # types (cheapest first, ties by name) finds the same type as scanning all of them.
        for t in self.types:
            if all(map(le, need, t.budget)):
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


def pack(
    items: Sequence[Item],
    types: Sequence[TypeInfo],
    prices: dict[str, float],
    *,
    thorough: bool = True,
    front: Sequence[TypeInfo] | None = None,
) -> tuple[list[Bin], list[int]]:
    """Pack ``items`` onto new nodes of ``types`` at minimum total price.

    Args:
        items: pod classes (requests vectors in the pool's dimension order, counts).
        types: candidate instance types (budgets already net of daemonset overhead / target utilization).
        prices: type name -> USD/hour of the offering a launch would get.
        thorough: False skips the beam search on small problems (greedy, downsizing and pairwise merging
            only): the topology re-pack calls the packer once per NodeClaim and needs it cheap.
        front: :func:`pareto` of ``types`` under ``prices``, when the caller has it (None: computed here).

    Returns:
        (bins, leftover counts per item): pods of an item that fits no type stay in the leftovers.
    """
    if not items or not types:
        return [], [it.count for it in items]
    total_pods = sum(it.count for it in items)
    if total_pods == 1 and front is not None:
        # One pod needs one node: the cheapest type that fits it (the first such in the front, which is by
        # price then name, is the first such of all the types) is the optimum.
        idx = next(i for i, it in enumerate(items) if it.count)
        vec = items[idx].vec
        for t in front:
            if _fits(vec, t.budget):
                return [Bin(t, prices[t.name], ((idx, 1),))], [0] * len(items)
        return [], [it.count for it in items]
    best_bins: list[Bin] | None = None
    best_left: list[int] = []
    # Only types that fit at least one item matter for the greedy moves.
    if front is None:
        useful = [t for t in types if any(_fits(it.vec, t.budget) for it in items)]
        front = pareto(useful, prices)
    else:
        front = [t for t in front if any(_fits(it.vec, t.budget) for it in items)]
    shared = _Shared(items, front, prices)
    for mode in ("fit", "cpu", "memory"):
        problem = _Problem(items, shared, prices, mode)
        counts = [it.count for it in items]
        if total_pods <= SMALL_PROBLEM_PODS and thorough:
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
            if thorough:
                bins = _improve_tail(problem, bins)
        problem.downsize(bins)
        if total_pods <= SMALL_PROBLEM_PODS and thorough:
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
