"""An existing node during one scheduling run (Karpenter's ``existingnode.go``).

:class:`ExistingNodeState` wraps the input :class:`~nodewright.scheduling.nodes.ExistingNode` (a registered node
or an in-flight NodeClaim) with what the run changes: the room left per resource, the host ports taken and the
pods placed on it. The room it starts with keeps space for the DaemonSet pods that should run on it but do not
yet (:func:`remaining_daemon_requests`). :meth:`ExistingNodeState.can_add` checks one pod of a class (resources,
taints, node requirements, host ports, CSI volume limits, topology) without changing anything;
:meth:`ExistingNodeState.add` places it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nodewright.quantities import Resources, add
from nodewright.scheduling.nodes import ExistingNode
from nodewright.scheduling.pods import HostPort, Pod
from nodewright.scheduling.preferences import PodClass
from nodewright.scheduling.taints import untolerated
from nodewright.scheduling.topology import Topology, node_admits


def remaining_daemon_requests(node: ExistingNode, daemon_requests: Resources) -> Resources:
    """The room ``node`` keeps for DaemonSet pods not running on it yet: ``daemon_requests`` (summed requests of
    the DaemonSets that run on its labels and taints) minus the requests of the DaemonSet pods bound to it, per
    resource, never below 0 (Karpenter v1.14 ``NewExistingNode``: a DaemonSet pod that landed unexpectedly, e.g. on
    a label added later, must not give room back). Applies to every existing node, initialized or in flight."""
    running: Resources = {}
    for pod in node.pods:
        if pod.is_daemonset:
            running = add(running, pod.requests)
    return {name: max(0, qty - running.get(name, 0)) for name, qty in daemon_requests.items()}


class ExistingNodeState:
    """An existing node during the run.

    Attributes:
        node: the input node.
        index: position in the run's node order (initialized nodes first, then by name).
        free: room left per dimension of the run (allocatable - bound pods - the requests of DaemonSets that
            should run on it but do not yet (:func:`remaining_daemon_requests` of ``daemon_requests``) - pods
            placed in this run).
        labels: the node's labels (its topology domains).
        taints: taints that block placement (startup taints ignored while the node is not initialized).
        ports: host ports taken by bound and placed pods, and by the DaemonSet pods it will run (in flight).
        placed: pods this run places on it, in order.
        volumes: CSI driver -> claims (``namespace/name``) attached by bound and placed pods, counted against
            the node's :attr:`~nodewright.scheduling.nodes.ExistingNode.volume_limits`.
    """

    __slots__ = ("node", "index", "free", "labels", "taints", "ports", "placed", "volumes")

    def __init__(
        self,
        node: ExistingNode,
        index: int,
        dims: Sequence[str],
        daemon_requests: Resources,
        pending_ports: Sequence[HostPort] = (),
    ) -> None:
        self.node = node
        self.index = index
        used = node.requested()
        pending = remaining_daemon_requests(node, daemon_requests)
        self.free = [node.allocatable.get(d, 0) - used.get(d, 0) - pending.get(d, 0) for d in dims]
        self.labels = node.labels
        self.taints = node.scheduling_taints()
        self.ports: list[HostPort] = [p for pod in node.pods for p in pod.host_ports]
        self.ports.extend(pending_ports)
        self.placed: list[Pod] = []
        self.volumes: dict[str, set[str]] = {}
        for pod in node.pods:
            self._attach(pod)

    def _attach(self, pod: Pod) -> None:
        for driver, claim in pod.volumes:
            self.volumes.setdefault(driver, set()).add(claim)

    def exceeds_volume_limits(self, pod: Pod) -> bool:
        """Whether ``pod``'s CSI volumes, with those already attached, pass a driver's attach limit (Karpenter
        ``VolumeUsage.ExceedsLimits``: a claim shared with attached pods counts once; no limit without a
        CSINode count for the driver)."""
        limits = self.node.volume_limits
        if not pod.volumes or not limits:
            return False
        new: dict[str, set[str]] = {}
        for driver, claim in pod.volumes:
            if driver in limits and claim not in self.volumes.get(driver, ()):
                new.setdefault(driver, set()).add(claim)
        return any(len(self.volumes.get(d, ())) + len(c) > limits[d] for d, c in new.items())

    def can_add(self, cls: PodClass) -> tuple[dict[str, str] | None, bool]:
        """Whether one pod of ``cls`` fits: (the topology domains it would count in, or None when it does not;
        True when it never will, since the node only fills up and counts only grow)."""
        vec = cls.vec
        free = self.free
        for i, v in enumerate(vec):
            if v > free[i]:
                return None, True
        if untolerated(cls.tolerations, self.taints) is not None:
            return None, True
        if not cls.reqs.satisfied_by_labels(self.labels):
            return None, True
        if cls.rep.host_ports and any(a.conflicts(b) for a in cls.rep.host_ports for b in self.ports):
            return None, True
        if cls.pods and self.exceeds_volume_limits(cls.pods[-1]):
            return None, False  # another pod of the class may share the claims already attached
        domains: dict[str, str] = {}
        if cls.owned or cls.inverse or cls.selecting:
            ok, permanent = node_admits(cls, self.labels, domains)
            if not ok:
                return None, permanent
        return domains, False

    def add(self, cls: PodClass, domains: Mapping[str, str], topology: Topology) -> None:
        """Place the next pending pod of ``cls`` (popped from ``cls.pods``) after :meth:`can_add` said yes, and
        count it in ``domains``."""
        free = self.free
        for i, v in enumerate(cls.vec):
            free[i] -= v
        pod = cls.pods.pop()
        self.placed.append(pod)
        self._attach(pod)
        self.ports.extend(cls.rep.host_ports)
        if domains:
            labels, taints = self.labels, self.node.taints
            topology.record(cls, domains, lambda f: f.matches_node(labels, taints))
