"""Per-NodePool scheduling state kept between batches (issue 19).

Most of a small batch's cost is not placing its pods but compiling each NodePool's instance types: a budget per
type (allocatable, target utilization, daemonset overhead), the pool's compatibility check, offering rankings,
the cheapest-first lists per requirement set and the packer's Pareto fronts. None of that depends on the pods,
so :class:`SchedulingCache` keeps it (a :class:`~.templatetypes.TemplateTypes` per NodePool) from one batch
to the next and rebuilds it only when an input changed. The provisioner owns one; ``schedule(cache=...)`` uses
it for both the cost-optimized pass and the greedy guard.

What a pool's entry is keyed by, and how each input reaches the key:

* **the NodePool**: name, requirements (template labels and ``karpenter.sh/nodepool`` included, ``minValues``
  too), taints and target utilization: every field a template reads. (The static-drift NodePool hash of
  :mod:`nodewright.api.hashing` leaves requirements out, so it cannot be the key.) Weight and limits are not in
  the key: the order and what remains of the limits are per batch (below).
* **the instance types** the cloud provider returned for the pool, in order, the same objects or equal ones
  (every field compared: labels, capacity, overhead, offerings with prices and availability). Both providers
  hand out the same objects while nothing changed, and new objects when something did: the catalog or prices refreshed, the
  EC2NodeClass's kubelet settings (another catalog view), an offering marked unavailable
  (:mod:`nodewright.cloud.unavailable` copies the types it flags) or a capacity reservation's remaining room.
  When only some types changed (an ICE'd offering), only those are rebuilt; the rankings per requirement set
  are dropped and rebuilt on demand.
* **resource dims, the daemonset overhead and the DaemonSets some node of the pool could run** (each type's budget
  is net of the DaemonSets that type runs, :mod:`~.daemonsets`: their shapes are in the key; a new DaemonSet that
  would not run on the pool's nodes changes nothing).
* **pricing**: with a pricing policy the run's prices are marginal prices over the fleet, which changes between
  batches, so the price-dependent part (offering rankings, cheapest-first lists, Pareto fronts) is built per
  batch; only which types the pool can use and their budgets are reused. A changed policy thus takes effect on
  the next batch with no key of its own.

Below this cache, the parts that depend on the instance types alone (each type's cheapest offering per capacity
type, which types a pool's requirements admit, the price order of a list of types) are indexed once per catalog
snapshot by :mod:`~.catalogindex` and shared by every pool and cache: a new cache or a new NodePool over a known
catalog builds only its TypeInfo objects (issue 30 cold start).

What is never cached: everything a batch mutates. A template's remaining limits (``reserve`` / ``release``),
its order among the pools, NodeClaims, topology and pod classes are built fresh for each run; the cached part
is only read and extended with pure, per-requirement-set results.

Memory: one entry per NodePool name (the last inputs seen), holding that pool's instance types; an entry that
has seen more than :data:`MAX_REQUIREMENT_SETS` requirement sets (in its rankings, or on average per type in the
types' offering lookups) is rebuilt from scratch. The benchmark's batches use 7 sets in the rankings and ~18
lookups per type, growing by a few per batch of new pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nodewright.cloud.instancetype import InstanceType
from nodewright.scheduling.catalogindex import catalog_view
from nodewright.scheduling.daemonsets import NO_DAEMONS, DaemonGroup, PoolDaemons
from nodewright.scheduling.nodeclaimtemplate import NodeClaimTemplate, Pricing, TypeInfo, pool_type
from nodewright.scheduling.nodepools import NodePoolSpec
from nodewright.scheduling.templatetypes import TemplateTypes
from nodewright.scheduling.typeinfo import never_negative

#: Requirement sets one pool's entry may accumulate across batches before it is rebuilt (bounds memory).
MAX_REQUIREMENT_SETS = 512


def pool_key(spec: NodePoolSpec, dims: Sequence[str], overhead: Mapping[str, int],
             daemons: PoolDaemons | None = None) -> tuple[object, ...]:
    """Everything but the instance types that a pool's :class:`TemplateTypes` depends on."""
    return (
        spec.name,
        spec.requirements.identity(),  # minValues included
        spec.taints,
        spec.target_utilization,
        tuple(dims),
        tuple(int(overhead.get(d, 0)) for d in dims),
        None if daemons is None else tuple(p.shape for p in daemons.admitted),
    )


def _oversized(entry: _Entry) -> bool:
    """Whether ``entry`` has accumulated more than :data:`MAX_REQUIREMENT_SETS` requirement sets: counted in its
    rankings every time, and (every 64th use, a full scan) in its types' offering lookups, which also see the
    requirement sets of NodeClaims narrowed by topology."""
    if len(entry.shared.compat) > MAX_REQUIREMENT_SETS:
        return True
    if entry.uses % 64 or not entry.shared.types:
        return False
    lookups = sum(t.cached_lookups for t in entry.shared.types)
    return lookups > MAX_REQUIREMENT_SETS * len(entry.shared.types)


def _same_types(a: list[InstanceType], b: Sequence[InstanceType]) -> bool:
    """The same instance types, in the same order: the same objects (list equality checks identity first, at C
    speed: ~3 us for the 1,345 types of the bundled catalog) or equal ones (every field, offerings and their
    availability included, so they compile to the same :class:`TypeInfo`)."""
    return a == (b if isinstance(b, list) else list(b))


@dataclass(slots=True, eq=False)
class _Entry:
    """One NodePool's cached state: its key, the instance types it was built from (held, so their ids stay
    theirs) and, per type id, the type as the pool sees it (None: the pool cannot use it)."""

    key: tuple[object, ...]
    instance_types: list[InstanceType]
    verdicts: dict[int, TypeInfo | None]
    shared: TemplateTypes
    uses: int = 0


@dataclass(slots=True)
class CacheStats:
    """Counters, for tests and the benchmark: whole pools reused, pools rebuilt, instance types rebuilt."""

    hits: int = 0
    misses: int = 0
    types_built: int = 0


@dataclass(slots=True, eq=False)
class SchedulingCache:
    """NodePool name -> the pool's compiled instance types, reused by every batch with the same inputs."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    stats: CacheStats = field(default_factory=CacheStats)

    def template(self, spec: NodePoolSpec, order: int, instance_types: Sequence[InstanceType], dims: Sequence[str],
                 overhead: Mapping[str, int], pricing: Pricing | None = None,
                 daemons: PoolDaemons | None = None) -> NodeClaimTemplate:
        """A fresh :class:`NodeClaimTemplate` for one run (its own limits, order and pricing) over the pool's
        cached :class:`TemplateTypes`, rebuilt first if any input changed (see the module docstring)."""
        return NodeClaimTemplate(spec, order, instance_types, dims, overhead, pricing,
                                 shared=self._shared(spec, instance_types, dims, overhead, pricing, daemons),
                                 daemons=daemons)

    def _shared(self, spec: NodePoolSpec, instance_types: Sequence[InstanceType], dims: Sequence[str],
                overhead: Mapping[str, int], pricing: Pricing | None, daemons: PoolDaemons | None) -> TemplateTypes:
        key = pool_key(spec, dims, overhead, daemons)
        entry = self.entries.get(spec.name)
        if entry is not None and _oversized(entry):
            entry = None  # its per-requirement-set caches (and the types' offering caches) start over
        if entry is not None and entry.key == key and _same_types(entry.instance_types, instance_types):
            if pricing is None:
                self.stats.hits += 1
                entry.uses += 1
                return entry.shared
            # Same types and budgets; prices are this run's.
            self.stats.misses += 1
            return TemplateTypes([TypeInfo(t.it, t.budget, pricing, t.daemons) for t in entry.shared.types])
        self.stats.misses += 1
        old = entry.verdicts if entry is not None and entry.key == key else {}
        view = catalog_view(instance_types)
        if not old and daemons is None and view is not None and never_negative(dims, overhead):
            # The common first build: which types the pool admits is the catalog index's answer for its
            # requirements (labels and an allowed offering: what pool_type checks here), computed once per list.
            by_position: list[TypeInfo | None] = [None] * len(view.types)
            group = DaemonGroup(requests=dict(overhead)) if overhead else NO_DAEMONS
            lazy = (spec, dims, overhead)
            listed = view.types
            for i in view.kept(spec.requirements):
                by_position[i] = TypeInfo(listed[i], None, None, group, lazy_budget=lazy)
            self.stats.types_built += len(listed)
            verdicts = dict(zip(map(id, listed), by_position, strict=True))
        else:
            verdicts = {}
            by_position = []
            for it in instance_types:
                ident = id(it)
                if ident in old:
                    info = old[ident]
                else:
                    info = pool_type(spec, it, dims, overhead, None, daemons)
                    self.stats.types_built += 1
                verdicts[ident] = info
                by_position.append(info)
        infos = [info for info in by_position if info is not None]
        self.entries[spec.name] = _Entry(key, list(instance_types), verdicts,
                                         TemplateTypes(infos, view=view, by_position=by_position))
        if pricing is not None:
            return TemplateTypes([TypeInfo(t.it, t.budget, pricing, t.daemons) for t in infos])
        return self.entries[spec.name].shared

    def retain(self, names: Sequence[str]) -> None:
        """Forget the pools not in ``names`` (deleted NodePools)."""
        for name in [n for n in self.entries if n not in names]:
            del self.entries[name]
