"""IAM, KMS and SQS policy documents as plain dicts (pure functions, no constructs).

The stacks serialize these with ``json.dumps`` into the ``policy`` / ``assume_role_policy``
attributes, so every document sits in the synthesized ``cdk.tf.json`` as a JSON string that the
policy gate can ``json.loads``. Values known only at apply time (ARNs, account id, the OIDC issuer
host) are Terraform references such as ``${aws_iam_role.node_role.arn}`` or ``${local.x}``; they
never contain quotes, so the string stays valid JSON before Terraform interpolates it.

Sources: the controller policy mirrors Karpenter v1's published controller policies (karpenter.sh
getting-started ``cloudformation.yaml``), statement by statement with the same Sids, split the same way into
several managed policies (:data:`CONTROLLER_POLICY_PARTS`) so that each stays under IAM's managed-policy size
limit (:data:`MANAGED_POLICY_MAX_CHARS`); the IRSA and Pod Identity trust policies follow the Amazon EKS user
guide.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Document = dict[str, Any]

VERSION = "2012-10-17"

#: IAM quota: a customer managed policy document may hold at most 6,144 characters, white space not counted.
MANAGED_POLICY_MAX_CHARS = 6144

#: The controller's managed policies: part name -> the Sids it holds (Karpenter v1's split:
#: NodeLifecycle, IAMIntegration, EKSIntegration, Interruption, ResourceDiscovery).
CONTROLLER_POLICY_PARTS: dict[str, tuple[str, ...]] = {
    "node-lifecycle": ("AllowScopedEC2InstanceAccessActions", "AllowScopedEC2LaunchTemplateAccessActions",
                       "AllowScopedEC2InstanceActionsWithTags", "AllowScopedResourceCreationTagging",
                       "AllowScopedDeletion", "AllowScopedInstanceReboot"),
    "iam-integration": ("AllowPassingInstanceRole", "AllowScopedInstanceProfileCreationActions",
                        "AllowScopedInstanceProfileActions"),
    "eks-integration": ("AllowAPIServerEndpointDiscovery",),
    "interruption": ("AllowInterruptionQueueActions",),
    "resource-discovery": ("AllowRegionalReadActions", "AllowSSMReadActions", "AllowPricingReadActions",
                           "AllowInstanceProfileReadActions"),
}

# Read-only EC2 calls the controller makes for discovery and pricing (Karpenter v1 policy;
# DescribeCapacityReservations for capacityReservationSelectorTerms, as Karpenter v1.14's policy). They support no
# resource-level permissions. Not ec2:DescribeAvailabilityZones: the only fact it gave (zone name -> zone id) comes
# with every subnet from DescribeSubnets, and offerings exist only in the zones of the classes' subnets.
EC2_READ_ACTIONS = (
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)

#: Resource types a launch (RunInstances/CreateFleet) references without creating them: the statement
#: ``AllowScopedEC2InstanceAccessActions`` grants exactly these.
LAUNCH_REFERENCED_EC2_TYPES = ("image", "snapshot", "security-group", "subnet", "capacity-reservation",
                               "placement-group")

# Resource types the controller creates through RunInstances/CreateFleet/CreateLaunchTemplate.
_CREATED_EC2_TYPES = ("fleet", "instance", "volume", "network-interface", "launch-template",
                      "spot-instances-request")


@dataclass(frozen=True)
class ControllerPolicyContext:
    """Everything the controller policy is scoped to.

    Attributes:
        partition: ``aws`` (or a Terraform reference to ``data.aws_partition``).
        account_id: 12-digit account (or a reference to ``data.aws_caller_identity``).
        region: the cluster's region, literal.
        cluster_name: literal cluster name; it appears in tag condition *keys*, which IAM
            cannot take from variables.
        cluster_arn: ARN of the EKS cluster (``eks:DescribeCluster``).
        queue_arn: ARN of the interruption queue.
        node_role_arn: ARN of the node role, the only role the controller may pass.
    """

    partition: str
    account_id: str
    region: str
    cluster_name: str
    cluster_arn: str
    queue_arn: str
    node_role_arn: str

    def ec2_arn(self, resource_type: str) -> str:
        account = "" if resource_type in ("image", "snapshot") else "*"
        return f"arn:{self.partition}:ec2:{self.region}:{account}:{resource_type}/*"

    @property
    def instance_profile_arn(self) -> str:
        return f"arn:{self.partition}:iam::{self.account_id}:instance-profile/*"

    @property
    def ec2_services(self) -> list[str]:
        """``iam:PassedToService`` values for EC2: ``ec2.amazonaws.com``, and in the China partition also
        ``ec2.amazonaws.com.cn`` (Karpenter lists both)."""
        return ec2_service_principals(self.region)


def ec2_service_principals(region: str) -> list[str]:
    """EC2's service principal names in ``region``'s partition: China regions (``cn-*``) add
    ``ec2.amazonaws.com.cn`` (the partition's URL suffix, as Karpenter's ``ec2.${AWS::URLSuffix}``)."""
    return ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"] if region.startswith("cn-") else ["ec2.amazonaws.com"]


def policy_chars(document: Document) -> int:
    """The size IAM counts against :data:`MANAGED_POLICY_MAX_CHARS`: the JSON without white space."""
    return len(json.dumps(document, separators=(",", ":")))


def controller_policy(ctx: ControllerPolicyContext) -> Document:
    """The controller's least-privilege policy, one named statement per permission group.

    Karpenter's statements the controller has no call for are left out (the IAM replay lists statements no call
    needed): ``AllowScopedResourceTagging`` (Karpenter re-tags instances after registration; we tag the
    NodeClaim and ``Name`` at launch) and ``AllowScopedInstanceProfileTagActions`` (Karpenter re-tags existing
    profiles; ours are tagged when created), as is ``sqs:GetQueueAttributes``.

    Launch and create actions require the request to tag the new resources with
    ``kubernetes.io/cluster/<cluster>=owned``, ``eks:eks-cluster-name=<cluster>`` and a
    ``karpenter.sh/nodepool`` tag; terminate/delete require those tags on the existing resource, so the controller can touch nothing it did not launch. ``iam:PassRole`` is
    limited to the node role and to EC2 as the receiving service: the permission whose absence
    broke the first field report's launches (``UnauthorizedOperation ... iam:PassRole``).

    Returns:
        An IAM policy document (``Version`` + ``Statement`` list, every statement with a ``Sid``).
    """
    owned = f"kubernetes.io/cluster/{ctx.cluster_name}"
    created = [ctx.ec2_arn(kind) for kind in _CREATED_EC2_TYPES]
    request_tags = {
        f"aws:RequestTag/{owned}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": ctx.cluster_name,
    }
    resource_owned = {f"aws:ResourceTag/{owned}": "owned"}
    nodepool_request = {"aws:RequestTag/karpenter.sh/nodepool": "*"}
    nodepool_resource = {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
    profile_resource_tags = {**resource_owned, "aws:ResourceTag/topology.kubernetes.io/region": ctx.region}
    profile_request_tags = {**request_tags, "aws:RequestTag/topology.kubernetes.io/region": ctx.region}
    statements: list[Document] = [
        # Launches reference AWS-owned images/snapshots, the cluster's subnets and security groups, and the
        # capacity reservation (CapacityReservationTarget) and placement group (Placement) the launch template
        # names; those resources are read, not created, and carry no ownership tag. Karpenter v1.12+ and
        # terraform-aws-eks v21 grant capacity-reservation/* and placement-group/* here too.
        _allow("AllowScopedEC2InstanceAccessActions", ["ec2:RunInstances", "ec2:CreateFleet"],
               [ctx.ec2_arn(kind) for kind in LAUNCH_REFERENCED_EC2_TYPES]),
        _allow("AllowScopedEC2LaunchTemplateAccessActions", ["ec2:RunInstances", "ec2:CreateFleet"],
               ctx.ec2_arn("launch-template"),
               {"StringEquals": resource_owned, "StringLike": nodepool_resource}),
        _allow("AllowScopedEC2InstanceActionsWithTags",
               ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"], created,
               {"StringEquals": request_tags, "StringLike": nodepool_request}),
        _allow("AllowScopedResourceCreationTagging", "ec2:CreateTags", created,
               {"StringEquals": {**request_tags,
                                 "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                "StringLike": nodepool_request}),
        _allow("AllowScopedDeletion", ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
               [ctx.ec2_arn("instance"), ctx.ec2_arn("launch-template")],
               {"StringEquals": resource_owned, "StringLike": nodepool_resource}),
        # Node repair with the AWS gate RebootForRepair reboots an unhealthy instance before replacing it: the same
        # scope as terminating it (instances this cluster's controller launched, by their ownership tags). Service
        # Authorization Reference, RebootInstances: resource type instance* (the only one), and aws:ResourceTag is
        # among its condition keys (the same set as TerminateInstances).
        _allow("AllowScopedInstanceReboot", "ec2:RebootInstances", ctx.ec2_arn("instance"),
               {"StringEquals": resource_owned, "StringLike": nodepool_resource}),
        # No ec2:DescribeAvailabilityZones (Karpenter's policy has it): zone ids come with DescribeSubnets.
        _allow("AllowRegionalReadActions", list(EC2_READ_ACTIONS), "*",
               {"StringEquals": {"aws:RequestedRegion": ctx.region}}),
        _allow("AllowSSMReadActions", "ssm:GetParameter",
               f"arn:{ctx.partition}:ssm:{ctx.region}::parameter/aws/service/*"),
        # The Price List API has no resource-level permissions.
        _allow("AllowPricingReadActions", "pricing:GetProducts", "*"),
        # What InterruptionQueue calls: GetQueueUrl (from the name), ReceiveMessage, DeleteMessage.
        _allow("AllowInterruptionQueueActions", ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
               ctx.queue_arn),
        _allow("AllowPassingInstanceRole", "iam:PassRole", ctx.node_role_arn,
               {"StringEquals": {"iam:PassedToService": _one_or_list(ctx.ec2_services)}}),
        _allow("AllowScopedInstanceProfileCreationActions", "iam:CreateInstanceProfile",
               ctx.instance_profile_arn,
               {"StringEquals": profile_request_tags,
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}}),
        _allow("AllowScopedInstanceProfileActions",
               ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
               ctx.instance_profile_arn,
               {"StringEquals": profile_resource_tags,
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}}),
        _allow("AllowInstanceProfileReadActions", "iam:GetInstanceProfile", ctx.instance_profile_arn),
        _allow("AllowAPIServerEndpointDiscovery", "eks:DescribeCluster", ctx.cluster_arn),
    ]
    return {"Version": VERSION, "Statement": statements}


def controller_policies(ctx: ControllerPolicyContext) -> dict[str, Document]:
    """:func:`controller_policy` split into the managed policies of :data:`CONTROLLER_POLICY_PARTS`.

    Returns:
        ``{part name: policy document}`` in the order of :data:`CONTROLLER_POLICY_PARTS`; every statement of
        :func:`controller_policy` is in exactly one part.
    """
    by_sid = {s["Sid"]: s for s in controller_policy(ctx)["Statement"]}
    parts = {part: {"Version": VERSION, "Statement": [by_sid.pop(sid) for sid in sids]}
             for part, sids in CONTROLLER_POLICY_PARTS.items()}
    if by_sid:
        raise ValueError(f"statements in no controller policy part: {sorted(by_sid)}")
    return parts


def irsa_trust_policy(oidc_provider_arn: str, issuer_host: str, subject: str) -> Document:
    """Trust for IRSA: only ``subject``'s projected token, only for the STS audience.

    Args:
        oidc_provider_arn: ARN of the cluster's IAM OIDC provider.
        issuer_host: the issuer URL without ``https://`` (``oidc.eks.<region>.amazonaws.com/id/<id>``),
            the prefix of the ``:sub`` and ``:aud`` condition keys.
        subject: ``system:serviceaccount:<namespace>:<name>``.
    """
    return {"Version": VERSION, "Statement": [{
        "Sid": "AllowControllerServiceAccountWebIdentity",
        "Effect": "Allow",
        "Principal": {"Federated": oidc_provider_arn},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {f"{issuer_host}:sub": subject,
                                       f"{issuer_host}:aud": "sts.amazonaws.com"}},
    }]}


def pod_identity_trust_policy(cluster_arn: str, namespace: str, service_account: str) -> Document:
    """Trust for EKS Pod Identity: one service account of one cluster, by the session tags EKS sends.

    The EKS Auth service (``pods.eks.amazonaws.com``) calls ``sts:AssumeRole`` and ``sts:TagSession`` with the
    session tags ``eks-cluster-arn``, ``eks-cluster-name``, ``kubernetes-namespace``,
    ``kubernetes-service-account``, ``kubernetes-pod-name`` and ``kubernetes-pod-uid`` (EKS user guide, "Create
    IAM role with trust policy required by EKS Pod Identity" and "Enable or disable session tags").
    Documented by AWS: the principal, the two actions, and ``StringEquals`` on
    ``aws:RequestTag/kubernetes-namespace`` and ``aws:RequestTag/kubernetes-service-account`` (the guide's
    example). Ours: ``aws:RequestTag/eks-cluster-arn`` (a tag from the documented list, so a role is not
    usable from another cluster's association). Not used: ``aws:SourceArn`` / ``aws:SourceAccount``, which the
    guide does not document for this principal (if EKS sent other values, Pod Identity would get no
    credentials). See docs/iam-rbac-replay.md ("Pod Identity trust").
    """
    return {"Version": VERSION, "Statement": [{
        "Sid": "AllowEksPodIdentity",
        "Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": {"aws:RequestTag/eks-cluster-arn": cluster_arn,
                                       "aws:RequestTag/kubernetes-namespace": namespace,
                                       "aws:RequestTag/kubernetes-service-account": service_account}},
    }]}


def service_trust_policy(sid: str, service: str, actions: tuple[str, ...] = ("sts:AssumeRole",),
                         source_account: str | None = None) -> Document:
    """Trust for an AWS service principal (``ec2.amazonaws.com``, ``eks.amazonaws.com``, ...).

    ``source_account`` adds an ``aws:SourceAccount`` condition against the confused-deputy problem
    for services that send it (VPC Flow Logs does; EC2 and EKS do not).
    """
    statement: Document = {"Sid": sid, "Effect": "Allow", "Principal": {"Service": service},
                           "Action": list(actions) if len(actions) > 1 else actions[0]}
    if source_account is not None:
        statement["Condition"] = {"StringEquals": {"aws:SourceAccount": source_account}}
    return {"Version": VERSION, "Statement": [statement]}


def kms_key_policy(partition: str, account_id: str, region: str,
                   log_group_arns: list[str] | None = None) -> Document:
    """Key policy: the account administers the key through IAM; CloudWatch Logs may use it for
    exactly the listed log groups (encryption context ``aws:logs:arn``).

    The first statement is AWS's default key policy (account root, ``kms:*``): without it the key
    becomes unmanageable, and it grants nothing by itself, only delegates to IAM policies.
    """
    statements: list[Document] = [{
        "Sid": "EnableAccountAdministrationThroughIAM",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
        "Action": "kms:*",
        "Resource": "*",
    }]
    if log_group_arns:
        statements.append({
            "Sid": "AllowCloudWatchLogsForOwnLogGroups",
            "Effect": "Allow",
            "Principal": {"Service": f"logs.{region}.amazonaws.com"},
            "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo",
                       "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:DescribeKey"],
            "Resource": "*",
            "Condition": {"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": log_group_arns}},
        })
    return {"Version": VERSION, "Statement": statements}


def flow_logs_delivery_policy(log_group_arn: str) -> Document:
    """What VPC Flow Logs needs to write into one existing log group (VPC user guide)."""
    return {"Version": VERSION, "Statement": [_allow(
        "AllowFlowLogsDelivery",
        ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
        [log_group_arn, f"{log_group_arn}:*"],
    )]}


def cluster_encryption_policy(key_arn: str) -> Document:
    """What the EKS cluster role needs to envelope-encrypt Kubernetes secrets with ``key_arn``."""
    return {"Version": VERSION, "Statement": [_allow(
        "AllowSecretsEnvelopeEncryption",
        ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"],
        key_arn,
    )]}


def interruption_queue_policy(queue_arn: str, rule_arns: list[str]) -> Document:
    """Queue policy: the interruption rules may send; nobody may use the queue without TLS."""
    return {"Version": VERSION, "Id": "NodewrightInterruptionQueue", "Statement": [
        {
            "Sid": "AllowEventBridgeInterruptionRules",
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": rule_arns}},
        },
        {
            "Sid": "DenyNonTLSAccess",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "sqs:*",
            "Resource": queue_arn,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
    ]}


def _one_or_list(values: list[str]) -> str | list[str]:
    return values[0] if len(values) == 1 else values


def _allow(sid: str, action: str | list[str], resource: str | list[str],
           condition: Document | None = None) -> Document:
    statement: Document = {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource}
    if condition:
        statement["Condition"] = condition
    return statement
