"""Termination: drain and release Nodes and NodeClaims carrying the ``karpenter.sh/termination`` finalizer.

Karpenter's ``node/termination`` and ``nodeclaim/termination`` controllers:

Node being deleted (finalizer present):
  1. taint ``karpenter.sh/disrupted:NoSchedule`` so nothing new lands;
  2. evict pods through the Eviction API, non-critical before critical (``system-cluster-critical`` /
     ``system-node-critical``); DaemonSet pods, mirror pods and finished pods are left; a 429 (a
     PodDisruptionBudget forbids it now) is retried per pod with exponential backoff;
     ``karpenter.sh/do-not-disrupt`` pods are not evicted and block the drain;
  3. with a NodeClaim ``terminationGracePeriod`` (TGP), a pod is deleted directly once the time left before the
     node's deadline (deletion + TGP, or the ``karpenter.sh/nodeclaim-termination-timestamp`` annotation when
     earlier: node repair sets it to now) is no longer than the pod's own ``terminationGracePeriodSeconds``, so it
     still gets its full grace period; budgets and do-not-disrupt no longer hold it then;
  4. wait until the evicted pods are *gone*, not merely terminating: an evicted pod keeps running through its
     grace period (``preStop`` hooks, connection draining), and terminating the instance under it loses that
     work. The Node stays tainted meanwhile. The wait ends early for a pod stuck terminating (more than 60 s
     past its ``deletionTimestamp``, e.g. its kubelet is gone: Karpenter's ``IsStuckTerminating``) and for
     every pod once the TGP deadline has passed;
  5. terminate the instance, then release the Node's finalizer.

NodeClaim being deleted (finalizer present): delete its Node (which drains as above), wait until the Node is
gone, terminate the instance, wait until the cloud reports it gone, release the finalizer.

A Node or NodeClaim with our finalizer whose counterpart never existed is still released, so nothing is
ever left with a finalizer and nobody to remove it.

:class:`Terminator` is the API the disruption controller calls to disrupt a NodeClaim.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nodewright.api import labels as L
from nodewright.api.durations import to_seconds
from nodewright.backoff import Backoff
from nodewright.cloud.provider import CloudProviderError, NodeClaimNotFoundError
from nodewright.controllers.common import (
    Context,
    capacity_type_of,
    has_disrupted_taint,
    log,
    nodepool_of,
    remove_finalizer,
    set_nodeclaim_condition,
    snake_case,
    termination_mode,
    to_model,
)
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, NotFoundError, TooManyRequestsError
from nodewright.kube.objects import (
    Obj,
    condition,
    finalizers_of,
    is_deleting,
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_time,
)
from nodewright.logging import warn_limited
from nodewright.state.cluster import ClusterState, provider_id_of, snapshot
from nodewright.state.pods import (
    is_daemonset_pod,
    is_do_not_disrupt,
    is_mirror_pod,
    is_reschedulable,
    is_terminal,
    needs_eviction,
    pod_key,
)
from nodewright.state.pods import node_name as pod_node

DISRUPTED_TAINT = {"key": L.DISRUPTED_TAINT_KEY, "effect": L.DISRUPTED_TAINT_EFFECT}
_CRITICAL = {"system-cluster-critical", "system-node-critical"}
#: Seconds past its ``deletionTimestamp`` after which a terminating pod no longer holds the drain.
STUCK_TERMINATING_SECONDS = 60.0
#: Kubernetes' default ``terminationGracePeriodSeconds``.
DEFAULT_POD_GRACE_SECONDS = 30.0


class Terminator:
    """Disrupt NodeClaims: the entry points the disruption and interruption controllers use.

    Protocol for a voluntary disruption (as Karpenter does it): :meth:`taint` the candidates' Nodes so no
    new pods land, launch and wait for replacements, then :meth:`delete_nodeclaim`; if the replacements
    fail, :meth:`untaint` to roll back.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def taint(self, node_name: str) -> bool:
        """Add ``karpenter.sh/disrupted:NoSchedule`` to the Node; False when the Node does not exist."""
        node = self.ctx.cluster.get(r.NODES, node_name)
        if node is None:
            return False
        if has_disrupted_taint(node):
            return True
        taints = list((node.get("spec") or {}).get("taints") or []) + [dict(DISRUPTED_TAINT)]
        self.ctx.cluster.patch(r.NODES, node_name, {"spec": {"taints": taints},
                                                   "metadata": {"resourceVersion": meta(node).get("resourceVersion")}})
        return True

    def untaint(self, node_name: str) -> None:
        """Remove the disrupted taint (roll back a disruption that will not happen)."""
        node = self.ctx.cluster.get(r.NODES, node_name)
        if node is None or not has_disrupted_taint(node) or is_deleting(node):
            return
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != L.DISRUPTED_TAINT_KEY]
        self.ctx.cluster.patch(r.NODES, node_name, {"spec": {"taints": taints}})

    def delete_nodeclaim(self, name: str, reason: str, message: str = "", consolidation_policy: str = "",
                         pods: Iterable[Obj] | None = None) -> bool:
        """Disrupt one NodeClaim: taint its Node, record why, delete it (termination drains and terminates).

        Counts ``karpenter_nodeclaims_disrupted_total`` once and ``karpenter_pods_disruption_initiated_total`` by
        the Node's reschedulable pods (no DaemonSet or mirror pods; :func:`~nodewright.state.pods.is_reschedulable`),
        labelled as Karpenter main does: ``reason`` snake_cased, ``nodepool``, ``capacity_type``,
        ``consolidation_policy`` (snake_cased, "" unless a consolidation disrupts it) and ``termination_mode``
        (:func:`~nodewright.controllers.common.termination_mode`).

        Args:
            name: NodeClaim name.
            reason: ``Underutilized``, ``Empty``, ``Drifted``, ``Expired``, ``Interrupted``, ...
            message: human detail for the event.
            consolidation_policy: the NodePool's ``consolidationPolicy`` when a consolidation disrupts it, else "".
            pods: the pods now on its Node (a snapshot's); None = listed from the cluster.

        Returns:
            False when the NodeClaim does not exist.
        """
        claim = self.ctx.cluster.get(r.NODECLAIMS, name)
        if claim is None:
            return False
        node_name = (claim.get("status") or {}).get("nodeName")
        if node_name:
            self.taint(str(node_name))
        if not is_deleting(claim):
            try:
                set_nodeclaim_condition(self.ctx, claim, L.CONDITION_DISRUPTION_REASON, True, reason, message)
            except KubeError:
                pass
            labels = (snake_case(reason), nodepool_of(claim), capacity_type_of(claim), snake_case(consolidation_policy),
                      termination_mode(claim))
            self.ctx.metrics.nodeclaims_disrupted.labels(*labels).inc()
            if node_name:
                on_node = (pods if pods is not None else
                           (p for p in self.ctx.cluster.list(r.PODS) if pod_node(p) == node_name))
                self.ctx.metrics.pods_disruption_initiated.labels(*labels).inc(
                    sum(1 for p in on_node if is_reschedulable(p)))
            self.ctx.event(claim, "DisruptionTerminating", f"Disrupting NodeClaim: {reason} {message}".strip())
            log.info("disrupting nodeclaim", extra={"nodeclaim": name, "reason": reason, "node": node_name})
        try:
            self.ctx.cluster.delete(r.NODECLAIMS, name)
        except NotFoundError:
            return False
        return True


class TerminationController:
    """Reconciles Nodes and NodeClaims that are being deleted (see module docstring)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.terminator = Terminator(ctx)
        self.evictions = Backoff(initial=1.0, maximum=30.0)
        self._blocked_reported: set[str] = set()
        self._waiting_reported: set[str] = set()
        self._drained: set[str] = set()  # nodes counted in karpenter_nodes_drained_total
        # NodeClaim -> when its instance's termination was first requested (None once observed gone), for
        # karpenter_nodeclaims_instance_termination_duration_seconds.
        self._instance_deleting: dict[str, float | None] = {}

    def reconcile(self, state: ClusterState | None = None) -> None:
        """One pass over deleting Nodes, then deleting NodeClaims."""
        state = state or snapshot(self.ctx.cluster)
        for node in list(state.nodes.values()):
            if is_deleting(node) and L.TERMINATION_FINALIZER in finalizers_of(node):
                try:
                    self._terminate_node(node, state)
                except KubeError as err:
                    warn_limited(log, f"terminating node {name_of(node)} {err.status}", "terminating node %s: %s",
                                 name_of(node), err, extra={"node": name_of(node), "status": err.status})
        for claim in list(state.nodeclaims.values()):
            if is_deleting(claim) and L.TERMINATION_FINALIZER in finalizers_of(claim):
                try:
                    self._terminate_nodeclaim(claim, state)
                except KubeError as err:
                    warn_limited(log, f"terminating nodeclaim {name_of(claim)} {err.status}",
                                 "terminating nodeclaim %s: %s", name_of(claim), err,
                                 extra={"nodeclaim": name_of(claim), "status": err.status})
        self.evictions.prune(lambda key: key in state.pods)
        for name in [n for n in self._instance_deleting if n not in state.nodeclaims]:
            del self._instance_deleting[name]

    # --- nodes -------------------------------------------------------------------------------

    def _grace_deadline(self, claim: Obj | None, node: Obj) -> float | None:
        """Epoch seconds after which pods are deleted regardless of budgets, or None (wait forever): the earlier of
        deletion + the NodeClaim's ``terminationGracePeriod`` and its ``karpenter.sh/nodeclaim-termination-timestamp``
        annotation (Karpenter's node termination time; node repair sets it to the repair time, which forces the
        drain at once)."""
        if claim is None:
            return None
        stamped = parse_time((meta(claim).get("annotations") or {}).get(L.NODECLAIM_TERMINATION_TIMESTAMP))
        tgp = (claim.get("spec") or {}).get("terminationGracePeriod")
        seconds = to_seconds(str(tgp)) if tgp else None
        if seconds is None:
            return stamped
        started = parse_time(meta(claim).get("deletionTimestamp")) or parse_time(meta(node).get("deletionTimestamp"))
        deadline = (started or self.ctx.clock()) + seconds
        return deadline if stamped is None else min(deadline, stamped)

    def _terminate_node(self, node: Obj, state: ClusterState) -> None:
        name = name_of(node)
        if not has_disrupted_taint(node):
            self.terminator.taint(name)
            node = self.ctx.cluster.get(r.NODES, name) or node
        claim = state.nodeclaim_for(node)
        deadline = self._grace_deadline(claim, node)
        now = self.ctx.clock()
        forced = deadline is not None and now >= deadline
        pods = state.pods_on(name)
        remaining = [p for p in pods if needs_eviction(p)]
        if remaining:
            self._drain(node, remaining, deadline, now, _disruption_reason(claim))
            return
        if not forced:
            terminating = [p for p in pods if _still_terminating(p, now)]
            if terminating:
                self._report_waiting(node, terminating)
                return
        if name not in self._drained:
            self._drained.add(name)
            self.ctx.metrics.nodes_drained.labels(nodepool_of(node)).inc()
        if claim is not None and not self._instance_terminated(claim):
            return
        if remove_finalizer(self.ctx, r.NODES, node):
            nodepool = nodepool_of(node)
            self._drained.discard(name)
            self.ctx.metrics.nodes_terminated.labels(nodepool, labels_of(node).get(L.ZONE, "")).inc()
            started = parse_time(meta(node).get("deletionTimestamp"))
            if started is not None:
                self.ctx.metrics.termination_duration.labels(nodepool).observe(max(0.0, now - started))
            created = parse_time(meta(node).get("creationTimestamp"))
            if created is not None:
                self.ctx.metrics.nodes_lifetime.labels(nodepool).observe(max(0.0, now - created))
            log.info("deleted node", extra={"node": name, "nodeclaim": name_of(claim) if claim else None})
            self._blocked_reported.discard(name)
            self._waiting_reported.discard(name)

    def _drain(self, node: Obj, pods: list[Obj], deadline: float | None, now: float, reason: str) -> None:
        if deadline is not None:
            # Pods whose own grace period no longer fits before the node's deadline are deleted now.
            due = [p for p in pods if now >= deadline - _pod_grace_seconds(p)]
            for pod in due:
                self._delete_pod(pod)
            pods = [p for p in pods if p not in due]
        blocking = [p for p in pods if is_do_not_disrupt(p)]
        evictable = [p for p in pods if not is_do_not_disrupt(p)]
        # Critical pods (often the ones serving the rest, e.g. DNS) go last.
        normal = [p for p in evictable if (p.get("spec") or {}).get("priorityClassName") not in _CRITICAL]
        for pod in normal or evictable:
            self._evict(pod, now, reason)
        if blocking and name_of(node) not in self._blocked_reported:
            self._blocked_reported.add(name_of(node))
            keys = ", ".join(pod_key(p) for p in blocking[:5])
            self.ctx.event(node, "DrainBlocked", f"Pods with karpenter.sh/do-not-disrupt block the drain: {keys}",
                           warning=True)
            log.info("drain blocked by do-not-disrupt pods", extra={"node": name_of(node), "pods": keys})

    def _report_waiting(self, node: Obj, terminating: list[Obj]) -> None:
        name = name_of(node)
        if name in self._waiting_reported:
            return
        self._waiting_reported.add(name)
        keys = ", ".join(pod_key(p) for p in terminating[:5])
        log.info("waiting for %d evicted pod(s) to terminate before terminating the instance", len(terminating),
                 extra={"node": name, "pods": keys})

    def _evict(self, pod: Obj, now: float, reason: str) -> None:
        """Ask for ``pod``'s eviction (PDBs honoured, 429 retried with backoff); a granted one counts in
        ``karpenter_pods_drained_total{reason}`` (``reason``: the NodeClaim's disruption reason, "" if none)."""
        key = pod_key(pod)
        if not self.evictions.ready(key, now):
            return
        try:
            self.ctx.cluster.evict_pod(namespace_of(pod) or "default", name_of(pod))
        except NotFoundError:
            self.ctx.metrics.pods_eviction_requests.labels("404").inc()
            self.evictions.succeeded(key)
            return
        except TooManyRequestsError as err:
            self.ctx.metrics.pods_eviction_requests.labels("429").inc()
            delay = self.evictions.failed(key, now)
            log.info("eviction of %s refused by a disruption budget, retrying in %.0fs", key, delay,
                     extra={"pod": key, "error": str(err)})
            return
        self.ctx.metrics.pods_eviction_requests.labels("200").inc()
        self.ctx.metrics.pods_drained.labels(reason).inc()
        self.evictions.succeeded(key)
        self.ctx.event(pod, "Evicted", "Evicted pod: node is being terminated")

    def _delete_pod(self, pod: Obj) -> None:
        try:
            self.ctx.cluster.delete(r.PODS, name_of(pod), namespace_of(pod) or "default")
            self.ctx.event(pod, "Deleted", "Deleted pod: the node's terminationGracePeriod has elapsed", warning=True)
        except NotFoundError:
            pass

    # --- instances ---------------------------------------------------------------------------

    def _instance_terminated(self, claim: Obj) -> bool:
        """Terminate the NodeClaim's instance; True once the cloud reports it gone. The first time it is gone,
        ``karpenter_nodeclaims_instance_termination_duration_seconds{nodepool}`` observes the seconds since
        this controller first asked to terminate it (Karpenter: since ``InstanceTerminating`` was set)."""
        if not provider_id_of(claim):
            return True  # never launched: nothing to terminate
        name = name_of(claim)
        self._instance_deleting.setdefault(name, self.ctx.clock())
        try:
            self.ctx.cloud.delete(to_model(claim))
        except NodeClaimNotFoundError:
            return self._instance_gone(claim)
        except CloudProviderError as err:
            self.ctx.cloud_error("nodeclaim.termination", "Delete", err)
            log.warning("terminating instance of %s: %s", name, err, extra={"nodeclaim": name})
            return False
        try:
            self.ctx.cloud.get(provider_id_of(claim))
        except NodeClaimNotFoundError:
            return self._instance_gone(claim)
        except CloudProviderError as err:
            self.ctx.cloud_error("nodeclaim.termination", "Get", err)
        return False

    def _instance_gone(self, claim: Obj) -> bool:
        started = self._instance_deleting.get(name_of(claim))
        if started is not None:
            self.ctx.metrics.nodeclaims_instance_termination_duration.labels(nodepool_of(claim)).observe(
                max(0.0, self.ctx.clock() - started))
            self._instance_deleting[name_of(claim)] = None
        return True

    # --- nodeclaims --------------------------------------------------------------------------

    def _terminate_nodeclaim(self, claim: Obj, state: ClusterState) -> None:
        node = state.node_for(claim)
        if node is not None:
            if not is_deleting(node):
                try:
                    self.ctx.cluster.delete(r.NODES, name_of(node))
                except NotFoundError:
                    pass
            if L.TERMINATION_FINALIZER in finalizers_of(node):
                return  # the node's drain finishes first
            if self.ctx.cluster.get(r.NODES, name_of(node)) is not None:
                return
        if not self._instance_terminated(claim):
            return
        if remove_finalizer(self.ctx, r.NODECLAIMS, claim):
            nodepool = nodepool_of(claim)
            self.ctx.metrics.nodeclaims_terminated.labels(nodepool, capacity_type_of(claim),
                                                          labels_of(claim).get(L.ZONE, "")).inc()
            started = parse_time(meta(claim).get("deletionTimestamp"))
            if started is not None:
                self.ctx.metrics.nodeclaims_termination_duration.labels(nodepool).observe(
                    max(0.0, self.ctx.clock() - started))
            self.ctx.event(claim, "Terminated", f"Terminated instance {provider_id_of(claim) or '(none)'}")
            log.info("deleted nodeclaim", extra={"nodeclaim": name_of(claim), "provider-id": provider_id_of(claim)})


def _disruption_reason(claim: Obj | None) -> str:
    """The reason of the NodeClaim's ``DisruptionReason`` condition (``Underutilized``, ``Drifted``, ...), or ""
    (Karpenter's ``evictionReason``: a node deleted by hand, or without a NodeClaim)."""
    cond = condition(claim, L.CONDITION_DISRUPTION_REASON) if claim is not None else None
    return str(cond.get("reason") or "") if cond is not None and cond.get("status") == "True" else ""


def _pod_grace_seconds(pod: Obj) -> float:
    """The pod's ``spec.terminationGracePeriodSeconds`` (Kubernetes' default 30 s when unset)."""
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return float(value) if isinstance(value, int | float) else DEFAULT_POD_GRACE_SECONDS


def _still_terminating(pod: Obj, now: float) -> bool:
    """A pod the drain deleted or evicted that is still running out its grace period (and not stuck)."""
    if not is_deleting(pod) or is_daemonset_pod(pod) or is_mirror_pod(pod) or is_terminal(pod):
        return False
    # deletionTimestamp is when the kubelet's grace period ends; long past it, nobody is left to finish.
    ends = parse_time(meta(pod).get("deletionTimestamp"))
    return ends is None or now - ends <= STUCK_TERMINATING_SECONDS


def pods_to_reschedule(state: ClusterState, nodes: Iterable[Obj]) -> list[dict[str, Any]]:
    """Pods on ``nodes`` that need a new home when those nodes go away (what the drain will evict)."""
    out: list[dict[str, Any]] = []
    for node in nodes:
        out.extend(p for p in state.pods_on(name_of(node)) if needs_eviction(p))
    return out
