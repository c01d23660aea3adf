"""CapacityBuffers resolved into virtual pods (Karpenter's ``capacitybuffer`` controller and ``virtualpods`` cache).

:func:`resolve` turns one CapacityBuffer object (validated through :meth:`ClusterModels.capacity_buffer
<nodewright.state.models.ClusterModels.capacity_buffer>`) plus the object it references into a
:class:`Resolution`: the desired chunk count, the status Karpenter writes, and ``replicas`` virtual
:class:`~nodewright.scheduling.Pod` models converted through :meth:`ClusterModels.pod
<nodewright.state.models.ClusterModels.pod>` like any pending pod (same requests, node selector, tolerations,
affinity, spread; LimitRange defaults applied as admission would).

Rules (Karpenter main ``pkg/controllers/capacitybuffer``, ``pkg/utils/apps/resolve.go``,
``pkg/state/virtualpods``):

- the template: ``podTemplateRef`` -> the PodTemplate's ``template``; ``scalableRef`` -> ``spec.template`` of the
  ``apps`` Deployment / StatefulSet / ReplicaSet of that name, both in the buffer's namespace. Missing: not ready,
  reason ``PodTemplateNotFound`` / ``ScalableRefNotFound``; another group or kind: ``ResolutionFailed``.
- the count: the *larger* of ``replicas`` and ``ceil(scalable spec.replicas x percentage / 100)`` (at least 1
  when both are positive; ``spec.replicas`` unset counts 1; ``percentage`` only with a ``scalableRef``); then
  ``limits`` cap it at ``min over resources of floor(limit / one chunk's request)`` (resources the chunk does not
  request are ignored); with neither ``replicas`` nor ``percentage``, the limits alone set it. Karpenter's code
  takes the maximum where the API comment says "minimum": nodewright follows the code.
- each virtual pod: name ``capacity-buffer-<buffer>-<i>`` (i from 1), uid ``<buffer uid>-<i>``, the template's
  labels, the annotations :data:`~nodewright.api.capacitybuffer.FAKE_POD_ANNOTATION` (``"true"``),
  buffer name and namespace, priority ``-2^31``; ``nodeName`` dropped and PVC-backed / ephemeral volumes (and
  their mounts) removed, since no claim will ever exist for them.

Bad input never raises: the resolution carries ``ready=False``, the reason and one message naming the object and
field (``CapacityBuffer default/web: spec.replicas: ...``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.admission import apply_limit_ranges
from nodewright.api import capacitybuffer as cb
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import Obj
from nodewright.quantities import parse_resource_list
from nodewright.scheduling import Pod

#: (kind, namespace, name) -> the object, or None when it does not exist. ``kind`` is ``PodTemplate``,
#: ``Deployment``, ``StatefulSet`` or ``ReplicaSet``.
Lookup = Callable[[str, str, str], Obj | None]


@dataclass
class Resolution:
    """One buffer, resolved.

    Attributes:
        key: ``namespace/name``.
        ready: ``ReadyForProvisioning`` is True (template found, count computed).
        reason, message: of the ``ReadyForProvisioning`` condition.
        replicas: chunks wanted (``status.replicas``; 0 when not ready).
        pod_template: ``status.podTemplateRef.name`` (podTemplateRef buffers), else None.
        pod_template_generation: ``status.podTemplateGeneration`` with it.
        pods: the virtual pods (``replicas`` of them when ready).
        ignored: input that has no effect, one sentence each (warned once by the controller).
        strategy: ``spec.provisioningStrategy`` with its default.
    """

    key: str
    ready: bool
    reason: str
    message: str
    replicas: int = 0
    pod_template: str | None = None
    pod_template_generation: int | None = None
    pods: list[Pod] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    strategy: str = cb.ACTIVE_CAPACITY


def is_virtual(pod: Pod) -> bool:
    """Whether ``pod`` is a CapacityBuffer virtual pod (never a real object: not bound, not evicted)."""
    return pod.annotations.get(cb.FAKE_POD_ANNOTATION) == "true"


def buffer_of(pod: Pod) -> str:
    """``namespace/name`` of the buffer a virtual pod belongs to (``""`` for a real pod)."""
    if not is_virtual(pod):
        return ""
    return f"{pod.annotations.get(cb.BUFFER_NAMESPACE_ANNOTATION, '')}/{pod.annotations.get(cb.BUFFER_NAME_ANNOTATION, '')}"


def percentage_replicas(scalable_replicas: int, percentage: int) -> int:
    """``ceil(scalable_replicas x percentage / 100)``, at least 1 when both are positive (Karpenter
    ``calculatePercentageReplicas``)."""
    out = math.ceil(scalable_replicas * percentage / 100)
    if out < 1 and percentage > 0 and scalable_replicas > 0:
        return 1
    return out


def limit_replicas(limits: Mapping[str, int], requests: Mapping[str, int]) -> int | None:
    """How many chunks of ``requests`` fit in ``limits`` (canonical integers: cpu millicores, bytes): the minimum
    of ``floor(limit / request)`` over the resources both name and the chunk requests (> 0); None when none
    overlaps (the limits then constrain nothing). The scheduler's implicit ``pods: 1`` is not a request."""
    counts = [limits[name] // request for name, request in requests.items()
              if name != "pods" and request > 0 and name in limits]
    return min(counts) if counts else None


def desired_replicas(spec: cb.CapacityBufferSpec, requests: Mapping[str, int], limits: Mapping[str, int],
                     scalable_replicas: int | None) -> int:
    """The chunk count of a buffer (Karpenter ``computeReplicas``; see module docstring).

    Args:
        spec: the buffer's spec.
        requests: one chunk's effective requests.
        limits: ``spec.limits`` parsed (empty when unset).
        scalable_replicas: the scalable's ``spec.replicas`` (None for a podTemplateRef buffer).
    """
    candidates = []
    if scalable_replicas is not None and spec.percentage is not None and scalable_replicas > 0:
        candidates.append(percentage_replicas(scalable_replicas, spec.percentage))
    if spec.replicas is not None:
        candidates.append(spec.replicas)
    desired = max(candidates, default=0)
    if limits:
        capped = limit_replicas(limits, requests)
        if capped is not None:
            return min(desired, capped) if candidates else capped
    return desired


def _sanitized(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The template's pod spec for a virtual pod (Karpenter ``sanitizeVirtualPodSpec``)."""
    out = {k: v for k, v in spec.items() if k != "nodeName"}
    volumes = spec.get("volumes") or []
    dropped = {str(v.get("name")) for v in volumes
               if isinstance(v, Mapping) and (v.get("persistentVolumeClaim") is not None or v.get("ephemeral") is not None)}
    if dropped:
        out["volumes"] = [v for v in volumes if not (isinstance(v, Mapping) and str(v.get("name")) in dropped)]
        for key in ("containers", "initContainers"):
            if isinstance(spec.get(key), list):
                out[key] = [{**c, "volumeMounts": [m for m in c.get("volumeMounts") or []
                                                   if str((m or {}).get("name")) not in dropped]}
                            if isinstance(c, Mapping) else c for c in spec[key]]
    out["priority"] = cb.VIRTUAL_POD_PRIORITY
    out.pop("priorityClassName", None)  # the priority is set; admission's lookup of the class does not apply
    return out


def virtual_pod_docs(buffer: Obj, template: Mapping[str, Any], replicas: int, version: str) -> list[Obj]:
    """``replicas`` Pod documents of ``buffer`` from the pod ``template`` (``{metadata, spec}``); ``version`` is
    their resourceVersion (same inputs, same version: converted once)."""
    meta = buffer.get("metadata") or {}
    name, namespace, uid = str(meta.get("name")), str(meta.get("namespace") or "default"), str(meta.get("uid") or "")
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    spec = _sanitized(template.get("spec") or {})
    annotations = {cb.FAKE_POD_ANNOTATION: "true", cb.BUFFER_NAME_ANNOTATION: name,
                   cb.BUFFER_NAMESPACE_ANNOTATION: namespace}
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"capacity-buffer-{name}-{i}", "namespace": namespace,
                          "uid": f"{uid or namespace + '/' + name}-{i}", "labels": labels,
                          "annotations": annotations, "resourceVersion": version},
             "spec": spec,
             "status": {"phase": "Pending", "conditions": [
                 {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
            for i in range(1, replicas + 1)]


def resolve(buffer: Obj, models: Any, lookup: Lookup, limitranges: Sequence[Obj] = ()) -> Resolution:
    """Resolve one CapacityBuffer object (see module docstring); never raises for bad input.

    Args:
        buffer: the CapacityBuffer object.
        models: the cluster's :class:`~nodewright.state.models.ClusterModels`.
        lookup: finds the referenced PodTemplate / workload.
        limitranges: the cluster's LimitRanges (their defaults apply to the template's containers).
    """
    meta = buffer.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    key = f"{namespace}/{meta.get('name')}"
    who = f"CapacityBuffer {key}"
    try:
        model: cb.CapacityBuffer = models.capacity_buffer(buffer)
    except NodewrightValidationError as err:
        return Resolution(key, False, cb.REASON_RESOLUTION_FAILED, f"{who}: {err}")
    spec = model.spec
    ignored: list[str] = []
    if spec.strategy != cb.ACTIVE_CAPACITY:
        return Resolution(key, False, cb.REASON_RESOLUTION_FAILED,
                          f"{who}: spec.provisioningStrategy: {spec.strategy!r} is not supported; Karpenter acts on "
                          f"{cb.ACTIVE_CAPACITY!r} only", strategy=spec.strategy)
    scalable_replicas: int | None = None
    pod_template: str | None = None
    generation: int | None = None
    if spec.pod_template_ref is not None:
        ref = spec.pod_template_ref.name
        obj = lookup("PodTemplate", namespace, ref)
        if obj is None:
            return Resolution(key, False, cb.REASON_POD_TEMPLATE_NOT_FOUND,
                              f"{who}: spec.podTemplateRef.name: PodTemplate {namespace}/{ref} not found")
        template = obj.get("template") or {}
        field_path = f"PodTemplate {namespace}/{ref} template"
        pod_template, generation = ref, int((obj.get("metadata") or {}).get("generation") or 0)
        if spec.percentage is not None:
            ignored.append(f"{who}: spec.percentage is ignored: it applies to a scalableRef only")
    elif spec.scalable_ref is not None:
        ref = spec.scalable_ref.name
        group, kind = spec.scalable_ref.api_group or "apps", spec.scalable_ref.kind
        if group != "apps" or kind not in cb.SCALABLE_KINDS:
            return Resolution(key, False, cb.REASON_RESOLUTION_FAILED,
                              f"{who}: spec.scalableRef: {group}/{kind} is not supported; want apps "
                              f"{', '.join(cb.SCALABLE_KINDS)}")
        obj = lookup(kind, namespace, ref)
        if obj is None:
            return Resolution(key, False, cb.REASON_SCALABLE_REF_NOT_FOUND,
                              f"{who}: spec.scalableRef.name: {kind} {namespace}/{ref} not found")
        workload = obj.get("spec") or {}
        template = workload.get("template") or {}
        field_path = f"{kind} {namespace}/{ref} spec.template"
        raw = workload.get("replicas")
        scalable_replicas = raw if isinstance(raw, int) and not isinstance(raw, bool) else 1
    else:
        return Resolution(key, False, cb.REASON_RESOLUTION_FAILED,
                          f"{who}: spec: neither podTemplateRef nor scalableRef is set")
    try:
        limits = parse_resource_list(spec.limits, "spec.limits")
    except NodewrightValidationError as err:
        return Resolution(key, False, cb.REASON_RESOLUTION_FAILED, f"{who}: {err}")
    version = f"{meta.get('resourceVersion')}.{(obj.get('metadata') or {}).get('resourceVersion')}"
    probe = virtual_pod_docs(buffer, template, 1, version)[0]
    probe = apply_limit_ranges([*limitranges, probe])[-1]
    chunk = models.pod(probe, pending=True)
    if chunk is None:
        error = models.pod_error(probe, pending=True)
        return Resolution(key, False, cb.REASON_RESOLUTION_FAILED, f"{who}: {field_path}: {error}")
    replicas = desired_replicas(spec, chunk.requests, limits, scalable_replicas)
    docs = virtual_pod_docs(buffer, template, replicas, version)
    pods = [chunk] if replicas >= 1 else []
    for doc in docs[1:]:
        pod = models.pod(apply_limit_ranges([*limitranges, doc])[-1], pending=True)
        if pod is not None:
            pods.append(pod)
    return Resolution(key, True, cb.REASON_RESOLVED, "Pod template resolved successfully", replicas=replicas,
                      pod_template=pod_template, pod_template_generation=generation, pods=pods, ignored=ignored,
                      strategy=spec.strategy)
