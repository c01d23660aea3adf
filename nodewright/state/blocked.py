"""Pods that are valid but that no new node can serve now: the provisioner reports them unschedulable with a
reason instead of ignoring them as invalid.

* Volumes (:class:`nodewright.state.models.VolumeError`): a claim no new node can use yet.
* Dynamic Resource Allocation (:class:`DRAError`): a pod that references a ResourceClaim, in ``spec.resourceClaims``
  or in any container's or init container's ``resources.claims`` (Karpenter ``pod.HasDRARequirements``). Karpenter
  v1.14 runs with ``IGNORE_DRA_REQUESTS=true`` by default: its scheduler refuses such a pod with "pod has Dynamic
  Resource Allocation requirements that are not yet supported by Karpenter" and launches nothing for it, and a
  DaemonSet whose pods have DRA requirements adds no overhead (``scheduler.go`` ``add``,
  ``buildDaemonOverheadGroups``). nodewright has no DRA allocator (ResourceSlices are not modelled), so it always
  behaves as that default; a pod already bound to a node keeps counting there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodewright.errors import NodewrightValidationError

#: The unschedulable reason of a pod with DRA requirements (Karpenter's wording, nodewright's subject).
DRA_REASON = ("pod has Dynamic Resource Allocation requirements (resource claims) that are not supported: "
              "no node is launched for it (as Karpenter v1.14 with IGNORE_DRA_REQUESTS=true)")


class PodBlocked(NodewrightValidationError):
    """A pod no new node can serve now: unschedulable for this reason, not invalid."""


class DRAError(PodBlocked):
    """A pending pod with Dynamic Resource Allocation requirements (module docstring); raised as
    ``DRAError("spec.resourceClaims", DRA_REASON)``."""


def has_dra_requirements(spec: Mapping[str, Any]) -> bool:
    """Whether a pod ``spec`` references a ResourceClaim (pod-level, or in a container's ``resources.claims``)."""
    if spec.get("resourceClaims"):
        return True
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else []:
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if isinstance(resources, Mapping) and resources.get("claims"):
                return True
    return False
