"""Consolidation: remove underutilized nodes whose pods fit elsewhere, or replace them with a cheaper node.

**Multi-node** (Karpenter ``MultiNodeConsolidation``): candidates ordered by disruption cost, cut to what the
``Underutilized`` budgets allow, are searched for the longest prefix whose pods fit on the remaining nodes plus
at most one new node strictly cheaper than the prefix (binary search over the prefix length, as Karpenter's
``firstNConsolidationOption``, after one probe of the whole prefix; at least two nodes). Like Karpenter it
considers at most 100 candidates (``max_candidates``; above ``window`` the window doubles while whole windows
consolidate). Every probe is screened first (:mod:`nodewright.disruption.screen`: sums, then first-fit) and only
simulated when the screen passes.

Bounded blast radius and time (issue 30): a replacement may take at most ``max_replacement_pod_share`` of its
NodePool's pods (never less than :data:`REPLACEMENT_PODS_FLOOR`), and each search has a time budget on
``ConsolidationOptions.clock`` (Karpenter's ``MultiNodeConsolidationTimeoutDuration`` 1 min,
``SingleNodeConsolidationTimeoutDuration`` 3 min); when it runs out no further probe is simulated and multi-node
returns the best valid move it has (Karpenter's multi-node returns its last valid command on timeout), and the
pass reports the method in ``PassOutcome.stopped_early``. After Karpenter's search, :func:`_savings_search` tries
the candidates by descending price and keeps a move only when it saves strictly more.

Beyond Karpenter, when no prefix of the whole ordering consolidates, the same search runs over the candidates
of each NodePool and of each (NodePool, zone), each cut to the pool's budget: disruption-cost order interleaves
pools and zones, and one replacement node lives in one pool and one zone, so e.g. three nodes of a zone whose
pods carry a zone topology spread can only become one node *of that zone* -- a prefix mixing zones never fits.
These group searches share a bound of ``max_simulations`` full simulations per pass (and the time budget).

**Single-node** (Karpenter ``SingleNodeConsolidation``): each candidate in order; the first whose pods fit
elsewhere (delete) or on one strictly cheaper node (replace; spot-to-spot rules in
:mod:`nodewright.disruption.replacement`) wins. Screened likewise; at most ``max_simulations`` full
simulations per pass (a work bound) and ``single_node_timeout`` seconds (a timeout).

Balanced NodePools: an option found for candidates of a ``consolidationPolicy: Balanced`` pool is kept only when
its savings justify its disruption (:mod:`nodewright.disruption.balanced`, Karpenter v1.14's score); a rejected
option counts as no option, so the search moves on (shorter prefix, next candidate).

Prices and the minimum saving: every price of a search is the pass's :class:`~nodewright.disruption.pricing.
MovePricing` (list prices, or effective marginal prices under a PricingPolicy: ``ConsolidationOptions.pricing``).
An option whose saving is below the minimum of its candidates' NodePools (``nodewright.io/consolidation-minimum-
saving[-percent]``), or that saves nothing at effective prices, counts as no option and is recorded as a
:class:`~nodewright.disruption.pricing.Skip` (the controller's event); the screen drops, unsimulated, sets whose
best possible saving (the candidates' cost minus the cheapest replacement that could hold the leftover pods)
is not positive.

Target utilization: destinations are offered at ``target x allocatable`` (see
:mod:`nodewright.disruption.simulation`) and a node is a candidate only below ``target - hysteresis`` (see
:mod:`nodewright.disruption.candidates`), so provisioning packs to the target, consolidation never packs above
it, and a node filled to the target is not immediately "underutilized" again.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nodewright.api import labels as L
from nodewright.disruption.balanced import balanced_rejection
from nodewright.disruption.budgets import budget_mapping, within_budget
from nodewright.disruption.candidates import base_problem, by_disruption_cost, consolidation_problem
from nodewright.disruption.model import (
    MULTI_NODE,
    REASON_UNDERUTILIZED,
    SINGLE_NODE,
    ClusterView,
    Decision,
    Node,
)
from nodewright.disruption.pricing import MovePricing, Skip, move_threshold, pass_pricing
from nodewright.disruption.replacement import consolidation_replacements
from nodewright.disruption.screen import Screen, Vec, vec
from nodewright.disruption.simulation import Simulator
from nodewright.pricing.engine import MinimumSaving, MoveSaving
from nodewright.pricing.policy import PricingPolicy
from nodewright.scheduling import NodeClaimPlan, Requirements, SchedulingResult

#: Karpenter's ``MultiNodeConsolidation`` cap on the candidates one multi-node search considers.
KARPENTER_MULTI_NODE_CANDIDATES = 100
#: Karpenter's ``MultiNodeConsolidationTimeoutDuration`` and ``SingleNodeConsolidationTimeoutDuration``, seconds.
MULTI_NODE_TIMEOUT = 60.0
SINGLE_NODE_TIMEOUT = 180.0
#: Kubernetes' default kubelet ``maxPods``: a replacement may always take this many pods (see
#: :attr:`ConsolidationOptions.max_replacement_pod_share`).
REPLACEMENT_PODS_FLOOR = 110


@dataclass(frozen=True, slots=True)
class ConsolidationOptions:
    """Tunables of the consolidation methods.

    Attributes:
        window: first multi-node window (Karpenter: 100 candidates).
        max_candidates: the most candidates one multi-node search considers (Karpenter's cap, 100); above
            ``window`` the window doubles while whole windows consolidate.
        max_simulations: single-node full simulations per pass (a work bound; None: only the time budget).
        spot_to_spot: allow spot -> spot replacement (Karpenter feature gate ``SpotToSpotConsolidation``).
        pricing: the PricingPolicy in force (savings at effective marginal prices), or None (list prices).
        multi_node_timeout: seconds one multi-node search may run (Karpenter's 1 minute); when it runs out the
            best valid move found so far is returned and the search counts as timed out.
        single_node_timeout: the same for single-node consolidation (Karpenter's 3 minutes).
        clock: seconds, monotonic (``time.monotonic``); tests inject a fake one.
        max_replacement_pod_share: a replacement may take at most this share of its NodePool's pods (the pods
            bound to the pool's nodes now), but always :data:`REPLACEMENT_PODS_FLOOR`; its type's ``pods``
            capacity (kubelet ``maxPods``) bounds it anyway. None: no share bound.
        improve_simulations: simulations the savings search (:func:`multi_node_search`) may spend beyond
            Karpenter's prefix search, per pass.
    """

    window: int = KARPENTER_MULTI_NODE_CANDIDATES
    max_candidates: int = KARPENTER_MULTI_NODE_CANDIDATES
    max_simulations: int | None = 30
    spot_to_spot: bool = True
    pricing: PricingPolicy | None = field(default=None, compare=False)
    multi_node_timeout: float = MULTI_NODE_TIMEOUT
    single_node_timeout: float = SINGLE_NODE_TIMEOUT
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    max_replacement_pod_share: float | None = 0.1
    improve_simulations: int = 8


def underutilized_candidates(view: ClusterView, now: float) -> list[Node]:
    """Nodes passing every rule for ``Underutilized``, by ascending disruption cost."""
    out = []
    for node in view.nodes:
        if base_problem(node, view.pools, view.pdbs, REASON_UNDERUTILIZED) is not None:
            continue
        if consolidation_problem(node, view.pools[node.nodepool], now, REASON_UNDERUTILIZED) is not None:
            continue
        out.append(node)
    return by_disruption_cost(out, now)


#: Simulator -> its Screen: multi- and single-node consolidation of one pass screen over the same destinations,
#: so they share one (a Screen is read-only once built; building it sums every destination's pods).
_SCREENS: weakref.WeakKeyDictionary[Simulator, Screen] = weakref.WeakKeyDictionary()


#: Simulator -> (now, underutilized candidates): both consolidation methods of one pass start from the same list.
_CANDIDATES: weakref.WeakKeyDictionary[Simulator, tuple[float, list[Node]]] = weakref.WeakKeyDictionary()


def _candidates(view: ClusterView, now: float, simulator: Simulator) -> list[Node]:
    """``underutilized_candidates(view, now)``, computed once per simulator (one pass) and time."""
    if simulator.view is not view:
        return underutilized_candidates(view, now)
    hit = _CANDIDATES.get(simulator)
    if hit is None or hit[0] != now:
        hit = _CANDIDATES[simulator] = (now, underutilized_candidates(view, now))
    return list(hit[1])


def _screen(view: ClusterView, simulator: Simulator) -> Screen:
    if simulator.view is not view:
        return Screen(simulator.destinations, simulator.pools)
    screen = _SCREENS.get(simulator)
    if screen is None:
        screen = _SCREENS[simulator] = Screen(simulator.destinations, simulator.pools)
    return screen


class _Search:
    """Evaluates consolidation options for candidate sets: screen, then simulate, within a time budget.

    ``timeout`` seconds of ``options.clock`` from construction: once spent, :meth:`option` refuses to simulate
    (returns None) and :attr:`timed_out` is set, so every search loop winds down keeping the best valid option it
    already has (anytime search; Karpenter returns its last valid command when its timeout fires)."""

    def __init__(self, view: ClusterView, simulator: Simulator, options: ConsolidationOptions,
                 skipped: list[Skip] | None = None, timeout: float | None = None) -> None:
        self.view = view
        self.simulator = simulator
        self.options = options
        self.screen = _screen(view, simulator)
        self.pricing = pass_pricing(simulator, view, options.pricing)
        self.skipped = skipped if skipped is not None else []
        self.evaluated = 0
        self.deadline = None if timeout is None else options.clock() + timeout
        self.timed_out = False
        self.pod_caps = replacement_pod_caps(view, options)

    def expired(self) -> bool:
        """True (and :attr:`timed_out` set) once the time budget is spent."""
        if not self.timed_out and self.deadline is not None and self.options.clock() >= self.deadline:
            self.timed_out = True
        return self.timed_out

    def screened_out(self, candidates: Sequence[Node]) -> bool:
        """True when the screen proves (sums, first-fit + price floor) the set cannot consolidate, or (under a
        PricingPolicy) that removing it saves nothing. The minimum saving is judged on simulated options only,
        so every skip recorded is a proven move."""
        leftover = self.screen.place([p for c in candidates for p in c.pods], {c.name for c in candidates})
        if leftover is None:
            return False
        if not leftover:
            return self.pricing.effective and self.pricing.removed_cost(candidates) <= 0
        floor = self.screen.replacement_floor(leftover)
        return floor is None or self.pricing.floor(floor) >= self.pricing.removed_cost(candidates)

    def option(self, candidates: Sequence[Node], method: str) -> Decision | None:
        """The consolidation decision for exactly ``candidates``, or None (also when the time is up)."""
        if self.expired():
            return None
        self.evaluated += 1
        if self.screened_out(candidates):
            return None
        result = self.simulator.simulate(candidates, max_new=1, pricing=self.pricing.scheduler_pricing(candidates))
        return _judge(self.view, method, candidates, result, self.pricing, self.options, self.skipped,
                      self.pod_caps)


def replacement_pod_caps(view: ClusterView, options: ConsolidationOptions) -> dict[str, int] | None:
    """NodePool -> the most pods one replacement of that pool may take (see
    :attr:`ConsolidationOptions.max_replacement_pod_share`), or None when unbounded."""
    share = options.max_replacement_pod_share
    if share is None:
        return None
    pods: dict[str, int] = dict.fromkeys(view.pools, 0)
    for node in view.nodes:
        pods[node.nodepool] = pods.get(node.nodepool, 0) + len(node.pods)
    return {name: max(REPLACEMENT_PODS_FLOOR, math.ceil(share * count)) for name, count in pods.items()}


def _judge(view: ClusterView, method: str, candidates: Sequence[Node], result: SchedulingResult,
           pricing: MovePricing, options: ConsolidationOptions, skipped: list[Skip] | None,
           pod_caps: dict[str, int] | None = None) -> Decision | None:
    """The decision a simulation of ``candidates`` supports: a cheaper replacement (or none) taking no more pods
    than its pool's cap (``pod_caps``), a saving that clears the minimum of the candidates' pools (else a
    :class:`Skip` appended to ``skipped``), Balanced's approval."""
    replacements = consolidation_replacements(result, candidates, options.spot_to_spot,
                                              pool_requirements=pool_requirements(view), pricing=pricing)
    if replacements is None:
        return None
    if pod_caps is not None and any(len(p.pods) > pod_caps.get(p.nodepool, REPLACEMENT_PODS_FLOOR)
                                    for p in replacements):
        return None
    saving = pricing.move_saving(candidates, replacements)
    threshold = _threshold(view, candidates)
    if pricing.gated(threshold):
        why = threshold.shortfall(saving)
        if why is not None:
            if skipped is not None:
                skipped.append(_skip(method, candidates, replacements, saving, why))
            return None
    override = saving.usd_per_hour if pricing.effective else None
    if balanced_rejection(view, candidates, sum(p.price for p in replacements), savings=override) is not None:
        return None
    return Decision(method, REASON_UNDERUTILIZED, list(candidates), replacements=replacements, result=result,
                    saving=saving, effective=pricing.effective)


def _threshold(view: ClusterView, candidates: Sequence[Node]) -> MinimumSaving:
    """The minimum saving a move of ``candidates`` must clear (the strictest of their NodePools')."""
    return move_threshold(view.pools[name] for name in {c.nodepool for c in candidates})


def _skip(method: str, candidates: Sequence[Node], replacements: Sequence[NodeClaimPlan], saving: MoveSaving,
          why: str) -> Skip:
    return Skip(method, tuple(sorted({c.nodepool for c in candidates})), tuple(c.name for c in candidates),
                replacements[0].instance_type.name if replacements else None, saving, why)


def pool_requirements(view: ClusterView) -> dict[str, Requirements]:
    """NodePool name -> requirements (what a replacement's ``minValues`` are counted over)."""
    return {name: pool.spec.requirements for name, pool in view.pools.items()}


def _prefix_sums(candidates: Sequence[Node], screen: Screen) -> tuple[list[Vec], list[Vec]]:
    need: list[Vec] = [(0, 0, 0)]
    lost: list[Vec] = [(0, 0, 0)]
    for c in candidates:
        n = vec({})
        for p in c.pods:
            r = vec(p.requests)
            n = (n[0] + r[0], n[1] + r[1], n[2] + r[2])
        a, b, f = need[-1], lost[-1], screen.node_free(c.name)
        need.append((a[0] + n[0], a[1] + n[1], a[2] + n[2]))
        lost.append((b[0] + f[0], b[1] + f[1], b[2] + f[2]))
    return need, lost


def multi_node(view: ClusterView, now: float, simulator: Simulator,
               options: ConsolidationOptions | None = None) -> Decision | None:
    """The largest multi-node consolidation of this pass, or None (see module docstring)."""
    return multi_node_search(view, now, simulator, options)[0]


def multi_node_search(view: ClusterView, now: float, simulator: Simulator,
                      options: ConsolidationOptions | None = None,
                      skipped: list[Skip] | None = None) -> tuple[Decision | None, bool]:
    """:func:`multi_node`'s decision, and whether its time budget (``multi_node_timeout``) ran out before the
    search was done (Karpenter's multi-node consolidation timeout; the decision is then the best valid move found
    so far). Moves skipped for their saving are appended to ``skipped``.

    The search (see module docstring): Karpenter's longest consolidating prefix of the candidates by disruption
    cost, cut to the budgets and to ``max_candidates``; when none, the per-pool and per-(pool, zone) groups; then
    :func:`_savings_search`, which keeps a move only when it saves strictly more than the one found."""
    opts = options or ConsolidationOptions()
    allowed = budget_mapping(view.pools, view.nodes, REASON_UNDERUTILIZED, now)
    ordered = _candidates(view, now, simulator)
    candidates = within_budget(ordered, allowed)[: opts.max_candidates]
    search = _Search(view, simulator, opts, skipped, opts.multi_node_timeout)
    best = _largest_prefix(candidates, search, opts)
    if best is None:
        best = _largest_group_prefix(ordered, allowed, candidates, search, opts)
    best = _savings_search(ordered, allowed, best, search, opts)
    if best is not None:
        best.evaluated = search.evaluated
    return best, search.timed_out


def _better(a: Decision | None, b: Decision | None) -> Decision | None:
    """The option saving more (``a`` on ties, and when ``b`` is None)."""
    if b is None or (a is not None and b.savings <= a.savings + 1e-9):
        return a
    return b


def _savings_search(ordered: Sequence[Node], allowed: dict[str, int], best: Decision | None, search: _Search,
                    opts: ConsolidationOptions) -> Decision | None:
    """Beyond Karpenter: disruption-cost order puts the nodes with the fewest pods first, which are often the
    cheapest, so its longest prefix can save a fraction of what the budgets allow. Within ``improve_simulations``
    more simulations (and the time budget) this tries the candidates by descending price (ties: disruption-cost
    order), cut to the budgets and ``max_candidates``: their longest consolidating prefix, then, greedily, adding
    each further candidate to the best set while it still consolidates and saves more. A set is simulated only
    when its price (what removing it could save at most) beats the best saving so far, and the screen passes it.
    The move returned saves at least as much as ``best``."""
    by_price = within_budget(sorted(ordered, key=lambda n: -n.price), allowed)[: opts.max_candidates]
    if not by_price or opts.improve_simulations <= 0:
        return best
    limit = search.simulator.calls + opts.improve_simulations
    cost = search.pricing.removed_cost

    def affordable() -> bool:
        return search.simulator.calls < limit and not search.expired()

    if len(by_price) >= 2 and affordable():
        need, lost = _prefix_sums(by_price, search.screen)
        feasible = max((k for k in range(len(by_price) + 1) if search.screen.aggregate_fits(need[k], lost[k])),
                       default=0)
        lo, hi = 2, feasible
        if lo <= hi and (best is None or cost(by_price[:hi]) > best.savings + 1e-9):
            option = search.option(by_price[:hi], MULTI_NODE)  # the whole list first, as _binary_search
            if option is not None:
                best, lo = _better(best, option), hi + 1
            else:
                hi -= 1
        while lo <= hi and affordable():
            mid = (lo + hi) // 2
            if best is not None and cost(by_price[:mid]) <= best.savings + 1e-9:
                lo = mid + 1  # cannot beat best: try more nodes
                continue
            option = search.option(by_price[:mid], MULTI_NODE)
            if option is not None:
                best, lo = _better(best, option), mid + 1
            else:
                hi = mid - 1
    chosen = list(best.candidates) if best is not None else []
    names = {c.name for c in chosen}
    used: dict[str, int] = {}
    for c in chosen:
        used[c.nodepool] = used.get(c.nodepool, 0) + 1
    for node in by_price:
        if not affordable() or len(chosen) >= opts.max_candidates:
            break
        if node.name in names or used.get(node.nodepool, 0) >= allowed.get(node.nodepool, 0):
            continue
        trial = [*chosen, node]
        if best is not None and cost(trial) <= best.savings + 1e-9:
            continue
        if len(trial) < 2:
            continue  # a single node is single-node consolidation's
        option = search.option(trial, MULTI_NODE)
        if option is not None and _better(best, option) is option:
            best, chosen = option, trial
            names.add(node.name)
            used[node.nodepool] = used.get(node.nodepool, 0) + 1
    return best


def _largest_prefix(candidates: Sequence[Node], search: _Search, opts: ConsolidationOptions) -> Decision | None:
    """The longest consolidating prefix of ``candidates`` (at least two), windowed and doubled, or None."""
    if len(candidates) < 2:
        return None
    need, lost = _prefix_sums(candidates, search.screen)
    # Longest prefix passing the sums (a necessary condition, monotone in the prefix length).
    feasible = max((k for k in range(len(candidates) + 1) if search.screen.aggregate_fits(need[k], lost[k])),
                   default=0)
    best: Decision | None = None
    lo, window = 2, min(opts.window, len(candidates))
    while True:
        hi = min(window, feasible)
        found = _binary_search(candidates, lo, hi, search)
        if found is not None:
            best = found
        covered = best is not None and len(best.candidates) == window
        if not covered or window >= len(candidates) or window >= feasible:
            break
        lo, window = window + 1, min(window * 2, len(candidates))
    return best


def _groups(ordered: Sequence[Node]) -> list[list[Node]]:
    """``ordered`` split by NodePool, then by (NodePool, zone), each keeping the order; largest first."""
    by_key: dict[tuple[str, ...], list[Node]] = {}
    for node in ordered:
        by_key.setdefault((node.nodepool,), []).append(node)
    for node in ordered:
        by_key.setdefault((node.nodepool, node.labels.get(L.ZONE, "")), []).append(node)
    return sorted(by_key.values(), key=len, reverse=True)  # stable: pool groups before their zone groups


def _largest_group_prefix(ordered: Sequence[Node], allowed: dict[str, int], tried: Sequence[Node],
                          search: _Search, opts: ConsolidationOptions) -> Decision | None:
    """The best (most nodes, then most $/h saved) consolidating prefix of a pool or pool-zone group, trying
    groups until ``max_simulations`` simulations were spent or the time is up (see module docstring)."""
    simulator, start = search.simulator, search.simulator.calls
    seen = {tuple(c.name for c in tried)}
    best: Decision | None = None
    for group in _groups(ordered):
        members = within_budget(group, allowed)[: opts.max_candidates]
        key = tuple(c.name for c in members)
        if len(members) < 2 or key in seen:
            continue
        if opts.max_simulations is not None and simulator.calls - start >= opts.max_simulations:
            break
        if search.expired():
            break
        seen.add(key)
        found = _largest_prefix(members, search, opts)
        if found is not None and (best is None or (len(found.candidates), found.savings)
                                  > (len(best.candidates), best.savings)):
            best = found
    return best


def _binary_search(candidates: Sequence[Node], lo: int, hi: int, search: _Search) -> Decision | None:
    """Largest k in [lo, hi] with a valid option for ``candidates[:k]`` (Karpenter's binary search), trying
    ``hi`` first: at scale the budgets, not the room, usually bound the move, and then one simulation decides.
    When ``hi`` fails the binary search runs as Karpenter's over the same range (so it finds what Karpenter's
    finds, where prefixes are not monotone too) without simulating ``hi`` again."""
    if lo > hi:
        return None
    first = search.option(candidates[:hi], MULTI_NODE)
    if first is not None:
        return first
    best: Decision | None = None
    top = hi
    while lo <= hi:
        mid = (lo + hi) // 2
        option = None if mid == top else search.option(candidates[:mid], MULTI_NODE)
        if option is not None:
            best, lo = option, mid + 1
        else:
            hi = mid - 1
    return best


def single_node(view: ClusterView, now: float, simulator: Simulator,
                options: ConsolidationOptions | None = None) -> Decision | None:
    """The first candidate that can be deleted or replaced by one cheaper node, or None."""
    return single_node_search(view, now, simulator, options)[0]


def single_node_search(view: ClusterView, now: float, simulator: Simulator,
                       options: ConsolidationOptions | None = None,
                       skipped: list[Skip] | None = None) -> tuple[Decision | None, bool]:
    """:func:`single_node`'s decision, and whether its time budget (``single_node_timeout``) ran out with
    candidates left untried (Karpenter's single-node consolidation timeout). ``max_simulations`` bounds the
    simulations of one pass too (a work bound, not a timeout). Moves skipped for their saving are appended to
    ``skipped``."""
    opts = options or ConsolidationOptions()
    allowed = budget_mapping(view.pools, view.nodes, REASON_UNDERUTILIZED, now)
    candidates = [c for c in _candidates(view, now, simulator) if allowed.get(c.nodepool, 0) > 0]
    search = _Search(view, simulator, opts, skipped, opts.single_node_timeout)
    start = simulator.calls
    for candidate in candidates:
        if opts.max_simulations is not None and simulator.calls - start >= opts.max_simulations:
            return None, False
        option = search.option([candidate], SINGLE_NODE)
        if search.timed_out:
            return None, True
        if option is not None:
            option.evaluated = search.evaluated
            return option, False
    return None, False


def validate_consolidation(decision: Decision, nodes: list[Node], view: ClusterView, now: float,
                           options: ConsolidationOptions) -> Decision | None:
    """Multi- or single-node consolidation re-checked on a fresh view: every candidate still consolidatable,
    the pods still fit (re-simulated), the decision still clears the minimum saving and saves at least as much
    as when it was made (at the prices in force now)."""
    if any(consolidation_problem(n, view.pools[n.nodepool], now, REASON_UNDERUTILIZED) is not None for n in nodes):
        return None
    pricing = MovePricing(view, options.pricing)
    result = Simulator(view).simulate(nodes, max_new=1, pricing=pricing.scheduler_pricing(nodes))
    fresh = _judge(view, decision.method, nodes, result, pricing, options, None, replacement_pod_caps(view, options))
    if fresh is None:
        return None
    fresh.evaluated = decision.evaluated
    # A decision that now needs a replacement where it needed none (or a dearer one) is a different decision.
    if fresh.savings + 1e-9 < decision.savings:
        return None
    return fresh
