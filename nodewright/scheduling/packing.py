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
cheapest type holding a node's pods is never dominated). The beam search is bounded by the greedy plan's price
(a state whose cost plus estimate exceeds it is dropped: the estimate is a lower bound), and a type holding every
remaining pod fills with all of them without a scan.

Under ties (prices linear in the resources, issue 30: every score bound ties, so nothing prunes) a move search
fills at most :data:`~.fronts.MAX_FILLED_TYPES` types and groups of more than :data:`TIE_ONE_WEIGHTING_PODS` pods
try only the fitted weighting: bounded work where options are equivalent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import le, mul

from nodewright.scheduling.fills import Item, _dot_fill, _dot_fill3, _dot_fill_any, _ffd
from nodewright.scheduling.fronts import MAX_FILLED_TYPES, linear_prices, pareto
from nodewright.scheduling.nodeclaimtemplate import TypeInfo, Vector

__all__ = ["Item", "_dot_fill", "_dot_fill3", "_dot_fill_any", "_ffd", "pack", "pareto"]  # re-exported

BEAM_WIDTH = 8
SMALL_PROBLEM_PODS = 64
TAIL_BINS = 6
MAX_CACHED_FILLS = 50_000
#: Under linear prices (:func:`~.fronts.linear_prices`) a group of more than this many pods tries only the fitted
#: weighting: there the fit is the price model, and the cpu-only / memory-only searches (each a full beam or
#: greedy pass) were never cheaper on the benchmark's 40- and 100-pod batches (issue 30; docs/benchmarks.md).
TIE_ONE_WEIGHTING_PODS = 16


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
        #: Per type (computed when the type is first filled: a search under ties visits few of the front's
        #: ~300 types), how many pods of each item fit it alone, and the smallest of those: counts all at most
        #: that are their own capped counts.
        self.caps: list[list[int] | None] = [None] * len(types)
        self.floor: list[int] = [-1] * len(types)
        self.fills: dict[tuple[object, ...], Fill] = {}
        self.linear: bool | None = None  # prices linear in the resources (fronts.linear_prices): 1st problem

    def fill(
        self, j: int, order: tuple[int, ...] | None, counts: Sequence[int], top: int | None = None,
        need: Sequence[int] | None = None,
    ) -> Fill:
        """FFD fill of type ``j`` in ``order`` (None: the dot-product fill), cached. ``top``: ``max(counts)``
        (the caller's, computed once for all types), or None; ``need``: the summed requests of ``counts``,
        or None. When the type holds them all, any fill takes every pod (issue 30: under ties large types
        are filled with the whole remainder at every beam state): that fill is returned without a scan."""
        caps = self.caps[j]
        if caps is None:
            caps = self.caps[j] = _caps(self.types[j].budget, self.items)
            self.floor[j] = min(caps, default=0)
        if top is not None and top <= self.floor[j]:
            if need is not None and all(map(le, need, self.types[j].budget)):
                return [(i, counts[i]) for i in (range(len(counts)) if order is None else order) if counts[i] > 0]
            capped = counts if type(counts) is tuple else tuple(counts)  # no cap lowers them
        else:
            capped = tuple([c if c < m else m for c, m in zip(counts, caps, strict=True)])
        key = (j, order, capped)
        found = self.fills.get(key)
        if found is None:
            budget = self.types[j].budget
            found = _dot_fill(budget, self.items, capped) if order is None else _ffd(budget, order, self.items, capped)
            if len(self.fills) >= MAX_CACHED_FILLS:
                self.fills.clear()  # bounds memory on batches of many shapes, where reuse is rare anyway
            self.fills[key] = found
        return found


def _caps(budget: Vector, items: Sequence[Item]) -> list[int]:
    """How many pods of each item fit ``budget`` alone (1 << 62 for an item requesting nothing)."""
    big = 1 << 62
    if len(budget) == 3:  # unrolled (the usual cpu, memory, pods): the same minimum
        b0, b1, b2 = budget
        out = []
        for it in items:
            v0, v1, v2 = it.vec
            out.append(min(b0 // v0 if v0 > 0 else big, b1 // v1 if v1 > 0 else big, b2 // v2 if v2 > 0 else big))
        return out
    return [min((b // v for b, v in zip(budget, it.vec, strict=True) if v > 0), default=big) for it in items]


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
            fit = w if mode == "fit" else _fit_weights(self.types, prices, self.dims, "fit")
            shared.linear = linear_prices(self.types, shared.prices, fit)
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

    def _candidates(self, need: Sequence[int], pods: int) -> Iterator[tuple[float, float, int]]:
        """Yield (static bound, bound, j) for the types in static-bound order; see :meth:`moves`.

        A fill's value is at most the weighted sum, per dimension, of the smaller of the type's budget and the
        remaining pods' total need, so no fill of type j scores (price / value) below ``bound``, and
        ``static bound`` (the same with the whole budget, computed once) is at most ``bound``. Visiting types
        in static-bound order and stopping once it exceeds the best scores found gives exactly the moves a
        full scan would, without filling every type.
        """
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
        need, pods = self._need(counts)
        filled = 0
        for static, bound, j in self._candidates(need, pods):
            if best_key is not None:
                if static > best_key[0]:
                    break
                if bound > best_key[0]:
                    continue
            if filled >= self.max_filled and best is not None:
                break
            fill = shared.fill(j, self.order, counts, top, need)
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
        need, pods = self._need(counts)
        filled = 0
        for static, bound, j in self._candidates(need, pods):
            if static > kth:
                break
            if bound > kth:
                continue
            if filled >= self.max_filled and len(scored) >= limit:
                break
            t = self.types[j]
            filled += 1
            for n, order in enumerate(orders):
                fill = shared.fill(j, order, counts, top, need)
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

    def beam(self, counts: list[int], incumbent: float | None = None) -> list[Bin]:
        """Beam search (:data:`BEAM_WIDTH` states, ranked by cost so far plus :meth:`remaining_estimate`) for
        ``counts``; the cheapest finished plan (ties: fewer nodes), [] when none.

        ``incumbent``: the USD/hour of a plan the caller already has (only every pod placeable by some type).
        A state whose cost plus estimate -- a lower bound of any completion: each node costs at least
        ``best_rate`` times the value it holds -- exceeds it cannot finish at or under it, nor can its
        children (the bound only grows along a path), so it is dropped. The states kept are the prefix of the
        ranking under the incumbent, as without it: every plan at most the incumbent is found as before, and
        when none is, [] is returned (issue 30: under linear prices most states fall out after a node or two).
        """
        limit = None if incumbent is None else incumbent * (1 + 1e-9) + 1e-9
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
                        bound = new_cost + self.remaining_estimate(nxt)
                        if limit is None or bound <= limit:
                            children.append((bound, new_cost, tuple(nxt), new_bins))
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
    # Every item fits some type: then every pod is placed and the beam's estimate is a lower bound.
    placeable = all(any(_fits(it.vec, t.budget) for t in front) for it in items)
    for mode in ("fit", "cpu", "memory"):
        if mode != "fit" and shared.linear and total_pods > TIE_ONE_WEIGHTING_PODS:
            break
        problem = _Problem(items, shared, prices, mode)
        counts = [it.count for it in items]
        if total_pods <= SMALL_PROBLEM_PODS and thorough:
            greedy_bins = problem.greedy(list(counts))
            # The greedy plan bounds the beam when it places every pod (then the beam, bounded or not, is kept
            # only when it is at most that price: the same choice).
            bins = problem.beam(list(counts), _cost(greedy_bins) if placeable else None)
            if not bins:
                bins = greedy_bins
            placed = _placed(bins, len(items))
            left = [c - p for c, p in zip(counts, placed, strict=True)]
            if _placed(greedy_bins, len(items)) == placed and (round(_cost(greedy_bins), 9), len(greedy_bins)) < (
                round(_cost(bins), 9),
                len(bins),
            ):
                bins = greedy_bins
        else:
            bins = problem.greedy(counts)
            left = counts
            if thorough:
                bins = _improve_tail(problem, bins, placeable)
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


def _improve_tail(problem: _Problem, bins: list[Bin], placeable: bool = False) -> list[Bin]:
    """Re-solve the pods of the last few nodes with beam search; keep it when cheaper (``placeable``: every
    item fits some type, so the tail's price bounds the search, :meth:`_Problem.beam`)."""
    if len(bins) < 2:
        return bins
    start = max(0, len(bins) - TAIL_BINS)
    tail = bins[start:]
    counts = _placed(tail, len(problem.items))
    if sum(counts) > 4 * SMALL_PROBLEM_PODS:
        return bins
    alt = problem.beam(list(counts), _cost(tail) if placeable else None)
    if _placed(alt, len(problem.items)) == counts and _cost(alt) < _cost(tail):
        return bins[:start] + alt
    return bins
