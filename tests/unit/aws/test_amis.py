"""AMI resolution: alias SSM paths, moto-backed alias and tag lookups, compatibility with instance types."""

from __future__ import annotations

import boto3
from botocore.stub import Stubber

from aws.conftest import K8S, REGION, Cluster, add_image
from nodewright.api.ec2nodeclass import AMISelectorTerm
from nodewright.cloud.aws.amis import AMI, AMIProvider, alias_parameters, newest_first
from nodewright.cloud.provider import AuthorizationError


def test_al2023_latest_reads_five_parameters() -> None:
    paths = [(p.path, p.arch, p.variant) for p in alias_parameters("al2023@latest", "1.31")]
    base = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023"
    assert paths == [
        (f"{base}/x86_64/standard/recommended/image_id", "amd64", "standard"),
        (f"{base}/x86_64/nvidia/recommended/image_id", "amd64", "nvidia"),
        (f"{base}/x86_64/neuron/recommended/image_id", "amd64", "neuron"),
        (f"{base}/arm64/standard/recommended/image_id", "arm64", "standard"),
        (f"{base}/arm64/nvidia/recommended/image_id", "arm64", "nvidia"),
    ]


def test_pinned_versions_use_versioned_parameter_names() -> None:
    assert alias_parameters("al2023@v20241024", "1.31")[0].path == (
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/"
        "amazon-eks-node-al2023-x86_64-standard-1.31-v20241024/image_id")
    assert [p.path for p in alias_parameters("bottlerocket@v1.26.1", "1.31")] == [
        "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.26.1/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.26.1/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.31/arm64/1.26.1/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.26.1/image_id",
    ]
    assert alias_parameters("al2@latest", "1.29")[2].path == \
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-gpu/recommended/image_id"


def test_alias_resolves_published_architectures_only(cluster: Cluster) -> None:
    provider = AMIProvider(boto3.client("ec2", region_name=REGION), boto3.client("ssm", region_name=REGION), K8S)
    amis = provider.resolve([AMISelectorTerm(alias="al2023@latest")])
    assert sorted((a.id, a.arch, a.variant) for a in amis) == sorted(
        [(cluster.ami_amd64, "amd64", "standard"), (cluster.ami_arm64, "arm64", "standard")])


def test_tag_term_finds_owned_images_newest_first(cluster: Cluster) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    ids = []
    for name in ("nodes-2024-01", "nodes-2024-02"):
        image_id = add_image(name, "arm64", owner="123456789012")
        ec2.create_tags(Resources=[image_id], Tags=[{"Key": "team", "Value": "platform"}])
        ids.append(image_id)
    provider = AMIProvider(ec2, boto3.client("ssm", region_name=REGION), K8S)
    amis = provider.resolve([AMISelectorTerm(tags={"team": "platform"})])
    assert [a.name for a in amis] == ["nodes-2024-02", "nodes-2024-01"]  # same second: name breaks the tie
    assert {a.arch for a in amis} == {"arm64"}
    assert {a.variant for a in amis} == {""}  # chosen by tags: fits any type of its architecture


def test_newest_first_orders_by_creation_date() -> None:
    old = AMI("ami-1", "b", "amd64", creation_date="2024-01-01T00:00:00.000Z")
    new = AMI("ami-2", "a", "amd64", creation_date="2024-06-01T00:00:00.000Z")
    assert newest_first([old, new]) == [new, old]


def test_variants_fit_only_matching_instance_types() -> None:
    cpu = {"kubernetes.io/arch": "amd64"}
    gpu = {"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-gpu-count": "1",
           "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia"}
    neuron = {"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-accelerator-count": "1"}
    standard, nvidia, neuron_ami = (AMI("ami-s", "", "amd64", v) for v in ("standard", "nvidia", "neuron"))
    assert [standard.fits(x) for x in (cpu, gpu, neuron)] == [True, False, False]
    assert [nvidia.fits(x) for x in (cpu, gpu, neuron)] == [False, True, False]
    assert [neuron_ami.fits(x) for x in (cpu, gpu, neuron)] == [False, False, True]
    assert not AMI("ami-a", "", "arm64").fits(cpu)


def test_ssm_denial_is_an_authorization_error(aws_env: None) -> None:
    ssm = boto3.client("ssm", region_name=REGION)
    stubber = Stubber(ssm)
    stubber.add_client_error("get_parameter", service_error_code="AccessDeniedException", service_message=(
        "User: arn:aws:sts::1:assumed-role/ctl/s is not authorized to perform: ssm:GetParameter on resource: "
        "arn:aws:ssm:us-east-1::parameter/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/"
        "recommended/image_id because no identity-based policy allows the ssm:GetParameter action"))
    stubber.activate()
    provider = AMIProvider(boto3.client("ec2", region_name=REGION), ssm, K8S)
    try:
        provider.resolve([AMISelectorTerm(alias="al2023@latest")])
    except AuthorizationError as err:
        assert str(err).startswith("the controller role arn:aws:iam::1:role/ctl may not ssm:GetParameter on "
                                   "arn:aws:ssm:us-east-1::parameter/aws/service/eks/")
    else:
        raise AssertionError("expected AuthorizationError")
