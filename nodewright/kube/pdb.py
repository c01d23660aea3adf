"""PodDisruptionBudget arithmetic: may this pod be evicted now?

Follows the Kubernetes disruption controller: ``expected`` pods are those the budget selects, ``healthy``
are the selected pods that are bound, not terminating, not finished and not reported un-Ready;
``minAvailable``/``maxUnavailable`` percentages round up
(https://kubernetes.io/docs/tasks/run-application/configure-pdb/#rounding-logic-when-specifying-percentages).
An eviction is allowed when ``healthy - desiredHealthy > 0`` for every budget selecting the pod.
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
