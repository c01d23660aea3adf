"""Pods as the scheduler sees them, and their conversion from Kubernetes manifests.

A :class:`Pod` is a plain, effectively immutable record: effective resource requests (see
:func:`effective_requests`), node selector, affinity, tolerations, topology spread constraints and host ports.
Identical replicas share one :attr:`Pod.shape_key`, which the scheduler uses to treat them as one
equivalence class. Do not mutate a pod after construction (preference relaxation is tracked by the
scheduler, not written into the pod).

Workloads (:func:`pods_from_workload`): Deployment, ReplicaSet, StatefulSet and ReplicationController give
``spec.replicas``
pods (default 1), Job gives ``min(parallelism, completions)`` (defaults 1), CronJob one run of its job
template, Pod itself. Replicas are named ``<name>-<index>`` from 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodewright.errors import NodewrightValidationError
from nodewright.quantities import CPU, MEMORY, PODS, Resources, parse_resource_list
from nodewright.scheduling.requirements import Requirements
from nodewright.scheduling.taints import Toleration, toleration_from_dict
from nodewright.selectors import LabelSelector

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One OR-term of required node affinity: its ``matchExpressions`` ANDed (``matchFields`` ignored)."""

    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def requirements(self) -> Requirements:
        """The term as :class:`Requirements`."""
        return Requirements.from_expressions(
            {"key": k, "operator": op, "values": list(vals)} for k, op, vals in self.expressions
        )

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], path: str = "") -> NodeSelectorTerm:
        """From ``{"matchExpressions": [...]}``; validated through :class:`Requirements`.

        Raises:
            NodewrightValidationError: an invalid expression.
        """
        exprs = tuple(
            (str(e.get("key", "")), str(e.get("operator", "")), tuple(str(v) for v in e.get("values") or []))
            for e in doc.get("matchExpressions") or []
        )
        term = cls(exprs)
        Requirements.from_expressions(
            ({"key": k, "operator": op, "values": list(v)} for k, op, v in exprs), path=f"{path}.matchExpressions"
        )
        return term


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    """A weighted preferred node-affinity term."""

    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A pod (anti-)affinity term.

    Attributes:
        topology_key: e.g. ``topology.kubernetes.io/zone`` or ``kubernetes.io/hostname``.
        label_selector: pods it refers to (None selects no pod); ``matchLabelKeys`` already merged in.
        namespaces: namespaces searched; empty means the pod's own namespace unless ``all_namespaces``.
        all_namespaces: True for an empty ``namespaceSelector`` (``{}``), which selects every namespace.
    """

    topology_key: str
    label_selector: LabelSelector | None
    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    """A preferred pod (anti-)affinity term with its weight (1..100)."""

    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class Affinity:
    """``spec.affinity``: node affinity (required OR-terms, preferred terms) and pod (anti-)affinity.

    ``volume_required`` holds the node requirements of the pod's volumes (alternatives, ORed; see
    :class:`nodewright.state.models.VolumeTopology`). They are kept apart from ``node_required``, as Karpenter
    keeps ``PodData.VolumeRequirements`` apart from the pod's own affinity: a volume restricts the node the pod
    lands on (:meth:`placement_terms`), but neither the pod's topology-spread domains nor which nodes a spread
    counts (``nodeAffinityPolicy: Honor`` looks at the pod's own node affinity only).
    """

    node_required: tuple[NodeSelectorTerm, ...] = ()
    node_preferred: tuple[PreferredSchedulingTerm, ...] = ()
    pod_affinity_required: tuple[PodAffinityTerm, ...] = ()
    pod_affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    pod_anti_affinity_required: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    volume_required: tuple[NodeSelectorTerm, ...] = ()

    def placement_terms(self) -> tuple[NodeSelectorTerm, ...]:
        """The OR-terms a node must meet: each own required term ANDed with each volume alternative, own term
        major (term ``i`` pairs with own term ``i // max(1, len(volume_required))``); () when neither is set."""
        if not self.volume_required:
            return self.node_required
        own = self.node_required or (NodeSelectorTerm(),)
        return tuple(NodeSelectorTerm((*t.expressions, *v.expressions)) for t in own for v in self.volume_required)


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    """A ``topologySpreadConstraints`` entry (``matchLabelKeys`` already merged into the selector).

    ``node_affinity_policy`` (Honor|Ignore, default Honor) says whether nodes the pod's node affinity excludes
    count as domains; ``node_taints_policy`` (Honor|Ignore, default Ignore) the same for untolerated taints.
    """

    max_skew: int
    topology_key: str
    when_unsatisfiable: str = DO_NOT_SCHEDULE
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container ``hostPort`` (conflicts with another pod's same port/protocol on an overlapping host IP)."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ""

    def conflicts(self, other: HostPort) -> bool:
        """Same port and protocol, and host IPs overlap (empty or 0.0.0.0 overlaps everything)."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wild = ("", "0.0.0.0")
        return self.host_ip in wild or other.host_ip in wild or self.host_ip == other.host_ip


@dataclass(slots=True, eq=False)
class Pod:
    """A pod to place (pending) or already placed (``node_name`` set).

    Attributes:
        namespace, name, uid: identity; :attr:`key` is ``namespace/name``.
        labels, annotations: metadata.
        requests: effective requests (:func:`effective_requests`): cpu millicores, memory bytes, ``pods: 1``.
        node_selector: ``spec.nodeSelector``.
        affinity: ``spec.affinity``.
        tolerations: ``spec.tolerations``.
        topology_spread: ``spec.topologySpreadConstraints``.
        host_ports: container host ports.
        owner_kind, owner_name: controlling owner (``Deployment``/``StatefulSet``/``Job``/``DaemonSet``...).
        priority: ``spec.priority`` (0 when unset).
        node_name: ``spec.nodeName`` when bound.
        shape_key: equal for pods with identical scheduling-relevant fields (equivalence classes).
        volumes: the CSI volumes it attaches, ``(driver, namespace/claim)`` (not part of the shape: pods of one
            class mount different claims; :mod:`nodewright.state.volumeusage`).
    """

    namespace: str
    name: str
    requests: Resources
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: Affinity = field(default_factory=Affinity)
    tolerations: tuple[Toleration, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    owner_kind: str = ""
    owner_name: str = ""
    priority: int = 0
    node_name: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    shape_key: int = 0
    shape: tuple[Any, ...] = ()
    volumes: frozenset[tuple[str, str]] = frozenset()

    def __post_init__(self) -> None:
        if not self.shape:
            self.refresh_shape()

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def is_daemonset(self) -> bool:
        """True when a DaemonSet owns the pod."""
        return self.owner_kind == "DaemonSet"

    def refresh_shape(self) -> None:
        """Recompute :attr:`shape`/:attr:`shape_key` (call after changing a scheduling-relevant field)."""
        self.shape = (
            self.namespace,
            tuple(sorted(self.labels.items())),
            tuple(sorted(self.requests.items())),
            tuple(sorted(self.node_selector.items())),
            self.affinity,
            self.tolerations,
            self.topology_spread,
            self.host_ports,
            self.priority,
        )
        self.shape_key = hash(self.shape)

    def replica(self, name: str, uid: str = "") -> Pod:
        """A copy with another name/uid sharing every other field (and the shape) by reference."""
        return Pod(
            namespace=self.namespace,
            name=name,
            requests=self.requests,
            uid=uid,
            labels=self.labels,
            node_selector=self.node_selector,
            affinity=self.affinity,
            tolerations=self.tolerations,
            topology_spread=self.topology_spread,
            host_ports=self.host_ports,
            owner_kind=self.owner_kind,
            owner_name=self.owner_name,
            priority=self.priority,
            node_name=self.node_name,
            annotations=self.annotations,
            shape_key=self.shape_key,
            shape=self.shape,
        )


# --- conversion ---------------------------------------------------------------------------------


def effective_requests(spec: Mapping[str, Any], path: str = "spec") -> Resources:
    """A pod spec's effective requests, as the kube-scheduler and Karpenter compute them.

    Per container, a resource with a limit but no request requests its limit (API defaulting; this is how
    extended resources such as ``nvidia.com/gpu`` are requested). Containers are summed; restartable init
    containers (sidecars, ``restartPolicy: Always``) add to the sum; other init containers run one at a time,
    so the pod needs the maximum of (each init container + sidecars started before it) and the running sum.
    Pod-level ``spec.resources`` (KEP-2837) replaces that aggregate for the resources it names (cpu, memory and
    ``hugepages-*``; its limits default its requests, as API defaulting does). ``spec.overhead`` is added and
    ``pods: 1``. Source: ``k8s.io/component-helpers/resource`` ``PodRequests``, which the kube-scheduler and
    Karpenter both call.

    Example: a container with only limits ``cpu: 1, memory: 1Gi, nvidia.com/gpu: 1``, a ``500m`` sidecar and a
    ``200m`` init container need ``cpu: 1500m, memory: 1Gi, nvidia.com/gpu: 1, pods: 1``.

    Returns:
        cpu in millicores, memory/ephemeral-storage in bytes, counts otherwise.

    Raises:
        NodewrightValidationError: an invalid quantity (path names the container).
    """
    running: Resources = {}
    for i, container in enumerate(spec.get("containers") or []):
        _accumulate(running, _container_requests(container, f"{path}.containers[{i}]"))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for i, container in enumerate(spec.get("initContainers") or []):
        req = _container_requests(container, f"{path}.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            _accumulate(sidecars, req)
            _maximize(init_peak, sidecars)
        else:
            candidate = dict(sidecars)
            _accumulate(candidate, req)
            _maximize(init_peak, candidate)
    total = dict(running)
    _accumulate(total, sidecars)
    _maximize(total, init_peak)
    pod_level = _container_requests(spec, path)
    for name, value in pod_level.items():
        if name in _POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
            total[name] = value
    _accumulate(total, parse_resource_list(spec.get("overhead"), f"{path}.overhead"))
    total[PODS] = total.get(PODS, 0) + 1
    return {k: v for k, v in total.items() if v > 0 or k == PODS}


def effective_limits(spec: Mapping[str, Any], path: str = "spec") -> Resources:
    """A pod spec's limits as Karpenter's ``resources.PodLimits`` computes them (its
    ``karpenter_nodes_total_*_limits`` metrics): containers summed, the larger of that and any init
    container per resource; cpu in millicores, bytes, counts.

    Raises:
        NodewrightValidationError: an invalid quantity (path names the container).
    """
    total: Resources = {}
    for i, container in enumerate(spec.get("containers") or []):
        _accumulate(total, parse_resource_list((container.get("resources") or {}).get("limits"),
                                               f"{path}.containers[{i}].resources.limits"))
    for i, container in enumerate(spec.get("initContainers") or []):
        _maximize(total, parse_resource_list((container.get("resources") or {}).get("limits"),
                                             f"{path}.initContainers[{i}].resources.limits"))
    return total


#: Resources a pod-level ``spec.resources`` may set (Kubernetes ``IsSupportedPodLevelResource``).
_POD_LEVEL_RESOURCES = frozenset({CPU, MEMORY})


def _container_requests(container: Mapping[str, Any], path: str) -> Resources:
    """``resources`` of a container (or of the pod spec): requests, a limit standing in for a missing request."""
    resources = container.get("resources") or {}
    limits = parse_resource_list(resources.get("limits"), f"{path}.resources.limits")
    requests = parse_resource_list(resources.get("requests"), f"{path}.resources.requests")
    return {**limits, **requests}


def _accumulate(into: Resources, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _maximize(into: Resources, other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _pod_affinity_terms(
    terms: Iterable[Mapping[str, Any]], labels: Mapping[str, str]
) -> tuple[PodAffinityTerm, ...]:
    out = []
    for term in terms:
        selector = LabelSelector.from_dict(term.get("labelSelector"))
        keys = term.get("matchLabelKeys") or []
        if selector is not None and keys:
            selector = selector.with_labels((k, labels[k]) for k in keys if k in labels)
        ns_selector = term.get("namespaceSelector")
        out.append(
            PodAffinityTerm(
                topology_key=str(term.get("topologyKey", "")),
                label_selector=selector,
                namespaces=tuple(sorted(str(n) for n in term.get("namespaces") or [])),
                all_namespaces=ns_selector is not None and not ns_selector,
            )
        )
    return tuple(out)


def _weighted(terms: Iterable[Mapping[str, Any]], labels: Mapping[str, str]) -> tuple[WeightedPodAffinityTerm, ...]:
    out = []
    for term in terms:
        (inner,) = _pod_affinity_terms([term.get("podAffinityTerm") or {}], labels)
        out.append(WeightedPodAffinityTerm(int(term.get("weight", 1)), inner))
    return tuple(out)


def affinity_from_dict(doc: Mapping[str, Any] | None, labels: Mapping[str, str], path: str = "") -> Affinity:
    """``spec.affinity`` as :class:`Affinity`.

    Raises:
        NodewrightValidationError: an invalid node selector term.
    """
    if not doc:
        return Affinity()
    node = doc.get("nodeAffinity") or {}
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    req_path = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    node_required = tuple(
        NodeSelectorTerm.from_dict(t, f"{req_path}[{i}]") for i, t in enumerate(required.get("nodeSelectorTerms") or [])
    )
    pref_path = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    node_preferred = tuple(
        PreferredSchedulingTerm(int(t.get("weight", 1)), NodeSelectorTerm.from_dict(t.get("preference") or {}, f"{pref_path}[{i}]"))
        for i, t in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
    )
    pa = doc.get("podAffinity") or {}
    paa = doc.get("podAntiAffinity") or {}
    return Affinity(
        node_required=node_required,
        node_preferred=node_preferred,
        pod_affinity_required=_pod_affinity_terms(pa.get("requiredDuringSchedulingIgnoredDuringExecution") or [], labels),
        pod_affinity_preferred=_weighted(pa.get("preferredDuringSchedulingIgnoredDuringExecution") or [], labels),
        pod_anti_affinity_required=_pod_affinity_terms(
            paa.get("requiredDuringSchedulingIgnoredDuringExecution") or [], labels
        ),
        pod_anti_affinity_preferred=_weighted(paa.get("preferredDuringSchedulingIgnoredDuringExecution") or [], labels),
    )


def spread_from_dict(doc: Mapping[str, Any], labels: Mapping[str, str], path: str = "") -> TopologySpreadConstraint:
    """One ``topologySpreadConstraints`` entry.

    Raises:
        NodewrightValidationError: missing/invalid ``maxSkew``, ``topologyKey`` or ``whenUnsatisfiable``.
    """
    try:
        max_skew = int(doc.get("maxSkew", 0))
    except (TypeError, ValueError):
        max_skew = 0
    if max_skew < 1:
        raise NodewrightValidationError(f"{path}.maxSkew", f"must be an integer >= 1, got {doc.get('maxSkew')!r}")
    if not doc.get("topologyKey"):
        raise NodewrightValidationError(f"{path}.topologyKey", "required field is missing")
    when = str(doc.get("whenUnsatisfiable", DO_NOT_SCHEDULE))
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise NodewrightValidationError(f"{path}.whenUnsatisfiable", f"must be DoNotSchedule or ScheduleAnyway, got {when!r}")
    selector = LabelSelector.from_dict(doc.get("labelSelector"))
    keys = doc.get("matchLabelKeys") or []
    if selector is not None and keys:
        selector = selector.with_labels((k, labels[k]) for k in keys if k in labels)
    min_domains = doc.get("minDomains")
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=str(doc["topologyKey"]),
        when_unsatisfiable=when,
        label_selector=selector,
        min_domains=int(min_domains) if min_domains is not None else None,
        node_affinity_policy=str(doc.get("nodeAffinityPolicy") or HONOR),
        node_taints_policy=str(doc.get("nodeTaintsPolicy") or IGNORE),
    )


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    ports = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                ports.append(HostPort(int(port["hostPort"]), str(port.get("protocol") or "TCP"), str(port.get("hostIP") or "")))
    return tuple(ports)


def pod_from_template(
    template: Mapping[str, Any],
    *,
    namespace: str,
    name: str,
    owner_kind: str = "",
    owner_name: str = "",
    uid: str = "",
    path: str = "spec.template",
) -> Pod:
    """Build a :class:`Pod` from a pod template (``{"metadata": ..., "spec": ...}``).

    Raises:
        NodewrightValidationError: invalid quantities, selector terms or spread constraints.
    """
    if not isinstance(template, Mapping):
        raise NodewrightValidationError(path, "expected a pod template mapping")
    meta = template.get("metadata") or {}
    spec_path = f"{path}.spec" if path else "spec"
    spec = template.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise NodewrightValidationError(spec_path, "expected a mapping")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    return Pod(
        namespace=namespace,
        name=name,
        uid=uid,
        labels=labels,
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        requests=effective_requests(spec, spec_path),
        node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
        affinity=affinity_from_dict(spec.get("affinity"), labels, f"{spec_path}.affinity"),
        tolerations=tuple(toleration_from_dict(t) for t in spec.get("tolerations") or []),
        topology_spread=tuple(
            spread_from_dict(t, labels, f"{spec_path}.topologySpreadConstraints[{i}]")
            for i, t in enumerate(spec.get("topologySpreadConstraints") or [])
        ),
        host_ports=_host_ports(spec),
        owner_kind=owner_kind,
        owner_name=owner_name,
        priority=int(spec.get("priority") or 0),
        node_name=str(spec.get("nodeName") or ""),
    )


def pod_from_manifest(doc: Mapping[str, Any]) -> Pod:
    """A ``v1/Pod`` manifest as a :class:`Pod` (namespace defaults to ``default``).

    The owner comes from the controlling ``metadata.ownerReferences`` entry.

    Raises:
        NodewrightValidationError: not a Pod, no name, or invalid fields.
    """
    if doc.get("kind") != "Pod":
        raise NodewrightValidationError("kind", f"expected 'Pod', got {doc.get('kind')!r}")
    meta = doc.get("metadata") or {}
    if not meta.get("name"):
        raise NodewrightValidationError("metadata.name", "required field is missing")
    owner_kind = owner_name = ""
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller", True):
            owner_kind, owner_name = str(ref.get("kind", "")), str(ref.get("name", ""))
            break
    pod = pod_from_template(
        {"metadata": meta, "spec": doc.get("spec") or {}},
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        owner_kind=owner_kind,
        owner_name=owner_name,
        uid=str(meta.get("uid") or ""),
        path="",
    )
    return pod


def _replicas(value: Any, path: str, default: int = 1) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NodewrightValidationError(path, f"must be a non-negative integer, got {value!r}")
    return value


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "ReplicationController", "Job", "CronJob", "Pod")


def pods_from_workload(doc: Mapping[str, Any]) -> list[Pod]:
    """The pods a workload manifest would create (see module docstring); [] for other kinds.

    Raises:
        NodewrightValidationError: a workload without a name or template, or with invalid fields.
    """
    kind = doc.get("kind")
    if kind == "Pod":
        return [pod_from_manifest(doc)]
    if kind not in WORKLOAD_KINDS:
        return []
    meta = doc.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise NodewrightValidationError("metadata.name", "required field is missing")
    namespace = str(meta.get("namespace") or "default")
    spec = doc.get("spec") or {}
    if kind == "CronJob":
        job_spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
        template, path = job_spec.get("template"), "spec.jobTemplate.spec.template"
        count = _job_pods(job_spec, "spec.jobTemplate.spec")
    elif kind == "Job":
        template, path = spec.get("template"), "spec.template"
        count = _job_pods(spec, "spec")
    else:
        template, path = spec.get("template"), "spec.template"
        count = _replicas(spec.get("replicas"), "spec.replicas")
    if not isinstance(template, Mapping):
        raise NodewrightValidationError(path, "required field is missing")
    if count == 0:
        return []
    first = pod_from_template(
        template, namespace=namespace, name=f"{name}-0", owner_kind=str(kind), owner_name=str(name), path=path
    )
    return [first] + [first.replica(f"{name}-{i}") for i in range(1, count)]


def _job_pods(spec: Mapping[str, Any], path: str) -> int:
    parallelism = _replicas(spec.get("parallelism"), f"{path}.parallelism")
    completions = spec.get("completions")
    if completions is None:
        return parallelism
    return min(parallelism, _replicas(completions, f"{path}.completions"))


def daemonset_pod(doc: Mapping[str, Any]) -> Pod:
    """The pod a ``DaemonSet`` runs on each node (for daemonset overhead).

    Raises:
        NodewrightValidationError: not a DaemonSet, no name/template, or invalid fields.
    """
    if doc.get("kind") != "DaemonSet":
        raise NodewrightValidationError("kind", f"expected 'DaemonSet', got {doc.get('kind')!r}")
    meta = doc.get("metadata") or {}
    if not meta.get("name"):
        raise NodewrightValidationError("metadata.name", "required field is missing")
    template = (doc.get("spec") or {}).get("template")
    if not isinstance(template, Mapping):
        raise NodewrightValidationError("spec.template", "required field is missing")
    return pod_from_template(
        template,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        owner_kind="DaemonSet",
        owner_name=str(meta["name"]),
    )
