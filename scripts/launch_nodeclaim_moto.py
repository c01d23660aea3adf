#!/usr/bin/env python3
"""Launch one NodeClaim end to end through the AWS provider against moto over real HTTP (127.0.0.1).

What it does, in order (issue 4's "Done when"):

1. starts moto's ``ThreadedMotoServer`` on 127.0.0.1 (a free port; stopped at the end);
2. creates a VPC with three subnets and a security group tagged ``karpenter.sh/discovery=<cluster>``, the
   node role, and the public EKS AL2023 AMI parameters (moto refuses PutParameter under ``/aws/service/``,
   so they are written into moto's SSM backend, which the in-process server shares);
3. launches a NodeClaim with ``AWSCloudProvider.create`` (instance profile created, launch template
   created, ``CreateFleet`` with the cluster/nodepool/nodeclaim/nodeclass/Name tags; moto has no Pricing API,
   so the bundled price table stands in, which the provider logs and flags in its metric);
4. checks the instance's tags, terminates it with ``delete``, and checks a second ``delete`` reports
   NodeClaimNotFoundError;
5. replays the first field report's failure -- ``iam:AddRoleToInstanceProfile`` denied for lack of
   ``iam:PassRole`` (botocore Stubber: moto does not evaluate PassRole) -- and prints the one sentence.

Run: ``.venv/bin/python scripts/launch_nodeclaim_moto.py`` (exit 0 and a summary table when all holds).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import sys
import time
from typing import Any

import boto3
from botocore.stub import Stubber
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.ec2.models.amis import Ami
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter, ssm_backends

from nodewright.api.ec2nodeclass import EC2NodeClass
from nodewright.api.nodeclaim import NodeClaim
from nodewright.cloud.aws.clients import AWSClients, ClientSettings
from nodewright.cloud.aws.instanceprofiles import InstanceProfileProvider
from nodewright.cloud.aws.provider import AWSCloudProvider, AWSProviderSettings
from nodewright.cloud.provider import AuthorizationError, NodeClaimNotFoundError, parse_provider_id

REGION = "us-east-1"
CLUSTER = "demo"
K8S = "1.31"
# moto serialises all ~1,400 instance types in several seconds; these keep the run short.
TYPES = ("t3.medium", "t3.large", "m5.large", "m5.xlarge", "c5.large", "c5.xlarge")
EXPECTED_TAGS = {f"kubernetes.io/cluster/{CLUSTER}": "owned", "eks:eks-cluster-name": CLUSTER,
                 "karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": "default-abcde",
                 "karpenter.k8s.aws/ec2nodeclass": "default", "Name": "default/default-abcde"}


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def put_public_parameter(name: str, value: str) -> None:
    """Write an AWS-public SSM parameter into moto's backend (moto's PutParameter refuses ``/aws/``)."""
    versions = ssm_backends[DEFAULT_ACCOUNT_ID][REGION]._parameters[name]
    versions.append(Parameter(account_id=DEFAULT_ACCOUNT_ID, name=name, value=value, parameter_type="String",
                              description=None, allowed_pattern=None, keyid=None,
                              last_modified_date=dt.datetime.now(dt.UTC), version=len(versions) + 1,
                              data_type="aws:ec2:image"))


def build_cluster(endpoint: str) -> dict[str, Any]:
    """Discovery-tagged subnets and security group, node role, AL2023 AMI parameters."""
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint)
    iam = boto3.client("iam", region_name=REGION, endpoint_url=endpoint)
    tag = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = {}
    for index, zone in enumerate(("us-east-1a", "us-east-1b", "us-east-1c")):
        subnets[zone] = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{index}.0/24", AvailabilityZone=zone,
                                          TagSpecifications=[{"ResourceType": "subnet", "Tags": tag}])["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="demo-nodes", Description="nodes", VpcId=vpc,
                                      TagSpecifications=[{"ResourceType": "security-group", "Tags": tag}])["GroupId"]
    # The EKS AL2023 image as AWS publishes it (moto's RegisterImage would drop architecture and owner).
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    amd64 = "ami-0eks0al2023x8600"
    backend.amis[amd64] = Ami(backend, amd64, name=f"amazon-eks-node-al2023-x86_64-standard-{K8S}-v20250715",
                              architecture="x86_64", owner_id="602401143452", virtualization_type="hvm",
                              root_device_name="/dev/xvda", root_device_type="ebs")
    put_public_parameter(f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/x86_64/standard/recommended/image_id",
                         amd64)
    iam.create_role(RoleName="KarpenterNodeRole-demo", AssumeRolePolicyDocument="{}")
    return {"subnets": subnets, "security_group": group, "ami": amd64}


def nodeclass() -> EC2NodeClass:
    """The EC2NodeClass of the run: AL2023 latest, discovery tags, managed instance profile."""
    return EC2NodeClass.model_validate({"metadata": {"name": "default"}, "spec": {
        "role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}]}})


def nodeclaim() -> NodeClaim:
    """The NodeClaim the provisioner would write for the first field report's pods."""
    return NodeClaim.model_validate({
        "metadata": {"name": "default-abcde", "uid": "5b2c0a4e-0000-4000-8000-000000000001",
                     "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In",
             "values": ["t3.large", "m5.large", "t3.xlarge", "m5.xlarge"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}})


def passrole_denial() -> str:
    """The sentence the controller shows when the node role cannot be passed (Stubber replays AWS's denial)."""
    iam = boto3.client("iam", region_name=REGION)
    stubber = Stubber(iam)
    stubber.add_client_error("get_instance_profile", service_error_code="NoSuchEntity", http_status_code=404)
    stubber.add_response("create_instance_profile", {"InstanceProfile": {
        "Path": "/", "InstanceProfileName": "p", "InstanceProfileId": "AIPAEXAMPLE0000000000",
        "Arn": "arn:aws:iam::111122223333:instance-profile/p", "CreateDate": dt.datetime(2026, 7, 20), "Roles": []}})
    stubber.add_client_error("add_role_to_instance_profile", service_error_code="AccessDenied", http_status_code=403,
                             service_message=(
        "User: arn:aws:sts::111122223333:assumed-role/KarpenterControllerRole-demo/1732965000 is not authorized to "
        "perform: iam:PassRole on resource: arn:aws:iam::111122223333:role/KarpenterNodeRole-demo because no "
        "identity-based policy allows the iam:PassRole action"))
    stubber.activate()
    try:
        InstanceProfileProvider(iam, CLUSTER, REGION).resolve("default", "KarpenterNodeRole-demo", None)
    except AuthorizationError as err:
        return str(err)
    raise AssertionError("the PassRole denial was not raised")


def run(endpoint: str) -> dict[str, Any]:
    """Steps 2-5 against a moto server at ``endpoint``; returns what was observed."""
    network = build_cluster(endpoint)
    clients = AWSClients(ClientSettings(REGION, endpoint_url=endpoint, max_attempts=2, read_timeout=20))
    settings = AWSProviderSettings(CLUSTER, "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com", REGION, K8S,
                                   ca_bundle="Q0EtREFUQQ==", cluster_cidr="10.100.0.0/16", instance_type_patterns=TYPES)
    provider = AWSCloudProvider(settings, clients, {"default": nodeclass()}.get)
    started = time.perf_counter()
    launched = provider.create(nodeclaim())
    launch_seconds = time.perf_counter() - started
    zone, instance_id = parse_provider_id(launched.status.provider_id or "")
    raw = clients.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in raw.get("Tags", [])}
    profile = provider.resolve_nodeclass(nodeclass()).instance_profile
    roles = [r["RoleName"] for r in clients.iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]["Roles"]]
    templates = [t["LaunchTemplateName"] for t in clients.ec2.describe_launch_templates()["LaunchTemplates"]]
    provider.delete(launched)
    state = clients.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]
    try:
        provider.delete(launched)
        second_delete = "deleted again"
    except NodeClaimNotFoundError:
        second_delete = "NodeClaimNotFoundError"
    return {"instance_id": instance_id, "instance_type": raw["InstanceType"], "zone": zone,
            "subnet_ok": raw["SubnetId"] == network["subnets"][zone], "image_id": launched.status.image_id,
            "ami_ok": launched.status.image_id == network["ami"], "tags": tags, "instance_profile": profile,
            "profile_roles": roles, "launch_templates": templates, "state_after_delete": state,
            "second_delete": second_delete, "pricing_fallback": provider.pricing.on_demand_fallback,
            "launch_seconds": launch_seconds, "passrole_message": passrole_denial()}


def main() -> int:
    """Run everything against a fresh moto server; print a summary; exit 1 if any expectation fails."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        os.environ[key] = "testing"
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request access log
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        result = run(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
    checks = {
        "instance launched in a discovered subnet": result["subnet_ok"],
        "AMI from the al2023@latest SSM parameter": result["ami_ok"],
        "fleet tags": result["tags"] == EXPECTED_TAGS,
        "instance profile holds the node role": result["profile_roles"] == ["KarpenterNodeRole-demo"],
        "instance terminated": result["state_after_delete"] in ("shutting-down", "terminated"),
        "second delete reports NodeClaimNotFoundError": result["second_delete"] == "NodeClaimNotFoundError",
        "PassRole sentence": result["passrole_message"].startswith(
            "the controller role arn:aws:iam::111122223333:role/KarpenterControllerRole-demo may not iam:PassRole"),
    }
    print(f"{'field':<28} value")
    for key in ("instance_id", "instance_type", "zone", "image_id", "instance_profile", "launch_templates",
                "state_after_delete", "second_delete", "pricing_fallback"):
        print(f"{key:<28} {result[key]}")
    print(f"{'launch_seconds':<28} {result['launch_seconds']:.2f}")
    print(f"{'tags':<28} {result['tags']}")
    print(f"{'passrole_message':<28} {result['passrole_message']}")
    print()
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
