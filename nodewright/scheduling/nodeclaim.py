"""A NodeClaim being built in one scheduling run (Karpenter's ``nodeclaim.go``).

A :class:`NodeClaim` starts from a :class:`~nodewright.scheduling.nodeclaimtemplate.NodeClaimTemplate` and
absorbs pods while some instance type still fits their summed requests (plus the overhead of the DaemonSets that
type runs, already taken out of its budget) and none of their host ports is held by those DaemonSets.
:meth:`NodeClaim.can_add` checks one pod of a class -- taints, host ports, requirements, resources, topology,
minValues -- and says how the NodeClaim would change; :meth:`NodeClaim.add` applies it. Its types stay sorted
cheapest first, so the first type fitting the pods is the cheapest. :meth:`NodeClaim.to_plan` turns it into the
:class:`~nodewright.scheduling.result.NodeClaimPlan` returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import le
from typing import NamedTuple

from nodewright.api import labels as wk
from nodewright.cloud.instancetype import Offering
from nodewright.quantities import CPU, MEMORY, PODS
from nodewright.scheduling.minvalues import relaxed
from nodewright.scheduling.nodeclaimtemplate import (
    MAX_INSTANCE_TYPES,
    NodeClaimTemplate,
    TypeInfo,
    Vector,
    capacity_type_for,
    offered_price,
)
from nodewright.scheduling.pods import HostPort, Pod
from nodewright.scheduling.preferences import PodClass
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.result import NodeClaimPlan
from nodewright.scheduling.taints import untolerated
from nodewright.scheduling.templatetypes import MAX_CACHED_CANDIDATES
from nodewright.scheduling.topology import (
    Topology,
    blocked_on_hostname,
    hostname_limited,
    narrow_requirements,
)
from nodewright.scheduling.volumelimits import attach_limited, has_volumes

#: Requirements of finished plans, shared by NodeClaims with equal requirements, candidates and capacity type.
PlanMemo = dict[tuple[object, ...], tuple[Requirements, dict[str, str]]]


class Addition(NamedTuple):
    """How a NodeClaim changes when it takes one more pod (see :meth:`NodeClaim.can_add`).

    Attributes:
        reqs: its requirements with the pod's (and the topology domains chosen).
        types: its narrowed instance types; None when unchanged.
        domains: topology key -> domain the pod counts in.
        fit_at: position of the cheapest type fitting the new pods, when ``types`` is None.
    """

    reqs: Requirements
    types: list[TypeInfo] | None
    domains: dict[str, str]
    fit_at: int


class NodeClaim:
    """A NodeClaim being built in this run.

    Attributes:
        template: the NodePool it comes from.
        index: creation order; ``hostname`` is ``hostname-placeholder-<index>`` (its hostname domain).
        reqs: template requirements narrowed by its pods' and by topology.
        types: instance types still compatible and within limits, cheapest first; ``ptr`` skips those that no
            longer fit ``need``.
        need: summed requests of its pods, in the run's dimensions.
        pods, ports: its pods and their host ports.
        seen: indexes of the classes whose requirements ``reqs`` already includes.
        packed: built by the cost packer (takes no further pods); ``final`` then holds its candidates.
        reserved: the types whose largest capacity was reserved against the pool's limits for it.
    """

    __slots__ = (
        "template", "index", "hostname", "reqs", "types", "ptr", "need", "pods", "ports", "seen", "packed",
        "final", "reserved", "tight",
    )

    def __init__(
        self, template: NodeClaimTemplate, index: int, reqs: Requirements, types: list[TypeInfo], dims: int
    ) -> None:
        self.template = template
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
        self.final: list[TypeInfo] | None = None
        self.reserved: list[TypeInfo] = []
        #: :meth:`tighten` ran and kept its result: it narrowed the options, or found nothing to free (final: its
        #: pods only grow, so it never will).
        self.tight = False

    def fit_index(self, vec: Vector) -> int | None:
        """Index of the cheapest type fitting need + vec (types before ``ptr`` never fit the current need)."""
        need = [a + b for a, b in zip(self.need, vec, strict=True)]
        cpu, memory = need[0], need[1]  # dims start cpu, memory: most misfits fail there, cheaply
        types = self.types
        for i in range(self.ptr, len(types)):
            budget = types[i].budget
            if budget[0] >= cpu and budget[1] >= memory and all(map(le, need, budget)):
                return i
        return None

    def domains(self, key: str, reqs: Requirements) -> set[str]:
        """Values the NodeClaim's node could have for ``key`` under ``reqs``."""
        if key == wk.HOSTNAME:
            return {self.hostname}
        return set(self.template.domains(key, reqs))

    def cheapest(self) -> TypeInfo | None:
        """The cheapest type that fits the pods (types are kept cheapest first); advances ``ptr``."""
        index = self.fit_index((0,) * len(self.need))
        if index is None:
            return None
        self.ptr = index
        return self.types[index]

    def room(self) -> list[int] | None:
        """What the cheapest fitting type has left per dimension (None: no type fits)."""
        cheapest = self.cheapest()
        if cheapest is None:
            return None
        return [b - n for b, n in zip(cheapest.budget, self.need, strict=True)]

    # --- one pod at a time (the Karpenter loop) -----------------------------------------------------------
    def can_add(self, cls: PodClass, relax_min_values: bool = False) -> tuple[Addition | None, bool]:
        """Whether one pod of ``cls`` can join: (the change, or None when it cannot; True when it never will,
        since the NodeClaim's pods and the topology counts only grow). With ``relax_min_values`` (a new NodeClaim
        under ``MinValuesPolicy=BestEffort``, as Karpenter's ``CanAdd``) a ``minValues`` the fitting types miss is
        lowered to what they meet instead of refusing the pod."""
        template = self.template
        if untolerated(cls.tolerations, template.taints) is not None:
            return None, True
        if cls.rep.host_ports and any(a.conflicts(b) for a in cls.rep.host_ports for b in self.ports):
            return None, True
        reqs = self.reqs
        if cls.index not in self.seen:
            if reqs.incompatibility(cls.reqs) is not None:
                return None, True
            reqs = reqs.intersect(cls.reqs)
        # No type fits one more pod: narrowing requirements only removes types and the pods only grow, so this
        # is final (checked before the costlier topology narrowing).
        index = self.fit_index(cls.vec)
        if index is None:
            return None, True
        topo = cls.owned or cls.inverse or cls.selecting
        domains: dict[str, str] = {}
        if topo:
            narrowed = narrow_requirements(cls, reqs, self.domains, domains)
            if narrowed is None:
                return None, hostname_limited(cls) and blocked_on_hostname(cls, self.hostname)
            reqs = narrowed
        types: list[TypeInfo] | None = None
        if reqs is not self.reqs:
            candidates = template.types_for(reqs)
            # Limits and daemonset host ports may have narrowed ``self.types``: stay within them.
            if template.remaining is None and not (self.ports and template.daemon_ports):
                types = candidates
            else:
                allowed = {id(t) for t in self.types}
                types = [t for t in candidates if id(t) in allowed]
            need = [a + b for a, b in zip(self.need, cls.vec, strict=True)]
            if not any(t.fits(need) for t in types):
                return None, not topo
        types, attachable = attach_limited(self, cls, types)  # not final: a later pod may share the claims
        if not attachable:
            return None, False
        if cls.rep.host_ports and template.daemon_ports:
            current = self.types if types is None else types
            free = template.port_free(current, cls.rep.host_ports)
            if len(free) != len(current):
                need = [a + b for a, b in zip(self.need, cls.vec, strict=True)]
                if not any(t.fits(need) for t in free):
                    return None, not topo
                types = free
        if template.min_values:
            need = [a + b for a, b in zip(self.need, cls.vec, strict=True)]
            pool_types = types if types is not None else self.types
            unmet = template.flexibility.unmet([t for t in pool_types if t.fits(need)], reqs.min_values())
            if unmet and not relax_min_values:
                return None, True
            if unmet:
                reqs = reqs.with_min_values(unmet)
        return Addition(reqs, types, domains, index), False

    def add(self, cls: PodClass, change: Addition, topology: Topology) -> None:
        """Take the next pending pod of ``cls`` (popped from ``cls.pods``) as :meth:`can_add` described."""
        if change.types is not None:
            self.types = change.types
            self.ptr = 0
        if change.reqs is not self.reqs:
            self.reqs = change.reqs
            self.seen = {cls.index}
        else:
            self.seen.add(cls.index)
        self.need = [a + b for a, b in zip(self.need, cls.vec, strict=True)]
        self.pods.append(cls.pods.pop())
        self.ports.extend(cls.rep.host_ports)
        if change.domains:
            reqs, taints = self.reqs, self.template.taints
            topology.record(cls, change.domains, lambda f: f.matches_claim(reqs, taints))
        if change.types is None:
            self.ptr = change.fit_at  # every type before it fails the new need

    def reserve(self) -> None:
        """Reserve against the pool's limits the largest of its instance-type options that fit the pods (Karpenter
        ``subtractMax`` over ``InstanceTypeOptions``): it may grow into any of them, and its options only narrow
        from here, so what it launches never takes more than was reserved."""
        if self.template.remaining is not None:
            self.reserved = [t for t in self.types if t.fits(self.need)]
            self.template.reserve(self.reserved)

    def tighten(self) -> bool:
        """Narrow its options to the types that take no more of any limited resource than its cheapest fitting
        type, and reserve only that (nodewright's addition: the room goes to another NodeClaim of the batch);
        True when this freed some of the limits. It then cannot grow past that type's limited capacity."""
        template = self.template
        if template.remaining is None or not self.reserved or self.tight:
            return False
        cheapest = self.final[0] if self.final else self.cheapest()
        if cheapest is None:
            return False
        self.tight = True
        cap = template.launch_cost(cheapest)
        types = [t for t in (self.final if self.final is not None else self.types) if template.within(t, cap)]
        reserved = [t for t in types if t.fits(self.need)]
        before = {name: max(template.launch_cost(t)[name] for t in self.reserved) for name in cap}
        if all(max(template.launch_cost(t)[name] for t in reserved) >= qty for name, qty in before.items()):
            return False  # stays tight: a larger cheapest type later only takes more
        template.release(self.reserved)
        self.types, self.ptr, self.reserved = types, 0, reserved
        if self.final is not None:
            self.final = types
        template.reserve(reserved)
        return True

    # --- many pods of a topology-free class at once -----------------------------------------------------------
    def fill(self, cls: PodClass, room: Sequence[int]) -> bool:
        """Take as many pods of a topology-free ``cls`` as fit ``room`` without changing the cheapest fitting
        type; True when some were taken."""
        if untolerated(cls.tolerations, self.template.taints) is not None or has_volumes(cls):  # (volumes: can_add)
            return False
        if self.reqs.incompatibility(cls.reqs) is not None:
            return False
        ports = cls.rep.host_ports
        if ports and any(a.conflicts(b) for a in ports for b in self.ports):
            return False
        merged = self.reqs.intersect(cls.reqs) if cls.index not in self.seen else self.reqs
        cheapest = self.cheapest()
        if cheapest is None or not cheapest.compatible(merged) or cheapest.daemons.blocks(ports):
            return False
        # Replicas share their host ports, so a node holds one of them.
        k = 1 if ports else len(cls.pods)
        for r, v in zip(room, cls.vec, strict=True):
            if v > 0:
                k = min(k, r // v)
        if k <= 0:
            return False
        types = [t for t in self.types if t.compatible(merged)] if merged is not self.reqs else self.types
        types = self.template.port_free(types, ports)  # without the types whose daemonsets hold its ports
        if self.template.min_values:
            # More pods leave fewer types fitting: keep every minValues met (the cheapest type stays).
            need = [a + v * k for a, v in zip(self.need, cls.vec, strict=True)]
            if self.template.flexibility.unmet([t for t in types if t.fits(need)], merged.min_values()):
                return False
        if merged is not self.reqs:
            self.reqs = merged
            self.seen = set()
        if types is not self.types:
            self.types = types
            self.ptr = 0
        self.seen.add(cls.index)
        self.need = [a + v * k for a, v in zip(self.need, cls.vec, strict=True)]
        for _ in range(k):
            self.pods.append(cls.pods.pop())
            self.ports.extend(ports)
        return True

    # --- output -------------------------------------------------------------------------------------------
    def launch_candidates(self) -> list[TypeInfo]:
        """The types its launch lists, cheapest first, at most 60 (fixed when packed, else from the template's
        ranking, keeping only the types still allowed when limits narrowed them)."""
        template = self.template
        if self.final is not None:
            if template.pricing is None or len(self.final) < 2:
                return self.final
            # Packed against earlier prices: the run's fleet may have grown since, so rank them again.
            ct = capacity_type_for(self.final, self.reqs, True)
            return sorted(self.final, key=lambda t: offered_price(t, self.reqs, ct))
        allowed = None if self.types is template.types_for(self.reqs) else {id(t) for t in self.types}
        return template.launch_candidates(self.reqs, self.need, MAX_INSTANCE_TYPES, allowed)

    def launch_offering(self, candidates: list[TypeInfo]) -> tuple[Offering | None, str | None]:
        """(offering, capacity type) a launch with ``candidates`` would most likely get: the cheapest candidate's
        cheapest allowed offering. Candidates all offer the launch's capacity type and none offers a preferred
        one (else that would have been chosen), so the cheapest candidate alone decides it."""
        ct = capacity_type_for(candidates[:1], self.reqs, self.template.pricing is not None)
        return candidates[0].offering(self.reqs, ct), ct

    def launch_price(self) -> float | None:
        """USD/hour of the offering its launch would get (None: no candidate)."""
        candidates = self.launch_candidates()
        if not candidates:
            return None
        offering, _ = self.launch_offering(candidates)
        return None if offering is None else candidates[0].price_of(offering)

    def to_plan(self, candidates: list[TypeInfo], memo: PlanMemo) -> NodeClaimPlan:
        """The plan for launching it with ``candidates`` (its :meth:`launch_candidates`); ``memo`` shares plan
        requirements between NodeClaims (the scheduler passes the pool's :attr:`TemplateTypes.plans`, so between
        batches too)."""
        template = self.template
        chosen = candidates[0]
        offering, ct = self.launch_offering(candidates)
        assert offering is not None  # candidates are priced by the same offering filter
        names = tuple(t.name for t in candidates)
        memo_key = (self.reqs.identity(), names, ct)
        found = memo.get(memo_key)
        if found is None:
            reqs = self.reqs.with_requirement(Requirement(wk.INSTANCE_TYPE, False, names))
            current_ct = self.reqs.get(wk.CAPACITY_TYPE)
            if ct is not None and (current_ct is None or len(current_ct.values) != 1):
                reqs = reqs.with_requirement(Requirement(wk.CAPACITY_TYPE, False, [ct]))
            if len(memo) >= MAX_CACHED_CANDIDATES:
                memo.clear()  # bounds a memo kept between batches (the pool's TemplateTypes.plans)
            found = memo[memo_key] = (reqs, reqs.labels())
        reqs, req_labels = found
        labels = dict(template.spec.labels)
        labels.update(req_labels)
        labels.update({k: str(v) for k, v in chosen.labels.items()})
        labels[wk.ZONE] = offering.zone
        labels[wk.CAPACITY_TYPE] = offering.capacity_type
        # The DaemonSets of the type the launch most likely gets (Karpenter adds the least overhead among the
        # candidates; the first candidate is what nodewright plans on).
        overhead = chosen.daemons.requests
        requests = {d: self.need[i] + int(overhead.get(d, 0)) for i, d in enumerate(template.dims)}
        return NodeClaimPlan(
            nodepool=template.name,
            instance_types=[t.it for t in candidates],
            instance_type=chosen.it,
            offering=offering,
            requirements=reqs,
            labels=labels,
            taints=template.taints,
            startup_taints=template.spec.startup_taints,
            pods=list(self.pods),
            requests=_shown(requests),
            daemonset_overhead=dict(overhead),
            hostname=self.hostname,
            min_values_relaxed=relaxed(template.min_values, reqs),
        )


def _shown(requests: Mapping[str, int]) -> dict[str, int]:
    """Requests without zero extended resources (cpu, memory and pods always shown)."""
    return {k: v for k, v in requests.items() if v or k in (CPU, MEMORY, PODS)}
