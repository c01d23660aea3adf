"""The AWS provider's node repair policies: which Node conditions, for how long, make a node unhealthy.

Source: aws/karpenter-provider-aws ``pkg/cloudprovider/cloudprovider.go`` ``RepairPolicies`` (main, 2026-08-21):
the kubelet's ``Ready`` condition ``False`` or ``Unknown`` for 30 minutes, and the conditions the EKS node
monitoring agent writes (``AcceleratedHardwareReady`` ``False`` for 10 minutes; ``StorageReady``,
``NetworkingReady``, ``KernelReady``, ``ContainerRuntimeReady`` ``False`` for 30 minutes). The simulated cloud
(``nodewright simulate``) models EC2 and uses the same list.
"""

from __future__ import annotations

from nodewright.cloud.provider import RepairPolicy

_MINUTE = 60.0

AWS_REPAIR_POLICIES: tuple[RepairPolicy, ...] = (
    # kubelet
    RepairPolicy("Ready", "False", 30 * _MINUTE),
    RepairPolicy("Ready", "Unknown", 30 * _MINUTE),
    # EKS node monitoring agent
    RepairPolicy("AcceleratedHardwareReady", "False", 10 * _MINUTE),
    RepairPolicy("StorageReady", "False", 30 * _MINUTE),
    RepairPolicy("NetworkingReady", "False", 30 * _MINUTE),
    RepairPolicy("KernelReady", "False", 30 * _MINUTE),
    RepairPolicy("ContainerRuntimeReady", "False", 30 * _MINUTE),
)
