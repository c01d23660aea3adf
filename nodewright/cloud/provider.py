"""The ``CloudProvider`` protocol: the controllers' only way to buy, inspect and release capacity.

Modelled on Karpenter's ``cloudprovider.CloudProvider`` interface (``Create``, ``Delete``, ``Get``, ``List``,
``GetInstanceTypes``, ``IsDrifted``) and its error types. Two implementations exist:
``nodewright.cloud.aws.provider.AWSCloudProvider`` (boto3, real EC2) and the in-memory EC2 of
``nodewright.cloud.simulated`` used by ``nodewright simulate``.

The methods are synchronous (boto3 is); asyncio callers run them with ``asyncio.to_thread``.

NodeClaims in and out are ``nodewright.api`` ``NodeClaim`` models (Karpenter ``karpenter.sh/v1`` schema):

* input of :meth:`CloudProvider.create`: ``metadata.name``, ``metadata.labels["karpenter.sh/nodepool"]``,
  ``spec.nodeClassRef`` (the EC2NodeClass), ``spec.requirements`` carrying the candidate
  ``node.kubernetes.io/instance-type`` values, ``topology.kubernetes.io/zone`` values and
  ``karpenter.sh/capacity-type`` values (as in Karpenter), ``spec.resources.requests``, ``spec.taints`` and
  ``spec.startupTaints``.
* output: a copy with ``status.providerID`` (``aws:///<zone>/<instance-id>``), ``status.imageID``,
  ``status.capacity`` / ``status.allocatable`` (Kubernetes quantity strings) and ``metadata.labels`` holding
  ``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone``, ``topology.kubernetes.io/region``,
  ``karpenter.sh/capacity-type`` and the instance type's well-known labels.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from nodewright.api.nodeclaim import NodeClaim
    from nodewright.api.nodepool import NodePool
    from nodewright.cloud.instancetype import InstanceType

#: Drift reasons returned by :meth:`CloudProvider.is_drifted` (the values Karpenter's AWS provider uses).
DRIFT_AMI = "AMIDrift"
DRIFT_SUBNET = "SubnetDrift"
DRIFT_SECURITY_GROUP = "SecurityGroupDrift"
DRIFT_NODECLASS = "NodeClassDrift"

PROVIDER_ID_PREFIX = "aws:///"


def make_provider_id(zone: str, instance_id: str) -> str:
    """Kubernetes ``spec.providerID`` of an EC2 instance: ``aws:///<zone>/<instance-id>``.

    Same shape the AWS cloud-controller-manager writes on the Node, so NodeClaims and Nodes match.
    """
    return f"{PROVIDER_ID_PREFIX}{zone}/{instance_id}"


def parse_provider_id(provider_id: str) -> tuple[str, str]:
    """``(zone, instance_id)`` of ``aws:///<zone>/<instance-id>``.

    Raises:
        ValueError: when ``provider_id`` does not have that shape.
    """
    if not provider_id.startswith(PROVIDER_ID_PREFIX):
        raise ValueError(f"provider id {provider_id!r} does not start with {PROVIDER_ID_PREFIX!r}")
    parts = provider_id[len(PROVIDER_ID_PREFIX) :].split("/")
    if len(parts) != 2 or not parts[1].startswith("i-"):
        raise ValueError(f"provider id {provider_id!r} is not aws:///<zone>/<instance-id>")
    return parts[0], parts[1]


# --- errors -----------------------------------------------------------------------------------------------


class CloudProviderError(Exception):
    """Base of every error a :class:`CloudProvider` raises.

    Attributes:
        retryable: whether the controller may retry the same call soon (False for authorization errors,
            where retrying only makes a storm of identical denials).
    """

    retryable: bool = True


@dataclass(frozen=True, slots=True)
class UnavailableOffering:
    """One offering a launch could not use, and why (an EC2 Fleet error)."""

    instance_type: str
    zone: str
    capacity_type: str
    error_code: str
    message: str = ""


class InsufficientCapacityError(CloudProviderError):
    """No candidate offering could be launched (Karpenter: ``InsufficientCapacityError``).

    The NodeClaim fails and is deleted; the provisioner re-plans with those offerings marked unavailable.

    Attributes:
        reasons: every offering tried and the EC2 error code it failed with, in the order seen.
    """

    def __init__(self, message: str, reasons: Sequence[UnavailableOffering] = ()) -> None:
        self.reasons = tuple(reasons)
        super().__init__(message)


class NodeClaimNotFoundError(CloudProviderError):
    """The NodeClaim's instance does not exist (any more): terminated, or never launched.

    :meth:`CloudProvider.delete` raises it once the instance is gone, so finalizers know deletion finished.
    """


class NodeClassNotReadyError(CloudProviderError):
    """The EC2NodeClass cannot be used yet: no subnet, security group, AMI or instance profile resolved.

    The message names what is missing and which selector found nothing.
    """


class AuthorizationError(CloudProviderError):
    """AWS denied the call (``UnauthorizedOperation``, ``AccessDenied``, ``AccessDeniedException``).

    ``str(err)`` is one actionable sentence naming the principal, the action, the resource and the fix, e.g.
    ``"the controller role arn:aws:iam::111122223333:role/nodewright may not iam:PassRole on
    arn:aws:iam::111122223333:role/nodes: add iam:PassRole for that role with condition
    iam:PassedToService=ec2.amazonaws.com"``. Not retryable: the controller backs off and surfaces it on the
    NodeClaim and NodePool status and as an event.

    Attributes:
        action: the IAM action denied, e.g. ``"iam:PassRole"`` (``""`` when AWS did not say).
        resource: the ARN or id the action was denied on (``""`` when unknown).
        principal: the ARN of the caller (``""`` when unknown).
        code: the AWS error code.
    """

    retryable = False

    def __init__(self, message: str, *, action: str = "", resource: str = "", principal: str = "",
                 code: str = "") -> None:
        self.action = action
        self.resource = resource
        self.principal = principal
        self.code = code
        super().__init__(message)


class LaunchError(CloudProviderError):
    """A launch failed for a reason that is neither capacity nor authorization (bad launch template,
    invalid parameter, throttling that outlived retries). The message carries the AWS code and text."""


class TransientCloudError(LaunchError):
    """The cloud did not answer usably: a read or connect timeout, a dropped connection, a 5xx body that could not
    be parsed (botocore errors other than ``ClientError``). Retryable: the controllers back off and retry, with a
    condition and an event on the NodeClaim for a launch."""


# --- the protocol -----------------------------------------------------------------------------------------


@runtime_checkable
class CloudProvider(Protocol):
    """What a cloud must offer the nodewright controllers (Karpenter's ``CloudProvider``)."""

    @property
    def name(self) -> str:
        """Short provider name used in logs and metrics, e.g. ``"aws"`` or ``"simulated"``."""
        ...

    def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one instance for ``nodeclaim`` and return the launched NodeClaim (see module docstring).

        Idempotent: calling again for the same NodeClaim (same name and uid) after a crash returns the same
        instance rather than launching a second one.

        Raises:
            InsufficientCapacityError: every candidate offering failed; ``reasons`` lists them.
            NodeClassNotReadyError: the EC2NodeClass is missing or has unresolved subnets/SGs/AMIs/profile.
            AuthorizationError: AWS denied a call; not retryable.
            LaunchError: any other launch failure.
        """
        ...

    def delete(self, nodeclaim: NodeClaim) -> None:
        """Terminate the NodeClaim's instance (by ``status.providerID``).

        Idempotent: a second call while the instance is shutting down terminates again harmlessly.

        Raises:
            NodeClaimNotFoundError: the instance is already gone (terminated or never existed); the
                termination finalizer treats this as success.
            AuthorizationError: AWS denied the call.
        """
        ...

    def get(self, provider_id: str) -> NodeClaim:
        """The NodeClaim view of one instance (``aws:///<zone>/<instance-id>``), built from its tags.

        Raises:
            NodeClaimNotFoundError: no such instance, or it is terminated.
        """
        ...

    def list(self) -> list[NodeClaim]:
        """NodeClaim views of every live instance this cluster's controller launched (by tags).

        Input for garbage collection: instances with no NodeClaim in the cluster are leaked.
        """
        ...

    def get_instance_types(self, nodepool: NodePool) -> builtins.list[InstanceType]:
        """Every instance type usable by ``nodepool``'s EC2NodeClass, with offerings and current prices.

        Offerings are restricted to the zones of the nodeclass's resolved subnets; offerings that recently
        failed with insufficient capacity (3 minutes, Karpenter's window) or whose spot capacity was
        interrupted are returned with ``available=False``.

        Raises:
            NodeClassNotReadyError: the NodePool's EC2NodeClass does not exist or is not resolved.
        """
        ...

    def is_drifted(self, nodeclaim: NodeClaim) -> str | None:
        """A drift reason (:data:`DRIFT_AMI`, :data:`DRIFT_SUBNET`, :data:`DRIFT_SECURITY_GROUP`,
        :data:`DRIFT_NODECLASS`) when the instance no longer matches its EC2NodeClass, else None."""
        ...

    def mark_spot_interrupted(self, instance_type: str, zone: str) -> None:
        """A spot interruption warning arrived for an instance of ``instance_type`` in ``zone``: keep that spot
        offering out of launches for the unavailable-offerings TTL (Karpenter: 3 minutes,
        :class:`nodewright.cloud.unavailable.UnavailableOfferings`)."""
        ...


# --- node repair (optional capabilities) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """One unhealthy-node rule of a cloud provider (Karpenter's ``cloudprovider.RepairPolicy``).

    A Node whose condition ``condition_type`` has had status ``condition_status`` for ``toleration_seconds`` since
    its ``lastTransitionTime`` is unhealthy past its toleration and is repaired (gate ``NodeRepair``).

    Attributes:
        condition_type: Node condition type, e.g. ``"Ready"`` or ``"KernelReady"``.
        condition_status: ``"True"``, ``"False"`` or ``"Unknown"``.
        toleration_seconds: seconds the condition may hold before the node is repaired.
    """

    condition_type: str
    condition_status: str
    toleration_seconds: float


@runtime_checkable
class RepairPolicySource(Protocol):
    """A cloud that says which Node conditions mean a node must be repaired (Karpenter's ``RepairPolicies``;
    a cloud without it, or with none, gets no node health controller, as in Karpenter)."""

    def repair_policies(self) -> Sequence[RepairPolicy]:
        """The policies, in a fixed order."""
        ...


@runtime_checkable
class Rebooter(Protocol):
    """A cloud that can reboot a NodeClaim's instance in place (AWS: ``ec2:RebootInstances``)."""

    def reboot(self, nodeclaim: NodeClaim) -> None:
        """Ask the cloud to reboot the instance of ``nodeclaim`` (by ``status.providerID``); returns once asked.

        Raises:
            NodeClaimNotFoundError: the instance is gone.
            AuthorizationError: the call was denied.
        """
        ...
