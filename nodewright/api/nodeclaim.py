"""``NodeClaim`` (``karpenter.sh/v1``): one requested node, from launch request to running node.

The spec is the NodePool template narrowed by the scheduler (requirements that pin instance
types, zone and capacity type; ``resources.requests`` of the pods it was created for); the status
is filled by the lifecycle controller (provider ID, image, capacity/allocatable, conditions
Launched -> Registered -> Initialized -> Ready, plus Drifted, Consolidatable, ...).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from nodewright.api import labels
from nodewright.api.base import (
    Condition,
    Duration,
    KubeModel,
    LenientModel,
    NillableDuration,
    NodeClassReference,
    ObjectMeta,
    ResourceList,
    Taint,
    invalid,
)
from nodewright.api.nodepool import DEFAULT_EXPIRE_AFTER
from nodewright.api.requirements import MAX_REQUIREMENTS, Requirement


class ResourceRequirements(KubeModel):
    """``spec.resources``: the summed requests of the pods the claim was made for
    (``cpu`` quantity in cores/millicores, ``memory`` with byte suffix, ``pods`` count)."""

    requests: ResourceList | None = None


class NodeClaimSpec(KubeModel):
    """``spec`` of a NodeClaim."""

    requirements: list[Requirement] = Field(max_length=MAX_REQUIREMENTS)
    node_class_ref: NodeClassReference
    resources: ResourceRequirements | None = None
    taints: list[Taint] | None = None
    startup_taints: list[Taint] | None = None
    expire_after: NillableDuration = DEFAULT_EXPIRE_AFTER
    termination_grace_period: Duration | None = None


class NodeClaimStatus(LenientModel):
    """``status``: what was launched (provider ID ``aws:///<zone>/<instance-id>``, AMI ID), the
    node it became, its capacity and allocatable resources, and lifecycle conditions."""

    node_name: str | None = None
    provider_id: str | None = Field(default=None, alias="providerID")
    image_id: str | None = Field(default=None, alias="imageID")
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    conditions: list[Condition] | None = None
    last_pod_event_time: str | None = None

    def condition(self, type_: str) -> Condition | None:
        """The condition of the given type (e.g. :data:`nodewright.api.labels.CONDITION_READY`)."""
        return next((c for c in self.conditions or [] if c.type == type_), None)

    def is_true(self, type_: str) -> bool:
        """True when condition ``type_`` exists with status ``"True"``."""
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"


class NodeClaim(KubeModel):
    """A ``karpenter.sh/v1`` NodeClaim (cluster-scoped; named by ``metadata.name`` or
    ``generateName``)."""

    api_version: Literal["karpenter.sh/v1"] = Field(default="karpenter.sh/v1", alias="apiVersion")
    kind: Literal["NodeClaim"] = "NodeClaim"
    metadata: ObjectMeta
    spec: NodeClaimSpec
    status: NodeClaimStatus | None = None

    @model_validator(mode="after")
    def _named(self) -> NodeClaim:
        if not self.metadata.name and not self.metadata.generate_name:
            raise invalid("metadata.name", "required field is missing (or set generateName)")
        return self

    @property
    def nodepool(self) -> str | None:
        """Owning NodePool, from the ``karpenter.sh/nodepool`` label."""
        return (self.metadata.labels or {}).get(labels.NODEPOOL)
