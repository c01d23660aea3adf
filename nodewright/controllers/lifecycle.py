"""NodeClaim lifecycle: Launched -> Registered -> Initialized -> Ready, plus liveness.

Karpenter's ``nodeclaim/lifecycle`` controller, one pass per :meth:`LifecycleController.reconcile`:

* **Launch**: ``CloudProvider.create``; record ``status.providerID``, ``imageID``, ``capacity``,
  ``allocatable`` and the launched instance's labels (instance type, zone, capacity type, ...).
  ``InsufficientCapacityError`` deletes the NodeClaim (the provisioner re-plans, as Karpenter does);
  other errors set ``Launched=False`` with the reason and are retried with backoff.
* **Register**: a Node with the same provider ID joined. Take ownership (ownerReference), sync labels and
  taints (startup taints once), add the ``karpenter.sh/termination`` finalizer, remove the
  ``karpenter.sh/unregistered`` taint, label ``karpenter.sh/registered=true``.
* **Initialize**: Node ``Ready``, no startup or cloud-provider-uninitialized/not-ready taints left, every
  extended resource of the NodeClaim's capacity registered on the Node; label ``karpenter.sh/initialized``.
* **Liveness**: no launch within :attr:`LifecycleController.launch_timeout` (5 min) or no registration
  within :attr:`LifecycleController.registration_timeout` (15 min) deletes the NodeClaim, whose
  termination then deletes the instance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodewright.api import labels as L
from nodewright.backoff import Backoff
from nodewright.cloud.provider import AuthorizationError, CloudProviderError, InsufficientCapacityError
from nodewright.controllers.common import (
    Context,
    capacity_type_of,
    log,
    nodepool_of,
    set_nodeclaim_condition,
    to_model,
)
from nodewright.controllers.condition_metrics import observe_condition_transitions
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.objects import (
    Obj,
    condition,
    condition_true,
    finalizers_of,
    is_deleting,
    labels_of,
    meta,
    name_of,
    parse_time,
    set_condition,
)
from nodewright.logging import warn_limited
from nodewright.quantities import parse_resource_list
from nodewright.scheduling.nodes import EPHEMERAL_TAINT_KEYS
from nodewright.state.cluster import ClusterState, snapshot

_STANDARD_RESOURCES = {"cpu", "memory", "pods", "ephemeral-storage"}


def _taint_key(t: dict[str, Any]) -> tuple[str, str]:
    return (str(t.get("key")), str(t.get("effect")))


class LifecycleController:
    """Drives NodeClaims through their lifecycle.

    Args:
        ctx: dependencies.
        launch_timeout: seconds from creation to a successful launch before the claim is deleted.
        registration_timeout: seconds from launch to Node registration before the claim is deleted.
        on_registered: called with ``(nodeclaim, node)`` once a Node registered (bind mode hooks here).
        registration_taints: ``nodeclaim -> taints`` the Node gets at registration besides the NodeClaim's own
            (the nomination controller's readiness hold, :meth:`NominationController.hold_taints`).
    """

    def __init__(
        self,
        ctx: Context,
        launch_timeout: float = 300.0,
        registration_timeout: float = 900.0,
        on_registered: Callable[[Obj, Obj], object] | None = None,
        registration_taints: Callable[[Obj], list[Obj]] | None = None,
    ) -> None:
        self.ctx = ctx
        self.launch_timeout = launch_timeout
        self.registration_timeout = registration_timeout
        self.on_registered = on_registered
        self.registration_taints = registration_taints
        self.backoff = Backoff(initial=2.0, maximum=60.0)

    def reconcile(self, state: ClusterState | None = None) -> None:
        """One pass over every NodeClaim that is not being deleted."""
        state = state or snapshot(self.ctx.cluster)
        now = self.ctx.clock()
        for claim in list(state.nodeclaims.values()):
            if is_deleting(claim):
                continue
            try:
                self._reconcile_one(claim, state, now)
            except KubeError as err:
                warn_limited(log, f"lifecycle {name_of(claim)} {err.status}", "nodeclaim %s: %s", name_of(claim), err,
                             extra={"nodeclaim": name_of(claim), "status": err.status})
        self.backoff.prune(lambda key: key in state.nodeclaims)

    def _reconcile_one(self, claim: Obj, state: ClusterState, now: float) -> None:
        if not condition_true(claim, L.CONDITION_LAUNCHED):
            created = parse_time(meta(claim).get("creationTimestamp")) or now
            if now - created >= self.launch_timeout:
                self._liveness_delete(claim, f"not launched within {self.launch_timeout:.0f}s")
                return
            if self.backoff.ready(name_of(claim), now):
                self._launch(claim, now)
            return
        if not condition_true(claim, L.CONDITION_REGISTERED):
            node = state.node_for(claim)
            if node is None:
                launched = condition(claim, L.CONDITION_LAUNCHED) or {}
                since = parse_time(launched.get("lastTransitionTime")) or now
                if now - since >= self.registration_timeout:
                    self._liveness_delete(claim, f"no node registered within {self.registration_timeout:.0f}s")
                return
            claim = self._register(claim, node)
            node = self.ctx.cluster.get(r.NODES, name_of(node)) or node
            if self.on_registered is not None:
                self.on_registered(claim, node)
        if not condition_true(claim, L.CONDITION_INITIALIZED):
            # Read the Node again: registration may just have written it (startup taints), and the snapshot
            # predates that write -- judging the snapshot would initialize a node that still has them.
            name = name_of(state.node_for(claim) or {}) or str((claim.get("status") or {}).get("nodeName") or "")
            node = self.ctx.cluster.get(r.NODES, name) if name else None
            if node is not None:
                self._initialize(claim, node)

    # --- launch ------------------------------------------------------------------------------

    def _launch(self, claim: Obj, now: float) -> None:
        name = name_of(claim)
        try:
            launched = self.ctx.cloud.create(to_model(claim))
        except InsufficientCapacityError as err:
            self.ctx.cloud_error("nodeclaim.lifecycle", "Create", err)
            log.warning("deleting nodeclaim %s: insufficient capacity: %s", name, err, extra={"nodeclaim": name})
            self.ctx.event(claim, "InsufficientCapacityError", f"NodeClaim {name} event: {err}", warning=True)
            self._delete(claim)
            return
        except CloudProviderError as err:
            self.ctx.cloud_error("nodeclaim.lifecycle", "Create", err)
            delay = self.backoff.failed(name, now)
            reason = "AuthorizationError" if isinstance(err, AuthorizationError) else type(err).__name__
            log.error("launching nodeclaim %s failed: %s (retry in %.0fs)", name, err, delay,
                      extra={"nodeclaim": name})
            self.ctx.event(claim, "LaunchFailed", str(err), warning=True)
            set_nodeclaim_condition(self.ctx, claim, L.CONDITION_LAUNCHED, False, reason, str(err)[:1000])
            return
        self.backoff.succeeded(name)
        doc = launched.to_manifest()
        status = dict(doc.get("status") or {})
        launched_labels = dict((doc.get("metadata") or {}).get("labels") or {})
        labels = {**labels_of(claim), **launched_labels}
        self.ctx.cluster.patch(r.NODECLAIMS, name, {"metadata": {"labels": labels}})
        conditions = set_condition(list((claim.get("status") or {}).get("conditions") or []),
                                   L.CONDITION_LAUNCHED, True, now, "Launched")
        status_patch = {k: status[k] for k in ("providerID", "imageID", "capacity", "allocatable") if k in status}
        status_patch["conditions"] = conditions
        self.ctx.cluster.patch_status(r.NODECLAIMS, name, status_patch)
        observe_condition_transitions(self.ctx.metrics, claim, conditions)
        instance_type = labels.get(L.INSTANCE_TYPE, "?")
        log.info("launched nodeclaim", extra={"nodeclaim": name, "provider-id": status.get("providerID"),
                                               "instance-type": instance_type, "zone": labels.get(L.ZONE),
                                               "capacity-type": labels.get(L.CAPACITY_TYPE)})
        self.ctx.event(claim, "Launched", f"Launched {instance_type} as {status.get('providerID')}")

    # --- register ----------------------------------------------------------------------------

    def _register(self, claim: Obj, node: Obj) -> Obj:
        spec = claim.get("spec") or {}
        node_labels = {**labels_of(node), **labels_of(claim), L.REGISTERED: "true"}
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != L.UNREGISTERED_TAINT_KEY]
        present = {_taint_key(t) for t in taints}
        # Startup taints are added once, at registration; whoever initializes the node removes them. So is the
        # readiness hold's taint (NOMINATION_HOLD, controllers/nomination.py), which the nomination controller lifts.
        extra = self.registration_taints(claim) if self.registration_taints is not None else []
        for taint in list(spec.get("taints") or []) + list(spec.get("startupTaints") or []) + extra:
            if _taint_key(taint) not in present:
                taints.append({k: v for k, v in taint.items() if k in ("key", "value", "effect")})
                present.add(_taint_key(taint))
        finalizers = finalizers_of(node)
        if L.TERMINATION_FINALIZER not in finalizers:
            finalizers.append(L.TERMINATION_FINALIZER)
        owner = {"apiVersion": L.API_VERSION, "kind": "NodeClaim", "name": name_of(claim),
                 "uid": meta(claim).get("uid", ""), "blockOwnerDeletion": True}
        owners = [o for o in meta(node).get("ownerReferences") or [] if o.get("kind") != "NodeClaim"] + [owner]
        self.ctx.cluster.patch(r.NODES, name_of(node), {
            "metadata": {"labels": node_labels, "finalizers": finalizers, "ownerReferences": owners},
            "spec": {"taints": taints},
        })
        conditions = set_condition(list((claim.get("status") or {}).get("conditions") or []),
                                   L.CONDITION_REGISTERED, True, self.ctx.clock(), "Registered")
        updated = self.ctx.cluster.patch_status(r.NODECLAIMS, name_of(claim),
                                                {"nodeName": name_of(node), "conditions": conditions})
        observe_condition_transitions(self.ctx.metrics, claim, conditions)
        nodepool = nodepool_of(claim)
        self.ctx.metrics.nodes_created.labels(nodepool, node_labels.get(L.ZONE, "")).inc()
        log.info("registered nodeclaim", extra={"nodeclaim": name_of(claim), "node": name_of(node)})
        self.ctx.event(claim, "Registered", f"Status condition transitioned, Type: Registered, Node: {name_of(node)}")
        return updated

    # --- initialize --------------------------------------------------------------------------

    def _initialized_reason(self, claim: Obj, node: Obj) -> str | None:
        """None when initialized, else why not."""
        if not condition_true(node, "Ready"):
            return "node is not Ready"
        startup = {_taint_key(t) for t in (claim.get("spec") or {}).get("startupTaints") or []}
        for taint in (node.get("spec") or {}).get("taints") or []:
            if _taint_key(taint) in startup or taint.get("key") in EPHEMERAL_TAINT_KEYS:
                return f"taint {taint.get('key')} still present"
        capacity = parse_resource_list((claim.get("status") or {}).get("capacity"))
        allocatable = parse_resource_list((node.get("status") or {}).get("allocatable"))
        for resource, qty in capacity.items():
            if resource not in _STANDARD_RESOURCES and qty > 0 and allocatable.get(resource, 0) <= 0:
                return f"extended resource {resource} not registered"
        return None

    def _initialize(self, claim: Obj, node: Obj) -> None:
        if self._initialized_reason(claim, node) is not None:
            return
        self.ctx.cluster.patch(r.NODES, name_of(node), {"metadata": {"labels": {L.INITIALIZED: "true"}}})
        now = self.ctx.clock()
        conditions = list((claim.get("status") or {}).get("conditions") or [])
        conditions = set_condition(conditions, L.CONDITION_INITIALIZED, True, now, "Initialized")
        conditions = set_condition(conditions, L.CONDITION_READY, True, now, "Ready")
        self.ctx.cluster.patch_status(r.NODECLAIMS, name_of(claim), {"conditions": conditions})
        observe_condition_transitions(self.ctx.metrics, claim, conditions)
        log.info("initialized nodeclaim", extra={"nodeclaim": name_of(claim), "node": name_of(node),
                                                  "nodepool": nodepool_of(claim),
                                                  "capacity-type": capacity_type_of(claim)})

    # --- liveness ----------------------------------------------------------------------------

    def _liveness_delete(self, claim: Obj, why: str) -> None:
        log.warning("deleting nodeclaim %s: %s", name_of(claim), why, extra={"nodeclaim": name_of(claim)})
        self.ctx.event(claim, "Liveness", f"Deleting NodeClaim: {why}", warning=True)
        self._delete(claim)

    def _delete(self, claim: Obj) -> None:
        try:
            self.ctx.cluster.delete(r.NODECLAIMS, name_of(claim))
        except NotFoundError:
            pass
