"""Node repair (feature gate ``NodeRepair``): replace the NodeClaims of Nodes the cloud provider calls unhealthy.

Karpenter's ``node.health`` controller (kubernetes-sigs/karpenter ``pkg/controllers/node/health``, main 2026-08-20),
registered only when the gate is on and the cloud provider has repair policies
(:class:`~nodewright.cloud.provider.RepairPolicySource`; AWS: :mod:`nodewright.cloud.aws.repair`):

1. A Node owned by a NodeClaim (matched by provider ID) whose condition matches a policy (type and status) is
   unhealthy; with several matches, the one whose toleration ends first counts (:func:`find_unhealthy`). The
   toleration runs from the condition's ``lastTransitionTime``.
2. Past the toleration, the safety limit (:func:`repair_permitted`): a Node of a NodePool (``karpenter.sh/nodepool``
   label on its NodeClaim) is repaired only while at most 20% of that NodePool's Nodes, rounded up, match a policy
   (any duration); a NodeClaim without a NodePool is measured against every Node of the cluster. Over the limit:
   a Warning Event ``NodeRepairBlocked`` ("more than 20% nodes are unhealthy in the nodepool" / "... in the
   cluster") on the Node, the NodeClaim and (for a NodePool) the NodePool, at most once per object per 15 minutes,
   and nothing is repaired.
3. Repair is forceful, as Karpenter's: the NodeClaim gets ``karpenter.sh/nodeclaim-termination-timestamp`` = now
   (kept when an earlier one is already past), then is deleted. Termination then deletes the Node's pods without
   eviction: NodePool disruption budgets, PodDisruptionBudgets, ``karpenter.sh/do-not-disrupt`` and the NodePool's
   ``terminationGracePeriod`` do not hold it (each pod still gets its own ``terminationGracePeriodSeconds``).
   A NodeClaim already being deleted (e.g. a drain stuck on a PDB) is only annotated, which forces its drain.
4. Before the delete, the NodeClaim's ``DisruptionReason`` condition is set True with reason ``Unhealthy`` and the
   condition in the message (nodewright's addition, Karpenter sets none here: the drain's
   ``karpenter_pods_drained_total{reason}`` and the ``simulate`` report then name the cause).
   Metrics: ``karpenter_nodeclaims_disrupted_total{reason="unhealthy", nodepool, capacity_type}`` and
   ``karpenter_nodeclaims_unhealthy_disrupted_total{condition, nodepool, capacity_type, image_id}``
   (``condition`` in snake case: ``ready``, ``kernel_ready``); log line "deleting unhealthy node".

With the AWS gate ``RebootForRepair`` (nodewright's own design: the gate is not in the Karpenter source available),
step 3 first reboots the instance (:class:`~nodewright.cloud.provider.Rebooter`, ``ec2:RebootInstances``),
records the time in the NodeClaim annotation ``nodewright.io/repair-rebooted-at`` and a Normal Event
``NodeRepairRebooted``, and counts ``nodewright_nodeclaims_repair_reboots_total{nodepool, condition}``. The node
is replaced as above only if it is still unhealthy one toleration after the reboot (after
``max(lastTransitionTime, reboot time)``). Once no policy matches the Node, the annotation is removed, so a later
failure gets a reboot again. A reboot the cloud refuses (denied, instance gone) falls through to the replacement.

The manager runs this every pass, so Karpenter's requeue-at-toleration-end becomes "checked again next pass".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nodewright.api import labels as L
from nodewright.cloud.provider import CloudProviderError, Rebooter, RepairPolicy, RepairPolicySource
from nodewright.controllers.common import (
    Context,
    capacity_type_of,
    log,
    nodepool_of,
    set_nodeclaim_condition,
    termination_mode,
    to_model,
)
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.objects import (
    Obj,
    condition,
    format_time,
    is_deleting,
    labels_of,
    meta,
    name_of,
    parse_time,
)
from nodewright.state.cluster import ClusterState, provider_id_of, snapshot
from nodewright.state.pods import is_reschedulable
from nodewright.state.pods import node_name as pod_node

#: Karpenter's ``allowedUnhealthyPercent``: at most this share of a NodePool's (or the cluster's) Nodes may be
#: unhealthy for repair to go ahead (rounded up, like a PodDisruptionBudget's percentage).
ALLOWED_UNHEALTHY_PERCENT = 20
#: Karpenter's ``DedupeTimeout`` of ``NodeRepairBlocked`` events (seconds).
BLOCKED_EVENT_DEDUPE_SECONDS = 15 * 60.0
#: Karpenter's requeue of a repair the safety limit holds (seconds).
BLOCKED_REQUEUE_SECONDS = 5 * 60.0
#: Karpenter's reason label value for repair (``metrics.UnhealthyReason``).
UNHEALTHY_REASON = "unhealthy"
#: The NodeClaim's ``DisruptionReason`` condition reason (nodewright's addition: Karpenter sets none for repair).
DISRUPTION_REASON = "Unhealthy"
NODE_REPAIR_BLOCKED = "NodeRepairBlocked"
NODE_REPAIR_REBOOTED = "NodeRepairRebooted"


@dataclass(frozen=True, slots=True)
class Unhealthy:
    """A Node condition matching a repair policy.

    Attributes:
        condition_type: the condition (``Ready``, ``KernelReady``, ...).
        status: its status (``False``, ``Unknown``).
        since: epoch seconds of its ``lastTransitionTime``.
        toleration: the policy's toleration, seconds.
    """

    condition_type: str
    status: str
    since: float
    toleration: float

    @property
    def due(self) -> float:
        """Epoch seconds at which the toleration ends."""
        return self.since + self.toleration


def find_unhealthy(node: Obj, policies: Sequence[RepairPolicy], first_seen: float) -> Unhealthy | None:
    """The policy match on ``node`` whose toleration ends first, or None when no condition matches a policy.

    Karpenter's ``findUnhealthyConditions``. A matching condition without a readable ``lastTransitionTime`` counts
    from ``first_seen`` (when this controller first saw it so) rather than from the epoch, which would repair at
    once.
    """
    best: Unhealthy | None = None
    for policy in policies:
        cond = condition(node, policy.condition_type)
        if cond is None or cond.get("status") != policy.condition_status:
            continue
        since = parse_time(cond.get("lastTransitionTime"))
        found = Unhealthy(policy.condition_type, policy.condition_status,
                          first_seen if since is None else since, policy.toleration_seconds)
        if best is None or found.due < best.due:
            best = found
    return best


def matches_policy(node: Obj, policies: Sequence[RepairPolicy]) -> bool:
    """Whether any condition of ``node`` matches a policy, however long it has held (the safety limit's count)."""
    return any((condition(node, p.condition_type) or {}).get("status") == p.condition_status for p in policies)


def unhealthy_threshold(total: int) -> int:
    """How many of ``total`` Nodes may be unhealthy: ``ceil(total x 20%)`` (Karpenter:
    ``GetScaledValueFromIntOrPercent("20%", total, roundUp=true)``; 3 nodes -> 1, 10 -> 2, 11 -> 3)."""
    return math.ceil(total * ALLOWED_UNHEALTHY_PERCENT / 100)


def repair_permitted(unhealthy: int, total: int) -> bool:
    """Karpenter's ``areNodesHealthy``: repair goes ahead while ``unhealthy <= unhealthy_threshold(total)``."""
    return unhealthy <= unhealthy_threshold(total)


def condition_label(condition_type: str) -> str:
    """The ``condition`` label: the type in snake case (Karpenter ``pretty.ToSnakeCase``: ``KernelReady`` ->
    ``kernel_ready``)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", condition_type).lower()


class RepairController:
    """Repairs unhealthy Nodes (see module docstring).

    Args:
        ctx: dependencies; ``ctx.cloud`` supplies the policies (:class:`RepairPolicySource`).
        reboot: the AWS gate ``RebootForRepair``: reboot before replacing (needs a :class:`Rebooter` cloud).

    Attributes:
        repaired: names of the NodeClaims deleted for repair, in order (tests, the simulator).
        rebooted: names of the NodeClaims whose instance was rebooted, in order.
    """

    def __init__(self, ctx: Context, reboot: bool = False) -> None:
        self.ctx = ctx
        cloud = ctx.cloud
        self.policies: tuple[RepairPolicy, ...] = (
            tuple(cloud.repair_policies()) if isinstance(cloud, RepairPolicySource) else ())
        self.reboot = reboot and isinstance(cloud, Rebooter)
        if reboot and not self.reboot:
            log.warning("RebootForRepair=true but the %s cloud provider cannot reboot instances: repair replaces them",
                        getattr(cloud, "name", "?"))
        self.repaired: list[str] = []
        self.rebooted: list[str] = []
        self._first_seen: dict[str, float] = {}
        self._blocked_sent: dict[tuple[str, str], float] = {}

    @property
    def enabled(self) -> bool:
        """Whether the cloud has any policy (Karpenter registers the controller only then)."""
        return bool(self.policies)

    def reconcile(self, state: ClusterState | None = None) -> list[str]:
        """One pass over every Node; returns the NodeClaims deleted for repair in this pass."""
        if not self.policies:
            return []
        state = state or snapshot(self.ctx.cluster)
        now = self.ctx.clock()
        self._forget_gone(state)
        self._blocked_sent = {k: t for k, t in self._blocked_sent.items() if now - t < BLOCKED_EVENT_DEDUPE_SECONDS}
        counts = _Counts(state.nodes.values(), self.policies)
        done: list[str] = []
        for name in sorted(state.nodes):
            node = state.nodes[name]
            claim = state.nodeclaim_for(node)
            if claim is None:
                continue  # not ours (Karpenter: NodeClaimForNode not found)
            try:
                if self._reconcile_node(node, claim, counts, now):
                    done.append(name_of(claim))
            except KubeError as err:
                log.warning("repairing node %s: %s", name, err, extra={"node": name, "nodeclaim": name_of(claim)})
        self.repaired += done
        return done

    def _reconcile_node(self, node: Obj, claim: Obj, counts: _Counts, now: float) -> bool:
        finding = find_unhealthy(node, self.policies, self._seen(node, now))
        if finding is None:
            self._first_seen.pop(_uid(node), None)
            self._clear_reboot(claim)
            return False
        if now < finding.due:
            return False
        nodepool = labels_of(claim).get(L.NODEPOOL)
        if not counts.permitted(nodepool):
            self._blocked(node, claim, nodepool, now)
            return False
        if not is_deleting(claim) and self.reboot:
            rebooted = parse_time((meta(claim).get("annotations") or {}).get(L.NODECLAIM_REPAIR_REBOOTED))
            if rebooted is None:
                if self._reboot(node, claim, finding, now):
                    return False
            elif now < max(finding.since, rebooted) + finding.toleration:
                return False  # rebooted: give it one more toleration before replacing it
        self._annotate_termination(claim, now)
        if is_deleting(claim):
            return False
        return self._delete(node, claim, finding)

    def next_due(self, state: ClusterState, now: float) -> float | None:
        """Epoch seconds at which a pass next has repair work without any change in the cluster, or None: the
        earliest toleration end (or post-reboot wait end) still ahead; ``now`` + 5 minutes for a node past its
        toleration that is held (Karpenter requeues a blocked repair after 5 minutes). The simulator wakes the
        controllers then; the run loop passes every ``reconcile_period`` anyway."""
        due: list[float] = []
        for node in state.nodes.values():
            claim = state.nodeclaim_for(node)
            finding = None if claim is None else find_unhealthy(node, self.policies,
                                                                self._first_seen.get(_uid(node), now))
            if claim is None or finding is None or is_deleting(claim):
                continue
            rebooted = parse_time((meta(claim).get("annotations") or {}).get(L.NODECLAIM_REPAIR_REBOOTED))
            end = finding.due if rebooted is None else max(finding.since, rebooted) + finding.toleration
            due.append(end if end > now else now + BLOCKED_REQUEUE_SECONDS)
        return min(due) if due else None

    # --- actions -------------------------------------------------------------------------------------------

    def _reboot(self, node: Obj, claim: Obj, finding: Unhealthy, now: float) -> bool:
        """Reboot the claim's instance; False when the cloud refused (the caller replaces the node instead)."""
        try:
            self.ctx.cloud.reboot(to_model(claim))  # type: ignore[attr-defined]  # checked: Rebooter
        except CloudProviderError as err:
            self.ctx.cloud_error("node.health", "Reboot", err)
            log.warning("rebooting unhealthy node %s failed, replacing it: %s", name_of(node), err,
                        extra={"node": name_of(node), "nodeclaim": name_of(claim)})
            return False
        self.ctx.cluster.patch(r.NODECLAIMS, name_of(claim),
                               {"metadata": {"annotations": {L.NODECLAIM_REPAIR_REBOOTED: format_time(now)}}})
        self.ctx.metrics.nodeclaims_repair_reboots.labels(nodepool_of(claim),
                                                          condition_label(finding.condition_type)).inc()
        self.ctx.event(claim, NODE_REPAIR_REBOOTED,
                       f"Rebooted instance {provider_id_of(claim)}: condition {finding.condition_type}="
                       f"{finding.status} for more than {finding.toleration:.0f}s")
        log.info("rebooted unhealthy node", extra={"node": name_of(node), "nodeclaim": name_of(claim),
                                                   "condition": finding.condition_type})
        self.rebooted.append(name_of(claim))
        return True

    def _annotate_termination(self, claim: Obj, now: float) -> None:
        """Set ``karpenter.sh/nodeclaim-termination-timestamp`` to now unless one already passed (Karpenter
        ``annotateTerminationGracePeriod``)."""
        current = parse_time((meta(claim).get("annotations") or {}).get(L.NODECLAIM_TERMINATION_TIMESTAMP))
        if current is not None and current < now:
            return
        self.ctx.cluster.patch(r.NODECLAIMS, name_of(claim),
                               {"metadata": {"annotations": {L.NODECLAIM_TERMINATION_TIMESTAMP: format_time(now)}}})

    def _delete(self, node: Obj, claim: Obj, finding: Unhealthy) -> bool:
        name = name_of(claim)
        try:
            set_nodeclaim_condition(self.ctx, claim, L.CONDITION_DISRUPTION_REASON, True, DISRUPTION_REASON,
                                    f"{finding.condition_type}={finding.status} for more than "
                                    f"{finding.toleration:.0f}s")
        except NotFoundError:
            return False
        try:
            self.ctx.cluster.delete(r.NODECLAIMS, name)
        except NotFoundError:
            return False
        nodepool, capacity_type = nodepool_of(node), capacity_type_of(node)
        # Karpenter main's labels for a repair: no consolidation policy, the NodeClaim's termination mode.
        labels = (UNHEALTHY_REASON, nodepool, capacity_type, "", termination_mode(claim))
        self.ctx.metrics.nodeclaims_disrupted.labels(*labels).inc()
        self.ctx.metrics.pods_disruption_initiated.labels(*labels).inc(
            sum(1 for p in self.ctx.cluster.list(r.PODS) if pod_node(p) == name_of(node) and is_reschedulable(p)))
        image_id = str((claim.get("status") or {}).get("imageID") or "")
        self.ctx.metrics.nodeclaims_unhealthy_disrupted.labels(
            condition_label(finding.condition_type), nodepool, capacity_type, image_id).inc()
        log.info("deleting unhealthy node", extra={"node": name_of(node), "nodeclaim": name,
                                                   "condition": finding.condition_type, "status": finding.status})
        return True

    def _clear_reboot(self, claim: Obj) -> None:
        if L.NODECLAIM_REPAIR_REBOOTED in (meta(claim).get("annotations") or {}) and not is_deleting(claim):
            self.ctx.cluster.patch(r.NODECLAIMS, name_of(claim),
                                   {"metadata": {"annotations": {L.NODECLAIM_REPAIR_REBOOTED: None}}})

    def _blocked(self, node: Obj, claim: Obj, nodepool: str | None, now: float) -> None:
        """Karpenter's ``NodeRepairBlocked`` Warning Events, each object at most once per 15 minutes."""
        where = "nodepool" if nodepool is not None else "cluster"
        message = f"more than {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the {where}"
        targets = [node, claim]
        if nodepool is not None:
            pool = self.ctx.cluster.get(r.NODEPOOLS, nodepool)
            if pool is not None:
                targets.append(pool)
        sent = False
        for obj in targets:
            key = (str(obj.get("kind", "")), _uid(obj))
            if now - self._blocked_sent.get(key, float("-inf")) < BLOCKED_EVENT_DEDUPE_SECONDS:
                continue
            self._blocked_sent[key] = now
            self.ctx.event(obj, NODE_REPAIR_BLOCKED, message, warning=True)
            sent = True
        if sent:  # logged with the events: once per 15 minutes, not every pass
            log.info("node repair blocked: %s", message, extra={"node": name_of(node), "nodeclaim": name_of(claim)})

    # --- bookkeeping ---------------------------------------------------------------------------------------

    def _seen(self, node: Obj, now: float) -> float:
        """When this controller first saw ``node`` (by uid) with a matching condition lacking a transition time."""
        return self._first_seen.setdefault(_uid(node), now)

    def _forget_gone(self, state: ClusterState) -> None:
        live = {_uid(n) for n in state.nodes.values()}
        self._first_seen = {k: v for k, v in self._first_seen.items() if k in live}


def _uid(obj: Obj) -> str:
    return str(meta(obj).get("uid") or name_of(obj))


class _Counts:
    """Nodes and unhealthy Nodes per NodePool and cluster-wide, for the safety limit (one pass)."""

    def __init__(self, nodes: Iterable[Obj], policies: Sequence[RepairPolicy]) -> None:
        self.total: dict[str | None, int] = {}
        self.unhealthy: dict[str | None, int] = {}
        for node in nodes:
            bad = matches_policy(node, policies)
            for key in {labels_of(node).get(L.NODEPOOL), None}:  # None: the whole cluster
                self.total[key] = self.total.get(key, 0) + 1
                self.unhealthy[key] = self.unhealthy.get(key, 0) + bad

    def permitted(self, nodepool: str | None) -> bool:
        return repair_permitted(self.unhealthy.get(nodepool, 0), self.total.get(nodepool, 0))
