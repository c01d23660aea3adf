"""identity: who the controller is on AWS, and who the nodes it launches are.

- The node role (four managed node policies), its instance profile and an ``EC2_LINUX`` access
  entry, so nodes launched with it can join the cluster.
- The controller role with the least-privilege controller policies (see :mod:`stacks.policies`; one
  managed policy per part of :data:`stacks.policies.CONTROLLER_POLICY_PARTS`, as Karpenter splits them),
  trusted either through the cluster's OIDC provider (IRSA, the default) for exactly
  ``system:serviceaccount:kube-system:nodewright`` with audience ``sts.amazonaws.com``, or
  through EKS Pod Identity with an association for that same service account (trust limited to the
  session tags of this cluster's ARN and that service account).
"""

from __future__ import annotations

from cdktn import Fn, TerraformLocal, TerraformOutput
from cdktn_provider_aws.eks_access_entry import EksAccessEntry
from cdktn_provider_aws.eks_pod_identity_association import EksPodIdentityAssociation
from cdktn_provider_aws.iam_instance_profile import IamInstanceProfile
from cdktn_provider_aws.iam_openid_connect_provider import IamOpenidConnectProvider
from cdktn_provider_aws.iam_policy import IamPolicy
from cdktn_provider_aws.iam_role import IamRole
from cdktn_provider_aws.iam_role_policy_attachment import IamRolePolicyAttachment
from constructs import Construct

from stacks import policies
from stacks.base import NodewrightStack, to_json
from stacks.cluster import ClusterStack, node_role
from stacks.interruption import InterruptionStack
from stacks.settings import CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT, IdentityMode, InfraSettings


class IdentityStack(NodewrightStack):
    """IAM for the controller and its nodes.

    Attributes:
        node_role: role of launched nodes; its *name* goes to the chart's ``nodeRole``.
        controller_role: role the controller's pods assume.
        controller_policies: part name -> its ``aws_iam_policy`` (attached to ``controller_role``).
        instance_profile: instance profile wrapping ``node_role``.
    """

    def __init__(self, scope: Construct, stack_id: str, settings: InfraSettings,
                 cluster: ClusterStack, interruption: InterruptionStack) -> None:
        super().__init__(scope, stack_id, settings)
        self.node_role = node_role(self, "node_role", settings.node_role_name)
        self.instance_profile = IamInstanceProfile(self, "node_instance_profile", name=settings.node_role_name,
                                                   role=self.node_role.name)
        # API authentication mode: nodes join through an access entry, not the aws-auth ConfigMap.
        EksAccessEntry(self, "node_access_entry", cluster_name=cluster.cluster.name,
                       principal_arn=self.node_role.arn, type="EC2_LINUX")
        context = policies.ControllerPolicyContext(
            partition=self.partition, account_id=self.account_id, region=settings.region,
            cluster_name=settings.cluster_name, cluster_arn=cluster.cluster.arn,
            queue_arn=interruption.queue.arn, node_role_arn=self.node_role.arn)
        if settings.identity_mode is IdentityMode.IRSA:
            trust = self._irsa_trust(cluster)
        else:
            trust = policies.pod_identity_trust_policy(cluster.cluster.arn, CONTROLLER_NAMESPACE,
                                                       CONTROLLER_SERVICE_ACCOUNT)
        self.controller_role = IamRole(self, "controller_role", name=settings.controller_role_name,
                                       assume_role_policy=to_json(trust))
        self.controller_policies: dict[str, IamPolicy] = {}
        for part, document in policies.controller_policies(context).items():
            construct = part.replace("-", "_")
            self.controller_policies[part] = IamPolicy(
                self, f"controller_{construct}_policy", name=f"{settings.controller_role_name}-{part}",
                description=f"nodewright controller: {part.replace('-', ' ')}", policy=to_json(document))
            IamRolePolicyAttachment(self, f"controller_{construct}_policy_attachment",
                                    role=self.controller_role.name, policy_arn=self.controller_policies[part].arn)
        if settings.identity_mode is IdentityMode.POD_IDENTITY:
            EksPodIdentityAssociation(self, "controller_pod_identity", cluster_name=cluster.cluster.name,
                                      namespace=CONTROLLER_NAMESPACE, service_account=CONTROLLER_SERVICE_ACCOUNT,
                                      role_arn=self.controller_role.arn)
        TerraformOutput(self, "controller_role_arn", value=self.controller_role.arn)
        TerraformOutput(self, "node_role_arn", value=self.node_role.arn)
        TerraformOutput(self, "node_role_name", value=self.node_role.name)
        TerraformOutput(self, "node_instance_profile_name", value=self.instance_profile.name)

    def _irsa_trust(self, cluster: ClusterStack) -> policies.Document:
        provider = IamOpenidConnectProvider(self, "oidc_provider", url=cluster.oidc_issuer_url,
                                            client_id_list=["sts.amazonaws.com"])
        # A local keeps the trust policy valid JSON: its condition keys become
        # "${local.oidc_issuer_host}:sub" rather than an expression with quoted arguments.
        issuer_host = TerraformLocal(self, "oidc_issuer_host", Fn.replace(cluster.oidc_issuer_url, "https://", ""))
        return policies.irsa_trust_policy(provider.arn, issuer_host.as_string, self.settings.controller_subject)
