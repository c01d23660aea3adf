"""The scheduler: pending pods + cluster state + NodePools + instance types -> NodeClaims to create.

Order and placement follow Karpenter's provisioning scheduler (``scheduler.go``):

1. Pods are queued by cpu request, then memory request, descending.
2. Each pod tries existing nodes (initialized first, then in-flight ones), then NodeClaims already opened in this
   batch, then a new NodeClaim from the NodePools by weight descending, then name. A NodeClaim keeps every
   instance type that is compatible with its pods' requirements and still fits their summed requests plus the
   pool's daemonset overhead.
3. A pod that fails everywhere relaxes one soft constraint (see :mod:`nodewright.scheduling.classes`) and is
   requeued; the loop ends when a full pass over the queue makes no progress.
4. New NodeClaims list their candidate types by cheapest compatible offering, at most 60, honouring
   ``minValues``; the launch most likely gets the first. Spot is preferred over on-demand when both are allowed.

nodewright's additions:

- **Cost-optimal packing.** Pods whose placement neither depends on nor changes topology counts (no spread,
  no pod (anti-)affinity, not selected by any such constraint; host ports allowed unless their port is used
  with several specific host IPs) are not packed one by one: they first fill the spare room of NodeClaims
  opened for constrained pods (when that does not raise the NodeClaim's price), then are packed per
  (NodePool, requirements) group by :mod:`nodewright.scheduling.packing`, which searches for the cheapest fleet
  rather than the first one that fits. Host ports become one-per-node resources for the packer.
- **Topology re-pack.** Once the Karpenter loop has placed every constrained pod, its NodeClaims are re-packed
  into cheaper NodeClaims with the same requirements where :mod:`nodewright.scheduling.repack` says no
  constraint can break (split within the same domains; merge only pods no hostname constraint involves).
- **Target utilization** per NodePool (budgets scaled, see :mod:`nodewright.scheduling.templates`).
- **Limits** are enforced on the final candidate lists: a NodeClaim's candidates never include a type whose
  capacity would exceed what remains of its pool's limits, so no launch can breach them.

- **Node inclusion policies** of topology spread (``nodeAffinityPolicy``/``nodeTaintsPolicy``) apply to this
  run's NodeClaims as to existing nodes (see :mod:`nodewright.scheduling.topology`).

Equivalence classes (identical replicas) share requirement, compatibility and topology work, and each class
remembers which nodes/NodeClaims can never take it again (taints, requirements, resources, hostname spread /
anti-affinity counts: all monotonic), so a batch of 20,000 pods does not cost 20,000 scans.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from operator import le
from typing import Any

from nodewright.api import labels as wk
from nodewright.cloud.instancetype import InstanceType
from nodewright.quantities import CPU, MEMORY, PODS, Resources, format_resources
from nodewright.scheduling.classes import PodClass
from nodewright.scheduling.nodepools import NodePoolSpec, daemonset_overhead
from nodewright.scheduling.nodes import ExistingNode
from nodewright.scheduling.packing import Bin, Item, pack
from nodewright.scheduling.pods import HostPort, Pod
from nodewright.scheduling.repack import PRICE_EPSILON, domains_pinned, hostname_bound, keeps_together
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.result import NodeClaimPlan, SchedulingEvent, SchedulingResult
from nodewright.scheduling.taints import PREFER_NO_SCHEDULE, untolerated
from nodewright.scheduling.templates import (
    PoolTemplate,
    TypeInfo,
    Vector,
    capacity_type_for,
    fitting_prefix,
    satisfies_min_values,
    truncate_candidates,
)
from nodewright.scheduling.topology import AFFINITY, SPREAD, NodeFilter, Topology, TopologyGroup, record

#: Karpenter truncates the fleet request's instance types to 60.
MAX_INSTANCE_TYPES = 60

log = logging.getLogger("nodewright.scheduling")


class _NodeState:
    """An existing node during the run: free resources, blocking taints, host ports."""

    __slots__ = ("node", "index", "free", "labels", "taints", "ports", "placed")

    def __init__(self, node: ExistingNode, index: int, dims: Sequence[str], pending_overhead: Resources) -> None:
        self.node = node
        self.index = index
        used = node.requested()
        self.free = [
            node.allocatable.get(d, 0) - used.get(d, 0) - pending_overhead.get(d, 0) for d in dims
        ]
        self.labels = node.labels
        self.taints = node.scheduling_taints()
        self.ports: list[HostPort] = [p for pod in node.pods for p in pod.host_ports]
        self.placed: list[Pod] = []


class _Claim:
    """A NodeClaim being built in this run."""

    __slots__ = (
        "pool", "index", "hostname", "reqs", "types", "ptr", "need", "pods", "ports", "seen", "packed", "final",
        "reserved",
    )

    def __init__(self, pool: PoolTemplate, index: int, reqs: Requirements, types: list[TypeInfo], dims: int) -> None:
        self.pool = pool
        self.index = index
        self.hostname = f"hostname-placeholder-{index:04d}"
        self.reqs = reqs
        self.types = types
        self.ptr = 0
        self.need = [0] * dims
        self.pods: list[Pod] = []
        self.ports: list[HostPort] = []
        self.seen: set[int] = set()
        self.packed = False
        #: Launch candidates fixed when the NodeClaim was packed (packed NodeClaims take no further pods).
        self.final: list[TypeInfo] | None = None
        #: The types whose largest capacity was reserved against the pool's limits for this NodeClaim.
        self.reserved: list[TypeInfo] = []

    def fit_index(self, vec: Vector) -> int | None:
        """Index of the cheapest type fitting need + vec (types before ``ptr`` never fit the current need)."""
        need = [a + b for a, b in zip(self.need, vec, strict=True)]
        types = self.types
        for i in range(self.ptr, len(types)):
            if types[i].fits(need):
                return i
        return None

    def fits(self, vec: Vector) -> bool:
        """Whether some type fits need + vec; does not move ``ptr``."""
        return self.fit_index(vec) is not None

    def domains(self, key: str, reqs: Requirements) -> set[str]:
        """Values the claim's node could have for ``key`` under ``reqs``."""
        if key == wk.HOSTNAME:
            return {self.hostname}
        return set(self.pool.domains(key, reqs))

    def cheapest(self) -> TypeInfo | None:
        """The cheapest type that fits the claim's pods (types are kept cheapest first); advances ``ptr``."""
        index = self.fit_index((0,) * len(self.need))
        if index is None:
            return None
        self.ptr = index
        return self.types[index]


class _Run:
    """State of one :func:`schedule` call."""

    def __init__(
        self,
        pods: Sequence[Pod],
        nodes: Sequence[ExistingNode],
        nodepools: Sequence[NodePoolSpec],
        instance_types: Mapping[str, Sequence[InstanceType]],
        daemonsets: Iterable[Pod] | None,
        max_new: int | None,
        allowed: Collection[str] | None,
    ) -> None:
        self.result = SchedulingResult()
        self.max_new = max_new
        ds = list(daemonsets) if daemonsets is not None else None
        overheads = {
            np.name: (daemonset_overhead(np.requirements, np.taints, ds) if ds is not None else np.daemonset_overhead)
            for np in nodepools
        }
        names: set[str] = set()
        for p in pods:
            names.update(p.requests)
        for o in overheads.values():
            names.update(o)
        self.dims = [CPU, MEMORY, PODS] + sorted(names - {CPU, MEMORY, PODS})
        ordered = sorted(nodepools, key=lambda n: (-n.weight, n.name))
        self.pools = [
            PoolTemplate(np, i, instance_types.get(np.name, ()), self.dims, overheads[np.name])
            for i, np in enumerate(ordered)
            if allowed is None or np.name in allowed
        ]
        self.prefer_no_schedule = any(t.effect == PREFER_NO_SCHEDULE for p in self.pools for t in p.taints)
        self.topology = Topology()
        self.claims: list[_Claim] = []
        self.limit_logged: set[str] = set()
        self.plan_reqs: dict[tuple[object, ...], tuple[Requirements, dict[str, str]]] = {}
        self.priced_cache: dict[tuple[object, ...], list[tuple[TypeInfo, float]]] = {}
        #: NodeClaims planned while the topology re-pack replaces some (checked against ``max_new``).
        self.claim_total = 0
        # Existing nodes: initialized first (Karpenter), skipping nodes that cannot take pods.
        usable = [n for n in nodes if not n.marked_for_deletion and not n.unschedulable]
        usable.sort(key=lambda n: (not n.initialized, n.name))
        pool_overhead = {p.name: p.overhead for p in self.pools}
        self.nodes = []
        for i, n in enumerate(usable):
            pending: Resources = {}
            if not n.initialized and not any(p.is_daemonset for p in n.pods):
                pending = pool_overhead.get(n.nodepool, {})
            self.nodes.append(_NodeState(n, i, self.dims, pending))
        self.all_nodes = list(nodes)
        self.classes = self._build_classes(pods)

    # --- setup --------------------------------------------------------------------------------
    def _build_classes(self, pods: Sequence[Pod]) -> list[PodClass]:
        by_shape: dict[int, list[PodClass]] = {}
        classes: list[PodClass] = []
        for pod in pods:
            bucket = by_shape.setdefault(pod.shape_key, [])
            for cls in bucket:
                if cls.rep.shape is pod.shape or cls.rep.shape == pod.shape:
                    cls.pods.append(pod)
                    break
            else:
                vec = tuple(pod.requests.get(d, 0) for d in self.dims)
                cls = PodClass(index=len(classes), rep=pod, pods=[pod], vec=vec)
                bucket.append(cls)
                classes.append(cls)
        for node in self.all_nodes:
            for pod in node.pods:
                self.topology.register_existing_owner(pod)
        for cls in classes:
            cls.refresh(self.topology)
        for cls in classes:
            cls.selecting = self.topology.selecting(cls.rep)
            cls.inverse = self.topology.inverse_for(cls.rep)
        self._count_existing()
        self._init_universes(classes)
        return classes

    def _count_existing(self) -> None:
        groups = self.topology.groups
        if not groups:
            return
        for node in self.all_nodes:
            if node.marked_for_deletion:
                continue
            for pod in node.pods:
                for g in groups:
                    domain = node.labels.get(g.key)
                    if domain is None:
                        continue
                    if g.selects(pod) and (
                        g.node_filter is None or g.node_filter.matches_node(node.labels, node.taints)
                    ):
                        g.counts[domain] = g.counts.get(domain, 0) + 1
                    if g.enforce_inverse and any(
                        t.topology_key == g.key and t.label_selector == g.selector
                        for t in pod.affinity.pod_anti_affinity_required
                    ):
                        g.owner_counts[domain] = g.owner_counts.get(domain, 0) + 1

    def _init_universes(self, classes: Sequence[PodClass]) -> None:
        for cls in classes:
            for g in cls.owned:
                if g.kind != SPREAD or g.key == wk.HOSTNAME:
                    continue
                g.universe |= self._eligible_domains(cls, g)

    def _eligible_domains(self, cls: PodClass, g: TopologyGroup) -> set[str]:
        """Domains of ``g.key`` a pod of ``cls`` could reach: from compatible NodePools and existing nodes, minus
        those whose taints the group's node filter honours and the owner does not tolerate."""
        key = g.key
        flt = g.node_filter
        domains: set[str] = set()
        for pool in self.pools:
            if pool.reqs.incompatibility(cls.reqs) is not None:
                continue
            if flt is not None and not flt.tolerates(pool.taints):
                continue
            merged = pool.reqs.intersect(cls.reqs)
            types = pool.types_for(merged)
            if types:
                domains |= pool.domains(key, merged)
        for node in self.nodes:
            value = node.labels.get(key)
            if value is not None and cls.reqs.satisfied_by_labels(node.labels):
                if flt is None or flt.tolerates(node.node.taints):
                    domains.add(value)
        return domains

    # --- events --------------------------------------------------------------------------------
    def event(self, message: str, level: str = "INFO", **fields: Any) -> None:
        # Recorded only: schedule() logs the events of the plan it returns (it may compute two).
        self.result.events.append(SchedulingEvent(message, level, dict(fields)))

    # --- existing nodes ------------------------------------------------------------------------
    def try_node(self, cls: PodClass, ns: _NodeState) -> tuple[bool, bool]:
        """(placed, permanently impossible)."""
        vec = cls.vec
        free = ns.free
        for i, v in enumerate(vec):
            if v > free[i]:
                return False, True
        if untolerated(cls.tolerations, ns.taints) is not None:
            return False, True
        if not cls.reqs.satisfied_by_labels(ns.labels):
            return False, True
        if cls.rep.host_ports and any(a.conflicts(b) for a in cls.rep.host_ports for b in ns.ports):
            return False, True
        domains: dict[str, str] = {}
        if cls.owned or cls.inverse or cls.selecting:
            ok, permanent = self._node_topology(cls, ns, domains)
            if not ok:
                return False, permanent
        for i, v in enumerate(vec):
            free[i] -= v
        pod = cls.pods.pop()
        ns.placed.append(pod)
        ns.ports.extend(cls.rep.host_ports)
        if domains:
            self._record(cls, domains, lambda f: f.matches_node(ns.labels, ns.node.taints))
        return True, False

    def _node_topology(self, cls: PodClass, ns: _NodeState, domains: dict[str, str]) -> tuple[bool, bool]:
        for g in cls.owned:
            value = ns.labels.get(g.key)
            if value is None:
                if g.kind == SPREAD or g.kind == AFFINITY:
                    return False, True
                continue
            if not g.admissible({value}, g in cls.selecting):
                return False, g.key == wk.HOSTNAME and g.kind != AFFINITY
        for g in cls.inverse:
            value = ns.labels.get(g.key)
            if value is not None and not g.inverse_admissible({value}):
                return False, g.key == wk.HOSTNAME
        for g in (*cls.selecting, *cls.owned):
            value = ns.labels.get(g.key)
            if value is not None:
                domains[g.key] = value
        return True, False

    def _record(self, cls: PodClass, domains: Mapping[str, str], counts_on: Callable[[NodeFilter], bool]) -> None:
        """Count a pod of ``cls`` just placed in ``domains``; ``counts_on`` says whether its node passes a
        spread group's node filter (nodeAffinityPolicy / nodeTaintsPolicy)."""
        if domains:
            owner_of = [g for g in cls.owned if g.enforce_inverse]
            record(cls.selecting, domains, owner_of, counts_on)

    # --- claims --------------------------------------------------------------------------------
    def try_claim(self, cls: PodClass, claim: _Claim) -> tuple[bool, bool]:
        """(placed, permanently impossible) for one pod of ``cls`` on ``claim``."""
        pool = claim.pool
        if untolerated(cls.tolerations, pool.taints) is not None:
            return False, True
        if cls.rep.host_ports and any(a.conflicts(b) for a in cls.rep.host_ports for b in claim.ports):
            return False, True
        reqs = claim.reqs
        if cls.index not in claim.seen:
            if reqs.incompatibility(cls.reqs) is not None:
                return False, True
            reqs = reqs.intersect(cls.reqs)
        # No type of the claim fits one more pod: narrowing requirements only removes types and the claim's
        # pods only grow, so this is final (checked before the costlier topology narrowing).
        index = claim.fit_index(cls.vec)
        if index is None:
            return False, True
        topo = cls.owned or cls.inverse or cls.selecting
        domains: dict[str, str] = {}
        if topo:
            narrowed = self._claim_topology(cls, claim, reqs, domains)
            if narrowed is None:
                hostname_block = any(
                    g.key == wk.HOSTNAME and g.kind != AFFINITY for g in (*cls.owned, *cls.inverse)
                )
                return False, hostname_block and self._blocked_on_hostname(cls, claim)
            reqs = narrowed
        types: list[TypeInfo] | None = None
        if reqs is not claim.reqs:
            candidates = pool.types_for(reqs)
            if pool.remaining is None:
                types = candidates
            else:
                allowed = {id(t) for t in claim.types}
                types = [t for t in candidates if id(t) in allowed]
            need = [a + b for a, b in zip(claim.need, cls.vec, strict=True)]
            if not any(t.fits(need) for t in types):
                return False, not topo
        if pool.min_values:
            need = [a + b for a, b in zip(claim.need, cls.vec, strict=True)]
            pool_types = types if types is not None else claim.types
            if not satisfies_min_values([t for t in pool_types if t.fits(need)], pool.min_values):
                return False, True
        self._commit(cls, claim, reqs, types, domains)
        if types is None:
            claim.ptr = index  # every type before it fails the new need
        return True, False

    def _blocked_on_hostname(self, cls: PodClass, claim: _Claim) -> bool:
        for g in (*cls.owned, *cls.inverse):
            if g.key != wk.HOSTNAME or g.kind == AFFINITY:
                continue
            if g in cls.owned and not g.admissible({claim.hostname}, g in cls.selecting):
                return True
            if g in cls.inverse and not g.inverse_admissible({claim.hostname}):
                return True
        return False

    def _commit(
        self, cls: PodClass, claim: _Claim, reqs: Requirements, types: list[TypeInfo] | None, domains: Mapping[str, str]
    ) -> None:
        if types is not None:
            claim.types = types
            claim.ptr = 0
        if reqs is not claim.reqs:
            claim.reqs = reqs
            claim.seen = {cls.index}
        else:
            claim.seen.add(cls.index)
        claim.need = [a + b for a, b in zip(claim.need, cls.vec, strict=True)]
        claim.pods.append(cls.pods.pop())
        claim.ports.extend(cls.rep.host_ports)
        if domains:
            taints = claim.pool.taints
            self._record(cls, domains, lambda f: f.matches_claim(claim.reqs, taints))

    def _claim_topology(
        self, cls: PodClass, claim: _Claim, reqs: Requirements, domains: dict[str, str]
    ) -> Requirements | None:
        """Narrow ``reqs`` so every topology group of the class is satisfied; fill ``domains`` for recording.

        Returns None when no domain is admissible. Keys that a selecting group counts are pinned to one domain
        (the least populated), so counts stay exact.
        """
        keys: dict[str, set[str]] = {}
        for g in (*cls.owned, *cls.inverse, *cls.selecting):
            if g.key not in keys:
                keys[g.key] = claim.domains(g.key, reqs)
        # Set-valued constraints first (affinity, anti-affinity, inverse), then single-choice spreads.
        for g in cls.owned:
            if g.kind != SPREAD:
                keys[g.key] = g.admissible(keys[g.key], g in cls.selecting)
                if not keys[g.key]:
                    return None
        for g in cls.inverse:
            keys[g.key] = g.inverse_admissible(keys[g.key])
            if not keys[g.key]:
                return None
        for g in cls.owned:
            if g.kind == SPREAD:
                keys[g.key] = g.admissible(keys[g.key], g in cls.selecting)
                if not keys[g.key]:
                    return None
        counted = {g.key: g for g in (*cls.selecting, *cls.owned)}
        for key, g in counted.items():
            values = keys[key]
            if len(values) > 1:
                counts = g.counts
                keys[key] = {min(sorted(values), key=lambda d: counts.get(d, 0))}
        out = reqs
        for key, values in keys.items():
            if key == wk.HOSTNAME:
                continue
            current = out.get(key)
            if current is not None and not current.complement and current.values == values:
                continue
            out = out.with_requirement(Requirement(key, False, values))
        for key in counted:
            (domains[key],) = keys[key] if len(keys[key]) == 1 else (next(iter(sorted(keys[key]))),)
        return out

    def new_claim(self, cls: PodClass, reasons: list[str]) -> bool:
        """Open a NodeClaim for one pod of ``cls`` from the first NodePool (by weight, name) that can host it."""
        if self.max_new is not None and len(self.claims) >= self.max_new:
            reasons.append(f"would need more than {self.max_new} new NodeClaim(s)")
            return False
        for pool, _merged, types in self._hosting_pools(cls, reasons):
            claim = _Claim(pool, len(self.claims), pool.reqs, types, len(self.dims))
            ok, _ = self.try_claim(cls, claim)
            if not ok:
                reasons.append(f'incompatible with nodepool "{pool.name}", unsatisfiable topology constraints')
                continue
            self.claims.append(claim)
            if pool.remaining is not None:
                fitting = [t for t in claim.types if t.fits(claim.need)]
                claim.reserved = fitting[:MAX_INSTANCE_TYPES]
                pool.reserve(claim.reserved)
            return True
        return False

    def _hosting_pools(
        self, cls: PodClass, reasons: list[str]
    ) -> Iterator[tuple[PoolTemplate, Requirements, list[TypeInfo]]]:
        """NodePools (by weight, name) whose taints, requirements, limits and instance types can host one pod of
        ``cls``, with the merged requirements and the types within limits; each rejected pool adds its reason
        in Karpenter's words."""
        for pool in self.pools:
            taint = untolerated(cls.tolerations, pool.taints)
            if taint is not None:
                reasons.append(f'incompatible with nodepool "{pool.name}", did not tolerate taint {taint}')
                continue
            why = pool.reqs.incompatibility(cls.reqs)
            if why is not None:
                reasons.append(f'incompatible with nodepool "{pool.name}", {why}')
                continue
            merged = pool.reqs.intersect(cls.reqs)
            compatible = pool.types_for(merged)
            types = self._within_limits(pool, compatible)
            if compatible and not types:
                reasons.append(f'all available instance types exceed limits for nodepool: "{pool.name}"')
                continue
            if not any(t.fits(cls.vec) for t in types):
                reasons.append(
                    f'incompatible with nodepool "{pool.name}", daemonset overhead={format_resources(pool.overhead)}, '
                    f"no instance type satisfied resources {format_resources(cls.rep.requests)} and requirements "
                    f"{merged!r}"
                )
                continue
            yield pool, merged, types

    def _within_limits(self, pool: PoolTemplate, types: list[TypeInfo]) -> list[TypeInfo]:
        if pool.remaining is None:
            return types
        kept = [t for t in types if pool.within_limits(t)]
        if len(kept) != len(types) and pool.name not in self.limit_logged:
            self.limit_logged.add(pool.name)
            self.event(
                f"{len(types) - len(kept)} out of {len(types)} instance types were excluded because they would "
                "breach limits",
                nodepool=pool.name,
            )
        return kept

    def _ordered(self, types: Sequence[TypeInfo], reqs: Requirements) -> list[TypeInfo]:
        """``types`` with an offering of the launch's capacity type, cheapest offering first."""
        ct = capacity_type_for(types, reqs)
        priced = []
        for t in types:
            o = t.offering(reqs, ct)
            if o is not None:
                priced.append((o.price, t.name, t))
        priced.sort(key=lambda p: (p[0], p[1]))
        return [p[2] for p in priced]

    # --- the Karpenter loop for constrained pods -----------------------------------------------
    def place_one(self, cls: PodClass, reasons: list[str]) -> bool:
        live_nodes = getattr(cls, "_live_nodes", None)
        if live_nodes is None:
            live_nodes = list(self.nodes)
        survivors: list[_NodeState] = []
        placed = False
        for i, ns in enumerate(live_nodes):
            ok, permanent = self.try_node(cls, ns)
            if ok:
                survivors.extend(live_nodes[i:])
                placed = True
                break
            if not permanent:
                survivors.append(ns)
        cls._live_nodes = survivors  # type: ignore[attr-defined]
        if placed:
            return True
        live: list[_Claim] = getattr(cls, "_live_claims", [])
        seen_upto: int = getattr(cls, "_claims_seen", 0)
        live.extend(self.claims[seen_upto:])
        cls._claims_seen = len(self.claims)  # type: ignore[attr-defined]
        blockers = _hostname_blockers(cls)
        kept: list[_Claim] = []
        for i, claim in enumerate(live):
            if blockers and _blocked(blockers, claim.hostname):
                continue  # a cheap, exact shortcut of try_claim's permanent hostname verdict
            ok, permanent = self.try_claim(cls, claim)
            if ok:
                kept.extend(live[i:])
                cls._live_claims = kept  # type: ignore[attr-defined]
                return True
            if not permanent:
                kept.append(claim)
        cls._live_claims = kept  # type: ignore[attr-defined]
        if self.new_claim(cls, reasons):
            return True
        return False

    def reset_live(self, cls: PodClass) -> None:
        for attr in ("_live_nodes", "_live_claims", "_claims_seen"):
            if hasattr(cls, attr):
                delattr(cls, attr)

    def run_queue(self, queue: deque[tuple[PodClass, Pod]]) -> None:
        stalled = 0
        failed_at: dict[int, int] = {}
        version = 0
        while queue and stalled < len(queue):
            cls, pod = queue.popleft()
            cls.pods.append(pod)  # the class's pending stack: place_one pops it back off
            if failed_at.get(cls.index) == version:
                cls.pods.pop()
                queue.append((cls, pod))
                stalled += 1
                continue
            reasons: list[str] = []
            if self.place_one(cls, reasons):
                version += 1
                stalled = 0
                continue
            cls.pods.pop()
            message = cls.relax(self.topology, self.prefer_no_schedule)
            if message is not None:
                self.reset_live(cls)
                self._refresh_universes(cls)
                self.event(
                    f"Relaxing soft constraints for pod since it previously failed to schedule, {message}",
                    pod=pod.key,
                )
                version += 1
                stalled = 0
            else:
                cls.reason = "; ".join(dict.fromkeys(reasons)) or "no NodePool can host it"
                failed_at[cls.index] = version
                stalled += 1
            queue.append((cls, pod))
        for cls, pod in queue:
            self.result.unschedulable[pod.key] = cls.reason or "no NodePool can host it"

    def _refresh_universes(self, cls: PodClass) -> None:
        for g in cls.owned:
            if g.kind == SPREAD and g.key != wk.HOSTNAME and not g.universe:
                g.universe |= self._eligible_domains(cls, g)

    # --- re-packing topology NodeClaims (see nodewright.scheduling.repack) -------------------------
    def repack_topology(self, class_of: Mapping[int, PodClass], ambiguous: Collection[tuple[str, int]]) -> None:
        """Replace NodeClaims of the Karpenter loop by cheaper ones holding the same pods, where the rules of
        :mod:`nodewright.scheduling.repack` allow: claims whose pods no hostname constraint involves are
        re-packed together per (NodePool, requirements); any other claim is split on its own, unless it holds a
        hostname pod-affinity owner. A re-pack is kept only when its launch prices sum to strictly less."""
        units: list[tuple[list[_Claim], bool]] = []
        self.claim_total = len(self.claims)
        merge_groups: dict[tuple[object, ...], list[_Claim]] = {}
        for claim in self.claims:
            classes = list({class_of[id(p)].index: class_of[id(p)] for p in claim.pods}.values())
            if any(keeps_together(c) for c in classes) or not domains_pinned(classes, claim.reqs):
                continue
            mergeable = not any(hostname_bound(c) for c in classes) and not any(
                (p.protocol, p.port) in ambiguous for c in classes for p in c.rep.host_ports
            )
            if mergeable:
                key = (claim.pool.order, claim.reqs.identity())
                group = merge_groups.get(key)
                if group is None:
                    group = merge_groups[key] = []
                    units.append((group, True))
                group.append(claim)
            elif len(claim.pods) > 1:
                units.append(([claim], False))
        replaced: dict[int, list[_Claim]] = {}
        memo: dict[tuple[object, ...], list[Bin] | None] = {}
        for group, merging in units:
            new = self._repack(group, class_of, merging, memo)
            if new is None and len(group) > 1:
                for claim in group:
                    if len(claim.pods) > 1:
                        split = self._repack([claim], class_of, False, memo)
                        if split is not None:
                            replaced[id(claim)] = split
                continue
            if new is not None:
                replaced[id(group[0])] = new
                for claim in group[1:]:
                    replaced[id(claim)] = []
        if not replaced:
            return
        claims: list[_Claim] = []
        for claim in self.claims:
            claims.extend(replaced.get(id(claim), (claim,)))
        for i, claim in enumerate(claims):
            claim.index = i
            claim.hostname = f"hostname-placeholder-{i:04d}"
        self.claims = claims

    def _repack(
        self,
        group: list[_Claim],
        class_of: Mapping[int, PodClass],
        ports: bool,
        memo: dict[tuple[object, ...], list[Bin] | None],
    ) -> list[_Claim] | None:
        """The cheapest NodeClaims (same pool and requirements) holding the pods of ``group``, or None when the
        packer finds nothing strictly cheaper that passes limits, minValues and the NodeClaim cap. ``ports``:
        host ports become one-per-node resources (needed when pods of several claims are mixed)."""
        if len(group) == 1 and len(group[0].pods) < 2:
            return None
        pool, reqs = group[0].pool, group[0].reqs
        old_cost = 0.0
        for claim in group:
            price = self._launch_price(claim)
            if price is None:
                return None
            old_cost += price
        items, pods_of = _repack_items([p for claim in group for p in claim.pods], class_of, self.dims, ports)
        saved = None if pool.remaining is None else dict(pool.remaining)
        for claim in group:
            pool.release(claim.reserved)
        key = (pool.order, reqs.identity(), round(old_cost, 9), tuple(items))
        if saved is None and key in memo:
            plan = memo[key]
        else:
            plan = self._repack_plan(pool, reqs, items, old_cost)
            if saved is None:
                memo[key] = plan
        new = self._repack_claims(pool, reqs, items, pods_of, class_of, plan, len(group)) if plan else None
        if new is not None:
            new_cost = 0.0
            for claim in new:
                price = self._launch_price(claim)
                if price is None:
                    new = None
                    break
                new_cost += price
            if new is not None and new_cost < old_cost - PRICE_EPSILON:
                self.claim_total += len(new) - len(group)
                return new
        if saved is not None:
            pool.remaining = saved
        return None

    def _repack_plan(
        self, pool: PoolTemplate, reqs: Requirements, items: list[Item], old_cost: float
    ) -> list[Bin] | None:
        """The packer's bins for ``items`` when they cost less than ``old_cost`` (only types cheaper than it
        can be part of a cheaper plan), else None."""
        ranked = self._priced(pool, reqs)
        prices: dict[str, float] = {}
        priced: list[TypeInfo] = []
        for t, price in ranked:
            if price >= old_cost - PRICE_EPSILON:
                break
            prices[t.name] = price
            priced.append(t)
        if not priced:
            return None
        extra = len(items[0].vec) - len(self.dims)
        if extra:
            ones = (1,) * extra
            priced = [TypeInfo(t.it, t.budget + ones) for t in priced]
        bins, left = pack(items, priced, prices, thorough=False)
        if any(left) or not bins or sum(b.price for b in bins) >= old_cost - PRICE_EPSILON:
            return None
        return bins

    def _repack_claims(
        self,
        pool: PoolTemplate,
        reqs: Requirements,
        items: list[Item],
        pods_of: list[list[Pod]],
        class_of: Mapping[int, PodClass],
        plan: list[Bin],
        replacing: int,
    ) -> list[_Claim] | None:
        """NodeClaims for the bins of ``plan``, reserving limits as :meth:`new_claim` does; None when a bin has
        no type within limits, misses minValues, or the cap on new NodeClaims would be exceeded."""
        if self.max_new is not None and self.claim_total - replacing + len(plan) > self.max_new:
            return None
        base = len(self.dims)
        taken = [0] * len(items)
        new: list[_Claim] = []
        for b in plan:
            need = b.need(items, len(items[0].vec))[:base]
            types = pool.types_for(reqs)
            if pool.remaining is not None:
                types = [t for t in types if pool.within_limits(t)]
            fitting = fitting_prefix(types, need, None if pool.min_values else MAX_INSTANCE_TYPES)
            if not fitting or (pool.min_values and not satisfies_min_values(fitting, pool.min_values)):
                return None
            claim = _Claim(pool, 0, reqs, types, base)
            claim.need = need
            for idx, k in b.fill:
                start = taken[idx]
                claim.pods.extend(pods_of[idx][start:start + k])
                taken[idx] = start + k
            claim.seen = {class_of[id(p)].index for p in claim.pods}
            claim.ports = [hp for p in claim.pods for hp in p.host_ports]
            if pool.remaining is not None:
                claim.reserved = fitting[:MAX_INSTANCE_TYPES]
                pool.reserve(claim.reserved)
            new.append(claim)
        return new

    def _priced(self, pool: PoolTemplate, reqs: Requirements) -> list[tuple[TypeInfo, float]]:
        """(type, USD/hour) of the pool's types under ``reqs`` (within what remains of its limits) for the
        capacity type a launch would use, cheapest first; cached per requirements when the pool has no limits."""
        key = (pool.order, reqs.identity())
        found = self.priced_cache.get(key) if pool.remaining is None else None
        if found is None:
            types = pool.types_for(reqs)
            if pool.remaining is not None:
                types = [t for t in types if pool.within_limits(t)]
            ordered = self._ordered(types, reqs)
            ct = capacity_type_for(ordered, reqs)
            found = []
            for t in ordered:
                o = t.offering(reqs, ct)
                if o is not None:
                    found.append((t, o.price))
            if pool.remaining is None:
                self.priced_cache[key] = found
        return found

    def _launch_price(self, claim: _Claim) -> float | None:
        """USD/hour of the offering :meth:`finalize` would launch for ``claim`` (None: no candidate)."""
        pool = claim.pool
        allowed = None if claim.types is pool.types_for(claim.reqs) else {id(t) for t in claim.types}
        candidates = pool.launch_candidates(claim.reqs, claim.need, MAX_INSTANCE_TYPES, allowed)
        if not candidates:
            return None
        offering = candidates[0].offering(claim.reqs, capacity_type_for(candidates[:1], claim.reqs))
        return None if offering is None else offering.price

    # --- free pods ------------------------------------------------------------------------------
    def fill_existing(self, cls: PodClass) -> None:
        """Place as many pods of a free class as fit on existing nodes (first fit)."""
        for ns in self.nodes:
            if not cls.pods:
                return
            while cls.pods:
                ok, _ = self.try_node(cls, ns)
                if not ok:
                    break

    def fill_claims(self, classes: Sequence[PodClass]) -> None:
        """Fill spare room of this run's NodeClaims with free classes, without raising their price.

        Each NodeClaim in creation order takes, class by class (queue order), as many pods as fit the room its
        cheapest fitting type has left. This is the same result as letting each class visit every NodeClaim in
        turn, but a NodeClaim's room is computed once per change instead of once per class.
        """
        for claim in self.claims:
            if claim.packed:
                continue
            room = self._room(claim)
            if room is None:
                continue
            for cls in classes:
                if not cls.pods or not all(map(le, cls.vec, room)):
                    continue
                if self._fill_claim(cls, claim, room):
                    room = self._room(claim)
                    if room is None:
                        break

    @staticmethod
    def _room(claim: _Claim) -> list[int] | None:
        cheapest = claim.cheapest()
        if cheapest is None:
            return None
        return [b - n for b, n in zip(cheapest.budget, claim.need, strict=True)]

    def _fill_claim(self, cls: PodClass, claim: _Claim, room: Sequence[int]) -> bool:
        """Put as many pods of ``cls`` as fit ``room`` on ``claim``; True when some were placed."""
        if untolerated(cls.tolerations, claim.pool.taints) is not None:
            return False
        if claim.reqs.incompatibility(cls.reqs) is not None:
            return False
        ports = cls.rep.host_ports
        if ports and any(a.conflicts(b) for a in ports for b in claim.ports):
            return False
        merged = claim.reqs.intersect(cls.reqs) if cls.index not in claim.seen else claim.reqs
        cheapest = claim.cheapest()
        if cheapest is None or not cheapest.compatible(merged):
            return False
        # Replicas share their host ports, so a node holds one of them.
        k = 1 if ports else len(cls.pods)
        for r, v in zip(room, cls.vec, strict=True):
            if v > 0:
                k = min(k, r // v)
        if k <= 0:
            return False
        if merged is not claim.reqs:
            claim.reqs = merged
            claim.types = [t for t in claim.types if t.compatible(merged)]
            claim.ptr = 0
            claim.seen = set()
        claim.seen.add(cls.index)
        claim.need = [a + v * k for a, v in zip(claim.need, cls.vec, strict=True)]
        for _ in range(k):
            claim.pods.append(cls.pods.pop())
            claim.ports.extend(ports)
        return True

    def pack_free(self, free: Sequence[PodClass]) -> None:
        """Group free classes by (NodePool, requirements) and pack each group cost-optimally."""
        groups: dict[tuple[int, tuple[object, ...]], tuple[PoolTemplate, Requirements, list[PodClass]]] = {}
        for cls in free:
            if not cls.pods:
                continue
            while True:
                reasons: list[str] = []
                choice = self._pool_for(cls, reasons)
                if choice is not None:
                    pool, merged = choice
                    groups.setdefault((pool.order, merged.identity()), (pool, merged, []))[2].append(cls)
                    break
                message = cls.relax(self.topology, self.prefer_no_schedule)
                if message is None:
                    for pod in cls.pods:
                        self.result.unschedulable[pod.key] = "; ".join(dict.fromkeys(reasons)) or "no NodePool"
                    cls.pods.clear()
                    break
                self.event(
                    f"Relaxing soft constraints for pod since it previously failed to schedule, {message}",
                    pod=cls.pods[-1].key,
                )
        for pool, merged, members in sorted(groups.values(), key=lambda g: g[0].order):
            self._pack_group(pool, merged, members)

    def _pool_for(self, cls: PodClass, reasons: list[str]) -> tuple[PoolTemplate, Requirements] | None:
        for pool, merged, _types in self._hosting_pools(cls, reasons):
            return pool, merged
        return None

    def _pack_group(self, pool: PoolTemplate, merged: Requirements, members: list[PodClass]) -> None:
        types = self._within_limits(pool, pool.types_for(merged))
        ordered = self._ordered(types, merged)
        ct = capacity_type_for(ordered, merged)
        prices: dict[str, float] = {}
        for t in ordered:
            o = t.offering(merged, ct)
            if o is not None:
                prices[t.name] = o.price
        priced = [t for t in ordered if t.name in prices]
        items, pack_types = _with_port_dims(members, priced)
        bins, _left = pack(items, pack_types, prices)
        cap_left = None if self.max_new is None else self.max_new - len(self.claims)
        if cap_left is not None and len(bins) > cap_left:
            bins = self._squeeze(bins, pack_types, prices, items, cap_left)
        base = len(self.dims)
        # Repeated patterns give many equal bins; without limits (which change as NodeClaims reserve them)
        # their candidates are equal too.
        memo: dict[tuple[int, ...], list[TypeInfo]] = {}
        for b in bins:
            need = b.need(items, len(items[0].vec))[:base]
            key = tuple(need)
            candidates = memo.get(key) if pool.remaining is None else None
            if candidates is None:
                # `priced` is cheapest first: without minValues only the first 60 fitting types matter.
                fitting = fitting_prefix(
                    priced,
                    need,
                    None if pool.min_values else MAX_INSTANCE_TYPES,
                    keep=pool.within_limits if pool.remaining is not None else None,
                )
                candidates = truncate_candidates(fitting, MAX_INSTANCE_TYPES, pool.min_values)
                memo[key] = candidates
            if not candidates or (pool.min_values and not satisfies_min_values(candidates, pool.min_values)):
                continue
            claim = _Claim(pool, len(self.claims), merged, candidates, len(self.dims))
            claim.packed = True
            claim.final = candidates
            claim.need = need
            for idx, k in b.fill:
                cls = members[idx]
                for _ in range(k):
                    claim.pods.append(cls.pods.pop())
                    claim.ports.extend(cls.rep.host_ports)
                claim.seen.add(cls.index)
            self.claims.append(claim)
            pool.reserve(candidates)
        for cls in members:
            for pod in cls.pods:
                self.result.unschedulable[pod.key] = (
                    f'all available instance types exceed limits for nodepool: "{pool.name}"'
                    if pool.remaining is not None
                    else f"would need more than {self.max_new} new NodeClaim(s)"
                    if self.max_new is not None
                    else "no instance type fits the remaining pods"
                )
            cls.pods.clear()

    @staticmethod
    def _squeeze(
        bins: list[Bin], priced: list[TypeInfo], prices: dict[str, float], items: list[Item], cap: int
    ) -> list[Bin]:
        """With a cap on new NodeClaims: one node for everything when some type fits it, else the first ``cap``.

        ``items`` and ``priced`` are the packer's (host ports included as dimensions)."""
        if cap <= 0:
            return []
        if cap == 1 and bins:
            fill = tuple((i, it.count) for i, it in enumerate(items) if it.count)
            need = Bin(bins[0].info, 0.0, fill).need(items, len(items[0].vec))
            for t in priced:
                if t.fits(need):
                    return [Bin(t, prices[t.name], fill)]
        return bins[:cap]

    # --- output ---------------------------------------------------------------------------------
    def finalize(self) -> None:
        for claim in self.claims:
            candidates = claim.final
            if candidates is None:
                # The pool ranks its types per capacity type once per requirement set; a NodeClaim whose
                # types were narrowed (limits) only keeps those.
                pool = claim.pool
                allowed = None if claim.types is pool.types_for(claim.reqs) else {id(t) for t in claim.types}
                candidates = pool.launch_candidates(claim.reqs, claim.need, MAX_INSTANCE_TYPES, allowed)
            if not candidates:
                for pod in claim.pods:
                    self.result.unschedulable[pod.key] = "no instance type fits the pods planned together"
                continue
            self.result.new_nodeclaims.append(self._plan(claim, candidates))
        for ns in self.nodes:
            if ns.placed:
                self.result.existing[ns.node.name] = list(ns.placed)

    def _plan(self, claim: _Claim, candidates: list[TypeInfo]) -> NodeClaimPlan:
        pool = claim.pool
        chosen = candidates[0]
        # Candidates all offer the launch's capacity type and none offers a preferred one (else that would
        # have been chosen), so the cheapest candidate alone decides it.
        ct = capacity_type_for(candidates[:1], claim.reqs)
        offering = chosen.offering(claim.reqs, ct)
        assert offering is not None  # candidates are priced by the same offering filter
        names = tuple(t.name for t in candidates)
        # Packed NodeClaims often share requirements and candidates: build those requirements once.
        memo_key = (claim.reqs.identity(), names, ct)
        memo = self.plan_reqs.get(memo_key)
        if memo is None:
            reqs = claim.reqs.with_requirement(Requirement(wk.INSTANCE_TYPE, False, names))
            current_ct = claim.reqs.get(wk.CAPACITY_TYPE)
            if ct is not None and (current_ct is None or len(current_ct.values) != 1):
                reqs = reqs.with_requirement(Requirement(wk.CAPACITY_TYPE, False, [ct]))
            memo = self.plan_reqs[memo_key] = (reqs, reqs.labels())
        reqs, req_labels = memo
        labels = dict(pool.spec.labels)
        labels.update(req_labels)
        labels.update({k: str(v) for k, v in chosen.labels.items()})
        labels[wk.ZONE] = offering.zone
        labels[wk.CAPACITY_TYPE] = offering.capacity_type
        requests = {d: claim.need[i] + pool.overhead_vec[i] for i, d in enumerate(self.dims)}
        requests = {k: v for k, v in requests.items() if v or k in (CPU, MEMORY, PODS)}
        return NodeClaimPlan(
            nodepool=pool.name,
            instance_types=[t.it for t in candidates],
            instance_type=chosen.it,
            offering=offering,
            requirements=reqs,
            labels=labels,
            taints=pool.taints,
            startup_taints=pool.spec.startup_taints,
            pods=list(claim.pods),
            requests=requests,
            daemonset_overhead=dict(pool.overhead),
            hostname=claim.hostname,
        )


def _with_port_dims(members: Sequence[PodClass], types: list[TypeInfo]) -> tuple[list[Item], list[TypeInfo]]:
    """Packing items for ``members`` and the types to pack them on, with host ports as resources.

    Each (protocol, port) used by a member becomes one more dimension: a pod using it requests 1 and every
    node offers 1, so the packer never puts two pods sharing a host port on one node. Members only share a
    key when their ports conflict (see :func:`_ambiguous_ports`), so this is exact.
    """
    keys = sorted({(p.protocol, p.port) for cls in members for p in cls.rep.host_ports})
    if not keys:
        return [Item(cls.vec, len(cls.pods)) for cls in members], types
    items = []
    for cls in members:
        used = {(p.protocol, p.port) for p in cls.rep.host_ports}
        items.append(Item(cls.vec + tuple(1 if k in used else 0 for k in keys), len(cls.pods)))
    ones = (1,) * len(keys)
    return items, [TypeInfo(t.it, t.budget + ones) for t in types]


def _repack_items(
    pods: Sequence[Pod], class_of: Mapping[int, PodClass], dims: Sequence[str], ports: bool
) -> tuple[list[Item], list[list[Pod]]]:
    """Packing items for a re-pack: pods with equal requests (and, with ``ports``, equal host-port keys, each
    (protocol, port) one more dimension as in :func:`_with_port_dims`) are interchangeable, whatever their
    class, because a re-pack keeps every pod under the same requirements. Items in order of first pod."""
    keys = sorted({(hp.protocol, hp.port) for p in pods for hp in p.host_ports}) if ports else []
    index: dict[tuple[int, ...], int] = {}
    vecs: list[tuple[int, ...]] = []
    pods_of: list[list[Pod]] = []
    for p in pods:
        vec = class_of[id(p)].vec
        if keys:
            used = {(hp.protocol, hp.port) for hp in p.host_ports}
            vec = vec + tuple(1 if k in used else 0 for k in keys)
        i = index.get(vec)
        if i is None:
            i = index[vec] = len(vecs)
            vecs.append(vec)
            pods_of.append([])
        pods_of[i].append(p)
    return [Item(v, len(ps)) for v, ps in zip(vecs, pods_of, strict=True)], pods_of


def _ambiguous_ports(pods: Iterable[Pod]) -> frozenset[tuple[str, int]]:
    """(protocol, port) keys used with two different specific host IPs: pods sharing such a key may not
    conflict, so they stay on the pod-by-pod path that checks each pair."""
    ips: dict[tuple[str, int], set[str]] = {}
    for pod in pods:
        for p in pod.host_ports:
            specific = ips.setdefault((p.protocol, p.port), set())
            if p.host_ip not in ("", "0.0.0.0"):
                specific.add(p.host_ip)
    return frozenset(k for k, v in ips.items() if len(v) > 1)


def _hostname_blockers(cls: PodClass) -> list[tuple[dict[str, int], int]]:
    """(counts per hostname, highest admissible count) for the class's hostname spread, anti-affinity and
    inverse anti-affinity groups: a NodeClaim whose count exceeds the bound can never take the class again
    (hostname spread's minimum is always 0, counts only grow)."""
    out: list[tuple[dict[str, int], int]] = []
    for g in cls.owned:
        if g.key != wk.HOSTNAME:
            continue
        if g.kind == SPREAD:
            out.append((g.counts, g.max_skew - (1 if g in cls.selecting else 0)))
        elif g.kind != AFFINITY:
            out.append((g.counts, 0))
    for g in cls.inverse:
        if g.key == wk.HOSTNAME:
            out.append((g.owner_counts, 0))
    return out


def _blocked(blockers: list[tuple[dict[str, int], int]], hostname: str) -> bool:
    for counts, bound in blockers:
        if counts.get(hostname, 0) > bound:
            return True
    return False


def _queue_order(pod: Pod) -> tuple[int, int]:
    return (-pod.requests.get(CPU, 0), -pod.requests.get(MEMORY, 0))


def schedule(
    pods: Sequence[Pod],
    nodes: Sequence[ExistingNode],
    nodepools: Sequence[NodePoolSpec],
    instance_types: Mapping[str, Sequence[InstanceType]],
    *,
    daemonsets: Iterable[Pod] | None = None,
    inflight: Sequence[ExistingNode] = (),
    max_new_nodeclaims: int | None = None,
    allowed_nodepools: Collection[str] | None = None,
    optimize: bool = True,
) -> SchedulingResult:
    """Decide where ``pods`` go: existing nodes, in-flight NodeClaims, or new NodeClaims.

    Args:
        pods: pods to place (pending; ``node_name`` ignored).
        nodes: existing nodes, with their bound pods (used for capacity and topology counts).
        nodepools: NodePools (weight descending then name decides the order new NodeClaims are tried).
        instance_types: NodePool name -> the instance types it may launch (already filtered by its node class).
        daemonsets: daemonset pods; when given, each pool's daemonset overhead is recomputed from them,
            otherwise :attr:`NodePoolSpec.daemonset_overhead` is used.
        inflight: NodeClaims launched earlier without a node yet (``initialized=False``), tried after nodes.
        max_new_nodeclaims: at most this many new NodeClaims (consolidation asks for 0 or 1); pods that would
            need more are reported unschedulable.
        allowed_nodepools: only these NodePools may get new NodeClaims (None: all).
        optimize: pack topology-free pods cost-optimally (False: Karpenter's greedy for every pod).

    Returns:
        A :class:`SchedulingResult`; its ``events`` hold Karpenter's log sentences ("Found N provisionable
        pod(s)", "Computed N new node(s) will fit N pod(s)", "Launching node with ...").

    The function is pure: inputs are not mutated and equal inputs give equal outputs.

    With ``optimize``, the plan is never worse than Karpenter's greedy one: the greedy plan is computed too and
    wins when it places more pods, or the same pods for strictly less USD/hour. (The cost packer changes which
    pods the one-by-one loop sees, so on rare inputs its plan can lose to greedy; this keeps the guarantee.)
    """
    args = (pods, nodes, nodepools, instance_types, daemonsets, inflight, max_new_nodeclaims, allowed_nodepools)
    if not optimize:
        return _emit(_schedule_once(*args, optimize=False))
    optimized = _schedule_once(*args, optimize=True)
    greedy = _schedule_once(*args, optimize=False)
    return _emit(optimized if _plan_rank(optimized) <= _plan_rank(greedy) else greedy)


def _emit(result: SchedulingResult) -> SchedulingResult:
    """Log the chosen plan's events through the ``nodewright.scheduling`` logger, in order."""
    for event in result.events:
        log.log(logging.getLevelName(event.level), event.message, extra={"fields": event.fields})
    return result


def _plan_rank(result: SchedulingResult) -> tuple[int, float]:
    """Order plans: more pods placed first, then lower USD/hour (rounded to absorb float noise)."""
    return (-result.scheduled_pod_count(), round(result.total_price, 6))


def _schedule_once(
    pods: Sequence[Pod],
    nodes: Sequence[ExistingNode],
    nodepools: Sequence[NodePoolSpec],
    instance_types: Mapping[str, Sequence[InstanceType]],
    daemonsets: Iterable[Pod] | None,
    inflight: Sequence[ExistingNode],
    max_new_nodeclaims: int | None,
    allowed_nodepools: Collection[str] | None,
    *,
    optimize: bool,
) -> SchedulingResult:
    """One scheduling pass (see :func:`schedule`); ``optimize`` picks the cost packer or pure greedy."""
    run = _Run(pods, [*nodes, *inflight], nodepools, instance_types, daemonsets, max_new_nodeclaims, allowed_nodepools)
    run.event(f"Found {len(pods)} provisionable pod(s)")
    # Each class holds its pending pods as a stack popped from the end; queue order is cpu, memory desc.
    queue_pods = sorted(pods, key=_queue_order)
    class_of: dict[int, PodClass] = {}
    for cls in run.classes:
        for p in cls.pods:
            class_of[id(p)] = cls
        cls.pods = []
    constrained: deque[tuple[PodClass, Pod]] = deque()
    free_order: list[PodClass] = []
    ambiguous = _ambiguous_ports(pods)
    for pod in queue_pods:
        cls = class_of[id(pod)]
        if optimize and cls.is_free(ambiguous):
            if not cls.pods:
                free_order.append(cls)
            cls.pods.append(pod)
        else:
            constrained.append((cls, pod))
    for cls in free_order:
        cls.pods.reverse()
    # Free pods take room on existing nodes first (Karpenter: existing nodes before new NodeClaims).
    for cls in free_order:
        run.fill_existing(cls)
    run.run_queue(constrained)
    if optimize:
        run.repack_topology(class_of, ambiguous)
    run.fill_claims(free_order)
    run.pack_free(free_order)
    run.finalize()
    _summarize(run)
    return run.result


def _summarize(run: _Run) -> None:
    result = run.result
    plans = result.new_nodeclaims
    if plans:
        run.event(
            f"Computed {len(plans)} new node(s) will fit {sum(len(p.pods) for p in plans)} pod(s)",
        )
    initialized = sum(1 for ns in run.nodes if ns.placed and ns.node.initialized)
    unready = sum(1 for ns in run.nodes if ns.placed and not ns.node.initialized)
    if unready:
        placed = sum(len(ns.placed) for ns in run.nodes if ns.placed and not ns.node.initialized)
        run.event(f"Computed {unready} unready node(s) will fit {placed} pod(s)")
    if initialized:
        placed = sum(len(ns.placed) for ns in run.nodes if ns.placed and ns.node.initialized)
        run.event(f"Computed {initialized} existing node(s) will fit {placed} pod(s)")
    for plan in plans:
        names = [t.name for t in plan.instance_types]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} other(s)" if len(names) > 5 else "")
        run.event(
            f"Launching node with {len(plan.pods)} pods requesting {format_resources(plan.requests)} from types {shown}",
            nodepool=plan.nodepool,
            instance_type=plan.instance_type.name,
            zone=plan.zone,
            capacity_type=plan.capacity_type,
            price=plan.price,
        )
    for key, reason in result.unschedulable.items():
        run.event(f"Could not schedule pod {key}, {reason}", level="ERROR", pod=key)
