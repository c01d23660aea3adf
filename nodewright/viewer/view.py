"""What ``nodewright nodes`` shows, computed from one :class:`~nodewright.state.cluster.ClusterState`.

Everything is read through the state models (:attr:`ClusterState.models`): a node's allocatable, labels and
bound pods are its :class:`~nodewright.scheduling.ExistingNode` (:meth:`ClusterModels.node`), a pod's requests
the kube-scheduler's effective requests (:meth:`ClusterModels.requests`), a NodePool's limits the validated
model's (:meth:`ClusterModels.nodepool`). Requests count every non-terminal pod bound to the node, DaemonSet pods
included, as eks-node-viewer does (``pkg/model/node.go``: the sum of the pods' requests against allocatable).

Prices (USD/hour) follow eks-node-viewer's columns with one addition, the effective price: the list price is
the offering's on-demand price, or the spot price for spot nodes (:meth:`PricingEngine.list_price
<nodewright.pricing.engine.PricingEngine.list_price>` over the bundled tables of :mod:`nodewright.cloud.prices`);
with a PricingPolicy the effective price is the node's share of the whole fleet's bill under it, the same
attribution as the ``nodewright_nodepool_cost_per_hour_usd{price="effective"}`` metric
(:func:`nodewright.pricing.report.group_costs`, each node its own group). Every node with an instance-type label
is priced, also those nodewright did not launch (eks-node-viewer issue #176).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.prices import on_demand_prices
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import (
    Obj,
    is_deleting,
    labels_of,
    match_label_selector_string,
    meta,
    parse_label_selector_string,
    parse_time,
)
from nodewright.pricing import PricingEngine, PricingPolicy, Usage
from nodewright.pricing.policy import parse_pricing_policy
from nodewright.pricing.report import group_costs
from nodewright.quantities import CPU, MEMORY, Resources, add, parse_resource_list
from nodewright.state.cluster import ClusterState
from nodewright.state.pods import is_terminal, node_name, pod_key

#: The group of nodes without a ``karpenter.sh/nodepool`` label.
UNMANAGED = "(no NodePool)"
#: Sort keys besides label keys; ``=asc`` / ``=desc`` (or eks-node-viewer's ``=dsc``) may follow.
SORT_KEYS = ("name", "creation", "cpu", "memory", "pods", "price")
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class NodeRow:
    """One node. cpu in millicores, memory in bytes, prices USD/hour (None: no price known), ``created`` epoch
    seconds (None when the node has no creationTimestamp)."""

    name: str
    nodepool: str
    instance_type: str
    capacity_type: str
    zone: str
    created: float | None
    cpu_requested: int
    cpu_allocatable: int
    memory_requested: int
    memory_allocatable: int
    pods: int
    pods_allocatable: int
    ready: bool
    deleting: bool
    cordoned: bool
    list_price: float | None
    effective_price: float | None
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """``Ready``, ``NotReady``, ``Deleting`` or ``Cordoned`` (the most pressing first)."""
        if self.deleting:
            return "Deleting"
        if not self.ready:
            return "NotReady"
        return "Cordoned" if self.cordoned else "Ready"


@dataclass(frozen=True)
class PoolRow:
    """One NodePool (or :data:`UNMANAGED`) with the sums of its nodes' columns, its ``spec.limits`` (cpu
    millicores, memory bytes, ...) and its usage against them (``status.resources``, the NodeClaims' capacity
    Karpenter counts against limits; the nodes' capacity when the NodePool has no status yet)."""

    name: str
    nodes: tuple[NodeRow, ...]
    limits: Resources
    usage: Resources
    cpu_requested: int
    cpu_allocatable: int
    memory_requested: int
    memory_allocatable: int
    pods: int
    list_price: float
    effective_price: float | None


@dataclass(frozen=True)
class PendingRow:
    """A pod without a node: ``namespace/name``, its requests and why it waits, on one line."""

    key: str
    created: float | None
    cpu: int
    memory: int
    reason: str


@dataclass(frozen=True)
class ClusterView:
    """Everything on screen; :attr:`list_price` / :attr:`effective_price` total every priced node (USD/hour)."""

    pending: tuple[PendingRow, ...]
    pools: tuple[PoolRow, ...]
    now: float
    pricing: str
    selector: str = ""
    sort: str = "creation"
    hidden_nodes: int = 0

    @property
    def nodes(self) -> list[NodeRow]:
        return [n for pool in self.pools for n in pool.nodes]

    @property
    def list_price(self) -> float:
        return round(sum(p.list_price for p in self.pools), 6)

    @property
    def effective_price(self) -> float | None:
        prices = [p.effective_price for p in self.pools]
        return None if any(p is None for p in prices) else round(sum(p or 0.0 for p in prices), 6)


def check_selector(selector: str) -> str:
    """``selector`` when it parses as a label selector (``a=b,c in (x,y),!d``).

    Raises:
        NodewrightValidationError: ``--node-selector: <why>``.
    """
    try:
        parse_label_selector_string(selector)
    except ValueError as err:
        raise NodewrightValidationError("--node-selector", str(err)) from err
    return selector


def parse_sort(text: str) -> tuple[str, bool]:
    """``"cpu=desc"`` -> ``("cpu", True)``: the key (one of :data:`SORT_KEYS` or a label key, ``label:`` prefix
    optional) and whether it is descending. ``creation`` defaults to oldest first, like eks-node-viewer.

    Raises:
        NodewrightValidationError: ``--sort: <why>``.
    """
    key, _, order = text.partition("=")
    key = key.strip().removeprefix("label:")
    if not key:
        raise NodewrightValidationError("--sort", f"{text!r}: give a key ({', '.join(SORT_KEYS)} or a label key)")
    if order not in ("", "asc", "desc", "dsc"):
        raise NodewrightValidationError("--sort", f"{text!r}: order must be asc or desc, not {order!r}")
    return key, order in ("desc", "dsc")


class Pricer:
    """List and effective USD/hour of nodes (see the module docstring).

    Args:
        policy: the PricingPolicy in force, or None (no effective prices).
        region: the region whose bundled prices apply when a node carries no ``topology.kubernetes.io/region``
            label and no zone to infer it from.
    """

    def __init__(self, policy: PricingPolicy | None = None, region: str | None = None) -> None:
        self.policy = policy
        self.region = region
        self._empty = parse_pricing_policy({"apiVersion": "nodewright.io/v1alpha1", "kind": "PricingPolicy"})
        self._engines: dict[str, PricingEngine] = {}

    def engine(self, region: str) -> PricingEngine:
        """The engine of ``region`` (bundled on-demand prices, modelled spot)."""
        if region not in self._engines:
            self._engines[region] = PricingEngine(self.policy or self._empty, on_demand_prices(region))
        return self._engines[region]

    def region_of(self, labels: Mapping[str, str]) -> str:
        """A node's region: its region label, else its zone without the trailing letter, else the default."""
        region = labels.get(L.REGION) or ""
        zone = labels.get(L.ZONE) or ""
        if not region and zone and zone[-1].isalpha():
            region = zone[:-1]
        return region or self.region or DEFAULT_REGION

    def describe(self, source: str = "") -> str:
        """One line naming the prices used."""
        region = self.region or DEFAULT_REGION
        base = on_demand_prices(region).source
        if self.policy is None:
            return f"list prices: {base}; spot modelled"
        return f"effective prices under {source or 'the PricingPolicy'}; list prices: {base}; spot modelled"

    def prices(self, nodes: Mapping[str, Mapping[str, str]]) -> dict[str, tuple[float | None, float | None]]:
        """Node name -> (list, effective) USD/hour, given each node's labels; effective is None without a
        policy, both are None for a node without a known price."""
        by_region: dict[str, dict[str, Usage]] = {}
        for name, labels in nodes.items():
            usage = Usage.from_labels(labels)
            if usage is not None:
                by_region.setdefault(self.region_of(labels), {})[name] = usage
        out: dict[str, tuple[float | None, float | None]] = dict.fromkeys(nodes, (None, None))
        for region, usages in by_region.items():
            engine = self.engine(region)
            listed = {name: engine.list_price(usage) for name, usage in usages.items()}
            effective: dict[str, float] = {}
            if self.policy is not None:
                groups = {name: [(usage, listed[name] or 0.0)] for name, usage in usages.items()
                          if listed[name] is not None}
                effective = group_costs(engine, [u for n, u in usages.items() if n in groups], groups)
            for name in usages:
                out[name] = (listed[name], effective.get(name) if listed[name] is not None else None)
        return out


def pending_reason(state: ClusterState, pod: Obj) -> str:
    """Why a pod has no node, on one line: the reason nodewright cannot place it (an invalid pod, a volume or
    DRA claim no new node can serve), else kube-scheduler's ``PodScheduled=False`` reason and message, else
    ``waiting for kube-scheduler``."""
    error = state.models.pod_error(pod, pending=True)
    if error is not None:
        return " ".join(str(error).split())
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            message = " ".join(str(cond.get("message") or "").split())
            reason = str(cond.get("reason") or "Unschedulable")
            return f"{reason}: {message}" if message else reason
    nominated = (pod.get("status") or {}).get("nominatedNodeName")
    return f"nominated to {nominated}" if nominated else "waiting for kube-scheduler"


def _ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _sort_value(row: NodeRow, key: str) -> Any:
    if key == "name":
        return row.name
    if key == "creation":
        return row.created if row.created is not None else float("inf")
    if key == "cpu":
        return row.cpu_requested / row.cpu_allocatable if row.cpu_allocatable else 0.0
    if key == "memory":
        return row.memory_requested / row.memory_allocatable if row.memory_allocatable else 0.0
    if key == "pods":
        return row.pods
    if key == "price":
        return row.list_price if row.list_price is not None else -1.0
    return row.labels.get(key, "")


def sort_nodes(rows: list[NodeRow], sort: str) -> list[NodeRow]:
    """``rows`` in the ``--sort`` order (:func:`parse_sort`), ties by name."""
    key, descending = parse_sort(sort)
    ordered = sorted(rows, key=lambda r: r.name)
    return sorted(ordered, key=lambda r: _sort_value(r, key), reverse=descending)


def _pool_limits(state: ClusterState, name: str) -> tuple[Resources, Resources | None]:
    """(spec.limits, status.resources or None) of a NodePool; ({}, None) when absent or invalid."""
    doc = state.nodepools.get(name)
    if doc is None:
        return {}, None
    try:
        limits = dict(state.models.nodepool(doc).spec.limits or {})
    except NodewrightValidationError:
        return {}, None
    parsed = parse_resource_list({k: v for k, v in limits.items()}) if limits else {}
    status = (doc.get("status") or {}).get("resources")
    try:
        usage = parse_resource_list({k: v for k, v in (status or {}).items() if k != "nodes"}) if status else None
    except NodewrightValidationError:
        usage = None
    return parsed, usage


def build_view(state: ClusterState, pricer: Pricer, now: float, selector: str = "", sort: str = "creation",
               pricing_source: str = "") -> ClusterView:
    """The view of ``state`` at ``now`` (epoch seconds): nodes matching ``selector`` (a label selector string),
    grouped by NodePool (pools by name, unmanaged last), ordered by ``sort``; pending pods oldest first.

    Raises:
        NodewrightValidationError: a malformed ``selector`` or ``sort``.
    """
    check_selector(selector)
    parse_sort(sort)
    models = state.models
    shown: dict[str, tuple[Obj, Any]] = {}
    hidden = 0
    for name, doc in state.nodes.items():
        if selector and not match_label_selector_string(selector, labels_of(doc)):
            hidden += 1
            continue
        pods = models.pods(p for p in state.pods_on(name) if not is_terminal(p))
        model = models.node(doc, pods)
        if model is None:  # an invalid Node object (logged by the models)
            continue
        shown[name] = (doc, model)
    prices = pricer.prices({name: model.labels for name, (_, model) in shown.items()})
    rows: dict[str, list[NodeRow]] = {}
    capacity: dict[str, Resources] = {}
    for name, (doc, model) in shown.items():
        requested = model.requested()
        listed, effective = prices[name]
        pool = model.nodepool or UNMANAGED
        rows.setdefault(pool, []).append(NodeRow(
            name=name, nodepool=model.nodepool, instance_type=model.instance_type,
            capacity_type=model.capacity_type or str(model.labels.get(L.CAPACITY_TYPE, "")), zone=model.zone,
            created=parse_time(meta(doc).get("creationTimestamp")),
            cpu_requested=requested.get(CPU, 0), cpu_allocatable=model.allocatable.get(CPU, 0),
            memory_requested=requested.get(MEMORY, 0), memory_allocatable=model.allocatable.get(MEMORY, 0),
            pods=len(model.pods), pods_allocatable=model.allocatable.get("pods", 0), ready=_ready(doc),
            deleting=is_deleting(doc), cordoned=bool((doc.get("spec") or {}).get("unschedulable")),
            list_price=listed, effective_price=effective, labels=model.labels))
        try:
            node_capacity = parse_resource_list((doc.get("status") or {}).get("capacity"))
        except NodewrightValidationError:
            node_capacity = {}
        capacity[pool] = add(capacity.get(pool, {}), node_capacity)
    names = sorted((set(rows) | {n for n, d in state.nodepools.items() if not is_deleting(d)}) - {UNMANAGED})
    if UNMANAGED in rows:
        names.append(UNMANAGED)
    pools = []
    for name in names:
        members = tuple(sort_nodes(rows.get(name, []), sort))
        limits, usage = _pool_limits(state, name) if name != UNMANAGED else ({}, None)
        shares = ([n.effective_price for n in members if n.list_price is not None]
                  if pricer.policy is not None else None)
        pools.append(PoolRow(
            name=name, nodes=members, limits=limits, usage=usage if usage is not None else capacity.get(name, {}),
            cpu_requested=sum(n.cpu_requested for n in members), cpu_allocatable=sum(n.cpu_allocatable for n in members),
            memory_requested=sum(n.memory_requested for n in members),
            memory_allocatable=sum(n.memory_allocatable for n in members), pods=sum(n.pods for n in members),
            list_price=round(sum(n.list_price or 0.0 for n in members), 6),
            effective_price=None if shares is None else round(sum(p or 0.0 for p in shares), 6)))
    pending = []
    for pod in state.pods.values():
        if node_name(pod) or is_terminal(pod):
            continue
        requests = models.requests(pod)
        pending.append(PendingRow(pod_key(pod), parse_time(meta(pod).get("creationTimestamp")),
                                  requests.get(CPU, 0), requests.get(MEMORY, 0), pending_reason(state, pod)))
    pending.sort(key=lambda p: (p.created if p.created is not None else float("inf"), p.key))
    return ClusterView(tuple(pending), tuple(pools), now, pricer.describe(pricing_source), selector, sort, hidden)
