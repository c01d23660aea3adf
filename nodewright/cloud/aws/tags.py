"""The tags the controller puts on every AWS resource it creates: the one place they are computed.

Source: Karpenter v1 (aws/karpenter-provider-aws ``pkg/utils`` ``GetTags``, ``EC2NodeClass.InstanceProfileTags``,
``pkg/providers/launchtemplate`` and ``pkg/providers/instance``). The controller IAM policy both Karpenter and
our stacks ship authorizes creation only when the request carries ``kubernetes.io/cluster/<cluster>=owned``,
``eks:eks-cluster-name=<cluster>`` and a ``karpenter.sh/nodepool`` tag, and later use (CreateFleet referencing a
launch template, TerminateInstances, DeleteLaunchTemplate) only on resources that carry them. So:

- launch templates, and the network interfaces and spot requests they create (the template's own
  ``TagSpecifications``), carry :func:`resource_tags`;
- the fleet, its instances and their volumes (``CreateFleet`` ``TagSpecifications``) carry
  :func:`instance_tags`: the same plus ``karpenter.sh/nodeclaim`` and ``Name``;
- managed instance profiles carry :func:`instance_profile_tags`.

The EC2NodeClass's ``spec.tags`` come first and can never override ours (the API rejects the restricted keys).
"""

from __future__ import annotations

from collections.abc import Mapping

from nodewright.api import labels

#: The region tag on instance profiles (Karpenter's ``topology.kubernetes.io/region``).
TAG_REGION = "topology.kubernetes.io/region"


def ownership_tag(cluster_name: str) -> str:
    """``kubernetes.io/cluster/<cluster>``, whose value is ``owned`` on everything the controller creates."""
    return f"{labels.TAG_CLUSTER_PREFIX}{cluster_name}"


def resource_tags(cluster_name: str, nodepool: str, nodeclass: str,
                  nodeclass_tags: Mapping[str, str] | None = None) -> dict[str, str]:
    """Tags of a launch template and of the network interfaces and spot requests launched from it.

    Returns ``spec.tags`` of the EC2NodeClass plus ``kubernetes.io/cluster/<cluster>: owned``,
    ``eks:eks-cluster-name: <cluster>``, ``karpenter.sh/nodepool: <nodepool>`` and
    ``karpenter.k8s.aws/ec2nodeclass: <nodeclass>`` (Karpenter ``GetTags``).
    """
    return {**(nodeclass_tags or {}),
            ownership_tag(cluster_name): "owned",
            labels.TAG_CLUSTER_NAME: cluster_name,
            labels.TAG_NODEPOOL: nodepool,
            labels.TAG_EC2NODECLASS: nodeclass}


def instance_tags(cluster_name: str, nodepool: str, nodeclass: str, nodeclaim: str,
                  nodeclass_tags: Mapping[str, str] | None = None) -> dict[str, str]:
    """Tags of the fleet, the instance and its volumes: :func:`resource_tags` plus ``karpenter.sh/nodeclaim``
    and ``Name`` (``<nodepool>/<nodeclaim>``; Karpenter writes both after launch with CreateTags, we write
    them at launch so an instance is never untagged)."""
    return {**resource_tags(cluster_name, nodepool, nodeclass, nodeclass_tags),
            labels.TAG_NODECLAIM: nodeclaim,
            labels.TAG_NAME: f"{nodepool}/{nodeclaim}" if nodepool else nodeclaim}


def instance_profile_tags(cluster_name: str, region: str, nodeclass: str,
                          nodeclass_tags: Mapping[str, str] | None = None) -> dict[str, str]:
    """Tags of a managed instance profile (Karpenter ``InstanceProfileTags``): ``spec.tags`` plus the ownership
    tag, ``eks:eks-cluster-name``, ``karpenter.k8s.aws/ec2nodeclass`` and ``topology.kubernetes.io/region``."""
    return {**(nodeclass_tags or {}),
            ownership_tag(cluster_name): "owned",
            labels.TAG_CLUSTER_NAME: cluster_name,
            labels.TAG_EC2NODECLASS: nodeclass,
            TAG_REGION: region}
