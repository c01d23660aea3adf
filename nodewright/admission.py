"""What the API server's admission does to pods before any scheduler sees them, for manifests read from files.

``RuntimeClass`` (the ``RuntimeClass`` admission plugin, Kubernetes "Pod Overhead" and "Runtime Class" docs,
:func:`apply_runtime_class`): a pod naming a RuntimeClass gets its ``overhead.podFixed`` as ``spec.overhead``
(counted on top of the containers' requests, as kube-scheduler and Karpenter's ``RequestsForPods`` do), its
``scheduling.nodeSelector`` merged into the pod's and its ``scheduling.tolerations`` added.

``LimitRange`` defaulting (the ``LimitRanger`` admission plugin, Kubernetes "Limit Ranges" docs), in
the API server's order: a container's unset requests default to its own explicit limits (pod defaulting); then,
in the LimitRange's namespace, unset limits get ``default`` and unset requests get ``defaultRequest`` (which itself
defaults to ``default``). Init containers are defaulted the same way. Only ``type: Container``
limits apply; ``min``/``max``/ratio checks (which reject pods) are not modelled.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from nodewright.errors import NodewrightValidationError

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


def runtime_classes(objs: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """``node.k8s.io/v1`` RuntimeClass objects by name (cluster-scoped)."""
    return {str((o.get("metadata") or {}).get("name") or ""): o for o in objs}


def apply_runtime_class(spec: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
    """A pod ``spec`` as the RuntimeClass admission plugin leaves it (module docstring); ``spec`` itself when it
    names no RuntimeClass, or one not in ``classes`` (the API server would have refused such a pod: the caller
    reports it, see :func:`missing_runtime_class`). A pod that already carries ``spec.overhead`` was admitted
    already and keeps it.

    Raises:
        NodewrightValidationError: the pod's ``nodeSelector`` sets a key of the RuntimeClass's
            ``scheduling.nodeSelector`` to another value (the plugin rejects the pod).
    """
    name = spec.get("runtimeClassName")
    rc = classes.get(str(name)) if name else None
    if rc is None:
        return spec
    out = dict(spec)
    fixed = (rc.get("overhead") or {}).get("podFixed")
    if isinstance(fixed, Mapping) and fixed and not spec.get("overhead"):
        out["overhead"] = dict(fixed)
    scheduling = rc.get("scheduling") or {}
    selector = scheduling.get("nodeSelector")
    if isinstance(selector, Mapping) and selector:
        own = dict(spec.get("nodeSelector") or {})
        for key, value in selector.items():
            if key in own and own[key] != value:
                raise NodewrightValidationError(
                    f"spec.nodeSelector.{key}",
                    f"{own[key]!r} conflicts with RuntimeClass {name!r} scheduling.nodeSelector {value!r}")
            own[key] = value
        out["nodeSelector"] = own
    tolerations = scheduling.get("tolerations")
    if isinstance(tolerations, list) and tolerations:
        own_tolerations = list(spec.get("tolerations") or [])
        out["tolerations"] = own_tolerations + [t for t in tolerations if t not in own_tolerations]
    return out


def missing_runtime_class(spec: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The ``runtimeClassName`` of a not yet admitted pod ``spec`` (no ``spec.overhead``) that names no object in
    ``classes``; None otherwise."""
    name = spec.get("runtimeClassName")
    return str(name) if name and str(name) not in classes and not spec.get("overhead") else None
