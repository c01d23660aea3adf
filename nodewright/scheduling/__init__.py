"""nodewright.scheduling: which nodes to launch for pending pods (the pure scheduling core).

Stable entry points (controllers, disruption, the simulator and tests use only these):

- :class:`Pod`, :func:`pod_from_manifest`, :func:`pods_from_workload`, :func:`daemonset_pod` -- pods from
  Kubernetes dicts (cpu millicores, memory bytes, ``pods: 1``). Objects of a cluster are converted through
  :mod:`nodewright.state.models` (cached), which calls these.
- :class:`ExistingNode`, :func:`node_from_manifest` -- nodes already in the cluster (and in-flight NodeClaims
  with ``initialized=False``).
- :class:`NodePoolSpec`, :func:`nodepool_spec_from_model` -- NodePools (requirements, taints, limits, weight,
  target utilization, daemonset overhead).
- :func:`schedule` -> :class:`SchedulingResult` (:class:`NodeClaimPlan` per new NodeClaim).
- :class:`Requirements`, :class:`Requirement`, :class:`Taint`, :class:`Toleration` -- the algebra.

Everything here is pure and synchronous: no client, no clock, no I/O, no logging (decisions carry their
sentences as events).
"""

from nodewright.scheduling.nodeclaimtemplate import MAX_INSTANCE_TYPES
from nodewright.scheduling.nodepools import (
    TARGET_UTILIZATION_ANNOTATION,
    NodePoolSpec,
    daemonset_overhead,
    nodepool_spec_from_model,
)
from nodewright.scheduling.nodes import ExistingNode, node_from_manifest
from nodewright.scheduling.pods import (
    Affinity,
    HostPort,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    daemonset_pod,
    pod_from_manifest,
    pod_from_template,
    pods_from_workload,
)
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.result import NodeClaimPlan, SchedulingEvent, SchedulingResult
from nodewright.scheduling.scheduler import schedule
from nodewright.scheduling.taints import Taint, Toleration
from nodewright.selectors import LabelSelector

__all__ = [
    "MAX_INSTANCE_TYPES",
    "TARGET_UTILIZATION_ANNOTATION",
    "Affinity",
    "ExistingNode",
    "HostPort",
    "LabelSelector",
    "NodeClaimPlan",
    "NodePoolSpec",
    "NodeSelectorTerm",
    "Pod",
    "PodAffinityTerm",
    "PreferredSchedulingTerm",
    "Requirement",
    "Requirements",
    "SchedulingEvent",
    "SchedulingResult",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "WeightedPodAffinityTerm",
    "daemonset_overhead",
    "daemonset_pod",
    "node_from_manifest",
    "nodepool_spec_from_model",
    "pod_from_manifest",
    "pod_from_template",
    "pods_from_workload",
    "schedule",
]
