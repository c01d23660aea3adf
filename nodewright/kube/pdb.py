"""PodDisruptionBudget arithmetic: may this pod be evicted now?

Follows the Kubernetes disruption controller: ``expected`` pods are those the budget selects, ``healthy``
are the selected pods that are bound, not terminating, not finished and not reported un-Ready;
``minAvailable``/``maxUnavailable`` percentages round up
(https://kubernetes.io/docs/tasks/run-application/configure-pdb/#rounding-logic-when-specifying-percentages).
An eviction is allowed when ``healthy - desiredHealthy > 0`` for every budget selecting the pod, and never for a
pod that more than one budget selects (:func:`selecting_budgets`, :func:`overlapping_budgets`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from nodewright.kube.objects import is_deleting, labels_of, namespace_of
from nodewright.selectors import LabelSelector, selects


def _scaled(value: Any, expected: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * expected / 100)
    return int(value)


def pod_is_healthy(pod: Mapping[str, Any]) -> bool:
    """Bound, not terminating, not Succeeded/Failed, and not reported ``Ready=False``."""
    if is_deleting(pod) or not (pod.get("spec") or {}).get("nodeName"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "False":
            return False
    return True


def _healthy_and_desired(pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    spec = pdb.get("spec") or {}
    selector = LabelSelector.from_dict(spec.get("selector"))
    selected = [p for p in pods if not is_deleting(p) and selects(selector, labels_of(p))]
    expected = len(selected)
    healthy = sum(1 for p in selected if pod_is_healthy(p))
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = expected - _scaled(spec["maxUnavailable"], expected)
    else:
        desired = 0
    return healthy, desired


def disruptions_allowed(pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> int:
    """How many of the budget's pods may be evicted now (never below 0).

    ``pods`` are all pods of the budget's namespace; the budget's ``spec.selector`` picks its own.
    """
    healthy, desired = _healthy_and_desired(pdb, pods)
    return max(0, healthy - desired)


def blocking_budget(
    pod: Mapping[str, Any], pdbs: Iterable[Mapping[str, Any]], namespace_pods: Iterable[Mapping[str, Any]]
) -> str | None:
    """Name of a PodDisruptionBudget that forbids evicting ``pod`` now, or None when eviction is allowed.

    A healthy pod needs ``healthy - desiredHealthy > 0``; an un-healthy pod may be evicted while the
    application is not otherwise disrupted, ``healthy >= desiredHealthy`` (Kubernetes' default
    ``unhealthyPodEvictionPolicy: IfHealthyBudget``).
    """
    pods = list(namespace_pods)
    ns = namespace_of(pod)
    for pdb in pdbs:
        if namespace_of(pdb) != ns:
            continue
        if not selects((pdb.get("spec") or {}).get("selector"), labels_of(pod)):
            continue
        healthy, desired = _healthy_and_desired(pdb, pods)
        allowed = healthy - desired > 0 if pod_is_healthy(pod) else healthy >= desired
        if not allowed:
            return str((pdb.get("metadata") or {}).get("name"))
    return None


def _blocks_by_spec(pdb: Mapping[str, Any]) -> bool:
    """``maxUnavailable: 0`` or ``"0%"``, or ``minAvailable: "100%"``: no eviction is ever allowed."""
    spec = pdb.get("spec") or {}
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    return max_unavailable in (0, "0%") or min_available == "100%"


#: Why the Eviction API refuses a pod several budgets select (Kubernetes ``pkg/registry/core/pod/storage/eviction.go``
#: answers 500 "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support",
#: whatever the budgets allow).
MULTIPLE_BUDGETS = "more than one PodDisruptionBudget selects it, and the Eviction API refuses such pods"


def selecting_budgets(pod: Mapping[str, Any], pdbs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The budgets of ``pod``'s namespace whose ``spec.selector`` selects it, in input order (the Eviction API's
    lookup: more than one of them and it refuses the eviction)."""
    ns = namespace_of(pod)
    return [b for b in pdbs if namespace_of(b) == ns and selects((b.get("spec") or {}).get("selector"), labels_of(pod))]


def overlapping_budgets(pdbs: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """``namespace/name`` of every pod of ``pods`` that more than one of ``pdbs`` selects -> those budgets' names
    (sorted). Such a pod can never be evicted (:data:`MULTIPLE_BUDGETS`), so a voluntary disruption of its node
    could never finish its drain: the disruption view marks those nodes (Karpenter ``pdb.Limits``: a pod whose
    eviction is refused blocks its candidate)."""
    budgets = list(pdbs)
    out: dict[str, tuple[str, ...]] = {}
    if len(budgets) < 2:
        return out
    for pod in pods:
        selecting = selecting_budgets(pod, budgets)
        if len(selecting) > 1:
            key = f"{namespace_of(pod) or 'default'}/{(pod.get('metadata') or {}).get('name')}"
            out[key] = tuple(sorted(str((b.get("metadata") or {}).get("name")) for b in selecting))
    return out


def fully_blocking_budget(pod: Mapping[str, Any], pdbs: Iterable[Mapping[str, Any]]) -> str | None:
    """Name of a PodDisruptionBudget that will never let ``pod`` be evicted, or None (Karpenter
    ``pdb.Limits.isFullyBlocked``, which decides whether the pods of a deleting node need new capacity).

    Blocking: a selecting budget whose spec forbids every eviction (``maxUnavailable: 0``/``"0%"``,
    ``minAvailable: "100%"``), or more than one selecting budget (the Eviction API refuses those). A budget with
    ``unhealthyPodEvictionPolicy: AlwaysAllow`` lets a pod reported ``Ready=False`` go. Only the spec counts, not
    the disruptions allowed now: a budget at its limit frees up as the application recovers.
    """
    selecting = selecting_budgets(pod, pdbs)
    if len(selecting) > 1:
        return ", ".join(sorted(str((b.get("metadata") or {}).get("name")) for b in selecting))
    not_ready = any(c.get("type") == "Ready" and c.get("status") == "False"
                    for c in (pod.get("status") or {}).get("conditions") or [])
    for budget in selecting:
        if not_ready and (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            continue
        if _blocks_by_spec(budget):
            return str((budget.get("metadata") or {}).get("name"))
    return None
