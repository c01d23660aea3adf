"""NodeClaim views of EC2 instances, and the pieces of a NodeClaim that go into userData and tags.

Capacity/allocatable are written as Kubernetes quantities: cpu in millicores (``"1930m"``), memory and
storage in ``Mi`` when whole (else bytes), counts as integers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodewright.api import labels
from nodewright.api.nodeclaim import NodeClaim
from nodewright.cloud.aws.instances import Instance
from nodewright.cloud.aws.userdata import Taint
from nodewright.cloud.instancetype import InstanceType
from nodewright.cloud.matching import as_requirements
from nodewright.cloud.provider import make_provider_id
from nodewright.quantities import format_resource_list

#: Labels that differ between the candidates of one launch: they cannot go into a shared launch template.
_PER_INSTANCE_LABELS = frozenset({labels.INSTANCE_TYPE, labels.ZONE, labels.REGION, labels.CAPACITY_TYPE,
                                  labels.ARCH, labels.OS, labels.HOSTNAME, labels.ZONE_ID})
_KUBELET_ALLOWED_DOMAINS = ("node.kubernetes.io", "node-restriction.kubernetes.io")


def _kubelet_accepts(key: str) -> bool:
    # The kubelet refuses --node-labels in the kubernetes.io / k8s.io domains except a few (NodeRestriction).
    domain = key.split("/", 1)[0] if "/" in key else ""
    if any(domain == d or domain.endswith("." + d) for d in _KUBELET_ALLOWED_DOMAINS):
        return True
    return not any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def registration_labels(nodeclaim: NodeClaim) -> dict[str, str]:
    """Labels the node registers with: the NodeClaim's labels plus single-value ``In`` requirements, minus
    labels that vary per candidate instance and labels the kubelet may not set."""
    out = as_requirements(nodeclaim.spec.requirements).labels()
    out.update(nodeclaim.metadata.labels or {})
    return {k: v for k, v in sorted(out.items())
            if k not in _PER_INSTANCE_LABELS and not k.startswith("karpenter.k8s.aws/instance-") and _kubelet_accepts(k)}


def registration_taints(nodeclaim: NodeClaim) -> list[Taint]:
    """``spec.taints`` then ``spec.startupTaints`` as userData taints."""
    return [Taint(t.key, t.effect, t.value or "")
            for t in [*(nodeclaim.spec.taints or []), *(nodeclaim.spec.startup_taints or [])]]


def instance_labels(instance: Instance, region: str, instance_type: InstanceType | None) -> dict[str, str]:
    """Labels of the node an instance becomes: type labels plus type, zone, region, capacity type (``reserved``
    and ``karpenter.k8s.aws/capacity-reservation-id`` for an instance in a capacity reservation)."""
    out = dict(instance_type.labels) if instance_type else {}
    out.update({labels.INSTANCE_TYPE: instance.instance_type, labels.ZONE: instance.zone, labels.REGION: region,
                labels.CAPACITY_TYPE: instance.capacity_type})
    zone_id = next((o.zone_id for o in instance_type.offerings if o.zone == instance.zone and o.zone_id), "") \
        if instance_type else ""
    if zone_id:
        out[labels.ZONE_ID] = zone_id
    if instance.capacity_reservation_id:
        out[labels.CAPACITY_RESERVATION_ID] = instance.capacity_reservation_id
    nodepool = instance.tags.get(labels.TAG_NODEPOOL)
    if nodepool:
        out[labels.NODEPOOL] = nodepool
    nodeclass = instance.tags.get(labels.TAG_EC2NODECLASS)
    if nodeclass:
        out[labels.EC2NODECLASS] = nodeclass
    return out


def launched(nodeclaim: NodeClaim, instance: Instance, region: str, instance_type: InstanceType | None,
             annotations: Mapping[str, str]) -> NodeClaim:
    """A copy of ``nodeclaim`` with the launch written in: labels, annotations and status."""
    doc = nodeclaim.to_manifest()
    meta = doc.setdefault("metadata", {})
    meta["labels"] = {**meta.get("labels", {}), **instance_labels(instance, region, instance_type)}
    meta["annotations"] = {**meta.get("annotations", {}), **annotations}
    status = doc.setdefault("status", {})
    status["providerID"] = make_provider_id(instance.zone, instance.id)
    if instance.image_id:
        status["imageID"] = instance.image_id
    if instance_type is not None:
        status["capacity"] = format_resource_list(instance_type.capacity)
        status["allocatable"] = format_resource_list(instance_type.allocatable())
    return NodeClaim.model_validate(doc)


def from_instance(instance: Instance, region: str, instance_type: InstanceType | None) -> NodeClaim:
    """The NodeClaim view of an instance (for ``get``/``list``), rebuilt from its tags."""
    name = instance.tags.get(labels.TAG_NODECLAIM) or instance.id
    doc: dict[str, Any] = {
        "metadata": {"name": name, "labels": instance_labels(instance, region, instance_type)},
        "spec": {
            "requirements": [
                {"key": labels.INSTANCE_TYPE, "operator": "In", "values": [instance.instance_type]},
                {"key": labels.ZONE, "operator": "In", "values": [instance.zone]},
                {"key": labels.CAPACITY_TYPE, "operator": "In", "values": [instance.capacity_type]},
            ],
            "nodeClassRef": {"group": labels.AWS_GROUP, "kind": "EC2NodeClass",
                             "name": instance.tags.get(labels.TAG_EC2NODECLASS, "unknown")},
        },
        "status": {"providerID": make_provider_id(instance.zone, instance.id)},
    }
    if instance.image_id:
        doc["status"]["imageID"] = instance.image_id
    if instance_type is not None:
        doc["status"]["capacity"] = format_resource_list(instance_type.capacity)
        doc["status"]["allocatable"] = format_resource_list(instance_type.allocatable())
    if instance.launch_time is not None:
        doc["metadata"]["creationTimestamp"] = instance.launch_time.isoformat()
    return NodeClaim.model_validate(doc)
