"""CKV_NW_7 (interruption queue) and CKV_NW_12 (Helm release <-> IRSA trust) on the fixture project."""

from __future__ import annotations

import json
from typing import Any

import nw_stack_rules
import pytest

from .conftest import project_of_docs

QUEUE = ("CKV_NW_7", "aws_sqs_queue.interruption")
RELEASE = ("CKV_NW_12", "helm_release.nodewright")


def failed(docs: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for f in nw_stack_rules.analyze(project_of_docs(docs)).findings:
        out.setdefault((f.check_id, f.address), []).append(f.message)
    return out


def queue_policy(docs: dict[str, Any]) -> dict[str, Any]:
    return json.loads(docs["interruption"]["resource"]["aws_sqs_queue_policy"]["interruption"]["policy"])


def set_queue_policy(docs: dict[str, Any], policy: dict[str, Any]) -> None:
    docs["interruption"]["resource"]["aws_sqs_queue_policy"]["interruption"]["policy"] = json.dumps(policy)


def release(docs: dict[str, Any]) -> dict[str, Any]:
    return docs["addons"]["resource"]["helm_release"]["nodewright"]


def test_unencrypted_queue(docs):
    docs["interruption"]["resource"]["aws_sqs_queue"]["interruption"]["sqs_managed_sse_enabled"] = False
    assert failed(docs) == {QUEUE: ["Interruption queue aws_sqs_queue.interruption is not encrypted "
                                    "(set sqs_managed_sse_enabled = true or kms_master_key_id)."]}


def test_kms_key_counts_as_encryption(docs):
    queue = docs["interruption"]["resource"]["aws_sqs_queue"]["interruption"]
    del queue["sqs_managed_sse_enabled"]
    queue["kms_master_key_id"] = "${aws_kms_key.queue.id}"
    assert failed(docs) == {}


def test_queue_without_tls_deny_and_without_eventbridge_write(docs):
    policy = queue_policy(docs)
    policy["Statement"] = [s for s in policy["Statement"] if s["Sid"] != "DenyHTTP"]
    policy["Statement"][0]["Principal"] = {"Service": "sns.amazonaws.com"}
    set_queue_policy(docs, policy)
    assert failed(docs) == {QUEUE: [
        "Interruption queue aws_sqs_queue.interruption has no queue policy denying sqs:* to everyone when "
        "aws:SecureTransport is false.",
        "Interruption queue aws_sqs_queue.interruption does not allow events.amazonaws.com to sqs:SendMessage: "
        "interruption events never arrive."]}


def test_policy_on_the_queue_itself_is_read(docs):
    policy = queue_policy(docs)
    del docs["interruption"]["resource"]["aws_sqs_queue_policy"]
    assert set(failed(docs)) == {QUEUE}
    docs["interruption"]["resource"]["aws_sqs_queue"]["interruption"]["policy"] = json.dumps(policy)
    assert failed(docs) == {}


def test_missing_state_change_rule(docs):
    del docs["interruption"]["resource"]["aws_cloudwatch_event_target"]["state_change"]
    assert failed(docs) == {QUEUE: ["Interruption queue aws_sqs_queue.interruption receives no EventBridge rule "
                                    "(source aws.ec2) for ['EC2 Instance State-change Notification']."]}


def test_one_rule_for_every_ec2_event_covers_both(docs):
    rules = docs["interruption"]["resource"]["aws_cloudwatch_event_rule"]
    rules["spot_interruption"]["event_pattern"] = json.dumps({"source": ["aws.ec2"]})
    del docs["interruption"]["resource"]["aws_cloudwatch_event_target"]["state_change"]
    assert failed(docs) == {}


def test_release_in_another_namespace_than_the_trust_names(docs):
    release(docs)["namespace"] = "nodewright"
    assert failed(docs) == {RELEASE: [
        "The release installs ServiceAccount system:serviceaccount:nodewright:nodewright but aws_iam_role.controller "
        "trusts ['system:serviceaccount:kube-system:nodewright']: sts:AssumeRoleWithWebIdentity will be denied."]}


def test_release_without_the_role_annotation(docs):
    values = json.loads(release(docs)["values"][0])
    del values["serviceAccount"]["annotations"]
    release(docs)["values"] = [json.dumps(values)]
    (message,) = failed(docs)[RELEASE]
    assert message.startswith("IRSA is used (aws_iam_role.controller trusts ['system:serviceaccount:kube-system:nodewright'])")


def test_annotation_through_set_with_escaped_dots(docs):
    values = json.loads(release(docs)["values"][0])
    arn = values["serviceAccount"].pop("annotations")["eks.amazonaws.com/role-arn"]
    release(docs)["values"] = [json.dumps(values)]
    release(docs)["set"].append({"name": "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn", "value": arn})
    assert failed(docs) == {}


@pytest.mark.parametrize(("arn", "expected"), [
    ("arn:aws:iam::123456789012:role/nodewright-controller", []),
    ("TODO", ["eks.amazonaws.com/role-arn='TODO' is not an IAM role ARN."]),
    ("${aws_iam_role.node.arn}", ["eks.amazonaws.com/role-arn is '${aws_iam_role.node.arn}', not the ARN of a role in the stacks."]),
])
def test_literal_and_wrong_annotations(docs, arn, expected):
    values = json.loads(release(docs)["values"][0])
    values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"] = arn
    release(docs)["values"] = [json.dumps(values)]
    assert failed(docs).get(RELEASE, []) == expected
