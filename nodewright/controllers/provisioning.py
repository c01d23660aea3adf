"""Provisioning: batch pending pods, run the scheduler on one snapshot, create the NodeClaims it decides.

Karpenter's provisioner: pods that are pending and unschedulable (see
:func:`nodewright.state.pods.is_provisionable`) plus the pods of Nodes being deleted or disrupted (so their
replacements launch *while* they drain) are collected by a :class:`Batcher` until no new pod arrived for
``idle`` seconds (1 s) or the batch has been open ``max`` seconds (10 s). Then one scheduling simulation runs
over existing Nodes, in-flight NodeClaims (launched, no Node yet) and every ready NodePool, and each
planned NodeClaim is created (static NodePools, ``spec.replicas``, are capacity only: they are never offered
to the scheduler for new NodeClaims; :mod:`nodewright.controllers.static` keeps their count). Pods planned onto a NodeClaim are *nominated* to it, so later batches do not
provision for them again while the node comes up.

Bind mode (``--bind-pods``): pods planned onto a NodeClaim are bound via ``pods/binding`` once its Node
registered, if they are still pending, still fit and tolerate the Node's ``NoExecute`` taints: :data:`BIND_SETTLE`
seconds after registration removed ``karpenter.sh/unregistered`` (NoExecute), not in the same pass. Measured against
a real kube-controller-manager v1.36 (``tests/e2e/test_e2e_scheduler_agreement.py``, mode ``bind``): pods bound
milliseconds after the taint came off were deleted by its taint-eviction controller ("Deleting pod"), whose Node
cache still showed the taint the pods do not tolerate. A bind that fails is retried on later passes with per-pod
exponential backoff (1 s doubling to 30 s) for as long as the pod stays nominated; a 403 (the ClusterRole lacks
``create`` on ``pods/binding``: the chart grants it only with ``controller.bindPods: true``) is reported once as
one error line and a Warning Event ``FailedBinding`` on the pod.

:meth:`Provisioner.nominated_targets` names the Nodes and NodeClaims pending pods are nominated to (by this
provisioner, or by kube-scheduler's ``status.nominatedNodeName``); the disruption controller never treats
those as empty (Karpenter: "node is nominated for a pending pod").
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as L
from nodewright.backoff import Backoff
from nodewright.cloud.instancetype import InstanceType, LaunchPricing, LaunchPricingHook
from nodewright.controllers.buffer import CapacityBufferController
from nodewright.controllers.common import (
    Context,
    fleet_labels,
    log,
    nodepool_instance_types,
    nodepool_of,
)
from nodewright.controllers.orchestration import leaving
from nodewright.controllers.pod_provisioning_metrics import PodProvisioningTimes
from nodewright.controllers.static import replicas_of
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.cluster import Cluster
from nodewright.kube.errors import ConflictError, KubeError, NotFoundError
from nodewright.kube.objects import (
    Obj,
    condition,
    is_deleting,
    labels_of,
    name_of,
    parse_time,
)
from nodewright.kube.pdb import fully_blocking_budget
from nodewright.pricing import PricingPolicy, marginal_pricing
from nodewright.quantities import add, fits, format_resources, parse_resource_list, subtract
from nodewright.scheduling import (
    ExistingNode,
    NodeClaimPlan,
    NodePoolSpec,
    Pod,
    SchedulingResult,
    Taint,
    schedule,
)
from nodewright.scheduling.cache import SchedulingCache
from nodewright.scheduling.nodeclaim_manifest import nodeclaim_from_plan
from nodewright.scheduling.nodeclaimtemplate import PricingFactory
from nodewright.scheduling.taints import untolerated
from nodewright.state.blocked import PodBlocked
from nodewright.state.buffers import is_virtual
from nodewright.state.cluster import ClusterState, snapshot
from nodewright.state.models import models_for
from nodewright.state.pods import (
    holds_node,
    is_do_not_disrupt,
    is_provisionable,
    is_reschedulable,
    is_terminal,
    node_name,
    nominated_node_name,
    pod_key,
)
from nodewright.state.registering import registering_nodes

Solver = Callable[..., SchedulingResult]


#: Seconds between a Node's registration (``karpenter.sh/unregistered`` removed) and binding the pods planned for it
#: (bind mode, module docstring): long enough for kube-controller-manager's Node cache to see the taint gone.
BIND_SETTLE = 1.0

@dataclass
class Batcher:
    """Decides when a batch of pending pods is complete (Karpenter's batch idle/max windows).

    Attributes:
        idle: seconds without a new pending pod that close the batch (``BATCH_IDLE_DURATION``).
        maximum: seconds after the first new pod that close it regardless (``BATCH_MAX_DURATION``).
    """

    idle: float = 1.0
    maximum: float = 10.0
    _seen: set[str] = field(default_factory=set)
    _opened: float | None = None
    _last_new: float = 0.0
    _last_run: float = float("-inf")

    def ready(self, pending: set[str], now: float) -> bool:
        """Feed the current pending pod keys; True when the batch should be scheduled now.

        Pods still pending after a run re-trigger a run every ``maximum`` seconds (capacity may have
        changed), new pods open a fresh window.
        """
        if not pending:
            self._opened = None
            self._seen.clear()
            return False
        self._seen &= pending  # a pod that left and came back (e.g. its NodeClaim failed) counts as new
        new = pending - self._seen
        if new:
            self._seen |= new
            self._last_new = now
            if self._opened is None:
                self._opened = now
        if self._opened is None:
            if now - self._last_run >= self.maximum:
                self._opened = self._last_new = now - self.idle
            else:
                return False
        if now - self._last_new >= self.idle or now - self._opened >= self.maximum:
            self._opened = None
            self._last_run = now
            return True
        return False


    def window_closed(self) -> bool:
        """No batch window is open (no new pending pod is being waited for)."""
        return self._opened is None

    def forget(self, keys: set[str]) -> None:
        """Treat ``keys`` as new next time they are pending (they were placed; if they return, act at once)."""
        self._seen -= keys


@dataclass
class Nomination:
    """A pod planned onto a NodeClaim (or an existing Node) at ``time`` (epoch seconds)."""

    target: str
    on_nodeclaim: bool
    time: float


class Provisioner:
    """The provisioning controller.

    Args:
        ctx: dependencies.
        batcher: the batch windows.
        bind_pods: bind mode (see module docstring).
        solver: the scheduling function (default :func:`nodewright.scheduling.schedule`).
        nomination_grace: seconds a nomination to a Ready NodeClaim or an existing Node stays valid,
            giving kube-scheduler time to bind the pod.
        pricing_policy: returns the PricingPolicy in force (``nodewright run --pricing-policy``, re-read when
            its file changes; ``simulate --pricing``), or None. With one, the batch's cheapest fit and spot vs
            on-demand choice use effective marginal prices over the running fleet (docs/pricing.md).
        min_values_policy: Karpenter's ``MIN_VALUES_POLICY`` (``Strict`` or ``BestEffort``), passed to the solver.
        preference_policy: Karpenter's ``PREFERENCE_POLICY`` (``Respect`` or ``Ignore``), passed to the solver.
        buffers: the CapacityBuffer controller (:mod:`nodewright.controllers.buffer`): its virtual pods join every
            scheduling run (never nominated nor bound), it starts runs of its own when its room must be
            (re)filled, and it reads each run's result (``Provisioning`` conditions, where buffers hold room).
    """

    def __init__(
        self,
        ctx: Context,
        batcher: Batcher | None = None,
        bind_pods: bool = False,
        solver: Solver = schedule,
        nomination_grace: float = 60.0,
        pricing_policy: Callable[[], PricingPolicy | None] | None = None,
        min_values_policy: str = "Strict",
        preference_policy: str = "Respect",
        buffers: CapacityBufferController | None = None,
    ) -> None:
        self.ctx = ctx
        self.buffers = buffers
        self.preference_policy = preference_policy
        self.pricing_policy = pricing_policy
        self.min_values_policy = min_values_policy
        self.batcher = batcher or Batcher()
        self.bind_pods = bind_pods
        self.solver = solver
        self.nomination_grace = nomination_grace
        self.nominations: dict[str, Nomination] = {}
        self.bind_backoff = Backoff(initial=1.0, maximum=30.0)
        self._bind_forbidden_reported = False
        self._bind_due: dict[str, float] = {}  # NodeClaim name -> when its planned pods are bound (bind mode)
        self._unschedulable_reported: dict[str, str] = {}
        self.last_result: SchedulingResult | None = None
        self._scheduling_id: str | None = None  # the last run's karpenter_scheduler_queue_depth series
        self.pod_times = PodProvisioningTimes(ctx.metrics, ctx.clock)
        #: The NodePools' compiled instance types, reused by the next batch while unchanged (issue 19).
        self.scheduling_cache = SchedulingCache()

    # --- which pods ---------------------------------------------------------------------------

    def _nominated(self, key: str, state: ClusterState, now: float) -> bool:
        nom = self.nominations.get(key)
        if nom is None:
            return False
        if nom.on_nodeclaim:
            claim = state.nodeclaims.get(nom.target)
            if claim is None or is_deleting(claim):
                return False
            ready = condition(claim, L.CONDITION_INITIALIZED)
            if ready and ready.get("status") == "True":
                if self._room_gone(key, claim, state):
                    return False  # recovery: kube-scheduler filled the planned node with other pods
                return now - nom.time < self.nomination_grace or self._ready_for(claim, now)
            return True
        node = state.nodes.get(nom.target)
        return node is not None and not is_deleting(node) and now - nom.time < self.nomination_grace

    def _room_gone(self, key: str, claim: Obj, state: ClusterState) -> bool:
        """Recovery (issue 25): the pod ``key`` was planned onto ``claim``, whose Node is Ready (Initialized), but
        the pods bound there leave no room for it -- kube-scheduler did not follow the plan. The pod is then
        re-planned at once, against the space that really exists (existing and in-flight nodes first, then the
        cheapest NodeClaim that completes it), instead of after :attr:`nomination_grace`."""
        node = state.node_for(claim)
        pod = state.pods.get(key)
        if node is None or pod is None:
            return False
        current = state.models.node(node, state.models.pods(p for p in state.pods_on(name_of(node)) if holds_node(p)))
        if current is None:
            return False
        free = subtract(current.allocatable, current.requested())
        return not fits(state.models.requests(pod), free)

    def is_nominated(self, key: str, state: ClusterState, now: float) -> bool:
        """Whether the pod ``key`` still holds a valid nomination of this provisioner (its NodeClaim is live and,
        once Initialized, within :attr:`nomination_grace`; an existing Node within the grace): the pods
        :mod:`nodewright.controllers.nomination` publishes as ``status.nominatedNodeName``."""
        return self._nominated(key, state, now)

    def _ready_for(self, claim: Obj, now: float) -> bool:
        ready = condition(claim, L.CONDITION_INITIALIZED) or {}
        since = parse_time(ready.get("lastTransitionTime"))
        return since is not None and now - since < self.nomination_grace

    def _leaving_nodes(self, state: ClusterState) -> list[Obj]:
        """Managed Nodes being deleted or disrupted: their pods need new homes. A ``karpenter.sh/disrupted`` taint
        no disruption command holds (left by a restart) does not count (:func:`orchestration.leaving`)."""
        return [n for n in state.managed_nodes() if leaving(n, state)]

    def pending_pods(self, state: ClusterState, now: float) -> list[Obj]:
        """Provisionable pods plus reschedulable pods of leaving Nodes, minus nominated ones."""
        # Bound pods are never provisionable: the cheap nodeName test first skips most pods of a large cluster.
        out = [p for p in state.pods.values() if not (p.get("spec") or {}).get("nodeName") and is_provisionable(p)]
        out.extend(self._leaving_pods(state))
        return [p for p in out if not self._nominated(pod_key(p), state, now)]

    def _leaving_pods(self, state: ClusterState) -> list[Obj]:
        """Pods of leaving Nodes that need new capacity (Karpenter ``pdb.Limits.IsCurrentlyReschedulable``).

        Reschedulable pods (:func:`~nodewright.state.pods.is_reschedulable`), except an active pod with
        ``karpenter.sh/do-not-disrupt`` (it stays until it finishes) and an evictable pod that a
        PodDisruptionBudget fully blocks (:func:`~nodewright.kube.pdb.fully_blocking_budget`): capacity for a pod
        that will not leave would sit idle. A budget merely at its limit now does not hold the pod back.
        """
        out: list[Obj] = []
        for node in self._leaving_nodes(state):
            for pod in state.pods_on(name_of(node)):
                if not is_reschedulable(pod):
                    continue
                active = not is_deleting(pod) and not is_terminal(pod)
                if active and is_do_not_disrupt(pod):
                    continue
                if active and state.pdbs and fully_blocking_budget(pod, state.pdbs) is not None:
                    continue
                out.append(pod)
        return out

    # --- reconcile ---------------------------------------------------------------------------

    def reconcile(self, state: ClusterState | None = None) -> SchedulingResult | None:
        """Run a scheduling simulation when a batch is complete; returns its result (None otherwise)."""
        state = state or snapshot(self.ctx.cluster)
        now = self.ctx.clock()
        self._prune(state)
        if self.bind_pods:
            self.bind_due(state)
        pending = self.pending_pods(state, now)
        self.pod_times.observe(state)
        self.pod_times.seen(pending, now)
        virtual = self.buffers.virtual_pods() if self.buffers is not None else []
        if not self.batcher.ready({pod_key(p) for p in pending}, now):
            # CapacityBuffers refill their room between batches (never cutting an open batch window short).
            if not (virtual and self.batcher.window_closed() and self.buffers is not None and self.buffers.wants_run(now)):
                return None
        return self.provision(pending, state, now, virtual)

    def _prune(self, state: ClusterState) -> None:
        for key in [k for k in self.nominations if k not in state.pods]:
            del self.nominations[key]
        self.bind_backoff.prune(lambda key: key in self.nominations)
        virtual = {p.key for p in self.buffers.virtual_pods()} if self.buffers is not None else set()
        for key in [k for k in self._unschedulable_reported if k not in state.pods and k not in virtual]:
            del self._unschedulable_reported[key]

    def provision(self, pending: list[Obj], state: ClusterState, now: float,
                  virtual: Sequence[Pod] = ()) -> SchedulingResult | None:
        """Schedule ``pending`` (plus the CapacityBuffers' ``virtual`` pods) on ``state`` and create the NodeClaims
        decided."""
        pods = []
        blocked: dict[str, str] = {}  # pod key -> why it stays pending (its volumes, DRA: state/blocked.py)
        for doc in pending:
            pod = state.models.pod(doc, pending=True)
            if pod is None:
                error = state.models.pod_error(doc, pending=True)
                if isinstance(error, PodBlocked):
                    blocked[pod_key(doc)] = error.reason
                else:
                    log.warning("ignoring pod %s: %s", pod_key(doc), error, extra={"pod": pod_key(doc)})
            else:
                pods.append(pod)
        self.ctx.metrics.scheduler_ignored_pods.set(len(pending) - len(pods) - len(blocked))
        ignored = {pod_key(doc) for doc in pending} - {p.key for p in pods} - set(blocked)
        self.pod_times.decided((), ignored, now)
        virtual_keys = {p.key for p in virtual}
        pods.extend(virtual)
        if not pods and not blocked:
            return None
        pools, instance_types = self._nodepools(state)
        self.ctx.metrics.observe_instance_types(  # exported when scraped: free here
            {it.name: it for types in instance_types.values() for it in types}.values())
        nodes, inflight = self._capacity(state, instance_types)
        daemonsets = state.daemonset_models()
        started = time.perf_counter()
        # Static NodePools (spec.replicas) never launch for pods: their nodes are only existing capacity
        # (nodewright.controllers.static keeps their count); in-flight static NodeClaims still need their types.
        dynamic = {spec.name: instance_types[spec.name] for spec in pools}
        pricing = self._pricing(dynamic, [*nodes, *inflight])
        # A custom solver need not know pricing nor the non-default MinValuesPolicy / PreferencePolicy.
        extra: dict[str, Any] = {} if pricing is None else {"pricing": pricing}
        if self.min_values_policy != "Strict":
            extra["min_values_policy"] = self.min_values_policy
        if self.preference_policy != "Respect":
            extra["preference_policy"] = self.preference_policy
        if self.solver is schedule:
            self.scheduling_cache.retain([spec.name for spec in pools])
            extra["cache"] = self.scheduling_cache
            extra["strict_reservations"] = True  # Karpenter's provisioner: DisableReservedCapacityFallback
        with self._scheduling_run(len(pods)):
            result = self.solver(pods, nodes, pools, dynamic, daemonsets=daemonsets, inflight=inflight,
                                 **extra) if pods else SchedulingResult()
        result.unschedulable.update(blocked)
        self.ctx.metrics.scheduling_duration.labels("provisioner").observe(time.perf_counter() - started)
        self.ctx.metrics.scheduler_unschedulable_pods.labels("provisioner").set(len(result.unschedulable))
        self.last_result = result
        self._log(result)
        for plan in result.new_nodeclaims:
            self._create(plan, state, now)
        for target, placed in result.existing.items():
            on_claim = target in state.nodeclaims and target not in state.nodes
            for pod in placed:
                if pod.key not in virtual_keys:  # virtual pods are placed afresh each run, never nominated
                    self.nominations[pod.key] = Nomination(target, on_claim, now)
        self._report_unschedulable(result, state)
        placed_keys = [p.key for plan in result.new_nodeclaims for p in plan.pods if p.key not in virtual_keys]
        placed_keys += [p.key for on_node in result.existing.values() for p in on_node if p.key not in virtual_keys]
        self.pod_times.decided(placed_keys, {k: v for k, v in result.unschedulable.items() if k not in virtual_keys},
                               now)
        if self.buffers is not None:
            self.buffers.observe(result, state, now)
        self.batcher.forget(set(self.nominations))
        return result

    def _pricing(self, instance_types: Mapping[str, Sequence[InstanceType]],
                 fleet: Sequence[ExistingNode]) -> PricingFactory | None:
        """Each scheduling run's marginal prices under the policy in force, over ``fleet`` (the Nodes and in-flight
        NodeClaims whose instance type is known); None without a policy (list prices)."""
        policy = self.pricing_policy() if self.pricing_policy is not None else None
        if policy is None:
            return None
        base = marginal_pricing(policy, (t for types in instance_types.values() for t in types),
                                (n.labels for n in fleet))
        return None if base is None else base.fresh

    @contextlib.contextmanager
    def _scheduling_run(self, depth: int) -> Iterator[None]:
        """One scheduling simulation's ``karpenter_scheduler_queue_depth{controller, scheduling_id}`` (``depth``
        pods handed to the solver; kept until the next run replaces it) and ``..._unfinished_work_seconds``
        (seconds since the run started, read at scrape time from another thread; removed when the run ends).
        Karpenter updates both from inside its solve loop; nodewright's solver has no such hook, so the queue
        depth is the batch size, not the pods still left in the queue."""
        metrics = self.ctx.metrics
        if self._scheduling_id is not None:
            metrics.scheduler_queue_depth.remove("provisioner", self._scheduling_id)
        self._scheduling_id = scheduling_id = str(uuid.uuid4())
        metrics.scheduler_queue_depth.labels("provisioner", scheduling_id).set(depth)
        started = time.monotonic()
        metrics.scheduler_unfinished_work.labels("provisioner", scheduling_id).set_function(
            lambda: time.monotonic() - started)
        try:
            yield
        finally:
            metrics.scheduler_unfinished_work.remove("provisioner", scheduling_id)

    # --- inputs ------------------------------------------------------------------------------

    def _nodepools(self, state: ClusterState) -> tuple[list[NodePoolSpec], dict[str, list[InstanceType]]]:
        daemonsets = state.daemonset_models()
        usage = nodepool_usage(state)
        types, problems = nodepool_instance_types(self.ctx, state, "provisioner")
        pools: list[NodePoolSpec] = []
        for name in list(types):
            if replicas_of(state.nodepools[name]) is not None:
                continue  # static: kept in `types` for its in-flight NodeClaims, never offered to the solver
            try:
                pools.append(state.models.nodepool_spec(state.nodepools[name], daemonsets, usage.get(name, {})))
            except NodewrightValidationError as invalid:
                problems[name] = invalid
                del types[name]
        for name, problem in sorted(problems.items()):
            if isinstance(problem, NodewrightValidationError):
                log.error("ignoring invalid nodepool %s: %s", name, problem, extra={"nodepool": name})
            else:
                log.error("nodepool %s cannot launch: %s", name, problem, extra={"nodepool": name})
        return pools, types

    def _capacity(
        self, state: ClusterState, instance_types: Mapping[str, Sequence[InstanceType]]
    ) -> tuple[list[ExistingNode], list[ExistingNode]]:
        nodes = []
        nominated = self._nominated_pods(state)
        for node in state.nodes.values():
            held = (p for p in state.pods_on(name_of(node)) if holds_node(p))
            current = state.models.node(node, state.models.pods(held))
            if current is None:
                continue
            # Pods nominated to this node (or to its NodeClaim before it registered) will take its room once
            # kube-scheduler binds them; without them a registered, not yet Ready node looks empty.
            claim = state.nodeclaim_for(node)
            current.pods.extend(nominated.get(name_of(node), []))
            if claim is not None:
                current.pods.extend(nominated.get(name_of(claim), []))
            nodes.append(current)
        # A Node not initialized yet: its NodeClaim's startup taints and launched allocatable (state/registering.py).
        nodes = registering_nodes(nodes, state, instance_types)
        inflight = []
        for claim in state.nodeclaims.values():
            if is_deleting(claim) or state.node_for(claim) is not None:
                continue
            existing = self._inflight_node(claim, state, instance_types)
            if existing is not None:
                inflight.append(existing)
        return nodes, inflight

    def _nominated_pods(self, state: ClusterState) -> dict[str, list[Pod]]:
        """Unbound pods with a valid nomination, by nomination target (Node or NodeClaim name)."""
        now = self.ctx.clock()
        out: dict[str, list[Pod]] = {}
        for key, nom in self.nominations.items():
            pod = state.pods.get(key)
            if pod is None or node_name(pod) or not self._nominated(key, state, now):
                continue
            converted = state.models.pod(pod, pending=True)
            if converted is not None:
                out.setdefault(nom.target, []).append(converted)
        return out

    def _inflight_node(
        self, claim: Obj, state: ClusterState, instance_types: Mapping[str, Sequence[InstanceType]]
    ) -> ExistingNode | None:
        """A NodeClaim without a Node as capacity: launched allocatable, or the smallest candidate's."""
        labels = labels_of(claim)
        try:
            requirements = state.models.nodeclaim_requirements(claim)
            allocatable = parse_resource_list((claim.get("status") or {}).get("allocatable"), "status.allocatable")
        except NodewrightValidationError as err:
            log.debug("skipping in-flight nodeclaim %s: %s", name_of(claim), err)
            return None
        if not allocatable:
            candidates = requirements.get(L.INSTANCE_TYPE)
            sizes = [it.allocatable() for it in instance_types.get(nodepool_of(claim), [])
                     if candidates is not None and not candidates.complement and candidates.has(it.name)]
            if not sizes:
                return None
            allocatable = min(sizes, key=lambda a: (a.get("cpu", 0), a.get("memory", 0)))
        for key, value in requirements.labels().items():
            labels.setdefault(key, value)
        nominated = state.models.pods((state.pods[key] for key, nom in self.nominations.items()
                                       if nom.on_nodeclaim and nom.target == name_of(claim) and key in state.pods),
                                      pending=True)
        taints = tuple(Taint(key=str(t.get("key")), effect=str(t.get("effect")), value=str(t.get("value") or ""))
                       for t in (claim.get("spec") or {}).get("taints") or [])
        return ExistingNode(name=name_of(claim), labels=labels, allocatable=allocatable, taints=taints,
                            pods=nominated, initialized=False)

    # --- outputs -----------------------------------------------------------------------------

    def _create(self, plan: NodeClaimPlan, state: ClusterState, now: float) -> None:
        nodepool = state.nodepools.get(plan.nodepool) or {}
        doc = nodeclaim_from_plan(plan, nodepool)
        try:
            claim = self.ctx.cluster.create(r.NODECLAIMS, doc)
        except KubeError as err:
            log.error("creating nodeclaim for nodepool %s failed: %s", plan.nodepool, err,
                      extra={"nodepool": plan.nodepool})
            return
        name = name_of(claim)
        log.debug("created nodeclaim %s", name, extra={"nodeclaim": name, "nodepool": plan.nodepool})
        # Karpenter: reason "provisioned"; min_values_relaxed as its annotation says (MIN_VALUES_POLICY=BestEffort).
        relaxed = "true" if plan.min_values_relaxed else "false"
        self.ctx.metrics.nodeclaims_created.labels("provisioned", plan.nodepool, relaxed).inc()
        for pod in plan.pods:
            if is_virtual(pod):
                continue
            self.nominations[pod.key] = Nomination(name, True, now)
            manifest = state.pods.get(pod.key)
            if manifest is not None:
                self.ctx.event(manifest, "Nominated", f"Pod should schedule on: nodeclaim/{name}")

    def _log(self, result: SchedulingResult) -> None:
        """Log the decision's events (Karpenter's sentences, see :mod:`nodewright.scheduling.events`) once, at
        their level, with their fields. A pod that still cannot be placed for the reason already reported in an
        earlier batch is not reported again."""
        for event in result.events:
            pod = event.fields.get("pod")
            if (event.level == "ERROR" and pod in result.unschedulable
                    and self._unschedulable_reported.get(pod) == result.unschedulable[pod]):
                continue
            log.log(logging.getLevelName(event.level), event.message, extra=dict(event.fields))

    def _report_unschedulable(self, result: SchedulingResult, state: ClusterState) -> None:
        for key, reason in result.unschedulable.items():
            if self._unschedulable_reported.get(key) == reason:
                continue
            self._unschedulable_reported[key] = reason
            pod = state.pods.get(key)
            if pod is not None:
                self.ctx.event(pod, "FailedScheduling", f"Failed to schedule pod, {reason}", warning=True)

    # --- bind mode ---------------------------------------------------------------------------

    def nominated_targets(self, state: ClusterState) -> set[str]:
        """Names of the Nodes and NodeClaims that unbound pods are validly nominated to right now.

        Sources: this provisioner's nominations (see :meth:`_nominated`) and kube-scheduler's
        ``status.nominatedNodeName`` on pending pods.
        """
        now = self.ctx.clock()
        out: set[str] = set()
        for key, nom in self.nominations.items():
            pod = state.pods.get(key)
            if pod is not None and not node_name(pod) and self._nominated(key, state, now):
                out.add(nom.target)
                claim = state.nodeclaims.get(nom.target)
                registered = state.node_for(claim) if claim is not None else None
                if registered is not None:
                    out.add(name_of(registered))
        for pod in state.pods.values():
            nominated = nominated_node_name(pod)
            if nominated and not node_name(pod) and not is_deleting(pod):
                out.add(nominated)
        return out

    def on_registered(self, claim: Obj, node: Obj) -> None:
        """Bind mode: the pods nominated to ``claim`` are bound to its Node :data:`BIND_SETTLE` s from now (by
        :meth:`bind_due`, from the provisioner's pass; see module docstring)."""
        if self.bind_pods:
            self._bind_due[name_of(claim)] = self.ctx.clock() + BIND_SETTLE

    def bind_due(self, state: ClusterState) -> list[str]:
        """Bind mode: bind the pods of each registered NodeClaim whose :data:`BIND_SETTLE` has passed, and retry the
        binds still owed (each pod on its own backoff); returns the pod keys bound."""
        now = self.ctx.clock()
        targets = {nom.target for key, nom in self.nominations.items()
                   if nom.on_nodeclaim and self.bind_backoff.failures(key)}
        for name, due in list(self._bind_due.items()):
            if name not in state.nodeclaims:
                del self._bind_due[name]
            elif due <= now:
                del self._bind_due[name]
                targets.add(name)
        bound: list[str] = []
        for target in sorted(targets):
            claim = state.nodeclaims.get(target)
            node = state.node_for(claim) if claim is not None and not is_deleting(claim) else None
            if claim is not None and node is not None and not is_deleting(node):
                bound += self._bind(claim, node, state.pods_on(name_of(node)), now)
        return bound

    def _bind(self, claim: Obj, node: Obj, pods_on_node: Sequence[Obj], now: float) -> list[str]:
        bound_keys: list[str] = []
        name = name_of(claim)
        models = models_for(self.ctx.cluster)
        used: dict[str, int] = {}
        for pod in pods_on_node:
            used = add(used, models.requests(pod))
        free = subtract(parse_resource_list((node.get("status") or {}).get("allocatable")), used)
        node_model = models.node(node)
        no_execute = [t for t in (node_model.taints if node_model is not None else ()) if t.effect == "NoExecute"]
        for key, nom in sorted(self.nominations.items()):
            if not (nom.on_nodeclaim and nom.target == name) or not self.bind_backoff.ready(key, now):
                continue
            namespace, pod_name = key.split("/", 1)
            current = self.ctx.cluster.get(r.PODS, pod_name, namespace)
            if current is None or node_name(current) or is_deleting(current):
                self.bind_backoff.succeeded(key)
                continue
            requests = models.requests(current)
            model = models.pod(current)
            evicting = untolerated(model.tolerations if model is not None else (), no_execute)
            if evicting is not None:  # the taint-eviction controller would delete it at once: later
                self.bind_backoff.failed(key, now)
                log.info("not binding %s to %s yet: it does not tolerate %s:%s", key, name_of(node), evicting.key,
                         evicting.effect, extra={"pod": key})
                continue
            if free and not fits(requests, free):
                log.info("not binding %s to %s: it no longer fits (requests %s, free %s)", key, name_of(node),
                         format_resources(requests), format_resources(free), extra={"pod": key})
                self.bind_backoff.succeeded(key)
                continue
            try:
                self.ctx.cluster.bind_pod(namespace, pod_name, name_of(node))
            except NotFoundError:
                self.bind_backoff.succeeded(key)
                continue
            except KubeError as err:
                self._bind_failed(current, key, name_of(node), err, now)
                continue
            self.bind_backoff.succeeded(key)
            free = subtract(free, requests)
            bound_keys.append(key)
            self.ctx.event(current, "Scheduled", f"Successfully assigned {key} to {name_of(node)}")
        if bound_keys:
            log.info("bound %d pod(s) to node %s", len(bound_keys), name_of(node),
                     extra={"nodeclaim": name, "node": name_of(node)})
        return bound_keys

    def _bind_failed(self, pod: Obj, key: str, node: str, err: KubeError, now: float) -> None:
        delay = self.bind_backoff.failed(key, now)
        if err.status == 403:
            if not self._bind_forbidden_reported:
                self._bind_forbidden_reported = True
                message = (f"binding {key} to {node} is forbidden: the ClusterRole lacks create on pods/binding; "
                           "install the chart with controller.bindPods=true (it grants that verb) or run without "
                           "--bind-pods")
                log.error(message, extra={"pod": key, "node": node, "error": str(err)})
                self.ctx.event(pod, "FailedBinding", message, warning=True)
            return
        if isinstance(err, ConflictError):
            log.info("binding %s to %s conflicted, retrying in %.0fs: %s", key, node, delay, err, extra={"pod": key})
            return
        log.warning("binding %s to %s failed, retrying in %.0fs: %s", key, node, delay, err, extra={"pod": key})


# --- helpers -----------------------------------------------------------------------------------


def launch_pricing_hook(policy: Callable[[], PricingPolicy | None], cluster: Cluster) -> LaunchPricingHook:
    """The cloud providers' ``launch_pricing`` under the policy in force: marginal prices over ``cluster``'s fleet
    at launch time, so the fleet request follows the order the provisioner chose by (docs/pricing.md)."""
    def hook(types: Sequence[InstanceType]) -> LaunchPricing | None:
        current = policy()
        if current is None:
            return None
        return marginal_pricing(current, types, fleet_labels(cluster.list(r.NODES), cluster.list(r.NODECLAIMS)))
    return hook


def nodepool_usage(state: ClusterState) -> dict[str, dict[str, int]]:
    """NodePool -> summed capacity of the capacity it owns (cpu millicores, memory bytes, pods, ``nodes``).

    Karpenter's NodePool counter: every node of the cluster state -- a live NodeClaim (its launched
    ``status.capacity``, else its requests while it launches) or a Node labelled ``karpenter.sh/nodepool`` that
    no NodeClaim accounts for (its ``status.capacity``) -- counts against the pool's ``limits``.
    """
    usage: dict[str, dict[str, int]] = {}
    for claim in state.nodeclaims.values():
        pool = nodepool_of(claim)
        if not pool:
            continue
        capacity = parse_resource_list((claim.get("status") or {}).get("capacity"))
        if not capacity:
            capacity = parse_resource_list(((claim.get("spec") or {}).get("resources") or {}).get("requests"))
        usage[pool] = add(usage.get(pool, {}), {**capacity, "nodes": 1})
    for node in state.nodes.values():
        pool = nodepool_of(node)
        if not pool or state.nodeclaim_for(node) is not None:
            continue
        capacity = parse_resource_list((node.get("status") or {}).get("capacity"))
        usage[pool] = add(usage.get(pool, {}), {**capacity, "nodes": 1})
    return usage
