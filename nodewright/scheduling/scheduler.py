"""The scheduler: pending pods + cluster state + NodePools + instance types -> NodeClaims to create.

Order and placement follow Karpenter's provisioning scheduler (``scheduler.go``):

1. Pods are queued by cpu request, then memory request, descending.
2. Each pod tries existing nodes (initialized first, then in-flight ones; :mod:`~nodewright.scheduling.existingnode`),
   then NodeClaims already opened in this batch, then a new NodeClaim from the NodePools by weight descending,
   then name (:mod:`~nodewright.scheduling.nodeclaim`). A NodeClaim keeps every instance type that is compatible
   with its pods' requirements and still fits their summed requests plus the overhead of the DaemonSets that type
   runs (:mod:`~nodewright.scheduling.daemonsets`), whose host ports its pods may not use.
3. A pod that fails everywhere relaxes one soft constraint (:mod:`~nodewright.scheduling.preferences`) and is
   requeued; the loop ends when a full pass over the queue makes no progress.
4. New NodeClaims list their candidate types by cheapest compatible offering, at most 60, honouring
   ``minValues``; the launch most likely gets the first. Spot is preferred over on-demand when both are allowed.

With ``optimize`` (nodewright's additions), topology-free pods skip the one-by-one loop
(:mod:`~nodewright.scheduling.freepods`: existing nodes, then spare room, then cost-optimal packing) and the
loop's NodeClaims are re-packed into cheaper ones where no constraint can break
(:mod:`~nodewright.scheduling.repack`). The stages run in the order of :data:`OPTIMIZED` (or :data:`GREEDY`).

Equivalence classes (identical replicas) share requirement, compatibility and topology work, and each class
remembers which nodes/NodeClaims can never take it again (taints, requirements, resources, hostname spread /
anti-affinity counts: all monotonic), so a batch of 20,000 pods does not cost 20,000 scans.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from nodewright.cloud.instancetype import InstanceType
from nodewright.quantities import CPU, MEMORY, PODS, Resources
from nodewright.scheduling import events
from nodewright.scheduling.cache import SchedulingCache
from nodewright.scheduling.daemonsets import (
    LIFECYCLE_LABELS,
    DaemonGroup,
    PoolDaemons,
    daemon_terms,
    runs_on_node,
)
from nodewright.scheduling.existingnode import ExistingNodeState
from nodewright.scheduling.freepods import ambiguous_ports, fill_claims, fill_existing, pack_free
from nodewright.scheduling.minvalues import BEST_EFFORT
from nodewright.scheduling.nodeclaim import NodeClaim
from nodewright.scheduling.nodeclaimtemplate import (
    NodeClaimTemplate,
    Pricing,
    PricingFactory,
    TypeInfo,
    hosting,
)
from nodewright.scheduling.nodepools import NodePoolSpec
from nodewright.scheduling.nodes import ExistingNode
from nodewright.scheduling.orterms import use_or_terms
from nodewright.scheduling.pods import HostPort, Pod
from nodewright.scheduling.preferences import IGNORE_PREFERENCES, PodClass, pod_classes
from nodewright.scheduling.repack import repack_topology
from nodewright.scheduling.requirements import Requirements
from nodewright.scheduling.reservations import RESERVATION_EXHAUSTED, hold_reservations
from nodewright.scheduling.result import SchedulingEvent, SchedulingResult
from nodewright.scheduling.taints import PREFER_NO_SCHEDULE
from nodewright.scheduling.topology import Topology, blocked, hostname_blockers

_Taker = TypeVar("_Taker", ExistingNodeState, NodeClaim)


@dataclass(slots=True)
class _Live:
    """What one class may still use: the nodes (None: all) and NodeClaims not ruled out for good yet, and how
    many of the run's NodeClaims it has looked at."""

    nodes: list[ExistingNodeState] | None = None
    claims: list[NodeClaim] = field(default_factory=list)
    claims_seen: int = 0


class Scheduler:
    """State of one scheduling pass: the queue, the NodeClaims opened, the existing nodes, the topology."""

    def __init__(
        self,
        pods: Sequence[Pod],
        nodes: Sequence[ExistingNode],
        nodepools: Sequence[NodePoolSpec],
        instance_types: Mapping[str, Sequence[InstanceType]],
        daemonsets: Iterable[Pod] | None,
        max_new: int | None,
        allowed: Collection[str] | None,
        optimize: bool,
        pricing: Pricing | None = None,
        relax_min_values: bool = False,
        cache: SchedulingCache | None = None,
        ignore_preferences: bool = False,
        strict_reservations: bool = False,
    ) -> None:
        self.result = SchedulingResult()
        self.pod_count = len(pods)
        self.strict_reservations = strict_reservations
        self.pricing = pricing
        self.relax_min_values = relax_min_values
        self.event(events.found(len(pods)))
        self.max_new = max_new
        ds = list(daemonsets) if daemonsets is not None else None
        # Which DaemonSets each pool's types run; a pool built without its DaemonSet pods (by hand) carries its
        # daemonset_overhead on every type.
        daemons: dict[str, PoolDaemons | None] = {
            np.name: np.daemons(ds) if ds is not None or np.daemonsets else None for np in nodepools
        }
        overheads = {np.name: d.overhead() if (d := daemons[np.name]) else np.daemonset_overhead for np in nodepools}
        names: set[str] = set()
        for p in pods:
            names.update(p.requests)
        for o in overheads.values():
            names.update(o)
        self.dims = [CPU, MEMORY, PODS] + sorted(names - {CPU, MEMORY, PODS})
        ordered = sorted(nodepools, key=lambda n: (-n.weight, n.name))
        build = NodeClaimTemplate if cache is None else cache.template
        self.templates = [
            build(np, i, instance_types.get(np.name, ()), self.dims, overheads[np.name], pricing,
                  daemons=daemons[np.name])
            for i, np in enumerate(ordered)
            if allowed is None or np.name in allowed
        ]
        self.prefer_no_schedule = any(t.effect == PREFER_NO_SCHEDULE for p in self.templates for t in p.taints)
        self.topology = Topology()
        self.claims: list[NodeClaim] = []
        self.limit_logged: set[str] = set()
        #: NodePool -> NodeClaims whose options were narrowed to leave room under its limits.
        self.narrowed: dict[str, int] = {}
        #: NodePool -> indexes of the pod classes its limits turned away (every compatible type excluded).
        self.limit_refused: dict[str, set[int]] = {}
        #: class index -> NodeClaims open when narrowing them last failed to make room for it.
        self.tighten_failed: dict[int, int] = {}
        #: Set by the re-pack stage when it replaced a NodeClaim of the loop.
        self.repacked = False
        self.live: dict[int, _Live] = {}
        # Existing nodes: initialized first (Karpenter), skipping nodes that cannot take pods.
        usable = [n for n in nodes if not n.marked_for_deletion and not n.unschedulable]
        usable.sort(key=lambda n: (not n.initialized, n.name))
        self.nodes: list[ExistingNodeState] = []
        memo: dict[Hashable, Any] = {}
        for i, n in enumerate(usable):
            # Every node keeps room for the DaemonSets that should run on it (ExistingNodeState subtracts those
            # running); an in-flight node none of them runs on yet also holds their host ports.
            daemon_requests, ports = _node_daemons(n, ds, daemons, overheads, memo)
            if n.initialized or any(p.is_daemonset for p in n.pods):
                ports = ()
            self.nodes.append(ExistingNodeState(n, i, self.dims, daemon_requests, ports))
        self.classes = pod_classes(pods, self.dims, ignore_preferences)
        self.topology.register(self.classes, nodes)
        self.topology.init_universes(self.classes, self.templates, self.nodes)
        self._queue(pods, optimize)

    def _queue(self, pods: Sequence[Pod], optimize: bool) -> None:
        """Split the pods, in queue order (cpu, then memory, descending), into the Karpenter loop's queue and
        (with ``optimize``) the free classes, each holding its pending pods as a stack popped from the end."""
        self.class_of: dict[int, PodClass] = {}
        for cls in self.classes:
            for p in cls.pods:
                self.class_of[id(p)] = cls
            cls.pods = []
        self.queue: deque[tuple[PodClass, Pod]] = deque()
        self.free: list[PodClass] = []
        self.ambiguous = ambiguous_ports(pods)
        for pod in sorted(pods, key=lambda p: (-p.requests.get(CPU, 0), -p.requests.get(MEMORY, 0))):
            cls = self.class_of[id(pod)]
            if optimize and cls.is_free(self.ambiguous):
                if not cls.pods:
                    self.free.append(cls)
                cls.pods.append(pod)
            else:
                self.queue.append((cls, pod))
        for cls in self.free:
            cls.pods.reverse()

    # --- shared by the stages ----------------------------------------------------------------------------
    def event(self, event: SchedulingEvent) -> None:
        """Record one of Karpenter's sentences (see :mod:`nodewright.scheduling.events`)."""
        self.result.events.append(event)

    def within_limits(self, template: NodeClaimTemplate, types: list[TypeInfo]) -> list[TypeInfo]:
        """``types`` a launch from ``template`` may use without breaching its limits; says once per NodePool how
        many were excluded."""
        kept = template.limited(types)
        if len(kept) != len(types) and template.name not in self.limit_logged:
            self.limit_logged.add(template.name)
            self.event(events.limits_excluded(len(types) - len(kept), len(types), template.name))
        return kept

    def hosting(
        self, cls: PodClass, reasons: list[str]
    ) -> Iterator[tuple[NodeClaimTemplate, Requirements, list[TypeInfo]]]:
        """The templates that can host a pod of ``cls``, in order (see :func:`~.nodeclaimtemplate.hosting`); a
        template whose limits exclude every compatible type remembers ``cls`` (:attr:`limit_refused`)."""
        def within(template: NodeClaimTemplate, types: list[TypeInfo]) -> list[TypeInfo]:
            kept = self.within_limits(template, types)
            if types and not kept:
                self.limit_refused.setdefault(template.name, set()).add(cls.index)
            return kept

        return hosting(self.templates, cls, reasons, within, self.relax_min_values)

    def relax(self, cls: PodClass, pod: str) -> bool:
        """Relax one preference of ``cls`` (Karpenter's order), after a pod of it (``pod``, its key) found no
        place; False when none is left. The class then looks at every node and NodeClaim again."""
        removed = cls.relax(self.topology, self.prefer_no_schedule)
        if removed is None:
            return False
        self.live.pop(cls.index, None)
        self.topology.refresh_universes(cls, self.templates, self.nodes)
        self.event(events.relaxing(removed, pod))
        return True

    # --- the Karpenter loop ------------------------------------------------------------------------------
    def run_queue(self) -> None:
        """Place the queued pods one by one; a pod that fits nowhere relaxes a preference and is requeued. Ends
        when a whole pass over the queue places nothing and relaxes nothing."""
        queue = self.queue
        stalled = 0
        failed_at: dict[int, int] = {}
        version = 0
        while queue and stalled < len(queue):
            cls, pod = queue.popleft()
            cls.pods.append(pod)  # the class's pending stack: placing pops it back off
            if failed_at.get(cls.index) == version:
                cls.pods.pop()
                queue.append((cls, pod))
                stalled += 1
                continue
            reasons: list[str] = []
            if self.place_one(cls, reasons):
                version += 1
                stalled = 0
                continue
            cls.pods.pop()
            if self.relax(cls, pod.key):
                version += 1
                stalled = 0
            else:
                cls.reason = "; ".join(dict.fromkeys(reasons)) or "no NodePool can host it"
                failed_at[cls.index] = version
                stalled += 1
            queue.append((cls, pod))
        for cls, pod in queue:
            self.result.unschedulable[pod.key] = cls.reason or "no NodePool can host it"

    def place_one(self, cls: PodClass, reasons: list[str]) -> bool:
        """Place the next pod of ``cls``: an existing node, else an open NodeClaim, else a new NodeClaim."""
        live = self.live.get(cls.index)
        if live is None:
            live = self.live[cls.index] = _Live()
        placed, live.nodes = self._first_taker(cls, live.nodes if live.nodes is not None else self.nodes)
        if placed:
            return True
        live.claims.extend(self.claims[live.claims_seen:])
        live.claims_seen = len(self.claims)
        blockers = hostname_blockers(cls)
        # A cheap, exact shortcut of can_add's permanent hostname verdict.
        skip = (lambda claim: blocked(blockers, claim.hostname)) if blockers else None
        placed, live.claims = self._first_taker(cls, live.claims, skip)
        if placed:
            return True
        return self.new_claim(cls, reasons)

    def _first_taker(
        self, cls: PodClass, candidates: Sequence[_Taker], skip: Callable[[_Taker], bool] | None = None
    ) -> tuple[bool, list[_Taker]]:
        """Give the next pod of ``cls`` to the first of ``candidates`` (nodes or NodeClaims) that takes it:
        (placed, the candidates not ruled out for ``cls`` for good, those after the taker included)."""
        kept: list[_Taker] = []
        for i, candidate in enumerate(candidates):
            if skip is not None and skip(candidate):
                continue
            change, permanent = candidate.can_add(cls)
            if change is not None:
                candidate.add(cls, change, self.topology)
                kept.extend(candidates[i:])
                return True, kept
            if not permanent:
                kept.append(candidate)
        return False, kept

    def new_claim(self, cls: PodClass, reasons: list[str]) -> bool:
        """Open a NodeClaim for one pod of ``cls`` from the first NodePool (by weight, name) that can host it.

        When none can, the open NodeClaims of pools with limits are narrowed to what their cheapest fitting type
        takes (:meth:`~.nodeclaim.NodeClaim.tighten`) and the pod tries again (nodewright's addition); if it still
        finds no place, the narrowing is undone (Karpenter leaves the pod pending)."""
        if self._open_claim(cls, reasons):
            return True
        limited = {t.name for t in self.templates if t.remaining is not None}
        if not limited or self.tighten_failed.get(cls.index) == len(self.claims):
            return False
        claims = [c for c in self.claims if c.template.name in limited and not c.tight]
        saved = [(c, c.types, c.ptr, c.reserved, c.final) for c in claims]
        remaining = {t.name: dict(t.remaining) for t in self.templates if t.remaining is not None}
        tightened = {id(c) for c in claims if c.tighten()}
        opened = bool(tightened) and self._open_claim(cls, [])
        # Keep the narrowing only in the pool that took the pod.
        keep = self.claims[-1].template.name if opened else None
        for c, types, ptr, reserved, final in saved:
            if id(c) not in tightened:
                continue
            if c.template.name == keep:
                self.narrowed[keep] = self.narrowed.get(keep, 0) + 1
            else:
                c.types, c.ptr, c.reserved, c.final, c.tight = types, ptr, reserved, final, False
        for t in self.templates:
            if t.name in remaining and t.name != keep:
                t.remaining = remaining[t.name]
        if not opened:
            self.tighten_failed[cls.index] = len(self.claims)  # not again for this class until a NodeClaim opens
        return opened

    def _open_claim(self, cls: PodClass, reasons: list[str]) -> bool:
        """:meth:`new_claim` without making room."""
        if self.max_new is not None and len(self.claims) >= self.max_new:
            reasons.append(f"would need more than {self.max_new} new NodeClaim(s)")
            return False
        for template, _merged, types in self.hosting(cls, reasons):
            claim = NodeClaim(template, len(self.claims), template.reqs, types, len(self.dims))
            change, _ = claim.can_add(cls, self.relax_min_values)
            if change is None:
                reasons.append(f'incompatible with nodepool "{template.name}", unsatisfiable topology constraints')
                continue
            claim.add(cls, change, self.topology)
            self.claims.append(claim)
            claim.reserve()
            return True
        return False

    # --- output ------------------------------------------------------------------------------------------
    def finalize(self) -> None:
        """Turn the NodeClaims into plans (their pods unschedulable when no type fits them together) and record
        the pods placed on existing nodes; hold capacity reservations (``strict_reservations``:
        :func:`~nodewright.scheduling.reservations.hold_reservations`); then the closing sentences."""
        for claim in self.claims:
            candidates = claim.launch_candidates()
            if not candidates:
                for pod in claim.pods:
                    self.result.unschedulable[pod.key] = "no instance type fits the pods planned together"
                continue
            plan = claim.to_plan(candidates, claim.template.shared.plans)
            if self.pricing is not None:
                # The fleet grows by this NodeClaim: the next ones are priced on top of it.
                plan.effective_price = self.pricing.launched(plan.instance_type.name, plan.offering)
            self.result.new_nodeclaims.append(plan)
        for node in self.nodes:
            if node.placed:
                self.result.existing[node.node.name] = list(node.placed)
        if self.strict_reservations:
            hold_reservations(self.result)
        for template in self.templates:
            refused = self.limit_refused.get(template.name, set())
            moved: dict[str, int] = {}  # pods its limits turned away that other NodePools' new NodeClaims took
            for plan in self.result.new_nodeclaims if refused else ():
                if plan.nodepool != template.name:
                    count = sum(1 for p in plan.pods if (c := self.class_of.get(id(p))) and c.index in refused)
                    if count:
                        moved[plan.nodepool] = moved.get(plan.nodepool, 0) + count
            line = events.limits_changed(template.spec, self.result, self.narrowed.get(template.name, 0), moved)
            if line is not None:
                self.result.events.append(line)
        placed = self.result.existing
        used = [(node.node.initialized, len(placed[node.node.name])) for node in self.nodes if node.node.name in placed]
        self.result.events.extend(events.outcome(self.result, used))


def _node_daemons(
    node: ExistingNode,
    daemonsets: Sequence[Pod] | None,
    daemons: Mapping[str, PoolDaemons | None],
    overheads: Mapping[str, Resources],
    memo: dict[Hashable, Any],
) -> tuple[Resources, tuple[HostPort, ...]]:
    """The summed requests and the host ports of the DaemonSets that run on an existing node: those whose
    tolerations and strict node requirements admit its labels (plus Karpenter's lifecycle labels, which an
    in-flight node carries once it joins) and taints (Karpenter ``getCompatibleDaemonPods``); for a pool built
    without its DaemonSet pods, the pool's overhead. ``memo`` (one per run) keeps the group per (DaemonSets, the
    node's values of the keys their terms read, taints): most nodes share one."""
    pool = daemons.get(node.nodepool)
    pods = daemonsets if daemonsets is not None else pool.admitted if pool is not None else None
    if pods is None:
        return overheads.get(node.nodepool, {}), ()
    keys = memo.get(id(pods))
    if keys is None:
        keys = memo[id(pods)] = tuple(sorted({k for p in pods for term in daemon_terms(p) for k in term}))
    taints = node.scheduling_taints()
    signature = (id(pods), tuple(LIFECYCLE_LABELS.get(k) or node.labels.get(k) for k in keys), taints)
    group = memo.get(signature)
    if group is None:
        labels = {**node.labels, **LIFECYCLE_LABELS}
        group = memo[signature] = DaemonGroup.of([p for p in pods if runs_on_node(p, labels, taints)])
    return group.requests, group.ports


Stage = Callable[[Scheduler], None]

#: The stages of a pass with ``optimize=True``, in order: free pods take room on existing nodes first (Karpenter
#: tries existing nodes before new NodeClaims), the Karpenter loop places the rest one by one, its NodeClaims
#: are re-packed where cheaper, free pods fill their spare room, the remaining free pods are packed
#: cost-optimally, and the NodeClaims become plans.
OPTIMIZED: tuple[Stage, ...] = (fill_existing, Scheduler.run_queue, repack_topology, fill_claims, pack_free,
                                use_or_terms, Scheduler.finalize)
#: The stages of Karpenter's greedy pass (``optimize=False``: every pod goes through the loop); ``use_or_terms``
#: (pods with ORed required terms take planned room under any term) is nodewright's, in both passes.
GREEDY: tuple[Stage, ...] = (Scheduler.run_queue, use_or_terms, Scheduler.finalize)


def schedule(
    pods: Sequence[Pod],
    nodes: Sequence[ExistingNode],
    nodepools: Sequence[NodePoolSpec],
    instance_types: Mapping[str, Sequence[InstanceType]],
    *,
    daemonsets: Iterable[Pod] | None = None,
    inflight: Sequence[ExistingNode] = (),
    max_new_nodeclaims: int | None = None,
    allowed_nodepools: Collection[str] | None = None,
    optimize: bool = True,
    pricing: PricingFactory | None = None,
    min_values_policy: str = "Strict",
    cache: SchedulingCache | None = None,
    preference_policy: str = "Respect",
    strict_reservations: bool = False,
) -> SchedulingResult:
    """Decide where ``pods`` go: existing nodes, in-flight NodeClaims, or new NodeClaims.

    Args:
        pods: pods to place (pending; ``node_name`` ignored).
        nodes: existing nodes, with their bound pods (used for capacity and topology counts).
        nodepools: NodePools (weight descending then name decides the order new NodeClaims are tried).
        instance_types: NodePool name -> the instance types it may launch (already filtered by its node class).
        daemonsets: daemonset pods; when given, which of them each pool's instance types run is worked out from
            them, otherwise from :attr:`NodePoolSpec.daemonsets` (a pool without those carries
            :attr:`NodePoolSpec.daemonset_overhead` on every type).
        inflight: NodeClaims launched earlier without a node yet (``initialized=False``), tried after nodes.
        max_new_nodeclaims: at most this many new NodeClaims (consolidation asks for 0 or 1); pods that would
            need more are reported unschedulable.
        allowed_nodepools: only these NodePools may get new NodeClaims (None: all).
        optimize: pack topology-free pods cost-optimally (False: Karpenter's greedy for every pod).
        pricing: makes each run's :class:`~.nodeclaimtemplate.Pricing` (a pricing policy's marginal prices over
            the existing fleet, :class:`nodewright.pricing.MarginalPricing`); every ranking, the spot vs
            on-demand choice and the packer's costs then use it instead of list prices, and each plan gets its
            ``effective_price``. None (default): list prices.
        min_values_policy: Karpenter's ``MinValuesPolicy``: ``Strict`` (default) launches no NodeClaim whose
            candidate types miss a ``minValues``; ``BestEffort`` lowers the ``minValues`` to what they meet, a
            NodePool relaxing before a lower-weight one or a pod preference is tried
            (:mod:`~nodewright.scheduling.minvalues`).
        preference_policy: Karpenter's ``PreferencePolicy``: ``Respect`` (default) treats preferences as required
            and relaxes them one at a time; ``Ignore`` drops preferred node affinity, preferred pod
            (anti-)affinity and ``ScheduleAnyway`` spreads up front (:mod:`~nodewright.scheduling.preferences`).
        strict_reservations: Karpenter's ``ReservedOfferingModeStrict`` (the provisioner's mode): at most
            ``reservation_capacity`` NodeClaims per capacity reservation, pods of a NodeClaim that could reserve
            none deferred (:mod:`~nodewright.scheduling.reservations`). False (the disruption simulations):
            Karpenter's fallback mode, reservations not counted.
        cache: per-NodePool state kept between calls (:class:`~.cache.SchedulingCache`; the provisioner keeps
            one): the pools' compiled instance types are reused while their inputs are unchanged. None: built
            for this call. Decisions are the same either way.

    Returns:
        A :class:`SchedulingResult`; its ``events`` hold Karpenter's sentences about the decision
        (:mod:`nodewright.scheduling.events`) for the caller to log.

    The function is pure: it logs nothing, inputs are not mutated and equal inputs give equal outputs.

    With ``optimize``, the plan is never worse than Karpenter's greedy one: the greedy plan wins when it places
    more pods, or the same pods for strictly less USD/hour. (The cost packer changes which pods the one-by-one
    loop sees, so on rare inputs its plan can lose to greedy; this keeps the guarantee.) The greedy plan is
    computed only when it can differ from, and beat, the optimized one, i.e. unless (see :func:`_greedy_moot`)

    * the optimized pass took no nodewright path: no pod was topology-free (so none skipped the loop) and the
      re-pack replaced no NodeClaim; its stages then were the greedy pass's on the same queue, same plan; or
    * the optimized plan places every pod and opens no new NodeClaim: nothing can rank before it.
    """
    all_nodes = [*nodes, *inflight]

    def run(stages: tuple[Stage, ...], optimized: bool) -> Scheduler:
        scheduler = Scheduler(pods, all_nodes, nodepools, instance_types, daemonsets, max_new_nodeclaims,
                              allowed_nodepools, optimized, None if pricing is None else pricing(),
                              min_values_policy == BEST_EFFORT, cache,
                              ignore_preferences=preference_policy == IGNORE_PREFERENCES,
                              strict_reservations=strict_reservations)
        for stage in stages:
            stage(scheduler)
        return scheduler

    if not optimize:
        return run(GREEDY, False).result
    first = run(OPTIMIZED, True)
    optimized = first.result
    if _greedy_moot(first):
        return optimized
    greedy = run(GREEDY, False).result
    return optimized if _plan_rank(optimized) <= _plan_rank(greedy) else greedy


def _greedy_moot(run: Scheduler) -> bool:
    """True when the greedy pass could not return a plan ranked before the optimized ``run``'s (the conditions
    in :func:`schedule`'s docstring)."""
    if not run.free and not run.repacked:
        return True
    if run.result.unschedulable:
        return False
    return not run.result.new_nodeclaims or _lone_pod_cheapest(run)


def _lone_pod_cheapest(run: Scheduler) -> bool:
    """True when the optimized ``run`` placed a batch of one pod, with nothing to relax, on a new NodeClaim that
    costs no more than any NodeClaim the greedy pass could open for it, at list prices and without limits.

    The greedy pass would try the same nodes with the same class first (:func:`~.freepods.fill_existing` did, and
    placed nothing), then open a NodeClaim from a template :meth:`Scheduler.hosting` yields: its plan is a type of
    that template's ``types`` (cheapest allowed offering first under the merged requirements, which the
    NodeClaim's only narrow) fitting the pod, so it costs at least the first such type's cheapest offering."""
    result = run.result
    if run.pricing is not None or len(result.new_nodeclaims) != 1 or len(run.free) != 1 or run.repacked:
        return False
    cls = run.free[0]
    if run.pod_count != 1 or cls.relaxable(run.prefer_no_schedule):
        return False
    if any(t.remaining is not None for t in run.templates):
        return False
    bound = float("inf")
    for _template, merged, types in run.hosting(cls, []):
        first = next((t for t in types if t.fits(cls.vec)), None)
        offering = None if first is None else first.offering(merged)
        if offering is not None:
            bound = min(bound, offering.price)
    return result.new_nodeclaims[0].price <= bound


def _plan_rank(result: SchedulingResult) -> tuple[int, float]:
    """Order plans: more pods placed first (a pod deferred for a capacity reservation counts as placed: it waits
    by design, as Karpenter leaves it out of its unschedulable count), then lower USD/hour (effective where priced;
    rounded to absorb float noise)."""
    deferred = sum(reason == RESERVATION_EXHAUSTED for reason in result.unschedulable.values())
    return (-result.scheduled_pod_count() - deferred, round(result.total_effective_price, 6))
