"""Plain data the disruption decisions work on, and the decision they return.

Everything here is built by the disruption controller from one cluster snapshot (or by tests and the
simulator directly); the decision functions never read a clock or a client. Units: prices in USD/hour,
times in epoch seconds, durations in seconds, resources as :mod:`nodewright.quantities`
(cpu millicores, memory bytes, pods count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nodewright.api import labels as L
from nodewright.api.annotations import CONSOLIDATION_HYSTERESIS, DEFAULT_HYSTERESIS, MIN_NODE_LIFETIME
from nodewright.api.capacitybuffer import FAKE_POD_ANNOTATION
from nodewright.api.nodepool import Budget
from nodewright.cloud.instancetype import InstanceType, PriceIndex
from nodewright.pricing.engine import MinimumSaving, MoveSaving
from nodewright.scheduling import ExistingNode, NodeClaimPlan, NodePoolSpec, Pod, SchedulingResult
from nodewright.selectors import LabelSelector, selects

#: Methods, in the order Karpenter tries them (one acts per pass); expiration runs on its own.
EMPTINESS = "emptiness"
DRIFT = "drift"
MULTI_NODE = "multi-node-consolidation"
SINGLE_NODE = "single-node-consolidation"
EXPIRATION = "expiration"

#: Reason of each method (the budget ``reasons`` vocabulary; ``Expired`` is not budgeted).
REASON_EMPTY = L.REASON_EMPTY
REASON_DRIFTED = L.REASON_DRIFTED
REASON_UNDERUTILIZED = L.REASON_UNDERUTILIZED
REASON_EXPIRED = "Expired"

DELETE = "delete"
REPLACE = "replace"

#: Annotation (nodewright's) keeping consolidation off nodes younger than a duration, e.g. ``"1h"``.
MIN_NODE_LIFETIME_ANNOTATION = MIN_NODE_LIFETIME
#: Annotation (nodewright's): how far below the target utilization a node must be to count as underutilized.
HYSTERESIS_ANNOTATION = CONSOLIDATION_HYSTERESIS

#: Pod annotation Kubernetes' ReplicaSet controller uses to rank pods for deletion; Karpenter reuses it in the
#: disruption cost.
POD_DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"


@dataclass(frozen=True, slots=True)
class PDB:
    """A PodDisruptionBudget reduced to what candidate rules need.

    Attributes:
        name: PDB name (for reasons).
        namespace: its namespace; it only selects pods there.
        selector: ``spec.selector`` (``None`` selects nothing, an empty selector everything).
        disruptions_allowed: how many of its pods may be evicted now (Kubernetes' ``status.disruptionsAllowed``).
        overlaps: ``namespace/name`` of the pods this budget selects together with another budget: the Eviction
            API refuses those pods whatever the budgets allow (found by :func:`nodewright.kube.pdb.overlapping_budgets`
            when the view is built).
    """

    name: str
    namespace: str
    selector: LabelSelector | None
    disruptions_allowed: int
    overlaps: frozenset[str] = frozenset()

    def selects(self, pod: Pod) -> bool:
        """Whether this budget covers ``pod`` (never a CapacityBuffer virtual pod: it is not evicted)."""
        return (pod.namespace == self.namespace and pod.annotations.get(FAKE_POD_ANNOTATION) != "true"
                and selects(self.selector, pod.labels))


@dataclass(slots=True)
class Pool:
    """One NodePool as the disruption decisions see it.

    Attributes:
        name: NodePool name.
        spec: the scheduler's view (requirements, taints, daemonset overhead, target utilization).
        instance_types: what the pool may launch now (replacements come from here).
        consolidation_policy: ``WhenEmpty``, ``WhenEmptyOrUnderutilized`` or ``Balanced``.
        consolidate_after: seconds a node must have had no pod event before consolidation; None = ``Never``.
        budgets: ``spec.disruption.budgets``.
        hash: the current NodePool template hash (:func:`nodewright.api.hashing.nodepool_hash`).
        min_node_lifetime: seconds (``nodewright.io/min-node-lifetime``); consolidation leaves younger nodes.
        hysteresis: fraction below ``spec.target_utilization`` a node must be to be underutilized.
        static: ``spec.replicas`` is set (a static NodePool): never consolidated, its size is the static
            controller's (:mod:`nodewright.controllers.static`).
        minimum_saving: the least a consolidation move of its nodes must save (``nodewright.io/consolidation-
            minimum-saving`` USD/hour, ``...-percent``; :mod:`nodewright.disruption.pricing`).
    """

    name: str
    spec: NodePoolSpec
    instance_types: Sequence[InstanceType] = ()
    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: float | None = 0.0
    budgets: Sequence[Budget] = field(default_factory=lambda: (Budget(nodes="10%"),))
    hash: str = ""
    min_node_lifetime: float = 0.0
    hysteresis: float = DEFAULT_HYSTERESIS
    static: bool = False
    minimum_saving: MinimumSaving = field(default_factory=MinimumSaving)
    _prices: PriceIndex | None = field(default=None, repr=False, compare=False)

    def price_of(self, labels: Mapping[str, str]) -> float:
        """A node's price in this pool (:class:`~nodewright.cloud.instancetype.PriceIndex`, built once)."""
        if self._prices is None:
            self._prices = PriceIndex(self.instance_types)
        return self._prices.price(labels)

    @property
    def target_utilization(self) -> float | None:
        """``nodewright.io/target-utilization`` fraction, or None (pack fully)."""
        return self.spec.target_utilization


@dataclass(frozen=True, slots=True)
class NodeClassInfo:
    """What drift compares a NodeClaim with on its EC2NodeClass.

    Attributes:
        name: EC2NodeClass name.
        hash: :func:`nodewright.api.hashing.ec2nodeclass_hash` of the current spec.
        ami_ids: AMI IDs resolved in ``status.amis`` (None when not resolved yet: no AMI drift).
        subnet_ids: subnet IDs in ``status.subnets`` (None when unknown).
        subnet_zones: zones of those subnets (None when unknown).
        security_group_ids: IDs in ``status.securityGroups`` (None when unknown).
    """

    name: str
    hash: str = ""
    ami_ids: frozenset[str] | None = None
    subnet_ids: frozenset[str] | None = None
    subnet_zones: frozenset[str] | None = None
    security_group_ids: frozenset[str] | None = None


@dataclass(slots=True, eq=False)
class Node:
    """One managed node (a NodeClaim and its Node) as a possible disruption candidate.

    Attributes:
        name: node name (the NodeClaim name while no Node registered).
        nodeclaim: NodeClaim name (what the termination path deletes).
        nodepool: owning NodePool.
        view: the scheduler's view: labels, allocatable, taints and *every* bound pod (daemonsets included).
        pods: the pods that must move if the node goes (not DaemonSet, mirror, finished or terminating).
        created: NodeClaim creation, epoch seconds.
        price: USD/hour of its offering (0.0 when unknown: never consolidated for savings).
        initialized: ``karpenter.sh/initialized`` (or NodeClaim Initialized=True).
        ready: Node ``Ready=True``.
        deleting: being deleted or already carrying ``karpenter.sh/disrupted``.
        do_not_disrupt: ``karpenter.sh/do-not-disrupt: "true"`` on the Node or NodeClaim.
        last_pod_event: epoch seconds of the last pod bound to/removed from it (None: use ``created``).
        expire_after: seconds (NodeClaim ``spec.expireAfter``); None = ``Never``.
        termination_grace_period: seconds (NodeClaim ``spec.terminationGracePeriod``) or None.
        annotations: NodeClaim annotations (hashes and their versions).
        nodeclass: EC2NodeClass name.
        image_id: ``status.imageID`` (AMI), ``""`` when unknown.
        subnet_id: the instance's subnet when known.
        security_group_ids: the instance's security groups when known.
        cloud_drift: a drift reason the cloud provider reported (``AMIDrift``, ``SubnetDrift``, ...).
        unmovable: pods among :attr:`pods` no scheduling simulation can place again, pod key -> why (a pod with
            Dynamic Resource Allocation requirements: :mod:`nodewright.state.blocked`); a simulation moving them
            fails with that reason, so the node is neither consolidated nor replaced for drift.
    """

    name: str
    nodeclaim: str
    nodepool: str
    view: ExistingNode
    pods: list[Pod]
    created: float
    price: float = 0.0
    initialized: bool = True
    ready: bool = True
    deleting: bool = False
    do_not_disrupt: bool = False
    last_pod_event: float | None = None
    expire_after: float | None = None
    termination_grace_period: float | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    nodeclass: str = ""
    image_id: str = ""
    subnet_id: str = ""
    security_group_ids: frozenset[str] | None = None
    cloud_drift: str | None = None
    unmovable: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str]:
        """Node labels."""
        return self.view.labels

    @property
    def instance_type(self) -> str:
        """``node.kubernetes.io/instance-type``."""
        return self.labels.get(L.INSTANCE_TYPE, "")

    @property
    def zone(self) -> str:
        """``topology.kubernetes.io/zone``."""
        return self.labels.get(L.ZONE, "")

    @property
    def capacity_type(self) -> str:
        """``karpenter.sh/capacity-type``."""
        return self.labels.get(L.CAPACITY_TYPE, "")


@dataclass(slots=True)
class ClusterView:
    """Everything one pass of decisions reads.

    Attributes:
        nodes: managed nodes (candidates and destinations).
        pools: NodePool name -> :class:`Pool`.
        nodeclasses: EC2NodeClass name -> :class:`NodeClassInfo`.
        pdbs: PodDisruptionBudgets.
        unmanaged: nodes no NodePool owns: destinations only, never candidates.
        daemonsets: daemonset pods (recompute each pool's overhead); None to use ``Pool.spec.daemonset_overhead``.
        min_values_policy: Karpenter's ``MinValuesPolicy`` its scheduling simulations use (``Strict`` or
            ``BestEffort``, as the provisioner: Karpenter's disruption passes the same setting).
        preference_policy: Karpenter's ``PreferencePolicy`` of those simulations (``Respect`` or ``Ignore``, as the
            provisioner; Karpenter's ``SimulateScheduling`` passes ``IgnorePreferences`` the same way).
        static_capacity: the ``StaticCapacity`` gate: static pools get successors from the static controller; off,
            a drifted static node is never terminated first (nothing would replace it).
    """

    nodes: list[Node]
    pools: dict[str, Pool]
    nodeclasses: dict[str, NodeClassInfo] = field(default_factory=dict)
    pdbs: list[PDB] = field(default_factory=list)
    unmanaged: list[ExistingNode] = field(default_factory=list)
    daemonsets: list[Pod] | None = None
    min_values_policy: str = "Strict"
    preference_policy: str = "Respect"
    static_capacity: bool = True


@dataclass(slots=True)
class Decision:
    """One disruption to execute.

    Attributes:
        method: :data:`EMPTINESS`, :data:`DRIFT`, :data:`MULTI_NODE`, :data:`SINGLE_NODE` or :data:`EXPIRATION`.
        reason: ``Empty``, ``Drifted``, ``Underutilized`` or ``Expired``.
        candidates: the nodes to remove.
        replacements: NodeClaims to launch (and wait Ready) first; empty for a deletion.
        result: the scheduling simulation that proves every moved pod has a place (None for emptiness/expiry).
        evaluated: candidates the method evaluated (for benchmarks and logs).
        detail: drift reason per candidate name, or other per-candidate notes.
        saving: for consolidation, what the move saves at the prices it was decided by (effective marginal
            prices under a PricingPolicy, :mod:`nodewright.disruption.pricing`); None: list prices.
        effective: True when ``saving`` is at effective prices (a PricingPolicy was in force).
        terminate_first: drift of a capacity-constrained pool: the candidate is deleted before any replacement
            (its pods wait for the capacity it frees; :func:`nodewright.disruption.drift.terminate_first`).
    """

    method: str
    reason: str
    candidates: list[Node]
    replacements: list[NodeClaimPlan] = field(default_factory=list)
    result: SchedulingResult | None = None
    evaluated: int = 0
    detail: dict[str, str] = field(default_factory=dict)
    saving: MoveSaving | None = None
    effective: bool = False
    terminate_first: bool = False

    @property
    def decision(self) -> str:
        """``replace`` when replacements are launched first, else ``delete`` (Karpenter's metric label)."""
        return REPLACE if self.replacements else DELETE

    @property
    def current_price(self) -> float:
        """USD/hour of the candidates."""
        return sum(c.price for c in self.candidates)

    @property
    def replacement_price(self) -> float:
        """USD/hour of the replacements (their most likely offering)."""
        return sum(p.price for p in self.replacements)

    @property
    def savings(self) -> float:
        """USD/hour saved: :attr:`saving` when set, else candidates minus replacements at list prices (may be
        negative for drift/expiry)."""
        if self.saving is not None:
            return self.saving.usd_per_hour
        return self.current_price - self.replacement_price

    def message(self) -> str:
        """The event sentence, e.g. ``"Consolidating 3 nodes into 1 t4g.large, saving $0.21/h"``."""
        n = len(self.candidates)
        nodes = f"{n} node{'s' if n != 1 else ''}"
        saving = f"${self.savings:.2f}/h" + (" at effective prices" if self.effective else "")
        if self.method in (MULTI_NODE, SINGLE_NODE):
            if self.replacements:
                types = ", ".join(f"1 {p.instance_type.name}" for p in self.replacements)
                return f"Consolidating {nodes} into {types}, saving {saving}"
            return f"Consolidating {nodes} by deleting {'them' if n != 1 else 'it'}, saving {saving}"
        if self.method == EMPTINESS:
            return f"Deleting {n} empty node{'s' if n != 1 else ''}, saving {saving}"
        if self.method == DRIFT:
            why = ", ".join(sorted(set(self.detail.values()))) or "Drifted"
            if self.replacements:
                types = ", ".join(p.instance_type.name for p in self.replacements)
                return f"Replacing {nodes} ({why}) with {len(self.replacements)} new ({types}), saving {saving}"
            return f"Deleting {nodes} ({why})"
        return f"Expiring {nodes}"
