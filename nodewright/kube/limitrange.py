"""LimitRange defaulting of pod containers, as kube's LimitRanger admission plugin does on pod create.

Source: Kubernetes ``plugin/pkg/admission/limitranger`` (``mergePodResourceRequirements``) and the v1
LimitRange defaults (``SetDefaults_LimitRangeItem``). For each ``type: Container`` item of the LimitRanges of
the pod's namespace, in order:

* ``default`` (a limit; when absent, ``max`` stands in) fills each container's missing ``limits``;
* ``defaultRequest`` (when absent, ``default``, else ``max``) fills each container's missing ``requests``.

Containers and init containers alike; a value the pod already has is never changed (a container's own limit
is its request when it has none, as the API server's defaulting does before admission); the first LimitRange
that gives a default for a resource wins. Quantities are copied as written (no parsing here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodewright.kube.objects import namespace_of


def _defaults(limitranges: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(default limits, default requests) over the ``Container`` items, first one winning per resource."""
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    for lr in limitranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if not isinstance(item, Mapping) or item.get("type") != "Container":
                continue
            default = dict(item.get("max") or {}) | dict(item.get("default") or {})
            default_request = default | dict(item.get("defaultRequest") or {})
            for name, value in default.items():
                limits.setdefault(name, value)
            for name, value in default_request.items():
                requests.setdefault(name, value)
    return limits, requests


def for_namespace(limitranges: Iterable[Mapping[str, Any]], namespace: str) -> list[Mapping[str, Any]]:
    """The LimitRanges of ``namespace`` (a missing namespace reads as ``default``)."""
    return [lr for lr in limitranges if (namespace_of(lr) or "default") == namespace]


def apply_limit_ranges(pod_spec: Mapping[str, Any], limitranges: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A copy of ``pod_spec`` whose containers carry the LimitRange defaults (see module docstring).

    ``limitranges`` must already be those of the pod's namespace (:func:`for_namespace`). Returns the spec
    unchanged (a shallow copy) when no LimitRange gives a default.
    """
    limits, requests = _defaults(limitranges)
    spec = dict(pod_spec)
    if not (limits or requests):
        return spec
    for field in ("containers", "initContainers"):
        containers = spec.get(field)
        if not isinstance(containers, list):
            continue
        out = []
        for container in containers:
            if not isinstance(container, Mapping):
                out.append(container)
                continue
            resources = dict(container.get("resources") or {})
            own_limits = dict(resources.get("limits") or {})
            resources["limits"] = limits | own_limits
            # The API server's defaulting has already copied a container's own limits into missing requests.
            resources["requests"] = requests | own_limits | dict(resources.get("requests") or {})
            out.append({**container, "resources": {k: v for k, v in resources.items() if v}})
        spec[field] = out
    return spec
