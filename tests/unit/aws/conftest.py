"""Fixtures for the AWS provider tests: an in-process moto account with a discoverable EKS-style VPC.

moto gaps are filled here, in one place: EKS/Bottlerocket AMI parameters live under the reserved
``/aws/service/`` prefix that moto's PutParameter refuses, so :func:`put_public_parameter` writes them into
moto's SSM backend directly; the Pricing API is not implemented by moto, so tests use botocore's Stubber.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.ec2.models.amis import Ami
from moto.ssm.models import Parameter, ssm_backends

from nodewright.api.ec2nodeclass import EC2NodeClass
from nodewright.api.nodeclaim import NodeClaim
from nodewright.cloud.aws.clients import AWSClients, ClientSettings
from nodewright.cloud.aws.provider import AWSCloudProvider, AWSProviderSettings

REGION = "us-east-1"
CLUSTER = "demo"
K8S = "1.31"
ENDPOINT = "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com"
CA = "Q0EtREFUQQ=="
AL2023_X86 = f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/x86_64/standard/recommended/image_id"
AL2023_ARM = f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/arm64/standard/recommended/image_id"
BR_X86 = f"/aws/service/bottlerocket/aws-k8s-{K8S}/x86_64/latest/image_id"

#: The tests describe these types only: moto serialises all ~1,400 types in ~8 s, too slow per test (and
#: moto's instance-type filter matches exact names only, where AWS also takes wildcards such as ``m5.*``).
TYPE_PATTERNS = ("m5.large", "m5.xlarge", "m5.2xlarge", "c5.large", "c5.xlarge", "t3.large", "m6g.large",
                 "g4dn.xlarge")
#: Live on-demand prices the stubbed Pricing API returns (USD/hour).
LIVE_PRICES = {"m5.large": 0.096, "m5.xlarge": 0.192, "c5.large": 0.085, "t3.large": 0.0832, "m6g.large": 0.077}


def put_public_parameter(name: str, value: str, region: str = REGION) -> None:
    """Write an AWS-public SSM parameter (``/aws/service/...``) into moto's backend (PutParameter refuses)."""
    backend = ssm_backends[DEFAULT_ACCOUNT_ID][region]
    versions = backend._parameters[name]
    versions.append(Parameter(account_id=DEFAULT_ACCOUNT_ID, name=name, value=value, parameter_type="String",
                              description=None, allowed_pattern=None, keyid=None,
                              last_modified_date=dt.datetime.now(dt.UTC), version=len(versions) + 1,
                              data_type="aws:ec2:image"))


def add_image(name: str, architecture: str, owner: str = "602401143452") -> str:
    """Register an image with an architecture and owner (moto's RegisterImage drops both); returns its id."""
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    image_id = "ami-" + hashlib.sha256(f"{name}/{architecture}".encode()).hexdigest()[:17]
    backend.amis[image_id] = Ami(backend, image_id, name=name, architecture=architecture, owner_id=owner,
                                 virtualization_type="hvm", root_device_name="/dev/xvda", root_device_type="ebs")
    return image_id


def price_list_entry(instance_type: str, usd: float) -> str:
    """One ``GetProducts`` PriceList document (JSON text), shaped like AWS's."""
    import json

    return json.dumps({
        "product": {"productFamily": "Compute Instance",
                    "attributes": {"instanceType": instance_type, "regionCode": REGION, "operatingSystem": "Linux",
                                   "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}},
        "terms": {"OnDemand": {"SKU.JRTCKXETXF": {"priceDimensions": {"SKU.JRTCKXETXF.6YS6EN2CT7": {
            "unit": "Hrs", "pricePerUnit": {"USD": f"{usd:.10f}"}}}}}},
    })


def stubbed_pricing(prices: dict[str, float] | None = None, fail: bool = False) -> tuple[Any, Stubber]:
    """A pricing client whose GetProducts answers ``prices`` once (or fails with ``fail``)."""
    client = boto3.client("pricing", region_name="us-east-1")
    stubber = Stubber(client)
    if fail:
        stubber.add_client_error("get_products", service_error_code="ThrottlingException",
                                 service_message="Rate exceeded", http_status_code=400)
    else:
        stubber.add_response("get_products", {
            "PriceList": [price_list_entry(t, p) for t, p in sorted((prices or LIVE_PRICES).items())],
            "FormatVersion": "aws_v1"})
    stubber.activate()
    return client, stubber


@dataclass
class Cluster:
    """What the moto fixture created."""

    vpc_id: str
    subnets: dict[str, str]  # zone -> subnet id
    security_group: str
    ami_amd64: str
    ami_arm64: str
    role_arn: str


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region so nothing can reach real AWS."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION,
                       # moto builds ~1,300 public images per account otherwise: 1-2 s per test.
                       "MOTO_EC2_LOAD_DEFAULT_AMIS": "false"}.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def moto(aws_env: None) -> Iterator[None]:
    """An in-process moto account for the test."""
    with mock_aws():
        yield


def make_cluster(ec2: Any, iam: Any) -> Cluster:
    """VPC with discovery-tagged subnets in three zones (different free-IP counts), a decoy subnet, a tagged
    security group, EKS AMI parameters for amd64 and arm64, and the node role."""
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = {}
    for zone, cidr in (("us-east-1a", "10.0.0.0/24"), ("us-east-1b", "10.0.1.0/25"), ("us-east-1c", "10.0.2.0/26")):
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone, TagSpecifications=[
            {"ResourceType": "subnet", "Tags": [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]}])["Subnet"]
        subnets[zone] = subnet["SubnetId"]
    ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.8.0/22", AvailabilityZone="us-east-1a")  # untagged decoy
    group = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc, TagSpecifications=[
        {"ResourceType": "security-group", "Tags": [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]}])["GroupId"]
    amd64 = add_image("amazon-eks-node-al2023-x86_64-standard-1.31-v20250715", "x86_64")
    arm64 = add_image("amazon-eks-node-al2023-arm64-standard-1.31-v20250715", "arm64")
    put_public_parameter(AL2023_X86, amd64)
    put_public_parameter(AL2023_ARM, arm64)
    put_public_parameter(BR_X86, amd64)
    role = iam.create_role(RoleName="KarpenterNodeRole-demo", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    return Cluster(vpc, subnets, group, amd64, arm64, role)


@pytest.fixture
def cluster(moto: None) -> Cluster:
    """The discoverable cluster network inside moto."""
    return make_cluster(boto3.client("ec2", region_name=REGION), boto3.client("iam", region_name=REGION))


def nodeclass(name: str = "default", alias: str = "al2023@latest", **spec: Any) -> EC2NodeClass:
    """An EC2NodeClass discovering the fixture cluster's subnets and security groups."""
    return EC2NodeClass.model_validate({
        "metadata": {"name": name},
        "spec": {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": alias}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}], **spec}})


def nodeclaim(name: str = "default-x7k2p", types: tuple[str, ...] = ("m5.large", "c5.large", "m5.xlarge"),
              capacity_types: tuple[str, ...] = ("on-demand",), zones: tuple[str, ...] | None = None,
              nodeclass_name: str = "default") -> NodeClaim:
    """A NodeClaim as the provisioner writes it: candidates as requirements."""
    requirements: list[dict[str, Any]] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(types)},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(capacity_types)},
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
    ]
    if zones:
        requirements.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(zones)})
    return NodeClaim.model_validate({
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"karpenter.sh/nodepool": "default",
                                                                     "team": "payments"}},
        "spec": {"requirements": requirements,
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass_name},
                 "taints": [{"key": "dedicated", "value": "payments", "effect": "NoSchedule"}]}})


# One botocore session for every test: a fresh one re-reads the EC2 service model (~1 s).
_SESSION = boto3.session.Session()


def make_provider(nodeclasses: dict[str, EC2NodeClass], pricing: Any, clock: Any = None,
                  endpoint_url: str | None = None, **settings: Any) -> AWSCloudProvider:
    """An AWSCloudProvider over moto (or a moto server at ``endpoint_url``) with a stubbed Pricing API;
    ``settings``: further :class:`AWSProviderSettings` fields (``reserved_capacity=False``)."""
    clients = AWSClients(ClientSettings(REGION, endpoint_url=endpoint_url, max_attempts=2, read_timeout=10),
                         session=_SESSION, overrides={"pricing": pricing})
    settings = AWSProviderSettings(CLUSTER, ENDPOINT, REGION, K8S, ca_bundle=CA, cluster_cidr="10.100.0.0/16",
                                   instance_type_patterns=TYPE_PATTERNS, **settings)
    kwargs = {"clock": clock} if clock is not None else {}
    return AWSCloudProvider(settings, clients, nodeclasses.get, **kwargs)


@pytest.fixture
def provider(cluster: Cluster) -> AWSCloudProvider:
    """Provider with one EC2NodeClass ``default`` (AL2023) and live prices from the stubbed Pricing API."""
    pricing, _ = stubbed_pricing()
    return make_provider({"default": nodeclass()}, pricing)
