"""Static NodePools (``spec.replicas``, Karpenter v1.14 alpha): keep exactly N NodeClaims in the pool.

Behaviour of kubernetes-sigs/karpenter ``pkg/controllers/static/provisioning`` and ``.../deprovisioning`` (read
for behaviour; our own code):

* **scale up**: when the pool has fewer live (not deleting) NodeClaims than ``replicas``, create the difference,
  capped by ``limits.nodes`` headroom. Each NodeClaim comes from the pool's template alone (no pods): its
  requirements plus the pool's compatible instance types (cheapest offering first, at most 60; "cheapest" is the
  provisioner's one price function: the list price, or under a ``PricingPolicy`` the effective marginal price
  over the running fleet, each new NodeClaim joining it before the next is priced), built into a
  :class:`~nodewright.scheduling.NodeClaimPlan` and turned into a manifest by the one NodeClaim builder,
  :func:`nodewright.scheduling.nodeclaim_manifest.nodeclaim_from_plan`.
* **scale down**: when it has more, delete the excess NodeClaims (the termination controller drains them), in
  Karpenter's order: not yet launched (no ``providerID``) first, then empty nodes (only DaemonSet pods, none
  with ``karpenter.sh/do-not-disrupt``), then the rest -- nodes without do-not-disrupt pods before those with,
  higher ``karpenter.sh/deprovisioning-priority`` first, then lower disruption cost
  (:func:`nodewright.disruption.candidates.eviction_cost` summed).

The controller runs only under Karpenter's ``StaticCapacity`` feature gate (off by default; ``enabled``): while the
gate is off a static pool is not managed -- no NodeClaim is created or removed for its ``replicas``, each such pool
gets one warning line -- and, as in Karpenter (whose provisioner filters static pools whatever the gate), it is
still never offered to the dynamic provisioner. Source: kubernetes-sigs/karpenter ``pkg/controllers/controllers.go``
(the static controllers are only registered under the gate) and ``provisioning/provisioner.go`` (main, 2026-08-20).

The dynamic provisioner never launches for a static pool (its nodes are existing capacity for pending pods), and
consolidation leaves static pools alone (:mod:`nodewright.disruption.candidates`). A pool that is invalid or
whose instance types cannot be resolved is skipped and logged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nodewright.api import labels as L
from nodewright.cloud.instancetype import InstanceType
from nodewright.controllers.common import Context, fleet_labels, log, nodepool_instance_types, nodepool_of
from nodewright.disruption.candidates import eviction_cost, pod_blocks_disruption
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.objects import Obj, annotations_of, is_deleting, name_of
from nodewright.pricing import PricingPolicy, marginal_pricing
from nodewright.scheduling import MAX_INSTANCE_TYPES, NodeClaimPlan, NodePoolSpec, Requirement
from nodewright.scheduling.nodeclaim_manifest import nodeclaim_from_plan
from nodewright.scheduling.nodeclaimtemplate import Pricing, TypeInfo, type_daemons
from nodewright.state.cluster import ClusterState, provider_id_of, snapshot
from nodewright.state.pods import is_daemonset_pod, needs_eviction

#: NodeClaim annotation: higher values are removed first when a static pool scales down (Karpenter's).
DEPROVISIONING_PRIORITY = "karpenter.sh/deprovisioning-priority"


def replicas_of(nodepool: Obj) -> int | None:
    """``spec.replicas`` of a NodePool dict, or None (a dynamic pool)."""
    value = (nodepool.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def static_plan(spec: NodePoolSpec, instance_types: Sequence[InstanceType],
                pricing: Pricing | None = None) -> NodeClaimPlan | None:
    """A pod-less NodeClaim plan for a static pool: the pool's requirements narrowed to its compatible instance
    types (cheapest available offering first, at most :data:`MAX_INSTANCE_TYPES`), or None when none is.

    Prices are :meth:`TypeInfo.price_of` (the provisioner's): ``pricing`` None = list prices; a
    :class:`~nodewright.pricing.MarginalPricing` = effective marginal USD/hour under a policy, ties to the lower
    list price, then the name. Its requests are the overhead of the DaemonSets the first (cheapest) type runs
    (:func:`~nodewright.scheduling.nodeclaimtemplate.type_daemons`, per instance type as the provisioner)."""
    reqs = spec.requirements
    infos = [TypeInfo(it, (), pricing) for it in instance_types]
    priced = [(o, info) for info in infos if info.compatible(reqs) and (o := info.offering(reqs)) is not None]
    if not priced:
        return None
    priced.sort(key=lambda pair: (pair[1].price_of(pair[0]), pair[0].price, pair[1].name))
    chosen = [info.it for _, info in priced[:MAX_INSTANCE_TYPES]]
    offering = priced[0][0]
    requirements = reqs.with_requirement(Requirement(L.INSTANCE_TYPE, False, [it.name for it in chosen]))
    labels = {**spec.labels, **requirements.labels()}
    # The DaemonSets the chosen type runs (the scheduler's per-type rule), not the pool's largest overhead; a spec
    # built without DaemonSet pods keeps its pool-wide daemonset_overhead.
    overhead = (dict(type_daemons(spec.daemons(), chosen[0]).requests) if spec.daemonsets
                else dict(spec.daemonset_overhead))
    return NodeClaimPlan(
        nodepool=spec.name, instance_types=chosen, instance_type=chosen[0], offering=offering,
        requirements=requirements, labels=labels, taints=spec.taints, startup_taints=spec.startup_taints,
        pods=[], requests=dict(overhead), daemonset_overhead=overhead,
    )


class StaticCapacityController:
    """Keeps every static NodePool at ``spec.replicas`` NodeClaims (see module docstring).

    Args:
        ctx: dependencies.
        pricing_policy: returns the PricingPolicy in force (``nodewright run --pricing-policy``), or None / absent:
            list prices. The same callable the provisioner reads.
        enabled: the ``StaticCapacity`` feature gate; false = static pools are left alone (one warning each).
    """

    def __init__(self, ctx: Context, pricing_policy: Callable[[], PricingPolicy | None] | None = None,
                 enabled: bool = True) -> None:
        self.ctx = ctx
        self.pricing_policy = pricing_policy
        self.enabled = enabled
        self._warned: set[str] = set()

    def reconcile(self, state: ClusterState | None = None) -> None:
        state = state or snapshot(self.ctx.cluster)
        static = {name: n for name, doc in state.nodepools.items()
                  if (n := replicas_of(doc)) is not None and not is_deleting(doc)}
        if not static:
            return
        if not self.enabled:
            for name in sorted(set(static) - self._warned):
                self._warned.add(name)
                log.warning("static nodepool %s (spec.replicas %d) is not managed: the StaticCapacity feature gate is "
                            "off (FEATURE_GATES StaticCapacity=true to keep its replicas)", name, static[name],
                            extra={"nodepool": name})
            return
        live: dict[str, list[Obj]] = {name: [] for name in static}
        for claim in state.nodeclaims.values():
            pool = nodepool_of(claim)
            if pool in live and not is_deleting(claim):
                live[pool].append(claim)
        short = {name for name in static if len(live[name]) < static[name]}
        types = nodepool_instance_types(self.ctx, state, "static")[0] if short else {}
        for name in sorted(static):
            have, want = len(live[name]), static[name]
            if have < want:
                self._scale_up(name, want - have, state, types.get(name))
            elif have > want:
                self._scale_down(name, live[name], have - want, state)

    def _scale_up(self, name: str, count: int, state: ClusterState, types: list[InstanceType] | None) -> None:
        doc = state.nodepools[name]
        if types is None:
            log.error("static nodepool %s cannot launch: its instance types are not resolved", name,
                      extra={"nodepool": name})
            return
        try:
            spec = state.models.nodepool_spec(doc, state.models.daemonset_pods(state.daemonsets))
        except NodewrightValidationError as err:
            log.error("ignoring invalid static nodepool %s: %s", name, err, extra={"nodepool": name})
            return
        limit = (spec.limits or {}).get("nodes")
        if limit is not None:
            count = min(count, limit - sum(1 for c in state.nodeclaims.values()
                                           if nodepool_of(c) == name and not is_deleting(c)))
        if count <= 0:
            log.info("static nodepool %s: node limit reached", name, extra={"nodepool": name})
            return
        pricing = self._pricing(types, state)
        for _ in range(count):
            plan = static_plan(spec, types, pricing)
            if plan is None:
                log.error("static nodepool %s cannot launch: no instance type matches its requirements", name,
                          extra={"nodepool": name})
                return
            if pricing is not None:  # the next NodeClaim is priced on top of this one (RIs, commitment spent once)
                pricing.launched(plan.instance_type.name, plan.offering)
            try:
                claim = self.ctx.cluster.create(r.NODECLAIMS, nodeclaim_from_plan(plan, doc))
            except KubeError as err:
                log.error("creating nodeclaim for static nodepool %s failed: %s", name, err, extra={"nodepool": name})
                return
            self.ctx.metrics.nodeclaims_created.labels("provisioned", name, "false").inc()  # Karpenter: ProvisionedReason
            log.info("Launching node for static nodepool %s (replicas %d)", name, replicas_of(doc) or 0,
                     extra={"nodeclaim": name_of(claim), "nodepool": name})

    def _pricing(self, types: Sequence[InstanceType], state: ClusterState) -> Pricing | None:
        """Marginal prices under the policy in force over the running fleet (Nodes and launched NodeClaims);
        None without a policy."""
        policy = self.pricing_policy() if self.pricing_policy is not None else None
        if policy is None:
            return None
        return marginal_pricing(policy, types, fleet_labels(state.nodes.values(), state.nodeclaims.values()))

    def _scale_down(self, name: str, claims: list[Obj], count: int, state: ClusterState) -> None:
        for claim in sorted(claims, key=lambda c: self._removal_key(c, state))[:count]:
            try:
                self.ctx.cluster.delete(r.NODECLAIMS, name_of(claim))
            except NotFoundError:
                continue
            except KubeError as err:
                log.error("deleting nodeclaim %s of static nodepool %s failed: %s", name_of(claim), name, err,
                          extra={"nodeclaim": name_of(claim), "nodepool": name})
                continue
            log.info("Deleting nodeclaim %s: static nodepool %s is over its replicas", name_of(claim), name,
                     extra={"nodeclaim": name_of(claim), "nodepool": name})

    def _removal_key(self, claim: Obj, state: ClusterState) -> tuple[int, int, int, int, float, str]:
        """Karpenter's order: unlaunched, empty, no do-not-disrupt, priority (desc), disruption cost, name."""
        try:
            priority = int(annotations_of(claim).get(DEPROVISIONING_PRIORITY, "0"))
        except ValueError:
            priority = 0
        if not provider_id_of(claim):
            return (0, 0, 0, -priority, 0.0, name_of(claim))
        node = state.node_for(claim)
        docs = state.pods_on(name_of(node)) if node is not None else []
        pods = [(d, p) for d in docs if (p := state.models.pod(d)) is not None]
        protected = any(pod_blocks_disruption(p) for _, p in pods)
        empty = all(is_daemonset_pod(d) for d in docs) and not protected
        cost = sum(eviction_cost(p) for d, p in pods if needs_eviction(d))
        return (1, 0 if empty else 1, int(protected), -priority, cost, name_of(claim))
