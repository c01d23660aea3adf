"""Reading IAM documents from every form a synthesized stack holds them in, and references."""

from __future__ import annotations

import json

import nw_tfdoc
import pytest
from nw_iampolicy import Condition, PolicyError, parse_policy

from .conftest import project_of_docs

PASSROLE_JSON = {"Version": "2012-10-17", "Statement": [{
    "Sid": "Pass", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "${aws_iam_role.node.arn}",
    "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}}]}


def one_stack(doc: dict) -> nw_tfdoc.Project:
    return project_of_docs({"s": doc})


@pytest.mark.parametrize("value", [
    json.dumps(PASSROLE_JSON),                       # a JSON string
    PASSROLE_JSON,                                   # an object
    [json.dumps(PASSROLE_JSON)],                     # list-wrapped, the way checkov hands attributes over
    [[PASSROLE_JSON]],                               # doubly wrapped object
])
def test_every_literal_form_gives_the_same_statement(value):
    (st,) = parse_policy(one_stack({}), "s", value)
    assert (st.sid, st.effect, st.actions, st.resources) == ("Pass", "Allow", ["iam:PassRole"], ["${aws_iam_role.node.arn}"])
    assert st.conditions == [Condition("StringEquals", "iam:PassedToService", ("ec2.amazonaws.com",))]
    assert st.grants("IAM:passrole") and not st.grants("iam:GetRole")


def test_data_source_reference_in_the_same_stack_and_across_stacks():
    data_doc = {"statement": [{"actions": ["iam:PassRole"], "resources": ["*"],
                               "condition": [{"test": "StringEquals", "variable": "iam:PassedToService",
                                              "values": ["ec2.amazonaws.com"]}]}]}
    producer = {"data": {"aws_iam_policy_document": {"doc": data_doc}},
                "output": {"cross-stack-output-doc": {"value": "${data.aws_iam_policy_document.doc.json}"}}}
    project = project_of_docs({"identity": producer, "addons": {}})
    (local,) = parse_policy(project, "identity", "${data.aws_iam_policy_document.doc.json}")
    remote = "${data.terraform_remote_state.cross-stack-reference-input-identity.outputs.cross-stack-output-doc}"
    (far,) = parse_policy(project, "addons", remote)
    for st in (local, far):
        assert (st.effect, st.actions, st.resources) == ("Allow", ["iam:PassRole"], ["*"])  # effect defaults to Allow
        assert st.condition_values("iam:passedtoservice", ("StringEquals",)) == [("ec2.amazonaws.com",)]


def test_source_and_override_documents_merge_by_sid():
    base = {"Version": "2012-10-17", "Statement": [
        {"Sid": "A", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
        {"Sid": "B", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"}]}
    override = {"Version": "2012-10-17", "Statement": [
        {"Sid": "B", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::1:role/node"}]}
    doc = {"data": {"aws_iam_policy_document": {"d": {
        "source_policy_documents": [json.dumps(base)],
        "override_policy_documents": [json.dumps(override)],
        "statement": [{"sid": "C", "actions": ["pricing:GetProducts"], "resources": ["*"]}]}}}}
    sts = parse_policy(one_stack(doc), "s", "${data.aws_iam_policy_document.d.minified_json}")
    assert [(s.sid, s.resources) for s in sts] == [("A", ["*"]), ("B", ["arn:aws:iam::1:role/node"]), ("C", ["*"])]


def test_principals_of_both_styles():
    json_doc = {"Statement": [{"Effect": "Allow", "Principal": {"Federated": "arn:oidc", "Service": ["a", "b"]},
                               "Action": "sts:AssumeRoleWithWebIdentity"}]}
    (st,) = parse_policy(one_stack({}), "s", json_doc)
    assert st.principals == {"Federated": ["arn:oidc"], "Service": ["a", "b"]}
    (star,) = parse_policy(one_stack({}), "s", {"Statement": {"Effect": "Deny", "Principal": "*", "Action": "sqs:*"}})
    assert star.principals == {"*": ["*"]} and not star.allows and star.grants("sqs:SendMessage")


@pytest.mark.parametrize(("value", "reason"), [
    ("${jsonencode({Version = \"2012-10-17\"})}", "policy is a Terraform expression and cannot be analysed"),
    ("", "policy is empty"),
    ("[1, 2]", "policy JSON is not an object"),
    ("{\"Version\": \"2012-10-17\"}", "policy document has no Statement"),
    ("${aws_iam_role.node.arn}", "policy refers to aws_iam_role.node.arn, which is not a policy document"),
    ("${data.aws_iam_policy_document.missing.json}", "data.aws_iam_policy_document.missing is not in the synthesized stacks"),
])
def test_unreadable_values_raise_with_the_reason(value, reason):
    with pytest.raises(PolicyError, match=reason.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        parse_policy(one_stack({}), "s", value)


def test_references_and_unwrapping():
    assert nw_tfdoc.parse_ref("s", "${aws_iam_role.node-role_1A2B.arn}") == nw_tfdoc.Ref("s", "resource", "aws_iam_role", "node-role_1A2B", "arn")
    assert nw_tfdoc.parse_ref("s", ["${data.aws_partition.p.partition}"]).address == "data.aws_partition.p"
    assert nw_tfdoc.parse_ref("s", "arn:${data.aws_partition.p.partition}:iam") is None  # not a whole-string reference
    assert nw_tfdoc.scalar([["x"]]) == "x" and nw_tfdoc.scalar([]) is None and nw_tfdoc.scalar(["a", "b"]) == ["a", "b"]
    assert nw_tfdoc.str_list([["a", ["b"]], True, 3]) == ["a", "b", "true", "3"]


def test_remote_state_into_a_stack_that_is_not_loaded_stays_a_remote_state_reference():
    ref = one_stack({}).resolve("s", "${data.terraform_remote_state.cross-stack-reference-input-gone.outputs.x}")
    assert ref is not None and ref.type == "terraform_remote_state"


def test_load_project_reads_the_cdktn_layout(tmp_path):
    for name in ("identity", "addons"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cdk.tf.json").write_text(json.dumps({"resource": {"aws_iam_role": {name: {"name": name}}}}))
    project = nw_tfdoc.project_of(tmp_path / "addons" / "cdk.tf.json")
    assert sorted(project.stacks) == ["addons", "identity"]
    assert [(s.name, n) for s, n, _ in project.all_resources("aws_iam_role")] == [("addons", "addons"), ("identity", "identity")]
