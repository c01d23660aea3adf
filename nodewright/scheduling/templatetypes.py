"""The cacheable part of a NodeClaimTemplate (issue 19): a NodePool's instance types as one run compiles them and
every ranking derived from them, per requirement set. :class:`~.nodeclaimtemplate.NodeClaimTemplate` reads and
fills it; :class:`~.cache.SchedulingCache` keeps it between batches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodewright.scheduling.catalogindex import CatalogView
    from nodewright.scheduling.fronts import Front
    from nodewright.scheduling.nodeclaimtemplate import TypeInfo
    from nodewright.scheduling.requirements import Requirements

#: Bound on :attr:`TemplateTypes.candidates`.
MAX_CACHED_CANDIDATES = 4096


@dataclass(slots=True, eq=False)
class TemplateTypes:
    """The part of a :class:`~.nodeclaimtemplate.NodeClaimTemplate` that depends only on its NodePool's scheduling
    fields, instance types, resource dims, daemonset overhead and (when set) the run's
    :class:`~.nodeclaimtemplate.Pricing`: the pool's types and every ranking derived from them, cached per
    requirement set. Without a Pricing it holds no per-run state, so :class:`~.cache.SchedulingCache` shares one
    between scheduling runs; the per-run part (remaining limits, order, pricing version) stays on the template.
    """

    types: list[TypeInfo]
    #: The list of instance types ``types`` were compiled from, as its :class:`~.catalogindex.CatalogView`, and
    #: per position of that list the pool's type (None: unusable), or None when unknown (then rankings sort the
    #: pool's types themselves). Only read at list prices.
    view: CatalogView | None = None
    by_position: list[TypeInfo | None] | None = None
    compat: dict[tuple[object, ...], list[TypeInfo]] = field(default_factory=dict)
    domains: dict[tuple[str, tuple[object, ...]], frozenset[str]] = field(default_factory=dict)
    ranked: dict[tuple[object, ...], list[TypeInfo]] = field(default_factory=dict)
    priced: dict[tuple[object, ...], list[tuple[TypeInfo, float]]] = field(default_factory=dict)
    offered: dict[tuple[object, ...], set[str]] = field(default_factory=dict)
    #: The packer's Pareto fronts (:func:`~.fronts.pool_front`) per requirement set.
    fronts: dict[tuple[object, ...], Front] = field(default_factory=dict)
    #: Launch candidates per (requirement set, summed requests, limit), at most :data:`MAX_CACHED_CANDIDATES`.
    candidates: dict[tuple[object, ...], list[TypeInfo]] = field(default_factory=dict)
    #: A plan's requirements and their labels per (requirement set, candidate names, capacity type): pure
    #: functions of the key (:meth:`~.nodeclaim.NodeClaim.to_plan`), at most :data:`MAX_CACHED_CANDIDATES`.
    plans: dict[tuple[object, ...], tuple[Requirements, dict[str, str]]] = field(default_factory=dict)

    def remember(self, key: tuple[object, ...], candidates: list[TypeInfo]) -> None:
        """Keep launch ``candidates`` under ``key`` (all dropped first when :data:`MAX_CACHED_CANDIDATES` are
        kept: batches of many shapes rarely repeat a need)."""
        if len(self.candidates) >= MAX_CACHED_CANDIDATES:
            self.candidates.clear()
        self.candidates[key] = candidates
