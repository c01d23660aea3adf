"""CapacityBuffer (``autoscaling.x-k8s.io/v1beta1``): headroom held as virtual pods (Karpenter's alpha support).

The API is SIG Autoscaling's (``k8s.io/autoscaler/cluster-autoscaler/apis/capacitybuffer``), which Karpenter
copies into ``pkg/apis/autoscaling/v1beta1`` and ships as a CRD in its chart; these models follow that copy
(Karpenter main, 2026-08-20) field for field:

``spec``
    ``provisioningStrategy`` (default ``buffer.x-k8s.io/active-capacity``, the only one Karpenter acts on),
    exactly one of ``podTemplateRef: {name}`` (a PodTemplate in the buffer's namespace) or ``scalableRef:
    {apiGroup, kind, name}`` (an ``apps`` Deployment, StatefulSet or ReplicaSet there), ``replicas`` (>= 0),
    ``percentage`` (>= 0, of the scalable's ``spec.replicas``; only with ``scalableRef``) and ``limits`` (a
    ResourceList capping the chunks by their summed requests). CEL as upstream: not both refs, and a
    ``podTemplateRef`` needs ``replicas`` or ``limits``.
``status``
    ``podTemplateRef`` (the template used, podTemplateRef buffers only), ``podTemplateGeneration``,
    ``replicas`` (chunks held), ``provisioningStrategy`` and the conditions ``ReadyForProvisioning`` (reasons
    ``Resolved``, ``ScalableRefNotFound``, ``PodTemplateNotFound``, ``ResolutionFailed``) and ``Provisioning``
    (``FitsExistingCapacity``, ``RequiresNewCapacity``, ``NotReadyForProvisioning``, ``BufferEmpty``).

How a buffer is resolved into pods is :mod:`nodewright.state.buffers`; the controller that writes the status is
:mod:`nodewright.controllers.buffer`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from nodewright.api.base import Condition, KubeModel, LenientModel, ObjectMeta, ResourceList, cel, invalid

GROUP = "autoscaling.x-k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "CapacityBuffer"
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"

#: Condition types and reasons (Karpenter ``pkg/apis/autoscaling/v1beta1/constants.go``,
#: ``pkg/controllers/capacitybuffer/constants.go``).
READY_FOR_PROVISIONING = "ReadyForProvisioning"
PROVISIONING = "Provisioning"
REASON_RESOLVED = "Resolved"
REASON_SCALABLE_REF_NOT_FOUND = "ScalableRefNotFound"
REASON_POD_TEMPLATE_NOT_FOUND = "PodTemplateNotFound"
REASON_RESOLUTION_FAILED = "ResolutionFailed"
REASON_FITS_EXISTING = "FitsExistingCapacity"
REASON_REQUIRES_NEW = "RequiresNewCapacity"
REASON_NOT_READY = "NotReadyForProvisioning"
REASON_EMPTY = "BufferEmpty"

#: ``scalableRef.kind`` values Karpenter resolves (``apps`` group only).
SCALABLE_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")

#: Annotations Karpenter puts on a virtual pod (``FakePodAnnotationKey`` etc.).
FAKE_POD_ANNOTATION = "karpenter.sh/capacity-buffer-fake-pod"
BUFFER_NAME_ANNOTATION = "karpenter.sh/capacity-buffer-name"
BUFFER_NAMESPACE_ANNOTATION = "karpenter.sh/capacity-buffer-namespace"
#: ``spec.priority`` of a virtual pod (Karpenter ``VirtualPodPriority``: math.MinInt32).
VIRTUAL_POD_PRIORITY = -(2**31)


class LocalObjectRef(KubeModel):
    """``{name}`` of an object in the buffer's namespace."""

    name: str = Field(min_length=1)


class ScalableRef(KubeModel):
    """``{apiGroup, kind, name}`` of an object with a scale subresource (``apiGroup`` empty = core)."""

    api_group: str = Field(default="", alias="apiGroup")
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)


class CapacityBufferSpec(KubeModel):
    """spec defines the desired characteristics of the buffer: exactly one of podTemplateRef or scalableRef, and
    replicas, percentage (of the scalableRef's replicas) and/or limits (resources the chunks may request in all)."""

    model_config = cel(
        ("!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",
         "If podTemplateRef is set, replicas or limits must also be set"),
        ("!(has(self.podTemplateRef) && has(self.scalableRef))",
         "You must define either PodTemplateRef or ScalableRef, but not both"),
    )

    provisioning_strategy: str | None = Field(default=None, alias="provisioningStrategy",
                                              json_schema_extra={"default": ACTIVE_CAPACITY})
    pod_template_ref: LocalObjectRef | None = Field(default=None, alias="podTemplateRef")
    scalable_ref: ScalableRef | None = Field(default=None, alias="scalableRef")
    replicas: int | None = Field(default=None, ge=0, le=2**31 - 1)
    percentage: int | None = Field(default=None, ge=0, le=2**31 - 1)
    limits: ResourceList | None = None

    @model_validator(mode="after")
    def _refs(self) -> CapacityBufferSpec:
        if self.pod_template_ref is not None and self.scalable_ref is not None:
            raise invalid("scalableRef", "set either podTemplateRef or scalableRef, not both")
        if self.pod_template_ref is not None and self.replicas is None and self.limits is None:
            raise invalid("podTemplateRef", "a podTemplateRef buffer needs replicas or limits")
        return self

    @property
    def strategy(self) -> str:
        """``provisioningStrategy`` with its default."""
        return self.provisioning_strategy or ACTIVE_CAPACITY


class CapacityBufferStatus(LenientModel):
    """status represents the current state of the buffer and its readiness for autoprovisioning: the template
    used, the chunks held and the ReadyForProvisioning / Provisioning conditions."""

    pod_template_ref: LocalObjectRef | None = Field(default=None, alias="podTemplateRef")
    replicas: int | None = None
    pod_template_generation: int | None = Field(default=None, alias="podTemplateGeneration")
    conditions: list[Condition] = Field(default_factory=list)
    provisioning_strategy: str | None = Field(default=None, alias="provisioningStrategy")


class CapacityBuffer(KubeModel):
    """One validated CapacityBuffer object."""

    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: ObjectMeta
    spec: CapacityBufferSpec
    status: CapacityBufferStatus | None = None

    @model_validator(mode="before")
    @classmethod
    def _kind(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if data.get("kind", KIND) != KIND:
                raise invalid("kind", f"expected {KIND!r}, got {data.get('kind')!r}")
            if data.get("apiVersion", API_VERSION) != API_VERSION:
                raise invalid("apiVersion", f"expected {API_VERSION!r}, got {data.get('apiVersion')!r}")
        return data
