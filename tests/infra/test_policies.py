"""The policy documents as pure functions: exact statements, scoping and conditions."""

from __future__ import annotations

import pytest

from stacks import policies

CTX = policies.ControllerPolicyContext(
    partition="aws", account_id="111122223333", region="ap-northeast-2", cluster_name="shop",
    cluster_arn="arn:aws:eks:ap-northeast-2:111122223333:cluster/shop",
    queue_arn="arn:aws:sqs:ap-northeast-2:111122223333:shop-nodewright-interruption",
    node_role_arn="arn:aws:iam::111122223333:role/shop-nodewright-node")


def _by_sid(document):
    return {s["Sid"]: s for s in document["Statement"]}


def _actions(statement):
    action = statement["Action"]
    return [action] if isinstance(action, str) else action


def test_controller_policy_has_karpenter_v1_statements_by_sid_in_karpenters_five_policies():
    parts = policies.controller_policies(CTX)
    assert {part: [s["Sid"] for s in doc["Statement"]] for part, doc in parts.items()} == {
        "node-lifecycle": ["AllowScopedEC2InstanceAccessActions", "AllowScopedEC2LaunchTemplateAccessActions",
                           "AllowScopedEC2InstanceActionsWithTags", "AllowScopedResourceCreationTagging",
                           "AllowScopedDeletion", "AllowScopedInstanceReboot"],
        "iam-integration": ["AllowPassingInstanceRole", "AllowScopedInstanceProfileCreationActions",
                            "AllowScopedInstanceProfileActions"],
        "eks-integration": ["AllowAPIServerEndpointDiscovery"],
        "interruption": ["AllowInterruptionQueueActions"],
        "resource-discovery": ["AllowRegionalReadActions", "AllowSSMReadActions", "AllowPricingReadActions",
                               "AllowInstanceProfileReadActions"],
    }
    assert all(doc["Version"] == "2012-10-17" for doc in parts.values())
    assert sorted(s["Sid"] for d in parts.values() for s in d["Statement"]) == sorted(
        _by_sid(policies.controller_policy(CTX)))


# Longest region name of each partition (AWS region lists) and the longest cluster name the settings allow.
LONGEST_REGIONS = {"aws": "ap-southeast-5", "aws-cn": "cn-northwest-1", "aws-us-gov": "us-gov-west-1",
                   "aws-iso": "us-iso-west-1", "aws-iso-b": "us-isob-east-1", "aws-iso-e": "eu-isoe-west-1",
                   "aws-iso-f": "us-isof-south-1", "aws-eusc": "eusc-de-east-1"}


@pytest.mark.parametrize("partition", sorted(LONGEST_REGIONS))
def test_every_controller_policy_fits_the_managed_policy_size_limit(partition):
    from stacks.settings import load_settings

    cluster = "c" + "x" * 36 + "z"
    settings = load_settings({"cluster_name": cluster})  # the derived names; the region comes from the table
    region, account = LONGEST_REGIONS[partition], "123456789012"
    ctx = policies.ControllerPolicyContext(
        partition=partition, account_id=account, region=region, cluster_name=cluster,
        cluster_arn=f"arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
        queue_arn=f"arn:{partition}:sqs:{region}:{account}:{settings.interruption_queue_name}",
        node_role_arn=f"arn:{partition}:iam::{account}:role/{settings.node_role_name}")
    sizes = {part: policies.policy_chars(doc) for part, doc in policies.controller_policies(ctx).items()}
    # Every part keeps more than half of IAM's quota free for statements added later.
    assert max(sizes.values()) <= policies.MANAGED_POLICY_MAX_CHARS // 2, sizes
    with pytest.raises(Exception, match="1-38"):
        load_settings({"cluster_name": cluster + "y"})


def test_pass_role_only_for_the_node_role_and_only_to_ec2():
    document = policies.controller_policy(CTX)
    passing = [s for s in document["Statement"] if "iam:PassRole" in _actions(s)]
    assert passing == [{
        "Sid": "AllowPassingInstanceRole", "Effect": "Allow", "Action": "iam:PassRole",
        "Resource": "arn:aws:iam::111122223333:role/shop-nodewright-node",
        "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
    }]


def test_china_regions_pass_the_role_to_the_china_ec2_principal():
    ctx = policies.ControllerPolicyContext(**{**CTX.__dict__, "region": "cn-north-1", "partition": "aws-cn"})
    passing = _by_sid(policies.controller_policy(ctx))["AllowPassingInstanceRole"]
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com",
                                                                             "ec2.amazonaws.com.cn"]}}
    assert policies.ec2_service_principals("cn-northwest-1")[-1] == "ec2.amazonaws.com.cn"
    assert policies.ec2_service_principals("us-gov-west-1") == ["ec2.amazonaws.com"]


def test_creating_launches_require_the_cluster_ownership_and_nodepool_request_tags():
    stmt = _by_sid(policies.controller_policy(CTX))["AllowScopedEC2InstanceActionsWithTags"]
    assert stmt["Action"] == ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"]
    assert stmt["Condition"] == {
        "StringEquals": {"aws:RequestTag/kubernetes.io/cluster/shop": "owned",
                         "aws:RequestTag/eks:eks-cluster-name": "shop"},
        "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
    }
    assert "arn:aws:ec2:ap-northeast-2:*:instance/*" in stmt["Resource"]


def test_terminate_and_delete_only_what_the_cluster_owns():
    stmt = _by_sid(policies.controller_policy(CTX))["AllowScopedDeletion"]
    assert stmt["Action"] == ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"]
    assert stmt["Resource"] == ["arn:aws:ec2:ap-northeast-2:*:instance/*",
                                "arn:aws:ec2:ap-northeast-2:*:launch-template/*"]
    assert stmt["Condition"] == {"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/shop": "owned"},
                                 "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}}


def test_reboot_only_what_the_cluster_owns_like_terminate():
    stmt = _by_sid(policies.controller_policy(CTX))["AllowScopedInstanceReboot"]
    assert (stmt["Action"], stmt["Resource"]) == ("ec2:RebootInstances", "arn:aws:ec2:ap-northeast-2:*:instance/*")
    assert stmt["Condition"] == _by_sid(policies.controller_policy(CTX))["AllowScopedDeletion"]["Condition"]


def test_unscoped_resources_only_for_reads_without_resource_level_permissions():
    document = policies.controller_policy(CTX)
    star = {s["Sid"]: _actions(s) for s in document["Statement"] if s["Resource"] == "*"}
    assert star == {"AllowRegionalReadActions": list(policies.EC2_READ_ACTIONS),
                    "AllowPricingReadActions": ["pricing:GetProducts"]}
    assert _by_sid(document)["AllowRegionalReadActions"]["Condition"] == {
        "StringEquals": {"aws:RequestedRegion": "ap-northeast-2"}}


def test_no_wildcard_actions_and_every_statement_is_named():
    for statement in policies.controller_policy(CTX)["Statement"]:
        assert statement["Sid"]
        assert statement["Effect"] == "Allow"
        for action in _actions(statement):
            assert "*" not in action, (statement["Sid"], action)


def test_queue_ssm_and_eks_are_scoped_to_this_cluster():
    by_sid = _by_sid(policies.controller_policy(CTX))
    assert by_sid["AllowInterruptionQueueActions"]["Resource"] == CTX.queue_arn
    # No sqs:GetQueueAttributes: nothing calls it (Karpenter v1 dropped it too).
    assert by_sid["AllowInterruptionQueueActions"]["Action"] == [
        "sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]
    assert by_sid["AllowSSMReadActions"]["Resource"] == "arn:aws:ssm:ap-northeast-2::parameter/aws/service/*"
    assert by_sid["AllowAPIServerEndpointDiscovery"] == {
        "Sid": "AllowAPIServerEndpointDiscovery", "Effect": "Allow", "Action": "eks:DescribeCluster",
        "Resource": CTX.cluster_arn}


def test_irsa_trust_names_exactly_the_service_account_and_sts_audience():
    document = policies.irsa_trust_policy("arn:aws:iam::111122223333:oidc-provider/oidc.eks.x/id/ABC",
                                          "oidc.eks.x/id/ABC", "system:serviceaccount:kube-system:nodewright")
    assert document["Statement"] == [{
        "Sid": "AllowControllerServiceAccountWebIdentity", "Effect": "Allow",
        "Principal": {"Federated": "arn:aws:iam::111122223333:oidc-provider/oidc.eks.x/id/ABC"},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {"oidc.eks.x/id/ABC:sub": "system:serviceaccount:kube-system:nodewright",
                                       "oidc.eks.x/id/ABC:aud": "sts.amazonaws.com"}},
    }]


def test_pod_identity_trust_uses_the_documented_session_tags_of_one_cluster_and_service_account():
    cluster = "arn:aws:eks:ap-northeast-2:111122223333:cluster/shop"
    (stmt,) = policies.pod_identity_trust_policy(cluster, "kube-system", "nodewright")["Statement"]
    assert stmt["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert stmt["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert stmt["Condition"] == {"StringEquals": {"aws:RequestTag/eks-cluster-arn": cluster,
                                                  "aws:RequestTag/kubernetes-namespace": "kube-system",
                                                  "aws:RequestTag/kubernetes-service-account": "nodewright"}}


def test_queue_policy_lets_only_the_rules_send_and_denies_plain_http():
    document = policies.interruption_queue_policy("arn:q", ["arn:r1", "arn:r2"])
    allow, deny = document["Statement"]
    assert allow == {"Sid": "AllowEventBridgeInterruptionRules", "Effect": "Allow",
                     "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
                     "Resource": "arn:q", "Condition": {"ArnEquals": {"aws:SourceArn": ["arn:r1", "arn:r2"]}}}
    assert deny == {"Sid": "DenyNonTLSAccess", "Effect": "Deny", "Principal": "*", "Action": "sqs:*",
                    "Resource": "arn:q", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}


@pytest.mark.parametrize("log_groups", [None, ["arn:aws:logs:ap-northeast-2:111122223333:log-group:/aws/x"]])
def test_kms_key_policy_delegates_to_iam_and_scopes_logs_by_encryption_context(log_groups):
    document = policies.kms_key_policy("aws", "111122223333", "ap-northeast-2", log_groups)
    root = document["Statement"][0]
    assert root["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    if log_groups is None:
        assert len(document["Statement"]) == 1
        return
    logs = document["Statement"][1]
    assert logs["Principal"] == {"Service": "logs.ap-northeast-2.amazonaws.com"}
    assert logs["Condition"] == {"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": log_groups}}
    assert all("*" not in action for action in logs["Action"])
