"""The other configuration: Pod Identity, public+private endpoint, S3 state, one NAT gateway,
explicit zones. Synthesized once for this module."""

from __future__ import annotations

import json

import pytest
from cdktn import Testing as CdkTesting

from .conftest import Synth, policy_of, synthesize

pytestmark = pytest.mark.infra

CONTEXT = {
    "cluster_name": "shop-prod",
    "region": "us-west-2",
    "availability_zones": ["us-west-2a", "us-west-2b", "us-west-2d"],
    "identity_mode": "pod-identity",
    "endpoint_access": "public-and-private",
    "public_access_cidrs": ["203.0.113.0/24"],
    "single_nat_gateway": True,
    "state_backend": {"type": "s3", "bucket": "shop-terraform-state", "region": "us-east-1"},
    "admin_principal_arns": ["arn:aws:iam::111122223333:role/platform-admin"],
}


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("pod-identity"), CONTEXT,
                      {"NODEWRIGHT_INFRA_IMAGE__TAG": "2.0.1"})


def test_pod_identity_association_binds_the_controller_service_account(synth):
    assert CdkTesting.to_have_resource_with_properties(synth.text["identity"], "aws_eks_pod_identity_association", {
        "namespace": "kube-system", "service_account": "nodewright",
        "role_arn": "${aws_iam_role.controller_role.arn}"})
    association = synth.resource("identity", "aws_eks_pod_identity_association", "controller_pod_identity")
    assert synth.resolve(association["cluster_name"]) == ("cluster", "${aws_eks_cluster.cluster.name}")
    assert synth.resources("identity", "aws_iam_openid_connect_provider") == {}


def test_controller_role_trusts_only_eks_pod_identity_for_this_cluster(synth):
    role = synth.resource("identity", "aws_iam_role", "controller_role")
    (stmt,) = policy_of(role, "assume_role_policy")["Statement"]
    assert stmt["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert stmt["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    # The session tags EKS Pod Identity sends (EKS user guide); the cluster ARN is the cluster stack's output.
    cluster_arn = stmt["Condition"]["StringEquals"]["aws:RequestTag/eks-cluster-arn"]
    assert synth.resolve(cluster_arn) == ("cluster", "${aws_eks_cluster.cluster.arn}")
    assert stmt["Condition"] == {"StringEquals": {"aws:RequestTag/eks-cluster-arn": cluster_arn,
                                                  "aws:RequestTag/kubernetes-namespace": "kube-system",
                                                  "aws:RequestTag/kubernetes-service-account": "nodewright"}}


def test_pod_identity_agent_addon_and_no_irsa_annotation(synth):
    addons = sorted(a["addon_name"] for a in synth.resources("cluster", "aws_eks_addon").values())
    assert addons == ["coredns", "eks-pod-identity-agent", "kube-proxy", "vpc-cni"]
    values = json.loads(synth.resource("addons", "helm_release", "nodewright")["values"][0])
    assert values["serviceAccount"] == {"name": "nodewright", "annotations": {}}
    assert values["settings"]["clusterName"] == "shop-prod"
    assert values["settings"]["awsRegion"] == "us-west-2"
    assert values["image"]["tag"] == "2.0.1"


def test_public_endpoint_is_restricted_to_the_configured_cidrs(synth):
    assert CdkTesting.to_have_resource_with_properties(synth.text["cluster"], "aws_eks_cluster", {
        "vpc_config": {"endpoint_private_access": True, "endpoint_public_access": True,
                       "public_access_cidrs": ["203.0.113.0/24"]}})


def test_admin_access_entry_gets_the_cluster_admin_policy(synth):
    entry = synth.resource("cluster", "aws_eks_access_entry", "admin_0")
    assert (entry["principal_arn"], entry["type"]) == ("arn:aws:iam::111122223333:role/platform-admin", "STANDARD")
    association = synth.resource("cluster", "aws_eks_access_policy_association", "admin_0_policy")
    assert association["policy_arn"].endswith(":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy")
    assert association["access_scope"] == {"type": "cluster"}


def test_s3_backend_with_lockfile_for_every_stack_and_its_remote_state(synth):
    for name, doc in synth.docs.items():
        assert doc["terraform"]["backend"] == {"s3": {
            "bucket": "shop-terraform-state", "key": f"nodewright/shop-prod/{name}.tfstate", "region": "us-east-1",
            "encrypt": True, "use_lockfile": True}}
    remote = synth.docs["addons"]["data"]["terraform_remote_state"]["cross-stack-reference-input-identity"]
    assert remote["backend"] == "s3"
    assert remote["config"]["key"] == "nodewright/shop-prod/identity.tfstate"


def test_explicit_zones_and_a_single_nat_gateway(synth):
    subnets = synth.resources("network", "aws_subnet")
    assert [subnets[f"private_{i}"]["availability_zone"] for i in range(3)] == ["us-west-2a", "us-west-2b",
                                                                                "us-west-2d"]
    assert list(synth.resources("network", "aws_nat_gateway")) == ["nat_0"]
    routes = synth.resources("network", "aws_route")
    assert {routes[f"private_{i}_default_route"]["nat_gateway_id"] for i in range(3)} == {"${aws_nat_gateway.nat_0.id}"}


def test_names_follow_the_cluster_name(synth):
    assert synth.resource("interruption", "aws_sqs_queue", "queue")["name"] == "shop-prod-nodewright-interruption"
    assert synth.resource("identity", "aws_iam_role", "node_role")["name"] == "shop-prod-nodewright-node"
    subnet = synth.resource("network", "aws_subnet", "private_0")
    assert subnet["tags"]["karpenter.sh/discovery"] == "shop-prod"
    policy = policy_of(synth.resource("identity", "aws_iam_policy", "controller_node_lifecycle_policy"))
    deletion = next(s for s in policy["Statement"] if s["Sid"] == "AllowScopedDeletion")
    assert deletion["Condition"]["StringEquals"] == {"aws:ResourceTag/kubernetes.io/cluster/shop-prod": "owned"}
    assert all(":us-west-2:" in r for r in deletion["Resource"])
