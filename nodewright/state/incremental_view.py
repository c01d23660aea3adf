"""The disruption view, incrementally: :func:`~nodewright.state.disruption_view.view_from_state`, rebuilding
only what changed.

The disruption controller builds a :class:`~nodewright.disruption.model.ClusterView` on every pass (every
reconcile, so expiration and the 15 s re-validation see fresh data). Converting every Node, NodeClaim and pod
into scheduler objects is O(cluster) and dominated the controller's time at a few hundred nodes, although most
passes see the same objects as the one before. :class:`ViewCache` keeps, per NodeClaim, the
:class:`~nodewright.disruption.model.Node` built last time together with the *versions* of its inputs, and
rebuilds a node only when one of them changed:

* a NodeClaim, its Node and the pods bound to that Node, by ``metadata.resourceVersion`` (the API server
  changes it on every write; objects without one -- hand-built test objects -- are compared by identity and
  kept referenced so the identity stays valid) and, for pods, their position in the node's pod list, so the
  scheduler sees them in the same order as a full rebuild would;
* a NodePool by its resourceVersion, the instance types the cloud provider returned for it (by identity) and
  the DaemonSets (by resourceVersion); an EC2NodeClass by its resourceVersion, so the NodePool and
  EC2NodeClass hashes are computed once per change rather than once per pass.

What depends on the pass rather than on the objects -- the node's price (its NodePool's offering, looked up in
an index built once per Pool), its last pod event, the cloud provider's drift answer and the ``now`` fallback
for a missing creation time -- is applied on every pass; a node whose inputs and these values are all unchanged
is the *same* ``Node`` object as in the previous view. PodDisruptionBudgets are recomputed every pass (their
``disruptionsAllowed`` depends on the health of every pod they select), but cost nothing without any.

The result is equal, field by field and in order, to ``view_from_state`` on the same arguments
(``tests/unit/disruption/test_incremental.py`` checks it over changing clusters). Pure apart from the cache:
no clock, no I/O.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.instancetype import InstanceType
from nodewright.disruption.model import ClusterView, Node, NodeClassInfo, Pool
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import Obj, is_deleting, labels_of, meta, name_of, parse_time
from nodewright.scheduling import ExistingNode, Pod
from nodewright.state.cluster import ClusterState
from nodewright.state.disruption_view import _pods as node_pods
from nodewright.state.disruption_view import (
    node_from_state,
    nodeclass_info,
    pdbs_from_state,
    pool_from_doc,
)
from nodewright.state.models import object_version, versions

log = logging.getLogger("nodewright.disruption")


def _versions(objs: Sequence[Obj]) -> tuple[Hashable, ...]:
    return versions(objs)


def _same_objects(old: Sequence[Obj], new: Sequence[Obj]) -> bool:
    """Whether ``new`` holds the very objects of ``old``, in order (objects are never mutated in place)."""
    return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))


@dataclass(slots=True)
class _NodeEntry:
    """The last Node built for one NodeClaim and the versions of what it was built from."""

    key: tuple[Hashable, ...]
    keep: tuple[Obj, ...]  # the input objects, referenced so identity-based versions stay valid
    base: Node | None  # built without pass-dependent fields (price 0, no last pod event/drift); None: unreadable
    created: float | None  # NodeClaim creationTimestamp (None: use ``now``, as view_from_state does)
    claim_last_pod_event: float | None  # NodeClaim status.lastPodEventTime
    last: Node | None = None


@dataclass(slots=True)
class _PoolEntry:
    key: tuple[Hashable, ...]
    keep: tuple[Any, ...]
    pool: Pool | None
    error: NodewrightValidationError | None

    def price(self, labels: Mapping[str, str]) -> float:
        """The node's offering price (:meth:`Pool.price_of`), 0.0 without a valid pool."""
        return self.pool.price_of(labels) if self.pool is not None else 0.0


@dataclass
class CacheStats:
    """Counters of the last :meth:`ViewCache.build` (for tests, logs and benchmarks).

    Attributes:
        nodes_rebuilt: managed nodes converted from their objects in the last pass.
        nodes_reused: managed nodes whose conversion was reused (a new ``Node`` only when a pass-dependent
            field changed).
        pools_rebuilt: NodePools parsed and hashed in the last pass.
    """

    nodes_rebuilt: int = 0
    nodes_reused: int = 0
    pools_rebuilt: int = 0


@dataclass
class ViewCache:
    """Builds :class:`ClusterView` s incrementally (see module docstring). One per disruption controller."""

    stats: CacheStats = field(default_factory=CacheStats)
    _pools: dict[str, _PoolEntry] = field(default_factory=dict)
    _nodes: dict[str, _NodeEntry] = field(default_factory=dict)
    _unmanaged: dict[str, tuple[tuple[Hashable, ...], tuple[Obj, ...], ExistingNode | None]] = field(
        default_factory=dict)
    _nodeclasses: dict[str, tuple[Hashable, Obj, NodeClassInfo]] = field(default_factory=dict)
    _models_epoch: int = -1

    def build(
        self,
        state: ClusterState,
        now: float,
        instance_types: Mapping[str, Sequence[InstanceType]],
        last_pod_events: Mapping[str, float] | None = None,
        cloud_drift: Mapping[str, str | None] | None = None,
    ) -> ClusterView:
        """The same view as :func:`~nodewright.state.disruption_view.view_from_state` with these arguments."""
        self.stats = CacheStats()
        if state.models.epoch != self._models_epoch:  # conversions changed (namespaces, SCHEDULER_CONFIG selectors)
            self._models_epoch = state.models.epoch
            self._nodes.clear()
            self._unmanaged.clear()
        last_pod_events = last_pod_events or {}
        cloud_drift = cloud_drift or {}
        daemonsets, ds_key = self._daemonset_pods(state)
        pools, entries = self._build_pools(state, instance_types, daemonsets, ds_key)
        nodes: list[Node] = []
        managed: set[str] = set()
        seen: set[str] = set()
        for claim in state.nodeclaims.values():
            registered = state.node_for(claim)
            if registered is None:
                continue
            node_name = name_of(registered)
            managed.add(node_name)
            claim_name = name_of(claim)
            seen.add(claim_name)
            node = self._node(claim, registered, state, entries, last_pod_events.get(node_name),
                              cloud_drift.get(claim_name), now)
            if node is not None:
                nodes.append(node)
        for gone in [n for n in self._nodes if n not in seen]:
            del self._nodes[gone]
        return ClusterView(
            nodes=nodes,
            pools=pools,
            nodeclasses=self._nodeclass_infos(state),
            pdbs=pdbs_from_state(state) if state.pdbs else [],
            unmanaged=self._unmanaged_nodes(state, managed),
            daemonsets=daemonsets,
        )

    # --- parts --------------------------------------------------------------------------------

    def _daemonset_pods(self, state: ClusterState) -> tuple[list[Pod], tuple[Hashable, ...]]:
        pods = state.daemonset_models()
        return pods, tuple(p.shape for p in pods)

    def _build_pools(
        self, state: ClusterState, instance_types: Mapping[str, Sequence[InstanceType]], daemonsets: list[Pod],
        ds_key: tuple[Hashable, ...],
    ) -> tuple[dict[str, Pool], dict[str, _PoolEntry]]:
        pools: dict[str, Pool] = {}
        entries: dict[str, _PoolEntry] = {}
        for name, doc in sorted(state.nodepools.items()):
            if is_deleting(doc) or name not in instance_types:
                continue
            types = instance_types[name]
            key = (object_version(doc), tuple(id(it) for it in types), ds_key)
            entry = self._pools.get(name)
            if entry is None or entry.key != key:
                self.stats.pools_rebuilt += 1
                try:
                    entry = _PoolEntry(key, (doc, types), pool_from_doc(doc, types, daemonsets, state.models), None)
                except NodewrightValidationError as err:
                    entry = _PoolEntry(key, (doc, types), None, err)
            entries[name] = entry
            if entry.pool is not None:
                pools[name] = entry.pool
            else:
                log.error("disruption ignores nodepool %s: %s", name, entry.error, extra={"nodepool": name})
        self._pools = entries
        return pools, entries

    def _node(
        self, claim: Obj, doc: Obj, state: ClusterState, pools: Mapping[str, _PoolEntry],
        last_pod_event: float | None, cloud_drift: str | None, now: float,
    ) -> Node | None:
        pods = state.pods_on(name_of(doc))
        claim_name = name_of(claim)
        entry = self._nodes.get(claim_name)
        inputs = (claim, doc, *pods)
        # The very objects of last pass (the common case, cheap to check), else the same versions (a relist).
        if entry is not None and not _same_objects(entry.keep, inputs):
            if entry.key == (object_version(claim), object_version(doc), _versions(pods)):
                entry.keep = inputs
            else:
                entry = None
        if entry is None:
            key = (object_version(claim), object_version(doc), _versions(pods))
            self.stats.nodes_rebuilt += 1
            status = claim.get("status") or {}
            entry = _NodeEntry(
                key=key,
                keep=inputs,
                base=node_from_state(claim, doc, state, {}, None, None, now),
                created=parse_time(meta(claim).get("creationTimestamp")),
                claim_last_pod_event=parse_time(status.get("lastPodEventTime")),
            )
            self._nodes[claim_name] = entry
        else:
            self.stats.nodes_reused += 1
        base = entry.base
        if base is None:
            return None
        pool = pools.get(base.nodepool)
        price = pool.price(base.view.labels) if pool is not None else 0.0
        created = entry.created or now
        event = last_pod_event if last_pod_event is not None else entry.claim_last_pod_event
        last = entry.last
        if (last is not None and last.price == price and last.created == created and last.last_pod_event == event
                and last.cloud_drift == cloud_drift):
            return last
        entry.last = dataclasses.replace(base, price=price, created=created, last_pod_event=event,
                                         cloud_drift=cloud_drift)
        return entry.last

    def _unmanaged_nodes(self, state: ClusterState, managed: set[str]) -> list[ExistingNode]:
        out: list[ExistingNode] = []
        cache: dict[str, tuple[tuple[Hashable, ...], tuple[Obj, ...], ExistingNode | None]] = {}
        for name, doc in state.nodes.items():
            if name in managed or L.NODEPOOL in labels_of(doc):
                continue
            pods = state.pods_on(name)
            key = (object_version(doc), *_versions(pods))
            hit = self._unmanaged.get(name)
            if hit is None or hit[0] != key:
                hit = (key, (doc, *pods), state.models.node(doc, node_pods(state, name_of(doc))[0]))
            cache[name] = hit
            if hit[2] is not None:
                out.append(hit[2])
        self._unmanaged = cache
        return out

    def _nodeclass_infos(self, state: ClusterState) -> dict[str, NodeClassInfo]:
        out: dict[str, NodeClassInfo] = {}
        cache: dict[str, tuple[Hashable, Obj, NodeClassInfo]] = {}
        for name, doc in state.nodeclasses.items():
            key = object_version(doc)
            hit = self._nodeclasses.get(name)
            if hit is None or hit[0] != key:
                hit = (key, doc, nodeclass_info(doc))
            cache[name] = hit
            out[name] = hit[2]
        self._nodeclasses = cache
        return out
