"""network: VPC, public and private subnets per zone, NAT, routes, node security group, flow logs.

Private subnets and the node security group carry ``karpenter.sh/discovery: <cluster>``: the
chart's EC2NodeClasses select subnets and security groups by exactly that tag (Karpenter v1
``subnetSelectorTerms`` / ``securityGroupSelectorTerms`` convention).
"""

from __future__ import annotations

import ipaddress
import math

from cdktn import TerraformOutput
from cdktn_provider_aws.cloudwatch_log_group import CloudwatchLogGroup
from cdktn_provider_aws.default_security_group import DefaultSecurityGroup
from cdktn_provider_aws.eip import Eip
from cdktn_provider_aws.flow_log import FlowLog
from cdktn_provider_aws.iam_role import IamRole
from cdktn_provider_aws.iam_role_policy import IamRolePolicy
from cdktn_provider_aws.internet_gateway import InternetGateway
from cdktn_provider_aws.nat_gateway import NatGateway
from cdktn_provider_aws.route import Route
from cdktn_provider_aws.route_table import RouteTable
from cdktn_provider_aws.route_table_association import RouteTableAssociation
from cdktn_provider_aws.security_group import SecurityGroup
from cdktn_provider_aws.subnet import Subnet
from cdktn_provider_aws.vpc import Vpc
from cdktn_provider_aws.vpc_security_group_egress_rule import VpcSecurityGroupEgressRule
from cdktn_provider_aws.vpc_security_group_ingress_rule import VpcSecurityGroupIngressRule
from constructs import Construct

from stacks import policies
from stacks.base import NodewrightStack, to_json
from stacks.settings import InfraSettings

DISCOVERY_TAG = "karpenter.sh/discovery"


def subnet_cidrs(vpc_cidr: str, az_count: int) -> tuple[list[str], list[str]]:
    """Split the VPC into ``az_count`` private and ``az_count`` public subnets.

    Private subnets get the large blocks (the VPC CNI gives every pod a VPC address); the public
    subnets, which hold only NAT gateways and load balancers, share the last block.

    Example: ``10.0.0.0/16`` and 3 zones give private ``10.0.0.0/18``, ``10.0.64.0/18``,
    ``10.0.128.0/18`` and public ``10.0.192.0/20``, ``10.0.208.0/20``, ``10.0.224.0/20``.

    Returns:
        ``(private, public)`` lists of CIDR strings, one per zone, in zone order.
    """
    vpc = ipaddress.IPv4Network(vpc_cidr)
    bits = math.ceil(math.log2(az_count + 1))
    blocks = list(vpc.subnets(prefixlen_diff=bits))
    public_block = blocks[-1]
    public = list(public_block.subnets(prefixlen_diff=math.ceil(math.log2(az_count))))
    return [str(b) for b in blocks[:az_count]], [str(b) for b in public[:az_count]]


class NetworkStack(NodewrightStack):
    """The VPC the cluster and every launched node live in.

    Attributes:
        vpc: the VPC.
        private_subnets: one private subnet per zone (nodes, control-plane ENIs).
        node_security_group: security group of nodes the controller launches.
    """

    def __init__(self, scope: Construct, stack_id: str, settings: InfraSettings) -> None:
        super().__init__(scope, stack_id, settings)
        name = settings.cluster_name
        self.vpc = Vpc(self, "vpc", cidr_block=settings.vpc_cidr, enable_dns_hostnames=True,
                       enable_dns_support=True, tags={"Name": name})
        # Strip the default security group of every rule, so nothing can use it by accident.
        DefaultSecurityGroup(self, "default_sg", vpc_id=self.vpc.id, ingress=[], egress=[],
                             tags={"Name": f"{name}-default-deny"})
        zones = settings.zones
        private_cidrs, public_cidrs = subnet_cidrs(settings.vpc_cidr, settings.az_count)
        igw = InternetGateway(self, "igw", vpc_id=self.vpc.id, tags={"Name": name})
        public_rt = RouteTable(self, "public_rt", vpc_id=self.vpc.id, tags={"Name": f"{name}-public"})
        Route(self, "public_default_route", route_table_id=public_rt.id,
              destination_cidr_block="0.0.0.0/0", gateway_id=igw.id)
        self.public_subnets: list[Subnet] = []
        self.private_subnets: list[Subnet] = []
        nat_gateways: list[NatGateway] = []
        for i, zone in enumerate(zones):
            public = Subnet(self, f"public_{i}", vpc_id=self.vpc.id, cidr_block=public_cidrs[i],
                            availability_zone=zone, map_public_ip_on_launch=False,
                            tags={"Name": f"{name}-public-{i}", "kubernetes.io/role/elb": "1"})
            RouteTableAssociation(self, f"public_{i}_rta", subnet_id=public.id, route_table_id=public_rt.id)
            self.public_subnets.append(public)
            if i == 0 or not settings.single_nat_gateway:
                eip = Eip(self, f"nat_{i}_eip", domain="vpc", tags={"Name": f"{name}-nat-{i}"})
                nat_gateways.append(NatGateway(self, f"nat_{i}", allocation_id=eip.id, subnet_id=public.id,
                                               tags={"Name": f"{name}-nat-{i}"}, depends_on=[igw]))
            private = Subnet(self, f"private_{i}", vpc_id=self.vpc.id, cidr_block=private_cidrs[i],
                             availability_zone=zone,
                             tags={"Name": f"{name}-private-{i}", DISCOVERY_TAG: name,
                                   "kubernetes.io/role/internal-elb": "1"})
            private_rt = RouteTable(self, f"private_{i}_rt", vpc_id=self.vpc.id,
                                    tags={"Name": f"{name}-private-{i}"})
            Route(self, f"private_{i}_default_route", route_table_id=private_rt.id,
                  destination_cidr_block="0.0.0.0/0", nat_gateway_id=nat_gateways[-1].id)
            RouteTableAssociation(self, f"private_{i}_rta", subnet_id=private.id, route_table_id=private_rt.id)
            self.private_subnets.append(private)
        self.node_security_group = self._node_security_group()
        self._flow_logs()
        TerraformOutput(self, "vpc_id", value=self.vpc.id)
        TerraformOutput(self, "private_subnet_ids", value=[s.id for s in self.private_subnets])
        TerraformOutput(self, "node_security_group_id", value=self.node_security_group.id)

    def _node_security_group(self) -> SecurityGroup:
        name = self.settings.cluster_name
        sg = SecurityGroup(self, "node_sg", name=f"{name}-node", vpc_id=self.vpc.id,
                           description=f"Nodes of EKS cluster {name} launched by nodewright; also on the "
                                       "control-plane ENIs",
                           tags={"Name": f"{name}-node", DISCOVERY_TAG: name})
        # Node-to-node and control-plane-to-node traffic: the cluster stack attaches this group to
        # the control-plane ENIs, so one self rule covers kubelet, webhooks and pod networking.
        VpcSecurityGroupIngressRule(self, "node_sg_self", security_group_id=sg.id, ip_protocol="-1",
                                    referenced_security_group_id=sg.id,
                                    description="All traffic between nodes and the control plane")
        # Nodes pull images and call AWS APIs through the NAT gateways.
        VpcSecurityGroupEgressRule(self, "node_sg_egress", security_group_id=sg.id, ip_protocol="-1",
                                   cidr_ipv4="0.0.0.0/0", description="Outbound to AWS APIs and registries")
        return sg

    def _flow_logs(self) -> None:
        name = self.settings.cluster_name
        group_name = f"/aws/vpc/{name}/flow-logs"
        key = self.kms_key("flow_logs", "VPC flow logs", log_group_names=(group_name,))
        group = CloudwatchLogGroup(self, "flow_logs_group", name=group_name,
                                   retention_in_days=self.settings.log_retention_days, kms_key_id=key.arn)
        role = IamRole(self, "flow_logs_role", name=f"{name}-vpc-flow-logs",
                       assume_role_policy=to_json(policies.service_trust_policy(
                           "AllowVpcFlowLogsDelivery", "vpc-flow-logs.amazonaws.com",
                           source_account=self.account_id)))
        IamRolePolicy(self, "flow_logs_policy", name="flow-logs-delivery", role=role.id,
                      policy=to_json(policies.flow_logs_delivery_policy(group.arn)))
        FlowLog(self, "flow_log", vpc_id=self.vpc.id, traffic_type="ALL", log_destination_type="cloud-watch-logs",
                log_destination=group.arn, iam_role_arn=role.arn, max_aggregation_interval=60,
                tags={"Name": f"{name}-vpc"})
