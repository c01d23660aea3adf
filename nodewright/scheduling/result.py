"""What :func:`nodewright.scheduling.schedule` returns: NodeClaims to create, placements, failures, log lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as wk
from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.quantities import Resources
from nodewright.scheduling.pods import Pod
from nodewright.scheduling.requirements import Requirements
from nodewright.scheduling.taints import Taint


@dataclass(slots=True, eq=False)
class NodeClaimPlan:
    """One NodeClaim to create.

    Attributes:
        nodepool: the NodePool it comes from.
        instance_types: candidate types for the fleet request, cheapest compatible offering first, at most 60,
            keeping every ``minValues`` satisfied.
        instance_type: the type the launch would most likely get (the cheapest candidate).
        offering: that type's cheapest compatible offering (zone, capacity type, USD/hour).
        requirements: requirements for the NodeClaim spec (pool ∩ pods ∩ topology, plus
            ``node.kubernetes.io/instance-type In <candidates>``).
        labels: labels the node will carry (pool template labels, and a value for each requirement key that
            resolves to one: :meth:`~nodewright.scheduling.requirements.Requirements.labels`).
        taints, startup_taints: from the NodePool template.
        pods: pods planned onto it.
        requests: pods' requests plus :attr:`daemonset_overhead` (cpu millicores, memory bytes, pods count).
        daemonset_overhead: requests of the daemonsets expected on it.
        hostname: placeholder hostname (the topology domain used for hostname constraints).
        effective_price: with a pricing policy, USD/hour it adds to the bill (its marginal price over the
            existing fleet and the NodeClaims planned before it); None without one.
        min_values_relaxed: ``MinValuesPolicy=BestEffort`` lowered a ``minValues`` of its NodePool to what its
            candidates meet (Karpenter's ``karpenter.sh/nodeclaim-min-values-relaxed`` annotation).
    """

    nodepool: str
    instance_types: list[InstanceType]
    instance_type: InstanceType
    offering: Offering
    requirements: Requirements
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]
    pods: list[Pod]
    requests: Resources
    daemonset_overhead: Resources
    hostname: str = ""
    effective_price: float | None = None
    min_values_relaxed: bool = False

    @property
    def price(self) -> float:
        """USD/hour of :attr:`offering`."""
        return self.offering.price

    @property
    def zone(self) -> str:
        """Zone of :attr:`offering`."""
        return self.offering.zone

    @property
    def capacity_type(self) -> str:
        """Capacity type of :attr:`offering` (``spot``/``on-demand``)."""
        return self.offering.capacity_type

    @property
    def arch(self) -> str:
        """``kubernetes.io/arch`` of :attr:`instance_type`."""
        return str(self.instance_type.labels.get(wk.ARCH, ""))


@dataclass(frozen=True, slots=True)
class SchedulingEvent:
    """A structured log line (Karpenter's sentence in ``message``, details in ``fields``)."""

    message: str
    level: str = "INFO"
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SchedulingResult:
    """The decision for one batch of pods.

    Attributes:
        new_nodeclaims: NodeClaims to create.
        existing: node name -> pods planned onto that existing (or in-flight) node.
        unschedulable: pod key (``namespace/name``) -> why it cannot be placed.
        events: log lines in order (also emitted through the ``nodewright.scheduling`` logger).
    """

    new_nodeclaims: list[NodeClaimPlan] = field(default_factory=list)
    existing: dict[str, list[Pod]] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)
    events: list[SchedulingEvent] = field(default_factory=list)

    @property
    def total_price(self) -> float:
        """USD/hour of all new NodeClaims (their most likely offerings)."""
        return sum(nc.price for nc in self.new_nodeclaims)

    @property
    def total_effective_price(self) -> float:
        """USD/hour the new NodeClaims add at effective prices (their list price where none was given)."""
        return sum(nc.price if nc.effective_price is None else nc.effective_price for nc in self.new_nodeclaims)

    def scheduled_pod_count(self) -> int:
        """Pods placed on new or existing nodes."""
        return sum(len(nc.pods) for nc in self.new_nodeclaims) + sum(len(p) for p in self.existing.values())
