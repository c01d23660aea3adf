"""One node's fill: which of a packing problem's pods (classes of identical pods, :class:`Item`) one node of a
given budget takes, first-fit decreasing (:func:`_ffd`) or pod by pod best aligned with the room left
(:func:`_dot_fill`). :mod:`~.packing` scores these fills; it re-exports the names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import le, mul
from typing import Any

from nodewright.scheduling.typeinfo import Vector


@dataclass(frozen=True, slots=True)
class Item:
    """A class of identical pods: requests vector and how many."""

    vec: Vector
    count: int


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
