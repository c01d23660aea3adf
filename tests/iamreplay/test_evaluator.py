"""The evaluator against the IAM User Guide's documented semantics and examples (our own wording of them).

Sources: "Policy evaluation logic" (explicit deny wins, default deny), "IAM JSON policy elements: Condition
operators" (missing keys, ...IfExists, Null, Bool, ARN operators), "Condition keys with multiple values"
(ForAllValues / ForAnyValue with aws:TagKeys, including the empty-set cases), "Creating a condition with
multiple keys or values" (values ORed, keys and operators ANDed), the EC2 user guide's tag-on-create example
(ec2:CreateAction), and the EKS Pod Identity trust example.
"""

from __future__ import annotations

import pytest

from .evaluator import Request, arn_matches, condition_holds, evaluate, tag_context

V = "2012-10-17"


def _policy(*statements: dict) -> dict[str, dict]:
    return {"p": {"Version": V, "Statement": list(statements)}}


def _allow(action="ec2:RunInstances", resource="*", condition=None, sid="A") -> dict:
    statement = {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource}
    if condition:
        statement["Condition"] = condition
    return statement


# --- multi-valued keys: the Guide's aws:TagKeys examples ---------------------------------------------------

TAG_KEYS = ["environment", "cost-center"]


@pytest.mark.parametrize(("keys", "for_all", "for_any"), [
    (["environment", "cost-center"], True, True),
    (["environment"], True, True),
    (["environment", "owner"], False, True),   # one key outside the set: ForAllValues fails
    (["owner"], False, False),
    ([], True, False),                          # no tags at all: ForAllValues is vacuously true
])
def test_set_qualifiers_on_tag_keys(keys, for_all, for_any):
    context = {"aws:TagKeys": tuple(keys)} if keys else {}
    assert condition_holds("ForAllValues:StringEquals", "aws:TagKeys", TAG_KEYS, context) is for_all
    assert condition_holds("ForAnyValue:StringEquals", "aws:TagKeys", TAG_KEYS, context) is for_any


# --- missing keys, IfExists, Null, negation ------------------------------------------------------------------


def test_missing_key_is_false_for_positive_true_for_negated_and_ifexists_operators():
    assert condition_holds("StringEquals", "aws:RequestTag/team", ["a"], {}) is False
    assert condition_holds("StringLike", "aws:RequestTag/team", ["*"], {}) is False
    assert condition_holds("StringNotEquals", "aws:RequestTag/team", ["a"], {}) is True
    assert condition_holds("StringEqualsIfExists", "aws:RequestTag/team", ["a"], {}) is True
    assert condition_holds("StringEqualsIfExists", "aws:RequestTag/team", ["a"], {"aws:RequestTag/team": ("b",)}) \
        is False


def test_null_checks_presence():
    present = {"aws:ResourceTag/owner": ("x",)}
    assert condition_holds("Null", "aws:ResourceTag/owner", ["true"], {}) is True
    assert condition_holds("Null", "aws:ResourceTag/owner", ["true"], present) is False
    assert condition_holds("Null", "aws:ResourceTag/owner", ["false"], present) is True


def test_bool_and_case_insensitive_key_names_but_case_sensitive_values():
    assert condition_holds("Bool", "aws:SecureTransport", ["false"], {"aws:securetransport": ("false",)})
    assert not condition_holds("StringEquals", "aws:RequestTag/team", ["Payments"], {"aws:RequestTag/team": ("payments",)})
    assert condition_holds("StringEqualsIgnoreCase", "aws:RequestTag/team", ["Payments"],
                           {"aws:RequestTag/team": ("payments",)})


def test_string_like_wildcards_and_arn_like_components():
    assert condition_holds("StringLike", "aws:RequestTag/karpenter.sh/nodepool", ["*"],
                           {"aws:RequestTag/karpenter.sh/nodepool": ("general",)})
    assert condition_holds("StringLike", "s3:prefix", ["home/?ob/*"], {"s3:prefix": ("home/bob/docs",)})
    association = "arn:aws:eks:us-east-1:111122223333:podidentityassociation/shop/a-123"
    assert condition_holds("ArnLike", "aws:SourceArn",
                           ["arn:aws:eks:us-east-1:111122223333:podidentityassociation/shop/*"],
                           {"aws:SourceArn": (association,)})
    assert not condition_holds("ArnEquals", "aws:SourceArn", ["arn:aws:eks:us-east-1:111122223333:cluster/shop"],
                               {"aws:SourceArn": (association,)})
    assert arn_matches("arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:us-east-1:111122223333:instance/i-0abc")
    assert not arn_matches("arn:aws:ec2:us-west-2:*:instance/*", "arn:aws:ec2:us-east-1:1:instance/i-0abc")
    assert arn_matches("arn:aws:ec2:us-east-1::image/*", "arn:aws:ec2:us-east-1::image/ami-1")


# --- combining values, keys and operators ------------------------------------------------------------------


def test_values_are_ored_keys_and_operators_anded():
    statement = _allow(condition={
        "StringEquals": {"aws:RequestTag/env": ["dev", "test"], "aws:RequestTag/team": "payments"},
        "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}})
    ok = {"aws:RequestTag/env": ("test",), "aws:RequestTag/team": ("payments",),
          "aws:RequestTag/karpenter.sh/nodepool": ("general",)}
    assert evaluate(_policy(statement), Request("ec2:RunInstances", "*", ok)).allowed
    for missing in ok:
        context = {k: v for k, v in ok.items() if k != missing}
        decision = evaluate(_policy(statement), Request("ec2:RunInstances", "*", context))
        assert not decision.allowed and decision.statement == "p/A" and missing in decision.reason


# --- evaluation logic -----------------------------------------------------------------------------------------


def test_explicit_deny_beats_allow_and_default_is_deny():
    deny = {"Sid": "D", "Effect": "Deny", "Action": "ec2:*", "Resource": "*",
            "Condition": {"StringNotEquals": {"aws:RequestedRegion": "us-east-1"}}}
    policies = _policy(_allow(action="ec2:Describe*"), deny)
    assert evaluate(policies, Request("ec2:DescribeInstances", "*", {"aws:RequestedRegion": ("us-east-1",)})).allowed
    denied = evaluate(policies, Request("ec2:DescribeInstances", "*", {"aws:RequestedRegion": ("eu-west-1",)}))
    assert (denied.allowed, denied.statement, denied.reason) == (False, "p/D", "explicitly denied")
    assert evaluate(policies, Request("iam:PassRole", "*")).reason == "no statement grants iam:PassRole"


def test_actions_are_case_insensitive_globs_and_not_action_inverts():
    assert evaluate(_policy(_allow(action="EC2:describe*")), Request("ec2:DescribeSubnets", "*")).allowed
    not_iam = {"Sid": "N", "Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}
    assert evaluate(_policy(not_iam), Request("ec2:RunInstances", "*")).allowed
    assert not evaluate(_policy(not_iam), Request("iam:PassRole", "*")).allowed


def test_denial_names_the_statement_whose_resource_did_not_match():
    statement = _allow(action="sqs:ReceiveMessage", resource="arn:aws:sqs:us-east-1:1:queue-a", sid="Q")
    decision = evaluate(_policy(statement), Request("sqs:ReceiveMessage", "arn:aws:sqs:us-east-1:1:queue-b"))
    assert decision.statement == "p/Q" and "Resource" in decision.reason


def test_tag_on_create_needs_create_action_and_request_tags():
    """EC2 user guide: tagging on create authorizes ec2:CreateTags with ec2:CreateAction = the creating API."""
    statement = _allow(action="ec2:CreateTags", resource="arn:aws:ec2:*:*:instance/*", condition={
        "StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}})
    context = {"ec2:CreateAction": ("CreateFleet",), **tag_context("aws:RequestTag", {"Name": "x"})}
    assert evaluate(_policy(statement), Request("ec2:CreateTags", "arn:aws:ec2:us-east-1:1:instance/*", context)).allowed
    context["ec2:CreateAction"] = ("CreateVolume",)
    assert not evaluate(_policy(statement), Request("ec2:CreateTags", "arn:aws:ec2:us-east-1:1:instance/*",
                                                    context)).allowed


def test_trust_policy_needs_the_principal():
    trust = {"trust": {"Version": V, "Statement": [{"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
                                                     "Action": ["sts:AssumeRole", "sts:TagSession"]}]}}
    role = "arn:aws:iam::1:role/r"
    assert evaluate(trust, Request("sts:AssumeRole", role, principal=("Service", "pods.eks.amazonaws.com")),
                    trust=True).allowed
    assert not evaluate(trust, Request("sts:AssumeRole", role, principal=("Service", "ec2.amazonaws.com")),
                        trust=True).allowed


def test_unknown_operators_and_versions_are_errors_never_silent_allows():
    statement = _allow(condition={"NumericLessThan": {"ec2:VolumeSize": "100"}})
    with pytest.raises(ValueError, match="not supported"):
        evaluate(_policy(statement), Request("ec2:RunInstances", "*", {"ec2:VolumeSize": ("20",)}))
    with pytest.raises(ValueError, match="2012-10-17"):
        evaluate({"p": {"Version": "2008-10-17", "Statement": [_allow()]}}, Request("ec2:RunInstances", "*"))
