"""``nodewright simulate --snapshot FILE``: what the controllers would do to the snapshotted cluster right now.

Nothing here decides anything of its own: the snapshot's objects are restored into an in-memory cluster
(:meth:`nodewright.kube.memory.InMemoryCluster.restore`, keeping creation/deletion timestamps and finalizers), the
simulated cloud provider serves the bundled catalog, and

- **disruption** is the disruption controller's view (:meth:`nodewright.controllers.disruption.DisruptionController.
  view`: the one conversion of :mod:`nodewright.state`, pods nominated by the provisioner held) and
  :func:`nodewright.disruption.decide_pass`, run once per graceful method in Karpenter's order (emptiness, drift,
  multi-node, single-node consolidation: Karpenter's ``disruption.Controller`` methods list) so each method's move
  is shown, and which one acts this pass (the first with a decision, as in Karpenter); expiration (forceful,
  not budgeted) beside them;
- for **every node no method disrupts**, the reason, from the candidate rules of :mod:`nodewright.disruption`
  (``base_problem``: ``karpenter.sh/do-not-disrupt``, PDBs, not initialized; ``consolidation_problem``:
  ``consolidateAfter``, ``consolidationPolicy``, static pools, target utilization), the NodePool's budget for the
  reason, a move skipped for its saving (minimum saving) and, for the first :data:`EXPLAIN_SIMULATIONS` candidates
  left (and the node ``explain node`` asks about), a single-node simulation (its pods fit nowhere else, or no cheaper replacement: Karpenter's
  "Can't replace with a cheaper node");
- **provisioning** is then :func:`nodewright.sim.decision.first_batch` (the provisioner's batch for the pending
  pods and pods of deleting nodes) on the same cluster, reported as ``simulate -f`` reports it.

``now`` is the snapshot time (``nodewright.io/snapshot-time``), else the wall clock (kubectl output). The region
is ``--region``, else the nodes' zone labels, else ``us-east-1`` (:func:`nodewright.sim.decision.infer_region`).
Prices are USD/hour; with a PricingPolicy, consolidation decides at effective marginal prices (as the controller
with ``--pricing-policy``) and each move shows its effective saving beside the list one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from nodewright.api import labels as L
from nodewright.cloud.catalog import catalog_price_source, price_table, region_zones
from nodewright.cloud.overlay import OverlayStore
from nodewright.cloud.simulated import LatencyDistribution, SimulatedCloudProvider, SimulatedEC2
from nodewright.controllers.buffer import CapacityBufferController
from nodewright.controllers.common import Context, nodepool_instance_types
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.termination import Terminator
from nodewright.disruption import METHODS, ClusterView, Decision, decide_expiration, decide_pass
from nodewright.disruption.budgets import budget_mapping
from nodewright.disruption.candidates import base_problem, consolidation_problem
from nodewright.disruption.drift import drift_reason
from nodewright.disruption.model import (
    REASON_DRIFTED,
    REASON_EMPTY,
    REASON_UNDERUTILIZED,
    Node,
)
from nodewright.disruption.simulation import Simulator
from nodewright.errors import NodewrightValidationError
from nodewright.kube.cluster import Cluster
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import condition, format_time, is_deleting, labels_of
from nodewright.metrics import Metrics
from nodewright.pricing import PricingEngine, PricingPolicy, Usage
from nodewright.scheduling import Pod, SchedulingResult
from nodewright.settings import feature_gates, min_values_policy, preference_policy, scheduler_config
from nodewright.sim.decision import DEFAULT_REGION, first_batch, infer_region, to_json
from nodewright.state.buffers import is_virtual
from nodewright.state.cluster import snapshot as read_state
from nodewright.state.models import models_for
from nodewright.whatif.snapshot import CAPACITYBUFFERS, KIND_OF, Snapshot, now_utc

log = logging.getLogger("nodewright.whatif")

#: Candidate nodes left undisrupted that get a single-node simulation of their own to say why (bounded: each is
#: a scheduling run over the whole cluster).
EXPLAIN_SIMULATIONS = 5


class FixedClock:
    """A clock stopped at ``now`` (epoch seconds)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Loaded:
    """A snapshot restored into an in-memory cluster with the simulated cloud over it."""

    cluster: Cluster
    ctx: Context
    region: str
    now: float


def restore(objects: Sequence[Mapping[str, Any]], now: float, region: str | None = None) -> Loaded:
    """An in-memory cluster holding ``objects`` as served, with :func:`simulated` over it.

    Raises:
        NodewrightValidationError: an unknown region, or two objects with the same kind, namespace and name.
    """
    clock = FixedClock(now)
    cluster = InMemoryCluster(clock, seed=0)
    buffers_on = feature_gates(os.environ).capacity_buffer
    ignored = []
    for obj in objects:
        kind = KIND_OF.get(str(obj.get("kind")))
        if kind is None:
            continue
        if kind == CAPACITYBUFFERS and not buffers_on:
            ignored.append(f"{(obj.get('metadata') or {}).get('namespace') or 'default'}/"
                           f"{(obj.get('metadata') or {}).get('name')}")
            continue
        try:
            cluster.restore(kind, dict(obj))
        except Exception as err:  # AlreadyExistsError, ValueError
            raise NodewrightValidationError(f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')!r}",
                                            str(err)) from None
    if ignored:  # as the controller: buffers are read only under the gate (docs/capacity-buffers.md)
        log.warning("%d CapacityBuffer(s) ignored (%s): the CapacityBuffer feature gate is off; set "
                    "FEATURE_GATES=CapacityBuffer=true to decide as a controller with the gate on", len(ignored),
                    ", ".join(ignored))
    return simulated(cluster, now, region)


def simulated(cluster: Cluster, now: float, region: str | None = None) -> Loaded:
    """``cluster`` (in-memory, or a live :class:`~nodewright.kube.client.KubernetesCluster`: the e2e round trip)
    with the simulated cloud provider of ``region`` (else inferred from the NodePools' zone requirements and the
    nodes' zone labels, else ``us-east-1``) and a clock stopped at ``now``.

    Raises:
        NodewrightValidationError: an unknown region.
    """
    clock = FixedClock(now)
    models = models_for(cluster)
    state = read_state(cluster)
    chosen = region
    if chosen is None:
        pools = [models.nodepool_spec(doc) for doc in state.nodepools.values()]
        # infer_region takes the first zone it finds: the first readable node is enough (no need to convert all).
        first = next((n for n in (models.node(doc) for doc in state.nodes.values()) if n is not None), None)
        chosen = infer_region(pools, [first] if first is not None else []) or DEFAULT_REGION
    try:
        zones = region_zones(chosen)
    except (KeyError, ValueError) as err:
        raise NodewrightValidationError("--region", f"unknown region {chosen!r}: {err}") from None
    ec2 = SimulatedEC2(clock, random.Random(0), LatencyDistribution(30.0, 30.0))
    cloud = SimulatedCloudProvider(ec2, chosen, zones, lambda name: cluster.get(KIND_OF["EC2NodeClass"], name),
                                   models.kubelet, reserved_capacity=feature_gates(os.environ).reserved_capacity)
    return Loaded(cluster, Context(cluster, cloud, clock, Metrics(), "simulate",
                                   overlays=OverlayStore(feature_gates(os.environ).node_overlay)), chosen, now)


def _real(pods: Sequence[Pod]) -> int:
    """How many of ``pods`` are real (not CapacityBuffer virtual pods)."""
    return sum(1 for p in pods if not is_virtual(p))


def _usage(node: Node) -> Usage | None:
    return Usage.from_labels(node.labels)


def _decision_json(decision: Decision, engine: PricingEngine | None, fleet: Sequence[Usage]) -> dict[str, Any]:
    # CapacityBuffer virtual pods are re-placed, never evicted (they are not objects).
    evicted = sorted(p.key for c in decision.candidates for p in c.pods if not is_virtual(p))
    buffered = sum(1 for c in decision.candidates for p in c.pods if is_virtual(p))
    list_saving = round(decision.current_price - decision.replacement_price, 6)
    out: dict[str, Any] = {
        "method": decision.method,
        "reason": decision.reason,
        "decision": decision.decision,
        "message": decision.message(),
        "candidates": [{"node": c.name, "nodeclaim": c.nodeclaim, "nodepool": c.nodepool,
                        "instance_type": c.instance_type, "capacity_type": c.capacity_type, "zone": c.zone,
                        "price_per_hour": round(c.price, 6), "pods": _real(c.pods),
                        **({"drift": decision.detail[c.name]} if c.name in decision.detail else {})}
                       for c in decision.candidates],
        "replacements": [{"nodepool": p.nodepool, "instance_type": p.instance_type.name,
                          "capacity_type": p.capacity_type, "zone": p.zone, "price_per_hour": round(p.price, 6)}
                         for p in decision.replacements],
        "savings_per_hour": list_saving,
        "evicted_pods": evicted,
        **({"buffer_pods": buffered} if buffered else {}),
    }
    if engine is not None:
        removed = [u for u in (_usage(c) for c in decision.candidates) if u is not None]
        added = [Usage(p.instance_type.name, p.zone, p.capacity_type) for p in decision.replacements]
        try:
            out["effective_savings_per_hour"] = (round(decision.saving.usd_per_hour, 6)
                                                 if decision.saving is not None and decision.effective
                                                 else engine.saving(list(fleet), removed, added))
        except ValueError:
            out["effective_savings_per_hour"] = None
    return out


def _budget_line(view: ClusterView, node: Node, reason: str, allowed: Mapping[str, int]) -> str | None:
    if allowed.get(node.nodepool, 0) > 0:
        return None
    return (f"disruption budget of nodepool {node.nodepool!r} allows 0 {reason} disruptions now "
            f"(budgets: {', '.join(b.nodes for b in view.pools[node.nodepool].budgets) or 'none'})")


def node_reason(node: Node, view: ClusterView, now: float, budgets: Mapping[str, Mapping[str, int]],
                skipped: Mapping[str, str], blocked: Mapping[str, str], simulator: Simulator | None,
                nominated: frozenset[str] = frozenset()) -> str:
    """Why no graceful method disrupts ``node`` now, in Karpenter's vocabulary (see module docstring).

    ``budgets``: reason -> NodePool -> disruptions allowed (:func:`nodewright.disruption.budgets.budget_mapping`);
    ``skipped``: node -> why a move with it was skipped for its saving; ``blocked``: node -> why its pods cannot
    move; ``simulator``: when given, a single-node simulation explains a candidate left over; ``nominated``: nodes
    the provisioner nominated pending pods to."""
    if node.name in nominated or node.nodeclaim in nominated:
        return "node is nominated for a pending pod"
    reason = REASON_EMPTY if not node.pods else REASON_UNDERUTILIZED
    problem = base_problem(node, view.pools, view.pdbs, reason)
    if problem is not None:
        return problem
    drifted = drift_reason(node, view)
    if drifted is not None:
        budget = _budget_line(view, node, REASON_DRIFTED, budgets[REASON_DRIFTED])
        return f"drifted ({drifted}); " + (budget or "waits for the drift method's next pass (one move per pass)")
    pool = view.pools[node.nodepool]
    problem = consolidation_problem(node, pool, now, reason)
    if problem is not None:
        return problem
    budget = _budget_line(view, node, reason, budgets[reason])
    if budget is not None:
        return budget
    if node.name in blocked:
        return blocked[node.name]
    if node.name in skipped:
        return skipped[node.name]
    if simulator is None:
        return "consolidation candidate not simulated in this pass (the search is bounded per pass)"
    result = simulator.simulate([node], max_new=1)
    if result.unschedulable:
        key, why = next(iter(result.unschedulable.items()))
        return f"not all pods would schedule elsewhere: {key}: {why}"
    if not result.new_nodeclaims:
        return "its pods fit on other nodes, but a move with more savings acts first this pass"
    cheapest = min(result.new_nodeclaims, key=lambda p: p.price)
    if cheapest.price >= node.price:
        return (f"Can't replace with a cheaper node: cheapest replacement {cheapest.instance_type.name} "
                f"${cheapest.price:.4f}/h, the node costs ${node.price:.4f}/h")
    return (f"a cheaper replacement exists ({cheapest.instance_type.name} ${cheapest.price:.4f}/h vs "
            f"${node.price:.4f}/h) but a move with more savings acts first this pass")


def disruption_dry_run(loaded: Loaded, policy: PricingPolicy | None = None,
                       explain_simulations: int = EXPLAIN_SIMULATIONS,
                       nominated: frozenset[str] = frozenset(), explain: frozenset[str] = frozenset(),
                       held: Mapping[str, list[Pod]] | None = None) -> dict[str, Any]:
    """Every graceful method's decision on the snapshot (see module docstring), JSON-ready. ``nominated``:
    Nodes/NodeClaims the provisioner's batch nominated pending pods to (never disrupted, as the controller holds
    them); ``explain``: nodes that get their single-node simulation whatever ``explain_simulations`` says;
    ``held``: Node -> the CapacityBuffer virtual pods the batch placed there (they join its pods: buffered room is
    never consolidated away, as in the controller).

    Returns:
        ``{"now", "acts" (the method that acts this pass, or None), "methods": [{"method", "eligible",
        "decision" (or None), "skipped": [sentences], "stopped_early"}], "expiration" (decision or None),
        "nodes": [{"node", "nodepool", "instance_type", "price_per_hour", "pods", "disrupted_by", "reason"}],
        "unmanaged_nodes" (Nodes no NodeClaim owns and no NodePool labels), "unmanaged_by_nodepool" ({NodePool:
        Nodes labelled ``karpenter.sh/nodepool`` with its name that no NodeClaim owns}), "budgets": {name: {reason:
        allowed}}}``.
    """
    ctx, now = loaded.ctx, loaded.now
    models_for(loaded.cluster).use_scheduler_config(scheduler_config(os.environ))  # default topology spread
    controller = DisruptionController(ctx, Terminator(ctx), nominated=lambda _state: set(nominated),
                                      min_values_policy=min_values_policy(os.environ),
                                      preference_policy=preference_policy(os.environ),
                                      pricing_policy=None if policy is None else (lambda: policy),
                                      buffers=None if not held else (lambda: held))
    state = read_state(loaded.cluster)
    view = controller.view(state, now)
    options = controller.decision_options()
    engine = PricingEngine(policy, price_table(loaded.region)) if policy is not None else None
    fleet = [u for u in (_usage(n) for n in view.nodes) if u is not None]
    methods: list[dict[str, Any]] = []
    acting: Decision | None = None
    skipped: dict[str, str] = {}
    blocked: dict[str, str] = {}
    disrupted_by: dict[str, str] = {}
    # One simulator for the whole pass, as in the controller (its screen and candidates are built once).
    simulator = Simulator(view)
    for method in METHODS:
        outcome = decide_pass(view, now, dataclasses.replace(options, methods=(method,)), simulator)
        decision = outcome.decision
        for skip in outcome.skipped:
            for name in skip.candidates:
                skipped.setdefault(name, f"consolidation skipped: {skip.message()}")
        blocked.update(outcome.blocked)
        if decision is not None:
            for c in decision.candidates:
                disrupted_by.setdefault(c.name, method)
            if acting is None:
                acting = decision
        methods.append({"method": method, "evaluated": decision.evaluated if decision else 0,
                        "decision": None if decision is None else _decision_json(decision, engine, fleet),
                        "skipped": [s.message() for s in outcome.skipped],
                        "stopped_early": bool(outcome.stopped_early)})
    expired = decide_expiration(view, now)
    for c in expired.candidates if expired is not None else []:
        disrupted_by.setdefault(c.name, "expiration")  # forceful: it goes whatever the graceful methods decide
    budgets = {reason: budget_mapping(view.pools, view.nodes, reason, now)
               for reason in (REASON_EMPTY, REASON_DRIFTED, REASON_UNDERUTILIZED)}
    explained = 0
    nodes: list[dict[str, Any]] = []
    for node in sorted(view.nodes, key=lambda n: n.name):
        by = disrupted_by.get(node.name)
        if by is not None:
            why = "disrupted by " + by + ("" if by == "expiration" or (acting is not None and by == acting.method)
                                          else " (after the method acting this pass)")
        else:
            use = simulator if explained < explain_simulations or node.name in explain else None
            why = node_reason(node, view, now, budgets, skipped, blocked, use, nominated)
            if use is not None and why.startswith(("not all pods", "its pods fit", "Can't replace", "a cheaper")):
                explained += 1
        nodes.append({"node": node.name, "nodepool": node.nodepool, "instance_type": node.instance_type,
                      "capacity_type": node.capacity_type, "zone": node.zone,
                      "price_per_hour": round(node.price, 6), "pods": _real(node.pods), "disrupted_by": by,
                      "reason": why,
                      **({"buffer_pods": len(node.pods) - _real(node.pods)} if len(node.pods) > _real(node.pods)
                         else {})})
    return {
        "now": format_time(now),
        "acts": acting.method if acting is not None else None,
        "methods": methods,
        "expiration": None if expired is None else _decision_json(expired, engine, fleet),
        "nodes": nodes,
        "unmanaged_nodes": len(view.unmanaged),
        # Nodes labelled karpenter.sh/nodepool that no NodeClaim owns, by that NodePool (explain nodepool counts
        # them): the view leaves them out (neither candidates nor destinations), so they are counted from the state.
        "unmanaged_by_nodepool": dict(sorted(Counter(
            labels_of(doc)[L.NODEPOOL] for doc in state.nodes.values()
            if labels_of(doc).get(L.NODEPOOL) and state.nodeclaim_for(doc) is None).items())),
        "budgets": {name: {reason: min(budgets[reason].get(name, 0), 1 << 30) for reason in budgets}
                    for name in sorted(view.pools)},
    }


def dry_run(snap: Snapshot, region: str | None = None, pricing: tuple[PricingPolicy, str] | None = None,
            explain: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``simulate --snapshot``: ``{"snapshot": {...}, "region", "price_source", "fleet": {...},
    "disruption": ..., "provisioning": ...}`` (see :func:`disruption_dry_run` and
    :func:`nodewright.sim.decision.to_json`). With ``pricing`` (policy, label), effective prices beside list;
    ``explain``: nodes whose reason is always simulated (``explain node``).

    Raises:
        NodewrightValidationError: see :func:`restore`.
    """
    now = snap.time if snap.time is not None else now_utc()
    loaded = restore(snap.objects, now, region)
    policy = pricing[0] if pricing else None
    provisioning, disruption, created = one_pass(loaded, policy, pricing[1] if pricing else "", explain)
    fleet_price = round(sum(n["price_per_hour"] for n in disruption["nodes"]), 6)
    fleet: dict[str, Any] = {"nodes": len(disruption["nodes"]), "price_per_hour": fleet_price}
    if policy is not None:
        engine = PricingEngine(policy, price_table(loaded.region))
        usages = [Usage(n["instance_type"], n["zone"], n["capacity_type"]) for n in disruption["nodes"]
                  if n["instance_type"] and n["zone"] and n["capacity_type"]]
        fleet["effective_price_per_hour"] = round(engine.bill(usages).total_usd_per_hour, 6)
    return {
        "snapshot": {"source": snap.source, "time": format_time(now), "time_known": snap.time is not None,
                     "karpenter_version": snap.karpenter_version, "redacted": snap.redacted,
                     "objects": len(snap.objects), "nodes": len(snap.of_kind("Node")),
                     "pods": len(snap.of_kind("Pod"))},
        "region": loaded.region,
        "price_source": catalog_price_source(loaded.region),
        "fleet": fleet,
        "nodeclaims_created": len(created),
        "disruption": disruption,
        "provisioning": provisioning,
    }


def one_pass(loaded: Loaded, policy: PricingPolicy | None = None, label: str = "",
             explain: frozenset[str] = frozenset()) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """One controller pass over ``loaded``: (provisioning JSON, disruption JSON, names of the NodeClaims the batch
    created). As in the controller, the provisioner's batch runs first and disruption then holds the Nodes and
    NodeClaims it nominated pods to. ``loaded`` may be a restored snapshot or the live cluster (the e2e round trip
    compares the two)."""
    existing_claims = {str(c["metadata"]["name"]) for c in loaded.cluster.list(KIND_OF["NodeClaim"])}
    provisioning, result = provisioning_decision(loaded, policy, label)
    created = {str(c["metadata"]["name"]) for c in loaded.cluster.list(KIND_OF["NodeClaim"])} - existing_claims
    # Virtual pods (CapacityBuffers) are never nominated: only nodes given a real pod are held for it.
    nominated = {target for target, pods in result.existing.items() if not all(is_virtual(p) for p in pods)}
    disruption = disruption_dry_run(loaded, policy, nominated=frozenset(nominated | created),
                                    explain=explain, held=buffer_room(loaded, result))
    return provisioning, disruption, created


def buffer_room(loaded: Loaded, result: SchedulingResult) -> Mapping[str, list[Pod]]:
    """Node -> the CapacityBuffer virtual pods ``result`` (the batch, which included them) placed there: the buffer
    controller resolves the restored buffers again (the same virtual pods) and observes the batch, as the
    controller does after each provisioning run. Empty without buffers (restored only under the gate)."""
    if not loaded.cluster.list(CAPACITYBUFFERS):
        return {}
    buffers = CapacityBufferController(loaded.ctx, enabled=True)
    buffers.reconcile(read_state(loaded.cluster))
    buffers.observe(result, read_state(loaded.cluster), loaded.now)
    return buffers.held()


def provisioning_decision(loaded: Loaded, policy: PricingPolicy | None,
                          label: str = "") -> tuple[dict[str, Any], SchedulingResult]:
    """The provisioner's batch on the restored cluster (creates its NodeClaims there): ``simulate -f``'s JSON (plus
    ``not_ready``: :func:`not_ready_nodepools`, when some NodePool cannot launch), and the scheduling result."""
    from nodewright.pricing.report import add_effective_prices

    models = models_for(loaded.cluster)
    state = read_state(loaded.cluster)
    existing = [n for n in (models.node(doc) for doc in state.nodes.values()) if n is not None]
    pools = [models.nodepool_spec(doc) for doc in state.nodepools.values()]
    result, not_ready = launch_batch(loaded, policy)
    decision = to_json(result, loaded.region, catalog_price_source(loaded.region), pools)
    if not_ready:
        decision["not_ready"] = not_ready
    if policy is not None:
        usages = [u for u in (Usage.from_labels(n.labels) for n in existing) if u is not None]
        decision = add_effective_prices(decision, policy, price_table(loaded.region), usages, label)
    return decision, result


def launch_batch(loaded: Loaded, policy: PricingPolicy | None,
                 source: str = "the snapshot") -> tuple[SchedulingResult, dict[str, str]]:
    """The provisioner's batch on ``loaded`` (:func:`nodewright.sim.decision.first_batch`, creating its NodeClaims
    there) and the NodePools that cannot launch (:func:`not_ready_nodepools`; ``source`` names where their
    EC2NodeClasses were looked for), each to be named once: the controllers' per-pass error lines about them are
    dropped (``simulate --snapshot``, ``explain`` and ``diff`` share this)."""
    not_ready = not_ready_nodepools(loaded, source)
    with _reported_once(not_ready):
        result = first_batch(cast(InMemoryCluster, loaded.cluster),  # only the Cluster protocol is used
                             loaded.ctx.cloud, loaded.ctx.clock, policy)
    return result, not_ready


def not_ready_nodepools(loaded: Loaded, source: str = "the snapshot") -> dict[str, str]:
    """NodePool -> why the provisioner's batch launches nothing from it, for every NodePool not being deleted that
    cannot launch, by the controller's own rules: a ``Ready`` condition that is not True (Karpenter's status
    controller wrote why: ``NodeClassNotFound``, ...), else a problem of
    :func:`nodewright.controllers.common.nodepool_instance_types` (the EC2NodeClass is not in ``source``, is not
    ready, the NodePool is invalid). Without this the batch would only say ``no NodePool`` for the pods."""
    state = read_state(loaded.cluster)
    _, problems = nodepool_instance_types(loaded.ctx, state, "simulate")
    out: dict[str, str] = {}
    for name, doc in sorted(state.nodepools.items()):
        if is_deleting(doc):
            continue
        ready = condition(doc, L.CONDITION_READY)
        ref = (((doc.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
        if ready is not None and ready.get("status") != "True":
            out[name] = (f"it is not Ready ({ready.get('reason') or 'no reason given'}"
                         + (f": {ready['message']}" if ready.get("message") else "") + ")")
        elif name in problems:
            missing = ref.get("kind") == "EC2NodeClass" and str(ref.get("name")) not in state.nodeclasses
            classes = ", ".join(sorted(state.nodeclasses))
            out[name] = (f"EC2NodeClass {ref.get('name')!r} is not in {source} ("
                         + (f"its EC2NodeClasses: {classes}" if classes else "it has no EC2NodeClass")
                         + "): Karpenter holds such a NodePool not Ready (NodeClassNotFound)"
                         if missing else str(problems[name]))
    return out


@contextlib.contextmanager
def _reported_once(not_ready: Mapping[str, str]) -> Iterator[None]:
    """While the block runs, the controllers' error lines about the NodePools of ``not_ready`` are dropped: the
    output names each of them once, with the reason (the provisioner would log it again on every pass, and
    ``explain`` runs several)."""
    logger = logging.getLogger("nodewright.controllers")

    def keep(record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and getattr(record, "nodepool", None) in not_ready)

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)
