"""Topology: the run's topology groups, counted per domain, and the domains a pod may take (Karpenter's
``topology.go``).

:class:`Topology` registers the groups of every pending pod class (deduplicated by constraint identity, see
:mod:`nodewright.scheduling.topologygroup`), counts the pods already bound to existing nodes, computes each
spread group's eligible domains (the *universe* its minimum runs over) and records every placement of this run.
Eligible domains come from the NodePools that could host the pod (their zones/capacity types from instance type
offerings and requirements) and from existing nodes compatible with the pod's own node requirements (never its
preferred node affinity nor its volumes); under ``nodeAffinityPolicy: Ignore`` from every NodePool and node;
under ``nodeTaintsPolicy: Honor`` NodePools and nodes whose taints the owner does not tolerate are left out.

:func:`node_admits` (an existing node) and :func:`narrow_requirements` (a NodeClaim of this run) say whether a
pod of a class may go there and in which domains it would count; a NodeClaim's requirements are narrowed so that
every counted key but the hostname is pinned to one domain (the least populated), keeping counts exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from nodewright.api import labels as wk
from nodewright.scheduling.pods import (
    LabelSelector,
    Pod,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.topologygroup import AFFINITY, ANTI_AFFINITY, SPREAD, NodeFilter, TopologyGroup

if TYPE_CHECKING:
    from nodewright.scheduling.existingnode import ExistingNodeState
    from nodewright.scheduling.nodeclaimtemplate import NodeClaimTemplate
    from nodewright.scheduling.nodes import ExistingNode
    from nodewright.scheduling.preferences import PodClass

#: (counts per hostname, highest admissible count): see :func:`hostname_blockers`.
HostnameBlocker = tuple[dict[str, int], int]


class Topology:
    """Registry of topology groups for one scheduling run (deduplicated by constraint identity)."""

    def __init__(self) -> None:
        self._groups: dict[tuple[object, ...], TopologyGroup] = {}
        self.hostname_groups: list[TopologyGroup] = []

    @property
    def groups(self) -> list[TopologyGroup]:
        """Every registered group."""
        return list(self._groups.values())

    def group(
        self,
        kind: str,
        key: str,
        namespaces: frozenset[str] | None,
        selector: LabelSelector | None,
        *,
        max_skew: int = 1,
        min_domains: int | None = None,
        enforce_inverse: bool = False,
        node_filter: NodeFilter | None = None,
    ) -> TopologyGroup:
        """Get or create the group for this constraint identity."""
        filter_ident = None if node_filter is None else node_filter.identity()
        ident = (kind, key, namespaces, selector, max_skew, min_domains, enforce_inverse, filter_ident)
        found = self._groups.get(ident)
        if found is None:
            found = TopologyGroup(kind, key, namespaces, selector, max_skew, min_domains, enforce_inverse)
            found.node_filter = node_filter
            self._groups[ident] = found
        return found

    def owned_groups(
        self,
        pod: Pod,
        *,
        spreads: list[TopologySpreadConstraint],
        preferred_affinity_removed: int,
        preferred_anti_affinity_removed: int,
    ) -> list[TopologyGroup]:
        """Groups a pod owns: ``spreads`` (its constraints not relaxed yet), required (anti-)affinity and the
        preferred terms still treated as required: all but the ``preferred_*_removed`` heaviest ones, since
        relaxation removes the heaviest remaining term first (Karpenter ``removePreferredPodAffinityTerm`` /
        ``removePreferredPodAntiAffinityTerm``: stable sort by weight descending, drop ``terms[0]``). Every lighter
        term stays required until it is relaxed in its turn."""
        out: list[TopologyGroup] = []
        aff = pod.affinity
        for term in aff.pod_affinity_required:
            out.append(
                self.group(AFFINITY, term.topology_key, _namespaces(pod, term.namespaces, term.all_namespaces), term.label_selector)
            )
        for wterm in _heaviest(aff.pod_affinity_preferred)[preferred_affinity_removed:]:
            t = wterm.term
            out.append(self.group(AFFINITY, t.topology_key, _namespaces(pod, t.namespaces, t.all_namespaces), t.label_selector))
        for term in aff.pod_anti_affinity_required:
            out.append(
                self.group(
                    ANTI_AFFINITY,
                    term.topology_key,
                    _namespaces(pod, term.namespaces, term.all_namespaces),
                    term.label_selector,
                    enforce_inverse=True,
                )
            )
        for wterm in _heaviest(aff.pod_anti_affinity_preferred)[preferred_anti_affinity_removed:]:
            t = wterm.term
            out.append(
                self.group(ANTI_AFFINITY, t.topology_key, _namespaces(pod, t.namespaces, t.all_namespaces), t.label_selector)
            )
        for tsc in spreads:
            out.append(
                self.group(
                    SPREAD,
                    tsc.topology_key,
                    frozenset({pod.namespace}),
                    tsc.label_selector,
                    max_skew=tsc.max_skew,
                    min_domains=tsc.min_domains,
                    node_filter=NodeFilter.for_spread(pod, tsc),
                )
            )
        return out

    def register_existing_owner(self, pod: Pod) -> None:
        """Register a bound pod's required anti-affinity so pending pods it selects avoid its domain."""
        for term in pod.affinity.pod_anti_affinity_required:
            self.group(
                ANTI_AFFINITY,
                term.topology_key,
                _namespaces(pod, term.namespaces, term.all_namespaces),
                term.label_selector,
                enforce_inverse=True,
            )

    def selecting(self, pod: Pod) -> list[TopologyGroup]:
        """Groups that count ``pod``."""
        return [g for g in self._groups.values() if g.selects(pod)]

    def inverse_for(self, pod: Pod) -> list[TopologyGroup]:
        """Required anti-affinity groups whose owners ``pod`` must avoid."""
        return [g for g in self._groups.values() if g.enforce_inverse and g.selects(pod)]

    # --- counting ---------------------------------------------------------------------------------
    def register(self, classes: Sequence[PodClass], nodes: Iterable[ExistingNode]) -> None:
        """Register the groups of ``classes`` and of the required anti-affinity of pods bound to ``nodes``, tell
        each class which groups count it and which it must avoid, and count the bound pods."""
        nodes = list(nodes)
        for node in nodes:
            for pod in node.pods:
                self.register_existing_owner(pod)
        for cls in classes:
            cls.refresh(self)
        for cls in classes:
            cls.selecting = self.selecting(cls.rep)
            cls.inverse = self.inverse_for(cls.rep)
        self._count_existing(nodes)

    def _count_existing(self, nodes: Iterable[ExistingNode]) -> None:
        """Count the pods bound to ``nodes`` (not marked for deletion) in every group that selects them, and the
        owners of each required anti-affinity group.

        Per group the pods are visited in node order, then pod order (so each ``counts`` dict is built in the
        same order as a plain scan). Which pods a group visits is narrowed first, never widened: those of its
        namespace, and, for a selector with ``matchLabels``, those carrying its first label (an index built once
        per call); each is then checked against the whole selector. The inverse count visits only pods with
        required anti-affinity."""
        groups = self.groups
        if not groups:
            return
        def indexed(g: TopologyGroup) -> tuple[str | None, str, str] | None:
            """(namespace or None for all, label key, value) of the group's first matchLabels, when usable."""
            sel, namespaces = g.selector, g.namespaces
            if sel is None or not sel.match_labels or (namespaces is not None and len(namespaces) != 1):
                return None
            k, v = sel.match_labels[0]
            return (None if namespaces is None else next(iter(namespaces)), k, v)

        wanted = {t for t in map(indexed, groups) if t is not None}
        keys = {k for _, k, _ in wanted}
        pairs: list[tuple[ExistingNode, Pod]] = []
        by_label: dict[tuple[str | None, str, str], list[tuple[ExistingNode, Pod]]] = {t: [] for t in wanted}
        owners: list[tuple[ExistingNode, Pod]] = []
        for node in nodes:
            if node.marked_for_deletion:
                continue
            for pod in node.pods:
                pair = (node, pod)
                pairs.append(pair)
                labels = pod.labels
                for k in keys:
                    v = labels.get(k)
                    if v is None:
                        continue
                    hit = by_label.get((pod.namespace, k, v))
                    if hit is not None:
                        hit.append(pair)
                    hit = by_label.get((None, k, v))
                    if hit is not None:
                        hit.append(pair)
                if pod.affinity.pod_anti_affinity_required:
                    owners.append(pair)
        for g in groups:
            key = g.key
            selector = g.selector
            if selector is not None:
                namespaces = g.namespaces
                where = indexed(g)
                visit: list[tuple[ExistingNode, Pod]]
                if where is not None:
                    visit = by_label[where]
                elif namespaces is None:
                    visit = pairs
                else:
                    visit = [p for p in pairs if p[1].namespace in namespaces]
                flt = g.node_filter
                counts = g.counts
                for node, pod in visit:
                    domain = node.labels.get(key)
                    if domain is None or not selector.matches(pod.labels):
                        continue
                    if flt is None or flt.matches_node(node.labels, node.taints):
                        counts[domain] = counts.get(domain, 0) + 1
            if g.enforce_inverse:
                owner_counts = g.owner_counts
                for node, pod in owners:
                    domain = node.labels.get(key)
                    if domain is not None and any(t.topology_key == key and t.label_selector == selector
                                                  for t in pod.affinity.pod_anti_affinity_required):
                        owner_counts[domain] = owner_counts.get(domain, 0) + 1

    def init_universes(
        self, classes: Iterable[PodClass], templates: Sequence[NodeClaimTemplate], nodes: Sequence[ExistingNodeState]
    ) -> None:
        """Add to every non-hostname spread group the domains its owners could reach."""
        memo: dict[tuple[object, ...], set[str]] = {}
        for cls in classes:
            for g in cls.owned:
                if g.kind != SPREAD or g.key == wk.HOSTNAME:
                    continue
                g.universe |= self.eligible_domains(cls, g, templates, nodes, memo)

    def refresh_universes(
        self, cls: PodClass, templates: Sequence[NodeClaimTemplate], nodes: Sequence[ExistingNodeState]
    ) -> None:
        """After ``cls`` relaxed: add to the spread groups it now owns the domains it could reach now (a relaxed
        required term may reach others)."""
        for g in cls.owned:
            if g.kind == SPREAD and g.key != wk.HOSTNAME:
                g.universe |= self.eligible_domains(cls, g, templates, nodes)

    @staticmethod
    def eligible_domains(
        cls: PodClass, g: TopologyGroup, templates: Sequence[NodeClaimTemplate], nodes: Sequence[ExistingNodeState],
        memo: dict[tuple[object, ...], set[str]] | None = None,
    ) -> set[str]:
        """Domains of ``g.key`` that count for the spread minimum of an owner of class ``cls``: those of the
        NodePools and existing nodes kube-scheduler's PodTopologySpread would count for it.

        - ``nodeAffinityPolicy: Honor`` (default): only NodePools and nodes that meet the owner's own node
          requirements (:attr:`PodClass.strict`: nodeSelector and required node affinity; never a preferred term
          (aws/karpenter-provider-aws#4406) nor a volume's zones, as Karpenter's ``StrictRequirements``).
        - ``nodeAffinityPolicy: Ignore``: every NodePool and node, whatever the owner's node affinity.

        Under either policy the minimum then runs over those of these domains that the owner's own requirement on
        ``g.key`` allows (:meth:`TopologyGroup.min_count`, Karpenter's ``domainMinCount`` over ``podDomains``).
        - ``nodeTaintsPolicy: Honor``: minus NodePools and nodes whose ``NoSchedule``/``NoExecute`` taints the
          owner does not tolerate (default Ignore: taints do not matter).
        """
        key = g.key
        flt = g.node_filter
        own = cls.strict if flt is not None and flt.honors_affinity else Requirements()
        domains: set[str] = set()
        for template in templates:
            if template.reqs.incompatibility(own) is not None:
                continue
            if flt is not None and not flt.tolerates(template.taints):
                continue
            merged = template.reqs.intersect(own)
            if template.types_for(merged):
                domains |= template.domains(key, merged)
        # The nodes' part depends only on (key, own requirements, tolerations): ``memo`` (one per node list)
        # shares it between the classes of one run.
        memo_key = (key, own, None if flt is None else flt.tolerations)
        from_nodes = None if memo is None else memo.get(memo_key)
        if from_nodes is None:
            from_nodes = set()
            for node in nodes:
                value = node.labels.get(key)
                if value is not None and own.satisfied_by_labels(node.labels):
                    if flt is None or flt.tolerates(node.node.taints):
                        from_nodes.add(value)
            if memo is not None:
                memo[memo_key] = from_nodes
        return domains | from_nodes

    @staticmethod
    def record(cls: PodClass, domains: Mapping[str, str], counts_on: Callable[[NodeFilter], bool]) -> None:
        """Count one pod of ``cls`` just placed in ``domains`` (topology key -> domain): +1 in every group that
        selects it (a group with a node filter only when ``counts_on(filter)`` says the pod's node passes it),
        and +1 owner count in its required anti-affinity groups."""
        for g in cls.selecting:
            d = domains.get(g.key)
            if d is not None:
                if g.node_filter is not None and not counts_on(g.node_filter):
                    continue
                g.counts[d] = g.counts.get(d, 0) + 1
        for g in cls.owned:
            if g.enforce_inverse:
                d = domains.get(g.key)
                if d is not None:
                    g.owner_counts[d] = g.owner_counts.get(d, 0) + 1


def _namespaces(pod: Pod, namespaces: tuple[str, ...], all_namespaces: bool) -> frozenset[str] | None:
    if all_namespaces:
        return None
    return frozenset(namespaces) if namespaces else frozenset({pod.namespace})


def _heaviest(terms: Iterable[WeightedPodAffinityTerm]) -> list[WeightedPodAffinityTerm]:
    # Karpenter relaxes the heaviest preferred term first (stable sort by weight, descending).
    return sorted(terms, key=lambda t: -t.weight)


# --- where a pod may go ---------------------------------------------------------------------------------------
def node_admits(cls: PodClass, labels: Mapping[str, str], domains: dict[str, str]) -> tuple[bool, bool]:
    """(admitted, permanently refused) for one pod of ``cls`` on an existing node with ``labels``; on admission
    ``domains`` gets the node's domain of every key the class counts in or owns."""
    for g in cls.owned:
        value = labels.get(g.key)
        if value is None:
            if g.kind == SPREAD or g.kind == AFFINITY:
                return False, True
            continue
        if not g.admissible({value}, g in cls.selecting, cls.strict.get(g.key)):
            return False, g.key == wk.HOSTNAME and g.kind != AFFINITY
    for g in cls.inverse:
        value = labels.get(g.key)
        if value is not None and not g.inverse_admissible({value}):
            return False, g.key == wk.HOSTNAME
    for g in (*cls.selecting, *cls.owned):
        value = labels.get(g.key)
        if value is not None:
            domains[g.key] = value
    return True, False


def narrow_requirements(
    cls: PodClass,
    reqs: Requirements,
    domains_of: Callable[[str, Requirements], set[str]],
    domains: dict[str, str],
) -> Requirements | None:
    """``reqs`` narrowed so every topology group of ``cls`` is satisfied (Karpenter's ``AddRequirements``);
    fills ``domains`` (key -> the domain the pod counts in). ``domains_of(key, reqs)`` lists the values a
    NodeClaim could have for ``key``.

    Returns None when no domain is admissible. Keys that a selecting group counts are pinned to one domain
    (the least populated, ties by name), so counts stay exact.
    """
    keys: dict[str, set[str]] = {}
    for g in (*cls.owned, *cls.inverse, *cls.selecting):
        if g.key not in keys:
            keys[g.key] = domains_of(g.key, reqs)
    # Set-valued constraints first (affinity, anti-affinity, inverse), then single-choice spreads.
    for g in cls.owned:
        if g.kind != SPREAD:
            keys[g.key] = g.admissible(keys[g.key], g in cls.selecting, cls.strict.get(g.key))
            if not keys[g.key]:
                return None
    for g in cls.inverse:
        keys[g.key] = g.inverse_admissible(keys[g.key])
        if not keys[g.key]:
            return None
    for g in cls.owned:
        if g.kind == SPREAD:
            keys[g.key] = g.admissible(keys[g.key], g in cls.selecting, cls.strict.get(g.key))
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


def hostname_limited(cls: PodClass) -> bool:
    """True when a hostname spread or (anti-)affinity that ``cls`` owns or avoids can refuse a node for good."""
    return any(g.key == wk.HOSTNAME and g.kind != AFFINITY for g in (*cls.owned, *cls.inverse))


def blocked_on_hostname(cls: PodClass, hostname: str) -> bool:
    """True when a hostname spread, anti-affinity or inverse anti-affinity of ``cls`` refuses ``hostname``
    (counts only grow, so the refusal is final)."""
    for g in (*cls.owned, *cls.inverse):
        if g.key != wk.HOSTNAME or g.kind == AFFINITY:
            continue
        if g in cls.owned and not g.admissible({hostname}, g in cls.selecting):
            return True
        if g in cls.inverse and not g.inverse_admissible({hostname}):
            return True
    return False


def hostname_blockers(cls: PodClass) -> list[HostnameBlocker]:
    """(counts per hostname, highest admissible count) for the class's hostname spread, anti-affinity and
    inverse anti-affinity groups: a NodeClaim whose count exceeds the bound can never take the class again
    (hostname spread's minimum is always 0, counts only grow)."""
    out: list[HostnameBlocker] = []
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


def blocked(blockers: list[HostnameBlocker], hostname: str) -> bool:
    """True when ``hostname`` exceeds the bound of one of :func:`hostname_blockers`."""
    for counts, bound in blockers:
        if counts.get(hostname, 0) > bound:
            return True
    return False
