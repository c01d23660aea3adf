"""What the API server's admission does to pods before any scheduler sees them, for manifests read from files.

Only ``LimitRange`` defaulting for now (the ``LimitRanger`` admission plugin, Kubernetes "Limit Ranges" docs), in
the API server's order: a container's unset requests default to its own explicit limits (pod defaulting); then,
in the LimitRange's namespace, unset limits get ``default`` and unset requests get ``defaultRequest`` (which itself
defaults to ``default``). Init containers are defaulted the same way. Only ``type: Container``
limits apply; ``min``/``max``/ratio checks (which reject pods) are not modelled.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

#: Where the pod spec sits in each workload kind.
_POD_SPEC_PATHS: Mapping[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def _namespace(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return str(namespace) if namespace else "default"


def _container_defaults(limit_ranges: Sequence[Mapping[str, Any]]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """namespace -> (default limits, default requests) of its ``type: Container`` limits (first LimitRange wins
    per resource, as the plugin applies them in order)."""
    out: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for lr in limit_ranges:
        spec = lr.get("spec")
        limits = spec.get("limits") if isinstance(spec, dict) else None
        default_limits, default_requests = out.setdefault(_namespace(lr), ({}, {}))
        for item in limits if isinstance(limits, list) else []:
            if not isinstance(item, dict) or item.get("type", "Container") != "Container":
                continue
            for target, key in ((default_limits, "default"), (default_requests, "defaultRequest")):
                values = item.get(key)
                for name, value in (values.items() if isinstance(values, dict) else ()):
                    target.setdefault(str(name), value)
    return out


def apply_limit_ranges(docs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``docs`` with LimitRange defaults applied to the containers of every workload in a LimitRange's namespace.

    Documents that change are copied (the inputs are never mutated); the others are returned as the same objects.
    Malformed shapes are left alone for the converters to report.
    """
    defaults = _container_defaults([d for d in docs if d.get("kind") == "LimitRange"])
    if not any(lim or req for lim, req in defaults.values()):
        return list(docs)
    out: list[dict[str, Any]] = []
    for doc in docs:
        path = _POD_SPEC_PATHS.get(str(doc.get("kind")))
        ns_defaults = defaults.get(_namespace(doc)) if path else None
        if not ns_defaults or not path:
            out.append(doc)
            continue
        changed = copy.deepcopy(doc)
        spec: Any = changed
        for part in path:
            spec = spec.get(part) if isinstance(spec, dict) else None
        if not isinstance(spec, dict):
            out.append(doc)
            continue
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or [] if isinstance(spec.get(key), list) else []:
                if isinstance(container, dict):
                    _default_container(container, *ns_defaults)
        out.append(changed if changed != doc else doc)
    return out


def _default_container(container: dict[str, Any], default_limits: Mapping[str, Any],
                       default_requests: Mapping[str, Any]) -> None:
    resources = container.get("resources")
    if resources is None:
        resources = container["resources"] = {}
    if not isinstance(resources, dict):
        return
    limits = resources.get("limits") if isinstance(resources.get("limits"), dict) else None
    requests = resources.get("requests") if isinstance(resources.get("requests"), dict) else None
    if (resources.get("limits") is not None and limits is None) or (resources.get("requests") is not None and requests is None):
        return
    own_limits = dict(limits or {})
    requests = {**own_limits, **(requests or {})}  # API defaulting first: requests default to explicit limits
    limits = {**default_limits, **own_limits}
    # LimitRange defaulting: an unset defaultRequest is its default; then LimitRanger fills unset requests.
    for name, value in {**default_limits, **default_requests}.items():
        requests.setdefault(name, value)
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
