"""cluster: the EKS control plane, its encryption and logs, access entries, core add-ons and the
small managed node group that runs the controller.

The controller must not run on nodes it manages (it could drain or terminate its own node), so
it runs on an on-demand managed node group tainted ``CriticalAddonsOnly=true:NoSchedule``; the
chart tolerates that taint and requires ``karpenter.sh/nodepool DoesNotExist``.
"""

from __future__ import annotations

from cdktn import TerraformOutput, Token
from cdktn_provider_aws.cloudwatch_log_group import CloudwatchLogGroup
from cdktn_provider_aws.eks_access_entry import EksAccessEntry
from cdktn_provider_aws.eks_access_policy_association import (
    EksAccessPolicyAssociation,
    EksAccessPolicyAssociationAccessScope,
)
from cdktn_provider_aws.eks_addon import EksAddon
from cdktn_provider_aws.eks_cluster import (
    EksCluster,
    EksClusterAccessConfig,
    EksClusterEncryptionConfig,
    EksClusterEncryptionConfigProvider,
    EksClusterVpcConfig,
)
from cdktn_provider_aws.eks_node_group import (
    EksNodeGroup,
    EksNodeGroupLaunchTemplate,
    EksNodeGroupScalingConfig,
    EksNodeGroupTaint,
    EksNodeGroupUpdateConfig,
)
from cdktn_provider_aws.iam_policy import IamPolicy
from cdktn_provider_aws.iam_role import IamRole
from cdktn_provider_aws.iam_role_policy_attachment import IamRolePolicyAttachment
from cdktn_provider_aws.launch_template import (
    LaunchTemplate,
    LaunchTemplateBlockDeviceMappings,
    LaunchTemplateBlockDeviceMappingsEbs,
    LaunchTemplateMetadataOptions,
    LaunchTemplateTagSpecifications,
)
from cdktn_provider_aws.vpc_security_group_ingress_rule import VpcSecurityGroupIngressRule
from constructs import Construct

from stacks import policies
from stacks.base import NodewrightStack, to_json
from stacks.network import NetworkStack
from stacks.settings import EndpointAccess, IdentityMode, InfraSettings

# All five control-plane log types (EKS UpdateClusterConfig API).
CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]

# AWS managed policies of EC2 worker nodes (EKS user guide, "Amazon EKS node IAM role").
NODE_MANAGED_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
                         "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore")

SYSTEM_NODE_TAINT = {"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}


def node_role(stack: NodewrightStack, construct_id: str, role_name: str) -> IamRole:
    """An EC2 node role with the four managed node policies attached."""
    role = IamRole(stack, construct_id, name=role_name,
                   assume_role_policy=to_json(policies.service_trust_policy(
                       "AllowEC2Nodes", policies.ec2_service_principals(stack.settings.region)[-1])))
    for policy in NODE_MANAGED_POLICIES:
        IamRolePolicyAttachment(stack, f"{construct_id}_{policy}", role=role.name,
                                policy_arn=f"arn:{stack.partition}:iam::aws:policy/{policy}")
    return role


class ClusterStack(NodewrightStack):
    """The EKS cluster.

    Attributes:
        cluster: the ``aws_eks_cluster`` (name, endpoint, OIDC issuer, primary security group).
    """

    def __init__(self, scope: Construct, stack_id: str, settings: InfraSettings, network: NetworkStack) -> None:
        super().__init__(scope, stack_id, settings)
        name = settings.cluster_name
        subnet_ids = [subnet.id for subnet in network.private_subnets]
        log_group_name = f"/aws/eks/{name}/cluster"
        secrets_key = self.kms_key("eks_secrets", "Kubernetes secrets envelope encryption")
        logs_key = self.kms_key("eks_logs", "EKS control-plane logs", log_group_names=(log_group_name,))
        # Created before the cluster so EKS writes into it instead of creating an unencrypted group.
        log_group = CloudwatchLogGroup(self, "control_plane_logs", name=log_group_name,
                                       retention_in_days=settings.log_retention_days, kms_key_id=logs_key.arn)
        role = self._cluster_role(secrets_key.arn)
        public = settings.endpoint_access is EndpointAccess.PUBLIC_AND_PRIVATE
        self.cluster = EksCluster(
            self, "cluster", name=name, version=settings.kubernetes_version, role_arn=role.arn,
            vpc_config=EksClusterVpcConfig(
                subnet_ids=subnet_ids, security_group_ids=[network.node_security_group.id],
                endpoint_private_access=True, endpoint_public_access=public,
                public_access_cidrs=list(settings.public_access_cidrs) if public else None),
            encryption_config=EksClusterEncryptionConfig(
                resources=["secrets"], provider=EksClusterEncryptionConfigProvider(key_arn=secrets_key.arn)),
            enabled_cluster_log_types=CONTROL_PLANE_LOG_TYPES,
            access_config=EksClusterAccessConfig(authentication_mode="API",
                                                 bootstrap_cluster_creator_admin_permissions=True),
            # The managed add-ons below replace the self-managed defaults.
            bootstrap_self_managed_addons=False,
            depends_on=[log_group, *self._role_attachments])
        self._connect_security_groups(network)
        self._admin_access_entries()
        early_addons = self._addons(["vpc-cni", "kube-proxy"]
                                    + (["eks-pod-identity-agent"] if settings.identity_mode is IdentityMode.POD_IDENTITY
                                       else []))
        node_group = self._system_node_group(subnet_ids, early_addons)
        # CoreDNS is a Deployment: it can only become healthy once nodes exist.
        self._addons(["coredns"], depends_on=[node_group])
        TerraformOutput(self, "cluster_name", value=self.cluster.name)
        TerraformOutput(self, "cluster_endpoint", value=self.cluster.endpoint)
        TerraformOutput(self, "cluster_arn", value=self.cluster.arn)
        TerraformOutput(self, "oidc_issuer_url", value=self.cluster.identity.get(0).oidc.get(0).issuer)

    @property
    def certificate_authority(self) -> str:
        """Base64 PEM of the cluster CA (a reference)."""
        return self.cluster.certificate_authority.get(0).data

    @property
    def oidc_issuer_url(self) -> str:
        """``https://oidc.eks.<region>.amazonaws.com/id/<id>`` (a reference)."""
        return self.cluster.identity.get(0).oidc.get(0).issuer

    def _cluster_role(self, secrets_key_arn: str) -> IamRole:
        name = self.settings.cluster_name
        role = IamRole(self, "cluster_role", name=f"{name}-eks-cluster",
                       assume_role_policy=to_json(policies.service_trust_policy(
                           "AllowEksControlPlane", "eks.amazonaws.com", ("sts:AssumeRole", "sts:TagSession"))))
        managed = IamRolePolicyAttachment(self, "cluster_role_AmazonEKSClusterPolicy", role=role.name,
                                          policy_arn=f"arn:{self.partition}:iam::aws:policy/AmazonEKSClusterPolicy")
        encryption = IamPolicy(self, "cluster_encryption_policy", name=f"{name}-eks-secrets-encryption",
                               description="EKS envelope encryption of Kubernetes secrets",
                               policy=to_json(policies.cluster_encryption_policy(secrets_key_arn)))
        attached = IamRolePolicyAttachment(self, "cluster_role_encryption", role=role.name,
                                           policy_arn=encryption.arn)
        self._role_attachments = [managed, attached]
        return role

    def _connect_security_groups(self, network: NetworkStack) -> None:
        # The managed node group's nodes carry the EKS-created cluster security group; nodes the
        # controller launches carry the node security group. Pods on both must reach each other
        # (CoreDNS on system nodes, services on launched nodes).
        cluster_sg = self.cluster.vpc_config.cluster_security_group_id
        node_sg = network.node_security_group.id
        VpcSecurityGroupIngressRule(self, "node_from_cluster_sg", security_group_id=node_sg, ip_protocol="-1",
                                    referenced_security_group_id=cluster_sg,
                                    description="All traffic from system nodes and the control plane")
        VpcSecurityGroupIngressRule(self, "cluster_from_node_sg", security_group_id=cluster_sg, ip_protocol="-1",
                                    referenced_security_group_id=node_sg,
                                    description="All traffic from nodes launched by nodewright")

    def _admin_access_entries(self) -> None:
        for i, arn in enumerate(self.settings.admin_principal_arns):
            entry = EksAccessEntry(self, f"admin_{i}", cluster_name=self.cluster.name, principal_arn=arn,
                                   type="STANDARD")
            EksAccessPolicyAssociation(
                self, f"admin_{i}_policy", cluster_name=self.cluster.name, principal_arn=arn,
                policy_arn=f"arn:{self.partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
                access_scope=EksAccessPolicyAssociationAccessScope(type="cluster"), depends_on=[entry])

    def _addons(self, names: list[str], depends_on: list[EksNodeGroup] | None = None) -> list[EksAddon]:
        # No addon_version: EKS installs the default version for the cluster's Kubernetes version.
        return [EksAddon(self, f"addon_{addon.replace('-', '_')}", cluster_name=self.cluster.name,
                         addon_name=addon, resolve_conflicts_on_create="OVERWRITE",
                         resolve_conflicts_on_update="OVERWRITE", depends_on=list(depends_on or []))
                for addon in names]

    def _system_node_group(self, subnet_ids: list[str], after: list[EksAddon]) -> EksNodeGroup:
        settings = self.settings
        nodes = settings.system_nodes
        role = node_role(self, "system_node_role", f"{settings.cluster_name}-system-node")
        # IMDSv2 only with hop limit 1 (pods use IRSA/Pod Identity, never the node's credentials)
        # and an encrypted root volume.
        template = LaunchTemplate(
            self, "system_nodes_lt", name=f"{settings.cluster_name}-system-nodes",
            update_default_version=True,
            metadata_options=LaunchTemplateMetadataOptions(http_endpoint="enabled", http_tokens="required",
                                                           http_put_response_hop_limit=1),
            block_device_mappings=[LaunchTemplateBlockDeviceMappings(
                device_name="/dev/xvda",
                ebs=LaunchTemplateBlockDeviceMappingsEbs(volume_size=nodes.disk_size_gib, volume_type="gp3",
                                                         encrypted="true", delete_on_termination="true"))],
            tag_specifications=[LaunchTemplateTagSpecifications(
                resource_type="instance", tags={"Name": f"{settings.cluster_name}-system"})])
        return EksNodeGroup(
            self, "system_nodes", cluster_name=self.cluster.name, node_group_name="system",
            node_role_arn=role.arn, subnet_ids=subnet_ids, capacity_type="ON_DEMAND",
            instance_types=list(nodes.instance_types), ami_type=nodes.ami_type,
            scaling_config=EksNodeGroupScalingConfig(desired_size=nodes.size, min_size=nodes.size,
                                                     max_size=nodes.size + 1),
            update_config=EksNodeGroupUpdateConfig(max_unavailable=1),
            launch_template=EksNodeGroupLaunchTemplate(id=template.id,
                                                       version=Token.as_string(template.latest_version)),
            taint=[EksNodeGroupTaint(**SYSTEM_NODE_TAINT)],
            labels={"nodewright.io/system": "true"},
            depends_on=after)
