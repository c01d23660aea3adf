"""A cheap screen in front of the scheduler, so consolidation of thousands of nodes stays fast.

Karpenter runs a full scheduling simulation per candidate and bounds the work with a timeout (1-3 minutes);
users report consolidation giving up at 300-700 nodes. nodewright screens candidates first and runs the full
simulation (:class:`nodewright.disruption.simulation.Simulator`) only for those that pass, and always before a
decision is returned -- the screen never *accepts* anything on its own.

The screen knows cpu, memory and pod count, node labels and blocking taints:

* :meth:`Screen.place`: first-fit-decreasing of the pods onto the destinations' free room (nodes grouped by
  labels and taints, each group sorted by free cpu so a scan stops as soon as no node can hold the pod);
  returns the pods left over. Pods the screen cannot judge (topology spread, pod (anti-)affinity, host ports,
  hostname selectors, extended resources) make it answer "unknown" and the caller simulates.
* :meth:`Screen.replacement_floor`: the cheapest price any pool could launch one node at for some pods (the
  Pareto frontier of each pool's instance types by price vs. allocatable, after target utilization and the
  overhead of the DaemonSets each type runs): a lower bound, since the pods' own requirements can only make it dearer.
* :meth:`Screen.aggregate_fits`: sums only -- a necessary condition used to bound the multi-node search.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nodewright.api import labels as L
from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.disruption.model import Pool
from nodewright.quantities import CPU, MEMORY, PODS
from nodewright.scheduling import ExistingNode, Pod, Requirements
from nodewright.scheduling.nodeclaimtemplate import type_daemons
from nodewright.scheduling.taints import PREFER_NO_SCHEDULE, untolerated

Vec = tuple[int, int, int]
_DIMS = (CPU, MEMORY, PODS)
_OFFERING_KEYS = frozenset({L.ZONE, L.CAPACITY_TYPE, L.ZONE_ID, L.REGION})


def vec(resources: dict[str, int] | None) -> Vec:
    """(cpu millicores, memory bytes, pods) of a resource map."""
    r = resources or {}
    return (r.get(CPU, 0), r.get(MEMORY, 0), r.get(PODS, 0))


def _sub(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _fits(need: Vec, room: Vec) -> bool:
    return need[0] <= room[0] and need[1] <= room[1] and need[2] <= room[2]


def _requested(node: ExistingNode) -> Vec:
    """``vec(node.requested())`` without summing every other resource of every pod (same integers)."""
    cpu = memory = pods = 0
    for pod in node.pods:
        r = pod.requests
        cpu += r.get(CPU, 0)
        memory += r.get(MEMORY, 0)
        pods += r.get(PODS, 0)
    return (cpu, memory, pods)


def is_simple(pod: Pod) -> bool:
    """Whether the screen can judge ``pod``: no topology, host ports, hostname selectors or extra resources."""
    aff = pod.affinity
    if pod.topology_spread or pod.host_ports or aff.pod_affinity_required or aff.pod_anti_affinity_required:
        return False
    if aff.pod_affinity_preferred or aff.pod_anti_affinity_preferred:
        return False
    if L.HOSTNAME in pod.node_selector:
        return False
    if any(k for t in aff.placement_terms() for k, _, _ in t.expressions if k == L.HOSTNAME):
        return False
    return all(name in _DIMS for name in pod.requests)


def pod_fits_labels(pod: Pod, labels: dict[str, str], taints: Iterable[object]) -> bool:
    """Node selector, required node affinity with the pod's volumes (any term) and tolerations of blocking
    taints."""
    if not Requirements.from_node_selector(pod.node_selector).satisfied_by_labels(labels):
        return False
    terms = pod.affinity.placement_terms()
    if terms and not any(t.requirements().satisfied_by_labels(labels) for t in terms):
        return False
    return untolerated(pod.tolerations, taints) is None  # type: ignore[arg-type]


class _Group:
    __slots__ = ("labels", "taints", "nodes")

    def __init__(self, labels: dict[str, str], taints: tuple[object, ...]) -> None:
        self.labels = labels
        self.taints = taints
        self.nodes: list[tuple[str, Vec]] = []


def offering_for(it: InstanceType, reqs: Requirements, capacity_type: str | None = None) -> Offering | None:
    """Cheapest available offering of ``it`` allowed by ``reqs`` (zone, capacity type), optionally of one type."""
    zone, ct = reqs.get(L.ZONE), reqs.get(L.CAPACITY_TYPE)
    best: Offering | None = None
    for o in it.offerings:
        if not o.available or (capacity_type is not None and o.capacity_type != capacity_type):
            continue
        if (zone is not None and not zone.has(o.zone)) or (ct is not None and not ct.has(o.capacity_type)):
            continue
        if best is None or (o.price, o.zone) < (best.price, best.zone):
            best = o
    return best


def type_allowed(it: InstanceType, reqs: Requirements) -> bool:
    """The type's labels satisfy ``reqs`` (offering keys aside; absent well-known labels allowed)."""
    for key, req in reqs.items():
        if key in _OFFERING_KEYS:
            continue
        value = it.labels.get(key)
        if value is None:
            if key in L.WELL_KNOWN_LABELS or req.allows_absence():
                continue
            return False
        if not req.has(value):
            return False
    return True


def pool_frontier(pool: Pool) -> list[tuple[float, Vec]]:
    """(price, room for pods) of the pool's types, Pareto-minimal: no kept type is dearer than another kept type
    with at least as much room in every dimension. Room = allocatable x target utilization - the overhead of the
    DaemonSets the type runs (the pool's daemonset overhead when its spec was built without DaemonSet pods)."""
    target = pool.target_utilization or 1.0
    overhead = vec(pool.spec.daemonset_overhead)
    daemons = pool.spec.daemons() if pool.spec.daemonsets else None
    options: list[tuple[float, Vec]] = []
    for it in pool.instance_types:
        if not type_allowed(it, pool.spec.requirements):
            continue
        offering = offering_for(it, pool.spec.requirements)
        if offering is None:
            continue
        if daemons is not None:
            overhead = vec(type_daemons(daemons, it).requests)
        alloc = vec(it.allocatable())
        room = (int(alloc[0] * target) - overhead[0], int(alloc[1] * target) - overhead[1], alloc[2] - overhead[2])
        options.append((offering.price, room))
    options.sort(key=lambda o: (o[0], -o[1][0], -o[1][1]))
    frontier: list[tuple[float, Vec]] = []
    for price, room in options:
        if not any(_fits(room, kept) for _, kept in frontier):
            frontier.append((price, room))
    return frontier


#: id(pool) -> (pool, its spec, its instance types, frontier). A pass's Pools are reused while their NodePool
#: and instance types are unchanged (nodewright.state.incremental_view), and Pool, NodePoolSpec, InstanceType
#: and Offering are never mutated, so the frontier of the same objects is the same. Bounded.
_FRONTIERS: dict[int, tuple[Pool, object, object, list[tuple[float, Vec]]]] = {}
_FRONTIERS_LIMIT = 256


def _frontier(pool: Pool) -> list[tuple[float, Vec]]:
    hit = _FRONTIERS.get(id(pool))
    if hit is not None and hit[0] is pool and hit[1] is pool.spec and hit[2] is pool.instance_types:
        return hit[3]
    frontier = pool_frontier(pool)
    if len(_FRONTIERS) >= _FRONTIERS_LIMIT:
        _FRONTIERS.clear()
    _FRONTIERS[id(pool)] = (pool, pool.spec, pool.instance_types, frontier)
    return frontier


class Screen:
    """The fast screen over one pass's destinations (see module docstring)."""

    def __init__(self, destinations: Sequence[ExistingNode], pools: Iterable[Pool]) -> None:
        self.free: dict[str, Vec] = {}
        groups: dict[tuple[object, ...], _Group] = {}
        for node in destinations:
            if node.marked_for_deletion or node.unschedulable:
                continue
            free = _sub(vec(node.allocatable), _requested(node))
            self.free[node.name] = free
            labels = {k: v for k, v in node.labels.items() if k != L.HOSTNAME}
            taints = tuple(t for t in node.scheduling_taints() if t.effect != PREFER_NO_SCHEDULE)
            key = (tuple(sorted(labels.items())), taints)
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(labels, taints)
            group.nodes.append((node.name, free))
        for group in groups.values():
            group.nodes.sort(key=lambda n: -n[1][0])
        self.groups = list(groups.values())
        self._compatible: dict[int, list[_Group]] = {}
        self._fitting: dict[tuple[int, Vec], list[tuple[str, Vec]]] = {}
        self._simple: dict[int, tuple[Pod, bool]] = {}  # id(pod) -> (pod, is_simple(pod)); pods repeat per probe
        self.pools = [(p, _frontier(p)) for p in pools]
        self.total_free = tuple(sum(max(0, f[i]) for f in self.free.values()) for i in range(3))
        self.max_room = tuple(max((room[i] for _, fr in self.pools for _, room in fr), default=0) for i in range(3))

    def _groups_for(self, pod: Pod) -> list[_Group]:
        key = pod.shape_key
        hit = self._compatible.get(key)
        if hit is None:
            hit = self._compatible[key] = [g for g in self.groups if pod_fits_labels(pod, g.labels, g.taints)]
        return hit

    def place(self, pods: Sequence[Pod], excluded: set[str]) -> list[Pod] | None:
        """Pods that found no room on the destinations outside ``excluded``, or None when some pod is not
        :func:`is_simple` (the screen cannot judge; simulate)."""
        simple = self._simple
        for p in pods:  # inline: this runs for every pod of every probe
            hit = simple.get(id(p))
            if hit is None or hit[0] is not p:
                hit = simple[id(p)] = (p, is_simple(p))
            if not hit[1]:
                return None
        used: dict[str, Vec] = {}
        leftover: list[Pod] = []
        for pod in sorted(pods, key=lambda p: (-p.requests.get(CPU, 0), -p.requests.get(MEMORY, 0))):
            need = vec(pod.requests)
            if not self._place_one(pod, need, excluded, used):
                leftover.append(pod)
        return leftover

    def _fitting_nodes(self, group: _Group, need: Vec) -> list[tuple[str, Vec]]:
        """The group's nodes whose whole free room holds ``need``, in the group's order (memoized per shape).

        A node left out can never take the pod: placements in :meth:`place` only shrink a node's room.
        """
        key = (id(group), need)
        hit = self._fitting.get(key)
        if hit is None:
            hit = []
            for name, free in group.nodes:
                if free[0] < need[0]:
                    break  # sorted by free cpu: no later node of this group has room
                if _fits(need, free):
                    hit.append((name, free))
            self._fitting[key] = hit
        return hit

    def _place_one(self, pod: Pod, need: Vec, excluded: set[str], used: dict[str, Vec]) -> bool:
        for group in self._groups_for(pod):
            for name, free in self._fitting_nodes(group, need):
                if name in excluded:
                    continue
                room = used.get(name, free)
                if _fits(need, room):
                    used[name] = _sub(room, need)
                    return True
        return False

    def replacement_floor(self, pods: Sequence[Pod]) -> float | None:
        """Lowest price of one new node that could hold all of ``pods`` (None: no pool's type is big enough)."""
        need = (sum(p.requests.get(CPU, 0) for p in pods), sum(p.requests.get(MEMORY, 0) for p in pods), len(pods))
        best: float | None = None
        for pool, frontier in self.pools:
            if any(untolerated(p.tolerations, [t for t in pool.spec.taints if t.effect != PREFER_NO_SCHEDULE])
                   for p in pods):
                continue
            for price, room in frontier:  # ascending price: the first that fits is the pool's floor
                if best is not None and price >= best:
                    break
                if _fits(need, room):
                    best = price
                    break
        return best

    def aggregate_fits(self, need: Vec, lost_free: Vec) -> bool:
        """Necessary condition: ``need`` fits in the total free room minus ``lost_free`` plus one largest node."""
        return all(need[i] <= self.total_free[i] - lost_free[i] + self.max_room[i] for i in range(3))

    def node_free(self, name: str) -> Vec:
        """Free room of a destination (zeros for unknown nodes), negatives clipped to 0."""
        f = self.free.get(name, (0, 0, 0))
        return (max(0, f[0]), max(0, f[1]), max(0, f[2]))
