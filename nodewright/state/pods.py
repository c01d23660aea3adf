"""Pod predicates the controllers share, following Karpenter's ``pkg/utils/pod`` semantics.

* provisionable: pending (``PodScheduled=False`` with reason ``Unschedulable``), not bound, not
  terminating, not finished, not owned by a DaemonSet, not gated (``spec.schedulingGates``).
* evictable during drain: everything except DaemonSet pods, mirror (static) pods and finished pods.
* reschedulable (pods of a leaving Node that need new capacity): see :func:`is_reschedulable`.
* ``karpenter.sh/do-not-disrupt: "true"`` on a pod blocks graceful drain of its node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodewright.api import labels as L
from nodewright.kube.objects import annotations_of, is_deleting, meta

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def owner_kinds(pod: Mapping[str, Any]) -> list[str]:
    """Kinds of the pod's controller owners."""
    return [str(o.get("kind")) for o in meta(pod).get("ownerReferences") or []]


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    """Owned by a DaemonSet."""
    return "DaemonSet" in owner_kinds(pod)


def daemonset_owner(pod: Mapping[str, Any]) -> str:
    """Name of the DaemonSet owning the pod, or ``""``."""
    for owner in meta(pod).get("ownerReferences") or []:
        if owner.get("kind") == "DaemonSet":
            return str(owner.get("name") or "")
    return ""


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    """A static pod mirrored by the kubelet (``kubernetes.io/config.mirror`` annotation or Node owner)."""
    return MIRROR_ANNOTATION in annotations_of(pod) or "Node" in owner_kinds(pod)


def is_terminal(pod: Mapping[str, Any]) -> bool:
    """Phase Succeeded or Failed."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def node_name(pod: Mapping[str, Any]) -> str:
    """``spec.nodeName`` or ``""``."""
    return str((pod.get("spec") or {}).get("nodeName") or "")


def nominated_node_name(pod: Mapping[str, Any]) -> str:
    """``status.nominatedNodeName`` (set by kube-scheduler after preemption, or by nodewright's nomination
    controller, KEP-5278) or ``""``."""
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


def is_unschedulable(pod: Mapping[str, Any]) -> bool:
    """``PodScheduled=False`` with reason ``Unschedulable`` (kube-scheduler gave up on it)."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            return cond.get("status") == "False" and cond.get("reason") == "Unschedulable"
    return False


def is_provisionable(pod: Mapping[str, Any]) -> bool:
    """A pod Karpenter would provision capacity for (see module docstring)."""
    return (
        is_unschedulable(pod)
        and not node_name(pod)
        and not is_deleting(pod)
        and not is_terminal(pod)
        and not is_daemonset_pod(pod)
        and not (pod.get("spec") or {}).get("schedulingGates")
    )


def is_do_not_disrupt(pod: Mapping[str, Any]) -> bool:
    """``karpenter.sh/do-not-disrupt: "true"`` (or the v1alpha5 ``karpenter.sh/do-not-evict``)."""
    ann = annotations_of(pod)
    return ann.get(L.DO_NOT_DISRUPT) == "true" or ann.get(L.V1ALPHA5_DO_NOT_EVICT) == "true"


def needs_eviction(pod: Mapping[str, Any]) -> bool:
    """A pod the drain must evict: not DaemonSet-owned, not mirror, not finished, not already going."""
    return not (is_daemonset_pod(pod) or is_mirror_pod(pod) or is_terminal(pod) or is_deleting(pod))


def holds_node(pod: Mapping[str, Any]) -> bool:
    """A bound pod that still takes room on its node and counts toward topology: neither Succeeded/Failed nor
    terminating (Karpenter ignores such pods for topology, ``IgnoredForTopology``; issue 14 frees their
    resources too, since they are on their way out)."""
    return not (is_terminal(pod) or is_deleting(pod))


def is_reschedulable(pod: Mapping[str, Any]) -> bool:
    """A pod of a leaving Node that needs a new home (Karpenter ``pod.IsReschedulable``): active (not
    Succeeded/Failed, not terminating) -- or terminating but owned by a StatefulSet, whose replacement keeps the
    name and is only created once the old pod is gone -- and neither DaemonSet-owned nor a mirror pod."""
    active = not (is_terminal(pod) or is_deleting(pod))
    statefulset_going = is_deleting(pod) and "StatefulSet" in owner_kinds(pod)
    return (active or statefulset_going) and not (is_daemonset_pod(pod) or is_mirror_pod(pod))


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name``."""
    m = meta(pod)
    return f"{m.get('namespace') or 'default'}/{m.get('name')}"
