"""nodewright.api: Karpenter v1 API objects as typed, validated models.

Public surface (stable names other packages import):

- models: :class:`NodePool`, :class:`NodeClaim`, :class:`EC2NodeClass`, :class:`Requirement`,
  :class:`Taint`, :class:`Budget`, :class:`Disruption`, :class:`NodeClassReference`, ...;
  every model reads a manifest dict with ``Model.model_validate(doc)`` (camelCase keys) and writes
  one with ``model.to_manifest()`` (same as ``model_dump(by_alias=True, exclude_none=True,
  mode="json")``);
- :func:`load_manifests` (multi-document YAML -> dicts), :func:`parse_nodepool`,
  :func:`parse_nodeclaim`, :func:`parse_ec2nodeclass` (v1 dict -> model),
  :func:`parse_documents` (any version -> models + other documents);
- :func:`convert_documents` (v1alpha5/v1beta1 -> v1, other documents unchanged);
- :mod:`nodewright.api.labels` (well-known labels, annotations, taints, finalizers),
  :mod:`nodewright.api.durations` (``"720h"`` <-> seconds), :mod:`nodewright.api.crds`.

Every function raises :class:`nodewright.errors.NodewrightValidationError` on invalid input.
"""

from nodewright.api import durations, labels
from nodewright.api.base import (
    Condition,
    KubeModel,
    NodeClassReference,
    ObjectMeta,
    Taint,
    TemplateMetadata,
    parse_model,
)
from nodewright.api.conversion import PLACEHOLDER_NODE_ROLE, convert_documents
from nodewright.api.ec2nodeclass import (
    AMISelectorTerm,
    BlockDevice,
    BlockDeviceMapping,
    EC2NodeClass,
    EC2NodeClassSpec,
    EC2NodeClassStatus,
    KubeletConfiguration,
    MetadataOptions,
    SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
)
from nodewright.api.manifests import (
    KarpenterObjects,
    load_manifests,
    parse_documents,
    parse_ec2nodeclass,
    parse_nodeclaim,
    parse_nodepool,
)
from nodewright.api.nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus, ResourceRequirements
from nodewright.api.nodepool import (
    Budget,
    Disruption,
    NodeClaimTemplate,
    NodeClaimTemplateSpec,
    NodePool,
    NodePoolSpec,
    NodePoolStatus,
)
from nodewright.api.requirements import NUMERIC_OPERATORS, OPERATORS, Requirement

__all__ = [
    "AMISelectorTerm",
    "BlockDevice",
    "BlockDeviceMapping",
    "Budget",
    "Condition",
    "Disruption",
    "EC2NodeClass",
    "EC2NodeClassSpec",
    "EC2NodeClassStatus",
    "KarpenterObjects",
    "KubeModel",
    "KubeletConfiguration",
    "MetadataOptions",
    "NUMERIC_OPERATORS",
    "NodeClaim",
    "NodeClaimSpec",
    "NodeClaimStatus",
    "NodeClaimTemplate",
    "NodeClaimTemplateSpec",
    "NodeClassReference",
    "NodePool",
    "NodePoolSpec",
    "NodePoolStatus",
    "OPERATORS",
    "ObjectMeta",
    "PLACEHOLDER_NODE_ROLE",
    "Requirement",
    "ResourceRequirements",
    "SecurityGroupSelectorTerm",
    "SubnetSelectorTerm",
    "Taint",
    "TemplateMetadata",
    "convert_documents",
    "durations",
    "labels",
    "load_manifests",
    "parse_documents",
    "parse_ec2nodeclass",
    "parse_model",
    "parse_nodeclaim",
    "parse_nodepool",
]
