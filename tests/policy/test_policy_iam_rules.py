"""CKV_NW_1..6 on the hand-written synthesized project, run directly (no checkov)."""

from __future__ import annotations

import json
from typing import Any

import nw_stack_rules
import pytest

from . import policy_mutations as mut
from .conftest import project_of_docs

IDENTITY = "/fixture/identity/cdk.tf.json"


def analyze(docs: dict[str, Any]):
    return nw_stack_rules.analyze(project_of_docs(docs))


def failed(docs: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    """(check id, address) -> messages of every finding."""
    out: dict[tuple[str, str], list[str]] = {}
    for f in analyze(docs).findings:
        out.setdefault((f.check_id, f.address), []).append(f.message)
    return out


def controller_statements(docs: dict[str, Any]) -> list[dict[str, Any]]:
    return docs["identity"]["data"]["aws_iam_policy_document"]["controller_policy"]["statement"]


def statement(docs: dict[str, Any], sid: str) -> dict[str, Any]:
    return next(s for s in controller_statements(docs) if s["sid"] == sid)


def trust_statement(docs: dict[str, Any]) -> dict[str, Any]:
    return docs["identity"]["data"]["aws_iam_policy_document"]["controller_trust"]["statement"][0]


def test_compliant_fixture_passes_every_rule_on_the_expected_resources(docs):
    report = analyze(docs)
    assert report.findings == []
    evaluated = {(c, p.split("/")[2], a) for c, p, a in report.evaluated}
    assert evaluated == {
        ("CKV_NW_1", "identity", "aws_iam_role.controller"),
        ("CKV_NW_2", "identity", "aws_iam_policy.controller"),
        ("CKV_NW_3", "identity", "aws_iam_role.controller"),
        ("CKV_NW_4", "identity", "aws_iam_policy.controller"),
        ("CKV_NW_4", "identity", "aws_iam_role.controller"),
        ("CKV_NW_4", "identity", "aws_iam_role.node"),
        ("CKV_NW_4", "interruption", "aws_sqs_queue_policy.interruption"),
        ("CKV_NW_5", "identity", "aws_iam_policy.controller"),
        ("CKV_NW_6", "identity", "aws_iam_instance_profile.node"),
        ("CKV_NW_6", "identity", "aws_iam_role.node"),
        ("CKV_NW_7", "interruption", "aws_sqs_queue.interruption"),
        ("CKV_NW_8", "workloads", "kubernetes_manifest.batch-spot_nodepool"),
        ("CKV_NW_9", "workloads", "kubernetes_manifest.batch-spot_nodepool"),
        ("CKV_NW_10", "workloads", "kubernetes_manifest.batch-spot_nodeclass"),
        ("CKV_NW_12", "addons", "helm_release.nodewright"),
    }


# --------------------------------------------------------------------------------------------
# The regression variants, on the fixture
# --------------------------------------------------------------------------------------------


def test_passrole_removed_is_the_field_report_failure(docs):
    mut.passrole_removed(docs)
    found = failed(docs)
    assert set(found) == {("CKV_NW_1", "aws_iam_role.controller"), ("CKV_NW_6", "aws_iam_instance_profile.node")}
    (message,) = found[("CKV_NW_1", "aws_iam_role.controller")]
    assert "do not grant iam:PassRole" in message
    assert "UnauthorizedOperation" in message and "the first field report's failure" in message


def test_passrole_on_star(docs):
    mut.passrole_on_star(docs)
    assert failed(docs) == {("CKV_NW_2", "aws_iam_policy.controller"): [
        "iam:PassRole in statement 'AllowPassingInstanceRole' is on '*': any role, including admin roles, "
        "could be passed."]}


def test_passrole_without_passed_to_service(docs):
    mut.passrole_without_condition(docs)
    assert failed(docs) == {("CKV_NW_2", "aws_iam_policy.controller"): [
        "iam:PassRole in statement 'AllowPassingInstanceRole' has no iam:PassedToService condition "
        "(StringEquals ec2.amazonaws.com)."]}


def test_trust_without_sub(docs):
    mut.trust_without_sub(docs)
    found = failed(docs)
    assert set(found) == {("CKV_NW_3", "aws_iam_role.controller"), ("CKV_NW_12", "helm_release.nodewright")}
    assert any("no StringEquals condition on <issuer>:sub" in m for m in found[("CKV_NW_3", "aws_iam_role.controller")])


def test_ec2_star_is_a_wildcard_and_an_unconditioned_terminate(docs):
    mut.ec2_star(docs)
    found = failed(docs)
    assert set(found) == {("CKV_NW_4", "aws_iam_policy.controller"), ("CKV_NW_5", "aws_iam_policy.controller")}
    assert found[("CKV_NW_4", "aws_iam_policy.controller")] == [
        "statement 'AllowScopedEC2InstanceAccessActions' allows wildcard action(s) ['ec2:*'] in a identity policy."]
    assert "['ec2:TerminateInstances', 'ec2:DeleteLaunchTemplate', 'ec2:RebootInstances']" in found[
        ("CKV_NW_5", "aws_iam_policy.controller")][0]


# --------------------------------------------------------------------------------------------
# CKV_NW_1 / 2: PassRole details
# --------------------------------------------------------------------------------------------


def test_passrole_on_another_role_is_not_the_node_role(docs):
    statement(docs, "AllowPassingInstanceRole")["resources"] = ["${aws_iam_role.controller.arn}"]
    found = failed(docs)
    assert set(found) == {("CKV_NW_1", "aws_iam_role.controller"), ("CKV_NW_6", "aws_iam_instance_profile.node")}
    assert "not on the node role aws_iam_role.node" in found[("CKV_NW_1", "aws_iam_role.controller")][0]


def test_passrole_on_a_literal_arn_pattern_of_the_node_role_passes(docs):
    statement(docs, "AllowPassingInstanceRole")["resources"] = [
        "arn:aws:iam::${data.aws_caller_identity.current.account_id}:role/nodewright-node"]
    assert failed(docs) == {}


@pytest.mark.parametrize("resource", ["arn:aws:iam::*:role/*", "arn:aws:iam::123456789012:role/*"])
def test_passrole_on_every_role_of_an_account_is_a_wildcard(docs, resource):
    statement(docs, "AllowPassingInstanceRole")["resources"] = [resource]
    assert set(failed(docs)) == {("CKV_NW_2", "aws_iam_policy.controller")}


def test_passrole_to_other_services_than_ec2(docs):
    statement(docs, "AllowPassingInstanceRole")["condition"][0]["values"] = ["ec2.amazonaws.com", "lambda.amazonaws.com"]
    assert failed(docs) == {("CKV_NW_2", "aws_iam_policy.controller"): [
        "iam:PassRole in statement 'AllowPassingInstanceRole' lets the role be passed to "
        "['ec2.amazonaws.com', 'lambda.amazonaws.com'], not only ec2.amazonaws.com."]}


def test_passrole_via_inline_policy_and_literal_role_name(docs):
    """The same permissions attached differently: an aws_iam_role_policy naming the role literally."""
    identity = docs["identity"]
    del identity["resource"]["aws_iam_role_policy_attachment"]["controller"]
    identity["resource"]["aws_iam_role_policy"] = {"controller": {
        "role": "nodewright-controller", "policy": "${data.aws_iam_policy_document.controller_policy.json}"}}
    del identity["resource"]["aws_iam_policy"]
    assert failed(docs) == {}
    mut.passrole_removed(docs)
    assert ("CKV_NW_1", "aws_iam_role.controller") in failed(docs)


# --------------------------------------------------------------------------------------------
# CKV_NW_3: IRSA trust
# --------------------------------------------------------------------------------------------


def test_wildcard_subject_with_string_like(docs):
    trust_statement(docs)["condition"][0].update(test="StringLike", values=["system:serviceaccount:kube-system:*"])
    messages = failed(docs)[("CKV_NW_3", "aws_iam_role.controller")]
    assert any("wildcard subject" in m for m in messages)
    assert any("no StringEquals condition on <issuer>:sub" in m for m in messages)


def test_two_subjects_and_missing_audience(docs):
    st = trust_statement(docs)
    st["condition"][0]["values"].append("system:serviceaccount:default:default")
    st["condition"].pop(1)
    messages = failed(docs)[("CKV_NW_3", "aws_iam_role.controller")]
    assert len(messages) == 2
    assert "exactly one service account" in messages[0]
    assert messages[1] == "Trust statement #1 has no StringEquals <issuer>:aud = sts.amazonaws.com condition."


def test_trust_granting_assume_role_too(docs):
    trust_statement(docs)["actions"].append("sts:AssumeRole")
    assert failed(docs)[("CKV_NW_3", "aws_iam_role.controller")] == [
        "Trust statement #1 allows ['sts:AssumeRole'] besides sts:AssumeRoleWithWebIdentity."]


# --------------------------------------------------------------------------------------------
# CKV_NW_4 / 5: wildcards, ownership conditions, unreadable documents
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["*", "iam:*", "ssm:*", "*:GetParameter"])
def test_wildcard_actions(docs, action):
    statement(docs, "AllowSSMReadActions")["actions"] = [action]
    assert ("CKV_NW_4", "aws_iam_policy.controller") in failed(docs)


def test_not_action_in_allow(docs):
    st = statement(docs, "AllowPricingReadActions")
    st["not_actions"] = st.pop("actions")
    assert failed(docs)[("CKV_NW_4", "aws_iam_policy.controller")] == [
        "statement 'AllowPricingReadActions' allows NotAction ['pricing:GetProducts']: every other action is granted."]


def test_kms_star_in_a_key_policy_is_not_flagged_but_iam_star_is(docs):
    key_policy = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "kms:*", "Resource": "*"}]}
    docs["interruption"]["resource"]["aws_kms_key"] = {"queue": {"policy": json.dumps(key_policy)}}
    assert failed(docs) == {}
    key_policy["Statement"][0]["Action"] = "iam:*"
    docs["interruption"]["resource"]["aws_kms_key"]["queue"]["policy"] = json.dumps(key_policy)
    assert set(failed(docs)) == {("CKV_NW_4", "aws_kms_key.queue")}


def test_terminate_without_resource_tag(docs):
    statement(docs, "AllowScopedDeletion").pop("condition")
    (message,) = failed(docs)[("CKV_NW_5", "aws_iam_policy.controller")]
    assert message.startswith("statement 'AllowScopedDeletion' allows ['ec2:TerminateInstances', "
                              "'ec2:DeleteLaunchTemplate'] without aws:ResourceTag/kubernetes.io/cluster/")


def test_reboot_without_resource_tag(docs):
    statement(docs, "AllowScopedDeletion")["actions"] = ["ec2:TerminateInstances", "ec2:RebootInstances"]
    statement(docs, "AllowScopedDeletion").pop("condition")
    (message,) = failed(docs)[("CKV_NW_5", "aws_iam_policy.controller")]
    assert message.startswith("statement 'AllowScopedDeletion' allows ['ec2:TerminateInstances', "
                              "'ec2:RebootInstances'] without aws:ResourceTag/kubernetes.io/cluster/")


def test_launch_of_instances_without_request_tag(docs):
    statement(docs, "AllowScopedEC2InstanceActionsWithTags")["condition"][0]["values"] = ["shared"]
    (message,) = failed(docs)[("CKV_NW_5", "aws_iam_policy.controller")]
    assert "allows ['ec2:RunInstances', 'ec2:CreateFleet'] without aws:RequestTag" in message


def test_jsonencode_policy_cannot_be_read_and_fails_closed(docs):
    docs["identity"]["resource"]["aws_iam_policy"]["controller"]["policy"] = "${jsonencode({Version = \"2012-10-17\"})}"
    messages = failed(docs)[("CKV_NW_4", "aws_iam_policy.controller")]
    assert messages[0].startswith("The identity policy cannot be checked: policy is a Terraform expression")


# --------------------------------------------------------------------------------------------
# CKV_NW_6: instance profile and node role
# --------------------------------------------------------------------------------------------


def test_node_role_trusting_an_account_as_well(docs):
    role = docs["identity"]["resource"]["aws_iam_role"]["node"]
    trust = json.loads(role["assume_role_policy"])
    trust["Statement"][0]["Principal"]["AWS"] = "arn:aws:iam::123456789012:root"
    role["assume_role_policy"] = json.dumps(trust)
    (message,) = failed(docs)[("CKV_NW_6", "aws_iam_role.node")]
    assert message.startswith("Node role aws_iam_role.node: trust statement #1 trusts")


def test_instance_profile_with_the_controller_role(docs):
    docs["identity"]["resource"]["aws_iam_instance_profile"]["node"]["role"] = "${aws_iam_role.controller.name}"
    messages = failed(docs)[("CKV_NW_6", "aws_iam_instance_profile.node")]
    assert messages[0].startswith("The instance profile holds aws_iam_role.controller, a controller/IRSA role")


def test_instance_profile_with_an_unknown_role_and_with_the_literal_node_role_name(docs):
    profile = docs["identity"]["resource"]["aws_iam_instance_profile"]["node"]
    profile["role"] = "some-external-role"
    assert set(failed(docs)) == {("CKV_NW_6", "aws_iam_instance_profile.node")}
    profile["role"] = "nodewright-node"  # the node role's literal name resolves to it
    assert failed(docs) == {}


# --------------------------------------------------------------------------------------------
# CKV_NW_3 / 12 with EKS Pod Identity instead of IRSA
# --------------------------------------------------------------------------------------------


def as_pod_identity(docs: dict[str, Any], namespace: str = "kube-system") -> None:
    """The fixture switched to Pod Identity: trust pods.eks.amazonaws.com, one association, no annotation."""
    docs["identity"]["data"]["aws_iam_policy_document"]["controller_trust"]["statement"] = [{
        "effect": "Allow", "actions": ["sts:AssumeRole", "sts:TagSession"],
        "principals": [{"type": "Service", "identifiers": ["pods.eks.amazonaws.com"]}]}]
    docs["identity"]["resource"]["aws_eks_pod_identity_association"] = {"controller": {
        "cluster_name": "${aws_eks_cluster.cluster.name}", "namespace": namespace,
        "service_account": "nodewright", "role_arn": "${aws_iam_role.controller.arn}"}}
    release = docs["addons"]["resource"]["helm_release"]["nodewright"]
    release["values"] = [json.dumps({"serviceAccount": {"name": "nodewright"}})]


def test_pod_identity_is_checked_instead_of_irsa(docs):
    as_pod_identity(docs)
    report = analyze(docs)
    assert report.findings == []
    assert ("CKV_NW_3", IDENTITY, "aws_iam_role.controller") in report.evaluated


def test_pod_identity_without_association_and_with_a_wider_trust(docs):
    as_pod_identity(docs)
    del docs["identity"]["resource"]["aws_eks_pod_identity_association"]
    trust = docs["identity"]["data"]["aws_iam_policy_document"]["controller_trust"]["statement"][0]
    trust["principals"].append({"type": "AWS", "identifiers": ["arn:aws:iam::123456789012:root"]})
    found = failed(docs)
    assert found[("CKV_NW_3", "aws_iam_role.controller")] == [
        "Pod Identity role aws_iam_role.controller: Trust statement #1 trusts {'Service': ['pods.eks.amazonaws.com'], "
        "'AWS': ['arn:aws:iam::123456789012:root']}, not only Service pods.eks.amazonaws.com.",
        "Pod Identity role aws_iam_role.controller: must be associated (aws_eks_pod_identity_association) with "
        "exactly one service account, got []."]
    assert ("CKV_NW_12", "helm_release.nodewright") in found


def test_pod_identity_association_in_another_namespace_than_the_release(docs):
    as_pod_identity(docs, namespace="nodewright")
    assert failed(docs) == {("CKV_NW_12", "helm_release.nodewright"): [
        "The release installs ServiceAccount system:serviceaccount:kube-system:nodewright but the Pod Identity "
        "association of aws_iam_role.controller names ['system:serviceaccount:nodewright:nodewright']: the "
        "controller gets no AWS credentials."]}
