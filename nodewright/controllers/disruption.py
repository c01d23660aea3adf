"""Disruption: execute the decisions of :mod:`nodewright.disruption`, one graceful decision at a time.

Karpenter's disruption controller, as a synchronous state machine driven by :meth:`DisruptionController.reconcile`
(the manager's step or the simulator's clock; nothing here sleeps):

1. **Expiration** (every pass, forceful, not budgeted): expired NodeClaims are deleted through the termination
   path (reason ``Expired``); the provisioner launches for their pods while they drain.
2. **Decide** (every ``poll_period``, 10 s): :func:`nodewright.disruption.decide` -- emptiness, drift,
   multi-node, single-node consolidation; the first that finds work yields the pending command.
3. **Validate** after ``validation_delay`` (15 s) on a fresh snapshot (:func:`nodewright.disruption.validate`);
   a decision that no longer holds is dropped.
4. **Execute**: taint the candidates ``karpenter.sh/disrupted:NoSchedule``; with replacements, create their
   NodeClaims and wait until every one is ``Ready``; then delete the candidates through
   :class:`~nodewright.controllers.termination.Terminator` (drain honours PDBs and ``terminationGracePeriod``).
   A replacement that disappears (e.g. no capacity) or is not Ready within ``replacement_timeout`` rolls the
   command back: untaint the candidates and delete the replacements not Ready.

Also: keeps each NodeClaim's ``Drifted`` condition current (Karpenter's NodeClaim disruption controller):
``Drifted=True`` with the drift reason (``NodePoolDrifted``, ``RequirementsDrifted``, ``AMIDrift``, ...) while
:func:`nodewright.disruption.drift.drift_reason` finds one, and the condition removed once drift goes away;
re-stamps the NodePool hash on NodeClaims stamped with another hash version (so upgrades and claims
made by Karpenter never look drifted), tracks each node's last pod event (for ``consolidateAfter``), and
asks the cloud provider for drift (AMI, subnet, security groups) at most every ``drift_check_period``.

Metrics: ``karpenter_voluntary_disruption_decisions_total{decision,reason,consolidation_type}`` and
``..._decisions_by_nodepool_total``, ``karpenter_voluntary_disruption_failed_validations_total``,
``nodewright_disruption_replacements_total{reason}``,
``karpenter_voluntary_disruption_decision_evaluation_duration_seconds{reason="all",consolidation_type=""}``,
``karpenter_nodepools_allowed_disruptions`` and ``..._nodes_consuming_budgets{nodepool,reason}``,
``karpenter_voluntary_disruption_eligible_nodes{reason}`` (set at every decision pass),
``karpenter_voluntary_disruption_consolidation_timeouts_total{consolidation_type}`` (a multi- or single-node
search whose time budget ran out, Karpenter's 1 min / 3 min: ``ConsolidationOptions.multi_node_timeout`` /
``single_node_timeout``),
``karpenter_voluntary_disruption_queue_failures_total{decision,reason,consolidation_type}`` (replacements not
Ready when a command is rolled back);
events with the reason and the saving in $/h
("Consolidating 3 nodes into 1 t4g.large, saving $0.21/h").

Prices: with ``pricing_policy`` (the provisioner's, ``nodewright run --pricing-policy`` re-read when the file
changes; ``simulate --scenario --pricing``) every consolidation saving is at effective marginal prices
(:mod:`nodewright.disruption.pricing`); each pass and each re-validation read the policy in force. A move found
feasible but skipped for its saving (below its NodePools' ``nodewright.io/consolidation-minimum-saving[-percent]``,
or nothing saved at effective prices) gets a Normal Event ``ConsolidationSkipped`` on each of its NodePools and an
INFO log line, once per change: per NodePool, the skipped move with the most nodes (then the largest saving) of
the pass, reported again only when that sentence changes (or when it comes back after a full search without it).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from nodewright.api import labels as L
from nodewright.api.hashing import NODEPOOL_HASH_VERSION, nodepool_hash
from nodewright.backoff import Backoff
from nodewright.cloud.instancetype import InstanceType
from nodewright.cloud.provider import CloudProviderError
from nodewright.controllers.common import (
    Context,
    log,
    nodeclaim_ready,
    nodepool_instance_types,
    nodepool_of,
    set_nodeclaim_condition,
)
from nodewright.controllers.orchestration import (
    COMMAND_ANNOTATION,
    COMPLETE,
    DONE,
    REPLACEMENT_ANNOTATION,
    ROLL_BACK,
    CommandRecord,
    recorded_commands,
    resolve,
    stale_disrupted_nodes,
)
from nodewright.controllers.termination import Terminator
from nodewright.disruption import Decision, DecisionOptions, decide_expiration, decide_pass, validate
from nodewright.disruption.budgets import UNLIMITED, allowed_disruptions, pool_counts
from nodewright.disruption.consolidation import underutilized_candidates
from nodewright.disruption.drift import drift_reason, drifted_candidates
from nodewright.disruption.emptiness import empty_candidates
from nodewright.disruption.model import (
    EMPTINESS,
    MULTI_NODE,
    REASON_DRIFTED,
    REASON_EMPTY,
    REASON_UNDERUTILIZED,
    SINGLE_NODE,
    ClusterView,
)
from nodewright.disruption.pricing import Skip
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.objects import Obj, annotations_of, is_deleting, meta, name_of
from nodewright.logging import warn_limited
from nodewright.pricing import PricingPolicy
from nodewright.scheduling import Pod
from nodewright.scheduling.nodeclaim_manifest import nodeclaim_from_plan
from nodewright.state.cluster import ClusterState, snapshot
from nodewright.state.incremental_view import ViewCache
from nodewright.state.pods import pod_key

VALIDATING = "validating"
#: Karpenter's allowed disruptions when no budget is active (Go's ``math.MaxInt32``).
_GO_MAX_INT32 = 2_147_483_647
WAITING = "waiting"


@dataclass
class Command:
    """A decision being carried out.

    Attributes:
        decision: what to do (None for a command rebuilt from the cluster after a restart: its record says).
        decided_at: epoch seconds the decision was made.
        phase: :data:`VALIDATING` (waiting ``validation_delay``) or :data:`WAITING` (replacements launching).
        replacements: names of the replacement NodeClaims created.
        launched_at: epoch seconds the replacements were created.
        record: what is written on the candidates once the command executes
            (:class:`~nodewright.controllers.orchestration.CommandRecord`).
        recorded: candidate NodeClaims the record has been written to.
    """

    decision: Decision | None
    decided_at: float
    phase: str = VALIDATING
    replacements: list[str] = field(default_factory=list)
    launched_at: float = 0.0
    record: CommandRecord | None = None
    recorded: list[str] = field(default_factory=list)


class DisruptionController:
    """The disruption controller (see module docstring).

    Args:
        ctx: dependencies (cluster, cloud, clock, metrics).
        terminator: the termination path's entry point.
        options: decision tunables.
        poll_period: seconds between decisions (Karpenter: 10 s).
        validation_delay: seconds between deciding and re-validating (Karpenter: 15 s).
        replacement_timeout: seconds replacements get to become Ready before the command is rolled back.
        drift_check_period: seconds between cloud-provider drift checks of one NodeClaim.
        nominated: names of the Nodes/NodeClaims pending pods are nominated to (the provisioner's
            :meth:`~nodewright.controllers.provisioning.Provisioner.nominated_targets`); such nodes are never
            disruption candidates, so a node waiting for its pods is not deleted as empty.
        min_values_policy: Karpenter's ``MIN_VALUES_POLICY`` for the disruption simulations (as the provisioner).
        preference_policy: Karpenter's ``PREFERENCE_POLICY`` for the disruption simulations (as the provisioner).
        pricing_policy: returns the PricingPolicy in force (the provisioner's), or None: consolidation savings
            are then at list prices.
        buffers: Node name -> the CapacityBuffer virtual pods holding room on it
            (:meth:`~nodewright.controllers.buffer.CapacityBufferController.held`); they join that node's pods in
            the view, so buffered room is never consolidated away (an otherwise empty node is not empty, its
            virtual pods must fit elsewhere, other candidates' pods cannot take that room).
        static_capacity: the ``StaticCapacity`` gate (:attr:`~nodewright.disruption.model.ClusterView.
            static_capacity`): off, a drifted static node is never terminated first.
    """

    def __init__(
        self,
        ctx: Context,
        terminator: Terminator,
        options: DecisionOptions | None = None,
        *,
        poll_period: float = 10.0,
        validation_delay: float = 15.0,
        replacement_timeout: float = 600.0,
        drift_check_period: float = 300.0,
        nominated: Callable[[ClusterState], set[str]] | None = None,
        min_values_policy: str = "Strict",
        preference_policy: str = "Respect",
        pricing_policy: Callable[[], PricingPolicy | None] | None = None,
        buffers: Callable[[], Mapping[str, list[Pod]]] | None = None,
        static_capacity: bool = True,
    ) -> None:
        self.nominated = nominated
        self.buffers = buffers
        self.static_capacity = static_capacity
        self.min_values_policy = min_values_policy
        self.preference_policy = preference_policy
        self.pricing_policy = pricing_policy
        #: NodePool -> the last ConsolidationSkipped sentence reported on it (events once per change).
        self.skips_reported: dict[str, str] = {}
        #: Node -> the last DisruptionBlocked sentence reported on it (pods no simulation can move; once per change).
        self.blocked_reported: dict[str, str] = {}
        #: Pods carrying the v1alpha5 ``karpenter.sh/do-not-evict`` already warned about (once per pod).
        self.legacy_do_not_evict: set[str] = set()
        self.ctx = ctx
        self.terminator = terminator
        self.options = options or DecisionOptions()
        self.poll_period = poll_period
        self.validation_delay = validation_delay
        self.replacement_timeout = replacement_timeout
        self.drift_check_period = drift_check_period
        self.command: Command | None = None
        self.last_decision_at = float("-inf")
        self._pods_seen: dict[str, frozenset[str]] = {}
        self._last_pod_event: dict[str, float] = {}
        self._cloud_drift: dict[str, tuple[float, str | None]] = {}
        # Incremental view building (only changed nodes are converted again) and the parsed NodePools by
        # resourceVersion: each pass used to convert the whole cluster, most of the controller's time at scale.
        self.views = ViewCache()
        self._pod_sets: dict[str, tuple[list[Obj], frozenset[str]]] = {}
        self.executed: list[Decision] = []
        #: Per command id: retries of a command whose writes the API server refused.
        self.backoff = Backoff(initial=1.0, maximum=60.0)

    # --- the pass ----------------------------------------------------------------------------

    def reconcile(self, state: ClusterState | None = None) -> Decision | None:
        """One pass (see module docstring). Returns the decision executed in this pass, if any."""
        state = state or snapshot(self.ctx.cluster)
        now = self.ctx.clock()
        self._track_pod_events(state, now)
        self._warn_legacy_do_not_evict(state)
        self._restamp(state)
        self._recover(state, now)
        view = self.view(state, now)
        self._mark_drifted(state, view)
        self._expire(view, now)
        if self.command is not None:
            return self._advance(self.command, state, view, now)
        if now - self.last_decision_at < self.poll_period:
            return None
        self.last_decision_at = now
        started = time.perf_counter()
        outcome = decide_pass(view, now, self.decision_options())
        decision = outcome.decision
        self._report_skips(outcome.skipped, state, searched=decision is None)
        self._report_blocked(outcome.blocked, state, searched=decision is None)
        for method in outcome.stopped_early:
            self.ctx.metrics.disruption_consolidation_timeouts.labels(consolidation_type(method)).inc()
        self._observe_budgets(view, now)
        self.ctx.metrics.disruption_evaluation_duration.labels("all", "").observe(time.perf_counter() - started)
        if decision is not None:
            log.info("disruption decided: %s", decision.message(),
                     extra={"method": decision.method, "nodes": [c.name for c in decision.candidates]})
            self.command = Command(decision, now)
        return None

    def decision_options(self) -> DecisionOptions:
        """:attr:`options` with the PricingPolicy in force now (re-read every pass: the file may have changed)."""
        policy = self.pricing_policy() if self.pricing_policy is not None else None
        if policy is self.options.consolidation.pricing:
            return self.options
        return dataclasses.replace(self.options, consolidation=dataclasses.replace(
            self.options.consolidation, pricing=policy))

    def _report_skips(self, skipped: tuple[Skip, ...], state: ClusterState, searched: bool) -> None:
        """A ``ConsolidationSkipped`` Event (and a log line) per NodePool whose reported skip changed. After a
        pass that searched everything (no decision) a NodePool without a skip forgets its last one, so the same
        skip coming back later is reported again."""
        best: dict[str, Skip] = {}
        for skip in skipped:
            for pool in skip.pools:
                known = best.get(pool)
                if known is None or (len(skip.candidates), skip.saving.usd_per_hour) > (
                        len(known.candidates), known.saving.usd_per_hour):
                    best[pool] = skip
        if searched:
            for pool in [p for p in self.skips_reported if p not in best]:
                del self.skips_reported[pool]
        for pool, skip in sorted(best.items()):
            message = skip.message()
            if self.skips_reported.get(pool) == message:
                continue
            self.skips_reported[pool] = message
            log.info("consolidation skipped: %s", message,
                     extra={"nodepool": pool, "method": skip.method, "nodes": list(skip.candidates)})
            doc = state.nodepools.get(pool)
            if doc is not None:
                self.ctx.event(doc, "ConsolidationSkipped", message)

    def _warn_legacy_do_not_evict(self, state: ClusterState) -> None:
        """One warning line per live pod annotated ``karpenter.sh/do-not-evict: "true"`` (v1alpha5), the first
        pass it is seen. Karpenter v1 ignores that annotation; nodewright still honours it like
        ``karpenter.sh/do-not-disrupt`` (docs/karpenter-compatibility.md), the safer reading of what the pod's
        owner asked, and says so, so the pod can be re-annotated before a move to Karpenter v1."""
        seen = {pod_key(pod) for pod in state.pods.values()
                if (meta(pod).get("annotations") or {}).get(L.V1ALPHA5_DO_NOT_EVICT) == "true"}
        for key in sorted(seen - self.legacy_do_not_evict):
            log.warning("pod %s has %s: Karpenter v1 ignores it; nodewright honours it as %s (its node is not "
                        "disrupted voluntarily); annotate the pod %s: \"true\" instead", key, L.V1ALPHA5_DO_NOT_EVICT,
                        L.DO_NOT_DISRUPT, L.DO_NOT_DISRUPT, extra={"pod": key})
        self.legacy_do_not_evict = seen

    def _report_blocked(self, blocked: Mapping[str, str], state: ClusterState, searched: bool) -> None:
        """A ``DisruptionBlocked`` Event on the Node (and a log line) when a simulation moving its pods failed for
        pods no node can take again (Karpenter publishes the pods' scheduling errors the same way), once per
        change; after a pass that searched everything, nodes no longer blocked are forgotten."""
        if searched:
            for name in [n for n in self.blocked_reported if n not in blocked]:
                del self.blocked_reported[name]
        for name, message in sorted(blocked.items()):
            if self.blocked_reported.get(name) == message:
                continue
            self.blocked_reported[name] = message
            log.info("disruption blocked: node %s: %s", name, message, extra={"node": name})
            doc = state.nodes.get(name)
            if doc is not None:
                self.ctx.event(doc, "DisruptionBlocked", message)

    def view(self, state: ClusterState, now: float) -> ClusterView:
        """The pure decision inputs of ``state`` (instance types from the cloud provider, per NodePool)."""
        view = self.views.build(state, now, self._instance_types(state), self._last_pod_event,
                                self._drift_reasons(state, now))
        if (self.min_values_policy, self.preference_policy, self.static_capacity) != (
                view.min_values_policy, view.preference_policy, view.static_capacity):
            view = dataclasses.replace(view, min_values_policy=self.min_values_policy,
                                       preference_policy=self.preference_policy, static_capacity=self.static_capacity)
        view = self._with_buffers(view)
        names = self.nominated(state) if self.nominated is not None else set()
        if not names or not any(n.name in names or n.nodeclaim in names for n in view.nodes):
            return view
        # Copies (the cached view's nodes are shared across passes) held like do-not-disrupt nodes.
        nodes = [dataclasses.replace(n, do_not_disrupt=True) if n.name in names or n.nodeclaim in names else n
                 for n in view.nodes]
        return dataclasses.replace(view, nodes=nodes)

    def _with_buffers(self, view: ClusterView) -> ClusterView:
        """``view`` with the CapacityBuffer virtual pods each node holds added to its pods (copies: the cached
        view's nodes are shared across passes)."""
        held = self.buffers() if self.buffers is not None else {}
        if not held or not any(n.name in held for n in view.nodes):
            return view
        nodes = []
        for node in view.nodes:
            virtual = held.get(node.name)
            if virtual:
                node = dataclasses.replace(node, pods=[*node.pods, *virtual],
                                           view=dataclasses.replace(node.view, pods=[*node.view.pods, *virtual]))
            nodes.append(node)
        return dataclasses.replace(view, nodes=nodes)

    def _observe_budgets(self, view: ClusterView, now: float) -> None:
        """``karpenter_nodepools_allowed_disruptions`` / ``..._nodes_consuming_budgets{nodepool, reason}`` and
        ``karpenter_voluntary_disruption_eligible_nodes{reason}`` at a decision pass (Karpenter sets them in
        ``BuildDisruptionBudgetMapping`` and per method's candidate list)."""
        metrics = self.ctx.metrics
        counts = pool_counts(view.nodes)
        for reason in (REASON_EMPTY, REASON_DRIFTED, REASON_UNDERUTILIZED):
            for name, pool in view.pools.items():
                total, disrupting = counts.get(name, (0, 0))
                allowed = allowed_disruptions(pool.budgets, reason, total, 0, now)
                metrics.nodepools_allowed_disruptions.labels(name, reason).set(
                    _GO_MAX_INT32 if allowed == UNLIMITED else allowed)
                metrics.nodepools_nodes_consuming_budgets.labels(name, reason).set(disrupting)
        eligible = {REASON_EMPTY: len(empty_candidates(view, now)),
                    REASON_DRIFTED: len(drifted_candidates(view, now)),
                    REASON_UNDERUTILIZED: len(underutilized_candidates(view, now))}
        for reason, count in eligible.items():
            metrics.disruption_eligible_nodes.labels(reason.lower()).set(count)

    # --- inputs ------------------------------------------------------------------------------

    def _instance_types(self, state: ClusterState) -> dict[str, list[InstanceType]]:
        return nodepool_instance_types(self.ctx, state, "disruption")[0]

    def _drift_reasons(self, state: ClusterState, now: float) -> dict[str, str | None]:
        for name in [n for n in self._cloud_drift if n not in state.nodeclaims]:
            del self._cloud_drift[name]
        out: dict[str, str | None] = {}
        for name, claim in state.nodeclaims.items():
            if is_deleting(claim) or state.node_for(claim) is None:
                continue
            checked = self._cloud_drift.get(name)
            if checked is None or now - checked[0] >= self.drift_check_period:
                checked = (now, self._ask_cloud(claim, state))
                self._cloud_drift[name] = checked
            out[name] = checked[1]
        return out

    def _ask_cloud(self, claim: Obj, state: ClusterState) -> str | None:
        try:
            return self.ctx.cloud.is_drifted(state.models.nodeclaim(claim))
        except CloudProviderError as err:
            self.ctx.cloud_error("disruption", "IsDrifted", err)
        except NodewrightValidationError:
            pass
        return None

    def _track_pod_events(self, state: ClusterState, now: float) -> None:
        """A node's last pod event is the last pass its set of bound pods changed (first sight: none)."""
        current = {name: self._pod_set(name, state.pods_on(name)) for name in state.nodes}
        for name, pods in current.items():
            seen = self._pods_seen.get(name)
            if seen is not None and seen is not pods and seen != pods:
                self._last_pod_event[name] = now
        self._pods_seen = current
        self._pod_sets = {name: entry for name, entry in self._pod_sets.items() if name in current}
        for name in [n for n in self._last_pod_event if n not in current]:
            del self._last_pod_event[name]

    def _pod_set(self, node: str, pods: list[Obj]) -> frozenset[str]:
        """The keys of ``pods``; the same (unchanged) pod objects as last pass have the same keys."""
        hit = self._pod_sets.get(node)
        if hit is not None and len(hit[0]) == len(pods) and all(a is b for a, b in zip(hit[0], pods, strict=True)):
            return hit[1]
        keys = frozenset(pod_key(p) for p in pods)
        self._pod_sets[node] = (list(pods), keys)
        return keys

    def _restamp(self, state: ClusterState) -> None:
        """Stamp the current NodePool hash on claims stamped with another hash version (Karpenter's hash
        controller), so a changed hash definition never drifts a fleet."""
        hashes: dict[str, str] = {}
        for claim in state.nodeclaims.values():
            m = meta(claim)  # read in place: labels_of/annotations_of copy, for every claim on every pass
            pool = (m.get("labels") or {}).get(L.NODEPOOL, "")
            doc = state.nodepools.get(pool)
            if doc is None or is_deleting(claim):
                continue
            if (m.get("annotations") or {}).get(L.NODEPOOL_HASH_VERSION) == NODEPOOL_HASH_VERSION:
                continue
            if pool not in hashes:
                hashes[pool] = nodepool_hash(doc)
            patch = {"metadata": {"annotations": {L.NODEPOOL_HASH: hashes[pool],
                                                  L.NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}}}
            try:
                self.ctx.cluster.patch(r.NODECLAIMS, name_of(claim), patch)
            except KubeError as err:
                log.info("re-stamping nodeclaim %s: %s", name_of(claim), err)

    def _mark_drifted(self, state: ClusterState, view: ClusterView) -> None:
        """Set ``Drifted=True`` (reason = why) on drifted NodeClaims; remove the condition when drift is gone."""
        for node in view.nodes:
            claim = state.nodeclaims.get(node.nodeclaim)
            if claim is None or is_deleting(claim):
                continue
            reason = drift_reason(node, view)
            conditions = list((claim.get("status") or {}).get("conditions") or [])
            current = next((c for c in conditions if c.get("type") == L.CONDITION_DRIFTED), None)
            try:
                if reason is not None and (current is None or current.get("status") != "True"
                                           or current.get("reason") != reason):
                    set_nodeclaim_condition(self.ctx, claim, L.CONDITION_DRIFTED, True, reason,
                                            f"NodeClaim is drifted: {reason}")
                elif reason is None and current is not None:
                    kept = [c for c in conditions if c.get("type") != L.CONDITION_DRIFTED]
                    self.ctx.cluster.patch_status(r.NODECLAIMS, name_of(claim), {"conditions": kept})
            except KubeError as err:
                log.info("updating the Drifted condition of %s: %s", name_of(claim), err,
                         extra={"nodeclaim": name_of(claim)})

    # --- expiration --------------------------------------------------------------------------

    def _expire(self, view: ClusterView, now: float) -> None:
        decision = decide_expiration(view, now)
        if decision is None:
            return
        self._count(decision.decision, decision.reason, decision.method, [c.nodepool for c in decision.candidates])
        for node in decision.candidates:
            message = f"Expiring node {node.name}: older than expireAfter ({node.expire_after:.0f}s)"
            try:
                if self.terminator.delete_nodeclaim(node.nodeclaim, decision.reason, message):
                    log.info(message, extra={"nodeclaim": node.nodeclaim, "node": node.name})
            except KubeError as err:  # the next pass finds it expired again
                warn_limited(log, f"expiring {err.status}", "expiring nodeclaim %s: %s", node.nodeclaim, err,
                             extra={"nodeclaim": node.nodeclaim, "status": err.status})
        self.executed.append(decision)

    # --- the command -------------------------------------------------------------------------

    def _advance(self, command: Command, state: ClusterState, view: ClusterView, now: float) -> Decision | None:
        if command.phase == VALIDATING:
            if now - command.decided_at < self.validation_delay:
                return None
            assert command.decision is not None
            fresh = validate(command.decision, view, now, self.decision_options())
            if fresh is None:
                self.ctx.metrics.disruption_failed_validations.labels(
                    consolidation_type(command.decision.method)).inc()
                log.info("disruption decision no longer valid, dropped: %s", command.decision.message(),
                         extra={"method": command.decision.method})
                self.command = None
                return None
            command.decision = fresh
            return self._execute(command, state, now)
        return self._wait_for_replacements(command, state, now)

    def _execute(self, command: Command, state: ClusterState, now: float) -> Decision | None:
        """Record the command on the candidates, taint them, launch the replacements (module docstring of
        :mod:`nodewright.controllers.orchestration` for the order). A refused write rolls back what was done."""
        decision = command.decision
        assert decision is not None
        record = CommandRecord.new(decision.decision, decision.reason, decision.method, decision.message(),
                                   [(c.name, c.nodeclaim) for c in decision.candidates],
                                   [c.nodepool for c in decision.candidates],
                                   [plan.nodepool for plan in decision.replacements], command.decided_at)
        command.record = record
        try:
            for node in decision.candidates:
                self.ctx.cluster.patch(r.NODECLAIMS, node.nodeclaim,
                                       {"metadata": {"annotations": {COMMAND_ANNOTATION: record.annotation()}}})
                command.recorded.append(node.nodeclaim)
            for node in decision.candidates:
                self.terminator.taint(node.name)
            if not decision.replacements:
                return self._finish(command, state, now)
            for plan, name in zip(decision.replacements, record.replacement_names, strict=True):
                doc = nodeclaim_from_plan(plan, state.nodepools.get(plan.nodepool) or {})
                doc["metadata"].pop("generateName", None)
                doc["metadata"]["name"] = name
                doc["metadata"].setdefault("annotations", {})[REPLACEMENT_ANNOTATION] = record.id
                created = self.ctx.cluster.create(r.NODECLAIMS, doc)
                command.replacements.append(name_of(created))
                self.ctx.metrics.nodeclaims_created.labels(decision.reason.lower(), plan.nodepool, "false").inc()
        except KubeError as err:
            self._write_failed(record, "executing", err, now)
            self._roll_back(command, state, now)
            return None
        self.ctx.metrics.disruption_replacements.labels(decision.reason.lower()).inc(len(command.replacements))
        command.phase, command.launched_at = WAITING, now
        log.info("launched %d replacement(s) for %s: %s", len(command.replacements), decision.method,
                 ", ".join(command.replacements), extra={"method": decision.method, "command": record.id})
        return None

    def _wait_for_replacements(self, command: Command, state: ClusterState, now: float) -> Decision | None:
        record = command.record
        assert record is not None
        claims = [state.nodeclaims.get(name) for name in command.replacements]
        failed = any(c is None or is_deleting(c) for c in claims)
        if not failed and all(c is not None and nodeclaim_ready(c) for c in claims):
            return self._finish(command, state, now)
        if failed or now - command.launched_at >= self.replacement_timeout:
            log.warning("replacements did not become ready, rolling back: %s", record.message,
                        extra={"method": record.method, "command": record.id})
            self.ctx.metrics.disruption_queue_failures.labels(
                record.decision, record.reason.lower(), consolidation_type(record.method)).inc(
                sum(1 for c in claims if c is None or not nodeclaim_ready(c)))
            if self._roll_back(command, state, now):
                self._event_failed(record, "Replacements did not become ready; not disrupting: " + record.message)
        return None

    @staticmethod
    def _consolidation_policy(method: str, claim: Obj | None, state: ClusterState) -> str:
        """The disrupted NodeClaim's pool ``consolidationPolicy`` when a consolidation method disrupts it, else ""
        (Karpenter main reports no policy for drift, which flows through the same queue)."""
        if not consolidation_type(method) or claim is None:
            return ""
        return _pool_consolidation_policy(state.nodepools.get(nodepool_of(claim)))

    @staticmethod
    def _pods_of(claim: Obj | None, state: ClusterState) -> list[Obj] | None:
        """The pods on the NodeClaim's Node in ``state`` (None: no Node yet, the terminator lists them)."""
        node = state.node_for(claim) if claim is not None else None
        return state.pods_on(name_of(node)) if node is not None else None

    def _finish(self, command: Command, state: ClusterState, now: float) -> Decision | None:
        """Delete the candidates (the termination path drains them). A refused delete leaves the command recorded:
        the next pass (after the backoff) rebuilds it from the cluster and deletes the rest."""
        record = command.record
        assert record is not None
        if self.command is command:
            self.command = None
        try:
            for _, claim in record.candidates:
                current = state.nodeclaims.get(claim)
                if current is not None and is_deleting(current):
                    continue
                # The termination path records the event "Disrupting NodeClaim: <reason> <message>" on each claim.
                self.terminator.delete_nodeclaim(claim, record.reason, record.message,
                                                 self._consolidation_policy(record.method, current, state),
                                                 self._pods_of(current, state))
        except KubeError as err:
            self._write_failed(record, "deleting the candidates", err, now)
            return None
        self.backoff.succeeded(record.id)
        self._count(record.decision, record.reason, record.method, record.nodepools)
        log.info(record.message, extra={"method": record.method, "nodes": record.nodes, "command": record.id,
                                        **({"savings_per_hour": round(command.decision.savings, 4)}
                                           if command.decision is not None else {})})
        if command.decision is None:
            return None
        self.executed.append(command.decision)
        return command.decision

    def _roll_back(self, command: Command, state: ClusterState, now: float) -> bool:
        """Untaint the candidates, delete the replacements not Ready, drop the records. True when every write
        went through; otherwise the records stay and the next pass (after the backoff) rolls back again."""
        record = command.record
        if self.command is command:
            self.command = None
        if record is None:
            return True
        try:
            for node in record.nodes:
                self.terminator.untaint(node)
            # The recorded names too: a create whose reply was lost (a timeout, a 5xx after the commit) may have
            # made a replacement this process never heard of (deleting one that does not exist is NotFound).
            for name in dict.fromkeys([*command.replacements, *record.replacement_names]):
                claim = state.nodeclaims.get(name)
                if claim is not None and (nodeclaim_ready(claim) or is_deleting(claim)):
                    continue  # a Ready node is useful capacity; consolidation will judge it later
                try:
                    self.ctx.cluster.delete(r.NODECLAIMS, name)
                except NotFoundError:
                    pass
            for claim_name in record.nodeclaims:
                self._clear_record(claim_name, state)
        except KubeError as err:
            self._write_failed(record, "rolling back", err, now)
            return False
        self.backoff.succeeded(record.id)
        log.info("disruption command rolled back: %s", record.message,
                 extra={"method": record.method, "nodes": record.nodes, "command": record.id})
        return True

    def _clear_record(self, claim: str, state: ClusterState) -> None:
        """Remove the command annotation (and a DisruptionReason condition) from a NodeClaim not being deleted."""
        current = self.ctx.cluster.get(r.NODECLAIMS, claim) or state.nodeclaims.get(claim)
        if current is None or is_deleting(current):
            return
        if COMMAND_ANNOTATION in annotations_of(current):
            try:
                self.ctx.cluster.patch(r.NODECLAIMS, claim, {"metadata": {"annotations": {COMMAND_ANNOTATION: None}}})
            except NotFoundError:
                return
        self._clear_disruption_reason(current)

    def _clear_disruption_reason(self, claim: Obj) -> None:
        conditions = list((claim.get("status") or {}).get("conditions") or [])
        kept = [c for c in conditions if c.get("type") != L.CONDITION_DISRUPTION_REASON]
        if len(kept) != len(conditions):
            try:
                self.ctx.cluster.patch_status(r.NODECLAIMS, name_of(claim), {"conditions": kept})
            except NotFoundError:
                pass

    def _write_failed(self, record: CommandRecord, step: str, err: KubeError, now: float) -> None:
        """One line (rate-limited per step and status), the command's backoff, a Warning event on a candidate."""
        delay = self.backoff.failed(record.id, now)
        warn_limited(log, f"disruption {step} {err.status}",
                     "disruption command %s: %s failed: %s (retrying in %.0fs)", record.id, step, err, delay,
                     extra={"command": record.id, "status": err.status, "method": record.method})
        self._event_failed(record, f"Disruption {step} failed ({err.status or 'no answer'}); "
                                   f"retrying in {delay:.0f}s: {record.message}")

    def _event_failed(self, record: CommandRecord, message: str) -> None:
        for claim in record.nodeclaims[:1]:
            doc = self.ctx.cluster.get(r.NODECLAIMS, claim)
            if doc is not None:
                self.ctx.event(doc, "DisruptionFailed", message, warning=True)

    # --- the orchestration queue, rebuilt from the cluster ----------------------------------------

    def _recover(self, state: ClusterState, now: float) -> None:
        """Rebuild the queue from the commands recorded in the cluster (a restart, or a command a refused write
        interrupted), then remove the disrupted taint from Nodes no command holds (Karpenter's ``Reconcile``
        cleanup). Each recorded command is rolled back, resumed or completed (:func:`orchestration.resolve`)."""
        live = self.command.record if self.command is not None else None
        for record in sorted(recorded_commands(state).values(), key=lambda c: (c.decided_at, c.id)):
            if live is not None and record.id == live.id:
                continue
            if not self.backoff.ready(record.id, now):
                continue
            found = resolve(record, state)
            if found.action == DONE:
                continue
            command = Command(None, record.decided_at, WAITING, list(found.replacements), found.launched_at or now,
                              record=record, recorded=list(record.nodeclaims))
            if found.action == ROLL_BACK:
                log.info("rolling back the interrupted disruption command %s: %s", record.id, record.message,
                         extra={"command": record.id, "nodes": record.nodes})
                if self._roll_back(command, state, now):
                    self._event_failed(record, "Disruption interrupted before its replacements were launched; "
                                               "rolled back: " + record.message)
            elif found.action == COMPLETE:
                log.info("completing the interrupted disruption command %s: %s", record.id, record.message,
                         extra={"command": record.id, "nodes": record.nodes})
                self._finish(command, state, now)
            elif self.command is None:
                log.info("resuming the disruption command %s (waiting for %s): %s", record.id,
                         ", ".join(found.replacements), record.message, extra={"command": record.id})
                self.command = command
                live = record
        for node in stale_disrupted_nodes(state, live):
            name = name_of(node)
            try:
                self.terminator.untaint(name)
                claim = state.nodeclaim_for(node)
                if claim is not None:
                    self._clear_disruption_reason(claim)
            except KubeError as err:
                warn_limited(log, f"stale disrupted taint {err.status}",
                             "removing the stale disrupted taint from node %s: %s", name, err,
                             extra={"node": name, "status": err.status})
                continue
            log.info("removed the disrupted taint from node %s: no disruption command holds it", name,
                     extra={"node": name})

    def _count(self, decision: str, reason: str, method: str, nodepools: Iterable[str]) -> None:
        self.ctx.metrics.disruption_decisions.labels(decision, reason.lower(), consolidation_type(method)).inc()
        for nodepool in sorted(set(nodepools)):
            self.ctx.metrics.disruption_decisions_by_nodepool.labels(
                nodepool, decision, reason.lower(), consolidation_type(method)).inc()


#: Karpenter's ``consolidation_type`` label per decision method ("" for drift and expiration).
_CONSOLIDATION_TYPES = {EMPTINESS: "empty", SINGLE_NODE: "single", MULTI_NODE: "multi"}


def _pool_consolidation_policy(pool: Obj | None) -> str:
    """A NodePool dict's ``spec.disruption.consolidationPolicy`` (Karpenter's default ``WhenEmptyOrUnderutilized``)."""
    disruption = ((pool or {}).get("spec") or {}).get("disruption") or {}
    return str(disruption.get("consolidationPolicy") or "WhenEmptyOrUnderutilized")


def consolidation_type(method: str) -> str:
    """Karpenter's ``consolidation_type`` metric label of a decision ``method``."""
    return _CONSOLIDATION_TYPES.get(method, "")
