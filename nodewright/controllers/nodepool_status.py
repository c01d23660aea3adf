"""NodePool status, usage and cost: ``status.resources``, the Ready condition, metrics.

* ``status.resources``: summed capacity of the NodePool's NodeClaims (``cpu``, ``memory``, ``pods``,
  ``ephemeral-storage``, plus ``nodes``), as Karpenter v1 reports it.
* Conditions: ``NodeClassReady`` and ``Ready`` -- False with reason ``NodeClassNotFound`` when the
  referenced EC2NodeClass does not exist, ``NodeClassNotReady`` when it reports ``Ready=False``, and
  ``ValidationFailed`` when the NodePool itself does not validate. ``ValidationSucceeded`` is False with
  reason ``ValidationFailed`` for an invalid NodePool, and with reason ``InvalidAnnotation`` for a malformed or
  unknown ``nodewright.io/*`` annotation (:mod:`nodewright.api.annotations`; message: every problem, ``; ``
  separated). A bad annotation does not make the pool un-Ready: it keeps provisioning with that annotation's
  default (full packing for ``target-utilization``); a Warning Event ``InvalidAnnotation`` is recorded on the
  NodePool whenever the message changes.
* ``status.targetUtilization``: the target utilization the scheduler and consolidation use for the pool, as a
  string (``"0.8"``; ``"1"`` = pack fully, also when the annotation is absent or malformed).
* Metrics: ``karpenter_nodepools_usage`` / ``karpenter_nodepools_limit`` (cpu in cores, memory in bytes),
  ``karpenter_pods_state``, and ``nodewright_nodepool_cost_per_hour_usd{nodepool, price}`` (USD per hour):
  ``price="list"``, the sum over the NodePool's launched NodeClaims of the list price of their (instance type,
  zone, capacity type) offering (the same value as ``karpenter_nodepools_cost_total``); ``price="effective"``,
  only while a PricingPolicy is in force, the pool's share of the whole fleet's bill under it (Nodes of every
  pool and unmanaged Nodes use RIs and Savings Plans in AWS's order; :func:`nodewright.pricing.report.group_costs`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from nodewright.api import labels as L
from nodewright.api.annotations import format_target, nodepool_annotation_problems, target_utilization
from nodewright.cloud.instancetype import InstanceType, PriceIndex
from nodewright.cloud.provider import CloudProviderError
from nodewright.controllers.common import Context, fleet_labels, log, nodepool_of
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError
from nodewright.kube.objects import (
    Obj,
    condition,
    condition_true,
    is_deleting,
    labels_of,
    name_of,
    set_condition,
)
from nodewright.logging import warn_limited
from nodewright.pricing import PricingEngine, PricingPolicy, Usage, offering_price_table
from nodewright.pricing.report import group_costs
from nodewright.quantities import add, format_quantity, parse_resource_list
from nodewright.state.cluster import ClusterState, snapshot
from nodewright.state.pods import node_name, pod_key

_REPORTED = ("cpu", "memory", "pods", "ephemeral-storage")


class NodePoolStatusController:
    """Updates every NodePool's status and the usage/cost metrics (see module docstring).

    Args:
        ctx: dependencies.
        period: seconds between passes.
        pricing_policy: returns the PricingPolicy in force (``nodewright run --pricing-policy``), or None / absent:
            no ``price="effective"`` series.

    Attributes:
        costs: NodePool -> list-price cost of the last pass, USD/hour.
        effective_costs: NodePool -> effective cost of the last pass (empty without a policy).
    """

    def __init__(self, ctx: Context, period: float = 10.0,
                 pricing_policy: Callable[[], PricingPolicy | None] | None = None) -> None:
        self.ctx = ctx
        self.period = period
        self.pricing_policy = pricing_policy
        self._last = float("-inf")
        self.costs: dict[str, float] = {}
        self.effective_costs: dict[str, float] = {}
        # Label sets of the karpenter_pods_state series currently exported: a pass adds and removes only the
        # difference instead of clearing and re-creating one child per pod (most of this controller's time).
        self._pod_series: set[tuple[str, ...]] = set()
        # Pod key -> (manifest, its own label values) of the manifest seen last pass (objects are immutable).
        self._pod_rows: dict[str, tuple[Obj, tuple[str, ...]]] = {}
        # (family, nodepool, resource_type) of the usage/limit series exported last pass: a withdrawn limit or a
        # deleted pool loses its series (a stale limit would keep the near-limit alert judging against it).
        self._pool_series: set[tuple[str, str, str]] = set()
        # NodePool name -> annotation problems last reported by an Event (one Event per change, not per pass).
        self._annotation_events: dict[str, str] = {}

    def reconcile(self, state: ClusterState | None = None, force: bool = False) -> dict[str, float]:
        """One pass; returns NodePool -> cost in USD per hour."""
        now = self.ctx.clock()
        if not force and now - self._last < self.period:
            return self.costs
        self._last = now
        state = state or snapshot(self.ctx.cluster)
        costs: dict[str, float] = {}
        by_pool: dict[str, list[Obj]] = {}  # one pass over the NodeClaims, not one per NodePool
        for claim in state.nodeclaims.values():
            if not is_deleting(claim):
                by_pool.setdefault(nodepool_of(claim), []).append(claim)
        priced: dict[str, tuple[list[InstanceType], list[tuple[Usage, float]]]] = {}
        pool_series: set[tuple[str, str, str]] = set()
        for name, pool in sorted(state.nodepools.items()):
            if is_deleting(pool):
                continue
            claims = by_pool.get(name, [])
            costs[name], priced[name] = self._cost(pool, claims, state)
            self.ctx.metrics.nodepool_cost.labels(name, "list").set(costs[name])
            self.ctx.metrics.nodepools_cost_total.labels(name).set(costs[name])
            usage = self._usage(claims)
            pool_series |= self._metrics(name, pool, usage)
            try:
                self._write_status(pool, usage, state, now)
            except KubeError as err:
                warn_limited(log, f"nodepool status {name} {err.status}", "nodepool %s status: %s", name, err,
                             extra={"nodepool": name, "status": err.status})
        effective = self._effective_costs(priced, state)
        for name, cost in effective.items():
            self.ctx.metrics.nodepool_cost.labels(name, "effective").set(cost)
        for gone in set(self.costs) - set(costs):
            self.ctx.metrics.nodepool_cost.remove(gone, "list")
            self.ctx.metrics.nodepools_cost_total.remove(gone)
            self._annotation_events.pop(gone, None)
        for gone in set(self.effective_costs) - set(effective):  # pool deleted, or the policy withdrawn
            self.ctx.metrics.nodepool_cost.remove(gone, "effective")
        families = {"usage": self.ctx.metrics.nodepools_usage, "limit": self.ctx.metrics.nodepools_limit}
        for family, name, resource in self._pool_series - pool_series:
            with contextlib.suppress(KeyError):
                families[family].remove(name, resource)
        self._pool_series = pool_series
        self.costs = costs
        self.effective_costs = effective
        self._pod_metrics(state)
        self.ctx.metrics.cluster_state_node_count.set(len(state.nodes))
        return costs

    def _usage(self, claims: list[Obj]) -> dict[str, int]:
        usage: dict[str, int] = {}
        for claim in claims:
            usage = add(usage, parse_resource_list((claim.get("status") or {}).get("capacity")))
        usage["nodes"] = len(claims)
        return usage

    def _cost(self, pool: Obj, claims: list[Obj],
              state: ClusterState) -> tuple[float, tuple[list[InstanceType], list[tuple[Usage, float]]]]:
        """The pool's list-price cost (USD/hour), and for the effective cost its instance types and each launched
        NodeClaim's usage with its list price."""
        launched = [c for c in claims if condition_true(c, L.CONDITION_LAUNCHED)]
        if not launched:
            return 0.0, ([], [])
        try:
            types = self.ctx.cloud.get_instance_types(state.models.nodepool(pool))
        except (CloudProviderError, NodewrightValidationError) as err:
            log.debug("no prices for nodepool %s: %s", name_of(pool), err)
            return 0.0, ([], [])
        types = self.ctx.overlays.launch_types(name_of(pool), types)  # NodeOverlay prices, as the decisions saw
        prices = PriceIndex(types)
        members: list[tuple[Usage, float]] = []
        for claim in launched:
            labels = labels_of(claim)
            usage = Usage.from_labels(labels)
            if usage is not None:
                members.append((usage, prices.price(labels)))
        total = sum(prices.price(labels_of(claim)) for claim in launched)
        return round(total, 6), (list(types), members)

    def _effective_costs(self, priced: dict[str, tuple[list[InstanceType], list[tuple[Usage, float]]]],
                         state: ClusterState) -> dict[str, float]:
        """NodePool -> its share of the fleet's bill under the policy in force (USD/hour); empty without one.
        List prices come from every pool's offerings (:func:`offering_price_table`), the fleet from every Node
        and launched NodeClaim of the cluster."""
        policy = self.pricing_policy() if self.pricing_policy is not None else None
        if policy is None or not priced:
            return {}
        table = offering_price_table(t for types, _ in priced.values() for t in types)
        if table is None:  # no launched NodeClaim anywhere: every pool costs 0
            return dict.fromkeys(priced, 0.0)
        fleet = [u for u in map(Usage.from_labels, fleet_labels(state.nodes.values(), state.nodeclaims.values()))
                 if u is not None]
        return group_costs(PricingEngine(policy, table), fleet, {name: m for name, (_, m) in priced.items()})

    def _metrics(self, name: str, pool: Obj, usage: dict[str, int]) -> set[tuple[str, str, str]]:
        """Set the pool's usage and limit gauges; returns the ``(family, nodepool, resource_type)`` written."""
        for resource in _REPORTED:
            value = float(usage.get(resource, 0))
            self.ctx.metrics.nodepools_usage.labels(name, resource).set(value / 1000 if resource == "cpu" else value)
        limits = parse_resource_list((pool.get("spec") or {}).get("limits"))
        for resource, qty in limits.items():
            self.ctx.metrics.nodepools_limit.labels(name, resource).set(qty / 1000 if resource == "cpu" else qty)
        return {("usage", name, resource) for resource in _REPORTED} | {("limit", name, resource) for resource in limits}

    def _write_status(self, pool: Obj, usage: dict[str, int], state: ClusterState, now: float) -> None:
        status = pool.get("status") or {}
        conditions = list(status.get("conditions") or [])
        ref = ((pool.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeClassRef") or {}
        nodeclass = state.nodeclasses.get(str(ref.get("name") or ""))
        valid_reason = ""
        try:
            state.models.nodepool(pool)
        except NodewrightValidationError as err:
            valid_reason = str(err)
        annotations = (pool.get("metadata") or {}).get("annotations") or {}
        bad_annotations = "; ".join(str(p) for p in nodepool_annotation_problems(annotations))
        self._report_annotations(pool, bad_annotations)
        if valid_reason:
            ready, reason, message = False, "ValidationFailed", valid_reason
        elif nodeclass is None:
            ready, reason, message = False, "NodeClassNotFound", f"EC2NodeClass {ref.get('name')!r} not found"
        elif (nodeclass.get("status") or {}).get("conditions") and not condition_true(nodeclass, "Ready"):
            ready, reason, message = False, "NodeClassNotReady", _not_ready(ref.get("name"), nodeclass)
        else:
            ready, reason, message = True, "Ready", ""
        if valid_reason:
            valid, valid_why, valid_message = False, "ValidationFailed", valid_reason
        elif bad_annotations:
            valid, valid_why, valid_message = False, "InvalidAnnotation", bad_annotations
        else:
            valid, valid_why, valid_message = True, "ValidationSucceeded", ""
        conditions = set_condition(conditions, L.CONDITION_VALIDATION_SUCCEEDED, valid, now, valid_why, valid_message)
        class_ready = nodeclass is not None and not (
            (nodeclass.get("status") or {}).get("conditions") and not condition_true(nodeclass, "Ready"))
        class_reason = "NodeClassNotFound" if nodeclass is None else "NodeClassNotReady"
        conditions = set_condition(conditions, L.CONDITION_NODECLASS_READY, class_ready, now,
                                   "NodeClassReady" if class_ready else class_reason,
                                   "" if class_ready else f"EC2NodeClass {ref.get('name')!r} not found"
                                   if nodeclass is None else _not_ready(ref.get("name"), nodeclass))
        conditions = set_condition(conditions, L.CONDITION_READY, ready, now, reason, message)
        resources = {k: format_quantity(k, v) for k, v in usage.items() if k in _REPORTED}
        resources["nodes"] = str(usage.get("nodes", 0))
        target = format_target(target_utilization(annotations))
        new_status: dict[str, Any] = {"resources": resources, "conditions": conditions, "targetUtilization": target}
        if (status.get("resources") == resources and status.get("targetUtilization") == target
                and _same(status.get("conditions") or [], conditions)):
            return
        self.ctx.cluster.patch_status(r.NODEPOOLS, name_of(pool), new_status)

    def _report_annotations(self, pool: Obj, problems: str) -> None:
        """Log and record a Warning Event when the pool's annotation problems change (see module docstring)."""
        name = name_of(pool)
        if problems == self._annotation_events.get(name, ""):
            return
        self._annotation_events[name] = problems
        if problems:
            message = f"{problems}; the NodePool keeps provisioning with the default for that annotation"
            log.warning("nodepool %s: %s", name, message, extra={"nodepool": name})
            self.ctx.event(pool, "InvalidAnnotation", message, warning=True)

    def _pod_metrics(self, state: ClusterState) -> None:
        """``karpenter_pods_state`` with Karpenter's labels (:data:`nodewright.metrics.POD_STATE_LABELS`): the
        pod's name, namespace, owner (``Kind/name`` of its first owner), node, scheduled, phase, ready, and its
        node's nodepool, zone, arch, capacity type, instance type and managed (has a NodePool)."""
        gauge = self.ctx.metrics.pods_state
        hosts = {name: _host_labels(doc) for name, doc in state.nodes.items()}  # once per node, not per pod
        series: set[tuple[str, ...]] = set()
        rows: dict[str, tuple[Obj, tuple[str, ...]]] = {}
        for key, pod in state.pods.items():
            row = self._pod_rows.get(key)
            if row is None or row[0] is not pod:
                row = (pod, _pod_labels(pod))
            rows[key] = row
            name, namespace, owner, node, scheduled, phase, ready = row[1]
            nodepool, zone, arch, capacity_type, instance_type = hosts.get(node, ("", "", "", "", ""))
            series.add((name, namespace, owner, node, scheduled, nodepool, zone, arch, capacity_type, instance_type,
                        phase, ready, "true" if nodepool else "false"))
        self._pod_rows = rows
        for gone in self._pod_series - series:
            with contextlib.suppress(KeyError):
                gauge.remove(*gone)
        for new in series - self._pod_series:
            gauge.labels(*new).set(1)
        self._pod_series = series


def _host_labels(node: Obj) -> tuple[str, str, str, str, str]:
    labels = labels_of(node)
    return (str(labels.get(L.NODEPOOL, "")), str(labels.get(L.ZONE, "")), str(labels.get(L.ARCH, "")),
            str(labels.get(L.CAPACITY_TYPE, "")), str(labels.get(L.INSTANCE_TYPE, "")))


def _pod_labels(pod: Obj) -> tuple[str, str, str, str, str, str, str]:
    namespace, name = pod_key(pod).split("/", 1)
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    owner = f"{owners[0].get('kind', '')}/{owners[0].get('name', '')}" if owners else ""
    node = node_name(pod)
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return (name, namespace, owner, node, "true" if node else "false", str(status.get("phase") or "Pending"),
            "true" if ready else "false")


def _not_ready(name: Any, nodeclass: Obj) -> str:
    """Why the EC2NodeClass is not ready, carrying its own Ready message (written by
    :mod:`nodewright.controllers.nodeclass`, e.g. the permission the controller role lacks)."""
    why = str((condition(nodeclass, L.CONDITION_READY) or {}).get("message") or "")
    return f"EC2NodeClass {name!r} is not ready" + (f": {why}" if why else "")


def _same(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> bool:
    def strip(conds: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted((c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conds)

    return strip(old) == strip(new)
